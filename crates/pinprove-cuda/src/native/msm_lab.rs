//! One MSM at a time on a GPU, for measurement (`pinprove-bench msm`): the
//! backend's own paths — bases resident in device memory or streamed from
//! pinned host memory through two windows, scalars already on the device
//! (as h's are) or split on the host by value (as the L, A and B queries'
//! are), full-width scalars summed by sppark's Pippenger or by pinprove's
//! kernel over precomputed copies of the bases — each timed by events on
//! the GPU's lane and summed on the host as a proof's MSMs are.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use group::Group;
use pinprove_groth16::{Densities, Density, ProveError, WitnessRef};
use pinprove_mem::PinnedPool;

use super::curve::{Curve, G1, G2};
use super::ffi::{pinprove_lane_mark, pinprove_tables_profile, pinprove_tables_profile_read};
use super::h::DeviceScalars;
use super::msm::{Bases, Msm, MsmKernel, MsmScalars, Windows, msm_group};
use super::resident::{Resident, resident};
use super::table::Table;
use super::{backend_error, check, cuda_error};
use crate::runtime::{self, DeviceBuffer, Event, Stream};
use crate::split::{self, Mode, QueryScalars};

/// Bases of one group in host memory (pinned, when they are streamed).
#[derive(Clone, Copy)]
pub enum HostBases<'a> {
    /// G1 affine points.
    G1(&'a [blst_p1_affine]),
    /// G2 affine points.
    G2(&'a [blst_p2_affine]),
}

impl HostBases<'_> {
    /// How many bases.
    pub fn len(&self) -> usize {
        match self {
            HostBases::G1(b) => b.len(),
            HostBases::G2(b) => b.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The value of an MSM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsmValue {
    /// In G1.
    G1(G1Projective),
    /// In G2.
    G2(G2Projective),
}

/// Bases uploaded to a GPU once, as an SRS's resident bases are, and the
/// table of their precomputed copies once one is built.
pub struct ResidentBases {
    // Declared first: dropped before the bases it copies.
    table: Option<Table>,
    bases: Resident,
    device: c_int,
}

/// A table of precomputed copies, as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// Bits per window.
    pub window_bits: u32,
    /// Copies the kernel reads, the bases included.
    pub copies: u32,
    /// Device bytes of the copies beyond the bases.
    pub bytes: u64,
}

impl ResidentBases {
    /// Uploads `bases` to GPU `device`.
    pub fn upload(device: usize, bases: HostBases<'_>) -> Result<ResidentBases, ProveError> {
        let device = ordinal(device)?;
        let bases = match bases {
            HostBases::G1(b) => resident::<G1>(device, b)?,
            HostBases::G2(b) => resident::<G2>(device, b)?,
        };
        Ok(ResidentBases {
            table: None,
            bases,
            device,
        })
    }

    /// Builds (on the device, before returning) the table of `copies`
    /// copies at most (1: the bases alone) for windows of `window_bits`
    /// bits (4 to 22), replacing any built before; pinprove's kernel reads
    /// it from then on.
    pub fn build_table(&mut self, window_bits: u32, copies: u32) -> Result<TableInfo, ProveError> {
        self.table = None;
        let table = if self.bases.is_g2() {
            Table::build::<G2>(&self.bases, window_bits, copies)?
        } else {
            Table::build::<G1>(&self.bases, window_bits, copies)?
        };
        self.table = Some(table);
        Ok(self.table().expect("just built"))
    }

    /// The table built, if any.
    pub fn table(&self) -> Option<TableInfo> {
        self.table.as_ref().map(|t| TableInfo {
            window_bits: t.window_bits,
            copies: t.copies,
            bytes: t.bytes,
        })
    }

    /// How many bases.
    pub fn len(&self) -> usize {
        self.bases.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where the bases of a measured MSM are.
pub enum LabBases<'a> {
    /// Resident in device memory.
    Resident(&'a ResidentBases),
    /// Streamed from pinned host memory through two windows of `window`
    /// bases (a multiple of 1024), one filled while the other is summed.
    Streamed {
        /// The bases.
        host: HostBases<'a>,
        /// Bases per window.
        window: usize,
    },
}

/// The scalars of a measured MSM, prepared as a proof prepares them.
pub struct LabScalars<'a> {
    n: usize,
    kind: Kind<'a>,
}

enum Kind<'a> {
    /// In device memory (Montgomery form), as h's: queued in parts of
    /// `part` scalars, as a background proof queues its h MSM.
    Device { buffer: DeviceBuffer, part: usize },
    /// Split on the host by value, as a proof's L query: zeros dropped,
    /// ones to a bitmap, small values to bit planes, the rest listed.
    Split {
        query: Box<QueryScalars>,
        aux: &'a [Scalar],
    },
}

impl<'a> LabScalars<'a> {
    /// `scalars` uploaded to GPU `device`, to be summed in parts of `part`
    /// scalars (the h MSM's parts: [`H_MSM_PART`]).
    pub fn on_device(device: usize, scalars: &[Scalar], part: usize) -> Result<LabScalars<'static>, ProveError> {
        runtime::set_device(device).map_err(cuda_error)?;
        let mut buffer = DeviceBuffer::new(std::mem::size_of_val(scalars).max(1)).map_err(cuda_error)?;
        let stream = Stream::new().map_err(cuda_error)?;
        stream.timed_upload(&mut buffer, scalars).map_err(cuda_error)?;
        Ok(LabScalars {
            n: scalars.len(),
            kind: Kind::Device {
                buffer,
                part: part.max(1),
            },
        })
    }

    /// `scalars` split on the host as a proof splits its L query's, into
    /// buffers of `pool`.
    pub fn split(scalars: &'a [Scalar], pool: &Arc<PinnedPool>) -> Result<LabScalars<'a>, ProveError> {
        let mut aux_density = Density::with_capacity(scalars.len());
        for _ in 0..scalars.len() {
            aux_density.add_element();
        }
        // L takes every aux value; A and B none (their densities are clear).
        let densities = Densities {
            a_aux: aux_density.clone(),
            b_input: Density::new(),
            b_aux: aux_density,
        };
        let witness = WitnessRef {
            inputs: &[],
            aux: scalars,
            densities: &densities,
        };
        let prepared = split::prepare(witness, None, pool, Mode::Split)?;
        Ok(LabScalars {
            n: scalars.len(),
            kind: Kind::Split {
                query: Box::new(prepared.l),
                aux: scalars,
            },
        })
    }

    /// How many scalars (bases of the MSM).
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// How the scalars are summed: (by Pippenger, by batched addition
    /// as ones, by batched addition as small values); the rest are zeros.
    pub fn classes(&self) -> (usize, usize, usize) {
        match &self.kind {
            Kind::Device { .. } => (self.n, 0, 0),
            Kind::Split { query, aux } => (
                query.list(aux).len(),
                query.ones_count,
                query.small_idx.as_ref().map_or(0, |v| v.len()),
            ),
        }
    }
}

/// The kernel that sums the full-width scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabKernel {
    /// sppark's Pippenger, as proofs run it today.
    Sppark,
    /// pinprove's signed-digit bucket kernel: over resident bases with
    /// their table when one was built, else with windows of
    /// `window_bits` bits (0: chosen by size).
    Tables {
        /// Bits per window where there is no table.
        window_bits: u32,
        /// Entries (pairs of a window and a scalar) per batch (0: the
        /// kernel's default, 2^24).
        batch_entries: usize,
    },
}

impl LabKernel {
    /// The MSM calls' kernel, over `table` where there is one.
    fn over(self, table: Option<&Table>) -> MsmKernel<'_> {
        match self {
            LabKernel::Sppark => MsmKernel::Sppark,
            LabKernel::Tables {
                window_bits,
                batch_entries,
            } => MsmKernel::Tables {
                window_bits: if table.is_some() { 0 } else { window_bits },
                table,
                batch_entries,
            },
        }
    }
}

