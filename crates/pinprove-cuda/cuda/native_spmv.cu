// Pre-compiled circuits on the GPU: each proof's a, b and c are the
// products of the circuit's matrices A, B and C with its witness, computed
// where the NTTs read them. Only the witness crosses PCIe per proof, and
// the matrices either stay in device memory (uploaded once per circuit
// type) or, when the device cannot hold them beside a proof, stream from
// pinned host memory in row chunks, double-buffered: chunk k + 1 crosses
// the bus while chunk k's rows are computed.
//
// One thread per row: rows hold a few entries each (1.85 per row and
// matrix for a 32 GiB PoRep partition), most coefficients are ±1 (an
// addition or a subtraction), the rest a multiplication by a table entry.
// Field sums are exact, so the result is the host evaluation's, bit for
// bit, in any order.

#include <cuda.h>

#include <ff/bls12-381.hpp>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>
#include <util/rusterror.h>

#include <memory>
#include <string>

#include "gpu_for.cuh"
#include "lane.cuh"
#include "spmv.cuh"

namespace {

// Rows of one matrix: row r's entries are row_ptr[r] − base ..
// row_ptr[r + 1] − base of cols and ids (base: the first entry's index in
// the whole matrix, for a chunk of it; 0 for a whole matrix).
__global__ void spmv_rows(fr_t* out, const uint64_t* row_ptr, const uint32_t* cols, const uint16_t* ids,
                          const fr_t* coeffs, const fr_t* w, size_t rows, uint64_t base)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        fr_t acc;
        acc.zero();
        for (uint64_t e = row_ptr[r] - base, end = row_ptr[r + 1] - base; e < end; e++) {
            fr_t v = w[cols[e]];
            uint16_t id = ids[e];
            if (id == 0)
                acc += v;
            else if (id == 1)
                acc -= v;
            else
                acc += v * coeffs[id];
        }
        out[r] = acc;
    }
}

void launch_rows(const gpu_t& gpu, cudaStream_t s, fr_t* out, const uint64_t* row_ptr, const uint32_t* cols,
                 const uint16_t* ids, const fr_t* coeffs, const fr_t* w, size_t rows, uint64_t base)
{
    if (rows == 0)
        return;
    spmv_rows<<<gpu.sm_count() * 8, 256, 0, s>>>(out, row_ptr, cols, ids, coeffs, w, rows, base);
    CUDA_OK(cudaGetLastError());
}

constexpr size_t round16(size_t n)
{
    return (n + 15) / 16 * 16;
}

// Where a chunk of `rows` rows and `nnz` entries lies in a chunk buffer:
// its rows + 1 offsets, then the columns, then the ids, each from a
// 16-byte boundary. src/native/matrices.rs (chunk_bytes) counts the same.
struct chunk_layout_t {
    size_t cols, ids, bytes;
    chunk_layout_t(size_t rows, size_t nnz)
        : cols(round16((rows + 1) * sizeof(uint64_t))), ids(cols + round16(nnz * sizeof(uint32_t))),
          bytes(ids + nnz * sizeof(uint16_t))
    {
    }
};

template<class T>
T* upload(const T* host, size_t n, const gpu_t& gpu)
{
    T* d = nullptr;
    if (n == 0)
        return d;
    CUDA_OK(cudaMalloc(&d, n * sizeof(T)));
    cudaError_t err = cudaMemcpyAsync(d, host, n * sizeof(T), cudaMemcpyHostToDevice, gpu);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(gpu);
    if (err != cudaSuccess) {
        (void)cudaFree(d);
        throw cuda_error{-err, std::string("uploading a circuit's matrices: ") + cudaGetErrorString(err)};
    }
    return d;
}

[[noreturn]] void invalid(const char* what)
{
    throw cuda_error{-cudaErrorInvalidValue, std::string("streamed matrices: ") + what};
}

} // namespace

