// pinprove's native GPU backend: the multi-scalar multiplications in G1
// (h, l, a, b) and G2 (b), on sppark's Pippenger and batched-addition
// kernels.
//
// Bases either stay resident in device memory, uploaded once per SRS, or
// stream from host memory on every call through windows of device memory
// filled on the lane's copy stream while the previous window's bases are
// summed. An MSM over device bases is queued on the GPU's lane (lane.cuh)
// and the call returns at once; it is
// split by scalar value: bases whose scalar is 1 are summed by batched
// addition (one point addition each, selected by a bitmap), small values
// bit plane by bit plane, and only the rest — gathered into a dense array
// on the device — go through Pippenger, driven here over sppark's kernels.
// Every part leaves partial sums in a pinned host block; the host adds them
// up once the MSM's event has completed (pinprove_msm_wait, then
// pinprove_msm_*_part on as many threads as it likes). Zero scalars
// are dropped by the caller. For witnesses that are mostly bits this saves
// most of the MSM work.
//
// Results are Jacobian points with the memory layout of blst's blst_p1 /
// blst_p2.

#include <cuda.h>

#include <ff/bls12-381-fp2.hpp>

#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>

typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;

typedef jacobian_t<fp2_t> point_fp2_t;
typedef xyzz_t<fp2_t> bucket_fp2_t;
typedef bucket_fp2_t::affine_t affine_fp2_t;

typedef fr_t scalar_t;

#include <cassert>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <cstdlib>
#include <exception>
#include <memory>
#include <cooperative_groups.h>
#include <vector>

#include <ff/shfl.cuh>
#include <util/exception.cuh>
#include <util/gpu_t.cuh>
#include <util/rusterror.h>
#include <util/slice_t.hpp>
#include <util/vec2d_t.hpp>

// Two curves in one unit: kernels are instantiated by use, not by the
// header's default typedefs. sppark's `sort` kernel is an ordinary
// (non-template) function, also compiled into supraseal-c2's library: it
// gets a name of our own here so the two definitions do not collide at
// link time (every header it could clash with is included above).
#define SPPARK_DONT_INSTANTIATE_TEMPLATES
#define sort pinprove_msm_sort
#include <msm/pippenger.cuh>
#undef sort

#include "ffi.h"
#include "gpu_for.cuh"
#include "lane.cuh"
#include "msm_tables.cuh"

namespace {

// Bases in device memory an MSM reads: a query's, resident, or a window
// of a query's that streams from host memory. An MSM call's handle points
// at this part of either.
template<class affine_t>
struct bases_t {
    typedef typename affine_t::mem_t affine_h;
    int device;
    size_t n;
    affine_h* ptr = nullptr;
};

// One query's bases in device memory, uploaded once.
template<class affine_t>
struct resident_t : bases_t<affine_t> {
    dev_ptr_t<typename affine_t::mem_t> points;
    resident_t(int d, size_t n_) : points(n_)
    {
        this->device = d;
        this->n = n_;
        this->ptr = n_ > 0 ? &points[0] : nullptr;
    }
};

// Room for `capacity` bases in the lane's stream-ordered memory, filled
// with a window of a query's bases before each MSM call over them (see
// pinprove_window_g1_fill). Allocated on the compute stream, which every
// fill waits for, and released there behind the work queued so far.
template<class affine_t>
struct window_t : bases_t<affine_t> {
    pinprove::lane_t& lane;
    size_t capacity;
    window_t(int d, pinprove::lane_t& l, size_t cap) : lane(l), capacity(cap)
    {
        this->device = d;
        this->n = 0;
        this->ptr = pinprove::alloc_async<typename affine_t::mem_t>(cap, l.compute);
        pinprove::order(l.copy, l.compute);
    }
    ~window_t()
    {
        if (this->ptr != nullptr)
            (void)cudaFreeAsync(this->ptr, lane.compute);
    }
};

// One MSM over resident bases, as Rust describes it (ffi.h).
typedef pinprove_msm_call msm_call_t;

// dst[j] = src[idx[j] - base], word by word (coalesced on both sides):
// indices name a query's bases, `src` holds them from `base` on.
__global__ void gather_points(uint32_t* dst, const uint32_t* src, const uint32_t* idx, size_t n, uint32_t words,
                              uint32_t base)
{
    size_t total = n * words;
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        size_t j = t / words;
        uint32_t w = (uint32_t)(t % words);
        dst[t] = src[(size_t)(idx[j] - base) * words + w];
    }
}

// Bit k of values[i] goes to bit i of plane k (planes of `plane_words`
// words, zeroed beforehand). One warp covers 32 values: one ballot per plane.
__global__ void bit_planes(uint32_t* planes, size_t plane_words, const uint64_t* values, size_t n, uint32_t bits)
{
    size_t padded = (n + 31) / 32 * 32;
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < padded; i += stride) {
        uint64_t v = i < n ? values[i] : 0;
        for (uint32_t k = 0; k < bits; k++) {
            uint32_t word = __ballot_sync(0xffffffff, (v >> k) & 1);
            if (threadIdx.x % 32 == 0)
                planes[k * plane_words + i / 32] = word;
        }
    }
}

