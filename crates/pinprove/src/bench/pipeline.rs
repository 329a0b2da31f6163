//! `pinprove bench pipeline`: jobs of partitions through the whole engine.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::{Args, ValueEnum};
use pinprove_engine::timeline::{CounterSample, Span};
use pinprove_engine::{
    Device, Engine, EngineConfig, JobOutcome, JobSpec, PartitionResult, Priority, circuit_partition_with_inputs,
};
use pinprove_groth16::{Backend, CpuBackend};
use pinprove_mem::{BudgetConfig, MemoryBudget, PinnedPool, PoolConfig, default_allocator, sys};
use serde::Serialize;

use crate::builtin::CircuitArgs;
use crate::reference;
use crate::report::{Host, NVML_LAG, Output, bytes, dur, mean, median};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PipelineBackend {
    /// The CPU backend.
    Cpu,
    /// supraseal-c2 on the GPU (needs the `cuda` feature).
    Supraseal,
    /// pinprove's own GPU backend (needs the `cuda` feature).
    Native,
}

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
    /// The backend.
    #[arg(long, value_enum, default_value_t = PipelineBackend::Cpu)]
    backend: PipelineBackend,
    /// Jobs run first, unmeasured, with the same shape: the pinned pool
    /// then holds buffers of the right sizes, as in a daemon past its first
    /// jobs (pinning fresh host memory takes seconds per GiB and would
    /// otherwise dominate a short run).
    #[arg(long, default_value_t = 0)]
    warmup_jobs: usize,
    /// Synthesis workers (default: the engine's).
    #[arg(long)]
    synthesis_workers: Option<usize>,
    /// Memory budget in GiB (default: automatic).
    #[arg(long)]
    budget_gib: Option<f64>,
    /// Parameter file; generated (and cached) when absent.
    #[arg(long)]
    params: Option<PathBuf>,
    /// Where generated parameters are cached.
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// Use synthetic parameters (right shape, written in seconds) instead of
    /// generating real ones; the proofs then do not verify and are not
    /// checked. For large circuits, where bellperson's generator takes hours.
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

#[derive(Serialize, Default)]
struct PhaseMedians {
    queue_wait_s: f64,
    admission_s: f64,
    srs_load_s: f64,
    synthesis_s: f64,
    handoff_wait_s: f64,
    start_s: f64,
    finish_wait_s: f64,
    finish_s: f64,
    total_s: f64,
}

#[derive(Serialize)]
struct PipelineReport {
    benchmark: &'static str,
    host: Host,
    backend: &'static str,
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
    phases: PhaseMedians,
    budget_bytes: u64,
    warmup_jobs: usize,
    /// The pinned pool over the measured run: checkouts served by an idle buffer,
    /// buffers newly allocated (and the time spent allocating), freed.
    pool_reuse_hits: u64,
    pool_fresh_allocations: u64,
    pool_alloc_s: f64,
    pool_freed_buffers: u64,
    peak_rss_bytes: Option<u64>,
    synthetic_params: bool,
    proofs_verified: usize,
}

fn backend(kind: PipelineBackend, pool: &Arc<PinnedPool>) -> Result<Arc<dyn Backend>> {
    match kind {
        PipelineBackend::Cpu => Ok(Arc::new(CpuBackend::new(Arc::clone(pool)))),
        #[cfg(feature = "cuda")]
        PipelineBackend::Supraseal => Ok(Arc::new(pinprove_cuda::SuprasealBackend::new()?)),
        #[cfg(feature = "cuda")]
        PipelineBackend::Native => Ok(Arc::new(pinprove_cuda::NativeBackend::new(Arc::clone(pool))?)),
        #[cfg(not(feature = "cuda"))]
        PipelineBackend::Supraseal | PipelineBackend::Native => {
            Err(crate::report::needs_gpu_build("the supraseal and native backends"))
        }
    }
}

/// Mean of the counter samples whose name ends with `suffix`, taken within
/// `[from, to]`, and how many there were.
fn mean_of(samples: &[CounterSample], suffix: &str, from: Duration, to: Duration) -> (Option<f64>, usize) {
    mean_inside(samples, suffix, &[(from, to)], Duration::ZERO)
}

