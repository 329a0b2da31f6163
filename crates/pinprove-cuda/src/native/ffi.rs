//! The CUDA glue's C interface (`cuda/lane.cu`, `cuda/native_h.cu`,
//! `cuda/native_msm.cu`, `cuda/msm_tables.cu`, `cuda/native_spmv.cu`)
//! and the structs it shares with Rust, mirrored from `cuda/ffi.h` with the
//! same size and offset assertions on both sides.

use std::ffi::{c_int, c_void};
use std::mem::{offset_of, size_of};

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::Scalar;

unsafe extern "C" {
    // cuda/native_h.cu
    pub(super) fn pinprove_h_begin(
        out: *mut *mut c_void,
        device: c_int,
        a: *const Scalar,
        b: *const Scalar,
        c: *const Scalar,
        n: usize,
        lg_m: u32,
        uploaded: *const *mut c_void,
        marks: *const *mut c_void,
    ) -> sppark::Error;
    pub(super) fn pinprove_h_begin_precompiled(
        out: *mut *mut c_void,
        device: c_int,
        matrices: *const c_void,
        host: *const HostMatricesView,
        inputs: *const Scalar,
        n_inputs: usize,
        aux: *const Scalar,
        n_aux: usize,
        lg_m: u32,
        marks: *const *mut c_void,
        evaluated: *mut c_void,
    ) -> sppark::Error;
    pub(super) fn pinprove_h_result(job: *mut c_void, h: *mut *const Scalar, ready: *mut *mut c_void);
    #[cfg(test)]
    pub(super) fn pinprove_h_wait(job: *mut c_void) -> sppark::Error;
    #[cfg(test)]
    pub(super) fn pinprove_h_download(job: *mut c_void, h_out: *mut Scalar) -> sppark::Error;
    pub(super) fn pinprove_h_free(job: *mut c_void);
    // cuda/lane.cu
    pub(super) fn pinprove_pool_reserved(device: c_int, bytes: *mut u64) -> sppark::Error;
    pub(super) fn pinprove_pool_reserve(device: c_int, bytes: u64) -> sppark::Error;
    pub(super) fn pinprove_lane_mark(device: c_int, event: *mut c_void) -> sppark::Error;
    pub(super) fn pinprove_test_hold_compute(device: c_int, us: std::ffi::c_uint) -> c_int;
    // cuda/native_spmv.cu
    pub(super) fn pinprove_matrices_upload(
        out: *mut *mut c_void,
        bytes: *mut usize,
        device: c_int,
        views: *const CsrView,
        rows: usize,
        vars: usize,
        coeffs: *const Scalar,
        n_coeffs: usize,
    ) -> sppark::Error;
    pub(super) fn pinprove_matrices_free(handle: *mut c_void);
    // cuda/native_msm.cu
    pub(super) fn pinprove_msm_resident_g1_begin(
        out: *mut *mut c_void,
        resident: *const c_void,
        call: *const MsmCall,
    ) -> sppark::Error;
    pub(super) fn pinprove_msm_resident_g2_begin(
        out: *mut *mut c_void,
        resident: *const c_void,
        call: *const MsmCall,
    ) -> sppark::Error;
    pub(super) fn pinprove_msm_wait(pending: *const c_void) -> sppark::Error;
    pub(super) fn pinprove_msm_parts(pending: *const c_void) -> usize;
    pub(super) fn pinprove_msm_g1_part(pending: *const c_void, i: usize, out: *mut blst_p1);
    pub(super) fn pinprove_msm_g2_part(pending: *const c_void, i: usize, out: *mut blst_p2);
    pub(super) fn pinprove_msm_free(pending: *mut c_void);
    pub(super) fn pinprove_resident_g1(
        out: *mut *mut c_void,
        device: c_int,
        bases: *const blst_p1_affine,
        n: usize,
    ) -> sppark::Error;
    pub(super) fn pinprove_resident_g2(
        out: *mut *mut c_void,
        device: c_int,
        bases: *const blst_p2_affine,
        n: usize,
    ) -> sppark::Error;
    pub(super) fn pinprove_resident_g1_free(p: *mut c_void);
    pub(super) fn pinprove_resident_g2_free(p: *mut c_void);
    pub(super) fn pinprove_window_g1(out: *mut *mut c_void, device: c_int, capacity: usize) -> sppark::Error;
    pub(super) fn pinprove_window_g2(out: *mut *mut c_void, device: c_int, capacity: usize) -> sppark::Error;
    pub(super) fn pinprove_window_g1_fill(
        window: *mut c_void,
        bases: *const blst_p1_affine,
        n: usize,
        after: *mut c_void,
    ) -> sppark::Error;
    pub(super) fn pinprove_window_g2_fill(
        window: *mut c_void,
        bases: *const blst_p2_affine,
        n: usize,
        after: *mut c_void,
    ) -> sppark::Error;
    pub(super) fn pinprove_window_g1_free(p: *mut c_void);
    pub(super) fn pinprove_window_g2_free(p: *mut c_void);
    pub(super) fn pinprove_lane_limit(device: c_int, bytes: u64) -> bool;
    pub(super) fn pinprove_table_g1(
        out: *mut *mut c_void,
        resident: *const c_void,
        wbits: u32,
        copies: u32,
    ) -> sppark::Error;
    pub(super) fn pinprove_table_g2(
        out: *mut *mut c_void,
        resident: *const c_void,
        wbits: u32,
        copies: u32,
    ) -> sppark::Error;
    pub(super) fn pinprove_table_copies(table: *const c_void) -> u32;
    pub(super) fn pinprove_table_free(table: *mut c_void);
    // cuda/msm_tables.cu
    pub(super) fn pinprove_tables_profile(on: bool);
    pub(super) fn pinprove_tables_profile_read(ms: *mut f64);
}

