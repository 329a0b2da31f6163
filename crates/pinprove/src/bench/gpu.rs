//! `pinprove bench gpu`: the upload experiment.
//!
//! One partition end to end (synthesis + GPU proof), and the GPU proof
//! alone, with a/b/c
//! 1. in pageable heap memory grown during synthesis (the stock path),
//! 2. synthesized into heap memory, then copied into pinned pool buffers
//!    before the GPU call (the "staging memcpy" design),
//! 3. synthesized straight into pinned pool buffers (zero copy),
//!
//! each idle and while other partitions are synthesized on other cores.

use anyhow::Result;
use clap::Args;

use crate::report::Output;

#[derive(Args, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct GpuArgs {
    /// Circuit sizes as powers of two, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![20u32, 22, 24])]
    log_sizes: Vec<u32>,
    /// Witness mixes, comma-separated (random, bits).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["bits".to_string(), "random".to_string()])]
    mixes: Vec<String>,
    /// Timed proofs per case after one warm-up; medians are reported.
    #[arg(long, default_value_t = 2)]
    reps: usize,
    /// Skip the warm-up proof of each case.
    #[arg(long)]
    no_warmup: bool,
    /// Threads synthesizing other partitions during the busy pass (0 skips
    /// the busy pass).
    #[arg(long, default_value_t = 8)]
    busy_threads: usize,
    /// Run the busy pass only up to this log size (busy synthesis of large
    /// circuits needs much memory).
    #[arg(long, default_value_t = 24)]
    busy_max_log: u32,
    /// Run random-witness circuits only up to this log size (supraseal-c2
    /// computes their B-query G2 MSM on the CPU: tens of seconds at 2^24).
    #[arg(long, default_value_t = 24)]
    random_max_log: u32,
    /// Check GPU proofs against the CPU backend and bellperson up to this
    /// log size.
    #[arg(long, default_value_t = 20)]
    check_max_log: u32,
    /// Where synthetic parameters are written (created when missing).
    #[arg(long)]
    params_dir: Option<std::path::PathBuf>,
    /// The GPU backend: supraseal (supraseal-c2) or native (pinprove's own).
    #[arg(long, default_value = "supraseal", value_parser = ["supraseal", "native"])]
    backend: String,
    /// Also prove every case with this backend (supraseal or native) from
    /// pool buffers: its median GPU proof time, and whether the two
    /// backends' proofs are byte-identical (same r and s).
    #[arg(long, value_parser = ["supraseal", "native"])]
    compare: Option<String>,
    /// After each case, prove this many partitions (synthesized beforehand
    /// into pool buffers) back to back on one thread and report proofs per
    /// second and the mean NVML GPU utilization meanwhile: how busy one
    /// worker alone keeps the GPU (0 skips; pick enough for a few seconds).
    #[arg(long, default_value_t = 0)]
    sustained: usize,
    /// Where a/b/c are synthesized, comma-separated: heap, staged, pinned.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["heap".to_string(), "staged".to_string(), "pinned".to_string()], value_parser = ["heap", "staged", "pinned"])]
    modes: Vec<String>,
    #[command(flatten)]
    output: Output,
}

#[cfg(not(feature = "cuda"))]
pub fn run(_args: &GpuArgs) -> Result<()> {
    Err(crate::report::needs_gpu_build("`bench gpu`"))
}

#[cfg(feature = "cuda")]
pub fn run(args: &GpuArgs) -> Result<()> {
    imp::run(args)
}

