// The GPU selection both of pinprove's CUDA units start with.

#pragma once

#include <string>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>

namespace {

// Selects sppark's GPU `device`; throws for a device it does not know.
// Clears the thread's last CUDA error first: a failure of an earlier call
// (an allocation that did not fit) is not this call's, and sppark checks
// cudaGetLastError after its launches (its first NTT on a device too).
inline const gpu_t& gpu_for(int device)
{
    (void)cudaGetLastError();
    if (device < 0 || (size_t)device >= ngpus())
        throw cuda_error{-cudaErrorInvalidDevice, std::string("no such GPU")};
    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    return gpu;
}

} // namespace
