// pinprove's MSM kernel over fixed bases and their precomputed copies
// (the algebra is in msm_tables.cuh). One MSM call, batch by batch of its
// entries (pairs of a window and a scalar: a batch is a range of windows
// of a range of scalars):
//   1. digits: each scalar's signed digits in the batch's windows become
//      entries (key: the bucket, value: the point, which copy, and the
//      sign), zero digits a sentinel key that sorts last;
//   2. the entries are sorted by key (CUB's radix sort over the key's
//      bits), and each bucket's first entry found by binary search;
//   3. accumulation: the sorted entries are cut into runs of CHUNK, one
//      per worker (a thread, or a pair of threads for G2, whose Fp2
//      arithmetic is shared by two lanes), so every worker adds the same
//      number of points whatever the buckets' sizes. Each run of a bucket
//      inside a worker's entries leaves its sum: in the bucket's slot of
//      the batch when the run is the bucket's whole, else as one of the
//      worker's two partial sums (its first run, its last);
//   4. fixup: a thread per bucket adds its run sums into the bucket's sum.
//      Workers only store at the end of a run (the lanes of a warp end
//      runs at different entries: an addition there would stall the
//      warp's other lanes), and every bucket's thread does the same work.
// Steps 1–2 of a batch run on the lane's digits stream while the compute
// stream runs steps 3–4 of the batch before (two sets of entries).
// The bucket sums stay on the device across batches: every set's, or,
// where those are large and a batch holds one window, one set's at a time
// (batches run set by set, and a set is reduced once its windows are done,
// so wide windows cost one set's memory). Each set of buckets is reduced,
// segment by segment, to pairs (Σ (j+1)·B_j, Σ B_j) that the host weighs
// and adds (native_msm.cu).
//
// Points: own formulas in XYZZ coordinates (x = X/ZZ, y = Y/ZZZ) over
// sppark's field types: mixed addition madd-2008-s, addition add-2008-s
// and doubling dbl-2008-s-1 of the Explicit-Formulas Database (a = 0),
// each with its equal-point and opposite-point cases. A bucket is stored
// as X, Y, ZZZ, ZZ (the layout sppark's host xyzz_t reads), infinity as
// ZZ = ZZZ = 0; an affine point as blst stores it, infinity as (0, 0).

#include <cuda.h>

// CUB first, before sppark's headers define macros of their own. Its
// dispatch code trips GCC's may-be-uninitialized analysis in the host
// compilation (a false positive inside CUB).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cub/device/device_radix_sort.cuh>

#include <ff/bls12-381-fp2.hpp>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "lane.cuh"
#include "msm_tables.cuh"

namespace {

using pinprove::tables::call_t;

// The sign of an entry's value; the rest is m·n_tab + the point's index.
constexpr uint32_t SIGN = 0x80000000u;
// Sorted entries per worker in the accumulation.
constexpr uint32_t CHUNK = 64;
// Entries per batch by default: keys and values, twice for the sort, in
// two sets (one sorted while the other's batch is accumulated): 512 MiB.
// A large MSM's batch is one window of 2^24 scalars, so that a set of
// 2^(c−1) buckets gets many entries per batch (each bucket's sum is read
// and written once per batch, with a full addition): a batch of every
// window of fewer scalars spreads as many entries over W sets.
constexpr size_t MAX_ENTRIES = (size_t)1 << 24;
// Bucket sets kept on the device together up to this size, else one at a
// time.
constexpr size_t SETS_TOGETHER = (size_t)512 << 20;
// The most a call may ask for (8 GiB of entries).
constexpr size_t LARGEST_ENTRIES = (size_t)1 << 28;
constexpr uint32_t BLOCK = 256;

template<class field_t>
struct affine_mem {
    typename field_t::mem_t X, Y;
};

template<class field_t>
struct xyzz_mem {
    typename field_t::mem_t X, Y, ZZZ, ZZ;
};

static_assert(sizeof(affine_mem<fp_t>) == 96, "G1 affine points as blst stores them");
static_assert(sizeof(xyzz_mem<fp_t>) == 192, "G1 buckets as the host reads them");
#ifndef __CUDA_ARCH__
static_assert(sizeof(affine_mem<fp2_t>) == 192, "G2 affine points as blst stores them");
static_assert(sizeof(xyzz_mem<fp2_t>) == 384, "G2 buckets as the host reads them");
#endif

#ifdef __CUDA_ARCH__
template<class F>
__device__ __forceinline__ F sq(const F& a)
{
    return a ^ 2;
}
#endif

// A point in XYZZ coordinates, in registers. For G2 both lanes of a pair
// run every member together: branches depend only on values both hold
// (is_zero is decided for the whole Fp2 element).
template<class field_t>
struct xyzz {
    field_t X, Y, ZZZ, ZZ;

#ifdef __CUDA_ARCH__
    __device__ void set_inf()
    {
        X.zero();
        Y.zero();
        ZZZ.zero();
        ZZ.zero();
    }

