//! `pinprove-bench gpu`: the upload experiment.
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
use pinprove_engine::assembly::BackendKind;

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
    /// log size (above it, every timed proof is still compared with the
    /// case's first one).
    #[arg(long, default_value_t = 20)]
    check_max_log: u32,
    /// Where synthetic parameters are written (created when missing).
    #[arg(long)]
    params_dir: Option<std::path::PathBuf>,
    /// The GPU backend: supraseal (supraseal-c2) or native (pinprove's own).
    #[arg(long, value_enum, default_value_t = BackendKind::Supraseal)]
    backend: BackendKind,
    /// The GPU to measure, by CUDA ordinal (the native backend; supraseal-c2
    /// picks its GPUs itself).
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also prove every case with this backend from pool buffers: its
    /// median GPU proof time, and whether the two backends' proofs are
    /// byte-identical (same r and s).
    #[arg(long, value_enum)]
    compare: Option<BackendKind>,
    /// After each case, prove this many partitions (synthesized beforehand
    /// into pool buffers) back to back on one thread and report proofs per
    /// second and the mean NVML GPU utilization meanwhile: how busy one
    /// worker alone keeps the GPU (0 skips; pick enough for a few seconds).
    #[arg(long, default_value_t = 0)]
    sustained: usize,
    /// Where a/b/c are synthesized, comma-separated: heap, staged, pinned;
    /// or precompiled (witness only, into pinned buffers, from a recording
    /// made once per case; the native backend computes a/b/c on the GPU).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["heap".to_string(), "staged".to_string(), "pinned".to_string()], value_parser = ["heap", "staged", "pinned", "precompiled"])]
    modes: Vec<String>,
    #[command(flatten)]
    output: Output,
}

#[cfg(not(feature = "cuda"))]
pub fn run(_args: &GpuArgs) -> Result<()> {
    Err(crate::report::needs_gpu_build("`pinprove-bench gpu`"))
}

#[cfg(feature = "cuda")]
pub fn run(args: &GpuArgs) -> Result<()> {
    imp::run(args)
}

