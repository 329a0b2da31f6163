//! MSMs on the GPU: the curve-generic forwarding to the C interface, and
//! one MSM queued on the device (over resident bases) or run to completion
//! (streamed bases), summed on the host's threads once done.

use std::ffi::{c_int, c_void};

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use group::Group;
use pinprove_groth16::ProveError;
use pinprove_mem::cuda::Event;

use super::ffi::*;
use super::h::HJob;
use super::resident::Resident;
use super::{backend_error, check};
use crate::split::QueryScalars;

/// G1 or G2 for the MSM calls.
pub(super) trait Curve {
    type Affine;
    type Raw: Default;
    type Point: Copy + Send + Group;
    const G2: bool;
    const UPLOAD: &'static str;
    const MSM: &'static str;
    /// # Safety
    /// As `pinprove_resident_g1`.
    unsafe fn upload(out: *mut *mut c_void, device: c_int, bases: *const Self::Affine, n: usize) -> sppark::Error;
    /// # Safety
    /// As `pinprove_msm_g1`.
    unsafe fn host(
        out: *mut Self::Raw,
        device: c_int,
        bases: *const Self::Affine,
        scalars: *const Scalar,
        d_scalars: *const Scalar,
        n: usize,
    ) -> sppark::Error;
    /// # Safety
    /// As `pinprove_msm_resident_g1_begin`.
    unsafe fn begin(out: *mut *mut c_void, resident: *const c_void, call: &MsmCall) -> sppark::Error;
    /// # Safety
    /// As `pinprove_msm_g1_part`: `pending` from this curve's `begin`.
    unsafe fn part(pending: *const c_void, i: usize, out: *mut Self::Raw);
    fn point(raw: Self::Raw) -> Self::Point;
}

pub(super) struct G1;
pub(super) struct G2;

/// `impl Curve` for one group: the same forwarding over that group's FFI.
macro_rules! curve {
    ($curve:ident, $affine:ty, $raw:ty, $point:ty, $g2:expr, $name:literal,
     $upload:ident, $host:ident, $begin:ident, $part:ident) => {
        impl Curve for $curve {
            type Affine = $affine;
            type Raw = $raw;
            type Point = $point;
            const G2: bool = $g2;
            const UPLOAD: &'static str = concat!("uploading ", $name, " bases");
            const MSM: &'static str = concat!($name, " MSM");
            unsafe fn upload(out: *mut *mut c_void, device: c_int, bases: *const $affine, n: usize) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $upload(out, device, bases, n) }
            }
            unsafe fn host(
                out: *mut $raw,
                device: c_int,
                bases: *const $affine,
                scalars: *const Scalar,
                d_scalars: *const Scalar,
                n: usize,
            ) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $host(out, device, bases, scalars, d_scalars, n, true) }
            }
            unsafe fn begin(out: *mut *mut c_void, resident: *const c_void, call: &MsmCall) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $begin(out, resident, call) }
            }
            unsafe fn part(pending: *const c_void, i: usize, out: *mut $raw) {
                // SAFETY: forwarded contract.
                unsafe { $part(pending, i, out) }
            }
            fn point(raw: $raw) -> $point {
                let mut p = <$point>::identity();
                *p.as_mut() = raw;
                p
            }
        }
    };
}

curve!(
    G1,
    blst_p1_affine,
    blst_p1,
    G1Projective,
    false,
    "G1",
    pinprove_resident_g1,
    pinprove_msm_g1,
    pinprove_msm_resident_g1_begin,
    pinprove_msm_g1_part
);
curve!(
    G2,
    blst_p2_affine,
    blst_p2,
    G2Projective,
    true,
    "G2",
    pinprove_resident_g2,
    pinprove_msm_g2,
    pinprove_msm_resident_g2_begin,
    pinprove_msm_g2_part
);

/// The scalars of one MSM.
pub(super) enum MsmScalars<'a> {
    /// h, on the device: `len` scalars at a device address.
    Device(DeviceScalars<'a>),
    /// A prepared query; `aux` stands for its list when it has none.
    Query(&'a QueryScalars, &'a [Scalar]),
}

/// Scalars in device memory, borrowed from the job that owns them,
/// readable once `ready` (a CUDA event) has completed: `len` of them at
/// `ptr`, which pair with the bases from `first` on, of an MSM over
/// `total` bases (queued in parts when `len < total`).
pub(super) struct DeviceScalars<'a> {
    pub(super) ptr: *const Scalar,
    pub(super) len: usize,
    pub(super) first: usize,
    pub(super) total: usize,
    pub(super) ready: *mut c_void,
    pub(super) _job: std::marker::PhantomData<&'a HJob>,
}

