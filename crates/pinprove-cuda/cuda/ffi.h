// Structs shared by the CUDA glue and its Rust caller (src/native/ffi.rs,
// which mirrors them #[repr(C)] and asserts the same sizes and offsets).
// Pointers the Rust side treats as opaque are void pointers here; the
// CUDA units cast them to their types (sppark's fr_t, cudaEvent_t).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// One MSM over resident bases: either the n scalars pair with the n bases
// from base_offset on (idx null; host scalars, or device scalars when
// d_scalars is not null, readable once d_ready completes; a base_offset
// other than 0 only without ones, idx and small values: a part of a plain
// MSM queued on its own), or idx names the base of each of
// the n host scalars; `ones` (may be null) is a bitmap over all resident
// bases whose set bits are added with scalar 1; small_idx names the bases
// of n_small small_values (canonical, below 2^small_bits) added by bit
// planes.
struct pinprove_msm_call {
    const void* scalars;         // n host scalars (Montgomery form unless !mont), or null
    const void* d_scalars;       // n device scalars, or null
    void* d_ready;               // cudaEvent_t: d_scalars are readable after it (may be null)
    const uint32_t* ones;        // bitmap over the bases, or null
    const uint32_t* idx;         // base of each scalar, or null
    size_t n;
    const uint32_t* small_idx;
    const uint64_t* small_values;
    size_t n_small;
    uint32_t small_bits;
    bool mont;                   // scalars in Montgomery form
    void* mark;                  // cudaEvent_t recorded after the MSM's device work (may be null)
    size_t max_batch;            // points per Pippenger batch, or (window, scalar) entries per batch of
                                 // pinprove's kernel; 0: the default
    size_t base_offset;          // the first base the scalars pair with (idx null)
    size_t idx_base;             // the query's base at the handle's first (windows): idx and small_idx less it
    uint32_t kernel;             // the full-width part: 0 sppark's Pippenger, 1 pinprove's (msm_tables.cuh)
    uint32_t window_bits;        // kernel 1 without a table: the window width (0: chosen by size)
    const void* table;           // kernel 1: precomputed copies of the handle's bases (pinprove_table_g1), or null
};

// The layout both sides rely on (x86-64 and aarch64 Linux: LP64).
#ifdef __cplusplus
static_assert(sizeof(pinprove_msm_call) == 128, "pinprove_msm_call size");
static_assert(offsetof(pinprove_msm_call, n) == 40, "pinprove_msm_call.n");
static_assert(offsetof(pinprove_msm_call, n_small) == 64, "pinprove_msm_call.n_small");
static_assert(offsetof(pinprove_msm_call, small_bits) == 72, "pinprove_msm_call.small_bits");
static_assert(offsetof(pinprove_msm_call, mont) == 76, "pinprove_msm_call.mont");
static_assert(offsetof(pinprove_msm_call, mark) == 80, "pinprove_msm_call.mark");
static_assert(offsetof(pinprove_msm_call, max_batch) == 88, "pinprove_msm_call.max_batch");
static_assert(offsetof(pinprove_msm_call, base_offset) == 96, "pinprove_msm_call.base_offset");
static_assert(offsetof(pinprove_msm_call, idx_base) == 104, "pinprove_msm_call.idx_base");
static_assert(offsetof(pinprove_msm_call, kernel) == 112, "pinprove_msm_call.kernel");
static_assert(offsetof(pinprove_msm_call, window_bits) == 116, "pinprove_msm_call.window_bits");
static_assert(offsetof(pinprove_msm_call, table) == 120, "pinprove_msm_call.table");
#endif

// A pre-compiled circuit's matrices in pinned host memory, which a proof
// streams to the device in row chunks through two chunk buffers (see
// native_spmv.cu). Matrix k's row r has entries row_ptr[k][r] ..
// row_ptr[k][r + 1] of cols[k] (witness index) and ids[k] (index into
// coeffs). chunks[k] holds n_chunks[k] + 1 row boundaries, from 0 to rows,
// increasing; each chunk fits one chunk buffer of chunk_bytes, laid out as
// native_spmv.cu's chunk_layout_t (src/native/matrices.rs counts the same).
struct pinprove_host_matrices {
    const uint64_t* row_ptr[3];
    const uint32_t* cols[3];
    const uint16_t* ids[3];
    const uint64_t* chunks[3];
    size_t n_chunks[3];
    const void* coeffs;          // n_coeffs field elements (Montgomery form)
    size_t n_coeffs;
    size_t rows;
    size_t vars;
    size_t chunk_bytes;
};

#ifdef __cplusplus
static_assert(sizeof(pinprove_host_matrices) == 160, "pinprove_host_matrices size");
static_assert(offsetof(pinprove_host_matrices, chunks) == 72, "pinprove_host_matrices.chunks");
static_assert(offsetof(pinprove_host_matrices, n_chunks) == 96, "pinprove_host_matrices.n_chunks");
static_assert(offsetof(pinprove_host_matrices, coeffs) == 120, "pinprove_host_matrices.coeffs");
static_assert(offsetof(pinprove_host_matrices, chunk_bytes) == 152, "pinprove_host_matrices.chunk_bytes");
#endif
