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
    size_t max_batch;            // points per Pippenger batch; 0: the default
    size_t base_offset;          // the first base the scalars pair with (idx null)
    size_t idx_base;             // the query's base at the handle's first (windows): idx and small_idx less it
};

// The layout both sides rely on (x86-64 and aarch64 Linux: LP64).
#ifdef __cplusplus
static_assert(sizeof(pinprove_msm_call) == 112, "pinprove_msm_call size");
static_assert(offsetof(pinprove_msm_call, n) == 40, "pinprove_msm_call.n");
static_assert(offsetof(pinprove_msm_call, n_small) == 64, "pinprove_msm_call.n_small");
static_assert(offsetof(pinprove_msm_call, small_bits) == 72, "pinprove_msm_call.small_bits");
static_assert(offsetof(pinprove_msm_call, mont) == 76, "pinprove_msm_call.mont");
static_assert(offsetof(pinprove_msm_call, mark) == 80, "pinprove_msm_call.mark");
static_assert(offsetof(pinprove_msm_call, max_batch) == 88, "pinprove_msm_call.max_batch");
static_assert(offsetof(pinprove_msm_call, base_offset) == 96, "pinprove_msm_call.base_offset");
static_assert(offsetof(pinprove_msm_call, idx_base) == 104, "pinprove_msm_call.idx_base");
#endif
