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
// a, b and c come either from the host (three uploads in chunks on the GPU
// lane's copy stream; the compute stream waits, on the device, only for
// the vector it transforms next, so b and c are still crossing the bus
// while a's NTTs run, and the caller hands each host buffer back as soon
// as its copy has landed) or, for a pre-compiled circuit, from its
// witness and matrices on the device (native_spmv.cu). The witness path
// holds two domain vectors, not three: a·b is formed before c is computed,
// so a 2^27 domain with its witness fits a 16 GB card. Nothing here waits
// on the host: the work queues behind the previous proof's.

#include <cuda.h>

#include <ff/bls12-381.hpp>
#include <ntt/ntt.cuh>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>
#include <util/rusterror.h>

#include <memory>

#include "gpu_for.cuh"
#include "lane.cuh"
#include "spmv.cuh"

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

__global__ void multiply_into(fr_t* a, const fr_t* b, size_t m)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride)
        a[i] = a[i] * b[i];
}

__global__ void subtract_scaled(fr_t* ab, const fr_t* c, size_t m, fr_t z_inv)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += stride) {
        fr_t x = ab[i] - c[i];
        ab[i] = x * z_inv;
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

// One h computation: its device memory (a, then h; b; c: up to three
// buffers, so that the others go back as soon as the quotient has read
// them and only h stays through its MSM) and the event recorded once h is
// computed. Work is queued on the GPU's lane; freeing the job queues the
// release of its memory behind every reader (the h MSM reads h on the
// lane's digits stream), so it never blocks the host.
struct h_job_t {
    pinprove::lane_t& lane;
    size_t m;
    fr_t* abc[3] = {nullptr, nullptr, nullptr}; // m elements each, from the copy stream
    cudaEvent_t ready = nullptr;
    bool queued = false; // `ready` is recorded after all of the job's work

    h_job_t(pinprove::lane_t& l, size_t m_) : lane(l), m(m_) {}
    ~h_job_t()
    {
        bool any = abc[0] != nullptr || abc[1] != nullptr || abc[2] != nullptr;
        if (any && !queued)
            // Failed half-way: nothing says how far the streams got.
            lane.sync();
        for (fr_t*& v : abc) {
            if (v == nullptr)
                continue;
            if (queued) {
                (void)cudaStreamWaitEvent(lane.digits, ready, 0);
                (void)cudaFreeAsync(v, lane.digits);
            } else {
                (void)cudaFreeAsync(v, lane.compute);
            }
            v = nullptr;
        }
        if (ready != nullptr)
            (void)cudaEventDestroy(ready);
    }
    // The first `count` vectors.
    void alloc(cudaStream_t on, int count = 3)
    {
        for (int k = 0; k < count; k++)
            abc[k] = pinprove::alloc_async<fr_t>(m, on);
    }
    fr_t* vec(int k) { return abc[k]; }
};

// Queues, on the compute stream, d's evaluations over the coset g·H from
// its first n evaluations over H (the rest are zeroed here):
// evaluations -> coefficients (bit-reversed) -> coset evaluations (natural
// order), with no separate bit-reversal pass.
void to_coset(pinprove::lane_t& lane, fr_t* d, size_t n, size_t m, uint32_t lg_m)
{
    if (n < m)
        CUDA_OK(cudaMemsetAsync(d + n, 0, (m - n) * sizeof(fr_t), lane.compute));
    NTT::Base_dev_ptr(lane.compute, d, lg_m, NTT::InputOutputOrder::NR, NTT::Direction::inverse,
                      NTT::Type::standard);
    NTT::Base_dev_ptr(lane.compute, d, lg_m, NTT::InputOutputOrder::RN, NTT::Direction::forward, NTT::Type::coset);
}

// Queues, on the compute stream, the transforms of a, b and c (n
// evaluations each arriving in the job's memory: vector k is there once
// arrived[k] completes) and the quotient; records the job's readiness
// event and `done` after h.
void queue_transforms(h_job_t& job, const gpu_t& gpu, size_t n, uint32_t lg_m, cudaEvent_t const arrived[3],
                      cudaEvent_t done)
{
    pinprove::lane_t& lane = job.lane;
    size_t m = job.m;
    for (int k = 0; k < 3; k++) {
        // The wait also orders the compute stream after the allocation.
        CUDA_OK(cudaStreamWaitEvent(lane.compute, arrived[k], 0));
        to_coset(lane, job.vec(k), n, m, lg_m);
    }
    quotient_on_coset<<<gpu.sm_count() * 4, 256, 0, lane.compute>>>(job.vec(0), job.vec(1), job.vec(2), m,
                                                                    z_on_coset_inverse(lg_m));
    CUDA_OK(cudaGetLastError());
    // b and c are read: their memory goes back now, in stream order.
    for (int k = 1; k < 3; k++) {
        CUDA_OK(cudaFreeAsync(job.abc[k], lane.compute));
        job.abc[k] = nullptr;
    }
    NTT::Base_dev_ptr(lane.compute, job.vec(0), lg_m, NTT::InputOutputOrder::NN, NTT::Direction::inverse,
                      NTT::Type::coset);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(job.ready, lane.compute));
    CUDA_OK(cudaEventRecord(done, lane.compute));
}

} // namespace

