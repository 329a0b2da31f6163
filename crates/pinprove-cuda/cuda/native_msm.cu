// pinprove's native GPU backend: the multi-scalar multiplications in G1
// (h, l, a, b) and G2 (b), on sppark's Pippenger and batched addition.
//
// Bases either stream from host memory on every call (pinned pool buffers
// copy at full PCIe speed) or stay resident in device memory, uploaded once
// per SRS. With resident bases an MSM can be split by scalar value: the
// bases whose scalar is 1 are summed by sppark's batched addition (one
// point addition each, selected by a bitmap), and only the rest — gathered
// into a dense array on the device — go through Pippenger, whose cost per
// point is a dozen window passes. Zero scalars are dropped by the caller.
// For witnesses that are mostly bits this is most of the MSM work saved.
//
// Results are Jacobian points with the memory layout of blst's blst_p1 /
// blst_p2. Device pointers are handed to sppark as non-owning dev_ptr_t
// views (its msm_t reads bases and scalars in place when given those).

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
#include <chrono>
#include <cstdio>
#include <string>
#include <cstdlib>
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

#include "gpu_for.cuh"

namespace {

// One query's bases in device memory.
template<class affine_t>
struct resident_t {
    typedef typename affine_t::mem_t affine_h;
    int device;
    size_t n;
    dev_ptr_t<affine_h> points;
    resident_t(int d, size_t n_) : device(d), n(n_), points(n_) {}
};

// dst[j] = src[idx[j]], word by word (coalesced on both sides).
__global__ void gather_points(uint32_t* dst, const uint32_t* src, const uint32_t* idx, size_t n, uint32_t words)
{
    size_t total = n * words;
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        size_t j = t / words;
        uint32_t w = (uint32_t)(t % words);
        dst[t] = src[(size_t)idx[j] * words + w];
    }
}

// With PINPROVE_MSM_TRACE set, the steps of each resident MSM go to stderr.
struct trace_t {
    bool on = std::getenv("PINPROVE_MSM_TRACE") != nullptr;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    std::string steps;
    void mark(const char* what)
    {
        if (!on)
            return;
        auto now = std::chrono::steady_clock::now();
        steps += fmt(" %s %.2f ms", what, std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
    }
    void print(size_t bases, size_t listed, size_t small) const
    {
        if (on)
            std::fprintf(stderr, "pinprove msm: %zu bases, %zu listed, %zu small:%s\n", bases, listed, small,
                         steps.c_str());
    }
};

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

template<class bucket_t, class point_t, class affine_t>
struct curve {
    typedef msm_t<bucket_t, point_t, affine_t, scalar_t> msm_type;
    typedef typename affine_t::mem_t affine_h;
    typedef typename bucket_t::mem_t bucket_h;
    static_assert(sizeof(affine_h) % sizeof(uint32_t) == 0, "bases are whole words");

    // Pippenger over n bases (device view or host array) and n scalars
    // (device view or host array).
    template<class bases_t, class scalars_t>
    static void pippenger(point_t& out, int device, bases_t bases, size_t n, scalars_t scalars, bool mont)
    {
        out.inf();
        if (n == 0)
            return;
        msm_type m{nullptr, n, sizeof(affine_t), device};
        RustError err = m.invoke(out, bases, n, scalars, mont);
        if (err.code != cudaSuccess) {
            std::string what = err.message ? err.message : "MSM";
            std::free(err.message);
            throw cuda_error{err.code, what};
        }
    }

    // Words of a bitmap over n bases: sppark's batched addition reads whole
    // blocks of 1024 bits.
    static size_t bitmap_words(size_t n) { return (n + 1023) / 1024 * 32; }

    static size_t partial_sums(const gpu_t& gpu)
    {
        return (size_t)gpu.sm_count() * BATCH_ADD_BLOCK_SIZE / WARP_SZ;
    }

    // Adds to the partial sums `d_sums` the bases whose bit is set in the
    // device bitmap (LSB first: word w, bit b is base 32w + b); overwrites
    // them instead when !accumulate.
    static void add_selected(const gpu_t& gpu, bucket_h* d_sums, const affine_h* points, size_t n,
                             const uint32_t* d_bitmap, bool accumulate)
    {
        void (*kernel)(bucket_h*, const affine_h*, uint32_t, const uint32_t*, bool, uint32_t) =
            batch_addition<bucket_t, affine_h>;
        gpu.launch_coop(kernel, launch_params_t{gpu.sm_count(), BATCH_ADD_BLOCK_SIZE}, d_sums, points, (uint32_t)n,
                        d_bitmap, accumulate, 0u);
    }