/// The stages of pinprove's kernel that [`tables_profile`] times.
pub const TABLE_STAGES: [&str; 5] = ["digits", "sort", "accumulate", "fixup", "reduce"];

/// Turns the profile of pinprove's kernel on or off (process-wide) and
/// clears it. While it is on, every call of the kernel records events
/// between its stages and waits for its own work: runs made then are for
/// the profile, not for timing.
pub fn profile_tables(on: bool) {
    // SAFETY: plain call; the C side locks its profile.
    unsafe { pinprove_tables_profile(on) }
}

/// GPU milliseconds of each of [`TABLE_STAGES`], summed over the kernel's
/// calls since the profile was turned on.
pub fn tables_profile() -> [f64; 5] {
    let mut ms = [0.0; 5];
    // SAFETY: the C side writes five doubles.
    unsafe { pinprove_tables_profile_read(ms.as_mut_ptr()) };
    ms
}

/// Parts of the h MSM a background proof queues one by one (the backend's
/// `H_MSM_PART_BASES`).
pub const H_MSM_PART: usize = 1 << 25;

/// The most bases a streamed window holds in the backend's plans.
pub const MAX_WINDOW: usize = crate::plan::MAX_WINDOW;

/// One measured MSM.
#[derive(Clone, Copy, Debug)]
pub struct LabRun {
    /// Its value.
    pub value: MsmValue,
    /// GPU time from the lane's compute stream reaching it to its last
    /// call done (uploads it waits for included).
    pub device: Duration,
    /// Host time from queuing to the value summed.
    pub wall: Duration,
}

