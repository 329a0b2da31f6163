//! Pre-compiled circuits' matrices where the device reads them, one copy
//! per recording the engine holds: in device memory when the plan leaves
//! room beside a proof, otherwise pinned in host memory and streamed in row
//! chunks by each proof (`cuda/native_spmv.cu`). Either way a proof
//! uploads only its witness and the GPU computes a, b and c itself.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, Weak};

use pinprove_groth16::ProveError;
use pinprove_groth16::precompiled::{Matrices, Matrix, Recording};
use pinprove_mem::sync::Recover;
use pinprove_mem::{PinnedPool, PoolBuffer};

use super::ffi::{CsrView, HostMatricesView, pinprove_matrices_free, pinprove_matrices_upload};
use super::{backend_error, check};
use crate::plan::MatrixPlacement;
use crate::row_chunks::chunk_rows;
use crate::runtime::PinnedInPlace;

/// One recording's A, B, C and coefficients on the device.
pub(super) struct DeviceMatrices {
    pub(super) raw: *mut c_void,
    /// Device bytes held.
    pub(super) bytes: u64,
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
        let view = |m: &Matrix| CsrView {
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

/// Vectors at least this long are pinned where they are: the system
/// allocator maps allocations this large on their own pages, so no other
/// registration shares theirs. Shorter ones are copied into pool buffers.
const PIN_IN_PLACE: usize = 64 << 20;

/// One recording's matrices in pinned host memory, with the row chunks
/// each proof copies them to the device in (see [`crate::row_chunks`]).
/// The large vectors are the recording's own, pinned in place (the engine
/// keeps its host copy, since this backend reads it); the rest are copied
/// into pool buffers.
pub(super) struct HostMatrices {
    /// What a proof hands the device: pointers into `_source`, `_copies`
    /// and `_chunks`.
    pub(super) view: HostMatricesView,
    _chunks: [Vec<u64>; 3],
    pins: Vec<PinnedInPlace>,
    _copies: Vec<PoolBuffer>,
    /// Kept until the pins are gone (see Drop).
    _source: Arc<Matrices>,
}

// SAFETY: the view's pointers name memory this value owns or keeps alive
// (`source`, `copies`, `chunks`), which proofs only read; nothing ties it
// to a thread.
unsafe impl Send for HostMatrices {}
// SAFETY: as for Send: shared use only reads.
unsafe impl Sync for HostMatrices {}

impl HostMatrices {
    /// Pins `recording`'s matrices and cuts them into chunks of at most
    /// `chunk_bytes` (an error when a row alone is longer, or pool memory
    /// for the short vectors is not to be had now).
    fn pin(recording: &Recording, chunk_bytes: u64, pool: &Arc<PinnedPool>) -> Result<HostMatrices, ProveError> {
        let source = recording.matrices()?;
        let ms = [source.a(), source.b(), source.c()];
        let mut chunks: [Vec<u64>; 3] = Default::default();
        for (k, m) in ms.iter().enumerate() {
            chunks[k] = chunk_rows(m.row_ptr(), chunk_bytes)
                .map_err(|e| backend_error(format!("streaming {}'s matrices: {e}", recording.circuit_id())))?;
        }
        let mut pins = Vec::new();
        let mut copies = Vec::new();
        let mut pin_matrix = |m: &Matrix| -> Result<_, ProveError> {
            Ok((
                pinned(m.row_ptr(), pool, &mut pins, &mut copies)?,
                pinned(m.cols(), pool, &mut pins, &mut copies)?,
                pinned(m.coeff_ids(), pool, &mut pins, &mut copies)?,
            ))
        };
        let [a, b, c] = [pin_matrix(ms[0])?, pin_matrix(ms[1])?, pin_matrix(ms[2])?];
        let coeffs = pinned(source.coefficients(), pool, &mut pins, &mut copies)?;
        let view = HostMatricesView {
            row_ptr: [a.0, b.0, c.0],
            cols: [a.1, b.1, c.1],
            ids: [a.2, b.2, c.2],
            chunks: [chunks[0].as_ptr(), chunks[1].as_ptr(), chunks[2].as_ptr()],
            n_chunks: [chunks[0].len() - 1, chunks[1].len() - 1, chunks[2].len() - 1],
            coeffs,
            n_coeffs: source.coefficients().len(),
            rows: recording.num_constraints(),
            vars: recording.num_inputs() + recording.num_aux(),
            chunk_bytes: chunk_bytes as usize,
        };
        Ok(HostMatrices {
            view,
            _chunks: chunks,
            pins,
            _copies: copies,
            _source: source,
        })
    }
}

impl Drop for HostMatrices {
    fn drop(&mut self) {
        // Unpinned while `source`, which they pin, is still alive.
        self.pins.clear();
    }
}

/// `v` in page-locked memory: pinned in place when it is long (it stays
/// where it is, in memory the caller keeps alive as long as `pins`), else
/// (or when pinning fails) copied into a pool buffer kept in `copies`.
fn pinned<T: Copy>(
    v: &[T],
    pool: &Arc<PinnedPool>,
    pins: &mut Vec<PinnedInPlace>,
    copies: &mut Vec<PoolBuffer>,
) -> Result<*const T, ProveError> {
    let bytes = std::mem::size_of_val(v);
    if bytes == 0 {
        return Ok(v.as_ptr());
    }
    if bytes >= PIN_IN_PLACE {
        // SAFETY: `v` lies in a recording's matrices, which the caller's
        // HostMatrices keeps alive (its Arc) until it drops the pins first;
        // an allocation this large is a mapping of its own (see
        // PIN_IN_PLACE), so no other registration covers its pages.
        match unsafe { PinnedInPlace::new(v.as_ptr().cast(), bytes) } {
            Ok(p) => {
                pins.push(p);
                return Ok(v.as_ptr());
            }
            Err(e) => tracing::warn!(bytes, "pinning a matrix in place failed ({e}); copying it"),
        }
    }
    let mut buf = pool
        .try_checkout(bytes)
        .map_err(|e| backend_error(format!("pool memory for a streamed matrix: {e}")))?;
    // SAFETY: the buffer holds at least `bytes` bytes, page-aligned (so
    // aligned for T), and is a checked-out block no slice overlaps.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr().cast::<u8>(), buf.as_mut_ptr(), bytes) };
    let ptr = buf.as_ptr().cast::<T>();
    copies.push(buf);
    Ok(ptr)
}

/// Where one recording's matrices are read from.
pub(super) enum MatrixCopy {
    Device(DeviceMatrices),
    Host(Box<HostMatrices>),
}

impl MatrixCopy {
    pub(super) fn placement(&self) -> MatrixPlacement {
        match self {
            MatrixCopy::Device(_) => MatrixPlacement::Device,
            MatrixCopy::Host(_) => MatrixPlacement::Streamed,
        }
    }
}

/// One recording's copy and its circuit type, for reports.
struct Held {
    recording: Weak<Recording>,
    copy: Arc<MatrixCopy>,
    circuit_id: String,
}

/// The matrices this device reads, by recording: an entry lives while the
/// engine holds its recording (a weak reference says so), and while any
/// proof that reads it runs.
#[derive(Default)]
pub(super) struct ResidentMatrices {
    held: Mutex<Vec<Held>>,
}

impl ResidentMatrices {
    /// `recording`'s matrices on `device` as `placement` says, made on
    /// first use (streamed ones in chunks of `chunk_bytes`, short vectors
    /// copied into `pool`); `tried` runs once a device upload was tried,
    /// whether it worked or not (an upload trims the device's
    /// stream-ordered memory pool first).
    pub(super) fn get(
        &self,
        recording: &Arc<Recording>,
        placement: MatrixPlacement,
        device: c_int,
        (chunk_bytes, pool): (u64, &Arc<PinnedPool>),
        tried: impl FnOnce(),
    ) -> Result<Arc<MatrixCopy>, ProveError> {
        let mut held = self.held.lock().recover();
        // Recordings the engine dropped free their copy (after the proofs
        // still reading it); a new recording at a freed address is then not
        // mistaken for the old one.
        held.retain(|h| h.recording.strong_count() > 0);
        if let Some(h) = held
            .iter()
            .find(|h| std::ptr::eq(h.recording.as_ptr(), Arc::as_ptr(recording)))
        {
            return Ok(Arc::clone(&h.copy));
        }
        let circuit = recording.circuit_id();
        let copy = match placement {
            MatrixPlacement::Device => {
                let uploaded = DeviceMatrices::upload(recording, device);
                tried();
                let m = uploaded?;
                tracing::info!(
                    circuit,
                    bytes = m.bytes,
                    device,
                    "circuit matrices resident on the device"
                );
                MatrixCopy::Device(m)
            }
            MatrixPlacement::Streamed => {
                let t = std::time::Instant::now();
                let m = HostMatrices::pin(recording, chunk_bytes, pool)?;
                tracing::info!(
                    circuit,
                    chunk_bytes,
                    chunks = ?m.view.n_chunks,
                    ms = t.elapsed().as_millis() as u64,
                    device,
                    "circuit matrices pinned in host memory: each proof streams them to the device"
                );
                MatrixCopy::Host(Box::new(m))
            }
            MatrixPlacement::Host => return Err(backend_error("matrices the device does not read")),
        };
        let copy = Arc::new(copy);
        held.push(Held {
            recording: Arc::downgrade(recording),
            copy: Arc::clone(&copy),
            circuit_id: circuit.to_string(),
        });
        Ok(copy)
    }

    /// The copies held: circuit type, placement, and the device bytes each
    /// takes (a streamed one's are its proofs').
    pub(super) fn report(&self) -> Vec<(String, MatrixPlacement, u64)> {
        let mut held = self.held.lock().recover();
        held.retain(|h| h.recording.strong_count() > 0);
        held.iter()
            .map(|h| {
                let bytes = match &*h.copy {
                    MatrixCopy::Device(m) => m.bytes,
                    MatrixCopy::Host(m) => 2 * m.view.chunk_bytes as u64,
                };
                (h.circuit_id.clone(), h.copy.placement(), bytes)
            })
            .collect()
    }

    /// Device bytes the copies hold across proofs (resident ones').
    pub(super) fn device_bytes(&self) -> u64 {
        self.report()
            .iter()
            .filter(|(_, p, _)| *p == MatrixPlacement::Device)
            .map(|(_, _, b)| b)
            .sum()
    }
}
