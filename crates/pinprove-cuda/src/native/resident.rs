//! SRS bases resident in device memory: one handle per query, freed when
//! the last proof using it is done.

use std::ffi::{c_int, c_void};
use std::path::PathBuf;

use pinprove_groth16::{ProveError, Srs, SrsPoints};

use super::check;
use super::curve::{Curve, G1, G2};
use super::ffi::{pinprove_resident_g1_free, pinprove_resident_g2_free};

/// One query's bases in device memory.
pub(super) struct Resident {
    pub(super) handle: *mut c_void,
    /// How many bases it holds.
    pub(super) len: usize,
    g2: bool,
}

// SAFETY: the handle names device memory and its size; queued device work
// only reads it (each proof holds an Arc until its device work completed),
// and it is freed once, in Drop. Nothing ties it to the thread that created
// it.
unsafe impl Send for Resident {}
// SAFETY: as for Send: shared use only reads.
unsafe impl Sync for Resident {}

impl Resident {
    /// Whether its bases are G2's.
    pub(super) fn is_g2(&self) -> bool {
        self.g2
    }
}

impl Drop for Resident {
    fn drop(&mut self) {
        // SAFETY: the handle came from the matching pinprove_resident_* and
        // is freed exactly once, here; an Arc keeps it alive through any
        // proof that uses it.
        unsafe {
            if self.g2 {
                pinprove_resident_g2_free(self.handle)
            } else {
                pinprove_resident_g1_free(self.handle)
            }
        }
    }
}

/// An SRS's five queries on the device: h, l, a, b_g1, b_g2.
pub(super) struct ResidentSrs {
    pub(super) queries: [Resident; 5],
    pub(super) bytes: u64,
}

pub(super) fn resident<C: Curve>(device: c_int, bases: &[C::Affine]) -> Result<Resident, ProveError> {
    let mut handle = std::ptr::null_mut();
    // SAFETY: `bases` holds `len` points; the call copies them to the device
    // before returning and writes one handle.
    check(
        unsafe { C::upload(&mut handle, device, bases.as_ptr(), bases.len()) },
        C::UPLOAD,
    )?;
    Ok(Resident {
        handle,
        len: bases.len(),
        g2: C::G2,
    })
}

impl ResidentSrs {
    pub(super) fn upload(p: &SrsPoints, device: c_int) -> Result<ResidentSrs, ProveError> {
        let bytes = (std::mem::size_of_val(p.h())
            + std::mem::size_of_val(p.l())
            + std::mem::size_of_val(p.a())
            + std::mem::size_of_val(p.b_g1())
            + std::mem::size_of_val(p.b_g2())) as u64;
        Ok(ResidentSrs {
            queries: [
                resident::<G1>(device, p.h())?,
                resident::<G1>(device, p.l())?,
                resident::<G1>(device, p.a())?,
                resident::<G1>(device, p.b_g1())?,
                resident::<G2>(device, p.b_g2())?,
            ],
            bytes,
        })
    }
}

/// An SRS is known by its file, or (made in memory) by its id: both stay
/// when its host points are released.
pub(super) fn srs_key(srs: &Srs) -> PathBuf {
    srs.stats()
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("mem:{}", srs.id())))
}
