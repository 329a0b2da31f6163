//! `pinprove-bench h2d`: upload bandwidth by kind of host memory.

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct H2dArgs {
    /// Upload sizes in GiB, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.5, 1.5, 4.0])]
    sizes_gib: Vec<f64>,
    /// Background threads loading RAM in the second pass (0 skips it).
    #[arg(long, default_value_t = 12)]
    load_threads: usize,
    /// Timed uploads per case after one warm-up; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    #[command(flatten)]
    output: crate::report::Output,
}

#[cfg(not(feature = "cuda"))]
pub fn run(_args: &H2dArgs) -> Result<()> {
    Err(crate::report::needs_gpu_build("`pinprove-bench h2d`"))
}

#[cfg(feature = "cuda")]
pub fn run(args: &H2dArgs) -> Result<()> {
    gpu::run(args)
}

#[cfg(feature = "cuda")]
mod gpu {
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, ensure};
    use pinprove_cuda::runtime::{self as cuda, DeviceBuffer, DeviceInfo, HostRegistration, Stream};
    use pinprove_mem::{GIB, MemoryBudget, PinnedVec, PoolConfig};
    use pinprove_stack::PoolMemory;
    use serde::Serialize;

    use super::H2dArgs;
    use crate::load::RamLoad;
    use crate::report::{Host, bytes, gbps, median};

    #[derive(Serialize)]
    struct Upload {
        size_bytes: u64,
        load_threads: usize,
        memory: &'static str,
        median_ms: f64,
        median_gbps: f64,
        best_gbps: f64,
    }

    #[derive(Serialize)]
    struct PinCost {
        size_bytes: u64,
        load_threads: usize,
        operation: &'static str,
        ms: f64,
    }

    #[derive(Serialize)]
    struct Device {
        name: String,
        pci_bus_id: String,
        total_memory: u64,
        driver_cuda_version: String,
        runtime_cuda_version: String,
    }

    #[derive(Serialize)]
    struct H2dReport {
        benchmark: &'static str,
        host: Host,
        device: Device,
        reps: usize,
        uploads: Vec<Upload>,
        pin_costs: Vec<PinCost>,
        load_copy_gbps: Option<f64>,
        pool_idle_min_gbps: f64,
        pool_target_gbps: f64,
    }

    pub fn run(args: &H2dArgs) -> Result<()> {
        ensure!(args.reps > 0, "--reps must be positive");
        ensure!(
            args.load_threads <= pinprove_engine::MAX_THREADS,
            "--load-threads {} is more than {} threads",
            args.load_threads,
            pinprove_engine::MAX_THREADS
        );
        ensure!(
            args.sizes_gib.iter().all(|&s| s > 0.0 && s <= 64.0),
            "sizes must be in (0, 64] GiB"
        );
        let info: DeviceInfo = cuda::device_info(args.device).context("no usable CUDA device")?;
        let sizes: Vec<usize> = args
            .sizes_gib
            .iter()
            .map(|g| ((g * GIB as f64) as usize).next_multiple_of(4096))
            .collect();
        let max = *sizes.iter().max().expect("at least one size");
        let budget = MemoryBudget::new(4 * max as u64 + GIB as u64);
        let pool_of = |pinning| {
            pinprove_stack::pool(
                &budget,
                PoolMemory::Pinned,
                pinning,
                PoolConfig {
                    idle_timeout: None,
                    ..PoolConfig::default()
                },
            )
            .context("CUDA pinned memory is unavailable")
        };
        let pool = pool_of(pinprove_mem::PinMethod::HostAlloc)?;
        let registered = pool_of(pinprove_mem::PinMethod::Register)?;
        let stream = Stream::new()?;
        let mut device_buf = DeviceBuffer::new(max).context("device buffer for the uploads")?;

        let mut uploads = Vec::new();
        let mut pin_costs = Vec::new();
        let mut load_rate = None;
        let passes: Vec<usize> = if args.load_threads > 0 {
            vec![0, args.load_threads]
        } else {
            vec![0]
        };
        for load_threads in passes {
            let load = (load_threads > 0)
                .then(|| RamLoad::start(load_threads, 256 << 20))
                .transpose()
                .context("starting the RAM load threads")?;
            for &size in &sizes {
                let mut measure = |memory: &'static str, src: &[u8]| -> Result<()> {
                    let mut samples = Vec::with_capacity(args.reps);
                    stream.timed_upload(&mut device_buf, src)?; // warm-up
                    for _ in 0..args.reps {
                        samples.push(stream.timed_upload(&mut device_buf, src)?);
                    }
                    let best = *samples.iter().min().expect("reps > 0");
                    let med = median(&mut samples);
                    uploads.push(Upload {
                        size_bytes: size as u64,
                        load_threads,
                        memory,
                        median_ms: med.as_secs_f64() * 1e3,
                        median_gbps: gbps(size as u64, med),
                        best_gbps: gbps(size as u64, best),
                    });
                    Ok(())
                };
                let mut cost = |operation: &'static str, d: Duration| {
                    pin_costs.push(PinCost {
                        size_bytes: size as u64,
                        load_threads,
                        operation,
                        ms: d.as_secs_f64() * 1e3,
                    })
                };

                {
                    let heap = vec![0x5au8; size];
                    measure("pageable heap", &heap)?;
                }
                // The pool's two ways to pin: cudaHostAlloc, and huge-page
                // memory faulted in by this thread, then cudaHostRegister.
                for (pool, fill, pin, upload, free) in [
                    (
                        &pool,
                        0xa5,
                        "cudaHostAlloc (pool, fresh)",
                        "pool buffer (cudaHostAlloc)",
                        "cudaFreeHost",
                    ),
                    (
                        &registered,
                        0x96,
                        "mmap + cudaHostRegister (pool, fresh)",
                        "pool buffer (registered)",
                        "cudaHostUnregister + munmap",
                    ),
                ] {
                    let t = Instant::now();
                    let mut v = PinnedVec::<u8>::with_capacity_in(size, pool)?;
                    cost(pin, t.elapsed());
                    v.resize(size, fill);
                    measure(upload, &v)?;
                    drop(v);
                    let t = Instant::now();
                    pool.clear_idle();
                    cost(free, t.elapsed());
                }
                {
                    let mut heap = vec![0x3cu8; size];
                    let t = Instant::now();
                    let reg = HostRegistration::new(&mut heap)?;
                    cost("cudaHostRegister", t.elapsed());
                    measure("cudaHostRegister'ed heap", reg.as_slice())?;
                    let t = Instant::now();
                    drop(reg);
                    cost("cudaHostUnregister", t.elapsed());
                }
            }
            if let Some(l) = &load {
                load_rate = Some(l.copy_rate_gbps());
            }
        }

        let pool_idle_min = uploads
            .iter()
            .filter(|u| u.load_threads == 0 && u.memory.starts_with("pool"))
            .map(|u| u.median_gbps)
            .fold(f64::INFINITY, f64::min);
        let report = H2dReport {
            benchmark: "h2d",
            host: Host::detect(),
            device: Device {
                name: info.name.clone(),
                pci_bus_id: info.pci_bus_id.clone(),
                total_memory: info.total_memory,
                driver_cuda_version: info.driver_cuda(),
                runtime_cuda_version: info.runtime_cuda(),
            },
            reps: args.reps,
            uploads,
            pin_costs,
            load_copy_gbps: load_rate,
            pool_idle_min_gbps: pool_idle_min,
            pool_target_gbps: 50.0,
        };
        args.output.emit(&report, print_summary)
    }

    fn print_summary(r: &H2dReport) {
        println!("pinprove-bench h2d — {}", r.host.summary());
        println!(
            "device: {} ({}), {}, driver CUDA {}, runtime {}",
            r.device.name,
            r.device.pci_bus_id,
            bytes(r.device.total_memory),
            r.device.driver_cuda_version,
            r.device.runtime_cuda_version
        );
        println!(
            "\nupload bandwidth, median of {} (best), one cudaMemcpyAsync timed with events:",
            r.reps
        );
        println!(
            "  {:>10}  {:>5}  {:<30} {:>10} {:>10} {:>10}",
            "size", "load", "host memory", "ms", "GB/s", "best"
        );
        for u in &r.uploads {
            println!(
                "  {:>10}  {:>5}  {:<30} {:>10.2} {:>10.2} {:>10.2}",
                bytes(u.size_bytes),
                u.load_threads,
                u.memory,
                u.median_ms,
                u.median_gbps,
                u.best_gbps
            );
        }
        println!("\ncost of pinning:");
        for c in &r.pin_costs {
            println!(
                "  {:>10}  load {:>3}  {:<30} {:>9.1} ms",
                bytes(c.size_bytes),
                c.load_threads,
                c.operation,
                c.ms
            );
        }
        if let Some(rate) = r.load_copy_gbps {
            println!("\nbackground load copied {rate:.1} GB/s");
        }
        println!(
            "pool buffer, idle: slowest size {:.1} GB/s against the {:.0} GB/s target: {}",
            r.pool_idle_min_gbps,
            r.pool_target_gbps,
            if r.pool_idle_min_gbps >= r.pool_target_gbps {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}