    static void collect_sums(point_t& out, const gpu_t& gpu, const bucket_h* d_sums)
    {
        std::vector<bucket_t> sums(partial_sums(gpu));
        gpu.DtoH(sums, d_sums);
        gpu.sync();
        out = sum_up(sums);
    }

    // Sum of the resident bases whose bit is set in the host bitmap.
    static void sum_selected(point_t& out, const gpu_t& gpu, const resident_t<affine_t>& res, const uint32_t* bitmap)
    {
        size_t words = bitmap_words(res.n);
        dev_ptr_t<uint32_t> d_bitmap{words};
        dev_ptr_t<bucket_h> d_sums{partial_sums(gpu)};
        CUDA_OK(cudaMemcpyAsync(&d_bitmap[0], bitmap, words * sizeof(uint32_t), cudaMemcpyHostToDevice, gpu));
        add_selected(gpu, &d_sums[0], &res.points[0], res.n, &d_bitmap[0], false);
        collect_sums(out, gpu, &d_sums[0]);
    }

    // Bases gathered from the resident set by host indices, on the device.
    static void gather(dev_ptr_t<affine_h>& dst, const gpu_t& gpu, const resident_t<affine_t>& res,
                       const uint32_t* idx, size_t n)
    {
        const uint32_t words = sizeof(affine_h) / sizeof(uint32_t);
        dev_ptr_t<uint32_t> d_idx{n};
        CUDA_OK(cudaMemcpyAsync(&d_idx[0], idx, n * sizeof(uint32_t), cudaMemcpyHostToDevice, gpu));
        gather_points<<<gpu.sm_count() * 4, 256, 0, gpu>>>((uint32_t*)&dst[0], (const uint32_t*)&res.points[0],
                                                           &d_idx[0], n, words);
        CUDA_OK(cudaGetLastError());
        gpu.sync(); // later users may run on other streams
    }

    // Σ v_i·P_i for small values v_i (below 2^bits) by Horner's rule over
    // bit planes: for each plane, from the top, double the running partial
    // sums and add the bases whose value has that bit — one batched
    // addition per plane instead of a Pippenger pass.
    static void sum_small(point_t& out, const gpu_t& gpu, const resident_t<affine_t>& res, const uint32_t* idx,
                          const uint64_t* values, size_t n, uint32_t bits)
    {
        dev_ptr_t<affine_h> points{n};
        gather(points, gpu, res, idx, n);
        size_t words = bitmap_words(n);
        dev_ptr_t<uint64_t> d_values{n};
        dev_ptr_t<uint32_t> planes{words * bits};
        CUDA_OK(cudaMemcpyAsync(&d_values[0], values, n * sizeof(uint64_t), cudaMemcpyHostToDevice, gpu));
        CUDA_OK(cudaMemsetAsync(&planes[0], 0, words * bits * sizeof(uint32_t), gpu));
        bit_planes<<<gpu.sm_count() * 4, 256, 0, gpu>>>(&planes[0], words, &d_values[0], n, bits);
        CUDA_OK(cudaGetLastError());
        size_t nsums = partial_sums(gpu);
        dev_ptr_t<bucket_h> d_sums{nsums};
        for (uint32_t k = bits; k-- > 0;) {
            if (k + 1 < bits) {
                size_t threads = nsums * bucket_t::degree;
                double_sums<bucket_t><<<(threads + 255) / 256, 256, 0, gpu>>>(&d_sums[0], nsums);
                CUDA_OK(cudaGetLastError());
            }
            add_selected(gpu, &d_sums[0], &points[0], n, &planes[k * words], k + 1 < bits);
        }
        collect_sums(out, gpu, &d_sums[0]);
    }

