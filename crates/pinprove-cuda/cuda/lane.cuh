// The streams every proof on one GPU queues its work on, shared by
// pinprove's CUDA units.
//
// One lane per GPU, three streams: `copy` carries host-to-device uploads,
// `compute` the transforms and the MSMs' bucket work, `digits` the MSMs'
// scalar breakdown and sort, which overlap the previous batch's bucket work.
// Proofs queue behind each other on the same streams, so the GPU always has
// the next proof's work queued while the host collects the last one's
// results — and sppark's kernels that keep a global work counter (bucket
// accumulation, batched addition) never run two at once: they all go on
// `compute`.

#pragma once

#include <util/exception.cuh>
#include <util/gpu_t.cuh>

namespace pinprove {

struct lane_t {
    stream_t copy;
    stream_t compute;
    stream_t digits;
    explicit lane_t(int device) : copy(device), compute(device), digits(device) {}
    void sync() const
    {
        (void)cudaStreamSynchronize(copy);
        (void)cudaStreamSynchronize(compute);
        (void)cudaStreamSynchronize(digits);
    }
};

// The lane of sppark's GPU `device`, made on first use; that GPU must be
// the current device. Lanes live as long as the process.
lane_t& lane(int device);

// Hands the current device's cached stream-ordered memory back to the
// driver, after waiting for all work on the device: for the rare large
// cudaMalloc (resident bases), which cannot use the cache.
void trim_pool();

// Makes `to` wait (on the device) for the work queued on `from` so far.
void order(cudaStream_t to, cudaStream_t from);

// Device memory in stream order: usable by work queued on `stream` after
// this call (other streams: once ordered after it), released with
// cudaFreeAsync. Throws cuda_error when it cannot be had.
template<class T>
T* alloc_async(size_t n, cudaStream_t stream)
{
    void* p = nullptr;
    if (n > 0)
        CUDA_OK(cudaMallocAsync(&p, n * sizeof(T), stream));
    return static_cast<T*>(p);
}

} // namespace pinprove