// Doubles each of n partial sums. An element of degree d (2 for G2's Fp2)
// is computed by d neighbouring threads together (sppark keeps one Fp2
// coordinate half per lane), so every thread runs the arithmetic, past-the-
// end ones on a copy of the last element, and only live ones store.
template<class bucket_t>
__global__ void double_sums(typename bucket_t::mem_t* sums, size_t n)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / bucket_t::degree;
    bool live = i < n;
    if (!live)
        i = n - 1;
    bucket_t b;
    b = sums[i];
    bucket_t c = b;
    b.add(c);
    if (live)
        sums[i] = b;
}

// Pinned host memory for MSM results, kept for reuse: pinning is slow,
// and freeing pinned memory waits for the whole device. Blocks are few
// (one per MSM in flight) and live as long as the process.
class host_blocks_t {
    std::mutex mu;
    std::multimap<size_t, void*> idle;

public:
    void* take(size_t& size)
    {
        {
            std::lock_guard<std::mutex> guard(mu);
            auto it = idle.lower_bound(size);
            if (it != idle.end()) {
                size = it->first;
                void* p = it->second;
                idle.erase(it);
                return p;
            }
        }
        size = (size + (1 << 20) - 1) & ~(size_t)((1 << 20) - 1);
        void* p = nullptr;
        CUDA_OK(cudaHostAlloc(&p, size, cudaHostAllocPortable));
        return p;
    }
    void give(void* p, size_t size)
    {
        std::lock_guard<std::mutex> guard(mu);
        idle.emplace(size, p);
    }
};

host_blocks_t& host_blocks()
{
    static auto* blocks = new host_blocks_t;
    return *blocks;
}

// sppark keeps a work counter per "stream id" in its accumulation and
// batched-addition kernels; its own MSM driver uses ids 0 and 1. Ours run
// only on a lane's compute stream, one at a time, under an id of their own.
constexpr uint32_t COUNTER_ID = 2;

// A device buffer in stream order: allocated on one stream (where it is
// first written), released on another (where it is last read, after that
// stream has been ordered behind the writer) when it goes out of scope.
// Unwinding from an error first waits for the lane, since how far its
// readers got is unknown.
template<class T>
struct async_buf {
    const pinprove::lane_t& lane;
    cudaStream_t release_on;
    T* ptr;
    async_buf(const pinprove::lane_t& l, cudaStream_t alloc_on, cudaStream_t release_on_, size_t n)
        : lane(l), release_on(release_on_), ptr(pinprove::alloc_async<T>(n, alloc_on))
    {}
    async_buf(const pinprove::lane_t& l, cudaStream_t on, size_t n) : async_buf(l, on, on, n) {}
    async_buf(const async_buf&) = delete;
    ~async_buf()
    {
        if (ptr == nullptr)
            return;
        if (std::uncaught_exceptions() > 0)
            lane.sync();
        (void)cudaFreeAsync(ptr, release_on);
    }
};

// An MSM whose device work is queued: results land in a pinned block, and
// the host sums them once `done` has completed. Destruction waits for the
// device work, so the block is never reused under a running copy.
struct pending_t {
    virtual ~pending_t() = default;
    // Waits for the MSM's device work.
    virtual cudaError_t wait() const = 0;
    // How many parts the host sums (see job_t::part).
    virtual size_t parts() const = 0;
};

template<class bucket_t, class point_t, class affine_t>
struct curve {
    typedef typename affine_t::mem_t affine_h;
    typedef typename bucket_t::mem_t bucket_h;
    static_assert(sizeof(affine_h) % sizeof(uint32_t) == 0, "bases are whole words");
#ifndef __CUDA_ARCH__ // on the device, an Fp2 bucket_t is one lane's half
    static_assert(sizeof(bucket_h) == sizeof(bucket_t), "results are read on the host as they are on the device");
#endif

    // Threads per window in sppark's `integrate`: each reduces one segment
    // of the window's buckets to a pair (Σ (j+1)·B_j over the segment, Σ B_j).
    static constexpr uint32_t SEGMENTS = MSM_NTHREADS / bucket_t::degree;

    // Window width and batching of a Pippenger pass over n points. The
    // width follows sppark's choice for n points; batches bound the digit
    // arrays (4 bytes per point and window) to MAX_BATCH points (tests pick
    // smaller batches to cover the batch loop).
    static constexpr size_t MAX_BATCH = (size_t)1 << 24;
    struct plan_t {
        uint32_t wbits, nwins;
        size_t batches, stride;
    };
    static constexpr uint32_t lg2(size_t n)
    {
        uint32_t r = 0;
        while (n >>= 1)
            r++;
        return r;
    }
    static plan_t plan(size_t n, size_t max_batch)
    {
        if (max_batch == 0)
            max_batch = MAX_BATCH;
        size_t np = (n + WARP_SZ - 1) / WARP_SZ * WARP_SZ;
        uint32_t wbits = 10;
        if (np > 192)
            wbits = std::max(10u, std::min(lg2(np + np / 2) - 8, 18u));
        uint32_t nwins = (scalar_t::bit_length() - 1) / wbits + 1;
        size_t batches = (n + max_batch - 1) / max_batch;
        size_t stride = (n + batches - 1) / batches;
        stride = (stride + WARP_SZ - 1) / WARP_SZ * WARP_SZ;
        return plan_t{wbits, nwins, batches, stride};
    }

    // Bits of the top window's digits (the others have wbits).
    static uint32_t window_bits(uint32_t wbits, uint32_t nwins, uint32_t y)
    {
        return y + 1 < nwins ? wbits : scalar_t::bit_length() - y * wbits;
    }

    // Words of a bitmap over n bases: sppark's batched addition reads whole
    // blocks of 1024 bits.
    static size_t bitmap_words(size_t n) { return (n + 1023) / 1024 * 32; }

