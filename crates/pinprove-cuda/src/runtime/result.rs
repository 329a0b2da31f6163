//! One thin wrapper per runtime call: the call, its return code turned into
//! a [`CudaError`] naming it, and its out-parameters returned as values.
//! Wrappers whose arguments the runtime cannot check (addresses, handles)
//! are `unsafe`, with the caller's duty stated; the owning types of
//! `memory` and `stream` are their only callers.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::ptr::{self, NonNull};

use super::sys::{self, RawError, RawEvent, RawStream, SUCCESS};

/// An error code of the CUDA runtime, with the call that returned it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {name} ({message})")]
pub struct CudaError {
    /// The runtime's numeric code.
    pub code: i32,
    /// The code's name, such as `cudaErrorMemoryAllocation`.
    pub name: String,
    /// The runtime's description.
    pub message: String,
    /// The API call.
    pub call: &'static str,
}

impl CudaError {
    /// A call that reported success yet returned a null pointer.
    fn null_pointer(call: &'static str) -> CudaError {
        CudaError {
            code: SUCCESS,
            name: "cudaSuccess".into(),
            message: "a null pointer".into(),
            call,
        }
    }

    /// The error of finding no device, as the runtime would name it.
    pub(super) fn no_device(call: &'static str) -> CudaError {
        CudaError {
            code: sys::ERROR_NO_DEVICE,
            name: "cudaErrorNoDevice".into(),
            message: "no CUDA-capable device is detected".into(),
            call,
        }
    }
}

fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return "unknown".into();
    }
    // SAFETY: the runtime returns pointers to static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub(super) fn check(rc: RawError, call: &'static str) -> Result<(), CudaError> {
    if rc == SUCCESS {
        return Ok(());
    }
    // Clearing the sticky last error keeps it from being reported again by
    // an unrelated later call.
    clear_last_error();
    // SAFETY: pure lookups of static strings.
    let (name, message) = unsafe { (c_str(sys::cudaGetErrorName(rc)), c_str(sys::cudaGetErrorString(rc))) };
    Err(CudaError {
        code: rc,
        name,
        message,
        call,
    })
}

/// Clears the calling thread's last error, returning it.
pub(super) fn clear_last_error() -> RawError {
    // SAFETY: no arguments.
    unsafe { sys::cudaGetLastError() }
}

pub(super) fn device_count() -> Result<c_int, CudaError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::cudaGetDeviceCount(&mut n) }, "cudaGetDeviceCount")?;
    Ok(n)
}

pub(super) fn set_device(device: c_int) -> Result<(), CudaError> {
    // SAFETY: invalid ordinals are reported as errors.
    check(unsafe { sys::cudaSetDevice(device) }, "cudaSetDevice")
}

pub(super) fn get_device() -> Result<c_int, CudaError> {
    let mut d: c_int = -1;
    // SAFETY: writes one int.
    check(unsafe { sys::cudaGetDevice(&mut d) }, "cudaGetDevice")?;
    Ok(d)
}

/// The device's name, the first field of its properties.
pub(super) fn device_name(device: c_int) -> Result<String, CudaError> {
    let mut prop = vec![0u64; sys::DEVICE_PROP_BYTES / 8];
    // SAFETY: the buffer is larger than the runtime's structure.
    check(
        unsafe { sys::cudaGetDeviceProperties(prop.as_mut_ptr().cast(), device) },
        "cudaGetDeviceProperties",
    )?;
    let name: Vec<u8> = prop
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .take(256)
        .take_while(|&b| b != 0)
        .collect();
    Ok(String::from_utf8_lossy(&name).into_owned())
}

pub(super) fn pci_bus_id(device: c_int) -> Result<String, CudaError> {
    let mut bus = [0 as c_char; 64];
    // SAFETY: writes at most the length passed, NUL-terminated.
    check(
        unsafe { sys::cudaDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as c_int, device) },
        "cudaDeviceGetPCIBusId",
    )?;
    // SAFETY: NUL-terminated by the runtime within its length.
    Ok(unsafe { CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned())
}

pub(super) fn device_attribute(attr: c_int, device: c_int) -> Result<c_int, CudaError> {
    let mut value: c_int = 0;
    // SAFETY: writes one int; unknown attributes are reported as errors.
    check(
        unsafe { sys::cudaDeviceGetAttribute(&mut value, attr, device) },
        "cudaDeviceGetAttribute",
    )?;
    Ok(value)
}

/// Free and total memory of the current device.
pub(super) fn mem_get_info() -> Result<(usize, usize), CudaError> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two sizes.
    check(unsafe { sys::cudaMemGetInfo(&mut free, &mut total) }, "cudaMemGetInfo")?;
    Ok((free, total))
}

pub(super) fn driver_version() -> Result<c_int, CudaError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::cudaDriverGetVersion(&mut v) }, "cudaDriverGetVersion")?;
    Ok(v)
}

pub(super) fn runtime_version() -> Result<c_int, CudaError> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::cudaRuntimeGetVersion(&mut v) }, "cudaRuntimeGetVersion")?;
    Ok(v)
}

/// Whether the runtime knows `ptr` as page-locked host memory.
pub(super) fn is_host_memory(ptr: *const c_void) -> Result<bool, CudaError> {
    let mut attr = sys::PointerAttributes {
        kind: 0,
        device: 0,
        device_pointer: ptr::null_mut(),
        host_pointer: ptr::null_mut(),
        reserved: [0; 8],
    };
    // SAFETY: writes one attributes structure; any pointer value may be
    // queried (unknown ones report as unregistered).
    check(
        unsafe { sys::cudaPointerGetAttributes(&mut attr, ptr) },
        "cudaPointerGetAttributes",
    )?;
    Ok(attr.kind == sys::MEMORY_TYPE_HOST)
}

