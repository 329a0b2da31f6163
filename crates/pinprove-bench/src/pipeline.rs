//! `pinprove-bench pipeline`: jobs of partitions through the whole engine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::utilization::Utilization;
use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use pinprove_engine::{
    EngineConfig, JobOutcome, JobSpec, PartitionResult, Phase, Priority, circuit_partition_with_inputs, holding_heap,
};
use pinprove_mem::{BudgetConfig, PinMethod, sys};
use pinprove_stack::{BackendKind, DeviceSelection, Stack, StackConfig};
use serde::Serialize;

use crate::builtin::CircuitArgs;
use crate::params_cache::{self, ParamsKind, params_file};
use crate::reference;
use crate::report::{DeviceShare, Host, NVML_LAG, Output, bytes, dur, median};

#[derive(Args, Debug)]
pub struct PipelineArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Jobs to submit at once.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Partitions per job.
    #[arg(long, default_value_t = 4)]
    partitions: usize,
    /// The backend (GPU backends need a GPU build).
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    backend: BackendKind,
    /// GPUs to prove on: "all" or ordinals such as 0,1 (GPU backends).
    #[arg(long, default_value = "all")]
    devices: DeviceSelection,
    /// Pieces of proofs queued on one GPU at once (native backend).
    #[arg(long, default_value_t = pinprove_stack::NativeOptions::default().queue_depth)]
    queue_depth: usize,
    /// Threads of the native backend that prepare background proofs'
    /// scalars and add up their results (0: half the CPUs); they compete
    /// with synthesis for the cores.
    #[arg(long, default_value_t = pinprove_stack::NativeOptions::default().prep_threads)]
    prep_threads: usize,
    /// The most memory pinprove takes of each GPU ("15GiB": a 16 GB card's
    /// capacity on a larger one; default: what the GPU has free).
    #[arg(long, value_parser = pinprove_mem::parse_bytes)]
    gpu_memory_limit: Option<u64>,
    /// Jobs run first, unmeasured, with the same shape: the pinned pool
    /// then holds buffers of the right sizes, as in a daemon past its first
    /// jobs (pinning fresh host memory takes seconds per GiB and would
    /// otherwise dominate a short run).
    #[arg(long, default_value_t = 0)]
    warmup_jobs: usize,
    /// Synthesis workers (default: the engine's).
    #[arg(long)]
    synthesis_workers: Option<usize>,
    /// How pinned pool buffers are page-locked: host-alloc, register or register-whole.
    #[arg(long, default_value_t = PinMethod::default())]
    pinning: PinMethod,
    /// Before the measured jobs, time a one-partition job right after the
    /// parameters were loaded and the pool warmed (the circuit type's first
    /// proof), then a second one (a warm proof).
    #[arg(long)]
    first_proof: bool,
    /// Memory budget: "auto" or a size such as 96GiB.
    #[arg(long, default_value = "auto")]
    budget: BudgetConfig,
    /// Parameter file; generated (and cached) when absent.
    #[arg(long)]
    params: Option<PathBuf>,
    /// Where generated parameters are cached.
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// Use synthetic parameters (right shape, made in seconds) instead of
    /// generating real ones; the proofs then do not verify and are not
    /// checked. For large circuits, where bellperson's generator takes hours.
    /// Made in memory at the preload (the circuit synthesized once first,
    /// for its shape), unless `--params` names a file or a backend reads
    /// the file itself: then written to a file (cached in `--params-dir`).
    #[arg(long)]
    synthetic_params: bool,
    /// Write the timeline as an SVG chart here.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Write the timeline as Chrome trace-event JSON here (opens in Perfetto).
    #[arg(long)]
    trace: Option<PathBuf>,
    #[command(flatten)]
    output: Output,
}

