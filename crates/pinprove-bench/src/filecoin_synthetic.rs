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

use anyhow::{Context, Result, bail, ensure};
#[cfg(feature = "cuda")]
use pinprove_engine::assembly::BuiltBackend;
use pinprove_engine::assembly::{Stack, StackConfig};
use pinprove_engine::timeline::analysis::Utilization;
use pinprove_engine::{EngineConfig, JobOutcome, PartitionResult, Phase, SynthesisContext};
use pinprove_filecoin::shapes::ShapeCache;
use pinprove_filecoin::synthetic;
use pinprove_filecoin::{FilecoinProver, ParamCache, ProofKind, Submission};
use pinprove_groth16::Scalar;
use pinprove_mem::{BudgetConfig, sys};
use serde::Serialize;

#[cfg(feature = "cuda")]
use crate::report::gbps;
use crate::report::{DeviceShare, Host, NVML_LAG, bytes, dur, median};

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
    /// Pieces of proofs queued on one GPU at once (native backend).
    #[arg(long, default_value_t = pinprove_engine::assembly::NativeOptions::default().queue_depth)]
    pub queue_depth: usize,
    /// Threads of the native backend that prepare background proofs'
    /// scalars and add up their results (0: half the CPUs); they compete
    /// with synthesis for the cores.
    #[arg(long, default_value_t = pinprove_engine::assembly::NativeOptions::default().prep_threads)]
    pub prep_threads: usize,
    /// Background partitions whose l, a and b MSMs read streamed bases
    /// together (native backend; 1: each its own).
    #[arg(long, default_value_t = pinprove_engine::assembly::NativeOptions::default().partitions_sharing_bases)]
    pub partitions_sharing_bases: usize,
    /// The most memory pinprove takes of each GPU ("15GiB": a 16 GB card's
    /// capacity on a larger one; default: what the GPU has free).
    #[arg(long, value_parser = pinprove_mem::parse_bytes)]
    pub gpu_memory_limit: Option<u64>,
}

/// One partition, synthesized alone.
#[derive(Serialize)]
pub struct PartitionProfile {
    constraints: usize,
    inputs: usize,
    aux: usize,
    /// Aux variables A uses, inputs and aux variables B uses.
    a_aux_density: usize,
    b_input_density: usize,
    b_aux_density: usize,
    /// Shares of the aux values: 0, 1, below 2^64 (else), the rest.
    aux_zero: f64,
    aux_one: f64,
    aux_small: f64,
    aux_large: f64,
    abc_bytes: u64,
    aux_bytes: u64,
    synthesis_alone_s: f64,
    /// Heap the synthesis held at its peak beyond the pool buffers it
    /// pinned (see [`HeapWatch`]); absent where the kernel does not say.
    synthesis_heap_bytes: Option<u64>,
    /// With --precompiled: the same partition's circuit recorded, then
    /// synthesized from the recording (witness only).
    precompiled: Option<PrecompiledProfile>,
}

/// The heap a synthesis holds at its peak beyond the pool buffers it pins:
/// the process's peak resident memory over the synthesis, less what was
/// resident before and what the pool allocated meanwhile (its buffers are
/// resident once allocated). The heap's free pages are given back first:
/// a synthesis reusing what an earlier phase freed (counting the shape of a
/// WindowPoSt's blank circuit leaves gigabytes) would not grow the resident
/// set. What admission does not count unless the partition declares it
/// (`Partition::heap_bytes`). Only meaningful with nothing else running,
/// as in the profile.
struct HeapWatch {
    growth: sys::PeakGrowth,
    pool_bytes: u64,
}

impl HeapWatch {
    fn start(pool: &pinprove_mem::PinnedPool) -> Self {
        sys::trim_heap();
        HeapWatch {
            growth: sys::PeakGrowth::start(),
            pool_bytes: pool.stats().allocated_bytes,
        }
    }