    static size_t partial_sums(const gpu_t& gpu) { return (size_t)gpu.sm_count() * BATCH_ADD_BLOCK_SIZE / WARP_SZ; }

    // What the host adds up for one MSM: runs of partial sums (weight 1)
    // and, per Pippenger batch, the windows' segment pairs.
    struct piece_t {
        size_t at;      // first bucket in the block
        size_t count;   // buckets
        uint32_t wbits; // 0 for partial sums
        uint32_t nwins; // windows; sets of buckets for pinprove's kernel
        uint32_t segs;  // pinprove's kernel: segment pairs per set (0: sppark's windows)
    };

    struct job_t : pending_t {
        pinprove::lane_t& lane;
        bucket_t* block = nullptr;
        size_t block_size = 0;
        std::vector<piece_t> pieces;
        cudaEvent_t done = nullptr;
        bool queued = false; // `done` is recorded after all of the job's work

        explicit job_t(pinprove::lane_t& l) : lane(l) {}
        ~job_t() override
        {
            if (queued)
                (void)wait();
            else
                lane.sync();
            if (block != nullptr)
                host_blocks().give(block, block_size);
            if (done != nullptr)
                (void)cudaEventDestroy(done);
        }
        // Buckets the pieces take so far.
        size_t buckets() const { return pieces.empty() ? 0 : pieces.back().at + pieces.back().count; }
        size_t add_piece(size_t count, uint32_t wbits = 0, uint32_t nwins = 0, uint32_t segs = 0)
        {
            size_t at = buckets();
            pieces.push_back(piece_t{at, count, wbits, nwins, segs});
            return at;
        }

        cudaError_t wait() const override { return cudaEventSynchronize(done); }
        // The MSM is the sum of its parts, each summed on its own (by any
        // thread, at once, once the work is done): a run of partial sums,
        // or one window of a Pippenger batch, already weighted by
        // 2^(y·wbits). Spreading the windows over threads shortens the wait
        // after the device has finished; the extra doublings (about
        // nwins²·wbits/2 instead of nwins·wbits) cost less than that.
        size_t parts() const override
        {
            size_t n = 0;
            for (const auto& p : pieces)
                n += p.wbits == 0 ? 1 : p.nwins;
            return n;
        }
        point_t part(size_t i) const
        {
            point_t out;
            out.inf();
            for (const auto& p : pieces) {
                size_t k = p.wbits == 0 ? 1 : p.nwins;
                if (i >= k) {
                    i -= k;
                    continue;
                }
                const bucket_t* b = block + p.at;
                if (p.wbits == 0) {
                    bucket_t sum;
                    sum.inf();
                    for (size_t j = 0; j < p.count; j++)
                        sum.add(b[j]);
                    return point_t(sum);
                }
                uint32_t y = (uint32_t)i;
                if (p.segs != 0)
                    return table_set(b + (size_t)y * 2 * p.segs, p.segs, p.wbits, y);
                out = window(b + (size_t)y * 2 * SEGMENTS, window_bits(p.wbits, p.nwins, y));
                for (uint32_t d = 0; d < y * p.wbits; d++)
                    out.dbl();
                return out;
            }
            return out;
        }
    };

    // One window's value from its SEGMENTS pairs (r[2t], r[2t+1]) =
    // (Σ_j (j+1)·B, Σ_j B) over segment t of L = 2^(wbits-1)/SEGMENTS
    // buckets. With lsbits < wbits (the top window) sppark's sort spreads
    // the digits 2^(wbits-lsbits) buckets apart, so bucket g weighs
    // ⌊g / 2^(wbits-lsbits)⌋ + 1. Segment t then adds its own pair plus
    // t·L/2^(wbits-lsbits) times its plain sum; when a segment is narrower
    // than that spacing (pairs are then plain sums) segment t weighs
    // ⌊t·L / 2^(wbits-lsbits)⌋ + 1. Both weightings are sums of suffix sums,
    // taken from the top segment down.
    static point_t window(const bucket_t* r, uint32_t lsbits)
    {
        const uint32_t seg_bits = lg2(SEGMENTS);
        bucket_t run, sum;
        run.inf();
        sum.inf();
        if (lsbits - 1 <= seg_bits) {
            uint32_t every = 1u << (seg_bits + 1 - lsbits);
            for (uint32_t t = SEGMENTS; t-- > 0;) {
                run.add(r[2 * t + 1]);
                if (t % every == 0)
                    sum.add(run);
            }
            return point_t(sum);
        }
        bucket_t own;
        own.inf();
        for (uint32_t t = SEGMENTS; t-- > 0;) {
            own.add(r[2 * t]);
            if (t > 0) {
                run.add(r[2 * t + 1]);
                sum.add(run);
            }
        }
        point_t total = sum;
        for (uint32_t i = 0; i < lsbits - 1 - seg_bits; i++)
            total.dbl();
        total.add(point_t(own));
        return total;
    }

