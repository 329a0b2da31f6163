//! h = (A·B − C)/Z on the device: a/b/c uploaded in chunks on the copy
//! stream, the NTTs on the compute stream, h kept in device memory for its
//! MSM; and the CUDA events of one proof, taken from per-device pools.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::runtime::{CudaError, EventPool, PooledEvent};
use blstrs::Scalar;
use pinprove_groth16::ProveError;

use super::ffi::*;
use super::matrices::MatrixCopy;
use super::{backend_error, check};

/// h of one proof, computed on the device (or being computed).
pub(super) struct HJob {
    raw: *mut c_void,
    m: usize,
}

/// The CUDA timing events of one proof.
pub(super) struct ProofEvents {
    /// Timing: before and after the uploads (copy stream), before the first
    /// transform and after h (compute stream).
    pub(super) marks: [PooledEvent; 4],
    /// Timing: after each MSM (compute stream). The last one completes
    /// when all of the proof's device work has.
    pub(super) msms: [Arc<PooledEvent>; 5],
}

/// Where a backend's events come from: one pool of each kind, used with
/// its device current.
pub(super) struct Events {
    timing: Arc<EventPool>,
    fence: Arc<EventPool>,
}

impl Events {
    pub(super) fn new() -> Events {
        Events {
            timing: EventPool::new(true),
            fence: EventPool::new(false),
        }
    }

    /// A proof's timing events.
    pub(super) fn proof(&self) -> Result<ProofEvents, CudaError> {
        let t = || self.timing.take();
        Ok(ProofEvents {
            marks: [t()?, t()?, t()?, t()?],
            msms: [
                Arc::new(t()?),
                Arc::new(t()?),
                Arc::new(t()?),
                Arc::new(t()?),
                Arc::new(t()?),
            ],
        })
    }

    /// One more timing event.
    pub(super) fn timing(&self) -> Result<PooledEvent, CudaError> {
        self.timing.take()
    }

    /// Three fence events, one per a/b/c upload.
    pub(super) fn fences(&self) -> Result<[PooledEvent; 3], CudaError> {
        Ok([self.fence.take()?, self.fence.take()?, self.fence.take()?])
    }
}

impl HJob {
    /// Queues the uploads of a/b/c and the transforms. `uploaded[k]` is
    /// recorded after vector k's copy; the marks as [`ProofEvents::marks`].
    pub(super) fn begin(
        device: c_int,
        abc: [&[Scalar]; 3],
        lg_m: u32,
        uploaded: &[PooledEvent; 3],
        marks: &[PooledEvent; 4],
    ) -> Result<HJob, ProveError> {
        let n = abc[0].len();
        if abc.iter().any(|v| v.len() != n) {
            return Err(backend_error("a, b and c differ in length"));
        }
        let events = uploaded.each_ref().map(|e| e.as_raw());
        let marks = marks.each_ref().map(|e| e.as_raw());
        let mut raw = std::ptr::null_mut();
        // SAFETY: a, b and c hold n scalars each (checked) and stay valid
        // until their `uploaded` event completes: the caller keeps them
        // alive or hands them to the pool fenced by those events. The events
        // are live for the call. Scalar is blst's Montgomery-form fr, the
        // layout of sppark's fr_t.
        check(
            unsafe {
                pinprove_h_begin(
                    &mut raw,
                    device,
                    abc[0].as_ptr(),
                    abc[1].as_ptr(),
                    abc[2].as_ptr(),
                    n,
                    lg_m,
                    events.as_ptr(),
                    marks.as_ptr(),
                )
            },
            "h on the GPU",
        )?;
        Ok(HJob { raw, m: 1 << lg_m })
    }

    /// Queues the upload of a pre-compiled circuit's witness (inputs, then
    /// aux), a/b/c's computation on the device `device` from `matrices`
    /// (there, or streamed from pinned host memory), and the transforms.
    /// `evaluated` is recorded once a/b/c are computed; the marks as
    /// [`ProofEvents::marks`], the uploads being the witness's.
    pub(super) fn begin_precompiled(
        device: c_int,
        matrices: &MatrixCopy,
        (inputs, aux): (&[Scalar], &[Scalar]),
        lg_m: u32,
        marks: &[PooledEvent; 4],
        evaluated: &PooledEvent,
    ) -> Result<HJob, ProveError> {
        let marks = marks.each_ref().map(|e| e.as_raw());
        let mut raw = std::ptr::null_mut();
        let (on_device, on_host) = match matrices {
            MatrixCopy::Device(m) => (m.raw.cast_const(), std::ptr::null()),
            MatrixCopy::Host(m) => (std::ptr::null(), &m.view as *const HostMatricesView),
        };
        // SAFETY: the matrices are live for the call, and the caller keeps
        // them (an Arc) and the witness (pool buffers of inputs.len() and
        // aux.len() scalars) alive until the proof's device work completed;
        // the call checks the witness's length against the matrices' and
        // their rows against the domain. Device matrices were uploaded to
        // `device` (the backend's only one); a host copy's view points into
        // memory it owns, its chunks checked by the call. Events are live
        // for the call.
        let rc = unsafe {
            pinprove_h_begin_precompiled(
                &mut raw,
                device,
                on_device,
                on_host,
                inputs.as_ptr(),
                inputs.len(),
                aux.as_ptr(),
                aux.len(),
                lg_m,
                marks.as_ptr(),
                evaluated.as_raw(),
            )
        };
        check(rc, "h of a pre-compiled circuit on the GPU")?;
        Ok(HJob { raw, m: 1 << lg_m })
    }

    /// h's m − 1 coefficients on the device, once computed.
    pub(super) fn scalars(&self) -> DeviceScalars<'_> {
        let mut ptr = std::ptr::null();
        let mut ready = std::ptr::null_mut();
        // SAFETY: the job is live; the call writes a device address and
        // the job's event handle, valid while the job is.
        unsafe { pinprove_h_result(self.raw, &mut ptr, &mut ready) };
        DeviceScalars {
            ptr,
            len: self.m - 1,
            first: 0,
            total: self.m - 1,
            ready,
            _job: std::marker::PhantomData,
        }
    }

    /// Blocks until h is computed.
    #[cfg(test)]
    pub(super) fn wait(&self) -> Result<(), ProveError> {
        // SAFETY: the job is live.
        check(unsafe { pinprove_h_wait(self.raw) }, "h on the GPU")
    }

    /// h's coefficients in host memory (for checks).
    #[cfg(test)]
    pub(super) fn download(&self) -> Result<Vec<Scalar>, ProveError> {
        let mut h = vec![Scalar::from(0u64); self.m - 1];
        // SAFETY: `h` holds m − 1 scalars, as the call writes.
        check(
            unsafe { pinprove_h_download(self.raw, h.as_mut_ptr()) },
            "downloading h",
        )?;
        Ok(h)
    }
}

impl Drop for HJob {
    fn drop(&mut self) {
        // SAFETY: from pinprove_h_begin, freed once; the device memory is
        // released in stream order, after the work queued that reads it.
        unsafe { pinprove_h_free(self.raw) }
    }
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