    __device__ bool is_inf() const
    {
        bool zzz = ZZZ.is_zero();
        bool zz = ZZ.is_zero();
        return zzz && zz;
    }

    __device__ void load(const xyzz_mem<field_t>& m)
    {
        X = m.X;
        Y = m.Y;
        ZZZ = m.ZZZ;
        ZZ = m.ZZ;
    }

    __device__ void store(xyzz_mem<field_t>& m) const
    {
        m.X = X;
        m.Y = Y;
        m.ZZZ = ZZZ;
        m.ZZ = ZZ;
    }

    // The affine point (x, y), (0, 0) being infinity. No branch.
    __device__ void set_affine(const field_t& x, const field_t& y)
    {
        bool xz = x.is_zero();
        bool yz = y.is_zero();
        int inf = xz && yz;
        X = x;
        Y = y;
        ZZ = field_t::one(inf);
        ZZZ = field_t::one(inf);
    }

    // this += ±(x2, y2) (madd-2008-s; mdbl-2008-s-1 when equal).
    __device__ void add_affine(const field_t& x2, const field_t& y2_in, bool negate)
    {
        bool x2z = x2.is_zero();
        bool y2z = y2_in.is_zero();
        if (x2z && y2z)
            return;
        field_t y2 = y2_in;
        y2.cneg(negate);
        if (is_inf()) {
            X = x2;
            Y = y2;
            ZZ = field_t::one(0);
            ZZZ = field_t::one(0);
            return;
        }
        field_t P = x2 * ZZ;
        P = P - X; // U2 − X1
        field_t R = y2 * ZZZ;
        R = R - Y; // S2 − Y1
        if (!P.is_zero()) {
            field_t PP = sq(P);
            field_t PPP = P * PP;
            field_t Q = X * PP;
            field_t X3 = sq(R);
            X3 = X3 - PPP;
            X3 = X3 - Q;
            X3 = X3 - Q;
            field_t T = Q - X3;
            T = R * T;
            field_t V = Y * PPP;
            Y = T - V;
            X = X3;
            ZZ = ZZ * PP;
            ZZZ = ZZZ * PPP;
        } else if (R.is_zero()) {
            // The same point: 2·(x2, y2).
            field_t U = y2 + y2;
            field_t V = sq(U);
            field_t W = U * V;
            field_t S = x2 * V;
            field_t M = sq(x2);
            M = M + M + M;
            field_t X3 = sq(M);
            X3 = X3 - S;
            X3 = X3 - S;
            field_t T = S - X3;
            T = M * T;
            field_t Z = W * y2;
            Y = T - Z;
            X = X3;
            ZZ = V;
            ZZZ = W;
        } else {
            set_inf(); // opposite points
        }
    }

    // this = 2·this (dbl-2008-s-1; infinity stays infinity). No branch.
    __device__ void dbl()
    {
        field_t U = Y + Y;
        field_t V = sq(U);
        field_t W = U * V;
        field_t S = X * V;
        field_t M = sq(X);
        M = M + M + M;
        field_t X3 = sq(M);
        X3 = X3 - S;
        X3 = X3 - S;
        field_t T = S - X3;
        T = M * T;
        field_t Z = W * Y;
        Y = T - Z;
        X = X3;
        ZZ = V * ZZ;
        ZZZ = W * ZZZ;
    }

