//! MSMs on the GPU: the curve-generic forwarding to the C interface, and
//! one MSM queued on the device as calls of bounded device memory (see
//! [`crate::slices`]) over resident bases or windows of streamed ones,
//! summed on the host's threads once done.

use std::ffi::{c_int, c_void};

use crate::runtime::Event;
use blstrs::Scalar;
use group::Group;
use pinprove_groth16::ProveError;

use super::curve::Curve;
use super::ffi::*;
use super::h::DeviceScalars;
use super::resident::Resident;
use super::table::Table;
use super::{backend_error, check, cuda_error};
use crate::slices::{QueryShape, calls};
use crate::split::QueryScalars;

/// Two windows of device memory that a proof's streamed bases pass
/// through, one filled while the other's are summed; each with the event
/// recorded after the last MSM call that read it, which its next fill
/// waits for. Freed (in stream order, behind the work queued) on drop.
pub(super) struct Windows<C: Curve> {
    handles: [*mut c_void; 2],
    read: [Event; 2],
    capacity: usize,
    next: usize,
    _curve: std::marker::PhantomData<C>,
}

// SAFETY: the handles name device memory only the lane's queued work uses;
// the owner fills and frees them from one thread at a time.
unsafe impl<C: Curve> Send for Windows<C> {}

impl<C: Curve> Windows<C> {
    /// Two windows of `capacity` bases on `device` (current).
    pub(super) fn new(device: c_int, capacity: usize) -> Result<Windows<C>, ProveError> {
        let read = [Event::fence().map_err(cuda_error)?, Event::fence().map_err(cuda_error)?];
        let mut w = Windows {
            handles: [std::ptr::null_mut(); 2],
            read,
            capacity,
            next: 0,
            _curve: std::marker::PhantomData,
        };
        for h in &mut w.handles {
            // SAFETY: writes one handle, freed in Drop.
            check(unsafe { C::window(h, device, capacity) }, C::UPLOAD)?;
        }
        Ok(w)
    }

    /// The next window, filled with `bases` once the calls that last read
    /// it are done (an event never recorded is no wait), and the event to
    /// record after the calls that read it now.
    fn fill(&mut self, bases: &[C::Affine]) -> Result<(*mut c_void, *mut c_void), ProveError> {
        let k = self.next;
        self.next = 1 - k;
        if bases.len() > self.capacity {
            return Err(backend_error("more bases than a window holds"));
        }
        let read = self.read[k].as_raw();
        // SAFETY: the window is live; `bases` (pinned host memory the
        // proof's SRS keeps alive until its device work is done) holds
        // `len` points; the copy waits for the calls that last read it.
        check(
            unsafe { C::fill(self.handles[k], bases.as_ptr(), bases.len(), read) },
            C::UPLOAD,
        )?;
        Ok((self.handles[k], read))
    }
}

impl<C: Curve> Drop for Windows<C> {
    fn drop(&mut self) {
        for h in self.handles {
            if !h.is_null() {
                // SAFETY: from C::window, freed once; the release is queued
                // behind the work that reads it.
                unsafe { C::free_window(h) }
            }
        }
    }
}

/// Where an MSM's bases are.
pub(super) enum Bases<'a, C: Curve> {
    /// In device memory for good.
    Resident(&'a Resident),
    /// In pinned host memory, streamed through the proof's windows.
    Streamed {
        host: &'a [C::Affine],
        windows: &'a mut Windows<C>,
    },
}

impl<C: Curve> Bases<'_, C> {
    fn len(&self) -> usize {
        match self {
            Bases::Resident(r) => r.len,
            Bases::Streamed { host, .. } => host.len(),
        }
    }
}

/// Which kernel sums an MSM's full-width scalars (ones and small values
/// are summed by batched addition either way).
#[derive(Clone, Copy, Default)]
pub(super) enum MsmKernel<'a> {
    /// sppark's Pippenger, as the native backend has always run it.
    #[default]
    Sppark,
    /// pinprove's signed-digit bucket kernel (`cuda/msm_tables.cu`), over
    /// the bases' precomputed copies when a table of resident bases is
    /// given, else with windows of `window_bits` bits (0: chosen by size),
    /// in batches of `batch_entries` (window, scalar) pairs (0: the
    /// kernel's default).
    Tables {
        table: Option<&'a Table>,
        window_bits: u32,
        batch_entries: usize,
    },
}