    // Set r of pinprove's kernel (msm_tables.cuh) from its `segs` pairs
    // (r[2k], r[2k+1]) = (Σ_j (j+1)·B, Σ_j B) over segment k of
    // L = 2^(wbits−1)/segs buckets: bucket k·L + j weighs k·L + j + 1, so
    // the set is Σ_k pair_k.0 + L·Σ_k k·pair_k.1 (the second a sum of
    // suffix sums), weighted by 2^(wbits·r).
    static point_t table_set(const bucket_t* r, uint32_t segs, uint32_t wbits, uint32_t set)
    {
        bucket_t own, run, sum;
        own.inf();
        run.inf();
        sum.inf();
        for (uint32_t k = segs; k-- > 0;) {
            own.add(r[2 * k]);
            if (k > 0) {
                run.add(r[2 * k + 1]);
                sum.add(run);
            }
        }
        point_t total = sum;
        const uint32_t len = (1u << (wbits - 1)) / segs;
        for (uint32_t l = len; l > 1; l >>= 1)
            total.dbl();
        total.add(point_t(own));
        for (uint32_t d = 0; d < wbits * set; d++)
            total.dbl();
        return total;
    }

    // Adds to the partial sums `d_sums` the n bases whose bit is set in the
    // device bitmap (LSB first: word w, bit b is base 32w + b); overwrites
    // them instead when !accumulate.
    static void add_selected(const pinprove::lane_t& lane, const gpu_t& gpu, bucket_h* d_sums,
                             const affine_h* points, size_t n, const uint32_t* d_bitmap, bool accumulate)
    {
        void (*kernel)(bucket_h*, const affine_h*, uint32_t, const uint32_t*, bool, uint32_t) =
            batch_addition<bucket_t, affine_h>;
        lane.compute.launch_coop(kernel, launch_params_t{gpu.sm_count(), BATCH_ADD_BLOCK_SIZE}, d_sums, points,
                                 (uint32_t)n, d_bitmap, accumulate, COUNTER_ID);
    }

    // dst = the bases named by the device indices (less `base`), on the
    // compute stream.
    static void gather(const pinprove::lane_t& lane, const gpu_t& gpu, affine_h* dst, const bases_t<affine_t>& res,
                       const uint32_t* d_idx, size_t n, uint32_t base)
    {
        const uint32_t words = sizeof(affine_h) / sizeof(uint32_t);
        gather_points<<<gpu.sm_count() * 4, 256, 0, lane.compute>>>((uint32_t*)dst, (const uint32_t*)res.ptr, d_idx,
                                                                    n, words, base);
        CUDA_OK(cudaGetLastError());
    }

    template<class T>
    static T* copy_in(const pinprove::lane_t& lane, async_buf<T>& dst, const T* src, size_t n)
    {
        if (n > 0)
            CUDA_OK(cudaMemcpyAsync(dst.ptr, src, n * sizeof(T), cudaMemcpyHostToDevice, lane.copy));
        return dst.ptr;
    }

    // Pippenger over n device points and scalars: per batch, the digits
    // stream breaks the scalars into signed windows and sorts them by
    // bucket; the compute stream sums the buckets (sppark's kernels),
    // reduces each window to segment pairs and copies them, with the
    // window-0 digit-1 partial sums, into the job's block. The digits
    // stream sorts batch b+1 while the compute stream still sums batch b.
    static void pippenger(job_t& job, const gpu_t& gpu, const affine_h* d_points, const scalar_t* d_scalars,
                          size_t n, bool mont, const plan_t& p, const std::vector<size_t>& at)
    {
        const pinprove::lane_t& lane = job.lane;
        uint32_t row = 1u << (p.wbits - 1);
        size_t nsums = partial_sums(gpu);
        async_buf<bucket_h> buckets{lane, lane.compute, p.nwins * row + nsums};
        async_buf<uint32_t> digits_mem{lane, lane.digits, (size_t)p.nwins * (p.stride + row)};
        async_buf<uint2> temps_mem{lane, lane.digits, 2 * p.stride};
        vec2d_t<uint32_t> digits{digits_mem.ptr, (uint32_t)p.stride};
        vec2d_t<uint32_t> hist{digits_mem.ptr + (size_t)p.nwins * p.stride, row};
        vec2d_t<uint2> temps{temps_mem.ptr, (uint32_t)p.stride};

        uint32_t grid = gpu.sm_count() / 3; // sppark's sweet spot for its sort
        while (grid & (grid - 1))
            grid -= grid & (0 - grid);
        const size_t sort_shared = sizeof(uint32_t) << DIGIT_BITS;
        const uint32_t top = window_bits(p.wbits, p.nwins, p.nwins - 1);
        void (*accumulate_k)(bucket_h*, uint32_t, uint32_t, affine_h*, vec2d_t<uint32_t>, vec2d_t<uint32_t>, uint32_t) =
            accumulate<bucket_t, affine_h>;

        for (size_t b = 0; b < p.batches; b++) {
            size_t off = b * p.stride;
            size_t num = std::min(p.stride, n - off);
            breakdown<scalar_t><<<2 * grid, 1024, sizeof(scalar_t) * 1024, lane.digits>>>(
                digits, d_scalars + off, num, p.nwins, p.wbits, mont);
            CUDA_OK(cudaGetLastError());
            uint32_t win = 0;
            for (; win + 1 < p.nwins; win += 2) {
                uint32_t second = win + 2 == p.nwins ? top - 1 : p.wbits - 1;
                lane.digits.launch_coop(pinprove_msm_sort, launch_params_t{dim3(grid, 2), dim3(SORT_BLOCKDIM), sort_shared},
                                        digits, num, win, temps, hist, p.wbits - 1, p.wbits - 1, second);
            }
            if (win < p.nwins)
                lane.digits.launch_coop(pinprove_msm_sort, launch_params_t{dim3(grid, 1), dim3(SORT_BLOCKDIM), sort_shared},
                                        digits, num, win, temps, hist, p.wbits - 1, top - 1, 0u);
            pinprove::order(lane.compute, lane.digits);

            affine_h* points = const_cast<affine_h*>(d_points) + off;
            batch_addition<bucket_t><<<gpu.sm_count(), BATCH_ADD_BLOCK_SIZE, 0, lane.compute>>>(
                buckets.ptr + (size_t)p.nwins * row, points, num, &digits[0][0], hist[0][0]);
            CUDA_OK(cudaGetLastError());
            lane.compute.launch_coop(accumulate_k, launch_params_t{gpu.sm_count(), 0}, buckets.ptr, p.nwins, p.wbits,
                                     points, digits, hist, COUNTER_ID);
            // The next batch's digits may overwrite this one's.
            pinprove::order(lane.digits, lane.compute);
            integrate<bucket_t><<<p.nwins, MSM_NTHREADS, sizeof(bucket_t) * MSM_NTHREADS / bucket_t::degree,
                                  lane.compute>>>(buckets.ptr, p.nwins, p.wbits, scalar_t::bit_length());
            CUDA_OK(cudaGetLastError());
            CUDA_OK(cudaMemcpy2DAsync(job.block + at[2 * b], 2 * SEGMENTS * sizeof(bucket_h), buckets.ptr,
                                      row * sizeof(bucket_h), 2 * SEGMENTS * sizeof(bucket_h), p.nwins,
                                      cudaMemcpyDeviceToHost, lane.compute));
            CUDA_OK(cudaMemcpyAsync(job.block + at[2 * b + 1], buckets.ptr + (size_t)p.nwins * row,
                                    nsums * sizeof(bucket_h), cudaMemcpyDeviceToHost, lane.compute));
        }
    }