    // this += q (add-2008-s; dbl when equal).
    __device__ void add(const xyzz& q)
    {
        if (q.is_inf())
            return;
        if (is_inf()) {
            *this = q;
            return;
        }
        field_t U1 = X * q.ZZ;
        field_t S1 = Y * q.ZZZ;
        field_t P = q.X * ZZ;
        P = P - U1; // U2 − U1
        field_t R = q.Y * ZZZ;
        R = R - S1; // S2 − S1
        if (!P.is_zero()) {
            field_t PP = sq(P);
            field_t PPP = P * PP;
            field_t Q = U1 * PP;
            field_t X3 = sq(R);
            X3 = X3 - PPP;
            X3 = X3 - Q;
            X3 = X3 - Q;
            field_t T = Q - X3;
            T = R * T;
            field_t V = S1 * PPP;
            Y = T - V;
            X = X3;
            ZZ = ZZ * q.ZZ;
            ZZ = ZZ * PP;
            ZZZ = ZZZ * q.ZZZ;
            ZZZ = ZZZ * PPP;
        } else if (R.is_zero()) {
            dbl();
        } else {
            set_inf();
        }
    }

    // The affine point, (0, 0) at infinity. Every lane of the warp must
    // call it at once (the inversion shuffles across lanes). No branch.
    __device__ void to_affine(field_t& x, field_t& y) const
    {
        bool inf = is_inf();
        field_t d = field_t::csel(field_t::one(0), ZZZ, inf);
        field_t zzz_inv = d.reciprocal();
        field_t z_inv = zzz_inv * ZZ; // 1/Z
        field_t zz_inv = sq(z_inv);   // 1/Z²
        x = X * zz_inv;
        y = Y * zzz_inv;
        x = czero(x, inf);
        y = czero(y, inf);
    }
#endif
};

// dst[i] = 2^doublings · src[i]. Every thread runs every round (the
// inversion shuffles across the warp); a thread past the end works on the
// last point and stores nothing.
template<class field_t>
__global__ void build_copy(affine_mem<field_t>* dst, const affine_mem<field_t>* src, size_t n, uint32_t doublings)
{
#ifdef __CUDA_ARCH__
    const uint32_t degree = field_t::degree;
    const size_t per_round = (size_t)gridDim.x * blockDim.x / degree;
    const size_t me = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / degree;
    const size_t rounds = (n + per_round - 1) / per_round;
    for (size_t round = 0; round < rounds; round++) {
        size_t i = round * per_round + me;
        bool live = i < n;
        size_t j = live ? i : n - 1;
        field_t x = src[j].X;
        field_t y = src[j].Y;
        xyzz<field_t> p;
        p.set_affine(x, y);
        for (uint32_t d = 0; d < doublings; d++)
            p.dbl();
        p.to_affine(x, y);
        if (live) {
            dst[i].X = x;
            dst[i].Y = y;
        }
    }
#endif
}

// Entry (window j, scalar i) for windows j0 <= j < j1 at (j − j0)·num + i:
// key set·2^(c−1) + |d| − 1, value (m·n_tab + point) with the sign; a zero
// digit gets the sentinel key group·2^(c−1). Digits as
// base_tables::signed_digits makes them (the windows below j0 give the
// carry into j0).
__global__ void digits(uint32_t* keys, uint32_t* vals, const fr_t* scalars, uint32_t num, bool mont,
                       const uint32_t* idx, uint32_t idx_base, size_t first_point, uint32_t n_tab, uint32_t wbits,
                       uint32_t j0, uint32_t j1, uint32_t group)
{
#ifdef __CUDA_ARCH__
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= num)
        return;
    fr_t s = scalars[i];
    if (mont)
        s.from();
    uint32_t limbs[8];
    for (uint32_t k = 0; k < 8; k++)
        limbs[k] = s[k];
    const uint32_t point = idx != nullptr ? idx[i] - idx_base : (uint32_t)(first_point + i);
    const uint32_t half = 1u << (wbits - 1);
    const uint32_t full = 1u << wbits;
    const uint32_t mask = full - 1;
    const uint32_t sentinel = group << (wbits - 1);
    uint32_t carry = 0;
    for (uint32_t j = 0; j < j1; j++) {
        uint32_t off = j * wbits;
        uint32_t at = off / 32;
        uint64_t two = at < 8 ? limbs[at] : 0;
        if (at + 1 < 8)
            two |= (uint64_t)limbs[at + 1] << 32;
        uint32_t w = ((uint32_t)(two >> (off % 32)) & mask) + carry;
        uint32_t mag;
        bool neg = w > half;
        if (neg) {
            mag = full - w; // the digit w − 2^c, and a carry
            carry = 1;
        } else {
            mag = w;
            carry = 0;
        }
        if (j < j0)
            continue;
        size_t e = (size_t)(j - j0) * num + i;
        if (mag == 0) {
            keys[e] = sentinel;
            vals[e] = 0;
        } else {
            uint32_t m = j / group;
            uint32_t r = j - m * group;
            keys[e] = (r << (wbits - 1)) | (mag - 1);
            vals[e] = (m * n_tab + point) | (neg ? SIGN : 0);
        }
    }
#endif
}

