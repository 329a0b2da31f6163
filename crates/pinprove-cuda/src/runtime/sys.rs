//! The CUDA runtime's C interface: the declarations, types and constants
//! this crate calls, as `cuda_runtime_api.h` of CUDA 12 and 13 has them.
//! Nothing here checks anything; `result` wraps each call.

use std::ffi::{c_char, c_int, c_uint, c_void};

pub(super) type RawError = c_int;
pub(super) type RawStream = *mut c_void;
pub(super) type RawEvent = *mut c_void;

pub(super) const SUCCESS: RawError = 0;
pub(super) const NOT_READY: RawError = 600;
pub(super) const ERROR_NO_DEVICE: RawError = 100;
pub(super) const HOST_ALLOC_PORTABLE: c_uint = 0x01;
pub(super) const HOST_REGISTER_PORTABLE: c_uint = 0x01;
pub(super) const STREAM_NON_BLOCKING: c_uint = 0x01;
pub(super) const EVENT_DISABLE_TIMING: c_uint = 0x02;
pub(super) const MEMCPY_HOST_TO_DEVICE: c_int = 1;
pub(super) const MEMCPY_DEVICE_TO_HOST: c_int = 2;
pub(super) const DEV_ATTR_MULTIPROCESSOR_COUNT: c_int = 16;
pub(super) const DEV_ATTR_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
pub(super) const DEV_ATTR_COMPUTE_CAPABILITY_MINOR: c_int = 76;
pub(super) const DEV_ATTR_COOPERATIVE_LAUNCH: c_int = 95;
pub(super) const MEMORY_TYPE_HOST: c_int = 1;
/// `sizeof(struct cudaDeviceProp)` is 1008 bytes in CUDA 13.0; `name` is its
/// first field. A larger buffer leaves room for later versions.
pub(super) const DEVICE_PROP_BYTES: usize = 4096;

/// `struct cudaPointerAttributes` of CUDA 12 and 13.
#[repr(C)]
pub(super) struct PointerAttributes {
    pub(super) kind: c_int,
    pub(super) device: c_int,
    pub(super) device_pointer: *mut c_void,
    pub(super) host_pointer: *mut c_void,
    pub(super) reserved: [i64; 8],
}

unsafe extern "C" {
    pub(super) fn cudaGetDeviceCount(count: *mut c_int) -> RawError;
    pub(super) fn cudaSetDevice(device: c_int) -> RawError;
    pub(super) fn cudaGetDevice(device: *mut c_int) -> RawError;
    pub(super) fn cudaGetDeviceProperties(prop: *mut c_void, device: c_int) -> RawError;
    pub(super) fn cudaDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int) -> RawError;
    pub(super) fn cudaDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: c_int) -> RawError;
    pub(super) fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> RawError;
    pub(super) fn cudaDriverGetVersion(version: *mut c_int) -> RawError;
    pub(super) fn cudaRuntimeGetVersion(version: *mut c_int) -> RawError;
    pub(super) fn cudaGetErrorName(error: RawError) -> *const c_char;
    pub(super) fn cudaGetErrorString(error: RawError) -> *const c_char;
    pub(super) fn cudaGetLastError() -> RawError;

    pub(super) fn cudaHostAlloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> RawError;
    pub(super) fn cudaFreeHost(ptr: *mut c_void) -> RawError;
    pub(super) fn cudaHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> RawError;
    pub(super) fn cudaHostUnregister(ptr: *mut c_void) -> RawError;
    pub(super) fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> RawError;
    pub(super) fn cudaFree(ptr: *mut c_void) -> RawError;
    pub(super) fn cudaMemcpyAsync(
        dst: *mut c_void,
        src: *const c_void,
        count: usize,
        kind: c_int,
        stream: RawStream,
    ) -> RawError;

    pub(super) fn cudaStreamCreateWithFlags(stream: *mut RawStream, flags: c_uint) -> RawError;
    pub(super) fn cudaStreamDestroy(stream: RawStream) -> RawError;
    pub(super) fn cudaStreamSynchronize(stream: RawStream) -> RawError;
    pub(super) fn cudaEventCreateWithFlags(event: *mut RawEvent, flags: c_uint) -> RawError;
    pub(super) fn cudaEventDestroy(event: RawEvent) -> RawError;
    pub(super) fn cudaEventRecord(event: RawEvent, stream: RawStream) -> RawError;
    pub(super) fn cudaEventQuery(event: RawEvent) -> RawError;
    pub(super) fn cudaEventSynchronize(event: RawEvent) -> RawError;
    pub(super) fn cudaEventElapsedTime(ms: *mut f32, start: RawEvent, end: RawEvent) -> RawError;
    pub(super) fn cudaPointerGetAttributes(attributes: *mut PointerAttributes, ptr: *const c_void) -> RawError;
}