// Queues h for one proof on `device`'s lane: uploads of a, b and c (n
// evaluations each, host memory — pinned for full-speed copies that do not
// block the host) with uploaded[k] recorded after vector k's last chunk,
// then the transforms. Timing marks: [0] and [1] on the copy stream before
// the first copy and after the last, [2] and [3] on the compute stream
// before the first transform and after h. Returns at once; *out is the job
// (pinprove_h_result gives h's device address and readiness event; free it
// with pinprove_h_free). Host buffers must stay valid until their event
// completes.
extern "C" RustError::by_value pinprove_h_begin(void** out, int device, const fr_t* a, const fr_t* b, const fr_t* c,
                                                size_t n, uint32_t lg_m, cudaEvent_t const uploaded[3],
                                                cudaEvent_t const marks[4])
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
        pinprove::lane_t& lane = pinprove::lane(device);
        job.reset(new h_job_t{lane, m});
        job->alloc(lane.copy);
        CUDA_OK(cudaEventCreateWithFlags(&job->ready, cudaEventDisableTiming));
        const fr_t* host[3] = {a, b, c};
        CUDA_OK(cudaEventRecord(marks[0], lane.copy));
        for (int k = 0; k < 3; k++) {
            for (size_t off = 0; off < n; off += UPLOAD_CHUNK) {
                size_t len = std::min(UPLOAD_CHUNK, n - off);
                CUDA_OK(cudaMemcpyAsync(job->vec(k) + off, host[k] + off, len * sizeof(fr_t),
                                        cudaMemcpyHostToDevice, lane.copy));
            }
            CUDA_OK(cudaEventRecord(uploaded[k], lane.copy));
        }
        CUDA_OK(cudaEventRecord(marks[1], lane.copy));
        CUDA_OK(cudaEventRecord(marks[2], lane.compute));
        queue_transforms(*job, gpu, n, lg_m, uploaded, marks[3]);
        job->queued = true;
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