// starts[b] = the first sorted entry whose key is at least klo + b, for b
// in 0 ..= nb (the batch's keys lie in klo .. klo + nb, zero digits'
// sentinel above them).
__global__ void bucket_starts(uint32_t* starts, const uint32_t* keys, uint32_t total, uint32_t klo, uint32_t nb)
{
    uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b > nb)
        return;
    const uint32_t key = klo + b;
    uint32_t lo = 0, hi = total;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    starts[b] = lo;
}

// Worker w sums entries [w·CHUNK, (w+1)·CHUNK) of the sorted ones (up to
// the first zero digit's sentinel). A run of one bucket inside them that
// is the bucket's whole (the keys beside it differ) goes to whole[key −
// klo]; one that is not to partial[2w] when it is the worker's first run,
// else to partial[2w + 1] (then it is its last).
template<class field_t>
__global__ void accumulate(xyzz_mem<field_t>* whole, uint32_t klo, xyzz_mem<field_t>* partial,
                           const uint32_t* keys, const uint32_t* vals, uint32_t total, uint32_t sentinel,
                           uint32_t workers, const affine_mem<field_t>* bases, const affine_mem<field_t>* extra,
                           uint32_t n_tab)
{
#ifdef __CUDA_ARCH__
    const uint32_t w = (blockIdx.x * blockDim.x + threadIdx.x) / field_t::degree;
    if (w >= workers)
        return;
    const uint32_t lo = w * CHUNK;
    const uint32_t hi = min(lo + CHUNK, total);
    uint32_t cur = keys[lo];
    if (cur == sentinel)
        return;
    // Whether the bucket of the first run began in a run before.
    bool continued = lo > 0 && keys[lo - 1] == cur;
    xyzz<field_t> acc;
    acc.set_inf();
    bool first = true;
    for (uint32_t p = lo;; p++) {
        uint32_t k = p < hi ? keys[p] : 0xffffffffu;
        if (k != cur) {
            // The run of bucket `cur` ends at p.
            bool goes_on = p == hi && hi < total && keys[hi] == cur;
            if (!continued && !goes_on)
                acc.store(whole[cur - klo]);
            else
                acc.store(partial[2 * (size_t)w + (first ? 0 : 1)]);
            if (p >= hi || k == sentinel)
                break;
            first = false;
            continued = false;
            cur = k;
            acc.set_inf();
        }
        uint32_t v = vals[p];
        uint32_t at = v & ~SIGN;
        uint32_t m = at / n_tab;
        uint32_t i = at - m * n_tab;
        const affine_mem<field_t>& a = m == 0 ? bases[i] : extra[(size_t)(m - 1) * n_tab + i];
        field_t x = a.X;
        field_t y = a.Y;
        acc.add_affine(x, y, (v & SIGN) != 0);
    }
#endif
}