/// One matrix of a recording as the upload reads it:
/// `struct pinprove_csr_view` in `cuda/native_spmv.cu`.
#[repr(C)]
pub(super) struct CsrView {
    pub(super) row_ptr: *const u64,
    pub(super) cols: *const u32,
    pub(super) ids: *const u16,
    pub(super) nnz: usize,
}

/// A recording's matrices in pinned host memory and their row chunks:
/// `struct pinprove_host_matrices` in `cuda/ffi.h` (field meanings there).
#[repr(C)]
pub(super) struct HostMatricesView {
    pub(super) row_ptr: [*const u64; 3],
    pub(super) cols: [*const u32; 3],
    pub(super) ids: [*const u16; 3],
    pub(super) chunks: [*const u64; 3],
    pub(super) n_chunks: [usize; 3],
    pub(super) coeffs: *const Scalar,
    pub(super) n_coeffs: usize,
    pub(super) rows: usize,
    pub(super) vars: usize,
    pub(super) chunk_bytes: usize,
}

/// One MSM over resident bases: `struct pinprove_msm_call` in `cuda/ffi.h`
/// (field meanings there).
#[repr(C)]
pub(super) struct MsmCall {
    pub(super) scalars: *const Scalar,
    pub(super) d_scalars: *const Scalar,
    pub(super) d_ready: *mut c_void,
    pub(super) ones: *const u32,
    pub(super) idx: *const u32,
    pub(super) n: usize,
    pub(super) small_idx: *const u32,
    pub(super) small_values: *const u64,
    pub(super) n_small: usize,
    pub(super) small_bits: u32,
    pub(super) mont: bool,
    pub(super) mark: *mut c_void,
    pub(super) max_batch: usize,
    pub(super) base_offset: usize,
    pub(super) idx_base: usize,
    pub(super) kernel: u32,
    pub(super) window_bits: u32,
    pub(super) table: *const c_void,
}

// The layout `cuda/ffi.h` asserts too.
const _: () = {
    assert!(size_of::<MsmCall>() == 128);
    assert!(offset_of!(MsmCall, n) == 40);
    assert!(offset_of!(MsmCall, n_small) == 64);
    assert!(offset_of!(MsmCall, small_bits) == 72);
    assert!(offset_of!(MsmCall, mont) == 76);
    assert!(offset_of!(MsmCall, mark) == 80);
    assert!(offset_of!(MsmCall, max_batch) == 88);
    assert!(offset_of!(MsmCall, base_offset) == 96);
    assert!(offset_of!(MsmCall, idx_base) == 104);
    assert!(offset_of!(MsmCall, kernel) == 112);
    assert!(offset_of!(MsmCall, window_bits) == 116);
    assert!(offset_of!(MsmCall, table) == 120);
    assert!(size_of::<HostMatricesView>() == 160);
    assert!(offset_of!(HostMatricesView, chunks) == 72);
    assert!(offset_of!(HostMatricesView, n_chunks) == 96);
    assert!(offset_of!(HostMatricesView, coeffs) == 120);
    assert!(offset_of!(HostMatricesView, chunk_bytes) == 152);
};
