//! `pinprove-bench filecoin --synthetic-inputs`: a Filecoin kind at any
//! sector size (32 GiB above all) through the engine, from synthetic inputs
//! and synthetic parameters made in memory. The real storage-proofs
//! circuits run at full size, so shapes and timings are production's; the
//! proofs do not verify, and the report says so.
//!
//! Measured, in order: one partition synthesized alone (its shape,
//! densities and aux values); a first proof (cold pool); then a stream of
//! proofs submitted at once (seconds per proof, proofs per hour, peak RSS,
//! GPU utilization while partitions waited), optionally with a WinningPoSt
//! submitted into the stream.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::utilization::Utilization;
use anyhow::{Context, Result, ensure};
use pinprove_engine::{EngineConfig, PartitionResult, Phase};
use pinprove_filecoin::shapes::ShapeCache;
use pinprove_filecoin::synthetic;
use pinprove_filecoin::{FilecoinProver, ParamCache, ProofKind};
use pinprove_mem::{BudgetConfig, sys};
use pinprove_stack::{Stack, StackConfig};
use serde::Serialize;

use crate::report::{DeviceShare, Host, NVML_LAG, bytes, dur, median};

mod device;
mod print;
mod profile;
pub(crate) mod waits;

use device::{DevicePhases, device_phases, shared_note};
pub use print::print;
use profile::PartitionProfile;
use waits::{completed, wait_for_recording, winnings_during};

/// What `--synthetic-inputs` takes beyond the kind and size.
#[derive(clap::Args, Debug, Clone)]
pub struct SyntheticArgs {
    /// Proofs submitted at once after the first (0: the first alone).
    #[arg(long, default_value_t = 2)]
    pub stream: usize,
    /// Also submit WinningPoSts of the same sector size into the stream, one
    /// after another (the first once partitions are on the device, each
    /// next `--winning-interval` seconds after the last ended, while the
    /// stream lasts), and time each: N of them (1 without a value).
    #[arg(long, num_args = 0..=1, default_missing_value = "1", value_name = "N")]
    pub winning_during: Option<usize>,
    /// Seconds between the WinningPoSts of `--winning-during N`.
    #[arg(long, default_value_t = 4.0)]
    pub winning_interval: f64,
    /// Cap on partitions synthesizing at once (default: what the budget admits).
    #[arg(long)]
    pub max_concurrent_syntheses: Option<usize>,
    /// Synthesis workers (default: the engine's).
    #[arg(long)]
    pub synthesis_workers: Option<usize>,
    /// Memory budget: "auto" or a size such as 100GiB.
    #[arg(long, default_value = "auto")]
    pub budget: BudgetConfig,
    /// How pinned pool buffers are page-locked: host-alloc, register or register-whole.
    #[arg(long, default_value_t = pinprove_mem::PinMethod::default())]
    pub pinning: pinprove_mem::PinMethod,
    /// Do not synthesize one partition alone first (its profile is
    /// omitted): saves a synthesis's time where the profile is known.
    #[arg(long)]
    pub skip_alone: bool,
    /// Stop after one partition synthesized alone (its shape, densities and
    /// values): what a machine without a GPU can measure at 32 GiB.
    #[arg(long)]
    pub profile_only: bool,
    /// Write the stream's timeline as an SVG chart here.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Where counted circuit shapes persist (default: pinprove's cache
    /// directory), so that a circuit's shape is counted once per machine.
    #[arg(long)]
    pub shape_cache: Option<PathBuf>,
    /// With --precompiled: record the circuit before the first proof (from
    /// a copy of one partition), so that every proof runs pre-compiled.
    #[arg(long)]
    pub record_first: bool,
    /// With --precompiled and --hints-dir: record the circuit into the
    /// hints directory and stop (no parameters, no proof), so that later
    /// runs there start from the recording (scripts/gpu-check's first call).
    #[arg(long)]
    pub record_only: bool,
    /// Where capacity hints and circuit recordings persist (the daemon's
    /// hints directory): a run after another of the same circuit loads its
    /// recording instead of recording it again. Default: in memory only.
    #[arg(long)]
    pub hints_dir: Option<PathBuf>,
    /// Pieces of proofs queued on one GPU at once (native backend).
    #[arg(long, default_value_t = pinprove_stack::NativeOptions::default().queue_depth)]
    pub queue_depth: usize,
    /// Threads of the native backend that prepare background proofs'
    /// scalars and add up their results (0: half the CPUs); they compete
    /// with synthesis for the cores.
    #[arg(long, default_value_t = pinprove_stack::NativeOptions::default().prep_threads)]
    pub prep_threads: usize,
    /// Background partitions whose l, a and b MSMs read streamed bases
    /// together (native backend; 1: each its own).
    #[arg(long, default_value_t = pinprove_stack::NativeOptions::default().partitions_sharing_bases)]
    pub partitions_sharing_bases: usize,
    /// The most memory pinprove takes of each GPU ("15GiB": a 16 GB card's
    /// capacity on a larger one; default: what the GPU has free).
    #[arg(long, value_parser = pinprove_mem::parse_bytes)]
    pub gpu_memory_limit: Option<u64>,
    /// The kernel that sums full-width scalars (native backend): `sppark`
    /// (the default) or `tables` (pinprove's, off by default until a
    /// passing `scripts/gpu-check` line runs it; `GPU_CHECK_ARGS` passes this).
    #[arg(long, default_value_t = pinprove_stack::NativeOptions::default().msm_kernel)]
    pub msm_kernel: pinprove_cuda::MsmKernelKind,
}