impl MsmKernel<'_> {
    /// The call's kernel fields, and its batch size (0: the default).
    fn fields(&self) -> (u32, u32, *const c_void, usize) {
        match self {
            MsmKernel::Sppark => (0, 0, std::ptr::null(), 0),
            MsmKernel::Tables {
                table,
                window_bits,
                batch_entries,
            } => (
                1,
                *window_bits,
                table.map_or(std::ptr::null(), |t| t.handle.cast_const()),
                *batch_entries,
            ),
        }
    }
}

/// The scalars of one MSM.
pub(super) enum MsmScalars<'a> {
    /// h, on the device: `len` scalars at a device address.
    Device(DeviceScalars<'a>),
    /// A prepared query; `aux` stands for its list when it has none.
    Query(&'a QueryScalars, &'a [Scalar]),
}

/// An MSM queued on the device as one or more calls; [`Msm::sum`] waits
/// for them and sums their results on the host. Dropping it waits for its
/// device work, so the host memory it reads (which its owner must keep
/// alive until then) and its result buffers are never in use by the
/// device afterwards.
pub(super) enum Msm<C: Curve> {
    Pending(Vec<*mut c_void>),
    Done(C::Point),
}

// SAFETY: the pending handles are C++ objects that any thread may wait on,
// sum and free (CUDA events are not tied to threads); they are used by one
// owner at a time.
unsafe impl<C: Curve> Send for Msm<C> {}

/// A pending MSM call whose device work has completed: its results are
/// only read from here on.
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
    /// Waits for the device work, then adds up the calls' parts on
    /// `threads`.
    pub(super) fn sum(&mut self, threads: &rayon::ThreadPool) -> Result<C::Point, ProveError> {
        use rayon::prelude::*;
        let Msm::Pending(raws) = self else {
            let Msm::Done(p) = self else { unreachable!() };
            return Ok(*p);
        };
        let mut parts = Vec::new();
        for &raw in raws.iter() {
            // SAFETY: `raw` came from C::begin and is not freed yet.
            check(unsafe { pinprove_msm_wait(raw) }, C::MSM)?;
            let done = Completed(raw);
            // SAFETY: as above.
            let n = unsafe { pinprove_msm_parts(done.raw()) };
            parts.extend((0..n).map(|i| (done, i)));
        }
        let p = threads.install(|| {
            parts
                .into_par_iter()
                .map(|(done, i)| {
                    let mut out = C::Raw::default();
                    // SAFETY: the work has completed (waited for above), i
                    // is below the call's part count, and the handle lives
                    // until `self` is replaced below.
                    unsafe { C::part(done.raw(), i, &mut out) };
                    C::point(out)
                })
                .reduce(C::Point::identity, |a, b| a + b)
        });
        *self = Msm::Done(p); // frees the pending handles
        Ok(p)
    }
}

impl<C: Curve> Drop for Msm<C> {
    fn drop(&mut self) {
        if let Msm::Pending(raws) = self {
            for &raw in raws.iter() {
                // SAFETY: from C::begin, freed once; the call waits for
                // the device work first.
                unsafe { pinprove_msm_free(raw) }
            }
        }
    }
}

/// Points per Pippenger batch, or entries per batch of pinprove's kernel;
/// 0 leaves the C side's default (2^24). Tests set a small value to run
/// the batch loop on small inputs.
pub(super) static MAX_BATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Device time (µs) queued before the marks that close a group of MSMs:
/// 0 but in tests (see [`crate::delay_msm_marks_for_tests`]), which use it
/// to hold a proof's marks behind its results as a partner's long last
/// window does at production size.
pub(crate) static MARK_DELAY_US: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Listed scalars (and small values) per MSM call. Tests set a small
/// value to cut small MSMs into several calls.
pub(super) static MAX_LISTED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(crate::plan::MAX_LISTED);

/// Queues one MSM over a query's bases as calls of bounded device memory
/// (see [`crate::slices`]) through sppark's Pippenger and returns at once.
/// `mark` (a timing event) is recorded after the MSM's device work.
#[cfg(test)]
pub(super) fn msm<C: Curve>(
    device: c_int,
    bases: Bases<'_, C>,
    scalars: MsmScalars<'_>,
    mark: Option<&Event>,
) -> Result<Msm<C>, ProveError> {
    let mut one = msm_group(device, bases, vec![scalars], &[mark], MsmKernel::Sppark)?;
    Ok(one.pop().expect("one MSM per set of scalars"))
}