// Bucket klo + b of the batch (b < nb) adds its run sums (see accumulate
// for which slot holds what) into its sum, buckets[b + bucket_off].
template<class field_t>
__global__ void fixup(xyzz_mem<field_t>* buckets, uint32_t bucket_off, const xyzz_mem<field_t>* whole,
                      const xyzz_mem<field_t>* partial, const uint32_t* starts, uint32_t nb)
{
#ifdef __CUDA_ARCH__
    const uint32_t b = (blockIdx.x * blockDim.x + threadIdx.x) / field_t::degree;
    if (b >= nb)
        return;
    const uint32_t s = starts[b], e = starts[b + 1];
    if (e == s)
        return;
    const uint32_t w0 = s / CHUNK, w1 = (e - 1) / CHUNK;
    xyzz<field_t> acc;
    if (w0 == w1) {
        acc.load(whole[b]);
    } else {
        acc.load(partial[2 * (size_t)w0 + (s == w0 * CHUNK ? 0 : 1)]);
        for (uint32_t w = w0 + 1; w <= w1; w++) {
            xyzz<field_t> p;
            p.load(partial[2 * (size_t)w]);
            acc.add(p);
        }
    }
    xyzz<field_t> sum;
    sum.load(buckets[b + bucket_off]);
    sum.add(acc);
    sum.store(buckets[b + bucket_off]);
#endif
}

// Set r's segment k (buckets k·len .. (k+1)·len − 1 of the set) reduced to
// out[2t] = Σ_j (j+1)·B_{k·len+j} and out[2t+1] = Σ_j B_{k·len+j}, t = r·segs + k.
template<class field_t>
__global__ void integrate(xyzz_mem<field_t>* out, const xyzz_mem<field_t>* buckets, uint32_t sets,
                          uint32_t per_set, uint32_t segs)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = (blockIdx.x * blockDim.x + threadIdx.x) / field_t::degree;
    if (t >= sets * segs)
        return;
    const uint32_t r = t / segs, k = t - r * segs;
    const uint32_t len = per_set / segs;
    const xyzz_mem<field_t>* b = buckets + (size_t)r * per_set + (size_t)k * len;
    xyzz<field_t> run, acc;
    run.set_inf();
    acc.set_inf();
    for (uint32_t j = len; j-- > 0;) {
        xyzz<field_t> x;
        x.load(b[j]);
        run.add(x);
        acc.add(run);
    }
    acc.store(out[2 * (size_t)t]);
    run.store(out[2 * (size_t)t + 1]);
#endif
}

// Device memory of one call, released in stream order when it goes out
// of scope (after the work queued on the stream that reads it). Unwinding
// from an error waits for the stream first.
template<class T>
struct scratch {
    cudaStream_t stream;
    T* ptr;
    scratch(cudaStream_t s, size_t n) : stream(s), ptr(pinprove::alloc_async<T>(n, s)) {}
    scratch(const scratch&) = delete;
    ~scratch()
    {
        if (ptr == nullptr)
            return;
        if (std::uncaught_exceptions() > 0)
            (void)cudaStreamSynchronize(stream);
        (void)cudaFreeAsync(ptr, stream);
    }
};

uint32_t blocks_for(size_t threads)
{
    return (uint32_t)std::max<size_t>(1, (threads + BLOCK - 1) / BLOCK);
}

uint32_t bit_length(uint32_t v)
{
    uint32_t r = 0;
    while (v != 0) {
        r++;
        v >>= 1;
    }
    return r;
}

// The stages of a call, as the profile counts them: the digits, the sort
// (with the buckets' starts), the accumulation, the fixup, the reduction
// of the sets (with the copy of their pairs to the host).
constexpr int STAGES = 5;

// Stage times summed over the calls made while profiling is on
// (pinprove_tables_profile). A profiled call records events between its
// stages and waits for its own work before returning: profiled calls are
// not the timed ones.
struct profile_t {
    std::mutex mu;
    bool on = false;
    double ms[STAGES] = {};
};

profile_t& profile()
{
    static auto* p = new profile_t;
    return *p;
}

bool profiling()
{
    std::lock_guard<std::mutex> guard(profile().mu);
    return profile().on;
}

// Events between a profiled call's stages (nothing when not profiling).
struct stage_marks {
    cudaStream_t stream;
    bool on;
    std::vector<std::pair<int, cudaEvent_t>> marks; // (the stage that ends there, its event)

    stage_marks(cudaStream_t s, bool on_) : stream(s), on(on_) {}
    stage_marks(const stage_marks&) = delete;
    ~stage_marks()
    {
        for (auto& m : marks)
            (void)cudaEventDestroy(m.second);
    }

    // Marks the end of `stage` (-1: the call's start).
    void end(int stage)
    {
        if (!on)
            return;
        cudaEvent_t e;
        CUDA_OK(cudaEventCreate(&e));
        marks.push_back({stage, e});
        CUDA_OK(cudaEventRecord(e, stream));
    }