#[derive(Serialize)]
pub struct SyntheticReport {
    benchmark: &'static str,
    host: Host,
    kind: &'static str,
    sector_size: u64,
    circuit: String,
    backend: &'static str,
    /// The native backend's settings the run used (see
    /// `pinprove_stack::NativeOptions::settings`).
    gpu_settings: String,
    /// Always true: the proofs do not verify.
    synthetic: bool,
    request_s: f64,
    /// Counting the parameters' shape from the blank circuit.
    register_s: f64,
    /// Making the synthetic parameters in memory (and uploading them).
    params_s: f64,
    params_bytes: u64,
    budget_bytes: u64,
    /// Absent with `--skip-alone`.
    partition: Option<PartitionProfile>,
    /// Absent with `--profile-only`.
    proving: Option<Proving>,
}

/// Proofs through the engine: the first (cold pool), then a stream.
#[derive(Serialize)]
pub struct Proving {
    partitions: usize,
    first_proof_s: f64,
    first_proof_synthesis_median_s: f64,
    first_proof_device: Option<DevicePhases>,
    first_proof_peak_rss_bytes: Option<u64>,
    stream: usize,
    stream_wall_s: f64,
    seconds_per_proof: f64,
    proofs_per_hour: f64,
    stream_synthesis_median_s: f64,
    stream_synthesis_max_s: f64,
    stream_admission_median_s: f64,
    stream_handoff_median_s: f64,
    device_busy_fraction: f64,
    gpu_utilization_percent: Option<f64>,
    backlog_s: f64,
    gpu_utilization_backlog_percent: Option<f64>,
    /// Each device's share of the stream.
    per_device: Vec<DeviceShare>,
    /// The slowest of the WinningPoSts submitted among the partitions, and
    /// each of them.
    winning_during_s: Option<f64>,
    winning_during_all_s: Vec<f64>,
    /// With `--winning-during`: one WinningPoSt proved alone first, the
    /// circuit type's first in this process (what the ones during the
    /// proofs no longer pay: their preparation sizes, hints and scratch
    /// buffers, which a restarted daemon has from its hints).
    winning_alone_s: Option<f64>,
    /// The stream's last partition on the GPU.
    stream_device: Option<DevicePhases>,
    /// The memory budget when it was fullest in the stream, by holder.
    stream_budget: crate::budget_watch::BudgetSample,
    /// The most partitions at the device at once in the stream (waiting
    /// for it, or in either step).
    stream_most_at_device: usize,
    /// How the circuit's partitions were synthesized: mode at the end, and
    /// partitions each way over the whole run.
    synthesis_mode: String,
    precompiled_partitions: u64,
    classic_partitions: u64,
    /// Of the pre-compiled partitions, those whose witness the direct
    /// replicas of this kind computed instead of the circuit's gadgets
    /// (WinningPoSts submitted into the stream are counted apart).
    direct_witnesses: u64,
    /// Waiting after the first proof for the circuit's recording.
    recording_wait_s: f64,
    /// With --record-first: recording the circuit before the first proof.
    record_first_s: Option<f64>,
    peak_rss_bytes: Option<u64>,
    pool_fresh_bytes: u64,
    pool_alloc_s: f64,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn median_of(results: &[PartitionResult], phase: Phase) -> f64 {
    let mut v: Vec<Duration> = results.iter().map(|r| r.timings.get(phase)).collect();
    if v.is_empty() { 0.0 } else { secs(median(&mut v)) }
}

pub fn measure(
    kind: ProofKind,
    sector_size: u64,
    backend: pinprove_stack::BackendKind,
    devices: &pinprove_stack::DeviceSelection,
    args: &SyntheticArgs,
    precompiled: bool,
) -> Result<SyntheticReport> {
    let t = Instant::now();
    let req = synthetic::request(kind, sector_size, 1)?;
    let request_s = secs(t.elapsed());
    eprintln!(
        "synthetic {kind} request for {} made in {:.1} s",
        bytes(sector_size),
        request_s
    );

    let native = pinprove_stack::NativeOptions {
        queue_depth: args.queue_depth,
        prep_threads: args.prep_threads,
        memory_limit: args.gpu_memory_limit,
        partitions_sharing_bases: args.partitions_sharing_bases,
        msm_kernel: args.msm_kernel,
        ..Default::default()
    };
    let stack = Stack::build(&StackConfig {
        backend,
        devices: devices.clone(),
        budget: args.budget.clone(),
        pinning: args.pinning,
        native,
        ..StackConfig::default()
    })?;
    let backend_name = stack.devices[0].backend.name();
    let defaults = EngineConfig::default();
    let engine = stack.engine(EngineConfig {
        synthesis_workers: args.synthesis_workers.unwrap_or(defaults.synthesis_workers),
        max_concurrent_syntheses: args.max_concurrent_syntheses,
        precompiled,
        hints_dir: args.hints_dir.clone(),
        ..defaults
    })?;
    let prover = FilecoinProver::for_synthetic_inputs(
        Arc::new(engine),
        ParamCache::from_env(),
        Some(ShapeCache::new(
            args.shape_cache
                .clone()
                .unwrap_or_else(crate::params_cache::pinprove_cache_dir),
        )),
    );
    let engine = Arc::clone(prover.engine());
    let circuit = pinprove_filecoin::kind::circuit_id(kind, sector_size)?;
    let t = Instant::now();
    prover.register(&circuit)?;
    let register_s = secs(t.elapsed());
    // A profile needs only the parameters' shape: no points (they would not
    // fit beside a 32 GiB partition on a small machine).
    if args.record_only {
        ensure!(
            precompiled && args.hints_dir.is_some(),
            "--record-only needs --precompiled and --hints-dir (where the recording is kept)"
        );
        let s = waits::record_ahead(&prover, &req, &circuit)?;
        eprintln!("{circuit}: recorded in {s:.1} s into the hints directory (--record-only: no parameters, no proof)");
    }
    let (_, params_load) = if args.profile_only || args.record_only {
        (false, Duration::ZERO)
    } else {
        engine.preload_srs(&circuit)?
    };
    // Host bytes, or (when every device holds the bases and the host points
    // were freed) the devices' copy: this is the only SRS loaded yet.
    let host = engine
        .status()
        .srs
        .iter()
        .find(|s| s.circuit_id == circuit)
        .map_or(0, |s| s.bytes);
    let device: u64 = stack
        .devices
        .iter()
        .flat_map(|d| d.backend.resident_srs())
        .filter(|r| r.place == "device")
        .map(|r| r.bytes)
        .max()
        .unwrap_or(0);
    let params_bytes = host.max(device);
    eprintln!(
        "{circuit}: shape counted in {register_s:.1} s, synthetic parameters ({}) made in {}",
        bytes(params_bytes),
        dur(params_load)
    );

    // One partition alone, outside the engine.
    ensure!(
        !(args.skip_alone && args.profile_only),
        "--profile-only measures the partition --skip-alone skips"
    );
    let partition = (!args.skip_alone && !args.record_only)
        .then(|| profile::partition_alone(&prover, &stack, &req, &circuit, precompiled))
        .transpose()?;
    if let Some(p) = &partition {
        let heap = |b: Option<u64>| b.map_or("?".into(), bytes);
        eprintln!(
            "heap held beyond the pool's buffers at the peak: synthesis {}, witness only {}",
            heap(p.synthesis_heap_bytes),
            heap(p.precompiled.as_ref().and_then(|pc| pc.witness_heap_bytes))
        );
        eprintln!(
            "one partition alone: {} constraints, synthesized in {:.1} s; aux values 0 {:.1}%, 1 {:.1}%, small {:.1}%",
            p.constraints,
            p.synthesis_alone_s,
            100.0 * p.aux_zero,
            100.0 * p.aux_one,
            100.0 * p.aux_small
        );
    }

    let report = |proving| SyntheticReport {
        benchmark: "filecoin-synthetic",
        host: Host::detect(),
        kind: kind.name(),
        sector_size,
        circuit: circuit.clone(),
        backend: backend_name,
        gpu_settings: native.settings(),
        synthetic: true,
        request_s,
        register_s,
        params_s: secs(params_load),
        params_bytes,
        budget_bytes: stack.budget.total(),
        partition,
        proving,
    };
    if args.profile_only || args.record_only {
        return Ok(report(None));
    }

    // A WinningPoSt to submit among the partitions of the last proofs
    // measured: the stream's, or the first proof's when there is no stream.
    let winning_n = args.winning_during.unwrap_or(0);
    ensure!(
        args.winning_interval.is_finite() && args.winning_interval >= 0.0,
        "--winning-interval must be a number of seconds"
    );
    let mut winning = if winning_n > 0 {
        let w = synthetic::request(ProofKind::WinningPoSt, sector_size, 2)?;
        let id = pinprove_filecoin::kind::circuit_id(ProofKind::WinningPoSt, sector_size)?;
        prover.register(&id)?;
        // Its parameters are loaded, as a daemon preloads them: what is timed
        // is the proof among the other partitions.
        engine.preload_srs(&id)?;
        Some(w)
    } else {
        None
    };
    let interval = Duration::from_secs_f64(args.winning_interval);
    let winning_alone_s = match &winning {
        Some(w) => {
            let t = Instant::now();
            let sub = prover.submit_prepared(prover.prepare(w)?)?;
            completed(&prover, &sub)?;
            let s = secs(t.elapsed());
            eprintln!("the first WinningPoSt of this process, alone: {s:.2} s");
            Some(s)
        }
        None => None,
    };

    let mut record_first_s = None;
    if args.record_first {
        ensure!(precompiled, "--record-first needs --precompiled");
        let s = waits::record_ahead(&prover, &req, &circuit)?;
        eprintln!("{circuit}: recorded before the first proof in {s:.1} s");
        record_first_s = Some(s);
    }

    // The first proof, on a cold pool.
    let _ = sys::reset_peak_rss();
    let pool_before = stack.pool.stats();
    let t = Instant::now();
    let first_sub = prover.submit(&req)?;
    let mut winning_s = Vec::new();
    let first = if args.stream == 0
        && let Some(w) = winning.take()
    {
        let (first, w) = winnings_during(&prover, &w, winning_n, interval, t, || completed(&prover, &first_sub))?;
        winning_s = w;
        first
    } else {
        completed(&prover, &first_sub)?
    };
    let first_proof_s = secs(t.elapsed());
    let first_proof_peak = sys::peak_rss_bytes();
    let first_proof_device = device_phases(&stack);
    let partitions = first.len();
    eprintln!(
        "first proof: {partitions} partitions in {first_proof_s:.1} s (synthesis median {:.1} s); peak RSS so far {}",
        median_of(&first, Phase::Synthesis),
        sys::peak_rss_bytes().map_or("?".into(), bytes)
    );
    if let Some(d) = &first_proof_device {
        eprintln!(
            "  GPU, last partition: upload {:.3} s ({:.1} GB/s), h {:.3} s, device {:.3} s, preparation {:.3} s in start + {:.3} s ahead, MSMs {:?}{}",
            d.upload_s,
            d.upload_gbps,
            d.h_s,
            d.device_s,
            d.preparation_s,
            d.prepared_ahead_s,
            d.msm
                .iter()
                .map(|m| (m.0.as_str(), (m.1 * 1000.0).round() / 1000.0))
                .collect::<Vec<_>>(),
            shared_note(d.bases_shared_by)
        );
    }

    let t = Instant::now();
    if precompiled {
        // The recording started with the first proof; the stream is what
        // it speeds up.
        wait_for_recording(&engine)?;
        eprintln!("recording ready {:.1} s after the first proof", secs(t.elapsed()));
    }
    let recording_wait_s = secs(t.elapsed());

    // A stream of proofs submitted at once (and a WinningPoSt into it).
    let _ = sys::reset_peak_rss();
    let watch = crate::budget_watch::BudgetWatch::start(Arc::clone(&engine), Duration::from_millis(250));
    let started = Instant::now();
    let subs = (0..args.stream)
        .map(|_| prover.submit(&req))
        .collect::<Result<Vec<_>, _>>()?;
    let all = || -> Result<Vec<PartitionResult>> {
        let mut results = Vec::new();
        for s in &subs {
            results.extend(completed(&prover, s)?);
        }
        Ok(results)
    };
    let results = match winning.take() {
        Some(w) => {
            let (results, w) = winnings_during(&prover, &w, winning_n, interval, started, all)?;
            winning_s = w;
            results
        }
        None => all()?,
    };
    let wall = started.elapsed();
    let (stream_budget, stream_most_at_device) = watch.stop();
    let peak = sys::peak_rss_bytes();
    let pool_after = stack.pool.stats();
    let jobs: Vec<_> = subs.iter().map(|s| s.job).collect();
    let u = Utilization::of_jobs(engine.timeline(), &jobs, NVML_LAG);
    if let Some(p) = &args.timeline {
        std::fs::write(p, engine.timeline().svg()).with_context(|| format!("writing {}", p.display()))?;
    }
    let stream_device = device_phases(&stack);
    let synthesis = engine.status().synthesis.into_iter().find(|c| c.circuit_id == circuit);
    let direct_witnesses = pinprove_filecoin::direct::witnesses_computed(kind);
    if let Some(c) = &synthesis {
        eprintln!(
            "synthesis of {circuit}: {:?} now; {} partitions pre-compiled ({} witnesses computed directly), {} classic",
            c.mode, c.precompiled_partitions, direct_witnesses, c.classic_partitions
        );
    }
    let mut synth: Vec<Duration> = results.iter().map(|r| r.timings.get(Phase::Synthesis)).collect();
    let n = args.stream.max(1) as f64;
    Ok(report(Some(Proving {
        partitions,
        first_proof_s,
        first_proof_synthesis_median_s: median_of(&first, Phase::Synthesis),
        first_proof_device,
        first_proof_peak_rss_bytes: first_proof_peak,
        stream: args.stream,
        stream_wall_s: secs(wall),
        seconds_per_proof: secs(wall) / n,
        proofs_per_hour: if args.stream == 0 { 0.0 } else { n / secs(wall) * 3600.0 },
        stream_synthesis_median_s: if synth.is_empty() {
            0.0
        } else {
            secs(median(&mut synth))
        },
        stream_synthesis_max_s: synth.iter().max().map_or(0.0, |d| secs(*d)),
        stream_admission_median_s: median_of(&results, Phase::Admission),
        stream_handoff_median_s: median_of(&results, Phase::HandoffWait),
        device_busy_fraction: u.device_busy,
        gpu_utilization_percent: u.gpu_percent,
        backlog_s: secs(u.backlog),
        gpu_utilization_backlog_percent: u.backlog_gpu_percent,
        per_device: DeviceShare::of_jobs(
            engine.timeline(),
            &jobs,
            &stack.devices.iter().map(|d| d.id.to_string()).collect::<Vec<_>>(),
        ),
        winning_during_s: winning_s.iter().copied().reduce(f64::max),
        winning_during_all_s: winning_s,
        winning_alone_s,
        stream_device,
        stream_budget,
        stream_most_at_device,
        synthesis_mode: synthesis.as_ref().map_or("classic".into(), |c| format!("{:?}", c.mode)),
        precompiled_partitions: synthesis.as_ref().map_or(0, |c| c.precompiled_partitions),
        classic_partitions: synthesis.as_ref().map_or(0, |c| c.classic_partitions),
        direct_witnesses,
        recording_wait_s,
        record_first_s,
        peak_rss_bytes: peak,
        pool_fresh_bytes: pool_after.allocated_bytes.saturating_sub(pool_before.allocated_bytes),
        pool_alloc_s: secs(pool_after.alloc_time.saturating_sub(pool_before.alloc_time)),
    })))
}
