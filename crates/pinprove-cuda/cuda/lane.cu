// Lanes (see lane.cuh): one set of streams per GPU, for the whole process.

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include <util/exception.cuh>
#include <util/gpu_t.cuh>
#include <util/rusterror.h>

#include "gpu_for.cuh"
#include "lane.cuh"

namespace pinprove {

static std::mutex lanes_mu;

// The most stream-ordered memory each GPU's pool may hold (by sppark
// ordinal), set before its lane is made.
static std::map<int, uint64_t>& pool_limits()
{
    static auto* limits = new std::map<int, uint64_t>;
    return *limits;
}

static std::map<int, std::unique_ptr<lane_t>>& lanes()
{
    // Never destroyed: streams must not be torn down after the CUDA runtime
    // at exit.
    static auto* lanes = new std::map<int, std::unique_ptr<lane_t>>;
    return *lanes;
}

lane_t& lane(int device)
{
    std::lock_guard<std::mutex> guard(lanes_mu);
    auto& l = lanes()[device];
    if (!l) {
        // Stream-ordered allocations are made and freed for every proof;
        // keep what is freed in the device's pool instead of returning it
        // to the driver at each synchronization (see trim_pool). With a
        // limit, the pool is one of pinprove's own that cannot grow past it
        // (the plan keeps proofs within it; this only makes a planning
        // mistake an allocation error instead of memory taken from others).
        int current;
        CUDA_OK(cudaGetDevice(&current));
        cudaMemPool_t pool;
        auto limit = pool_limits().find(device);
        if (limit != pool_limits().end()) {
            cudaMemPoolProps props = {};
            props.allocType = cudaMemAllocationTypePinned;
            props.handleTypes = cudaMemHandleTypeNone;
            props.location.type = cudaMemLocationTypeDevice;
            props.location.id = current;
            props.maxSize = limit->second;
            CUDA_OK(cudaMemPoolCreate(&pool, &props));
            CUDA_OK(cudaDeviceSetMemPool(current, pool));
        } else {
            CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, current));
        }
        uint64_t keep = UINT64_MAX;
        CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        l.reset(new lane_t{device});
    }
    return *l;
}

void order(cudaStream_t to, cudaStream_t from)
{
    cudaEvent_t e;
    CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaError_t err = cudaEventRecord(e, from);
    if (err == cudaSuccess)
        err = cudaStreamWaitEvent(to, e, 0);
    // Destroying a recorded event is allowed: its resources go once it
    // completes, and the wait stays in force.
    (void)cudaEventDestroy(e);
    if (err != cudaSuccess)
        throw cuda_error{-err, std::string("ordering two streams: ") + cudaGetErrorString(err)};
}

void trim_pool()
{
    int current;
    CUDA_OK(cudaGetDevice(&current));
    cudaMemPool_t pool;
    CUDA_OK(cudaDeviceGetMemPool(&pool, current));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemPoolTrimTo(pool, 0));
}

static size_t pool_reserved(int cuda_device)
{
    cudaMemPool_t pool;
    CUDA_OK(cudaDeviceGetMemPool(&pool, cuda_device));
    uint64_t reserved = 0;
    CUDA_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    return reserved;
}

} // namespace pinprove

// The bytes GPU `device`'s stream-ordered pool holds now (in use by queued
// work or kept for reuse).
extern "C" RustError::by_value pinprove_pool_reserved(int device, uint64_t* bytes)
{
    *bytes = 0;
    try {
        const gpu_t& gpu = gpu_for(device);
        *bytes = pinprove::pool_reserved(gpu.cid());
    } catch (const cuda_error& e) {
        (void)cudaGetLastError();
        return RustError{e.code(), e.what()};
    }
    return RustError{cudaSuccess};
}

// Limits GPU `device`'s stream-ordered pool to `bytes` when its lane is
// made (with the first proof's work); returns whether the limit applies
// (false: the lane was made already, with its pool as it was then).
extern "C" bool pinprove_lane_limit(int device, uint64_t bytes)
{
    std::lock_guard<std::mutex> guard(pinprove::lanes_mu);
    if (pinprove::lanes().count(device) != 0)
        return false;
    pinprove::pool_limits()[device] = bytes;
    return true;
}

// Grows GPU `device`'s stream-ordered pool to at least `bytes`, so that
// proofs queued later take their memory from it instead of growing it: an
// allocation of the difference, freed on the compute stream at once, which
// the pool keeps (its release threshold is never reached, see lane()).
extern "C" RustError::by_value pinprove_pool_reserve(int device, uint64_t bytes)
{
    try {
        const gpu_t& gpu = gpu_for(device);
        auto& l = pinprove::lane(device);
        size_t have = pinprove::pool_reserved(gpu.cid());
        if (have < bytes) {
            void* p = nullptr;
            CUDA_OK(cudaMallocAsync(&p, bytes - have, l.compute));
            CUDA_OK(cudaFreeAsync(p, l.compute));
        }
    } catch (const cuda_error& e) {
        (void)cudaGetLastError();
        return RustError{e.code(), e.what()};
    }
    return RustError{cudaSuccess};
}

// Records `event` (a cudaEvent_t of GPU `device`) on its lane's compute
// stream, behind the work queued there so far: where a piece of a proof's
// device work ends.
extern "C" RustError::by_value pinprove_lane_mark(int device, void* event)
{
    try {
        gpu_for(device);
        CUDA_OK(cudaEventRecord(static_cast<cudaEvent_t>(event), pinprove::lane(device).compute));
    } catch (const cuda_error& e) {
        (void)cudaGetLastError();
        return RustError{e.code(), e.what()};
    }
    return RustError{cudaSuccess};
}

namespace {

__global__ void pinprove_no_op(int) {}

__global__ void pinprove_store(int* p)
{
    *p = 1;
}

__device__ unsigned long long pinprove_now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void pinprove_spin(unsigned long long ns)
{
    unsigned long long start = pinprove_now_ns();
    while (pinprove_now_ns() - start < ns)
        __nanosleep(1000);
}

} // namespace

// For tests of the error paths: makes device `device` fail on its lane's
// compute stream, behind the work queued there. kind 0: a cooperative
// launch of more blocks than the device can hold at once (refused at
// launch; the device stays usable). kind 1: a kernel that stores through a
// null pointer (an illegal address, a sticky error: the device is lost to
// this process), waited for. Returns the error code.
extern "C" int pinprove_test_fault(int device, int kind)
{
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess)
        return err;
    try {
        cudaStream_t s = pinprove::lane(device).compute;
        if (kind == 0) {
            int arg = 0;
            void* args[] = {&arg};
            return cudaLaunchCooperativeKernel((const void*)pinprove_no_op, dim3(1u << 24), dim3(1024), args, 0, s);
        }
        pinprove_store<<<1, 1, 0, s>>>(nullptr);
        err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
        return cudaStreamSynchronize(s);
    } catch (const cuda_error& e) {
        return -e.code();
    }
}

// For tests of what reads a proof's events: queues `us` microseconds of
// device time (one thread spinning) on device `device`'s compute stream,
// behind the work queued there. Returns the launch's error code.
extern "C" int pinprove_test_hold_compute(int device, unsigned int us)
{
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess)
        return err;
    try {
        pinprove_spin<<<1, 1, 0, pinprove::lane(device).compute>>>(1000ull * us);
        return cudaGetLastError();
    } catch (const cuda_error& e) {
        return -e.code();
    }
}
