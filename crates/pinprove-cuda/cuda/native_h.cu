// pinprove's native GPU backend, first part: the quotient polynomial
// h = (A·B − C) / Z of one proof, computed on the device and left there
// for the h MSM.
//
// a, b and c arrive as evaluations over the domain of size m = 2^lg_m (the
// first n of them; the rest are zero). Each is interpolated (inverse NTT)
// and evaluated over the coset g·H (forward coset NTT); there
// (A·B − C)/Z is a pointwise product with the constant 1/(g^m − 1); one
// inverse coset NTT gives h's coefficients. h is unique, so the coset's
// generator need not match any other prover's for the proof to be
// byte-identical.
//
// The three uploads go out in chunks on a copy stream; the compute stream
// waits (on the device, through events) only for the vector it transforms
// next, so b and c are still crossing the bus while a's NTTs run. The
// caller passes one event per vector and uses it to hand that host buffer
// back as soon as its copy has landed.

#include <cuda.h>

#include <ff/bls12-381.hpp>
#include <ntt/ntt.cuh>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>
#include <util/rusterror.h>

#include <memory>

#include "gpu_for.cuh"

namespace {

// Elements per copy: 64 MiB, large enough to run at full PCIe speed.
constexpr size_t UPLOAD_CHUNK = (size_t)1 << 21;

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

// One h computation in flight. Destruction waits for both streams, so
// device memory and the host buffers being read are never freed under a
// running copy or kernel.
struct h_job_t {
    const gpu_t& gpu;
    size_t m;
    stream_t copy;
    stream_t compute;
    dev_ptr_t<fr_t> abc; // a (then h), b, c: m elements each

    h_job_t(const gpu_t& g, size_t m_)
        : gpu(g), m(m_), copy(g.id()), compute(g.id()), abc(3 * m_)
    {}
    ~h_job_t()
    {
        (void)cudaStreamSynchronize(copy);
        (void)cudaStreamSynchronize(compute);
    }
    fr_t* vec(int k) { return &abc[k * m]; }
};

} // namespace

// Starts h for one proof on `device`: allocates device memory, queues the
// uploads of a, b and c (n evaluations each, host memory — pinned for
// full-speed copies) and records uploaded[k] after vector k's last chunk,
// then queues the transforms; marks[0] and marks[1] are recorded before the
// first copy and after the last. Returns at once; *out is the job, to be
// waited for with pinprove_h_wait and freed with pinprove_h_free. Host
// buffers must stay valid until their event completes.
extern "C" RustError::by_value pinprove_h_begin(void** out, int device, const fr_t* a, const fr_t* b, const fr_t* c,
                                                size_t n, uint32_t lg_m, cudaEvent_t const uploaded[3],
                                                cudaEvent_t const marks[2])
{
    *out = nullptr;
    if (lg_m == 0 || lg_m > 40)
        return RustError{cudaErrorInvalidValue, "h: domain size out of range"};
    size_t m = (size_t)1 << lg_m;
    if (n > m)
        return RustError{cudaErrorInvalidValue, "h: n must be within the domain"};
    std::unique_ptr<h_job_t> job;
    try {
        const gpu_t& gpu = gpu_for(device);
        job.reset(new h_job_t{gpu, m});
        const fr_t* host[3] = {a, b, c};
        CUDA_OK(cudaEventRecord(marks[0], job->copy));
        for (int k = 0; k < 3; k++) {
            for (size_t off = 0; off < n; off += UPLOAD_CHUNK) {
                size_t len = std::min(UPLOAD_CHUNK, n - off);
                CUDA_OK(cudaMemcpyAsync(job->vec(k) + off, host[k] + off, len * sizeof(fr_t),
                                        cudaMemcpyHostToDevice, job->copy));
            }
            CUDA_OK(cudaEventRecord(uploaded[k], job->copy));
        }
        CUDA_OK(cudaEventRecord(marks[1], job->copy));
        for (int k = 0; k < 3; k++) {
            fr_t* d = job->vec(k);
            if (n < m)
                CUDA_OK(cudaMemsetAsync(d + n, 0, (m - n) * sizeof(fr_t), job->compute));
            CUDA_OK(cudaStreamWaitEvent(job->compute, uploaded[k], 0));
            // Evaluations -> coefficients (bit-reversed) -> coset evaluations
            // (natural order): no separate bit-reversal pass.
            NTT::Base_dev_ptr(job->compute, d, lg_m, NTT::InputOutputOrder::NR, NTT::Direction::inverse,
                              NTT::Type::standard);
            NTT::Base_dev_ptr(job->compute, d, lg_m, NTT::InputOutputOrder::RN, NTT::Direction::forward,
                              NTT::Type::coset);
        }
        quotient_on_coset<<<gpu.sm_count() * 4, 256, 0, job->compute>>>(job->vec(0), job->vec(1), job->vec(2), m,
                                                                         z_on_coset_inverse(lg_m));
        CUDA_OK(cudaGetLastError());
        NTT::Base_dev_ptr(job->compute, job->vec(0), lg_m, NTT::InputOutputOrder::NN, NTT::Direction::inverse,
                          NTT::Type::coset);
        CUDA_OK(cudaGetLastError());
    } catch (const cuda_error& e) {
        job.reset(); // waits for whatever was queued
        (void)cudaGetLastError(); // an allocation failure is not sticky: clear it
        return RustError{e.code(), e.what()};
    } catch (const std::bad_alloc&) {
        job.reset();
        return RustError{cudaErrorMemoryAllocation, "host memory for an h job"};
    }
    *out = job.release();
    return RustError{cudaSuccess};
}

// Waits until h is computed; *h receives its device address (m − 1
// coefficients, natural order, Montgomery form), valid until the job is
// freed.
extern "C" RustError::by_value pinprove_h_wait(void* job, const fr_t** h)
{
    auto* j = static_cast<h_job_t*>(job);
    *h = nullptr;
    cudaError_t err = cudaStreamSynchronize(j->compute);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(j->copy);
    if (err != cudaSuccess)
        return RustError{err, "h on the device"};
    *h = j->vec(0);
    return RustError{cudaSuccess};
}

// Copies h's m − 1 coefficients to host memory (for checks).
extern "C" RustError::by_value pinprove_h_download(void* job, fr_t* h_out)
{
    auto* j = static_cast<h_job_t*>(job);
    cudaError_t err = cudaMemcpyAsync(h_out, j->vec(0), (j->m - 1) * sizeof(fr_t), cudaMemcpyDeviceToHost, j->compute);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(j->compute);
    if (err != cudaSuccess)
        return RustError{err, "downloading h"};
    return RustError{cudaSuccess};
}

extern "C" void pinprove_h_free(void* job)
{
    delete static_cast<h_job_t*>(job);
}