    static void ours_msm(const pinprove::lane_t& lane, const pinprove::tables::call_t& tc)
    {
        if (bucket_t::degree == 1)
            pinprove::tables::msm_g1(lane, tc);
        else
            pinprove::tables::msm_g2(lane, tc);
    }

    // Precomputed copies of resident bases for pinprove's kernel (see
    // pinprove_table_g1).
    static RustError table(void** out, const void* handle, uint32_t wbits, uint32_t copies)
    {
        using namespace pinprove::tables;
        *out = nullptr;
        std::unique_ptr<table_t> t;
        try {
            auto& res = *static_cast<const bases_t<affine_t>*>(handle);
            if (wbits < MIN_WBITS || wbits > MAX_WBITS || copies == 0 || res.n == 0)
                return RustError{cudaErrorInvalidValue, "a table's window width or copies out of range"};
            copies = used_copies(wbits, std::min(copies, windows(wbits)));
            if ((uint64_t)copies * res.n >= ((uint64_t)1 << 31))
                return RustError{cudaErrorInvalidValue, "more table points than 31-bit indices name"};
            gpu_for(res.device);
            pinprove::lane_t& lane = pinprove::lane(res.device);
            t.reset(new table_t{res.device, res.n, wbits, copies, nullptr});
            if (copies > 1) {
                // A plain allocation cannot use the stream-ordered cache.
                pinprove::trim_pool();
                CUDA_OK(cudaMalloc(&t->extra, (size_t)(copies - 1) * res.n * sizeof(affine_h)));
                uint32_t doublings = wbits * group(wbits, copies);
                if (bucket_t::degree == 1)
                    build_copies_g1(lane.compute, t->extra, res.ptr, res.n, copies, doublings);
                else
                    build_copies_g2(lane.compute, t->extra, res.ptr, res.n, copies, doublings);
                CUDA_OK(cudaStreamSynchronize(lane.compute));
            }
        } catch (const cuda_error& e) {
            (void)cudaGetLastError();
            free_table(t.release());
            return RustError{e.code(), e.what()};
        } catch (const std::bad_alloc&) {
            free_table(t.release());
            return RustError{cudaErrorMemoryAllocation, "host memory for a table"};
        }
        *out = t.release();
        return RustError{cudaSuccess};
    }

    static void free_table(pinprove::tables::table_t* t)
    {
        if (t == nullptr)
            return;
        select_gpu(t->device).select();
        if (t->extra != nullptr)
            (void)cudaFree(t->extra);
        delete t;
    }