namespace pinprove {

matrices_t::~matrices_t()
{
    (void)cudaSetDevice(device);
    for (auto& x : m) {
        (void)cudaFree(x.row_ptr);
        (void)cudaFree(x.cols);
        (void)cudaFree(x.ids);
    }
    (void)cudaFree(coeffs);
}

void resident_evaluator_t::queue(int k, const fr_t* w, fr_t* out)
{
    const csr_t& x = mats.m[k];
    launch_rows(gpu, lane.compute, out, x.row_ptr, x.cols, x.ids, mats.coeffs, w, mats.rows, 0);
}

streamed_evaluator_t::streamed_evaluator_t(const pinprove_host_matrices& h, lane_t& l, const gpu_t& g)
    : host(h), lane(l), gpu(g)
{
    // The chunks must cover every row in order and fit the buffers: the
    // copies below trust them.
    for (int k = 0; k < 3; k++) {
        const uint64_t* c = host.chunks[k];
        size_t n = host.n_chunks[k];
        if (c == nullptr || c[0] != 0 || c[n] != host.rows)
            invalid("chunks do not cover the rows");
        for (size_t i = 0; i < n; i++) {
            if (c[i + 1] <= c[i])
                invalid("chunk boundaries do not increase");
            size_t nnz = host.row_ptr[k][c[i + 1]] - host.row_ptr[k][c[i]];
            if (chunk_layout_t(c[i + 1] - c[i], nnz).bytes > host.chunk_bytes)
                invalid("a chunk larger than its buffer");
        }
    }
    try {
        for (auto& e : arrived)
            CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        for (auto& e : freed)
            CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        for (auto& b : chunk)
            b = alloc_async<uint8_t>(host.chunk_bytes, lane.compute);
        coeffs = alloc_async<fr_t>(host.n_coeffs, lane.compute);
        // Copies into the new memory come after its allocation.
        order(lane.copy, lane.compute);
        if (host.n_coeffs > 0)
            CUDA_OK(cudaMemcpyAsync(coeffs, host.coeffs, host.n_coeffs * sizeof(fr_t), cudaMemcpyHostToDevice,
                                    lane.copy));
        order(lane.compute, lane.copy);
    } catch (...) {
        // A constructor that throws runs no destructor.
        release();
        throw;
    }
}

streamed_evaluator_t::~streamed_evaluator_t()
{
    release();
}

void streamed_evaluator_t::release()
{
    // Behind the last kernel queued, which waited for every copy.
    for (auto& b : chunk)
        if (b != nullptr)
            (void)cudaFreeAsync(b, lane.compute);
    if (coeffs != nullptr)
        (void)cudaFreeAsync(coeffs, lane.compute);
    // A recorded event may be destroyed: waits on it stay in force.
    for (auto& e : arrived)
        if (e != nullptr)
            (void)cudaEventDestroy(e);
    for (auto& e : freed)
        if (e != nullptr)
            (void)cudaEventDestroy(e);
    chunk[0] = chunk[1] = nullptr;
    coeffs = nullptr;
    arrived[0] = arrived[1] = freed[0] = freed[1] = nullptr;
}

void streamed_evaluator_t::queue(int k, const fr_t* w, fr_t* out)
{
    const uint64_t* row_ptr = host.row_ptr[k];
    const uint64_t* c = host.chunks[k];
    for (size_t i = 0; i < host.n_chunks[k]; i++) {
        unsigned s = next++ & 1;
        size_t r0 = c[i], rows = c[i + 1] - c[i];
        uint64_t e0 = row_ptr[r0], nnz = row_ptr[c[i + 1]] - e0;
        chunk_layout_t at(rows, nnz);
        uint8_t* b = chunk[s];
        // The buffer's previous rows are computed (an event never recorded
        // is no wait).
        CUDA_OK(cudaStreamWaitEvent(lane.copy, freed[s], 0));
        CUDA_OK(cudaMemcpyAsync(b, row_ptr + r0, (rows + 1) * sizeof(uint64_t), cudaMemcpyHostToDevice,
                                lane.copy));
        CUDA_OK(cudaMemcpyAsync(b + at.cols, host.cols[k] + e0, nnz * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                lane.copy));
        CUDA_OK(cudaMemcpyAsync(b + at.ids, host.ids[k] + e0, nnz * sizeof(uint16_t), cudaMemcpyHostToDevice,
                                lane.copy));
        CUDA_OK(cudaEventRecord(arrived[s], lane.copy));
        CUDA_OK(cudaStreamWaitEvent(lane.compute, arrived[s], 0));
        launch_rows(gpu, lane.compute, out + r0, reinterpret_cast<const uint64_t*>(b),
                    reinterpret_cast<const uint32_t*>(b + at.cols), reinterpret_cast<const uint16_t*>(b + at.ids),
                    coeffs, w, rows, e0);
        CUDA_OK(cudaEventRecord(freed[s], lane.compute));
    }
}

} // namespace pinprove

// One matrix as Rust holds it: rows + 1 offsets, nnz columns and ids.
struct pinprove_csr_view {
    const uint64_t* row_ptr;
    const uint32_t* cols;
    const uint16_t* ids;
    size_t nnz;
};

// Copies a circuit's matrices (`rows` rows each over `vars` witness
// entries) and coefficient table to device `device`, synchronously; *out
// is the handle (free with pinprove_matrices_free) and *bytes the device
// memory it holds. The caller has checked the structure (offsets within
// nnz, columns below vars, ids below n_coeffs): kernels trust it.
extern "C" RustError::by_value pinprove_matrices_upload(void** out, size_t* bytes, int device,
                                                        const pinprove_csr_view views[3], size_t rows, size_t vars,
                                                        const fr_t* coeffs, size_t n_coeffs)
{
    *out = nullptr;
    *bytes = 0;
    try {
        const gpu_t& gpu = gpu_for(device);
        // A plain allocation cannot use the stream-ordered cache.
        pinprove::trim_pool();
        std::unique_ptr<pinprove::matrices_t> mats{new pinprove::matrices_t{}};
        mats->device = device;
        mats->rows = rows;
        mats->vars = vars;
        size_t total = 0;
        for (int k = 0; k < 3; k++) {
            pinprove::csr_t& x = mats->m[k];
            x.nnz = views[k].nnz;
            x.row_ptr = upload(views[k].row_ptr, rows + 1, gpu);
            x.cols = upload(views[k].cols, x.nnz, gpu);
            x.ids = upload(views[k].ids, x.nnz, gpu);
            total += (rows + 1) * sizeof(uint64_t) + x.nnz * (sizeof(uint32_t) + sizeof(uint16_t));
        }
        mats->coeffs = upload(coeffs, n_coeffs, gpu);
        mats->n_coeffs = n_coeffs;
        total += n_coeffs * sizeof(fr_t);
        *bytes = total;
        *out = mats.release();
    } catch (const cuda_error& e) {
        (void)cudaGetLastError();
        return RustError{e.code(), e.what()};
    } catch (const std::bad_alloc&) {
        return RustError{cudaErrorMemoryAllocation, "host memory for a circuit's matrices"};
    }
    return RustError{cudaSuccess};
}

// Frees the matrices (waiting for the device work that reads them: the
// caller drops the handle only after that work, so this does not block).
extern "C" void pinprove_matrices_free(void* handle)
{
    delete static_cast<pinprove::matrices_t*>(handle);
}
