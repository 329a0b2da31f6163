//! SRS bases resident in device memory: one handle per query, freed when
//! the last proof using it is done.

use std::ffi::{c_int, c_void};
use std::path::PathBuf;

use pinprove_groth16::{ProveError, Srs, SrsPoints};

use super::check;
use super::curve::{Curve, G1, G2};
use super::ffi::{pinprove_resident_g1_free, pinprove_resident_g2_free};
use super::table::Table;
use crate::base_tables::TablePlan;
use crate::plan::{G1_BASE, G2_BASE};

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

/// An SRS's five queries on the device: h, l, a, b_g1, b_g2, and the
/// tables of precomputed copies built for pinprove's MSM kernel.
pub(super) struct ResidentSrs {
    // Declared first: dropped before the bases they copy.
    pub(super) tables: [Option<Table>; 5],
    pub(super) queries: [Resident; 5],
    /// Device bytes of the bases and the tables.
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
            tables: [None, None, None, None, None],
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

impl ResidentSrs {
    /// Builds tables of copies for windows of `window_bits` bits in `room`
    /// device bytes, query by query from the largest MSM (h, whose scalars
    /// are all full-width) on, each as many copies as what is left holds;
    /// returns the bytes they took (counted in `bytes` as each is built,
    /// so an error leaves the count of those built).
    pub(super) fn build_tables(&mut self, window_bits: u32, mut room: u64) -> Result<u64, ProveError> {
        let mut taken = 0;
        for q in 0..5 {
            let n = self.queries[q].len as u64;
            let point = if q == 4 { G2_BASE } else { G1_BASE };
            if n == 0 || self.tables[q].is_some() {
                continue;
            }
            let Some(plan) = TablePlan::for_memory(n, point, window_bits, n * point + room) else {
                continue;
            };
            // A table's points are named by 31-bit indices.
            let copies = u64::from(plan.copies).min(((1 << 31) - 1) / n) as u32;
            if copies <= 1 {
                continue;
            }
            let table = if q == 4 {
                Table::build::<G2>(&self.queries[q], window_bits, copies)?
            } else {
                Table::build::<G1>(&self.queries[q], window_bits, copies)?
            };
            room = room.saturating_sub(table.bytes);
            taken += table.bytes;
            self.bytes += table.bytes;
            self.tables[q] = Some(table);
        }
        Ok(taken)
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