#[derive(Serialize)]
struct PipelineReport {
    benchmark: &'static str,
    host: Host,
    backend: &'static str,
    devices: Vec<String>,
    circuit: String,
    constraints: usize,
    jobs: usize,
    partitions: usize,
    wall_s: f64,
    proofs_per_hour: f64,
    steady_window_s: f64,
    device_busy_fraction: f64,
    device_or_finish_busy_fraction: f64,
    device_busy_fraction_whole_run: f64,
    /// Mean NVML GPU utilization (percent of time a kernel ran) over the
    /// steady window, and the number of ~100 ms samples (GPU builds only).
    gpu_utilization_percent: Option<f64>,
    gpu_utilization_samples: usize,
    /// Time some synthesized partition waited for the device (for a GPU
    /// worker, or inside `start` for room in the device queue): the GPU had
    /// work at hand, so idle time then is the backend's, not starvation.
    backlog_s: f64,
    /// Mean NVML GPU utilization over the backlog (samples whose averaging
    /// period lies inside it), and their number.
    gpu_utilization_backlog_percent: Option<f64>,
    gpu_utilization_backlog_samples: usize,
    /// Each device's share (partitions, busy fraction, its GPU's utilization).
    per_device: Vec<DeviceShare>,
    /// Median per phase, keyed `<phase>_s`.
    phases: BTreeMap<String, f64>,
    budget_bytes: u64,
    pinning: String,
    /// `--prep-threads` (0: the backend's default).
    prep_threads: usize,
    /// Whether the synthetic parameters were made in memory at the preload
    /// (else read from a file).
    params_in_memory: bool,
    /// Preloading the parameters, and then warming the pool (0 when the
    /// warm set was made before the load returned).
    preload_s: f64,
    pool_warm_s: f64,
    /// One-partition jobs timed after the warm-up (`--first-proof`): the
    /// circuit type's first proof, then a second one.
    first_proof_s: Option<f64>,
    warm_proof_s: Option<f64>,
    /// Their phases, keyed `<phase>_s`, and the pool's fresh allocations
    /// (all, and on threads a device waited for) during each.
    first_proof_phases: Option<OneProof>,
    warm_proof_phases: Option<OneProof>,
    warmup_jobs: usize,
    /// The pinned pool over the measured run: checkouts served by an idle buffer,
    /// buffers newly allocated (and the time spent allocating), freed.
    pool_reuse_hits: u64,
    pool_fresh_allocations: u64,
    pool_alloc_s: f64,
    /// Of those, the ones made on a thread a device waits for (a device
    /// worker or the backend's preparation threads), and their time.
    pool_lane_allocations: u64,
    pool_lane_alloc_s: f64,
    pool_freed_buffers: u64,
    /// Returned buffers handed to a partition waiting for memory instead of
    /// being freed (and pinned again by it).
    pool_handed_over: u64,
    peak_rss_bytes: Option<u64>,
    synthetic_params: bool,
    proofs_verified: usize,
}