impl<'a> DeviceScalars<'a> {
    /// The scalars in `parts` consecutive parts of about equal length (an
    /// MSM queued in parts, summed by the caller; at least one part, none
    /// empty).
    pub(super) fn split(self, parts: usize) -> Vec<DeviceScalars<'a>> {
        let parts = parts.clamp(1, self.len.max(1));
        let each = self.len.div_ceil(parts);
        (0..self.len.div_ceil(each.max(1)).max(1))
            .map(|k| {
                let start = k * each;
                let len = each.min(self.len - start);
                DeviceScalars {
                    // A device address, never dereferenced here.
                    ptr: self.ptr.wrapping_add(start),
                    len,
                    first: self.first + start,
                    total: self.total,
                    ready: self.ready,
                    _job: std::marker::PhantomData,
                }
            })
            .collect()
    }
}

/// An MSM queued on the device; [`Msm::sum`] waits for it and sums its
/// results on the host. Dropping it waits for its device work, so the host
/// memory it reads (which its owner must keep alive until then) and its
/// result buffer are never in use by the device afterwards.
pub(super) enum Msm<C: Curve> {
    Pending(*mut c_void),
    Done(C::Point),
}

// SAFETY: the pending handle is a C++ object that any thread may wait on,
// sum and free (CUDA events are not tied to threads); it is used by one
// owner at a time.
unsafe impl<C: Curve> Send for Msm<C> {}

/// A pending MSM whose device work has completed: its results are only
/// read from here on.
#[derive(Clone, Copy)]
struct Completed(*const c_void);

// SAFETY: after pinprove_msm_wait succeeded nothing writes the pending
// MSM's results any more; pinprove_msm_*_part only reads them, from any
// number of threads at once.
unsafe impl Send for Completed {}
// SAFETY: as for Send.
unsafe impl Sync for Completed {}

impl Completed {
    // A method, so that closures capture the Sync wrapper, not the pointer.
    fn raw(self) -> *const c_void {
        self.0
    }
}

impl<C: Curve> Msm<C> {
    /// Waits for the device work, then adds up the MSM's parts on `threads`.
    pub(super) fn sum(&mut self, threads: &rayon::ThreadPool) -> Result<C::Point, ProveError> {
        use rayon::prelude::*;
        match self {
            Msm::Done(p) => Ok(*p),
            Msm::Pending(raw) => {
                // SAFETY: `raw` came from C::begin and is not freed yet.
                check(unsafe { pinprove_msm_wait(*raw) }, C::MSM)?;
                let done = Completed(*raw);
                // SAFETY: as above.
                let parts = unsafe { pinprove_msm_parts(done.raw()) };
                let p = threads.install(|| {
                    (0..parts)
                        .into_par_iter()
                        .map(|i| {
                            let mut out = C::Raw::default();
                            // SAFETY: the work has completed (waited for
                            // above), i is below the part count, and the
                            // handle lives until `self` is replaced below.
                            unsafe { C::part(done.raw(), i, &mut out) };
                            C::point(out)
                        })
                        .reduce(C::Point::identity, |a, b| a + b)
                });
                *self = Msm::Done(p); // drops the pending handle
                Ok(p)
            }
        }
    }
}

impl<C: Curve> Drop for Msm<C> {
    fn drop(&mut self) {
        if let Msm::Pending(raw) = *self {
            // SAFETY: from C::begin, freed once; the call waits for the
            // device work first.
            unsafe { pinprove_msm_free(raw) }
        }
    }
}