namespace {

// The witness (inputs then aux, host memory pinned for full-speed copies)
// to a new device vector of n_inputs + n_aux elements, on the copy stream.
fr_t* upload_witness(pinprove::lane_t& lane, const fr_t* inputs, size_t n_inputs, const fr_t* aux, size_t n_aux)
{
    fr_t* w = pinprove::alloc_async<fr_t>(n_inputs + n_aux, lane.copy);
    const fr_t* host[2] = {inputs, aux};
    size_t len[2] = {n_inputs, n_aux};
    fr_t* dst = w;
    try {
        for (int k = 0; k < 2; k++) {
            for (size_t off = 0; off < len[k]; off += UPLOAD_CHUNK) {
                size_t l = std::min(UPLOAD_CHUNK, len[k] - off);
                CUDA_OK(cudaMemcpyAsync(dst + off, host[k] + off, l * sizeof(fr_t), cudaMemcpyHostToDevice,
                                        lane.copy));
            }
            dst += len[k];
        }
    } catch (...) {
        lane.sync();
        (void)cudaFreeAsync(w, lane.copy);
        throw;
    }
    return w;
}

// Queues h from a pre-compiled circuit's witness `w` (on the device, read
// once compute reaches it) with only two domain vectors at once: a's coset
// evaluations in the first, b's in the second, their product into the
// first; then c into the second, the witness freed, and the quotient into
// the first. Records `evaluated` once c is computed, and the job's
// readiness and `done` after h.
void queue_from_witness(h_job_t& job, const gpu_t& gpu, pinprove::evaluator_t& eval, fr_t*& w, uint32_t lg_m,
                        cudaEvent_t evaluated, cudaEvent_t done)
{
    pinprove::lane_t& lane = job.lane;
    size_t m = job.m, n = eval.rows();
    int grid = gpu.sm_count() * 4;
    fr_t* x = job.vec(0);
    fr_t* y = job.vec(1);
    eval.queue(0, w, x);
    to_coset(lane, x, n, m, lg_m);
    eval.queue(1, w, y);
    to_coset(lane, y, n, m, lg_m);
    multiply_into<<<grid, 256, 0, lane.compute>>>(x, y, m);
    CUDA_OK(cudaGetLastError());
    eval.queue(2, w, y);
    CUDA_OK(cudaEventRecord(evaluated, lane.compute));
    fr_t* used = w;
    w = nullptr;
    CUDA_OK(cudaFreeAsync(used, lane.compute));
    to_coset(lane, y, n, m, lg_m);
    subtract_scaled<<<grid, 256, 0, lane.compute>>>(x, y, m, z_on_coset_inverse(lg_m));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaFreeAsync(job.abc[1], lane.compute));
    job.abc[1] = nullptr;
    NTT::Base_dev_ptr(lane.compute, x, lg_m, NTT::InputOutputOrder::NN, NTT::Direction::inverse, NTT::Type::coset);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaEventRecord(job.ready, lane.compute));
    CUDA_OK(cudaEventRecord(done, lane.compute));
}

// pinprove_h_begin_precompiled's work: the witness's upload, then h from
// the evaluator `make` gives (made on the GPU's lane).
template<class Make>
RustError begin_from_witness(void** out, int device, size_t vars, size_t rows, Make make, const fr_t* inputs,
                             size_t n_inputs, const fr_t* aux, size_t n_aux, uint32_t lg_m,
                             cudaEvent_t const marks[4], cudaEvent_t evaluated)
{
    *out = nullptr;
    if (lg_m == 0 || lg_m > 40)
        return RustError{cudaErrorInvalidValue, "h: domain size out of range"};
    size_t m = (size_t)1 << lg_m;
    if (rows > m)
        return RustError{cudaErrorInvalidValue, "h: the circuit's constraints exceed the domain"};
    if (n_inputs + n_aux != vars)
        return RustError{cudaErrorInvalidValue, "h: the witness does not have the recorded number of variables"};
    std::unique_ptr<h_job_t> job;
    fr_t* w = nullptr;
    pinprove::lane_t* lane = nullptr;
    // After a failure half-way: nothing says how far the streams got.
    auto undo = [&] {
        if (w != nullptr) {
            lane->sync();
            (void)cudaFreeAsync(w, lane->compute);
        }
        job.reset();
    };
    try {
        const gpu_t& gpu = gpu_for(device);
        lane = &pinprove::lane(device);
        job.reset(new h_job_t{*lane, m});
        job->alloc(lane->copy, 2);
        CUDA_OK(cudaEventCreateWithFlags(&job->ready, cudaEventDisableTiming));
        CUDA_OK(cudaEventRecord(marks[0], lane->copy));
        w = upload_witness(*lane, inputs, n_inputs, aux, n_aux);
        CUDA_OK(cudaEventRecord(marks[1], lane->copy));
        CUDA_OK(cudaEventRecord(marks[2], lane->compute));
        pinprove::order(lane->compute, lane->copy);
        std::unique_ptr<pinprove::evaluator_t> eval = make(*lane, gpu);
        queue_from_witness(*job, gpu, *eval, w, lg_m, evaluated, marks[3]);
        job->queued = true;
    } catch (const cuda_error& e) {
        undo();
        (void)cudaGetLastError();
        return RustError{e.code(), e.what()};
    } catch (const std::bad_alloc&) {
        undo();
        return RustError{cudaErrorMemoryAllocation, "host memory for an h job"};
    }
    *out = job.release();
    return RustError{cudaSuccess};
}

} // namespace