/// Queues one MSM per set of `scalars`, all over the same bases, through
/// `kernel`, and returns at once; `marks[i]` is recorded after all of them.
/// Streamed bases pass through the windows once for every set: each window
/// is filled once and read by the calls of every set in turn (the
/// partitions of one circuit sharing the bases' trip over PCIe). The table
/// `kernel` names, if any, must be of the resident bases, and live until
/// the returned MSMs are dropped.
pub(super) fn msm_group<C: Curve>(
    device: c_int,
    mut bases: Bases<'_, C>,
    scalars: Vec<MsmScalars<'_>>,
    marks: &[Option<&Event>],
    kernel: MsmKernel<'_>,
) -> Result<Vec<Msm<C>>, ProveError> {
    if marks.len() != scalars.len() {
        return Err(backend_error("a mark per set of scalars"));
    }
    let window = match &bases {
        Bases::Resident(_) => None,
        Bases::Streamed { windows, .. } => Some(windows.capacity),
    };
    if let MsmKernel::Tables { table: Some(t), .. } = kernel {
        let fits = match &bases {
            Bases::Resident(r) => r.len == t.len && r.is_g2() == C::G2,
            Bases::Streamed { .. } => false,
        };
        if !fits {
            return Err(backend_error("a table of other bases than the MSM's"));
        }
    }
    let n_bases = bases.len();
    let mut calls = Vec::with_capacity(scalars.len());
    for s in &scalars {
        calls.push(calls_of::<C>(n_bases, window, s, &kernel)?);
    }
    // Dropped on an error (each waits for the calls queued so far).
    let mut pending: Vec<Msm<C>> = scalars.iter().map(|_| Msm::Pending(Vec::new())).collect();
    let mut queue = |set: usize, handle: *const c_void, call: &MsmCall| -> Result<(), ProveError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: the bases behind `handle` (resident, or a window just
        // filled) hold the call's bases; its host inputs are slices of the
        // caller's prepared scalars (kept alive until the returned Msm is
        // dropped, which waits for the device work), its indices within
        // the handle's bases once less `idx_base` (slices::calls cuts them
        // so), its device scalars kept alive by the borrowed h job and
        // readable after `d_ready`.
        check(unsafe { C::begin(&mut raw, handle, call) }, C::MSM)?;
        if let Msm::Pending(v) = &mut pending[set] {
            v.push(raw);
        }
        Ok(())
    };
    match &mut bases {
        Bases::Resident(r) => {
            for (set, calls) in calls.iter().enumerate() {
                for c in calls {
                    queue(set, r.handle, &c.call)?;
                }
            }
        }
        Bases::Streamed { host, windows } => {
            // Window by window, every set's calls reading it in turn.
            let mut order: Vec<(usize, usize, usize)> = calls
                .iter()
                .enumerate()
                .flat_map(|(set, cs)| cs.iter().enumerate().map(move |(i, c)| (c.bases.start, set, i)))
                .collect();
            order.sort_unstable();
            let mut filled: Option<std::ops::Range<usize>> = None;
            let (mut handle, mut read) = (std::ptr::null_mut(), std::ptr::null_mut());
            for (_, set, i) in order {
                let c = &calls[set][i];
                if filled.as_ref() != Some(&c.bases) {
                    (handle, read) = windows.fill(&host[c.bases.clone()])?;
                    filled = Some(c.bases.clone());
                }
                let call = MsmCall { mark: read, ..c.call };
                queue(set, handle, &call)?;
            }
        }
    }
    let delay = MARK_DELAY_US.load(std::sync::atomic::Ordering::Relaxed);
    if delay > 0 {
        // SAFETY: plain call; the device number is checked on the C side.
        let code = unsafe { pinprove_test_hold_compute(device, delay) };
        if code != 0 {
            return Err(crate::fault::device_error(
                super::NAME,
                code,
                "delaying the marks (a test's setting)".to_string(),
            ));
        }
    }
    for m in marks.iter().flatten() {
        // SAFETY: the event is live (borrowed) and belongs to this device.
        check(
            unsafe { pinprove_lane_mark(device, m.as_raw()) },
            "marking the device's queue",
        )?;
    }
    Ok(pending)
}

/// One call of an MSM: the bases it reads (of the host's, when they are
/// streamed; every base when resident) and its inputs. Its `mark` is set
/// when it is queued.
struct Call {
    bases: std::ops::Range<usize>,
    call: MsmCall,
}