/// Points per Pippenger batch; 0 leaves the C side's default (2^24).
/// Tests set a small value to run the batch loop on small inputs.
pub(super) static MAX_BATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Queues one MSM over a query's bases (resident ones when given: then it
/// returns at once; streamed bases run to completion here). `mark` (a
/// timing event) is recorded after the MSM's device work.
pub(super) fn msm<C: Curve>(
    device: c_int,
    host_bases: Option<&[C::Affine]>,
    resident: Option<&Resident>,
    scalars: MsmScalars<'_>,
    mark: Option<&Event>,
) -> Result<Msm<C>, ProveError> {
    let n_bases = match (resident, host_bases) {
        (Some(r), _) => r.len,
        (None, Some(b)) => b.len(),
        (None, None) => return Err(backend_error("bases neither resident nor in host memory")),
    };
    let first = match &scalars {
        MsmScalars::Device(d) if d.first + d.len > d.total || d.total != n_bases => {
            return Err(backend_error(format!(
                "scalars {}..{} of {} for {n_bases} bases in a {}",
                d.first,
                d.first + d.len,
                d.total,
                C::MSM
            )));
        }
        MsmScalars::Device(d) => d.first,
        MsmScalars::Query(..) => 0,
    };
    let (list, d_scalars, d_ready, n, idx, ones, small) = match &scalars {
        MsmScalars::Device(d) => (&[][..], d.ptr, d.ready, d.len, None, None, None),
        MsmScalars::Query(q, aux) => {
            let list = q.list(aux);
            if q.bases != n_bases {
                return Err(backend_error(format!(
                    "{} assignments for {} bases in a {}",
                    q.bases,
                    n_bases,
                    C::MSM
                )));
            }
            let idx = q.idx.as_deref();
            if idx.is_some_and(|i| i.len() != list.len()) {
                return Err(backend_error("an index per listed scalar"));
            }
            let small = match (&q.small_idx, &q.small_values) {
                (Some(i), Some(v)) if i.len() == v.len() && q.small_bits <= 64 => Some((&i[..], &v[..], q.small_bits)),
                (None, None) => None,
                _ => return Err(backend_error("small values without their bases")),
            };
            let ones = q.ones.as_deref();
            (
                list,
                std::ptr::null(),
                std::ptr::null_mut(),
                list.len(),
                idx,
                ones,
                small,
            )
        }
    };
    let whole = idx.is_none() && ones.is_none() && small.is_none();
    // A part of a plain MSM (resident bases only) pairs its scalars with
    // the bases from `first` on; the rest pair every base with one scalar.
    let part = matches!(&scalars, MsmScalars::Device(d) if d.len < d.total);
    if whole && !part && n != n_bases {
        return Err(backend_error(format!(
            "{n} scalars for {n_bases} bases in a {}",
            C::MSM
        )));
    }
    if ones.is_some_and(|o| o.len() * 32 < n_bases.next_multiple_of(1024)) {
        return Err(backend_error("a bitmap shorter than its bases"));
    }
    let ptr = |s: Option<&[u32]>| s.map_or(std::ptr::null(), <[u32]>::as_ptr);
    match resident {
        Some(r) => {
            let call = MsmCall {
                scalars: list.as_ptr(),
                d_scalars,
                d_ready,
                ones: ptr(ones),
                idx: ptr(idx),
                n,
                small_idx: ptr(small.map(|s| s.0)),
                small_values: small.map_or(std::ptr::null(), |s| s.1.as_ptr()),
                n_small: small.map_or(0, |s| s.0.len()),
                small_bits: small.map_or(0, |s| s.2),
                mont: true,
                mark: mark.map_or(std::ptr::null_mut(), Event::as_raw),
                max_batch: MAX_BATCH.load(std::sync::atomic::Ordering::Relaxed),
                base_offset: first,
            };
            let mut raw = std::ptr::null_mut();
            // SAFETY: the resident handle is alive (borrowed) and holds
            // `bases.len()` points; `list` holds `n` scalars, `idx` (if any)
            // n indices below bases.len() (as `split::prepare` builds them),
            // `ones` a padded bitmap over the bases (checked above), the
            // small values as many base indices below bases.len(), or
            // `d_scalars` n device scalars kept alive by the borrowed job and
            // readable after `d_ready`. The caller keeps the host inputs and
            // the resident bases alive until the returned Msm is dropped,
            // which waits for the device work.
            check(unsafe { C::begin(&mut raw, r.handle, &call) }, C::MSM)?;
            Ok(Msm::Pending(raw))
        }
        None if !whole => Err(backend_error("split scalars need resident bases")),
        None if part => Err(backend_error("an MSM in parts needs resident bases")),
        None => {
            let bases = host_bases.expect("checked above: no resident bases, so host ones");
            let mut out = C::Raw::default();
            // SAFETY: `bases` holds n points (checked), paired one to one
            // with the n scalars in `list` or at `d_scalars`, which the
            // caller has waited for. The call returns after its device work
            // completed.
            check(
                unsafe { C::host(&mut out, device, bases.as_ptr(), list.as_ptr(), d_scalars, n) },
                C::MSM,
            )?;
            Ok(Msm::Done(C::point(out)))
        }
    }
}
