//! Precomputed copies of a query's resident bases, for pinprove's MSM
//! kernel (`cuda/msm_tables.cu`; the algebra and its CPU reference are in
//! [`crate::base_tables`]): built on the device once, read by every MSM
//! call over those bases that names the table.

use std::ffi::c_void;

use pinprove_groth16::ProveError;

use super::curve::Curve;
use super::ffi::{pinprove_table_copies, pinprove_table_free};
use super::resident::Resident;
use super::{backend_error, check};

/// Copies 2^(c·g·m)·P of a query's resident bases P.
pub(super) struct Table {
    pub(super) handle: *mut c_void,
    /// Bits per window, c.
    pub(super) window_bits: u32,
    /// Copies the kernel reads, the bases themselves included.
    pub(super) copies: u32,
    /// Device bytes of the copies beyond the bases.
    pub(super) bytes: u64,
    /// Bases per copy.
    pub(super) len: usize,
}

// SAFETY: the handle names device memory that MSM calls only read (each
// call's owner keeps the table alive until its device work completed) and
// that is freed once, in Drop.
unsafe impl Send for Table {}
// SAFETY: as for Send: shared use only reads.
unsafe impl Sync for Table {}

impl Table {
    /// The copies of `resident`'s bases (of curve `C`) for windows of
    /// `window_bits` bits, `copies` at most (1: the bases alone), made on
    /// its device before returning.
    pub(super) fn build<C: Curve>(resident: &Resident, window_bits: u32, copies: u32) -> Result<Table, ProveError> {
        if resident.is_g2() != C::G2 {
            return Err(backend_error("a table of the other group's bases"));
        }
        let mut handle = std::ptr::null_mut();
        // SAFETY: the resident handle is live (borrowed) and of this curve;
        // the call writes one handle, freed in Drop.
        check(
            unsafe { C::table(&mut handle, resident.handle, window_bits, copies) },
            "building a table of bases",
        )?;
        // SAFETY: the handle was just made.
        let copies = unsafe { pinprove_table_copies(handle) };
        let point = if C::G2 { 192 } else { 96 };
        Ok(Table {
            handle,
            window_bits,
            copies,
            bytes: u64::from(copies - 1) * resident.len as u64 * point,
            len: resident.len,
        })
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: from pinprove_table_g1/g2, freed once; the MSM calls
        // that read it were waited for by their owners.
        unsafe { pinprove_table_free(self.handle) }
    }
}