// As pinprove_h_begin, for a pre-compiled circuit: its matrices give a, b
// and c from the witness, which is uploaded instead of them: the n_inputs
// inputs then the n_aux aux values (host memory, pinned for full-speed
// copies; valid until the job's work is done). The matrices are either
// `matrices` (from pinprove_matrices_upload, on the device that runs the
// job) or `host` (pinned host memory streamed to device `device` chunk by
// chunk; it and everything it points to valid until the job's work is
// done): exactly one is given. Marks as there, with [1] after the
// witness's copy; `evaluated` is recorded on the compute stream once a, b
// and c are computed.
extern "C" RustError::by_value pinprove_h_begin_precompiled(void** out, int device, const void* matrices,
                                                            const pinprove_host_matrices* host, const fr_t* inputs,
                                                            size_t n_inputs, const fr_t* aux, size_t n_aux,
                                                            uint32_t lg_m, cudaEvent_t const marks[4],
                                                            cudaEvent_t evaluated)
{
    *out = nullptr;
    if ((matrices == nullptr) == (host == nullptr))
        return RustError{cudaErrorInvalidValue, "h: matrices on the device or on the host, one of them"};
    if (matrices != nullptr) {
        const auto& mats = *static_cast<const pinprove::matrices_t*>(matrices);
        auto make = [&](pinprove::lane_t& lane, const gpu_t& gpu) -> std::unique_ptr<pinprove::evaluator_t> {
            return std::unique_ptr<pinprove::evaluator_t>{new pinprove::resident_evaluator_t{mats, lane, gpu}};
        };
        return begin_from_witness(out, mats.device, mats.vars, mats.rows, make, inputs, n_inputs, aux, n_aux, lg_m,
                                  marks, evaluated);
    }
    auto make = [&](pinprove::lane_t& lane, const gpu_t& gpu) -> std::unique_ptr<pinprove::evaluator_t> {
        return std::unique_ptr<pinprove::evaluator_t>{new pinprove::streamed_evaluator_t{*host, lane, gpu}};
    };
    return begin_from_witness(out, device, host->vars, host->rows, make, inputs, n_inputs, aux, n_aux, lg_m, marks,
                              evaluated);
}

// h's device address (m − 1 coefficients, natural order, Montgomery form,
// valid until the job is freed) and the event after which it is there.
extern "C" void pinprove_h_result(void* job, const fr_t** h, cudaEvent_t* ready)
{
    auto* j = static_cast<h_job_t*>(job);
    *h = j->vec(0);
    *ready = j->ready;
}

// Blocks until h is computed.
extern "C" RustError::by_value pinprove_h_wait(void* job)
{
    cudaError_t err = cudaEventSynchronize(static_cast<h_job_t*>(job)->ready);
    if (err != cudaSuccess)
        return RustError{err, "h on the device"};
    return RustError{cudaSuccess};
}

// Copies h's m − 1 coefficients to host memory (for checks).
extern "C" RustError::by_value pinprove_h_download(void* job, fr_t* h_out)
{
    auto* j = static_cast<h_job_t*>(job);
    cudaError_t err = cudaMemcpyAsync(h_out, j->vec(0), (j->m - 1) * sizeof(fr_t), cudaMemcpyDeviceToHost,
                                      j->lane.compute);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(j->lane.compute);
    if (err != cudaSuccess)
        return RustError{err, "downloading h"};
    return RustError{cudaSuccess};
}

// Frees the job: its memory is released in stream order, after the work
// already queued that reads it.
extern "C" void pinprove_h_free(void* job)
{
    delete static_cast<h_job_t*>(job);
}
