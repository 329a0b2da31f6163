//! Pre-compiled circuits' matrices in device memory, one copy per
//! recording the engine holds, so that a proof uploads only its witness
//! and the GPU computes a, b and c itself (`cuda/native_spmv.cu`).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, Weak};

use pinprove_groth16::ProveError;
use pinprove_groth16::precompiled::Recording;
use pinprove_mem::sync::Recover;

use super::check;
use super::ffi::{CsrView, pinprove_matrices_free, pinprove_matrices_upload};

/// One recording's A, B, C and coefficients on the device.
pub(super) struct DeviceMatrices {
    pub(super) raw: *mut c_void,
    /// Device bytes held.
    pub(super) bytes: u64,
    /// The circuit type recorded.
    pub(super) circuit_id: String,
}

// SAFETY: the handle names device memory that queued work only reads (a
// proof holds an Arc until its device work completed); it is freed once, in
// Drop, on its own device. Nothing ties it to the creating thread.
unsafe impl Send for DeviceMatrices {}
// SAFETY: as for Send: shared use only reads.
unsafe impl Sync for DeviceMatrices {}

impl DeviceMatrices {
    /// Copies `recording`'s matrices to device `device` (synchronously).
    fn upload(recording: &Recording, device: c_int) -> Result<DeviceMatrices, ProveError> {
        let view = |m: &pinprove_groth16::precompiled::Matrix| CsrView {
            row_ptr: m.row_ptr().as_ptr(),
            cols: m.cols().as_ptr(),
            ids: m.coeff_ids().as_ptr(),
            nnz: m.nnz(),
        };
        let matrices = recording.matrices()?;
        let views = [view(matrices.a()), view(matrices.b()), view(matrices.c())];
        let coeffs = matrices.coefficients();
        let (mut raw, mut bytes) = (std::ptr::null_mut(), 0usize);
        // SAFETY: each view points into the recording's matrices, alive for
        // the call, with `rows + 1` offsets and `nnz` columns and ids; a
        // Recording's structure is checked when it is made or loaded
        // (offsets from 0 to nnz, columns below inputs + aux, ids below the
        // coefficients' count), which is what the kernels rely on. Scalar is
        // blst's Montgomery fr, the layout of sppark's fr_t.
        check(
            unsafe {
                pinprove_matrices_upload(
                    &mut raw,
                    &mut bytes,
                    device,
                    views.as_ptr(),
                    recording.num_constraints(),
                    recording.num_inputs() + recording.num_aux(),
                    coeffs.as_ptr(),
                    coeffs.len(),
                )
            },
            "uploading a circuit's matrices",
        )?;
        Ok(DeviceMatrices {
            raw,
            bytes: bytes as u64,
            circuit_id: recording.circuit_id().to_string(),
        })
    }
}

impl Drop for DeviceMatrices {
    fn drop(&mut self) {
        // SAFETY: from pinprove_matrices_upload, freed once, here; every
        // proof reading it holds an Arc until its device work completed.
        unsafe { pinprove_matrices_free(self.raw) }
    }
}

/// The matrices on one device, by recording: an entry lives while the
/// engine holds its recording (a weak reference says so), and while any
/// proof that reads it runs.
#[derive(Default)]
pub(super) struct ResidentMatrices {
    held: Mutex<Vec<(Weak<Recording>, Arc<DeviceMatrices>)>>,
}

impl ResidentMatrices {
    /// `recording`'s matrices on `device`, uploaded on first use; `tried`
    /// runs once an upload was tried, whether it worked or not (an upload
    /// trims the device's stream-ordered memory pool first).
    pub(super) fn get(
        &self,
        recording: &Arc<Recording>,
        device: c_int,
        tried: impl FnOnce(),
    ) -> Result<Arc<DeviceMatrices>, ProveError> {
        let mut held = self.held.lock().recover();
        // Recordings the engine dropped free their device copy (after the
        // proofs still reading it); a new recording at a freed address is
        // then not mistaken for the old one.
        held.retain(|(r, _)| r.strong_count() > 0);
        if let Some((_, m)) = held
            .iter()
            .find(|(r, _)| std::ptr::eq(r.as_ptr(), Arc::as_ptr(recording)))
        {
            return Ok(Arc::clone(m));
        }
        let uploaded = DeviceMatrices::upload(recording, device);
        tried();
        let m = Arc::new(uploaded?);
        tracing::info!(
            circuit = %m.circuit_id,
            bytes = m.bytes,
            device,
            "circuit matrices resident on the device"
        );
        held.push((Arc::downgrade(recording), Arc::clone(&m)));
        Ok(m)
    }

    /// Whether `recording`'s matrices are on the device.
    pub(super) fn holds(&self, recording: &Arc<Recording>) -> bool {
        let mut held = self.held.lock().recover();
        held.retain(|(r, _)| r.strong_count() > 0);
        held.iter()
            .any(|(r, _)| std::ptr::eq(r.as_ptr(), Arc::as_ptr(recording)))
    }

    /// The recordings on the device and the bytes each takes.
    pub(super) fn report(&self) -> Vec<(String, u64)> {
        let mut held = self.held.lock().recover();
        held.retain(|(r, _)| r.strong_count() > 0);
        held.iter().map(|(_, m)| (m.circuit_id.clone(), m.bytes)).collect()
    }
}
