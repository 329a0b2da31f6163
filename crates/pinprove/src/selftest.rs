//! `pinprove selftest`: what an operator runs on a new host before pointing
//! Curio at it. It reports the host, the build and every GPU (whether
//! pinprove's kernels run on it, its PCIe link, and uploads from pinned and
//! heap memory), advises what each GPU and the host's memory will do with
//! each 32 GiB kind ([`pinprove::advice`]), then proves one proof of each
//! Filecoin kind at 2 KiB through a daemon in this process, each checked by
//! filecoin-proofs-api's verifier (`demo --all`). It ends with a verdict
//! and a failing exit status when anything would keep the daemon from
//! proving there. `--json` prints the checks and the advice as one JSON
//! object instead, without the proofs.

use anyhow::{Result, bail};
use clap::Args;
use pinprove_stack::BackendKind;

use crate::demo;
use pinprove::advice;
use pinprove::units::bytes;

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// The backend the proofs use (auto: the GPU when there is one).
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// Bytes per timed upload.
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "1GiB")]
    upload_size: u64,
    /// Only the host and GPU checks and the advice: no proofs.
    #[arg(long)]
    no_proofs: bool,
    /// Print the host, the GPUs, the advice and the problems found as one
    /// JSON object (no proofs).
    #[arg(long)]
    json: bool,
}

/// Uploads timed per kind of memory (after a warm-up); the median is shown.
const UPLOAD_REPS: usize = 5;
/// About what a PCIe 3.0 x16 link delivers from pinned memory: a GPU
/// uploading slower sits on a narrower or older link than a proving host
/// should have.
const SLOW_LINK_GBPS: f64 = 11.0;

pub fn run(args: &SelftestArgs) -> Result<()> {
    let mut report = Report::default();
    say(
        args,
        format!("pinprove selftest, version {}", env!("CARGO_PKG_VERSION")),
    );
    host(args, &mut report);
    gpus(args, &mut report);
    advise(args, &mut report);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if args.no_proofs {
        println!("proofs: skipped (--no-proofs)");
    } else if let Err(e) = demo::run(&demo::DemoArgs::every_kind(args.backend)) {
        report.problems.push(format!("proofs: {e:#}"));
    }
    if report.problems.is_empty() {
        say(args, "selftest: passed");
        return Ok(());
    }
    for p in &report.problems {
        say(args, format!("problem: {p}"));
    }
    bail!("selftest failed: {} problem(s), listed above", report.problems.len())
}

/// What the checks found, for `--json`.
#[derive(Default, serde::Serialize)]
struct Report {
    cores: usize,
    memory_bytes: Option<u64>,
    budget_bytes: u64,
    gpus: Vec<GpuReport>,
    advice: Vec<advice::GpuAdvice>,
    problems: Vec<String>,
}

#[derive(serde::Serialize)]
struct GpuReport {
    ordinal: usize,
    name: String,
    total_bytes: u64,
    free_bytes: u64,
    compute_capability: (u32, u32),
    supported: bool,
    pinned_upload_gbps: Option<f64>,
    heap_upload_gbps: Option<f64>,
}

/// A line for people (none with `--json`).
fn say(args: &SelftestArgs, line: impl std::fmt::Display) {
    if !args.json {
        println!("{line}");
    }
}

/// Each GPU's advice (or the CPU's, without one), printed.
fn advise(args: &SelftestArgs, report: &mut Report) {
    let targets: Vec<Option<(usize, u64)>> = if report.gpus.iter().any(|g| g.supported) {
        report
            .gpus
            .iter()
            .filter(|g| g.supported)
            .map(|g| Some((g.ordinal, g.free_bytes)))
            .collect()
    } else {
        vec![None]
    };
    for target in targets {
        let a = advice::advise(target, report.budget_bytes);
        match a.gpu {
            Some(g) => say(
                args,
                format!("advice for GPU {g} ({} free) at 32 GiB:", bytes(a.usable_bytes)),
            ),
            None => say(args, "advice for this host without a GPU at 32 GiB:"),
        }
        for k in &a.kinds {
            let device = match a.gpu {
                Some(_) => format!(
                    "GPU: bases {}{}{}",
                    k.bases,
                    k.matrices
                        .map_or(String::new(), |m| format!(", matrices {m:?}").to_lowercase()),
                    if k.proofs_at_once > 0 {
                        format!(", {} proof(s) on the GPU at once", k.proofs_at_once)
                    } else {
                        String::new()
                    }
                ),
                None => "the CPU backend".into(),
            };
            let measured = k
                .measured
                .iter()
                .map(|m| format!("{} on the {} GB class ({}, {})", m.figure, m.class_gb, m.on, m.date))
                .collect::<Vec<_>>()
                .join("; ");
            say(
                args,
                format!(
                    "  {:<8} {device}; host: parameters {} + a partition about {}{}{}",
                    k.kind,
                    bytes(k.srs_bytes),
                    bytes(k.partition_bytes),
                    if k.fits_host { "" } else { ": does not fit the budget" },
                    if measured.is_empty() {
                        String::new()
                    } else {
                        format!("; measured: {measured}")
                    },
                ),
            );
        }
        for s in &a.settings {
            say(args, format!("  set: {s}"));
        }
        for w in &a.warnings {
            say(args, format!("  warning: {w}"));
        }
        report.advice.push(a);
    }
}