    fn finish(self, pool: &pinprove_mem::PinnedPool) -> Option<u64> {
        let pinned = pool.stats().allocated_bytes.saturating_sub(self.pool_bytes);
        Some(self.growth.bytes()?.saturating_sub(pinned))
    }
}

/// A partition's circuit pre-compiled, alone on the host.
#[derive(Serialize)]
pub struct PrecompiledProfile {
    record_s: f64,
    recording_bytes: u64,
    nonzero_entries: usize,
    coefficients: usize,
    /// Witness-only synthesis, into pool buffers.
    witness_s: f64,
    witness_bytes: u64,
    /// Heap the witness-only synthesis held at its peak beyond its pool
    /// buffers.
    witness_heap_bytes: Option<u64>,
    /// a/b/c from the recording on the host's cores (what the GPU does
    /// with the native backend); absent where they would not fit in memory.
    host_evaluation_s: Option<f64>,
}

/// The GPU's phases of the last partition proved (native backend).
#[derive(Serialize)]
pub struct DevicePhases {
    /// a/b/c's upload, or the witness's for a pre-compiled circuit.
    upload_s: f64,
    upload_gbps: f64,
    upload_bytes: u64,
    /// Computing a/b/c from a pre-compiled circuit's matrices (part of h).
    evaluation_s: f64,
    /// NTTs and the quotient.
    h_s: f64,
    /// Each MSM: name, seconds, bases, bases per second, bases through
    /// Pippenger (the rest had 0, 1 or small scalars).
    msm: Vec<(String, f64, usize, f64, usize)>,
    device_s: f64,
    /// Host work in `start` before the device (see `NativePhases`).
    preparation_s: f64,
    /// Scalar preparation on the synthesis thread, ahead of `start`.
    prepared_ahead_s: f64,
    /// Partitions whose l, a and b MSMs read the same streamed bases (their
    /// times above are this partition's share); 1 when its own.
    bases_shared_by: usize,
}

#[derive(Serialize)]
pub struct SyntheticReport {
    benchmark: &'static str,
    host: Host,
    kind: &'static str,
    sector_size: u64,
    circuit: String,
    backend: &'static str,
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
    /// Of the pre-compiled partitions, those whose witness was computed by
    /// the direct PoRep witness generator instead of the circuit's gadgets.
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

/// Shares of aux values that are 0, 1, other values below 2^64, the rest.
fn value_classes(aux: &[Scalar]) -> [f64; 4] {
    use rayon::prelude::*;
    let counts = aux
        .par_iter()
        .fold(
            || [0usize; 4],
            |mut c, v| {
                let b = v.to_bytes_le();
                let small = b[8..].iter().all(|&x| x == 0);
                let low = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                c[match (small, low) {
                    (true, 0) => 0,
                    (true, 1) => 1,
                    (true, _) => 2,
                    (false, _) => 3,
                }] += 1;
                c
            },
        )
        .reduce(|| [0; 4], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]);
    let n = aux.len().max(1) as f64;
    counts.map(|c| c as f64 / n)
}

#[cfg(feature = "cuda")]
fn device_phases(stack: &Stack) -> Option<DevicePhases> {
    let p = stack.backends.iter().find_map(|b| match b {
        BuiltBackend::Gpu(pinprove_cuda::GpuBackend::Native(n)) => n.last_phases(),
        _ => None,
    })?;
    let msm = p
        .msm
        .iter()
        .zip(pinprove_cuda::NativePhases::MSM_NAMES)
        .zip(p.pippenger_points)
        .map(|(((t, n), name), pip)| {
            let rate = if t.is_zero() { 0.0 } else { *n as f64 / secs(*t) };
            (name.to_string(), secs(*t), *n, rate, pip)
        })
        .collect();
    let upload_bytes = p.abc_bytes + p.witness_bytes;
    Some(DevicePhases {
        upload_s: secs(p.upload),
        upload_gbps: gbps(upload_bytes, p.upload),
        upload_bytes,
        evaluation_s: secs(p.evaluation),
        h_s: secs(p.h),
        msm,
        device_s: secs(p.device()),
        preparation_s: secs(p.preparation),
        prepared_ahead_s: secs(p.prepared_ahead),
        bases_shared_by: p.bases_shared_by.max(1),
    })
}

