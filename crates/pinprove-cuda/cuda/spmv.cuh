// A pre-compiled circuit's R1CS matrices in device memory, and the sparse
// products that give a proof's a, b and c from its witness there (see
// native_spmv.cu).

#pragma once

#include <ff/bls12-381.hpp>

#include <util/gpu_t.cuh>

#include <cstdint>

namespace pinprove {

// One matrix in compressed sparse rows: row r's entries are
// row_ptr[r]..row_ptr[r + 1] of cols (witness index: inputs, then aux) and
// ids (index into the coefficient table).
struct csr_t {
    uint64_t* row_ptr = nullptr;
    uint32_t* cols = nullptr;
    uint16_t* ids = nullptr;
    size_t nnz = 0;
};

// A, B and C of one circuit, with their shared coefficient table (id 0 is
// one, id 1 minus one), on one GPU for as long as the handle lives.
struct matrices_t {
    int device;
    size_t rows;
    size_t vars;
    csr_t m[3];
    fr_t* coeffs = nullptr;
    size_t n_coeffs = 0;
    ~matrices_t();
};

// Queues out[k][r] = (M_k · w)[r] for every row r and k = 0, 1, 2 on
// `stream`; w holds `vars` field elements in device memory.
void queue_spmv(const matrices_t& mats, const fr_t* w, fr_t* const out[3], cudaStream_t stream,
                const gpu_t& gpu);

} // namespace pinprove