fn host(args: &SelftestArgs, report: &mut Report) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let total = pinprove_mem::sys::mem_total_bytes();
    let limit = pinprove_mem::sys::cgroup_limit_bytes();
    report.cores = cores;
    report.memory_bytes = total;
    report.budget_bytes = pinprove_mem::BudgetConfig::default().resolve();
    say(
        args,
        format!(
            "host: {cores} cores, {} of memory{}, {} usable, a memory budget of {} (auto)",
            total.map_or_else(|| "an unknown amount".into(), bytes),
            limit.map_or_else(String::new, |l| format!(" (a cgroup limit of {})", bytes(l))),
            bytes(pinprove_mem::sys::usable_memory_bytes()),
            bytes(report.budget_bytes),
        ),
    );
}

fn gpus(args: &SelftestArgs, report: &mut Report) {
    let problems = &mut report.problems;
    let wants_gpu = args.backend != BackendKind::Cpu;
    if !pinprove_cuda::BUILT_WITH_CUDA {
        say(args, "build: without GPU support (proofs run on the CPU)");
        if matches!(args.backend, BackendKind::Native | BackendKind::Supraseal) {
            problems.push(format!(
                "the {} backend needs a build with the `cuda` feature",
                args.backend
            ));
        }
        return;
    }
    say(args, "build: with GPU support");
    let found = match pinprove_cuda::gpus() {
        Ok(g) => g,
        Err(e) => {
            say(args, format!("GPUs: none usable ({e})"));
            if wants_gpu {
                problems.push(format!("no usable GPU: {e}"));
            }
            return;
        }
    };
    if found.is_empty() && wants_gpu {
        problems.push("the CUDA driver sees no GPU".into());
    }
    for g in &found {
        let d = &g.device;
        let link = g.pcie.map_or_else(
            || "PCIe link unknown".into(),
            |l| {
                format!(
                    "PCIe {}.0 x{} (at most {}.0 x{})",
                    l.generation, l.width, l.max_generation, l.max_width
                )
            },
        );
        say(
            args,
            format!(
                "GPU {}: {}, {} ({} free), compute capability {}.{}, {link}, driver {} (CUDA {})",
                d.ordinal,
                d.name,
                bytes(d.total_memory),
                bytes(d.free_memory),
                d.compute_capability.0,
                d.compute_capability.1,
                g.driver_version.as_deref().unwrap_or("unknown"),
                d.driver_cuda(),
            ),
        );
        let mut gpu = GpuReport {
            ordinal: d.ordinal,
            name: d.name.clone(),
            total_bytes: d.total_memory,
            free_bytes: d.free_memory,
            compute_capability: d.compute_capability,
            supported: d.is_supported(),
            pinned_upload_gbps: None,
            heap_upload_gbps: None,
        };
        if !gpu.supported {
            let (major, minor) = pinprove_cuda::OLDEST_SUPPORTED;
            problems.push(format!(
                "GPU {} ({}) cannot run pinprove's kernels: they need compute capability {major}.{minor} or newer \
                 and cooperative launch; hide it with CUDA_VISIBLE_DEVICES",
                d.ordinal, d.name
            ));
            report.gpus.push(gpu);
            continue;
        }
        let size = usize::try_from(args.upload_size).unwrap_or(usize::MAX);
        match pinprove_cuda::measure_uploads(d.ordinal, size, UPLOAD_REPS) {
            Ok(r) => {
                say(
                    args,
                    format!(
                        "  uploads of {}: {:.1} GB/s from pinned memory, {:.1} GB/s from the heap ({:.1}x)",
                        bytes(r.bytes as u64),
                        r.pinned_gbps,
                        r.pageable_gbps,
                        r.pinned_gbps / r.pageable_gbps
                    ),
                );
                if r.pinned_gbps < SLOW_LINK_GBPS {
                    say(
                        args,
                        format!(
                            "  note: slower than a PCIe 3.0 x16 link (about {SLOW_LINK_GBPS} GB/s): \
                             check the slot and the link width"
                        ),
                    );
                }
                (gpu.pinned_upload_gbps, gpu.heap_upload_gbps) = (Some(r.pinned_gbps), Some(r.pageable_gbps));
            }
            Err(e) => problems.push(format!("GPU {}: uploads failed: {e}", d.ordinal)),
        }
        report.gpus.push(gpu);
    }
}
