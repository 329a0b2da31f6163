// pinprove's native GPU backend: the multi-scalar multiplications, on
// sppark's Pippenger, in G1 (h, l, a, b) and G2 (b).
//
// Bases either stream from host memory on every call (pinned pool buffers
// copy at full PCIe speed) or stay resident on the device: a resident set
// is an msm_t built over them once, invoked later with a null bases
// pointer. Results are Jacobian points with the memory layout of blst's
// blst_p1 / blst_p2.

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

namespace {

template<class bucket, class point, class affine>
RustError msm(point* out, const void* resident, const affine* bases, size_t n, const scalar_t* scalars, bool mont)
{
    typedef msm_t<bucket, point, affine, scalar_t> msm_type;
    if (n == 0) {
        out->inf();
        return RustError{cudaSuccess};
    }
    try {
        if (resident) {
            auto* m = const_cast<msm_type*>(static_cast<const msm_type*>(resident));
            return m->invoke(*out, static_cast<const affine*>(nullptr), n, scalars, mont);
        }
        msm_type m{nullptr, n};
        return m.invoke(*out, bases, n, scalars, mont);
    } catch (const cuda_error& e) {
        out->inf();
        return RustError{e.code(), e.what()};
    }
}

template<class bucket, class point, class affine>
RustError make_resident(void** out, const affine* bases, size_t n)
{
    typedef msm_t<bucket, point, affine, scalar_t> msm_type;
    *out = nullptr;
    try {
        *out = new msm_type{bases, n};
    } catch (const cuda_error& e) {
        return RustError{e.code(), e.what()};
    } catch (const std::bad_alloc&) {
        return RustError{cudaErrorMemoryAllocation, "host memory for an MSM context"};
    }
    return RustError{cudaSuccess};
}

} // namespace

extern "C" RustError::by_value pinprove_msm_g1(point_t* out, const void* resident, const affine_t* bases, size_t n,
                                               const scalar_t* scalars, bool mont)
{
    return msm<bucket_t, point_t, affine_t>(out, resident, bases, n, scalars, mont);
}

extern "C" RustError::by_value pinprove_msm_g2(point_fp2_t* out, const void* resident, const affine_fp2_t* bases,
                                               size_t n, const scalar_t* scalars, bool mont)
{
    return msm<bucket_fp2_t, point_fp2_t, affine_fp2_t>(out, resident, bases, n, scalars, mont);
}

// Uploads n bases to the device once; *out is the handle for the calls
// above, freed with the matching _free.
extern "C" RustError::by_value pinprove_resident_g1(void** out, const affine_t* bases, size_t n)
{
    return make_resident<bucket_t, point_t, affine_t>(out, bases, n);
}

extern "C" RustError::by_value pinprove_resident_g2(void** out, const affine_fp2_t* bases, size_t n)
{
    return make_resident<bucket_fp2_t, point_fp2_t, affine_fp2_t>(out, bases, n);
}

extern "C" void pinprove_resident_g1_free(void* p)
{
    delete static_cast<msm_t<bucket_t, point_t, affine_t, scalar_t>*>(p);
}

extern "C" void pinprove_resident_g2_free(void* p)
{
    delete static_cast<msm_t<bucket_fp2_t, point_fp2_t, affine_fp2_t, scalar_t>*>(p);
}