/// The calls of one MSM over `n_bases` bases, resident (`window` `None`)
/// or streamed through windows of `window` bases; the pointers in them
/// borrow from `scalars`.
fn calls_of<C: Curve>(
    n_bases: usize,
    window: Option<usize>,
    scalars: &MsmScalars<'_>,
    kernel: &MsmKernel<'_>,
) -> Result<Vec<Call>, ProveError> {
    let (kernel, window_bits, table, batch) = kernel.fields();
    let max_batch = match batch {
        0 => MAX_BATCH.load(std::sync::atomic::Ordering::Relaxed),
        n => n,
    };
    let plain = MsmCall {
        scalars: std::ptr::null(),
        d_scalars: std::ptr::null(),
        d_ready: std::ptr::null_mut(),
        ones: std::ptr::null(),
        idx: std::ptr::null(),
        n: 0,
        small_idx: std::ptr::null(),
        small_values: std::ptr::null(),
        n_small: 0,
        small_bits: 0,
        mont: true,
        mark: std::ptr::null_mut(),
        max_batch,
        base_offset: 0,
        idx_base: 0,
        kernel,
        window_bits,
        table,
    };
    match scalars {
        MsmScalars::Device(d) => {
            if d.first + d.len > d.total || d.total != n_bases {
                return Err(backend_error(format!(
                    "scalars {}..{} of {} for {n_bases} bases in a {}",
                    d.first,
                    d.first + d.len,
                    d.total,
                    C::MSM
                )));
            }
            let device_call = |n: usize, ptr: *const Scalar, base_offset: usize| MsmCall {
                d_scalars: ptr,
                d_ready: d.ready,
                n,
                base_offset,
                ..plain
            };
            Ok(match window {
                None => vec![Call {
                    bases: 0..n_bases,
                    call: device_call(d.len, d.ptr, d.first),
                }],
                // Windows of the part's own bases, from its first on.
                Some(width) => crate::plan::windows(d.len, width)
                    .map(|w| Call {
                        bases: d.first + w.start..d.first + w.end,
                        // A device address, never dereferenced here.
                        call: device_call(w.len(), d.ptr.wrapping_add(w.start), 0),
                    })
                    .collect(),
            })
        }
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
            if idx.is_some_and(|i| i.len() != list.len()) || (idx.is_none() && list.len() > n_bases) {
                return Err(backend_error("an index per listed scalar"));
            }
            let small = match (&q.small_idx, &q.small_values) {
                (Some(i), Some(v)) if i.len() == v.len() && q.small_bits <= 64 => Some((&i[..], &v[..])),
                (None, None) => None,
                _ => return Err(backend_error("small values without their bases")),
            };
            let ones = q.ones.as_deref();
            if ones.is_some_and(|o| o.len() * 32 < n_bases.next_multiple_of(1024)) {
                return Err(backend_error("a bitmap shorter than its bases"));
            }
            let shape = QueryShape {
                bases: n_bases,
                idx,
                listed: list.len(),
                small_idx: small.map(|s| s.0),
                ones: ones.is_some(),
            };
            let max_listed = MAX_LISTED.load(std::sync::atomic::Ordering::Relaxed);
            let streamed = window.is_some();
            let slice_ptr = |v: &[u32], r: &std::ops::Range<usize>| v[r.clone()].as_ptr();
            Ok(calls(&shape, window, max_listed)
                .into_iter()
                .map(|cut| {
                    let call = MsmCall {
                        scalars: list[cut.listed.clone()].as_ptr(),
                        ones: match (&cut.ones, ones) {
                            (Some(words), Some(o)) => o[words.start..].as_ptr(),
                            _ => std::ptr::null(),
                        },
                        idx: idx.map_or(std::ptr::null(), |i| slice_ptr(i, &cut.listed)),
                        n: cut.listed.len(),
                        small_idx: small.map_or(std::ptr::null(), |s| slice_ptr(s.0, &cut.small)),
                        small_values: small.map_or(std::ptr::null(), |s| s.1[cut.small.clone()].as_ptr()),
                        n_small: cut.small.len(),
                        small_bits: if cut.small.is_empty() { 0 } else { q.small_bits },
                        // A dense list (no indices: no ones or small values
                        // either) pairs with the bases in order, from its
                        // run's first on.
                        base_offset: if idx.is_none() {
                            cut.listed.start - cut.bases.start
                        } else {
                            0
                        },
                        idx_base: if streamed { cut.bases.start } else { 0 },
                        ..plain
                    };
                    Call { bases: cut.bases, call }
                })
                .collect())
        }
    }
}