    // Waits for the call's work and adds its stages' times to the profile.
    void finish()
    {
        if (!on || marks.empty())
            return;
        CUDA_OK(cudaEventSynchronize(marks.back().second));
        double ms[STAGES] = {};
        for (size_t i = 1; i < marks.size(); i++) {
            float t = 0;
            CUDA_OK(cudaEventElapsedTime(&t, marks[i - 1].second, marks[i].second));
            if (marks[i].first >= 0 && marks[i].first < STAGES)
                ms[marks[i].first] += t;
        }
        std::lock_guard<std::mutex> guard(profile().mu);
        for (int k = 0; k < STAGES; k++)
            profile().ms[k] += ms[k];
    }
};

// The entries of one batch in flight: written and sorted on the digits
// stream, read by the accumulation and fixup on the compute stream.
struct entries_t {
    scratch<uint32_t> keys0, keys1, vals0, vals1, starts;
    cub::DoubleBuffer<uint32_t> keys, vals;
    cudaEvent_t sorted = nullptr; // the batch's entries are sorted, their starts found
    cudaEvent_t read = nullptr;   // the compute stream is done with them
    entries_t(cudaStream_t s, size_t entries, uint32_t nb)
        : keys0(s, entries), keys1(s, entries), vals0(s, entries), vals1(s, entries), starts(s, (size_t)nb + 1),
          keys(keys0.ptr, keys1.ptr), vals(vals0.ptr, vals1.ptr)
    {
        CUDA_OK(cudaEventCreateWithFlags(&sorted, cudaEventDisableTiming));
        CUDA_OK(cudaEventCreateWithFlags(&read, cudaEventDisableTiming));
    }
    entries_t(const entries_t&) = delete;
    ~entries_t()
    {
        if (sorted != nullptr)
            (void)cudaEventDestroy(sorted);
        if (read != nullptr)
            (void)cudaEventDestroy(read);
    }
};