    // Queues one MSM over bases in device memory (see
    // pinprove_msm_resident_g1_begin).
    static RustError begin(void** out, const void* handle, const msm_call_t& c)
    {
        *out = nullptr;
        std::unique_ptr<job_t> job;
        try {
            auto& res = *static_cast<const bases_t<affine_t>*>(handle);
            bool plain = c.ones == nullptr && c.idx == nullptr && c.n_small == 0;
            if (c.base_offset > res.n || (c.idx == nullptr && c.n > res.n - c.base_offset) ||
                (c.base_offset > 0 && !plain) || c.idx_base > UINT32_MAX)
                return RustError{cudaErrorInvalidValue, "an MSM's bases beyond the resident ones"};
            const uint32_t base = (uint32_t)c.idx_base;
            // pinprove's kernel for the full-width part: its window, and
            // the copies of the bases it reads.
            const auto* table = static_cast<const pinprove::tables::table_t*>(c.table);
            const bool ours = c.kernel == 1;
            uint32_t twbits = 0, tcopies = 1;
            if (c.kernel > 1 || (!ours && table != nullptr))
                return RustError{cudaErrorInvalidValue, "an MSM kernel this build does not have"};
            if (ours) {
                if (table != nullptr && (table->device != res.device || table->n != res.n))
                    return RustError{cudaErrorInvalidValue, "a table of other bases than the MSM's"};
                twbits = table != nullptr ? table->wbits
                         : c.window_bits != 0 ? c.window_bits
                                              : pinprove::tables::wbits_for(c.n);
                tcopies = table != nullptr ? table->copies : 1;
                if (twbits < pinprove::tables::MIN_WBITS || twbits > pinprove::tables::MAX_WBITS ||
                    (uint64_t)tcopies * res.n >= ((uint64_t)1 << 31))
                    return RustError{cudaErrorInvalidValue, "a window width or table out of the kernel's range"};
            }
            const gpu_t& gpu = gpu_for(res.device);
            pinprove::lane_t& lane = pinprove::lane(res.device);
            job.reset(new job_t{lane});
            CUDA_OK(cudaEventCreateWithFlags(&job->done, cudaEventDisableTiming));

            // Where each result goes in the block.
            size_t nsums = partial_sums(gpu);
            bool small = c.n_small > 0 && c.small_bits > 0;
            size_t ones_at = c.ones != nullptr ? job->add_piece(nsums) : 0;
            size_t small_at = small ? job->add_piece(nsums) : 0;
            std::vector<size_t> pip_at;
            size_t ours_at = 0;
            if (c.n > 0 && ours) {
                uint32_t sets = pinprove::tables::group(twbits, tcopies);
                uint32_t segs = pinprove::tables::segments(twbits);
                ours_at = job->add_piece(2 * (size_t)sets * segs, twbits, sets, segs);
            }
            // No batches without points.
            plan_t pip = c.n > 0 && !ours ? plan(c.n, c.max_batch) : plan_t{};
            for (size_t b = 0; b < pip.batches; b++) {
                pip_at.push_back(job->add_piece(2 * SEGMENTS * (size_t)pip.nwins, pip.wbits, pip.nwins));
                pip_at.push_back(job->add_piece(nsums));
            }
            size_t total = job->buckets();
            if (total > 0) {
                job->block_size = total * sizeof(bucket_t);
                job->block = static_cast<bucket_t*>(host_blocks().take(job->block_size));
            }

            // Host inputs go up on the copy stream; the work that reads
            // them waits for it on the device.
            size_t words = bitmap_words(res.n);
            bool host_scalars = c.n > 0 && c.d_scalars == nullptr;
            async_buf<uint32_t> d_bitmap{lane, lane.copy, lane.compute, c.ones != nullptr ? words : 0};
            async_buf<uint32_t> d_small_idx{lane, lane.copy, lane.compute, small ? c.n_small : 0};
            async_buf<uint64_t> d_small_values{lane, lane.copy, lane.compute, small ? c.n_small : 0};
            async_buf<uint32_t> d_idx{lane, lane.copy, lane.compute, c.idx != nullptr ? c.n : 0};
            async_buf<scalar_t> d_list{lane, lane.copy, lane.digits, host_scalars ? c.n : 0};
            if (c.ones != nullptr)
                copy_in(lane, d_bitmap, c.ones, words);
            if (small) {
                copy_in(lane, d_small_idx, c.small_idx, c.n_small);
                copy_in(lane, d_small_values, c.small_values, c.n_small);
            }
            if (c.idx != nullptr)
                copy_in(lane, d_idx, c.idx, c.n);
            if (host_scalars)
                copy_in(lane, d_list, static_cast<const scalar_t*>(c.scalars), c.n);
            pinprove::order(lane.compute, lane.copy);
            pinprove::order(lane.digits, lane.copy);
            if (c.d_ready != nullptr)
                CUDA_OK(cudaStreamWaitEvent(lane.digits, static_cast<cudaEvent_t>(c.d_ready), 0));

            if (c.ones != nullptr) {
                async_buf<bucket_h> sums{lane, lane.compute, nsums};
                add_selected(lane, gpu, sums.ptr, res.ptr, res.n, d_bitmap.ptr, false);
                CUDA_OK(cudaMemcpyAsync(job->block + ones_at, sums.ptr, nsums * sizeof(bucket_h),
                                        cudaMemcpyDeviceToHost, lane.compute));
            }
            if (small)
                sum_small(*job, gpu, res, d_small_idx.ptr, d_small_values.ptr, c.n_small, c.small_bits, small_at,
                          base);
            if (c.n > 0) {
                const scalar_t* scalars = host_scalars ? d_list.ptr : static_cast<const scalar_t*>(c.d_scalars);
                if (ours) {
                    // The digits stream waited for the device scalars and
                    // the uploads; the scalars' upload buffer is released
                    // there, so it waits for this work in turn.
                    pinprove::order(lane.compute, lane.digits);
                    pinprove::tables::call_t tc{res.ptr,  table != nullptr ? table->extra : nullptr,
                                                res.n,    twbits,
                                                tcopies,  scalars,
                                                c.mont,   c.idx != nullptr ? d_idx.ptr : nullptr,
                                                base,     c.base_offset,
                                                c.n,      c.max_batch,
                                                job->block + ours_at};
                    ours_msm(lane, tc);
                    pinprove::order(lane.digits, lane.compute);
                } else if (c.idx != nullptr) {
                    async_buf<affine_h> gathered{lane, lane.compute, c.n};
                    gather(lane, gpu, gathered.ptr, res, d_idx.ptr, c.n, base);
                    pippenger(*job, gpu, gathered.ptr, scalars, c.n, c.mont, pip, pip_at);
                } else {
                    pippenger(*job, gpu, res.ptr + c.base_offset, scalars, c.n, c.mont, pip, pip_at);
                }
            }
            CUDA_OK(cudaEventRecord(job->done, lane.compute));
            if (c.mark != nullptr)
                CUDA_OK(cudaEventRecord(static_cast<cudaEvent_t>(c.mark), lane.compute));
            job->queued = true;
        } catch (const cuda_error& e) {
            job.reset(); // waits for whatever was queued
            (void)cudaGetLastError();
            return RustError{e.code(), e.what()};
        } catch (const std::bad_alloc&) {
            job.reset();
            return RustError{cudaErrorMemoryAllocation, "host memory for an MSM"};
        }
        *out = job.release();
        return RustError{cudaSuccess};
    }

