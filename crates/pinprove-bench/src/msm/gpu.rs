//! `pinprove-bench msm` on a GPU: bases made once per group at its largest
//! size (pinned, so that streamed windows fill at PCIe speed), then every
//! size's cases on their prefix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use group::Group as _;
use pinprove_cuda::base_tables::TablePlan;
use pinprove_cuda::msm_lab::{self, HostBases, LabBases, LabKernel, LabScalars, MsmValue, ResidentBases};
use pinprove_groth16::msm::{g1_msm, g2_msm, to_bytes};
use pinprove_groth16::synthetic::{g1_multiples, g2_multiples};
use pinprove_mem::{GIB, MemoryBudget, PinnedPool, PinnedVec, PoolConfig};
use pinprove_stack::PoolMemory;

use super::{
    CaseReport, CheckReport, Classes, Group, Kernel, Mix, MsmArgs, MsmReport, Placement, TableReport,
    generator_multiple,
};
use crate::report::{Host, bytes, median};

/// Device memory an MSM takes beyond its bases and device scalars, at
/// most (Pippenger's digits and buckets for a 2^25 part, a call's
/// gathered points): what a case must find free besides.
const SCRATCH: u64 = 4 * GIB as u64;

/// Host memory left to everything else when the bases are made.
const HOST_MARGIN: u64 = 8 * GIB as u64;

fn point_bytes(group: Group) -> u64 {
    match group {
        Group::G1 => std::mem::size_of::<blst_p1_affine>() as u64,
        Group::G2 => std::mem::size_of::<blst_p2_affine>() as u64,
    }
}

/// One group's bases (i+1)·G, pinned.
enum HostPoints {
    G1(PinnedVec<blst_p1_affine>),
    G2(PinnedVec<blst_p2_affine>),
}

impl HostPoints {
    fn make(group: Group, n: usize, pool: &Arc<PinnedPool>) -> Result<HostPoints> {
        Ok(match group {
            Group::G1 => {
                let mut v = PinnedVec::with_capacity_in(n, pool)?;
                v.try_resize_par(n, blst_p1_affine::default())?;
                g1_multiples(0, &mut v);
                HostPoints::G1(v)
            }
            Group::G2 => {
                let mut v = PinnedVec::with_capacity_in(n, pool)?;
                v.try_resize_par(n, blst_p2_affine::default())?;
                g2_multiples(0, &mut v);
                HostPoints::G2(v)
            }
        })
    }

    /// The first `n`.
    fn bases(&self, n: usize) -> HostBases<'_> {
        match self {
            HostPoints::G1(v) => HostBases::G1(&v[..n]),
            HostPoints::G2(v) => HostBases::G2(&v[..n]),
        }
    }

    /// The CPU's MSM (blst) of the first `scalars.len()` bases.
    fn cpu_msm(&self, scalars: &[Scalar]) -> MsmValue {
        let k = to_bytes(scalars);
        match self {
            HostPoints::G1(v) => MsmValue::G1(g1_msm(&v[..k.len()], &k).0),
            HostPoints::G2(v) => MsmValue::G2(g2_msm(&v[..k.len()], &k).0),
        }
    }
}

/// m·G in `group`.
fn known(group: Group, m: Scalar) -> MsmValue {
    match group {
        Group::G1 => MsmValue::G1(G1Projective::generator() * m),
        Group::G2 => MsmValue::G2(G2Projective::generator() * m),
    }
}

struct Bench<'a> {
    args: &'a MsmArgs,
    pool: Arc<PinnedPool>,
    threads: rayon::ThreadPool,
    report: MsmReport,
    setup: Duration,
}

pub(super) fn run(args: &MsmArgs) -> Result<()> {
    let gpus = pinprove_cuda::gpus().context("no usable CUDA device")?;
    let gpu = gpus
        .get(args.device)
        .with_context(|| format!("no CUDA device {} (this machine has {})", args.device, gpus.len()))?;
    let d = &gpu.device;
    let host = Host::detect();
    let budget = MemoryBudget::new(host.memory_bytes.max(GIB as u64));
    let pool = pinprove_stack::pool(
        &budget,
        PoolMemory::Pinned,
        Default::default(),
        PoolConfig {
            idle_timeout: None,
            ..PoolConfig::default()
        },
    )
    .context("CUDA pinned memory is unavailable")?;
    let mut bench = Bench {
        args,
        pool,
        threads: rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("msm-sum-{i}"))
            .build()?,
        report: MsmReport {
            benchmark: "msm",
            host,
            gpu: format!(
                "{} ({}, {} SMs, compute {}.{}), CUDA {} driver, {} runtime, {}",
                d.name,
                bytes(d.total_memory),
                d.multiprocessors,
                d.compute_capability.0,
                d.compute_capability.1,
                d.driver_cuda(),
                d.runtime_cuda(),
                d.pci_bus_id
            ),
            driver: gpu.driver_version.clone(),
            reps: args.reps,
            window: args.window.unwrap_or(msm_lab::MAX_WINDOW),
            batch_entries: args.batch_entries,
            checks: Vec::new(),
            tables: Vec::new(),
            cases: Vec::new(),
            skipped: Vec::new(),
            setup_s: 0.0,
        },
        setup: Duration::ZERO,
    };
    let mut groups = args.groups.clone();
    groups.sort_unstable();
    groups.dedup();
    for group in groups {
        bench.group(group)?;
    }
    bench.report.setup_s = bench.setup.as_secs_f64();
    args.output.emit(&bench.report, MsmReport::print)?;
    bench.report.verdict()
}