// One call. Batch b's digits and sort run on the lane's digits stream
// into entry set b mod 2 while the compute stream accumulates batch b − 1
// from the other set; the digits stream reuses a set once the compute
// stream has read it. Profiled calls run every stage on the compute
// stream, so that the events between stages time them.
template<class field_t>
void run(const pinprove::lane_t& lane, const call_t& c)
{
    using namespace pinprove::tables;
    const uint32_t degree = field_t::degree;
    const uint32_t nwins = windows(c.wbits);
    const uint32_t g = group(c.wbits, c.copies);
    const uint32_t per_set = 1u << (c.wbits - 1);
    const uint32_t nbuckets = g * per_set;
    const uint32_t segs = segments(c.wbits);
    const uint32_t sentinel = nbuckets; // the key of zero digits, sorted last
    const uint32_t key_bits = bit_length(sentinel);
    // Entries per batch: MAX_ENTRIES, or fewer if asked (a batch's entries
    // are counted in 32 bits, and by CUB in an int). Every window of the
    // scalars at once where they fit, else as many whole windows of all
    // scalars as fit, else one window of `batch` scalars at a time.
    const size_t most = c.max_entries != 0 ? std::min(c.max_entries, LARGEST_ENTRIES) : MAX_ENTRIES;
    const uint32_t wins = (uint32_t)std::max<size_t>(1, std::min<size_t>(nwins, most / std::max<size_t>(c.n, 1)));
    const size_t batch = std::max<size_t>(1, std::min(c.n, most / wins));
    const size_t entries = batch * wins;
    const uint32_t max_workers = (uint32_t)((entries + CHUNK - 1) / CHUNK);
    const cudaStream_t s = lane.compute;
    stage_marks marks{s, profiling()};
    const cudaStream_t sd = marks.on ? lane.compute : lane.digits;

    // With one window per batch and sets too large to keep together, the
    // batches run set by set (window m·g + r of every copy m for set r),
    // and one set of buckets is resident. (A set reduced alone keeps fewer
    // threads busy than all sets at once: small sets stay together.)
    const bool set_by_set = wins == 1 && (size_t)nbuckets * sizeof(xyzz_mem<field_t>) > SETS_TOGETHER;
    const uint32_t resident = set_by_set ? per_set : nbuckets;
    std::vector<uint32_t> firsts; // each window range's first window, in batch order
    if (set_by_set) {
        for (uint32_t r = 0; r < g; r++)
            for (uint32_t j = r; j < nwins; j += g)
                firsts.push_back(j);
    } else {
        for (uint32_t j = 0; j < nwins; j += wins)
            firsts.push_back(j);
    }

    // The buckets a batch's keys name: one set's with one window a batch,
    // else every set's.
    const uint32_t nb = wins == 1 ? per_set : nbuckets;
    entries_t sets[2] = {{s, entries, nb}, {s, entries, nb}};
    scratch<xyzz_mem<field_t>> buckets{s, resident};
    scratch<xyzz_mem<field_t>> whole{s, nb};
    scratch<xyzz_mem<field_t>> partial{s, 2 * (size_t)max_workers};
    scratch<xyzz_mem<field_t>> out{s, 2 * (size_t)g * segs};
    size_t temp_bytes = 0;
    CUDA_OK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, sets[0].keys, sets[0].vals, (int)entries, 0,
                                            (int)key_bits, sd));
    scratch<unsigned char> temp{s, std::max<size_t>(temp_bytes, 1)};
    const size_t bucket_bytes = resident * sizeof(xyzz_mem<field_t>);
    CUDA_OK(cudaMemsetAsync(buckets.ptr, 0, bucket_bytes, s));
    // The digits stream uses memory allocated on the compute stream.
    if (sd != s)
        pinprove::order(sd, s);

    const auto* bases = static_cast<const affine_mem<field_t>*>(c.bases);
    const auto* extra = static_cast<const affine_mem<field_t>*>(c.extra);
    const auto* scalars = static_cast<const fr_t*>(c.scalars);
    try {
        marks.end(-1);
        const size_t per_range = (c.n + batch - 1) / batch;
        size_t b = 0;
        for (size_t t = 0; t < firsts.size(); t++) {
            const uint32_t j0 = firsts[t];
            const uint32_t j1 = std::min(j0 + wins, nwins);
            const uint32_t r = j0 % g;
            // The first bucket of the resident ones, and of the batch's keys.
            const uint32_t key_base = set_by_set ? r * per_set : 0;
            const uint32_t klo = wins == 1 ? r * per_set : 0;
            for (size_t part = 0; part < per_range; part++, b++) {
                entries_t& e = sets[b % 2];
                const size_t off = part * batch;
                const uint32_t num = (uint32_t)std::min(batch, c.n - off);
                const uint32_t total = num * (j1 - j0);
                if (b >= 2)
                    CUDA_OK(cudaStreamWaitEvent(sd, e.read, 0));
                digits<<<blocks_for(num), BLOCK, 0, sd>>>(
                    e.keys.Current(), e.vals.Current(), scalars + off, num, c.mont,
                    c.idx != nullptr ? c.idx + off : nullptr, c.idx_base, c.base_offset + off, (uint32_t)c.n_tab,
                    c.wbits, j0, j1, g);
                CUDA_OK(cudaGetLastError());
                marks.end(0);
                CUDA_OK(cub::DeviceRadixSort::SortPairs(temp.ptr, temp_bytes, e.keys, e.vals, (int)total, 0,
                                                        (int)key_bits, sd));
                bucket_starts<<<blocks_for((size_t)nb + 1), BLOCK, 0, sd>>>(e.starts.ptr, e.keys.Current(), total,
                                                                            klo, nb);
                CUDA_OK(cudaGetLastError());
                marks.end(1);
                CUDA_OK(cudaEventRecord(e.sorted, sd));
                CUDA_OK(cudaStreamWaitEvent(s, e.sorted, 0));
                const uint32_t workers = (total + CHUNK - 1) / CHUNK;
                accumulate<field_t><<<blocks_for((size_t)workers * degree), BLOCK, 0, s>>>(
                    whole.ptr, klo, partial.ptr, e.keys.Current(), e.vals.Current(), total, sentinel, workers, bases,
                    extra, (uint32_t)c.n_tab);
                CUDA_OK(cudaGetLastError());
                marks.end(2);
                fixup<field_t><<<blocks_for((size_t)nb * degree), BLOCK, 0, s>>>(
                    buckets.ptr, klo - key_base, whole.ptr, partial.ptr, e.starts.ptr, nb);
                CUDA_OK(cudaGetLastError());
                marks.end(3);
                CUDA_OK(cudaEventRecord(e.read, s));
            }
            // Set r is done after its last window: reduced, and its
            // buckets cleared for the next set.
            if (set_by_set && (t + 1 == firsts.size() || firsts[t + 1] % g != r)) {
                integrate<field_t><<<blocks_for((size_t)segs * degree), BLOCK, 0, s>>>(
                    out.ptr + 2 * (size_t)r * segs, buckets.ptr, 1, per_set, segs);
                CUDA_OK(cudaGetLastError());
                CUDA_OK(cudaMemsetAsync(buckets.ptr, 0, bucket_bytes, s));
                marks.end(4);
            }
        }
        if (!set_by_set) {
            integrate<field_t><<<blocks_for((size_t)g * segs * degree), BLOCK, 0, s>>>(out.ptr, buckets.ptr, g,
                                                                                        per_set, segs);
            CUDA_OK(cudaGetLastError());
        }
        CUDA_OK(cudaMemcpyAsync(c.host_out, out.ptr, 2 * (size_t)g * segs * sizeof(xyzz_mem<field_t>),
                                cudaMemcpyDeviceToHost, s));
        marks.end(4);
        // The memory is released on the compute stream, after the digits
        // stream's work too.
        if (sd != s)
            pinprove::order(s, sd);
        marks.finish();
    } catch (...) {
        (void)cudaStreamSynchronize(sd);
        throw;
    }
}