#[cfg(feature = "cuda")]
mod imp {
    use std::hint::black_box;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, ensure};
    use pinprove_cuda::{NativeBackend, SuprasealBackend};
    use pinprove_groth16::baseline::VecAssignment;
    use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
    use pinprove_groth16::{
        AbcLayout, Backend, CapacityHints, ProveError, ProvingAssignment, ProvingJob, Scalar, Srs, synthesize,
    };
    use pinprove_mem::cuda::{DeviceBuffer, Stream};
    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};
    use serde::Serialize;

    use super::GpuArgs;
    use crate::report::{Host, NVML_LAG, gbps, mean, median};

    #[derive(Serialize)]
    struct Row {
        log_size: u32,
        mix: String,
        load: &'static str,
        mode: String,
        reps: usize,
        synthesis_s: f64,
        staging_copy_s: f64,
        gpu_proof_s: f64,
        end_to_end_s: f64,
        spills: u32,
        /// a/b/c uploaded from this memory on a side stream right before the
        /// proof (supraseal-c2 exposes no timing of its own uploads).
        abc_upload_s: f64,
        abc_upload_gbps: f64,
        /// The native backend's phases in the last timed run.
        native_phases: Option<pinprove_cuda::NativePhases>,
    }

    #[derive(Serialize)]
    struct Comparison {
        log_size: u32,
        mix: String,
        backend: &'static str,
        gpu_proof_s: f64,
        compare: &'static str,
        compare_gpu_proof_s: f64,
        speedup: f64,
        identical_proofs: bool,
    }

    #[derive(Serialize)]
    struct Case {
        log_size: u32,
        mix: String,
        params: String,
        synthetic_params: bool,
        params_write_s: Option<f64>,
        srs_load_s: f64,
        /// For small cases: the GPU proof's bytes against the CPU backend's
        /// and bellperson's, same parameters, r and s.
        identical_to_cpu: Option<bool>,
        identical_to_bellperson: Option<bool>,
    }

    #[derive(Serialize)]
    struct GpuReport {
        benchmark: &'static str,
        host: Host,
        gpu: String,
        backend: &'static str,
        busy_threads: usize,
        cases: Vec<Case>,
        rows: Vec<Row>,
        comparisons: Vec<Comparison>,
        sustained: Vec<Sustained>,
    }

    /// Back-to-back proofs on one thread (`--sustained`).
    #[derive(Serialize)]
    struct Sustained {
        log_size: u32,
        mix: String,
        proofs: usize,
        wall_s: f64,
        proofs_per_s: f64,
        /// Mean of NVML's utilization samples taken meanwhile (None without
        /// NVML).
        gpu_utilization_percent: Option<f64>,
        samples: usize,
        /// The same over the steady window: from the first proof queued on
        /// the device to the last one's finish, less NVML's averaging lag at
        /// the front (no first preparation, no last host sums).
        steady_gpu_utilization_percent: Option<f64>,
        steady_samples: usize,
        steady_window_s: f64,
    }

    /// Synthesizes `n` partitions, then proves them back to back (the next
    /// started before the last is finished) while a thread samples the
    /// GPU's utilization.
    fn sustained(
        backend: &dyn Backend,
        srs: &Arc<Srs>,
        circuit: &BenchCircuit,
        pinned: &Arc<PinnedPool>,
        pci_bus_id: &str,
        n: usize,
    ) -> Result<Sustained> {
        let id = circuit.id();
        let hints = CapacityHints::in_memory();
        let mut partitions = Vec::with_capacity(n);
        for _ in 0..n {
            partitions.push(synthesize(circuit.clone(), &id, pinned, &hints, AbcLayout::Exact, None)?.0);
        }
        let nvml = pinprove_cuda::Nvml::load().ok();
        let device = nvml.as_ref().and_then(|m| m.device_by_pci_bus_id(pci_bus_id).ok());
        let stop = AtomicBool::new(false);
        type Samples = Vec<(Instant, f64)>;
        let (wall, samples, steady) = thread::scope(|s| -> Result<(Duration, Samples, (Instant, Instant))> {
            let sampler = s.spawn(|| {
                let mut v = Vec::new();
                if let (Some(m), Some(d)) = (&nvml, device) {
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(x) = m.sample(d) {
                            v.push((Instant::now(), f64::from(x.gpu_percent)));
                        }
                        thread::sleep(Duration::from_millis(50));
                    }
                }
                v
            });
            let t = Instant::now();
            let mut steady = (t, t);
            // Two proofs in flight, as a worker and the engine's finalizer
            // keep them: the next one is started (prepared, queued on the
            // device) before the oldest is finished.
            let mut in_flight = std::collections::VecDeque::new();
            let proved = (|| -> Result<(), ProveError> {
                for (i, asg) in partitions.into_iter().enumerate() {
                    let job = ProvingJob {
                        srs: Arc::clone(srs),
                        assignments: vec![asg],
                        randomness: vec![(Scalar::from(3u64), Scalar::from(5u64))],
                    };
                    in_flight.push_back(backend.start(job)?);
                    if i == 0 {
                        steady.0 = Instant::now();
                    }
                    if in_flight.len() == 2 {
                        in_flight.pop_front().expect("two in flight").finish()?;
                    }
                }
                while let Some(p) = in_flight.pop_front() {
                    if in_flight.is_empty() {
                        steady.1 = Instant::now();
                    }
                    p.finish()?;
                }
                Ok(())
            })();
            let wall = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            let samples = sampler.join().unwrap_or_default();
            proved?;
            Ok((wall, samples, steady))
        })?;
        let all: Vec<f64> = samples.iter().map(|x| x.1).collect();
        let in_steady: Vec<f64> = samples
            .iter()
            .filter(|(at, _)| *at >= steady.0 + NVML_LAG && *at <= steady.1)
            .map(|x| x.1)
            .collect();
        Ok(Sustained {
            log_size: circuit.constraints().next_power_of_two().trailing_zeros(),
            mix: circuit.mix().to_string(),
            proofs: n,
            wall_s: wall.as_secs_f64(),
            proofs_per_s: n as f64 / wall.as_secs_f64().max(1e-9),
            gpu_utilization_percent: mean(&all),
            samples: all.len(),
            steady_gpu_utilization_percent: mean(&in_steady),
            steady_samples: in_steady.len(),
            steady_window_s: steady.1.saturating_duration_since(steady.0).as_secs_f64(),
        })
    }

    /// Threads synthesizing copies of a circuit until dropped.
    struct Busy {
        stop: Arc<AtomicBool>,
        threads: Vec<thread::JoinHandle<()>>,
    }

    impl Busy {
        fn start(n: usize, circuit: &BenchCircuit) -> Busy {
            let stop = Arc::new(AtomicBool::new(false));
            let threads = (0..n)
                .map(|i| {
                    let (stop, c) = (Arc::clone(&stop), circuit.clone().with_seed(1000 + i as u64));
                    thread::spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            if let Ok(cs) = VecAssignment::synthesize(c.clone()) {
                                black_box(cs);
                            }
                        }
                    })
                })
                .collect();
            Busy { stop, threads }
        }
    }

    impl Drop for Busy {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }

    fn ensure_params(circuit: &BenchCircuit, dir: &Path) -> Result<(PathBuf, Option<Duration>)> {
        let path = dir.join(format!("{}.synthetic.params", circuit.id()));
        if path.exists() {
            return Ok((path, None));
        }
        let t = Instant::now();
        crate::params_cmd::write_synthetic(circuit, &path)?;
        Ok((path, Some(t.elapsed())))
    }

    /// Proves `circuit` once on the GPU, once with the CPU backend and once
    /// with bellperson, same parameters, r and s; are the bytes equal?
    fn cross_check(
        circuit: &BenchCircuit,
        path: &Path,
        loaded: &Arc<Srs>,
        gpu: &dyn Backend,
        pool: &Arc<PinnedPool>,
    ) -> Result<(bool, bool)> {
        let rs = (Scalar::from(123_456_789u64), Scalar::from(987_654_321u64));
        let hints = CapacityHints::in_memory();
        let job = |srs: &Arc<Srs>, layout| -> Result<ProvingJob> {
            let (asg, _) = synthesize(circuit.clone(), &circuit.id(), pool, &hints, layout, None)?;
            Ok(ProvingJob {
                srs: Arc::clone(srs),
                assignments: vec![asg],
                randomness: vec![rs],
            })
        };
        let on_gpu = gpu.prove(job(loaded, AbcLayout::Exact)?)?.remove(0).to_bytes();
        let full = Arc::new(Srs::read_file(path, pool, pinprove_groth16::Validation::OnCurve)?);
        let cpu = pinprove_groth16::CpuBackend::new(Arc::clone(pool));
        let on_cpu = cpu.prove(job(&full, AbcLayout::PaddedToDomain)?)?.remove(0).to_bytes();
        drop(full);
        let params = crate::reference::read(path)?;
        let theirs = crate::reference::prove(circuit.clone(), &params, rs.0, rs.1)?;
        Ok((on_gpu == on_cpu, on_gpu.to_vec() == theirs))
    }

    /// Uploads a/b/c of `asg` from where they are, timed on the device.
    fn upload_abc(stream: &Stream, dev: &mut DeviceBuffer, asg: &ProvingAssignment) -> Result<(Duration, u64)> {
        let mut total = Duration::ZERO;
        let mut bytes = 0;
        for v in [asg.a(), asg.b(), asg.c()].into_iter().flatten() {
            total += stream.timed_upload(dev, v)?;
            bytes += std::mem::size_of_val(v) as u64;
        }
        Ok((total, bytes))
    }

    /// Proves `circuit` with `other` from pool buffers (`runs` times, the last
    /// `reps` timed) and once more with the backend under test; compares the
    /// proofs' bytes.
    fn compare_case(
        log: u32,
        circuit: &BenchCircuit,
        path: &Path,
        (ours, our_srs, our_time): (&dyn Backend, &Arc<Srs>, f64),
        other: &Gpu,
        pinned: &Arc<PinnedPool>,
        (runs, reps): (usize, usize),
    ) -> Result<Comparison> {
        let (srs, _) = other.load(path, pinned)?;
        let hints = CapacityHints::in_memory();
        let rs = (Scalar::from(3u64), Scalar::from(5u64));
        let job = |srs: &Arc<Srs>| -> Result<ProvingJob> {
            let (asg, _) = synthesize(circuit.clone(), &circuit.id(), pinned, &hints, AbcLayout::Exact, None)?;
            Ok(ProvingJob {
                srs: Arc::clone(srs),
                assignments: vec![asg],
                randomness: vec![rs],
            })
        };
        let mut times = Vec::new();
        let mut theirs = None;
        for run in 0..runs {
            let j = job(&srs)?;
            let t = Instant::now();
            let p = other.backend().prove(j)?.remove(0);
            if run + reps >= runs {
                times.push(t.elapsed());
            }
            theirs = Some(p);
        }
        let mine = ours.prove(job(our_srs)?)?.remove(0);
        other.unload(path, &srs);
        let theirs_s = median(&mut times).as_secs_f64();
        let identical = theirs.is_some_and(|p| p.to_bytes() == mine.to_bytes());
        eprintln!(
            "{}: {} {:.3} s, {} {:.3} s, identical proofs: {identical}",
            circuit.id(),
            ours.name(),
            our_time,
            other.backend().name(),
            theirs_s
        );
        Ok(Comparison {
            log_size: log,
            mix: circuit.mix().to_string(),
            backend: ours.name(),
            gpu_proof_s: our_time,
            compare: other.backend().name(),
            compare_gpu_proof_s: theirs_s,
            speedup: theirs_s / our_time.max(1e-9),
            identical_proofs: identical,
        })
    }

    /// The backend under test, and how it holds parameters.
    enum Gpu {
        Supraseal(SuprasealBackend),
        Native(Box<NativeBackend>),
    }

    impl Gpu {
        fn new(name: &str, pinned: &Arc<PinnedPool>) -> Result<Gpu> {
            Ok(match name {
                "native" => Gpu::Native(Box::new(NativeBackend::new(Arc::clone(pinned))?)),
                _ => Gpu::Supraseal(SuprasealBackend::new()?),
            })
        }

        fn phases(&self) -> Option<pinprove_cuda::NativePhases> {
            match self {
                Gpu::Native(b) => b.last_phases(),
                Gpu::Supraseal(_) => None,
            }
        }

        fn backend(&self) -> &dyn Backend {
            match self {
                Gpu::Supraseal(b) => b,
                Gpu::Native(b) => b.as_ref(),
            }
        }

        /// The parameters as this backend wants them, and the load time.
        fn load(&self, path: &Path, pinned: &Arc<PinnedPool>) -> Result<(Arc<Srs>, Duration)> {
            match self {
                Gpu::Supraseal(b) => {
                    let srs = Arc::new(Srs::read_file_header(path)?);
                    Ok((srs, b.load_srs(path)?))
                }
                Gpu::Native(b) => {
                    let t = Instant::now();
                    let srs = Arc::new(Srs::read_file(path, pinned, pinprove_groth16::Validation::OnCurve)?);
                    b.prepare_srs(&srs)?;
                    Ok((srs, t.elapsed()))
                }
            }
        }

        fn unload(&self, path: &Path, srs: &Srs) {
            match self {
                Gpu::Supraseal(b) => {
                    b.evict_srs_file(path);
                }
                Gpu::Native(b) => b.evict_srs(srs),
            }
        }
    }

    pub fn run(args: &GpuArgs) -> Result<()> {
        ensure!(args.reps > 0, "--reps must be positive");
        let gpus = pinprove_cuda::gpus().context("no usable CUDA device")?;
        let gpu = gpus.first().context("no CUDA device")?;
        let gpu_desc = format!(
            "{} ({:.0} GiB), driver {} (CUDA {}), PCIe gen {} x{}",
            gpu.device.name,
            gpu.device.total_memory as f64 / (1u64 << 30) as f64,
            gpu.driver_version.clone().unwrap_or_else(|| "?".into()),
            gpu.device.driver_cuda(),
            gpu.pcie.map_or(0, |p| p.max_generation),
            gpu.pcie.map_or(0, |p| p.max_width)
        );
        let dir = args
            .params_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("pinprove-synthetic-params"));
        let budget = MemoryBudget::from_config(&pinprove_mem::BudgetConfig::default());
        let pinned = PinnedPool::new(
            pinprove_cuda::pinned_allocator()?,
            Arc::clone(&budget),
            PoolConfig::default(),
        );
        let heap = PinnedPool::new(
            Arc::new(HeapAllocator::default()),
            Arc::clone(&budget),
            PoolConfig::default(),
        );
        let gpu_backend = Gpu::new(&args.backend, &pinned)?;
        let backend = gpu_backend.backend();
        let compare = args.compare.as_deref().map(|c| Gpu::new(c, &pinned)).transpose()?;
        let mut comparisons = Vec::new();
        let stream = Stream::new()?;
        let mut cases = Vec::new();
        let mut rows = Vec::new();
        let mut sustained_runs = Vec::new();

        for &log in &args.log_sizes {
            ensure!((10..=27).contains(&log), "log sizes must be within 10..=27");
            for mix in &args.mixes {
                let mix: WitnessMix = mix.parse().map_err(anyhow::Error::msg)?;
                if mix == WitnessMix::Random && log > args.random_max_log {
                    eprintln!(
                        "2^{log} random: skipped (above --random-max-log {})",
                        args.random_max_log
                    );
                    continue;
                }
                let circuit = BenchCircuit::new(1 << log, mix)?;
                let id = circuit.id();
                let (path, written) = ensure_params(&circuit, &dir)?;
                let (srs, srs_load) = gpu_backend.load(&path, &pinned)?;
                eprintln!(
                    "{id}: parameters ready ({}), SRS loaded in {:.2} s",
                    path.display(),
                    srs_load.as_secs_f64()
                );
                let (identical_to_cpu, identical_to_bellperson) = if log <= args.check_max_log {
                    let (c, b) = cross_check(&circuit, &path, &srs, backend, &pinned)?;
                    eprintln!("{id}: GPU proof identical to CPU backend: {c}, to bellperson: {b}");
                    (Some(c), Some(b))
                } else {
                    (None, None)
                };
                cases.push(Case {
                    log_size: log,
                    mix: mix.to_string(),
                    params: path.display().to_string(),
                    synthetic_params: true,
                    params_write_s: written.map(|d| d.as_secs_f64()),
                    srs_load_s: srs_load.as_secs_f64(),
                    identical_to_cpu,
                    identical_to_bellperson,
                });
                let mut dev = DeviceBuffer::new(32usize << log)?;
                let hints = CapacityHints::in_memory();
                let loads: &[&'static str] = if args.busy_threads > 0 && log <= args.busy_max_log {
                    &["idle", "busy"]
                } else {
                    &["idle"]
                };
                for &load in loads {
                    let _busy = (load == "busy").then(|| Busy::start(args.busy_threads, &circuit));
                    for mode in args.modes.iter().map(String::as_str) {
                        let mut synth_t = Vec::new();
                        let mut copy_t = Vec::new();
                        let mut gpu_t = Vec::new();
                        let mut e2e_t = Vec::new();
                        let mut up_t = Vec::new();
                        let mut spills = 0;
                        let mut up_bytes = 0;
                        let mut phases = None;
                        let runs = args.reps + usize::from(!args.no_warmup);
                        for run in 0..runs {
                            let t0 = Instant::now();
                            // Heap modes grow their vectors as plain Vec synthesis does.
                            let fresh = CapacityHints::in_memory();
                            let (asg, stats) = match mode {
                                "pinned" => synthesize(circuit.clone(), &id, &pinned, &hints, AbcLayout::Exact, None)?,
                                _ => synthesize(circuit.clone(), &id, &heap, &fresh, AbcLayout::Exact, None)?,
                            };
                            let t1 = Instant::now();
                            let asg = if mode == "staged" {
                                let staged = asg.copy_into(&pinned)?;
                                drop(asg);
                                staged
                            } else {
                                asg
                            };
                            let t2 = Instant::now();
                            let (up, ub) = upload_abc(&stream, &mut dev, &asg)?;
                            let t3 = Instant::now();
                            backend.prove(ProvingJob {
                                srs: Arc::clone(&srs),
                                assignments: vec![asg],
                                randomness: vec![(Scalar::from(3u64), Scalar::from(5u64))],
                            })?;
                            let t4 = Instant::now();
                            phases = gpu_backend.phases();
                            spills = stats.spills;
                            if run < runs - args.reps {
                                continue;
                            }
                            synth_t.push(t1 - t0);
                            copy_t.push(t2 - t1);
                            gpu_t.push(t4 - t3);
                            e2e_t.push((t2 - t0) + (t4 - t3));
                            up_t.push(up);
                            up_bytes = ub;
                        }
                        let up_m = median(&mut up_t);
                        let row = Row {
                            log_size: log,
                            mix: mix.to_string(),
                            load,
                            mode: mode.to_string(),
                            reps: args.reps,
                            synthesis_s: median(&mut synth_t).as_secs_f64(),
                            staging_copy_s: median(&mut copy_t).as_secs_f64(),
                            gpu_proof_s: median(&mut gpu_t).as_secs_f64(),
                            end_to_end_s: median(&mut e2e_t).as_secs_f64(),
                            spills,
                            abc_upload_s: up_m.as_secs_f64(),
                            abc_upload_gbps: gbps(up_bytes, up_m),
                            native_phases: phases,
                        };
                        eprintln!(
                            "2^{log} {mix:<6} {load:<4} {mode:<6} synth {:>7.3} s  copy {:>6.3} s  gpu {:>7.3} s  e2e {:>7.3} s  abc upload {:>6.1} GB/s",
                            row.synthesis_s, row.staging_copy_s, row.gpu_proof_s, row.end_to_end_s, row.abc_upload_gbps
                        );
                        rows.push(row);
                    }
                }
                if let Some(other) = &compare {
                    let ours = rows
                        .iter()
                        .rev()
                        .find(|r: &&Row| r.log_size == log && r.mix == mix.to_string() && r.load == "idle")
                        .map_or(0.0, |r| r.gpu_proof_s);
                    comparisons.push(compare_case(
                        log,
                        &circuit,
                        &path,
                        (backend, &srs, ours),
                        other,
                        &pinned,
                        (args.reps + usize::from(!args.no_warmup), args.reps),
                    )?);
                }
                if args.sustained > 0 {
                    let s = sustained(backend, &srs, &circuit, &pinned, &gpu.device.pci_bus_id, args.sustained)?;
                    eprintln!(
                        "{id}: {} proofs back to back in {:.3} s ({:.2} proofs/s), mean GPU utilization {}, \
                         over the steady window {}",
                        s.proofs,
                        s.wall_s,
                        s.proofs_per_s,
                        s.gpu_utilization_percent
                            .map_or("unknown (no NVML)".into(), |u| format!(
                                "{u:.1}% ({} samples)",
                                s.samples
                            )),
                        s.steady_gpu_utilization_percent.map_or("unknown".into(), |u| format!(
                            "{u:.1}% ({} samples, {:.2} s)",
                            s.steady_samples, s.steady_window_s
                        ))
                    );
                    sustained_runs.push(s);
                }
                gpu_backend.unload(&path, &srs);
                drop(srs);
            }
        }
        let report = GpuReport {
            benchmark: "gpu",
            host: Host::detect(),
            gpu: gpu_desc,
            backend: backend.name(),
            busy_threads: args.busy_threads,
            cases,
            rows,
            comparisons,
            sustained: sustained_runs,
        };
        args.output.emit(&report, |r| {
            println!("pinprove bench gpu — {} — {}", r.host.summary(), r.gpu);
            println!(
                "backend {}, synthetic parameters (proofs do not verify; timings are real)",
                r.backend
            );
            for c in &r.cases {
                println!(
                    "  2^{} {}: SRS load {:.2} s{}",
                    c.log_size,
                    c.mix,
                    c.srs_load_s,
                    match (c.identical_to_cpu, c.identical_to_bellperson) {
                        (Some(a), Some(b)) => format!("; GPU proof identical to CPU backend {a}, to bellperson {b}"),
                        _ => String::new(),
                    }
                );
            }
            println!(
                "{:>4} {:<6} {:<4} {:<6} {:>9} {:>8} {:>9} {:>9} {:>10}",
                "k", "mix", "load", "mode", "synth s", "copy s", "gpu s", "e2e s", "upload GB/s"
            );
            for x in &r.rows {
                println!(
                    "2^{:<2} {:<6} {:<4} {:<6} {:>9.3} {:>8.3} {:>9.3} {:>9.3} {:>10.1}",
                    x.log_size,
                    x.mix,
                    x.load,
                    x.mode,
                    x.synthesis_s,
                    x.staging_copy_s,
                    x.gpu_proof_s,
                    x.end_to_end_s,
                    x.abc_upload_gbps
                );
            }
            for x in r.rows.iter().filter(|x| x.native_phases.is_some()) {
                let p = x.native_phases.as_ref().expect("filtered");
                let msms: Vec<String> = p
                    .msm
                    .iter()
                    .zip(pinprove_cuda::NativePhases::MSM_NAMES)
                    .zip(p.pippenger_points.iter().zip(&p.batched_points))
                    .map(|(((t, n), name), (pip, ones))| {
                        format!(
                            "{name} {:.3} s ({:.0} Mpts/s; {pip} Pippenger, {ones} batched)",
                            t.as_secs_f64(),
                            *n as f64 / t.as_secs_f64().max(1e-9) / 1e6
                        )
                    })
                    .collect();
                println!(
                    "  phases 2^{} {} {} {}: prep {:.3} s, lock/queue wait {:.3} s, queueing {:.3} s, \
                     host sums {:.3} s, a/b/c upload {:.1} ms ({:.1} GB/s), h {:.3} s (NTTs), MSMs {}{}",
                    x.log_size,
                    x.mix,
                    x.load,
                    x.mode,
                    p.preparation.as_secs_f64(),
                    p.device_wait.as_secs_f64(),
                    p.queueing.as_secs_f64(),
                    p.sums.as_secs_f64(),
                    p.upload.as_secs_f64() * 1e3,
                    p.abc_bytes as f64 / p.upload.as_secs_f64().max(1e-9) / 1e9,
                    p.h.as_secs_f64(),
                    msms.join(", "),
                    if p.resident_bases {
                        ", bases resident"
                    } else {
                        ", bases streamed"
                    }
                );
            }
            for x in &r.sustained {
                let pct = |u: Option<f64>| u.map_or("unknown".into(), |u| format!("{u:.1}%"));
                println!(
                    "  2^{} {}: {} proofs back to back, {:.2} proofs/s, mean GPU utilization {} \
                     (steady window {:.2} s: {}, {} samples)",
                    x.log_size,
                    x.mix,
                    x.proofs,
                    x.proofs_per_s,
                    pct(x.gpu_utilization_percent),
                    x.steady_window_s,
                    pct(x.steady_gpu_utilization_percent),
                    x.steady_samples
                );
            }
            for c in &r.comparisons {
                println!(
                    "  2^{} {}: {} {:.3} s against {} {:.3} s: {:.1}x, identical proofs {}",
                    c.log_size,
                    c.mix,
                    c.backend,
                    c.gpu_proof_s,
                    c.compare,
                    c.compare_gpu_proof_s,
                    c.speedup,
                    c.identical_proofs
                );
            }
        })
    }
}
