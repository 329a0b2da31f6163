// Pre-compiled circuits on the GPU: a circuit's matrices A, B and C stay
// in device memory (uploaded once per circuit type), and each proof's a,
// b and c are their products with the witness, computed where the NTTs
// read them. Only the witness crosses PCIe: inputs and aux, about a third
// of the bytes of a, b and c for Filecoin's circuits.
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

#include "gpu_for.cuh"
#include "lane.cuh"
#include "spmv.cuh"

namespace {

__global__ void spmv_rows(fr_t* out, const uint64_t* row_ptr, const uint32_t* cols, const uint16_t* ids,
                          const fr_t* coeffs, const fr_t* w, size_t rows)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        fr_t acc;
        acc.zero();
        for (uint64_t e = row_ptr[r], end = row_ptr[r + 1]; e < end; e++) {
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

void queue_spmv(const matrices_t& mats, const fr_t* w, fr_t* const out[3], cudaStream_t stream, const gpu_t& gpu)
{
    if (mats.rows == 0)
        return;
    for (int k = 0; k < 3; k++) {
        const csr_t& x = mats.m[k];
        spmv_rows<<<gpu.sm_count() * 8, 256, 0, stream>>>(out[k], x.row_ptr, x.cols, x.ids, mats.coeffs, w,
                                                          mats.rows);
        CUDA_OK(cudaGetLastError());
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