template<class field_t>
void build(cudaStream_t stream, void* extra, const void* bases, size_t n, uint32_t copies, uint32_t doublings)
{
    auto* dst = static_cast<affine_mem<field_t>*>(extra);
    const auto* src = static_cast<const affine_mem<field_t>*>(bases);
    const uint32_t blocks = std::min<uint32_t>(blocks_for(n * field_t::degree), 8192);
    for (uint32_t m = 1; m < copies; m++) {
        const affine_mem<field_t>* from = m == 1 ? src : dst + (size_t)(m - 2) * n;
        build_copy<field_t><<<blocks, BLOCK, 0, stream>>>(dst + (size_t)(m - 1) * n, from, n, doublings);
        CUDA_OK(cudaGetLastError());
    }
}

} // namespace

namespace pinprove {
namespace tables {

uint32_t wbits_for(size_t n)
{
    uint32_t lg = 0;
    while (lg < 63 && ((size_t)1 << (lg + 1)) <= n)
        lg++;
    // Bucket sets cost 2^c additions each to reduce: small MSMs take
    // narrower windows.
    return std::min<uint32_t>(16, std::max<uint32_t>(8, lg > 4 ? lg - 4 : 0));
}

void build_copies_g1(cudaStream_t stream, void* extra, const void* bases, size_t n, uint32_t copies,
                     uint32_t doublings)
{
    build<fp_t>(stream, extra, bases, n, copies, doublings);
}

void build_copies_g2(cudaStream_t stream, void* extra, const void* bases, size_t n, uint32_t copies,
                     uint32_t doublings)
{
    build<fp2_t>(stream, extra, bases, n, copies, doublings);
}

void msm_g1(const lane_t& lane, const call_t& c)
{
    run<fp_t>(lane, c);
}

void msm_g2(const lane_t& lane, const call_t& c)
{
    run<fp2_t>(lane, c);
}

} // namespace tables
} // namespace pinprove

// Turns the profile of pinprove's kernel on or off, and clears it.
extern "C" void pinprove_tables_profile(bool on)
{
    std::lock_guard<std::mutex> guard(profile().mu);
    profile().on = on;
    for (int k = 0; k < STAGES; k++)
        profile().ms[k] = 0;
}

// The profile's stage times (milliseconds of GPU time, summed over the
// calls since it was turned on): digits, sort, accumulation, fixup,
// reduction.
extern "C" void pinprove_tables_profile_read(double* ms)
{
    std::lock_guard<std::mutex> guard(profile().mu);
    for (int k = 0; k < STAGES; k++)
        ms[k] = profile().ms[k];
}