impl Bench<'_> {
    /// Every size of `group`: its bases made once, at the largest size
    /// that fits in host memory.
    fn group(&mut self, group: Group) -> Result<()> {
        let mut sizes = self.args.log_sizes(group)?;
        let check = self.args.check_log;
        let available = pinprove_mem::sys::mem_available_bytes().unwrap_or(u64::MAX);
        // Bases, and a mix's scalars with what splitting them takes.
        let host_need = |k: u32| (1u64 << k) * (point_bytes(group) + 3 * 32) + HOST_MARGIN;
        while let Some(&k) = sizes.last() {
            if host_need(k) <= available {
                break;
            }
            self.report.skipped.push(format!(
                "{group} 2^{k}: its bases and scalars need {} of host memory, {} is available",
                bytes(host_need(k)),
                bytes(available)
            ));
            sizes.pop();
        }
        let largest = sizes.iter().copied().chain((check > 0).then_some(check)).max();
        let Some(largest) = largest else {
            return Ok(());
        };
        let t = Instant::now();
        let points = HostPoints::make(group, 1 << largest, &self.pool)
            .with_context(|| format!("making 2^{largest} {group} bases"))?;
        self.setup += t.elapsed();
        tracing::info!("{group}: 2^{largest} bases made in {:.1} s", t.elapsed().as_secs_f64());
        if check > 0 {
            self.size(group, check, &points, true)?;
        }
        for k in sizes {
            self.size(group, k, &points, false)?;
        }
        // The next group's bases need the memory more than the pool does.
        drop(points);
        self.pool.clear_idle();
        Ok(())
    }

    /// Every case of one size; `check`: the CPU's MSM too, and the cases
    /// are counted in the check instead of reported.
    fn size(&mut self, group: Group, k: u32, points: &HostPoints, check: bool) -> Result<()> {
        let args = self.args;
        let n = 1usize << k;
        let bases = points.bases(n);
        let free = || -> Result<u64> {
            Ok(pinprove_cuda::device_info(args.device)
                .context("reading the GPU's free memory")?
                .free_memory)
        };
        let device_scalars = args.scalars.contains(&Mix::Random);
        let scalar_bytes = if device_scalars { n as u64 * 32 } else { 0 };
        let mut resident = if args.bases.contains(&Placement::Resident) {
            let need = n as u64 * point_bytes(group) + scalar_bytes + SCRATCH;
            let have = free()?;
            if need <= have {
                Some(ResidentBases::upload(args.device, bases).with_context(|| format!("uploading {group} 2^{k}"))?)
            } else {
                self.report.skipped.push(format!(
                    "{group} 2^{k} resident: needs {} of GPU memory, {} is free",
                    bytes(need),
                    bytes(have)
                ));
                None
            }
        } else {
            None
        };
        let window = self.report.window.min(n.next_multiple_of(1024));
        let streamed_bytes = if args.bases.contains(&Placement::Streamed) {
            2 * window as u64 * point_bytes(group)
        } else {
            0
        };
        if let Some(r) = resident.as_mut().filter(|_| args.kernels.contains(&Kernel::Tables)) {
            // As many copies as the memory the cases leave holds.
            let c = args.window_bits_for(k);
            let room = free()?.saturating_sub(scalar_bytes + streamed_bytes + SCRATCH);
            let bases_bytes = n as u64 * point_bytes(group);
            let planned =
                TablePlan::for_memory(n as u64, point_bytes(group), c, bases_bytes + room).map_or(1, |p| p.copies);
            let most = ((1u64 << 31) - 1) / n as u64;
            let copies = planned
                .min(args.table_copies.unwrap_or(u32::MAX))
                .min(most as u32)
                .max(1);
            let t = Instant::now();
            let info = r
                .build_table(c, copies)
                .with_context(|| format!("building the table of {group} 2^{k}"))?;
            let built = t.elapsed();
            if !check {
                self.report.tables.push(TableReport {
                    group,
                    log_size: k,
                    window_bits: info.window_bits,
                    copies: info.copies,
                    bytes: info.bytes,
                    build_s: built.as_secs_f64(),
                });
            }
        }
        let streamed_fits = {
            let need = streamed_bytes + scalar_bytes + SCRATCH;
            let have = free()?;
            if args.bases.contains(&Placement::Streamed) && need > have {
                self.report.skipped.push(format!(
                    "{group} 2^{k} streamed: needs {} of GPU memory, {} is free",
                    bytes(need),
                    bytes(have)
                ));
            }
            need <= have
        };
        for &mix in &args.scalars {
            let t = Instant::now();
            let scalars = mix.scalars(n, args.seed ^ u64::from(k));
            let expected = known(group, generator_multiple(&scalars));
            self.setup += t.elapsed();
            let mut report = CheckReport {
                group,
                log_size: k,
                scalars: mix,
                cpu_matches: true,
                gpu_cases: 0,
                gpu_matches: 0,
            };
            if check {
                report.cpu_matches = points.cpu_msm(&scalars) == expected;
            }
            let lab = match mix {
                Mix::Random => LabScalars::on_device(args.device, &scalars, msm_lab::H_MSM_PART)?,
                Mix::Filecoin | Mix::Wpost => LabScalars::split(&scalars, &self.pool)?,
            };
            let (pippenger, ones, small) = lab.classes();
            let classes = Classes { pippenger, ones, small };
            for &placement in &args.bases {
                let on = || match placement {
                    Placement::Resident => resident.as_ref().map(LabBases::Resident),
                    Placement::Streamed => streamed_fits.then_some(LabBases::Streamed { host: bases, window }),
                };
                if on().is_none() {
                    continue;
                }
                for &kernel in &args.kernels {
                    let case = self.case(group, k, mix, placement, kernel, classes, &lab, &expected, &on)?;
                    if check {
                        report.gpu_cases += 1;
                        report.gpu_matches += usize::from(case.matches);
                    } else {
                        tracing::info!("{}", case.line());
                        self.report.cases.push(case);
                    }
                }
            }
            if check {
                self.report.checks.push(report);
            }
        }
        Ok(())
    }

    /// The runs of one case.
    #[allow(clippy::too_many_arguments)]
    fn case<'b>(
        &self,
        group: Group,
        k: u32,
        mix: Mix,
        placement: Placement,
        kernel: Kernel,
        classes: Classes,
        scalars: &LabScalars<'_>,
        expected: &MsmValue,
        on: &impl Fn() -> Option<LabBases<'b>>,
    ) -> Result<CaseReport> {
        let args = self.args;
        let runs = args.reps + usize::from(!args.no_warmup);
        let (mut device, mut wall, mut matches) = (Vec::new(), Vec::new(), true);
        for r in 0..runs {
            let bases = on().expect("the case's bases are there");
            let lab_kernel = match kernel {
                Kernel::Sppark => LabKernel::Sppark,
                Kernel::Tables => LabKernel::Tables {
                    window_bits: args.window_bits_for(k),
                    batch_entries: args.batch_entries.unwrap_or(0),
                },
            };
            let run = msm_lab::run_msm(args.device, bases, scalars, lab_kernel, &self.threads)
                .with_context(|| format!("{group} 2^{k} {mix} {placement} {kernel}"))?;
            matches &= run.value == *expected;
            if r + usize::from(args.no_warmup) > 0 {
                device.push(run.device);
                wall.push(run.wall);
            }
        }
        let mut stages_ms = Vec::new();
        if kernel == Kernel::Tables && !args.no_profile {
            msm_lab::profile_tables(true);
            let run = msm_lab::run_msm(
                args.device,
                on().expect("the case's bases are there"),
                scalars,
                LabKernel::Tables {
                    window_bits: args.window_bits_for(k),
                    batch_entries: args.batch_entries.unwrap_or(0),
                },
                &self.threads,
            );
            let ms = msm_lab::tables_profile();
            msm_lab::profile_tables(false);
            matches &= run
                .with_context(|| format!("{group} 2^{k} {mix} {placement} {kernel}, profiled"))?
                .value
                == *expected;
            stages_ms = msm_lab::TABLE_STAGES.iter().copied().zip(ms).collect();
        }
        let device_s: Vec<f64> = device.iter().map(Duration::as_secs_f64).collect();
        let device_median = median(&mut device);
        Ok(CaseReport {
            group,
            log_size: k,
            points: 1 << k,
            scalars: mix,
            bases: placement,
            kernel,
            classes,
            device_s,
            device_s_median: device_median.as_secs_f64(),
            points_per_s: (1u64 << k) as f64 / device_median.as_secs_f64().max(1e-9),
            wall_s_median: median(&mut wall).as_secs_f64(),
            matches,
            stages_ms,
        })
    }
}
