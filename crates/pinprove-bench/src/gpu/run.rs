//! The benchmark's cases, measured and reported.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use pinprove_cuda::runtime::{DeviceBuffer, Stream};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::precompiled::{defer, record, synthesize_witness};
use pinprove_groth16::{AbcLayout, CapacityHints, ProofBatch, synthesize};
use pinprove_mem::{BudgetConfig, MemoryBudget, PinnedPool, PoolConfig};
use pinprove_stack::{BackendKind, BuiltBackend, NativeOptions, PoolMemory};
use serde::Serialize;

use super::GpuArgs;
use crate::params_cache::{ParamsCache, ParamsKind};
use crate::report::{Host, gbps, median};

use super::checks::{Comparison, compare_case, cross_check, load, rs, upload_abc};
use super::sustained::{Busy, Sustained, sustained};

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

/// A GPU backend of `kind` on GPU `device`.
fn gpu_backend(kind: BackendKind, pinned: &Arc<PinnedPool>, device: usize) -> Result<BuiltBackend> {
    if !kind.is_gpu() {
        bail!("`pinprove-bench gpu` measures a GPU backend (native or supraseal), not {kind}");
    }
    if kind == BackendKind::Supraseal && device != 0 {
        bail!("supraseal-c2 picks its GPUs itself: --device {device} applies to the native backend only");
    }
    Ok(pinprove_stack::backend(
        kind,
        pinned,
        device,
        &NativeOptions::default(),
    )?)
}

fn phases(b: &BuiltBackend) -> Option<pinprove_cuda::NativePhases> {
    match b {
        BuiltBackend::Gpu(pinprove_cuda::GpuBackend::Native(n)) => n.last_phases(),
        _ => None,
    }
}

pub(super) fn run(args: &GpuArgs) -> Result<()> {
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
    let pinned = pinprove_stack::pool(&budget, PoolMemory::Pinned, Default::default(), PoolConfig::default())?;
    let heap = pinprove_stack::pool(&budget, PoolMemory::Heap, Default::default(), PoolConfig::default())?;
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
                            .prove(ProofBatch::new(Arc::clone(&srs), vec![asg], vec![rs()]))?
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