/// `phases` (seconds keyed `<phase>_s`) as "queue wait 1.2 s, ...".
fn phase_text<'a>(phases: &BTreeMap<String, f64>, which: impl Iterator<Item = &'a Phase>) -> String {
    which
        .map(|p| {
            let s = phases.get(&format!("{p}_s")).copied().unwrap_or(0.0);
            format!("{} {}", p.name().replace('_', " "), dur(Duration::from_secs_f64(s)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Waits until `pool` has held the same bytes for a second (at most a
/// minute), and says how long that took.
fn settle(pool: &pinprove_mem::PinnedPool) -> Duration {
    let t = Instant::now();
    let mut last = (pool.stats().allocated_bytes, Instant::now());
    while t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
        let now = pool.stats().allocated_bytes;
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= Duration::from_secs(1) {
            return last.1 - t;
        }
    }
    t.elapsed()
}

/// One timed one-partition job (`--first-proof`).
#[derive(Serialize)]
struct OneProof {
    phases: BTreeMap<String, f64>,
    fresh_allocations: u64,
    alloc_s: f64,
    lane_allocations: u64,
    lane_alloc_s: f64,
}

impl OneProof {
    fn line(&self) -> String {
        let phases = phase_text(&self.phases, Phase::ALL.iter().filter(|p| **p != Phase::Total));
        format!(
            "{phases}; pinned {} fresh ({}), {} on device lanes ({})",
            self.fresh_allocations,
            dur(Duration::from_secs_f64(self.alloc_s)),
            self.lane_allocations,
            dur(Duration::from_secs_f64(self.lane_alloc_s))
        )
    }
}

pub fn run(args: &PipelineArgs) -> Result<()> {
    ensure!(
        args.jobs > 0 && args.partitions > 0,
        "jobs and partitions must be positive"
    );
    let circuit = args.circuit.build()?;
    let id = circuit.id();
    let stack = Stack::build(&StackConfig {
        backend: args.backend,
        budget: args.budget.clone(),
        devices: args.devices.clone(),
        pinning: args.pinning,
        native: pinprove_stack::NativeOptions {
            queue_depth: args.queue_depth,
            prep_threads: args.prep_threads,
            memory_limit: args.gpu_memory_limit,
            ..Default::default()
        },
        ..StackConfig::default()
    })?;
    let (budget, pool) = (Arc::clone(&stack.budget), Arc::clone(&stack.pool));
    let name = stack.devices[0].backend.name();
    let devices: Vec<String> = stack.devices.iter().map(|d| d.id.to_string()).collect();
    let mut config = EngineConfig::default();
    if let Some(n) = args.synthesis_workers {
        config.synthesis_workers = n;
    }
    let engine = stack.engine(config)?;
    // Synthetic points made in memory spare writing and reading a file of
    // tens of GB (at 2^26 on the H200 machine, 204-274 s to write).
    let in_memory = args.synthetic_params
        && args.params.is_none()
        && stack.devices.iter().all(|d| d.backend.capabilities().needs_srs_points);
    let path = if in_memory {
        let t = Instant::now();
        let shape = params_cache::shape_of(&circuit)?;
        eprintln!("parameters' shape counted in {:.1} s", t.elapsed().as_secs_f64());
        engine.register_synthetic_srs(&id, shape);
        None
    } else {
        let kind = if args.synthetic_params {
            ParamsKind::Synthetic
        } else {
            ParamsKind::Real
        };
        let path = params_file(&circuit, args.params.as_deref(), args.params_dir.as_deref(), kind)?;
        engine.register_srs(&id, &path);
        Some(path)
    };
    let t = Instant::now();
    engine.preload_srs(&id).context("loading the parameters")?;
    let preload_s = t.elapsed().as_secs_f64();
    // The pool warms in the background after a preload, as in a daemon
    // whose parameters are preloaded at start; measure from when it is done.
    let t = Instant::now();
    ensure!(
        engine.wait_quiet(Duration::from_secs(600)),
        "the pool was still warming after 10 minutes"
    );
    let pool_warm_s = t.elapsed().as_secs_f64();
    let how = if path.is_none() { "made in memory" } else { "loaded" };
    eprintln!("parameters {how} in {preload_s:.1} s, pool warmed in {pool_warm_s:.1} s more");

    // A job of one partition per seed.
    let submit_seeds = |seeds: Vec<usize>| {
        let parts = seeds
            .into_iter()
            .map(|seed| {
                let c = circuit.clone().with_seed(seed as u64);
                let (inputs, heap) = (c.public_inputs(), c.heap_bytes());
                // The circuit is generated in memory as it synthesizes.
                holding_heap(circuit_partition_with_inputs(c, inputs), heap)
            })
            .collect();
        engine.submit(JobSpec {
            circuit_id: id.clone(),
            priority: Priority::Normal,
            partitions: parts,
            randomness: None,
        })
    };
    let submit = |j: usize| submit_seeds((0..args.partitions).map(|p| j * 1000 + p).collect());
    let one = |seed: usize| -> Result<(f64, OneProof)> {
        let before = pool.stats();
        let t = Instant::now();
        let job = submit_seeds(vec![seed])?;
        let r = match engine.wait(job, None)? {
            JobOutcome::Completed(mut r) if r.len() == 1 => r.remove(0),
            other => bail!("one-partition job {job} ended {other:?}"),
        };
        let wall = t.elapsed().as_secs_f64();
        let after = pool.stats();
        let phases = Phase::ALL
            .into_iter()
            .map(|p| (format!("{p}_s"), r.timings.get(p).as_secs_f64()))
            .collect();
        Ok((
            wall,
            OneProof {
                phases,
                fresh_allocations: after.fresh_allocations - before.fresh_allocations,
                alloc_s: after.alloc_time.saturating_sub(before.alloc_time).as_secs_f64(),
                lane_allocations: after.lane_allocations - before.lane_allocations,
                lane_alloc_s: after
                    .lane_alloc_time
                    .saturating_sub(before.lane_alloc_time)
                    .as_secs_f64(),
            },
        ))
    };
    let (first_proof_s, warm_proof_s, first_proof_phases, warm_proof_phases) = if args.first_proof {
        let (first, fp) = one(1_000_000)?;
        eprintln!("first proof of the circuit type {first:.3} s: {}", fp.line());
        // What the first proof showed is kept warm in the background once
        // it is done (the backend's preparation buffers): the next proof is
        // a warm one only after that.
        let settled = settle(&pool);
        eprintln!(
            "the pool stopped growing {:.1} s after the first proof",
            settled.as_secs_f64()
        );
        let (warm, wp) = one(1_000_001)?;
        eprintln!("the next {warm:.3} s: {}", wp.line());
        (Some(first), Some(warm), Some(fp), Some(wp))
    } else {
        (None, None, None, None)
    };
    let warmup = (0..args.warmup_jobs)
        .map(|j| submit(args.jobs + j))
        .collect::<Result<Vec<_>, _>>()?;
    for job in warmup {
        match engine.wait(job, None)? {
            JobOutcome::Completed(_) => {}
            other => bail!("warm-up job {job} ended {other:?}"),
        }
    }
    let pool_before = pool.stats();
    let _ = sys::reset_peak_rss();

    let started = Instant::now();
    let ids = (0..args.jobs).map(submit).collect::<Result<Vec<_>, _>>()?;
    let mut results: Vec<PartitionResult> = Vec::new();
    for job in ids.iter().copied() {
        match engine.wait(job, None)? {
            JobOutcome::Completed(r) => results.extend(r),
            other => bail!("job {job} ended {other:?}"),
        }
    }
    let wall = started.elapsed();
    let peak = sys::peak_rss_bytes();
    let pool_after = pool.stats();

    // Verify a sample of the proofs (all when few).
    let verified = if let (false, Some(path)) = (args.synthetic_params, &path) {
        let vk = reference::read_vk(path)?;
        let mut n = 0;
        for r in results.iter().step_by((results.len() / 8).max(1)) {
            let inputs = r.public_inputs.as_deref().unwrap_or_default();
            ensure!(
                reference::verify(&vk, &r.proof.to_bytes(), inputs)?,
                "proof {} of a job did not verify",
                r.index
            );
            n += 1;
        }
        n
    } else {
        0
    };

    // The measured jobs' spans only.
    let u = Utilization::of_jobs(engine.timeline(), &ids, NVML_LAG);
    let phases: BTreeMap<String, f64> = Phase::ALL
        .into_iter()
        .map(|phase| {
            let mut v: Vec<Duration> = results.iter().map(|r| r.timings.get(phase)).collect();
            (format!("{phase}_s"), median(&mut v).as_secs_f64())
        })
        .collect();
    if let Some(p) = &args.timeline {
        std::fs::write(p, engine.timeline().svg()).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.trace {
        std::fs::write(p, engine.timeline().chrome_trace()).with_context(|| format!("writing {}", p.display()))?;
    }
    let report = PipelineReport {
        benchmark: "pipeline",
        host: Host::detect(),
        backend: name,
        devices: devices.clone(),
        circuit: id,
        constraints: circuit.constraints(),
        jobs: args.jobs,
        partitions: args.partitions,
        wall_s: wall.as_secs_f64(),
        proofs_per_hour: results.len() as f64 / wall.as_secs_f64() * 3600.0,
        steady_window_s: (u.window.1.saturating_sub(u.window.0)).as_secs_f64(),
        device_busy_fraction: u.device_busy,
        device_or_finish_busy_fraction: u.device_or_finish_busy,
        device_busy_fraction_whole_run: u.device_busy_whole_run,
        gpu_utilization_percent: u.gpu_percent,
        gpu_utilization_samples: u.gpu_samples,
        backlog_s: u.backlog.as_secs_f64(),
        gpu_utilization_backlog_percent: u.backlog_gpu_percent,
        gpu_utilization_backlog_samples: u.backlog_gpu_samples,
        per_device: DeviceShare::of_jobs(engine.timeline(), &ids, &devices),
        phases,
        budget_bytes: budget.total(),
        pinning: args.pinning.to_string(),
        prep_threads: args.prep_threads,
        params_in_memory: path.is_none(),
        preload_s,
        pool_warm_s,
        first_proof_s,
        warm_proof_s,
        first_proof_phases,
        warm_proof_phases,
        warmup_jobs: args.warmup_jobs,
        pool_reuse_hits: pool_after.reuse_hits - pool_before.reuse_hits,
        pool_lane_allocations: pool_after.lane_allocations - pool_before.lane_allocations,
        pool_lane_alloc_s: pool_after
            .lane_alloc_time
            .saturating_sub(pool_before.lane_alloc_time)
            .as_secs_f64(),
        pool_fresh_allocations: pool_after.fresh_allocations - pool_before.fresh_allocations,
        pool_alloc_s: pool_after
            .alloc_time
            .saturating_sub(pool_before.alloc_time)
            .as_secs_f64(),
        pool_freed_buffers: pool_after.freed_buffers - pool_before.freed_buffers,
        pool_handed_over: pool_after.handed_over - pool_before.handed_over,
        peak_rss_bytes: peak,
        synthetic_params: args.synthetic_params,
        proofs_verified: verified,
    };
    args.output.emit(&report, |r| {
        let d = |s: f64| dur(Duration::from_secs_f64(s));
        println!("pinprove-bench pipeline — {}", r.host.summary());
        println!(
            "{} jobs × {} partitions of {} ({} constraints) on the {} backend ({}){}: {} wall, {:.0} proofs/hour",
            r.jobs,
            r.partitions,
            r.circuit,
            r.constraints,
            r.backend,
            r.devices.join(", "),
            if r.warmup_jobs > 0 {
                format!(" (after {} warm-up jobs)", r.warmup_jobs)
            } else {
                String::new()
            },
            d(r.wall_s),
            r.proofs_per_hour
        );
        println!(
            "  backend's first step busy {:.1}% of the steady window ({}, first device step to last), \
             first or second step {:.1}%; {:.1}% of the whole run",
            100.0 * r.device_busy_fraction,
            d(r.steady_window_s),
            100.0 * r.device_or_finish_busy_fraction,
            100.0 * r.device_busy_fraction_whole_run
        );
        if let Some(u) = r.gpu_utilization_percent {
            println!(
                "  GPU utilization (NVML) over the steady window: {u:.1}% ({} samples)",
                r.gpu_utilization_samples
            );
        }
        if let Some(u) = r.gpu_utilization_backlog_percent {
            println!(
                "  GPU utilization (NVML) while a synthesized partition waited for the device ({} in all): \
                 {u:.1}% ({} samples)",
                d(r.backlog_s),
                r.gpu_utilization_backlog_samples
            );
        }
        DeviceShare::print(&r.per_device);
        println!("  medians: {}", phase_text(&r.phases, Phase::ALL.iter()));
        println!(
            "  peak RSS {} against a budget of {}; pool: {} checkouts reused a buffer, {} allocated one ({} allocating), \
             {} buffers freed, {} handed to a waiting partition; pinning by {}: {} allocations ({}) on threads a device waited for",
            r.peak_rss_bytes.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(r.budget_bytes),
            r.pool_reuse_hits,
            r.pool_fresh_allocations,
            d(r.pool_alloc_s),
            r.pool_freed_buffers,
            r.pool_handed_over,
            r.pinning,
            r.pool_lane_allocations,
            d(r.pool_lane_alloc_s)
        );
        if let (Some(first), Some(warm)) = (r.first_proof_s, r.warm_proof_s) {
            println!(
                "  after the preload ({}) and the pool warming ({}): first proof {}, the next {} ({:.2}×)",
                d(r.preload_s),
                d(r.pool_warm_s),
                d(first),
                d(warm),
                first / warm
            );
        }
        if let (Some(f), Some(w)) = (&r.first_proof_phases, &r.warm_proof_phases) {
            println!("    first: {}", f.line());
            println!("    next:  {}", w.line());
        }
        if r.synthetic_params {
            let made = if r.params_in_memory { " (made in memory)" } else { "" };
            println!("  synthetic parameters{made}: timings are real, the proofs do not verify and were not checked");
        } else {
            println!("  {} of {} proofs checked with bellperson's verifier", r.proofs_verified, r.jobs * r.partitions);
        }
    })
}