#[cfg(feature = "cuda")]
mod imp {
    use std::hint::black_box;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, bail, ensure};
    use pinprove_cuda::runtime::{DeviceBuffer, Stream};
    use pinprove_engine::assembly::{self, BackendKind, BuiltBackend, NativeOptions, PoolMemory};
    use pinprove_engine::timeline::analysis::mean;
    use pinprove_groth16::baseline::VecAssignment;
    use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
    use pinprove_groth16::precompiled::{defer, record, synthesize_witness};
    use pinprove_groth16::{
        AbcLayout, Backend, CapacityHints, Proof, ProveError, ProvingAssignment, ProvingJob, Scalar, Srs, Validation,
        synthesize,
    };
    use pinprove_mem::{BudgetConfig, MemoryBudget, PinnedPool, PoolConfig};
    use serde::Serialize;

    use super::GpuArgs;
    use crate::report::{Host, NVML_LAG, gbps, median};
    use pinprove::params_cache::{ParamsCache, ParamsKind};

    /// The (r, s) of every proof this benchmark makes: the same circuit then
    /// always gives the same bytes, so every timed proof can be compared
    /// with the case's checked one at no cost.
    fn rs() -> (Scalar, Scalar) {
        (Scalar::from(3u64), Scalar::from(5u64))
    }

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
        /// Timed proofs of the case, every one compared with the reference:
        /// the checked proof when there is one, else the case's first proof.
        timed_proofs: usize,
        timed_proofs_identical: bool,
        /// "CPU backend and bellperson", or "the first timed proof (not
        /// checked)".
        reference: &'static str,
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
        /// Whether every proof was byte-identical to the case's reference.
        identical_to_reference: bool,
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
        reference: &Proof,
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
        type Run = (Duration, Samples, (Instant, Instant), bool);
        let (wall, samples, steady, identical) = thread::scope(|s| -> Result<Run> {
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
            let check = |p: Vec<Proof>| p.iter().all(|p| p.to_bytes() == reference.to_bytes());
            let proved = (|| -> Result<bool, ProveError> {
                let mut identical = true;
                for (i, asg) in partitions.into_iter().enumerate() {
                    let job = ProvingJob::new(Arc::clone(srs), vec![asg], vec![rs()]);
                    in_flight.push_back(backend.start(job)?);
                    if i == 0 {
                        steady.0 = Instant::now();
                    }
                    if in_flight.len() == 2 {
                        identical &= check(in_flight.pop_front().expect("two in flight").finish()?);
                    }
                }
                while let Some(p) = in_flight.pop_front() {
                    if in_flight.is_empty() {
                        steady.1 = Instant::now();
                    }
                    identical &= check(p.finish()?);
                }
                Ok(identical)
            })();
            let wall = t.elapsed();
            stop.store(true, Ordering::Relaxed);
            let samples = sampler.join().unwrap_or_default();
            Ok((wall, samples, steady, proved?))
        })?;
        let all: Vec<f64> = samples.iter().map(|x| x.1).collect();
        let in_steady: Vec<f64> = samples
            .iter()
            .filter(|(at, _)| *at >= steady.0 + NVML_LAG && *at <= steady.1)
            .map(|x| x.1)
            .collect();
        Ok(Sustained {
            log_size: pinprove_groth16::domain::domain_size(circuit.constraints())?.trailing_zeros(),
            mix: circuit.mix().to_string(),
            proofs: n,
            wall_s: wall.as_secs_f64(),
            proofs_per_s: n as f64 / wall.as_secs_f64().max(1e-9),
            gpu_utilization_percent: mean(&all),
            samples: all.len(),
            steady_gpu_utilization_percent: mean(&in_steady),
            steady_samples: in_steady.len(),
            steady_window_s: steady.1.saturating_duration_since(steady.0).as_secs_f64(),
            identical_to_reference: identical,
        })
    }

    /// Threads synthesizing copies of a circuit until dropped.
    struct Busy {
        stop: Arc<AtomicBool>,
        threads: Vec<thread::JoinHandle<()>>,
    }

    impl Busy {
        fn start(n: usize, circuit: &BenchCircuit) -> Result<Busy> {
            let stop = Arc::new(AtomicBool::new(false));
            // Threads started so far are stopped by `Busy`'s drop if a
            // later one cannot start.
            let mut busy = Busy {
                stop: Arc::clone(&stop),
                threads: Vec::with_capacity(n),
            };
            for i in 0..n {
                let (stop, c) = (Arc::clone(&stop), circuit.clone().with_seed(1000 + i as u64));
                let t = thread::Builder::new()
                    .name(format!("busy-{i}"))
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            if let Ok(cs) = VecAssignment::synthesize(c.clone()) {
                                black_box(cs);
                            }
                        }
                    })
                    .context("starting a busy thread")?;
                busy.threads.push(t);
            }
            Ok(busy)
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

    /// Proves `circuit` once on the GPU, once with the CPU backend and once
    /// with bellperson, same parameters, r and s; are the bytes equal? Also
    /// returns the GPU proof, the reference for the case's timed proofs.
    fn cross_check(
        circuit: &BenchCircuit,
        path: &Path,
        loaded: &Arc<Srs>,
        gpu: &dyn Backend,
        pool: &Arc<PinnedPool>,
    ) -> Result<(bool, bool, Proof)> {
        let rs = rs();
        let hints = CapacityHints::in_memory();
        let job = |srs: &Arc<Srs>, layout| -> Result<ProvingJob> {
            let (asg, _) = synthesize(circuit.clone(), &circuit.id(), pool, &hints, layout, None)?;
            Ok(ProvingJob::new(Arc::clone(srs), vec![asg], vec![rs]))
        };
        let proof = gpu.prove(job(loaded, AbcLayout::Exact)?)?.remove(0);
        let on_gpu = proof.to_bytes();
        let full = Arc::new(Srs::read_file(path, pool, Validation::OnCurve)?);
        let cpu = assembly::backend(BackendKind::Cpu, pool, 0, &NativeOptions::default())?.as_dyn();
        let on_cpu = cpu.prove(job(&full, AbcLayout::PaddedToDomain)?)?.remove(0).to_bytes();
        drop(full);
        let params = crate::reference::read(path)?;
        let theirs = crate::reference::prove(circuit.clone(), &params, rs.0, rs.1)?;
        Ok((on_gpu == on_cpu, on_gpu.to_vec() == theirs, proof))
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
        (ours, our_proof, our_time): (&dyn Backend, &Proof, f64),
        other: &dyn Backend,
        pinned: &Arc<PinnedPool>,
        (runs, reps): (usize, usize),
    ) -> Result<Comparison> {
        let (srs, _) = load(other, path, pinned)?;
        let hints = CapacityHints::in_memory();
        let rs = rs();
        let job = |srs: &Arc<Srs>| -> Result<ProvingJob> {
            let (asg, _) = synthesize(circuit.clone(), &circuit.id(), pinned, &hints, AbcLayout::Exact, None)?;
            Ok(ProvingJob::new(Arc::clone(srs), vec![asg], vec![rs]))
        };
        let mut times = Vec::new();
        let mut theirs = None;
        for run in 0..runs {
            let j = job(&srs)?;
            let t = Instant::now();
            let p = other.prove(j)?.remove(0);
            if run + reps >= runs {
                times.push(t.elapsed());
            }
            theirs = Some(p);
        }
        other.evict_srs(&srs);
        let theirs_s = median(&mut times).as_secs_f64();
        let identical = theirs.is_some_and(|p| p.to_bytes() == our_proof.to_bytes());
        eprintln!(
            "{}: {} {:.3} s, {} {:.3} s, identical proofs: {identical}",
            circuit.id(),
            ours.name(),
            our_time,
            other.name(),
            theirs_s
        );
        Ok(Comparison {
            log_size: log,
            mix: circuit.mix().to_string(),
            backend: ours.name(),
            gpu_proof_s: our_time,
            compare: other.name(),
            compare_gpu_proof_s: theirs_s,
            speedup: theirs_s / our_time.max(1e-9),
            identical_proofs: identical,
        })
    }

    /// The parameters as `backend` wants them (decoded points, or only the
    /// header for a backend that loads the file itself), prepared on it;
    /// and the time that took.
    fn load(backend: &dyn Backend, path: &Path, pinned: &Arc<PinnedPool>) -> Result<(Arc<Srs>, Duration)> {
        let t = Instant::now();
        let srs = if backend.capabilities().needs_srs_points {
            Srs::read_file(path, pinned, Validation::OnCurve)?
        } else {
            Srs::read_file_header(path)?
        };
        backend.prepare_srs(&srs)?;
        Ok((Arc::new(srs), t.elapsed()))
    }

    /// A GPU backend of `kind` on GPU `device`.
    fn gpu_backend(kind: BackendKind, pinned: &Arc<PinnedPool>, device: usize) -> Result<BuiltBackend> {
        if !kind.is_gpu() {
            bail!("`pinprove-bench gpu` measures a GPU backend (native or supraseal), not {kind}");
        }
        if kind == BackendKind::Supraseal && device != 0 {
            bail!("supraseal-c2 picks its GPUs itself: --device {device} applies to the native backend only");
        }
        Ok(assembly::backend(kind, pinned, device, &NativeOptions::default())?)
    }

    fn phases(b: &BuiltBackend) -> Option<pinprove_cuda::NativePhases> {
        match b {
            BuiltBackend::Gpu(pinprove_cuda::GpuBackend::Native(n)) => n.last_phases(),
            _ => None,
        }
    }

    pub fn run(args: &GpuArgs) -> Result<()> {
        ensure!(args.reps > 0, "--reps must be positive");
        ensure!(
            args.busy_threads <= pinprove_engine::MAX_THREADS,
            "--busy-threads {} is more than {} threads",
            args.busy_threads,
            pinprove_engine::MAX_THREADS
        );
        let gpus = pinprove_cuda::gpus().context("no usable CUDA device")?;
        let gpu = gpus
            .get(args.device)
            .with_context(|| format!("no CUDA device {} (this machine has {})", args.device, gpus.len()))?;
        let gpu_desc = format!(
            "{} ({:.0} GiB), driver {} (CUDA {}), PCIe gen {} x{}",
            gpu.device.name,
            gpu.device.total_memory as f64 / (1u64 << 30) as f64,
            gpu.driver_version.clone().unwrap_or_else(|| "?".into()),
            gpu.device.driver_cuda(),
            gpu.pcie.map_or(0, |p| p.max_generation),
            gpu.pcie.map_or(0, |p| p.max_width)
        );
        let cache = ParamsCache::new(args.params_dir.as_deref());
        let budget = MemoryBudget::from_config(&BudgetConfig::default());
        let pinned = assembly::pool(&budget, PoolMemory::Pinned, Default::default(), PoolConfig::default())?;
        let heap = assembly::pool(&budget, PoolMemory::Heap, Default::default(), PoolConfig::default())?;
        let built = gpu_backend(args.backend, &pinned, args.device)?;
        let backend_arc = built.as_dyn();
        let backend = backend_arc.as_ref();
        let compare = args.compare.map(|c| gpu_backend(c, &pinned, args.device)).transpose()?;
        let mut comparisons = Vec::new();
        // The side stream and buffer of the upload timings, on the GPU measured.
        pinprove_cuda::runtime::set_device(args.device)?;
        pinprove_cuda::runtime::pin_with_device(Some(args.device));
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
                let (path, written) = cache.ensure(&circuit, ParamsKind::Synthetic)?;
                let (srs, srs_load) = load(backend, &path, &pinned)?;
                eprintln!(
                    "{id}: parameters ready ({}), SRS loaded in {:.2} s",
                    path.display(),
                    srs_load.as_secs_f64()
                );
                let (identical_to_cpu, identical_to_bellperson, mut reference) = if log <= args.check_max_log {
                    let (c, b, proof) = cross_check(&circuit, &path, &srs, backend, &pinned)?;
                    eprintln!("{id}: GPU proof identical to CPU backend: {c}, to bellperson: {b}");
                    (Some(c), Some(b), Some(proof))
                } else {
                    eprintln!("{id}: not checked against the CPU backend and bellperson (above --check-max-log)");
                    (None, None, None)
                };
                let checked = reference.is_some();
                let (mut timed_proofs, mut timed_identical) = (0, true);
                let mut dev = DeviceBuffer::new(32usize << log)?;
                let hints = CapacityHints::in_memory();
                let recording = if args.modes.iter().any(|m| m == "precompiled") {
                    let t = Instant::now();
                    let r = Arc::new(record(circuit.clone(), &id)?);
                    eprintln!(
                        "{id}: recorded in {:.2} s ({} non-zero entries, {:.1} MiB)",
                        t.elapsed().as_secs_f64(),
                        r.stats().nnz.iter().sum::<usize>(),
                        r.stats().bytes as f64 / (1u64 << 20) as f64
                    );
                    Some(r)
                } else {
                    None
                };
                let loads: &[&'static str] = if args.busy_threads > 0 && log <= args.busy_max_log {
                    &["idle", "busy"]
                } else {
                    &["idle"]
                };
                for &load in loads {
                    let _busy = (load == "busy")
                        .then(|| Busy::start(args.busy_threads, &circuit))
                        .transpose()?;
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
                            let (asg, spilled) = match (mode, &recording) {
                                ("precompiled", Some(rec)) => {
                                    let w = synthesize_witness(circuit.clone(), rec, &pinned, None)?;
                                    (defer(Arc::clone(rec), w, &mut None)?, 0)
                                }
                                ("pinned", _) => {
                                    let (asg, stats) =
                                        synthesize(circuit.clone(), &id, &pinned, &hints, AbcLayout::Exact, None)?;
                                    (asg, stats.spills)
                                }
                                _ => {
                                    let (asg, stats) =
                                        synthesize(circuit.clone(), &id, &heap, &fresh, AbcLayout::Exact, None)?;
                                    (asg, stats.spills)
                                }
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
                            let proof = backend
                                .prove(ProvingJob::new(Arc::clone(&srs), vec![asg], vec![rs()]))?
                                .remove(0);
                            let t4 = Instant::now();
                            // Every proof of the case, warm-ups too, against the reference.
                            let reference = reference.get_or_insert(proof);
                            timed_identical &= proof.to_bytes() == reference.to_bytes();
                            timed_proofs += 1;
                            phases = self::phases(&built);
                            spills = spilled;
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
                        if let Some(p) = row.native_phases.as_ref().filter(|p| p.witness_bytes > 0) {
                            eprintln!(
                                "    a/b/c on the GPU: witness {:.1} MiB uploaded in {:.3} s, a/b/c computed in {:.3} s, h {:.3} s",
                                p.witness_bytes as f64 / (1u64 << 20) as f64,
                                p.upload.as_secs_f64(),
                                p.evaluation.as_secs_f64(),
                                p.h.as_secs_f64()
                            );
                        }
                        rows.push(row);
                    }
                }
                let reference = reference.context("no proof was made")?;
                if !timed_identical {
                    eprintln!("{id}: timed proofs DIFFER from the reference proof");
                }
                cases.push(Case {
                    log_size: log,
                    mix: mix.to_string(),
                    params: crate::report::file_name(&path),
                    synthetic_params: true,
                    params_write_s: written.map(|d| d.as_secs_f64()),
                    srs_load_s: srs_load.as_secs_f64(),
                    identical_to_cpu,
                    identical_to_bellperson,
                    timed_proofs,
                    timed_proofs_identical: timed_identical,
                    reference: if checked {
                        "CPU backend and bellperson"
                    } else {
                        "the first timed proof (not checked)"
                    },
                });
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
                        (backend, &reference, ours),
                        other.as_dyn().as_ref(),
                        &pinned,
                        (args.reps + usize::from(!args.no_warmup), args.reps),
                    )?);
                }
                if args.sustained > 0 {
                    let s = sustained(
                        backend,
                        &srs,
                        &circuit,
                        &pinned,
                        &gpu.device.pci_bus_id,
                        args.sustained,
                        &reference,
                    )?;
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
                backend.evict_srs(&srs);
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
            println!("pinprove-bench gpu — {} — {}", r.host.summary(), r.gpu);
            println!(
                "backend {}, synthetic parameters (proofs do not verify; timings are real)",
                r.backend
            );
            for c in &r.cases {
                println!(
                    "  2^{} {}: SRS load {:.2} s; {}; {} timed proofs {} {}",
                    c.log_size,
                    c.mix,
                    c.srs_load_s,
                    match (c.identical_to_cpu, c.identical_to_bellperson) {
                        (Some(a), Some(b)) => format!("GPU proof identical to CPU backend {a}, to bellperson {b}"),
                        _ => "not checked against the CPU backend and bellperson".to_string(),
                    },
                    c.timed_proofs,
                    if c.timed_proofs_identical {
                        "identical to"
                    } else {
                        "DIFFERENT from"
                    },
                    c.reference
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
