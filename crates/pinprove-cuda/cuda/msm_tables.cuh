// pinprove's own MSM kernel over fixed bases (msm_tables.cu), as the MSM
// calls of native_msm.cu use it: signed-digit buckets, entries sorted by
// bucket and summed in runs of equal length, over the bases and any
// precomputed copies of them (see src/base_tables.rs for the algebra and
// the CPU reference).
//
// Scalars are cut into W = ceil(256 / c) windows of c bits with signed
// digits (−2^(c−1) < d <= 2^(c−1)). With C copies of the bases, copy m
// holding 2^(c·g·m)·P where g = ceil(W / C), window j = m·g + r adds ±copy
// m of its base to bucket |d| − 1 of set r; set r's value S_r = Σ_b (b+1)·B_b
// is weighted by 2^(c·r). Without copies (C = 1) it is Pippenger with
// signed digits, W sets.

#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "lane.cuh"

namespace pinprove {
namespace tables {

// Bits of a canonical scalar (below 2^255) with the carry signed digits
// push into the top window.
constexpr uint32_t SCALAR_BITS = 256;
// Window widths the kernel takes: a bucket key (set and bucket) and its
// sentinel fit 32 bits, and the buckets of one set a reasonable memory.
constexpr uint32_t MIN_WBITS = 4;
constexpr uint32_t MAX_WBITS = 22;

inline uint32_t windows(uint32_t wbits)
{
    return (SCALAR_BITS + wbits - 1) / wbits;
}

// Windows per set of buckets with `copies` copies of the bases.
inline uint32_t group(uint32_t wbits, uint32_t copies)
{
    uint32_t w = windows(wbits);
    return (w + copies - 1) / copies;
}

// The copies a group of `group(wbits, copies)` windows uses (copies asked
// for beyond them would never be read).
inline uint32_t used_copies(uint32_t wbits, uint32_t copies)
{
    uint32_t g = group(wbits, copies);
    return (windows(wbits) + g - 1) / g;
}

// Segments of a set's buckets the device reduces each to a pair
// (Σ (j+1)·B_j, Σ B_j); the host weighs and adds the pairs. A device
// thread walks a segment (two additions per bucket) and a host thread a
// set's pairs (three per segment): up to 2^15 buckets a set is cut into
// 256 segments, wider sets into segments of 128 buckets, at most 4096 of
// them (at c = 20, a thread per segment keeps the device busy where 256
// segments of 2048 buckets left most of it idle).
inline uint32_t segments(uint32_t wbits)
{
    uint32_t per_set = 1u << (wbits - 1);
    if (per_set <= (1u << 15))
        return per_set < 256 ? per_set : 256;
    uint32_t segs = per_set / 128;
    return segs < 4096 ? segs : 4096;
}

// The window width for an MSM of n scalars without precomputed copies.
uint32_t wbits_for(size_t n);

// Precomputed copies of a query's resident bases: made once
// (pinprove_table_g1 in native_msm.cu), read by every MSM call over them.
struct table_t {
    int device;
    size_t n;        // bases per copy
    uint32_t wbits;  // c
    uint32_t copies; // C, the bases themselves included
    void* extra;     // copies 1 .. C−1: (C − 1)·n affine points, copy m from (m − 1)·n
};

// The full-width part of one MSM call through the kernel, queued on the
// lane's compute stream (which must already be ordered after whatever
// writes `scalars` and `idx`).
struct call_t {
    const void* bases;   // copy 0: the affine points on the device
    const void* extra;   // copies 1 .. copies−1 (null with one copy)
    size_t n_tab;        // points per copy
    uint32_t wbits;
    uint32_t copies;
    const void* scalars; // n device scalars (fr_t)
    bool mont;           // scalars in Montgomery form
    const uint32_t* idx; // device: the point of each scalar, plus idx_base; or null
    uint32_t idx_base;
    size_t base_offset;  // without idx: scalar i pairs with point base_offset + i
    size_t n;
    size_t max_entries;  // entries (window, scalar) per batch (0: the kernel's default)
    void* host_out;      // pinned: group·segments pairs of buckets (host xyzz layout)
};

// Builds copies 1 .. copies−1 of n affine points into `extra` on `stream`;
// `doublings` = c·g between consecutive copies.
void build_copies_g1(cudaStream_t stream, void* extra, const void* bases, size_t n, uint32_t copies,
                     uint32_t doublings);
void build_copies_g2(cudaStream_t stream, void* extra, const void* bases, size_t n, uint32_t copies,
                     uint32_t doublings);

// Queues one call (see call_t); throws cuda_error.
void msm_g1(const lane_t& lane, const call_t& c);
void msm_g2(const lane_t& lane, const call_t& c);

} // namespace tables
} // namespace pinprove
