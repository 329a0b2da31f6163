//! `pinprove selftest`: what an operator runs on a new host before pointing
//! Curio at it. It reports the host, the build and every GPU (whether
//! pinprove's kernels run on it, its PCIe link, and uploads from pinned and
//! heap memory), then proves one proof of each Filecoin kind at 2 KiB
//! through a daemon in this process, each checked by filecoin-proofs-api's
//! verifier (`demo --all`). It ends with a verdict and a failing exit status
//! when anything would keep the daemon from proving there.

use anyhow::{Result, bail};
use clap::Args;
use pinprove_engine::assembly::BackendKind;

use crate::demo;
use pinprove::units::bytes;

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// The backend the proofs use (auto: the GPU when there is one).
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// Bytes per timed upload.
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "1GiB")]
    upload_size: u64,
    /// Only the host and GPU checks: no proofs.
    #[arg(long)]
    no_proofs: bool,
}

/// Uploads timed per kind of memory (after a warm-up); the median is shown.
const UPLOAD_REPS: usize = 5;
/// About what a PCIe 3.0 x16 link delivers from pinned memory: a GPU
/// uploading slower sits on a narrower or older link than a proving host
/// should have.
const SLOW_LINK_GBPS: f64 = 11.0;

pub fn run(args: &SelftestArgs) -> Result<()> {
    println!("pinprove selftest, version {}", env!("CARGO_PKG_VERSION"));
    let mut problems = Vec::new();
    host();
    gpus(args, &mut problems);
    if args.no_proofs {
        println!("proofs: skipped (--no-proofs)");
    } else if let Err(e) = demo::run(&demo::DemoArgs::every_kind(args.backend)) {
        problems.push(format!("proofs: {e:#}"));
    }
    if problems.is_empty() {
        println!("selftest: passed");
        return Ok(());
    }
    for p in &problems {
        println!("problem: {p}");
    }
    bail!("selftest failed: {} problem(s), listed above", problems.len())
}

fn host() {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let total = pinprove_mem::sys::mem_total_bytes();
    let limit = pinprove_mem::sys::cgroup_limit_bytes();
    println!(
        "host: {cores} cores, {} of memory{}, {} usable",
        total.map_or_else(|| "an unknown amount".into(), bytes),
        limit.map_or_else(String::new, |l| format!(" (a cgroup limit of {})", bytes(l))),
        bytes(pinprove_mem::sys::usable_memory_bytes()),
    );
}

fn gpus(args: &SelftestArgs, problems: &mut Vec<String>) {
    let wants_gpu = args.backend != BackendKind::Cpu;
    if !pinprove_cuda::BUILT_WITH_CUDA {
        println!("build: without GPU support (proofs run on the CPU)");
        if matches!(args.backend, BackendKind::Native | BackendKind::Supraseal) {
            problems.push(format!(
                "the {} backend needs a build with the `cuda` feature",
                args.backend
            ));
        }
        return;
    }
    println!("build: with GPU support");
    let found = match pinprove_cuda::gpus() {
        Ok(g) => g,
        Err(e) => {
            println!("GPUs: none usable ({e})");
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
        println!(
            "GPU {}: {}, {} ({} free), compute capability {}.{}, {link}, driver {} (CUDA {})",
            d.ordinal,
            d.name,
            bytes(d.total_memory),
            bytes(d.free_memory),
            d.compute_capability.0,
            d.compute_capability.1,
            g.driver_version.as_deref().unwrap_or("unknown"),
            d.driver_cuda(),
        );
        if !d.is_supported() {
            let (major, minor) = pinprove_cuda::OLDEST_SUPPORTED;
            problems.push(format!(
                "GPU {} ({}) cannot run pinprove's kernels: they need compute capability {major}.{minor} or newer \
                 and cooperative launch; hide it with CUDA_VISIBLE_DEVICES",
                d.ordinal, d.name
            ));
            continue;
        }
        let size = usize::try_from(args.upload_size).unwrap_or(usize::MAX);
        match pinprove_cuda::measure_uploads(d.ordinal, size, UPLOAD_REPS) {
            Ok(r) => {
                println!(
                    "  uploads of {}: {:.1} GB/s from pinned memory, {:.1} GB/s from the heap ({:.1}x)",
                    bytes(r.bytes as u64),
                    r.pinned_gbps,
                    r.pageable_gbps,
                    r.pinned_gbps / r.pageable_gbps
                );
                if r.pinned_gbps < SLOW_LINK_GBPS {
                    println!(
                        "  note: slower than a PCIe 3.0 x16 link (about {SLOW_LINK_GBPS} GB/s): \
                         check the slot and the link width"
                    );
                }
            }
            Err(e) => problems.push(format!("GPU {}: uploads failed: {e}", d.ordinal)),
        }
    }
}