    // Σ v_i·P_i for small values v_i (below 2^bits) by Horner's rule over
    // bit planes: for each plane, from the top, double the running partial
    // sums and add the bases whose value has that bit — one batched
    // addition per plane instead of a Pippenger pass.
    static void sum_small(job_t& job, const gpu_t& gpu, const bases_t<affine_t>& res, const uint32_t* d_idx,
                          const uint64_t* d_values, size_t n, uint32_t bits, size_t at, uint32_t base)
    {
        const pinprove::lane_t& lane = job.lane;
        async_buf<affine_h> points{lane, lane.compute, n};
        gather(lane, gpu, points.ptr, res, d_idx, n, base);
        size_t words = bitmap_words(n);
        async_buf<uint32_t> planes{lane, lane.compute, words * bits};
        CUDA_OK(cudaMemsetAsync(planes.ptr, 0, words * bits * sizeof(uint32_t), lane.compute));
        bit_planes<<<gpu.sm_count() * 4, 256, 0, lane.compute>>>(planes.ptr, words, d_values, n, bits);
        CUDA_OK(cudaGetLastError());
        size_t nsums = partial_sums(gpu);
        async_buf<bucket_h> sums{lane, lane.compute, nsums};
        for (uint32_t k = bits; k-- > 0;) {
            if (k + 1 < bits) {
                size_t threads = nsums * bucket_t::degree;
                double_sums<bucket_t><<<(threads + 255) / 256, 256, 0, lane.compute>>>(sums.ptr, nsums);
                CUDA_OK(cudaGetLastError());
            }
            add_selected(lane, gpu, sums.ptr, points.ptr, n, planes.ptr + k * words, k + 1 < bits);
        }
        CUDA_OK(cudaMemcpyAsync(job.block + at, sums.ptr, nsums * sizeof(bucket_h), cudaMemcpyDeviceToHost,
                                lane.compute));
    }

    // Part i of a pending MSM whose work has completed.
    static void part(const void* pending, size_t i, point_t* out)
    {
        *out = static_cast<const job_t*>(static_cast<const pending_t*>(pending))->part(i);
    }

    static RustError upload(void** out, int device, const affine_t* bases, size_t n)
    {
        *out = nullptr;
        try {
            const gpu_t& gpu = gpu_for(device);
            // A plain allocation cannot use the stream-ordered cache.
            pinprove::trim_pool();
            std::unique_ptr<resident_t<affine_t>> res{new resident_t<affine_t>{device, n}};
            if (n > 0)
                gpu.HtoD(&res->points[0], bases, n, sizeof(affine_t));
            gpu.sync();
            *out = static_cast<bases_t<affine_t>*>(res.release());
        } catch (const cuda_error& e) {
            (void)cudaGetLastError();
            return RustError{e.code(), e.what()};
        } catch (const std::bad_alloc&) {
            return RustError{cudaErrorMemoryAllocation, "host memory for resident bases"};
        }
        return RustError{cudaSuccess};
    }

    static void free(void* handle)
    {
        auto* res = static_cast<resident_t<affine_t>*>(static_cast<bases_t<affine_t>*>(handle));
        if (res != nullptr) {
            select_gpu(res->device); // frees on the device that holds them
            delete res;
        }
    }

    static RustError window(void** out, int device, size_t capacity)
    {
        *out = nullptr;
        try {
            gpu_for(device);
            std::unique_ptr<window_t<affine_t>> w{new window_t<affine_t>{device, pinprove::lane(device), capacity}};
            *out = static_cast<bases_t<affine_t>*>(w.release());
        } catch (const cuda_error& e) {
            (void)cudaGetLastError();
            return RustError{e.code(), e.what()};
        } catch (const std::bad_alloc&) {
            return RustError{cudaErrorMemoryAllocation, "host memory for a window of bases"};
        }
        return RustError{cudaSuccess};
    }

    static RustError fill(void* handle, const affine_t* bases, size_t n, void* after)
    {
        auto& w = *static_cast<window_t<affine_t>*>(static_cast<bases_t<affine_t>*>(handle));
        if (n > w.capacity)
            return RustError{cudaErrorInvalidValue, "more bases than the window holds"};
        try {
            gpu_for(w.device);
            if (after != nullptr)
                CUDA_OK(cudaStreamWaitEvent(w.lane.copy, static_cast<cudaEvent_t>(after), 0));
            if (n > 0)
                CUDA_OK(cudaMemcpyAsync(w.ptr, bases, n * sizeof(affine_h), cudaMemcpyHostToDevice, w.lane.copy));
            w.n = n;
        } catch (const cuda_error& e) {
            (void)cudaGetLastError();
            return RustError{e.code(), e.what()};
        }
        return RustError{cudaSuccess};
    }