/// Runs one MSM on GPU `device` over `bases` with `scalars` (as many as
/// the bases), summing its results on `threads`.
pub fn run_msm(
    device: usize,
    bases: LabBases<'_>,
    scalars: &LabScalars<'_>,
    kernel: LabKernel,
    threads: &rayon::ThreadPool,
) -> Result<LabRun, ProveError> {
    let device = ordinal(device)?;
    match bases {
        LabBases::Resident(r) => {
            if r.device != device {
                return Err(backend_error("resident bases of another GPU"));
            }
            let kernel = kernel.over(r.table.as_ref());
            let (value, device_time, wall) = if r.bases.is_g2() {
                let (p, d, w) = timed::<G2>(device, Placed::Resident(&r.bases), scalars, kernel, threads)?;
                (MsmValue::G2(p), d, w)
            } else {
                let (p, d, w) = timed::<G1>(device, Placed::Resident(&r.bases), scalars, kernel, threads)?;
                (MsmValue::G1(p), d, w)
            };
            Ok(LabRun {
                value,
                device: device_time,
                wall,
            })
        }
        LabBases::Streamed { host, window } => {
            if window == 0 || window % 1024 != 0 {
                return Err(backend_error(format!(
                    "a window of {window} bases: not a multiple of 1024"
                )));
            }
            let kernel = kernel.over(None);
            let (value, device_time, wall) = match host {
                HostBases::G1(b) => {
                    let (p, d, w) = timed::<G1>(device, Placed::Streamed(b, window), scalars, kernel, threads)?;
                    (MsmValue::G1(p), d, w)
                }
                HostBases::G2(b) => {
                    let (p, d, w) = timed::<G2>(device, Placed::Streamed(b, window), scalars, kernel, threads)?;
                    (MsmValue::G2(p), d, w)
                }
            };
            Ok(LabRun {
                value,
                device: device_time,
                wall,
            })
        }
    }
}

fn ordinal(device: usize) -> Result<c_int, ProveError> {
    c_int::try_from(device).map_err(|_| backend_error(format!("no GPU {device}")))
}

/// Bases of one curve, where they are.
enum Placed<'a, C: Curve> {
    Resident(&'a Resident),
    Streamed(&'a [C::Affine], usize),
}

/// The MSM over `placed` bases, its GPU time and its host time.
fn timed<C: Curve>(
    device: c_int,
    placed: Placed<'_, C>,
    scalars: &LabScalars<'_>,
    kernel: MsmKernel<'_>,
    threads: &rayon::ThreadPool,
) -> Result<(C::Point, Duration, Duration), ProveError> {
    let n_bases = match &placed {
        Placed::Resident(r) => r.len,
        Placed::Streamed(host, _) => host.len(),
    };
    if scalars.n != n_bases || n_bases == 0 {
        return Err(backend_error(format!("{} scalars for {n_bases} bases", scalars.n)));
    }
    let mut windows = match &placed {
        Placed::Resident(_) => None,
        Placed::Streamed(_, window) => Some(Windows::<C>::new(device, *window)?),
    };
    let start = Event::timing().map_err(cuda_error)?;
    let end = Event::timing().map_err(cuda_error)?;
    let began = Instant::now();
    // SAFETY: the event is live and belongs to this device's context.
    check(
        unsafe { pinprove_lane_mark(device, start.as_raw()) },
        "marking the device's queue",
    )?;
    let mut pending: Vec<Msm<C>> = Vec::new();
    match &scalars.kind {
        Kind::Device { buffer, part } => {
            let all = DeviceScalars {
                ptr: buffer.as_device_ptr().cast_const().cast::<Scalar>(),
                len: scalars.n,
                first: 0,
                total: scalars.n,
                // Uploaded synchronously: nothing to wait for.
                ready: std::ptr::null_mut(),
                _job: std::marker::PhantomData,
            };
            let parts = all.split(scalars.n.div_ceil(*part));
            let last = parts.len() - 1;
            for (k, p) in parts.into_iter().enumerate() {
                let mark = (k == last).then_some(&end);
                pending.extend(msm_group::<C>(
                    device,
                    bases_of(&placed, windows.as_mut()),
                    vec![MsmScalars::Device(p)],
                    &[mark],
                    kernel,
                )?);
            }
        }
        Kind::Split { query, aux } => pending.extend(msm_group::<C>(
            device,
            bases_of(&placed, windows.as_mut()),
            vec![MsmScalars::Query(query, aux)],
            &[Some(&end)],
            kernel,
        )?),
    }
    let mut value = C::Point::identity();
    for m in &mut pending {
        value += m.sum(threads)?;
    }
    let wall = began.elapsed();
    end.synchronize().map_err(cuda_error)?;
    let device_time = end.elapsed_since(&start).map_err(cuda_error)?;
    drop(pending);
    drop(windows);
    Ok((value, device_time, wall))
}

fn bases_of<'b, C: Curve>(placed: &'b Placed<'_, C>, windows: Option<&'b mut Windows<C>>) -> Bases<'b, C> {
    match (placed, windows) {
        (Placed::Resident(r), _) => Bases::Resident(r),
        (Placed::Streamed(host, _), Some(windows)) => Bases::Streamed { host, windows },
        (Placed::Streamed(..), None) => unreachable!("streamed bases come with their windows"),
    }
}