/// `len` bytes of portable page-locked host memory.
pub(super) fn host_alloc(len: usize) -> Result<NonNull<c_void>, CudaError> {
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: writes one pointer.
    check(
        unsafe { sys::cudaHostAlloc(&mut p, len, sys::HOST_ALLOC_PORTABLE) },
        "cudaHostAlloc",
    )?;
    NonNull::new(p).ok_or_else(|| CudaError::null_pointer("cudaHostAlloc"))
}

/// # Safety
/// `ptr` came from [`host_alloc`] and is not used after this.
pub(super) unsafe fn free_host(ptr: *mut c_void) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaFreeHost(ptr) }, "cudaFreeHost")
}

/// Page-locks `len` bytes at `ptr` in place (portable).
///
/// # Safety
/// The range is allocated and stays so, unmoved, until [`host_unregister`];
/// no other registration covers any of its pages.
pub(super) unsafe fn host_register(ptr: *mut c_void, len: usize) -> Result<(), CudaError> {
    // SAFETY: the caller's duty; registering writes nothing to the range.
    check(
        unsafe { sys::cudaHostRegister(ptr, len, sys::HOST_REGISTER_PORTABLE) },
        "cudaHostRegister",
    )
}

/// # Safety
/// `ptr` was registered with [`host_register`], once.
pub(super) unsafe fn host_unregister(ptr: *mut c_void) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaHostUnregister(ptr) }, "cudaHostUnregister")
}

/// `len` bytes (at least one) of the current device's memory.
pub(super) fn malloc(len: usize) -> Result<NonNull<c_void>, CudaError> {
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: writes one pointer.
    check(unsafe { sys::cudaMalloc(&mut p, len.max(1)) }, "cudaMalloc")?;
    NonNull::new(p).ok_or_else(|| CudaError::null_pointer("cudaMalloc"))
}

/// # Safety
/// `ptr` came from [`malloc`] and is not used after this (the call waits
/// for the device, so queued work is not a use).
pub(super) unsafe fn free(ptr: *mut c_void) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaFree(ptr) }, "cudaFree")
}

/// Queues a copy of `len` bytes from `src` to `dst` on `stream`
/// (`host_to_device` or back).
///
/// # Safety
/// Both ranges hold `len` bytes, of the sides `host_to_device` says, and
/// stay allocated and untouched by the host until the copy has completed;
/// `stream` is live.
pub(super) unsafe fn memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    host_to_device: bool,
    stream: RawStream,
) -> Result<(), CudaError> {
    let kind = if host_to_device {
        sys::MEMCPY_HOST_TO_DEVICE
    } else {
        sys::MEMCPY_DEVICE_TO_HOST
    };
    // SAFETY: the caller's duty.
    check(
        unsafe { sys::cudaMemcpyAsync(dst, src, len, kind, stream) },
        "cudaMemcpyAsync",
    )
}

/// A stream that does not synchronize with the legacy default stream.
pub(super) fn stream_create() -> Result<RawStream, CudaError> {
    let mut raw: RawStream = ptr::null_mut();
    // SAFETY: writes one handle.
    check(
        unsafe { sys::cudaStreamCreateWithFlags(&mut raw, sys::STREAM_NON_BLOCKING) },
        "cudaStreamCreateWithFlags",
    )?;
    Ok(raw)
}

/// # Safety
/// `stream` came from [`stream_create`] and is not used after this.
pub(super) unsafe fn stream_destroy(stream: RawStream) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaStreamDestroy(stream) }, "cudaStreamDestroy")
}

/// # Safety
/// `stream` is live.
pub(super) unsafe fn stream_synchronize(stream: RawStream) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaStreamSynchronize(stream) }, "cudaStreamSynchronize")
}

/// An event; `timing`: one that records timestamps.
pub(super) fn event_create(timing: bool) -> Result<RawEvent, CudaError> {
    let flags: c_uint = if timing { 0 } else { sys::EVENT_DISABLE_TIMING };
    let mut raw: RawEvent = ptr::null_mut();
    // SAFETY: writes one handle.
    check(
        unsafe { sys::cudaEventCreateWithFlags(&mut raw, flags) },
        "cudaEventCreateWithFlags",
    )?;
    Ok(raw)
}

/// # Safety
/// `event` came from [`event_create`] and is not used after this.
pub(super) unsafe fn event_destroy(event: RawEvent) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaEventDestroy(event) }, "cudaEventDestroy")
}

/// # Safety
/// Both handles are live.
pub(super) unsafe fn event_record(event: RawEvent, stream: RawStream) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaEventRecord(event, stream) }, "cudaEventRecord")
}

/// Whether the work recorded before `event` has completed.
///
/// # Safety
/// `event` is live.
pub(super) unsafe fn event_query(event: RawEvent) -> Result<bool, CudaError> {
    // SAFETY: the caller's duty.
    match unsafe { sys::cudaEventQuery(event) } {
        SUCCESS => Ok(true),
        sys::NOT_READY => Ok(false),
        rc => check(rc, "cudaEventQuery").map(|_| false),
    }
}

/// # Safety
/// `event` is live.
pub(super) unsafe fn event_synchronize(event: RawEvent) -> Result<(), CudaError> {
    // SAFETY: the caller's duty.
    check(unsafe { sys::cudaEventSynchronize(event) }, "cudaEventSynchronize")
}

/// Milliseconds between two completed timing events.
///
/// # Safety
/// Both handles are live.
pub(super) unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> Result<f32, CudaError> {
    let mut ms = 0f32;
    // SAFETY: writes one float; the handles are the caller's duty.
    check(
        unsafe { sys::cudaEventElapsedTime(&mut ms, start, end) },
        "cudaEventElapsedTime",
    )?;
    Ok(ms)
}
