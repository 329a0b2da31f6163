// pinprove's native GPU backend, first part: the quotient polynomial
// h = (A·B − C) / Z of one proof, computed on the device.
//
// a, b and c arrive as evaluations over the domain of size m = 2^lg_m (the
// first n of them; the rest are zero). Each is interpolated (inverse NTT)
// and evaluated over the coset g·H (forward coset NTT); there
// (A·B − C)/Z is a pointwise product with the constant 1/(g^m − 1); one
// inverse coset NTT gives h's coefficients. h is unique, so the coset's
// generator need not match any other prover's for the proof to be
// byte-identical.

#include <cuda.h>

#include <ff/bls12-381.hpp>
#include <ntt/ntt.cuh>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>
#include <util/rusterror.h>

namespace {

__global__ void quotient_on_coset(fr_t* a, const fr_t* b, const fr_t* c, size_t m, fr_t z_inv)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride) {
        fr_t x = a[i] * b[i];
        x -= c[i];
        a[i] = x * z_inv;
    }
}

// 1 / (g^m − 1) for sppark's coset generator g (m = 2^lg_m).
fr_t z_on_coset_inverse(uint32_t lg_m)
{
    fr_t x = group_gen;
    for (uint32_t i = 0; i < lg_m; i++)
        x = x * x;
    x -= fr_t::one();
    return x.reciprocal();
}

} // namespace

// Computes h's m − 1 coefficients (natural order) into `h_out` from the n
// evaluations each of a, b and c, all host memory (pinned for full-speed
// copies). Device memory: three vectors of m elements, freed on return.
extern "C" RustError::by_value pinprove_h_coefficients(const fr_t* a, const fr_t* b, const fr_t* c, size_t n,
                                                       uint32_t lg_m, fr_t* h_out)
{
    size_t m = (size_t)1 << lg_m;
    if (n > m || lg_m == 0)
        return RustError{cudaErrorInvalidValue, "h: n must be within the domain"};
    const gpu_t& gpu = select_gpu(0);
    try {
        gpu.select();
        dev_ptr_t<fr_t> d_abc{3 * m, gpu};
        fr_t* d[3] = {&d_abc[0], &d_abc[m], &d_abc[2 * m]};
        const fr_t* host[3] = {a, b, c};
        for (int k = 0; k < 3; k++) {
            gpu.HtoD(d[k], host[k], n);
            if (n < m)
                CUDA_OK(cudaMemsetAsync(d[k] + n, 0, (m - n) * sizeof(fr_t), gpu));
            // Evaluations -> coefficients (bit-reversed) -> coset evaluations
            // (natural order): no separate bit-reversal pass.
            NTT::Base_dev_ptr(gpu, d[k], lg_m, NTT::InputOutputOrder::NR, NTT::Direction::inverse,
                              NTT::Type::standard);
            NTT::Base_dev_ptr(gpu, d[k], lg_m, NTT::InputOutputOrder::RN, NTT::Direction::forward,
                              NTT::Type::coset);
        }
        quotient_on_coset<<<gpu.sm_count() * 4, 256, 0, gpu>>>(d[0], d[1], d[2], m, z_on_coset_inverse(lg_m));
        CUDA_OK(cudaGetLastError());
        NTT::Base_dev_ptr(gpu, d[0], lg_m, NTT::InputOutputOrder::NN, NTT::Direction::inverse, NTT::Type::coset);
        gpu.DtoH(h_out, d[0], m - 1);
        gpu.sync();
    } catch (const cuda_error& e) {
        gpu.sync();
        return RustError{e.code(), e.what()};
    }
    return RustError{cudaSuccess};
}
