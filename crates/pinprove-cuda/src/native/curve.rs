//! G1 and G2 as the MSM calls see them: one trait forwarding to each
//! group's FFI, so the MSM code and the resident bases are written once.

use std::ffi::{c_int, c_void};

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Projective, G2Projective};
use group::Group;

use super::ffi::*;

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
    /// As `pinprove_window_g1`.
    unsafe fn window(out: *mut *mut c_void, device: c_int, capacity: usize) -> sppark::Error;
    /// # Safety
    /// As `pinprove_window_g1_fill`.
    unsafe fn fill(window: *mut c_void, bases: *const Self::Affine, n: usize, after: *mut c_void) -> sppark::Error;
    /// # Safety
    /// As `pinprove_window_g1_free`.
    unsafe fn free_window(window: *mut c_void);
    /// # Safety
    /// As `pinprove_msm_resident_g1_begin`.
    unsafe fn begin(out: *mut *mut c_void, resident: *const c_void, call: &MsmCall) -> sppark::Error;
    /// # Safety
    /// As `pinprove_table_g1`: `resident` from this curve's `upload`.
    unsafe fn table(out: *mut *mut c_void, resident: *const c_void, wbits: u32, copies: u32) -> sppark::Error;
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
     $upload:ident, $window:ident, $fill:ident, $free_window:ident, $begin:ident, $table:ident, $part:ident) => {
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
            unsafe fn window(out: *mut *mut c_void, device: c_int, capacity: usize) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $window(out, device, capacity) }
            }
            unsafe fn fill(window: *mut c_void, bases: *const $affine, n: usize, after: *mut c_void) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $fill(window, bases, n, after) }
            }
            unsafe fn free_window(window: *mut c_void) {
                // SAFETY: forwarded contract.
                unsafe { $free_window(window) }
            }
            unsafe fn begin(out: *mut *mut c_void, resident: *const c_void, call: &MsmCall) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $begin(out, resident, call) }
            }
            unsafe fn table(out: *mut *mut c_void, resident: *const c_void, wbits: u32, copies: u32) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $table(out, resident, wbits, copies) }
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
    pinprove_window_g1,
    pinprove_window_g1_fill,
    pinprove_window_g1_free,
    pinprove_msm_resident_g1_begin,
    pinprove_table_g1,
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
    pinprove_window_g2,
    pinprove_window_g2_fill,
    pinprove_window_g2_free,
    pinprove_msm_resident_g2_begin,
    pinprove_table_g2,
    pinprove_msm_g2_part
);