    static void free_window(void* handle)
    {
        auto* w = static_cast<window_t<affine_t>*>(static_cast<bases_t<affine_t>*>(handle));
        if (w != nullptr) {
            select_gpu(w->device);
            delete w;
        }
    }
};

typedef curve<bucket_t, point_t, affine_t> g1;
typedef curve<bucket_fp2_t, point_fp2_t, affine_fp2_t> g2;

} // namespace

// Queues an MSM over resident bases on its GPU's lane and returns at once;
// *out is the pending MSM, summed through pinprove_msm_wait and
// pinprove_msm_*_part, and freed with pinprove_msm_free; the scalars are
// described by `call` (pinprove_msm_call in ffi.h). Host inputs must stay valid, and the
// resident bases alive, until the MSM is freed; pinned host memory keeps
// the call from blocking on the copies.
extern "C" RustError::by_value pinprove_msm_resident_g1_begin(void** out, const void* resident,
                                                              const msm_call_t* call)
{
    return g1::begin(out, resident, *call);
}

extern "C" RustError::by_value pinprove_msm_resident_g2_begin(void** out, const void* resident,
                                                              const msm_call_t* call)
{
    return g2::begin(out, resident, *call);
}

// Precomputed copies of resident bases (a handle from pinprove_resident_g1)
// for pinprove's MSM kernel, with windows of `wbits` bits: `copies` in all
// (1: none beyond the bases; fewer are kept when fewer serve the windows).
// Built on the device before returning; *out is the handle an MSM call
// names in `table`, freed with pinprove_table_free (before the bases).
extern "C" RustError::by_value pinprove_table_g1(void** out, const void* resident, uint32_t wbits, uint32_t copies)
{
    return g1::table(out, resident, wbits, copies);
}

extern "C" RustError::by_value pinprove_table_g2(void** out, const void* resident, uint32_t wbits, uint32_t copies)
{
    return g2::table(out, resident, wbits, copies);
}

// The copies a table holds, the bases included.
extern "C" uint32_t pinprove_table_copies(const void* table)
{
    return static_cast<const pinprove::tables::table_t*>(table)->copies;
}

extern "C" void pinprove_table_free(void* table)
{
    g1::free_table(static_cast<pinprove::tables::table_t*>(table));
}

// Waits for a pending MSM's device work.
extern "C" RustError::by_value pinprove_msm_wait(const void* pending)
{
    cudaError_t err = static_cast<const pending_t*>(pending)->wait();
    if (err != cudaSuccess)
        return RustError{err, std::string("MSM on the device: ") + cudaGetErrorString(err)};
    return RustError{cudaSuccess};
}

// The number of parts of a pending MSM; the MSM is their sum.
extern "C" size_t pinprove_msm_parts(const void* pending)
{
    return static_cast<const pending_t*>(pending)->parts();
}

// Part i (below pinprove_msm_parts) of a pending MSM after
// pinprove_msm_wait succeeded. Any number of threads may call it at once.
extern "C" void pinprove_msm_g1_part(const void* pending, size_t i, point_t* out)
{
    g1::part(pending, i, out);
}

extern "C" void pinprove_msm_g2_part(const void* pending, size_t i, point_fp2_t* out)
{
    g2::part(pending, i, out);
}

// Frees a pending MSM, after its device work.
extern "C" void pinprove_msm_free(void* pending)
{
    delete static_cast<pending_t*>(pending);
}

// Uploads n bases to `device` once; *out is the handle for the calls
// above, freed with the matching _free.
extern "C" RustError::by_value pinprove_resident_g1(void** out, int device, const affine_t* bases, size_t n)
{
    return g1::upload(out, device, bases, n);
}

extern "C" RustError::by_value pinprove_resident_g2(void** out, int device, const affine_fp2_t* bases, size_t n)
{
    return g2::upload(out, device, bases, n);
}

extern "C" void pinprove_resident_g1_free(void* p)
{
    g1::free(p);
}

extern "C" void pinprove_resident_g2_free(void* p)
{
    g2::free(p);
}

// A window for `capacity` bases on `device`'s lane, in stream-ordered
// memory: *out is a handle for pinprove_msm_resident_*_begin (which reads
// the bases the last fill put there), freed with the matching _free (in
// stream order, behind the work queued on the lane so far).
extern "C" RustError::by_value pinprove_window_g1(void** out, int device, size_t capacity)
{
    return g1::window(out, device, capacity);
}

extern "C" RustError::by_value pinprove_window_g2(void** out, int device, size_t capacity)
{
    return g2::window(out, device, capacity);
}

// Queues the upload of n host bases (pinned, valid until the MSMs that
// read them are done) into a window, on the lane's copy stream, once
// `after` (a cudaEvent_t, may be null: the MSM that last read the window)
// has completed. MSM calls queued afterwards read these bases.
extern "C" RustError::by_value pinprove_window_g1_fill(void* window, const affine_t* bases, size_t n, void* after)
{
    return g1::fill(window, bases, n, after);
}

extern "C" RustError::by_value pinprove_window_g2_fill(void* window, const affine_fp2_t* bases, size_t n,
                                                       void* after)
{
    return g2::fill(window, bases, n, after);
}

extern "C" void pinprove_window_g1_free(void* p)
{
    g1::free_window(p);
}

extern "C" void pinprove_window_g2_free(void* p)
{
    g2::free_window(p);
}