/// The union of intervals, sorted and disjoint.
fn merge(mut iv: Vec<(Duration, Duration)>) -> Vec<(Duration, Duration)> {
    iv.retain(|(a, b)| b > a);
    iv.sort();
    let mut out: Vec<(Duration, Duration)> = Vec::with_capacity(iv.len());
    for (a, b) in iv {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// From each partition's end of synthesis to the end of its `start`: a
/// proof ready for the device and not yet queued on it.
fn backlog(spans: &[Span]) -> Vec<(Duration, Duration)> {
    let synthesized: std::collections::HashMap<&str, Duration> = spans
        .iter()
        .filter(|s| s.name == "synthesis")
        .map(|s| (s.label.as_str(), s.start + s.duration))
        .collect();
    merge(
        spans
            .iter()
            .filter(|s| s.name == "start")
            .filter_map(|s| synthesized.get(s.label.as_str()).map(|&a| (a, s.start + s.duration)))
            .collect(),
    )
}

/// Mean of the counter samples named `…suffix` whose averaging period
/// (`lag` before the sample) lies inside one of `intervals`, and how many.
fn mean_inside(
    samples: &[CounterSample],
    suffix: &str,
    intervals: &[(Duration, Duration)],
    lag: Duration,
) -> (Option<f64>, usize) {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.name.ends_with(suffix))
        .filter(|s| intervals.iter().any(|&(a, b)| s.at >= a + lag && s.at <= b))
        .map(|s| s.value)
        .collect();
    (mean(&v), v.len())
}

/// Length of the union of `spans` clipped to `[from, to]`.
fn covered(spans: &[&Span], from: Duration, to: Duration) -> Duration {
    merge(
        spans
            .iter()
            .map(|s| (s.start.max(from), (s.start + s.duration).min(to)))
            .collect(),
    )
    .iter()
    .map(|(a, b)| *b - *a)
    .sum()
}

pub fn run(args: &PipelineArgs) -> Result<()> {
    ensure!(
        args.jobs > 0 && args.partitions > 0,
        "jobs and partitions must be positive"
    );
    let circuit = args.circuit.build()?;
    let id = circuit.id();
    let kind = if args.synthetic_params {
        reference::ParamsKind::Synthetic
    } else {
        reference::ParamsKind::Real
    };
    let path = reference::params_file(&circuit, args.params.as_deref(), args.params_dir.as_deref(), kind)?;
    let budget = match args.budget_gib {
        Some(g) => MemoryBudget::new((g * (1u64 << 30) as f64) as u64),
        None => MemoryBudget::from_config(&BudgetConfig::default()),
    };
    let pool = PinnedPool::new(default_allocator(), Arc::clone(&budget), PoolConfig::default());
    let be = backend(args.backend, &pool)?;
    let name = be.name();
    let mut config = EngineConfig::default();
    if let Some(n) = args.synthesis_workers {
        config.synthesis_workers = n;
    }
    let engine = Engine::new(
        config,
        vec![Device {
            name: "dev0".into(),
            backend: be,
        }],
        Arc::clone(&pool),
    )?;
    engine.register_srs(&id, &path);
    engine.preload_srs(&id).context("loading the parameters")?;

    let submit = |j: usize| {
        let parts = (0..args.partitions)
            .map(|p| {
                let c = circuit.clone().with_seed((j * 1000 + p) as u64);
                let inputs = c.public_inputs();
                circuit_partition_with_inputs(c, inputs)
            })
            .collect();
        engine.submit(JobSpec {
            circuit_id: id.clone(),
            priority: Priority::Normal,
            partitions: parts,
            randomness: None,
        })
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
    let measured: std::collections::HashSet<String> = ids.iter().map(|j| format!("{j}/")).collect();
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
    let verified = if args.synthetic_params {
        0
    } else {
        let vk = reference::read_vk(&path)?;
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
    };

    // The measured jobs' spans only.
    let spans: Vec<Span> = engine
        .timeline()
        .spans()
        .into_iter()
        .filter(|s| measured.iter().any(|m| s.label.starts_with(m.as_str())))
        .collect();
    let device: Vec<&Span> = spans.iter().filter(|s| s.name == "start").collect();
    let both: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "start" || s.name == "finish")
        .collect();
    // Steady state: from the first device step to the last one's end.
    let from = device.iter().map(|s| s.start).min().unwrap_or_default();
    let to = device.iter().map(|s| s.start + s.duration).max().unwrap_or_default();
    let window = to.saturating_sub(from);
    let frac = |v: &[&Span]| covered(v, from, to).as_secs_f64() / window.as_secs_f64().max(1e-9);
    let samples = engine.timeline().samples();
    let (gpu_util, gpu_util_n) = mean_of(&samples, " util %", from, to);
    let waiting = backlog(&spans);
    let backlog_len: Duration = waiting.iter().map(|(a, b)| *b - *a).sum();
    let (backlog_util, backlog_n) = mean_inside(&samples, " util %", &waiting, NVML_LAG);
    // The whole run, the first synthesis included.
    let run_from = spans.iter().map(|s| s.start).min().unwrap_or_default();
    let run_to = spans.iter().map(|s| s.start + s.duration).max().unwrap_or_default();
    let run_frac =
        covered(&device, run_from, run_to).as_secs_f64() / run_to.saturating_sub(run_from).as_secs_f64().max(1e-9);

    let med = |f: &dyn Fn(&PartitionResult) -> Duration| {
        let mut v: Vec<Duration> = results.iter().map(f).collect();
        median(&mut v).as_secs_f64()
    };
    let phases = PhaseMedians {
        queue_wait_s: med(&|r| r.timings.queue_wait),
        admission_s: med(&|r| r.timings.budget_wait),
        srs_load_s: med(&|r| r.timings.srs_load),
        synthesis_s: med(&|r| r.timings.synthesis),
        handoff_wait_s: med(&|r| r.timings.handoff_wait),
        start_s: med(&|r| r.timings.start),
        finish_wait_s: med(&|r| r.timings.finish_wait),
        finish_s: med(&|r| r.timings.finish),
        total_s: med(&|r| r.timings.total()),
    };
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
        circuit: id,
        constraints: circuit.constraints(),
        jobs: args.jobs,
        partitions: args.partitions,
        wall_s: wall.as_secs_f64(),
        proofs_per_hour: results.len() as f64 / wall.as_secs_f64() * 3600.0,
        steady_window_s: window.as_secs_f64(),
        device_busy_fraction: frac(&device),
        device_or_finish_busy_fraction: frac(&both),
        device_busy_fraction_whole_run: run_frac,
        gpu_utilization_percent: gpu_util,
        gpu_utilization_samples: gpu_util_n,
        backlog_s: backlog_len.as_secs_f64(),
        gpu_utilization_backlog_percent: backlog_util,
        gpu_utilization_backlog_samples: backlog_n,
        phases,
        budget_bytes: budget.total(),
        warmup_jobs: args.warmup_jobs,
        pool_reuse_hits: pool_after.reuse_hits - pool_before.reuse_hits,
        pool_fresh_allocations: pool_after.fresh_allocations - pool_before.fresh_allocations,
        pool_alloc_s: pool_after
            .alloc_time
            .saturating_sub(pool_before.alloc_time)
            .as_secs_f64(),
        pool_freed_buffers: pool_after.freed_buffers - pool_before.freed_buffers,
        peak_rss_bytes: peak,
        synthetic_params: args.synthetic_params,
        proofs_verified: verified,
    };
    args.output.emit(&report, |r| {
        let d = |s: f64| dur(Duration::from_secs_f64(s));
        println!("pinprove bench pipeline — {}", r.host.summary());
        println!(
            "{} jobs × {} partitions of {} ({} constraints) on the {} backend{}: {} wall, {:.0} proofs/hour",
            r.jobs,
            r.partitions,
            r.circuit,
            r.constraints,
            r.backend,
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
        let p = &r.phases;
        println!(
            "  medians: queue {}, admission {}, synthesis {}, hand-off {}, first step {}, finish wait {}, second step {}, total {}",
            d(p.queue_wait_s),
            d(p.admission_s),
            d(p.synthesis_s),
            d(p.handoff_wait_s),
            d(p.start_s),
            d(p.finish_wait_s),
            d(p.finish_s),
            d(p.total_s)
        );
        println!(
            "  peak RSS {} against a budget of {}; pool: {} checkouts reused a buffer, {} allocated one ({} allocating), \
             {} buffers freed",
            r.peak_rss_bytes.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(r.budget_bytes),
            r.pool_reuse_hits,
            r.pool_fresh_allocations,
            d(r.pool_alloc_s),
            r.pool_freed_buffers
        );
        if r.synthetic_params {
            println!("  synthetic parameters: timings are real, the proofs do not verify and were not checked");
        } else {
            println!("  {} of {} proofs checked with bellperson's verifier", r.proofs_verified, r.jobs * r.partitions);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start_ms: u64, len_ms: u64) -> Span {
        Span {
            lane: "l".into(),
            name: "start",
            start: Duration::from_millis(start_ms),
            duration: Duration::from_millis(len_ms),
            label: String::new(),
        }
    }

    #[test]
    fn averages_gpu_samples_within_the_window_only() {
        let sample = |name: &str, ms, value| CounterSample {
            name: name.into(),
            at: Duration::from_millis(ms),
            value,
        };
        let s = [
            sample("gpu0 util %", 50, 0.0),
            sample("gpu0 util %", 150, 90.0),
            sample("gpu0 PCIe RX GB/s", 160, 40.0),
            sample("gpu0 util %", 250, 100.0),
            sample("gpu0 util %", 400, 0.0),
        ];
        let ms = Duration::from_millis;
        assert_eq!(mean_of(&s, " util %", ms(100), ms(300)), (Some(95.0), 2));
        assert_eq!(mean_of(&s, " util %", ms(500), ms(600)), (None, 0));
    }

    #[test]
    fn backlog_runs_from_synthesis_end_to_start_end_and_selects_samples_inside() {
        let at = |name: &'static str, label: &str, start_ms: u64, len_ms: u64| Span {
            lane: "l".into(),
            name,
            start: Duration::from_millis(start_ms),
            duration: Duration::from_millis(len_ms),
            label: label.into(),
        };
        let spans = [
            at("synthesis", "1/0", 0, 100),
            at("synthesis", "1/1", 0, 150),
            at("start", "1/0", 300, 50), // waited 100..350
            at("start", "1/1", 350, 50), // waited 150..400
            at("synthesis", "2/0", 600, 100),
            at("start", "2/0", 700, 100),  // waited 700..800
            at("finish", "1/0", 350, 500), // not a wait
        ];
        let ms = Duration::from_millis;
        let b = backlog(&spans);
        assert_eq!(b, vec![(ms(100), ms(400)), (ms(700), ms(800))]);
        let sample = |ms_at, value| CounterSample {
            name: "gpu0 util %".into(),
            at: Duration::from_millis(ms_at),
            value,
        };
        let s = [
            sample(120, 0.0),
            sample(200, 90.0),
            sample(390, 100.0),
            sample(500, 0.0),
            sample(790, 80.0),
        ];
        // With a 50 ms lag, the sample at 120 ms still averages time before
        // the backlog.
        assert_eq!(mean_inside(&s, " util %", &b, ms(50)), (Some(90.0), 3));
    }

    #[test]
    fn unions_overlapping_spans_within_the_window() {
        let s = [span(0, 10), span(5, 10), span(30, 10), span(100, 10)];
        let refs: Vec<&Span> = s.iter().collect();
        let ms = Duration::from_millis;
        assert_eq!(covered(&refs, ms(0), ms(200)), ms(35));
        assert_eq!(covered(&refs, ms(8), ms(35)), ms(12));
    }
}
