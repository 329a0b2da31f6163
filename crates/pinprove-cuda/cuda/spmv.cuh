// A pre-compiled circuit's R1CS matrices, in device memory or streamed
// from pinned host memory, and the sparse products that give a proof's a,
// b and c from its witness on the device (see native_spmv.cu).

#pragma once

#include <ff/bls12-381.hpp>

#include <util/gpu_t.cuh>

#include <cstdint>

#include "ffi.h"
#include "lane.cuh"

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

// What computes one proof's a, b and c (matrix k times the witness) on a
// lane's compute stream.
struct evaluator_t {
    virtual ~evaluator_t() = default;
    // Queues out[r] = (M_k · w)[r] for every row r on the lane's compute
    // stream; w holds vars() field elements in device memory.
    virtual void queue(int k, const fr_t* w, fr_t* out) = 0;
    virtual size_t rows() const = 0;
    virtual size_t vars() const = 0;
};

// Matrices resident in device memory (they outlive the evaluator).
struct resident_evaluator_t final : evaluator_t {
    const matrices_t& mats;
    lane_t& lane;
    const gpu_t& gpu;
    resident_evaluator_t(const matrices_t& m, lane_t& l, const gpu_t& g) : mats(m), lane(l), gpu(g) {}
    void queue(int k, const fr_t* w, fr_t* out) override;
    size_t rows() const override { return mats.rows; }
    size_t vars() const override { return mats.vars; }
};

// Matrices in pinned host memory (kept alive by the caller until the work
// queued is done), copied chunk by chunk on the lane's copy stream into
// two chunk buffers, one filled while the other's rows are computed. The
// buffers and a device copy of the coefficients are stream-ordered memory,
// released behind the last kernel when the evaluator is destroyed.
struct streamed_evaluator_t final : evaluator_t {
    const pinprove_host_matrices& host;
    lane_t& lane;
    const gpu_t& gpu;
    uint8_t* chunk[2] = {nullptr, nullptr};
    fr_t* coeffs = nullptr;
    // arrived[s]: chunk buffer s filled (copy stream); freed[s]: its last
    // reader done (compute stream).
    cudaEvent_t arrived[2] = {nullptr, nullptr};
    cudaEvent_t freed[2] = {nullptr, nullptr};
    unsigned next = 0;
    // Throws cuda_error for matrices that do not match their chunks.
    streamed_evaluator_t(const pinprove_host_matrices& h, lane_t& l, const gpu_t& g);
    ~streamed_evaluator_t() override;
    void queue(int k, const fr_t* w, fr_t* out) override;
    size_t rows() const override { return host.rows; }
    size_t vars() const override { return host.vars; }

private:
    void release();
};

} // namespace pinprove