/// What a report says of partitions sharing streamed bases.
fn shared_note(shared_by: usize) -> String {
    if shared_by > 1 {
        format!("; l, a and b over bases streamed once for {shared_by} partitions (each one's share)")
    } else {
        String::new()
    }
}

/// Without the `cuda` feature there is no device to report on.
#[cfg(not(feature = "cuda"))]
fn device_phases(_: &Stack) -> Option<DevicePhases> {
    None
}

/// Submits the prepared WinningPoSt once partitions submitted since
/// `started` are on a device, and times it to its end.
fn winning_into(prover: &FilecoinProver, w: pinprove_filecoin::PreparedProof, started: Instant) -> Result<f64> {
    let engine = prover.engine();
    while engine.status().devices.iter().all(|d| d.in_flight == 0) && started.elapsed() < Duration::from_secs(1200) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let sub = prover.submit_prepared(w)?;
    let results = completed(prover, &sub)?;
    let s = secs(t.elapsed());
    eprintln!("a WinningPoSt submitted while other partitions were being proved: done in {s:.2} s");
    for r in &results {
        let p = &r.timings;
        eprintln!(
            "  its partition {}: admission {:.3} s, synthesis {:.3} s, wait for a device worker {:.3} s, start {:.3} s, \
             wait for a finalizer {:.3} s, finish {:.3} s",
            r.index,
            secs(p.queue_wait + p.budget_wait + p.srs_load),
            secs(p.synthesis),
            secs(p.handoff_wait),
            secs(p.start),
            secs(p.finish_wait),
            secs(p.finish)
        );
    }
    Ok(s)
}

/// Runs `proofs` (which waits for the measured proofs) while up to `n`
/// WinningPoSts of the request `w` are submitted among their partitions,
/// one after another, `interval` apart, until `proofs` returns; gives its
/// result and each WinningPoSt's time.
fn winnings_during<T: Send>(
    prover: &FilecoinProver,
    w: &pinprove_filecoin::ProofRequest,
    n: usize,
    interval: Duration,
    started: Instant,
    proofs: impl FnOnce() -> Result<T> + Send,
) -> Result<(T, Vec<f64>)> {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let winnings = scope.spawn(|| -> Result<Vec<f64>> {
            let mut times = Vec::new();
            for i in 0..n {
                if i > 0 {
                    let until = Instant::now() + interval;
                    while Instant::now() < until && !done.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                times.push(winning_into(prover, prover.prepare(w)?, started)?);
            }
            Ok(times)
        });
        let result = proofs();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let times = winnings
            .join()
            .map_err(|_| anyhow::anyhow!("the WinningPoSt thread panicked"))??;
        Ok((result?, times))
    })
}

/// Waits until the engine is quiet: its circuit recording (started ahead,
/// or by the first proof) is made.
fn wait_for_recording(engine: &pinprove_engine::Engine) -> Result<()> {
    ensure!(
        engine.wait_quiet(Duration::from_secs(1800)),
        "the circuit's recording did not finish"
    );
    Ok(())
}

/// Waits for a submission and checks it completed (its proof cannot
/// verify: `finish` does not try).
fn completed(prover: &FilecoinProver, sub: &Submission) -> Result<Vec<PartitionResult>> {
    match prover.engine().wait(sub.job, None)? {
        JobOutcome::Completed(r) => Ok(r),
        other => bail!("{} job {} ended {other:?}", sub.kind, sub.job),
    }
}