    static RustError resident_msm(point_t* out, const void* handle, const scalar_t* scalars, const void* d_scalars,
                                  const uint32_t* ones, const uint32_t* idx, size_t n, const uint32_t* small_idx,
                                  const uint64_t* small_values, size_t n_small, uint32_t small_bits, bool mont)
    {
        out->inf();
        try {
            auto& res = *static_cast<const resident_t<affine_t>*>(handle);
            const gpu_t& gpu = gpu_for(res.device);
            trace_t trace;
            dev_ptr_t<affine_t> all_bases{(affine_t*)&res.points[0]};
            if (ones != nullptr) {
                point_t sum;
                sum_selected(sum, gpu, res, ones);
                out->add(sum);
                trace.mark("batched addition");
            }
            if (n_small > 0 && small_bits > 0) {
                point_t sum;
                sum_small(sum, gpu, res, small_idx, small_values, n_small, small_bits);
                out->add(sum);
                trace.mark("small values");
            }
            point_t p;
            if (d_scalars != nullptr) {
                pippenger(p, res.device, all_bases, n, dev_ptr_t<scalar_t>{(scalar_t*)d_scalars}, mont);
            } else if (idx == nullptr) {
                pippenger(p, res.device, all_bases, n, scalars, mont);
            } else if (n > 0) {
                dev_ptr_t<affine_h> gathered{n};
                gather(gathered, gpu, res, idx, n);
                trace.mark("gather");
                pippenger(p, res.device, dev_ptr_t<affine_t>{(affine_t*)&gathered[0]}, n, scalars, mont);
            } else {
                p.inf();
            }
            out->add(p);
            trace.mark("pippenger");
            trace.print(res.n, n, n_small);
        } catch (const cuda_error& e) {
            out->inf();
            (void)cudaGetLastError();
            return RustError{e.code(), e.what()};
        }
        return RustError{cudaSuccess};
    }

    static RustError host_msm(point_t* out, int device, const affine_t* bases, const scalar_t* scalars,
                              const void* d_scalars, size_t n, bool mont)
    {
        try {
            gpu_for(device);
            if (d_scalars != nullptr)
                pippenger(*out, device, bases, n, dev_ptr_t<scalar_t>{(scalar_t*)d_scalars}, mont);
            else
                pippenger(*out, device, bases, n, scalars, mont);
        } catch (const cuda_error& e) {
            out->inf();
            (void)cudaGetLastError();
            return RustError{e.code(), e.what()};
        }
        return RustError{cudaSuccess};
    }

    static RustError upload(void** out, int device, const affine_t* bases, size_t n)
    {
        *out = nullptr;
        try {
            const gpu_t& gpu = gpu_for(device);
            std::unique_ptr<resident_t<affine_t>> res{new resident_t<affine_t>{device, n}};
            if (n > 0)
                gpu.HtoD(&res->points[0], bases, n, sizeof(affine_t));
            gpu.sync();
            *out = res.release();
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
        auto* res = static_cast<resident_t<affine_t>*>(handle);
        if (res != nullptr) {
            select_gpu(res->device); // frees on the device that holds them
            delete res;
        }
    }
};

typedef curve<bucket_t, point_t, affine_t> g1;
typedef curve<bucket_fp2_t, point_fp2_t, affine_fp2_t> g2;

} // namespace

// MSM over bases in host memory (streamed to the device). Scalars are in
// host memory, or — when d_scalars is not null — already on the device.
extern "C" RustError::by_value pinprove_msm_g1(point_t* out, int device, const affine_t* bases, const scalar_t* scalars,
                                               const void* d_scalars, size_t n, bool mont)
{
    return g1::host_msm(out, device, bases, scalars, d_scalars, n, mont);
}

extern "C" RustError::by_value pinprove_msm_g2(point_fp2_t* out, int device, const affine_fp2_t* bases,
                                               const scalar_t* scalars, const void* d_scalars, size_t n, bool mont)
{
    return g2::host_msm(out, device, bases, scalars, d_scalars, n, mont);
}

// MSM over resident bases. Either the n scalars pair with the first n bases
// (idx null; host scalars, or device scalars when d_scalars is not null),
// or idx names the base of each of the n host scalars. `ones` (may be null)
// is a bitmap over all resident bases whose set bits are added with scalar 1;
// small_idx names the bases of n_small small_values (canonical, below
// 2^small_bits) added by bit planes.
extern "C" RustError::by_value pinprove_msm_resident_g1(point_t* out, const void* resident, const scalar_t* scalars,
                                                        const void* d_scalars, const uint32_t* ones,
                                                        const uint32_t* idx, size_t n, const uint32_t* small_idx,
                                                        const uint64_t* small_values, size_t n_small,
                                                        uint32_t small_bits, bool mont)
{
    return g1::resident_msm(out, resident, scalars, d_scalars, ones, idx, n, small_idx, small_values, n_small,
                            small_bits, mont);
}

extern "C" RustError::by_value pinprove_msm_resident_g2(point_fp2_t* out, const void* resident,
                                                        const scalar_t* scalars, const void* d_scalars,
                                                        const uint32_t* ones, const uint32_t* idx, size_t n,
                                                        const uint32_t* small_idx, const uint64_t* small_values,
                                                        size_t n_small, uint32_t small_bits, bool mont)
{
    return g2::resident_msm(out, resident, scalars, d_scalars, ones, idx, n, small_idx, small_values, n_small,
                            small_bits, mont);
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