pub fn measure(
    kind: ProofKind,
    sector_size: u64,
    backend: pinprove_engine::assembly::BackendKind,
    devices: &pinprove_engine::assembly::DeviceSelection,
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

    let stack = Stack::build(&StackConfig {
        backend,
        devices: devices.clone(),
        budget: args.budget.clone(),
        pinning: args.pinning,
        native: pinprove_engine::assembly::NativeOptions {
            queue_depth: args.queue_depth,
            prep_threads: args.prep_threads,
            memory_limit: args.gpu_memory_limit,
            partitions_sharing_bases: args.partitions_sharing_bases,
            ..Default::default()
        },
        ..StackConfig::default()
    })?;
    let backend_name = stack.devices[0].backend.name();
    let defaults = EngineConfig::default();
    let engine = stack.engine(EngineConfig {
        synthesis_workers: args.synthesis_workers.unwrap_or(defaults.synthesis_workers),
        max_concurrent_syntheses: args.max_concurrent_syntheses,
        precompiled,
        ..defaults
    })?;
    let prover = FilecoinProver::for_synthetic_inputs(
        Arc::new(engine),
        ParamCache::from_env(),
        Some(ShapeCache::new(
            args.shape_cache
                .clone()
                .unwrap_or_else(pinprove::params_cache::pinprove_cache_dir),
        )),
    );
    let engine = Arc::clone(prover.engine());
    let circuit = pinprove_filecoin::kind::circuit_id(kind, sector_size)?;
    let t = Instant::now();
    prover.register(&circuit)?;
    let register_s = secs(t.elapsed());
    // A profile needs only the parameters' shape: no points (they would not
    // fit beside a 32 GiB partition on a small machine).
    let (_, params_load) = if args.profile_only {
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
    let partition = (!args.skip_alone).then(|| -> Result<PartitionProfile> {
        let mut parts = prover.prepare(&req)?.into_partitions();
        ensure!(!parts.is_empty(), "the request has no partitions");
        let part = parts.swap_remove(0);
        let copies = if precompiled {
            let copy = || {
                part.fresh_circuit()
                    .context("this kind's partitions are not pre-compiled (they stay classic)")
            };
            Some((copy()?, copy()?))
        } else {
            None
        };
        drop(parts);
        let hint = engine.circuit_shape(&circuit)?;
        let funds = stack
            .budget
            .acquire_blocking(hint.abc_bytes() + hint.assignment_bytes())
            .context("memory for one partition")?;
        let layout = stack.devices[0].backend.capabilities().abc_layout;
        let heap = HeapWatch::start(&stack.pool);
        let t = Instant::now();
        let (asg, _) = part.synthesize(SynthesisContext {
            circuit_id: &circuit,
            pool: &stack.pool,
            hints: engine.hints(),
            layout,
            funds,
            shape: Some(hint),
        })?;
        let alone = t.elapsed();
        let synthesis_heap_bytes = heap.finish(&stack.pool);
        let [zero, one, small, large] = value_classes(asg.aux());
        let (constraints, inputs, aux) = (asg.num_constraints(), asg.num_inputs(), asg.num_aux());
        let densities = [
            asg.a_aux_density().total(),
            asg.b_input_density().total(),
            asg.b_aux_density().total(),
        ];
        drop(asg);
        // The recording is not in the budget: give the classic buffers back.
        stack.pool.shrink(u64::MAX);
        let precompiled = copies
            .map(|(to_record, to_prove)| -> Result<PrecompiledProfile> {
                let t = Instant::now();
                let rec = to_record.record(&circuit)?;
                let record_s = secs(t.elapsed());
                let stats = rec.stats();
                eprintln!(
                    "recorded in {record_s:.1} s: {} non-zero entries, {} coefficients, {}",
                    stats.nnz.iter().sum::<usize>(),
                    stats.coefficients,
                    bytes(stats.bytes)
                );
                let heap = HeapWatch::start(&stack.pool);
                let t = Instant::now();
                let w = to_prove.synthesize_witness(&rec, &stack.pool, None)?;
                let witness_s = secs(t.elapsed());
                let witness_heap_bytes = heap.finish(&stack.pool);
                let witness_bytes = 32 * (w.inputs.len() + w.aux.len()) as u64;
                // a/b/c beside the recording and the witness, where they fit.
                let abc = 3 * 32 * constraints as u64;
                let room = stack.budget.total().saturating_sub(stats.bytes + witness_bytes);
                let host_evaluation_s = if abc <= room {
                    let t = Instant::now();
                    let evaluated = pinprove_groth16::precompiled::evaluate(&rec, w, &stack.pool, layout, &mut None)?;
                    let took = secs(t.elapsed());
                    drop(evaluated);
                    Some(took)
                } else {
                    eprintln!("a/b/c from the recording on the host: skipped (they would not fit beside it)");
                    None
                };
                eprintln!("witness only in {witness_s:.1} s");
                Ok(PrecompiledProfile {
                    record_s,
                    recording_bytes: stats.bytes,
                    nonzero_entries: stats.nnz.iter().sum(),
                    coefficients: stats.coefficients,
                    witness_s,
                    witness_bytes,
                    witness_heap_bytes,
                    host_evaluation_s,
                })
            })
            .transpose()?;
        Ok(PartitionProfile {
            constraints,
            inputs,
            aux,
            a_aux_density: densities[0],
            b_input_density: densities[1],
            b_aux_density: densities[2],
            aux_zero: zero,
            aux_one: one,
            aux_small: small,
            aux_large: large,
            abc_bytes: 3 * 32 * constraints as u64,
            aux_bytes: 32 * aux as u64,
            synthesis_alone_s: secs(alone),
            synthesis_heap_bytes,
            precompiled,
        })
    });
    let partition = partition.transpose()?;
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
        synthetic: true,
        request_s,
        register_s,
        params_s: secs(params_load),
        params_bytes,
        budget_bytes: stack.budget.total(),
        partition,
        proving,
    };
    if args.profile_only {
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
        let part = prover.prepare(&req)?.into_partitions().swap_remove(0);
        let t = Instant::now();
        ensure!(
            engine.precompile(&circuit, &*part),
            "{circuit}: its partitions cannot be pre-compiled"
        );
        drop(part);
        wait_for_recording(&engine)?;
        let s = secs(t.elapsed());
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
    let direct_witnesses = pinprove_filecoin::direct::porep::direct_witnesses();
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
            &stack.devices.iter().map(|d| d.name.clone()).collect::<Vec<_>>(),
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

pub fn print(r: &SyntheticReport) {
    println!(
        "pinprove-bench filecoin (synthetic inputs and parameters: the proofs do not verify) — {}",
        r.host.summary()
    );
    println!(
        "{} on the {} backend: request made in {:.1} s, shape counted in {:.1} s, parameters ({}) made in {:.1} s; budget {}",
        r.circuit,
        r.backend,
        r.request_s,
        r.register_s,
        bytes(r.params_bytes),
        r.params_s,
        bytes(r.budget_bytes)
    );
    if let Some(p) = &r.partition {
        println!(
            "  one partition: {} constraints, {} inputs, {} aux; densities A aux {}, B inputs {}, B aux {}; \
         aux values 0 {:.1}%, 1 {:.1}%, small {:.1}%, other {:.1}%; a/b/c {}, aux {}; synthesized alone in {:.1} s \
         (heap beyond its buffers {})",
            p.constraints,
            p.inputs,
            p.aux,
            p.a_aux_density,
            p.b_input_density,
            p.b_aux_density,
            100.0 * p.aux_zero,
            100.0 * p.aux_one,
            100.0 * p.aux_small,
            100.0 * p.aux_large,
            bytes(p.abc_bytes),
            bytes(p.aux_bytes),
            p.synthesis_alone_s,
            p.synthesis_heap_bytes.map_or("?".into(), bytes)
        );
        if let Some(pc) = &p.precompiled {
            println!(
                "  pre-compiled: recorded in {:.1} s ({} non-zero entries, {} coefficients, {}); witness only ({}, heap beyond \
                 them {}) in {:.1} s ({:.2}x the classic synthesis); a/b/c from the recording on the host: {}",
                pc.record_s,
                pc.nonzero_entries,
                pc.coefficients,
                bytes(pc.recording_bytes),
                bytes(pc.witness_bytes),
                pc.witness_heap_bytes.map_or("?".into(), bytes),
                pc.witness_s,
                p.synthesis_alone_s / pc.witness_s.max(1e-9),
                pc.host_evaluation_s
                    .map_or("not run (no room)".into(), |t| format!("{t:.1} s"))
            );
        }
    }
    let Some(r) = &r.proving else { return };
    println!(
        "  first proof: {} partitions in {:.1} s (synthesis median {:.1} s per partition), peak RSS {}",
        r.partitions,
        r.first_proof_s,
        r.first_proof_synthesis_median_s,
        r.first_proof_peak_rss_bytes.map_or("?".into(), bytes)
    );
    if let Some(d) = &r.first_proof_device {
        println!(
            "  GPU, last partition: upload {:.3} s ({:.1} GB/s), h {:.3} s, device {:.3} s, preparation {:.3} s{}",
            d.upload_s,
            d.upload_gbps,
            d.h_s,
            d.device_s,
            d.preparation_s,
            shared_note(d.bases_shared_by)
        );
        for (name, t, n, rate, pip) in &d.msm {
            println!(
                "    MSM {name}: {t:.3} s, {n} bases ({:.0} M/s), {pip} through Pippenger",
                rate / 1e6
            );
        }
    }
    if r.stream > 0 {
        println!(
            "  stream of {}: {:.1} s, {:.1} s per proof, {:.1} proofs per hour; synthesis median {:.1} s, max {:.1} s; \
             admission wait median {:.1} s, wait for the device median {:.1} s",
            r.stream,
            r.stream_wall_s,
            r.seconds_per_proof,
            r.proofs_per_hour,
            r.stream_synthesis_median_s,
            r.stream_synthesis_max_s,
            r.stream_admission_median_s,
            r.stream_handoff_median_s
        );
        println!(
            "  device busy {:.1}%, GPU utilization {}; partitions waited for the device {:.1} s, GPU utilization then {}",
            100.0 * r.device_busy_fraction,
            r.gpu_utilization_percent.map_or("n/a".into(), |g| format!("{g:.1}%")),
            r.backlog_s,
            r.gpu_utilization_backlog_percent
                .map_or("n/a".into(), |g| format!("{g:.1}%"))
        );
        DeviceShare::print(&r.per_device);
    }
    if let Some(d) = &r.stream_device {
        println!(
            "  GPU, the stream's last partition: upload {} in {:.3} s ({:.1} GB/s), a/b/c computed on the GPU in {:.3} s, h {:.3} s, device {:.3} s",
            bytes(d.upload_bytes),
            d.upload_s,
            d.upload_gbps,
            d.evaluation_s,
            d.h_s,
            d.device_s
        );
    }
    println!(
        "  synthesis: {} partitions pre-compiled ({} witnesses computed directly), {} classic (mode now {}); waited {:.1} s for the recording",
        r.precompiled_partitions, r.direct_witnesses, r.classic_partitions, r.synthesis_mode, r.recording_wait_s
    );
    if let Some(w) = r.winning_alone_s {
        println!("  the first WinningPoSt of the process, proved alone before: {w:.2} s");
    }
    if let Some(w) = r.winning_during_s {
        println!(
            "  WinningPoSts submitted while other partitions were proved: {} of them, the slowest {w:.2} s ({})",
            r.winning_during_all_s.len(),
            r.winning_during_all_s
                .iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if r.stream > 0 {
        println!(
            "  in the stream: {}; at most {} partitions at the device at once",
            r.stream_budget.describe(),
            r.stream_most_at_device
        );
    }
    println!(
        "  memory: peak RSS {}, pool grew by {} in {:.1} s of pinning",
        r.peak_rss_bytes.map_or("?".into(), bytes),
        bytes(r.pool_fresh_bytes),
        r.pool_alloc_s
    );
}
