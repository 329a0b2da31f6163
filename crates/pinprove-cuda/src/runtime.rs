//! CUDA pinned host memory, and the few runtime calls needed to move it to a
//! GPU and time that.
//!
//! The runtime is linked statically (see the build script); the driver is
//! loaded by the runtime on first use. Every handle is owned by a value that
//! releases it on drop.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use pinprove_mem::sync::Recover;

pub use crate::info::DeviceInfo;
use pinprove_mem::{Error, HostAllocator, MemoryKind, PinMethod, PoolBuffer, Result, UseFence};

type RawError = c_int;
type RawStream = *mut c_void;
type RawEvent = *mut c_void;

const SUCCESS: RawError = 0;
const NOT_READY: RawError = 600;
const HOST_ALLOC_PORTABLE: c_uint = 0x01;
const HOST_REGISTER_PORTABLE: c_uint = 0x01;
const STREAM_NON_BLOCKING: c_uint = 0x01;
const EVENT_DISABLE_TIMING: c_uint = 0x02;
const MEMCPY_HOST_TO_DEVICE: c_int = 1;
const MEMCPY_DEVICE_TO_HOST: c_int = 2;
const DEV_ATTR_MULTIPROCESSOR_COUNT: c_int = 16;
const DEV_ATTR_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const DEV_ATTR_COMPUTE_CAPABILITY_MINOR: c_int = 76;
const DEV_ATTR_COOPERATIVE_LAUNCH: c_int = 95;
/// `sizeof(struct cudaDeviceProp)` is 1008 bytes in CUDA 13.0; `name` is its
/// first field. A larger buffer leaves room for later versions.
const DEVICE_PROP_BYTES: usize = 4096;

unsafe extern "C" {
    fn cudaGetDeviceCount(count: *mut c_int) -> RawError;
    fn cudaSetDevice(device: c_int) -> RawError;
    fn cudaGetDevice(device: *mut c_int) -> RawError;
    fn cudaGetDeviceProperties(prop: *mut c_void, device: c_int) -> RawError;
    fn cudaDeviceGetAttribute(value: *mut c_int, attr: c_int, device: c_int) -> RawError;
    fn cudaDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: c_int) -> RawError;
    fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> RawError;
    fn cudaDriverGetVersion(version: *mut c_int) -> RawError;
    fn cudaRuntimeGetVersion(version: *mut c_int) -> RawError;
    fn cudaGetErrorName(error: RawError) -> *const c_char;
    fn cudaGetErrorString(error: RawError) -> *const c_char;
    fn cudaGetLastError() -> RawError;

    fn cudaHostAlloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> RawError;
    fn cudaFreeHost(ptr: *mut c_void) -> RawError;
    fn cudaHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> RawError;
    fn cudaHostUnregister(ptr: *mut c_void) -> RawError;
    fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> RawError;
    fn cudaFree(ptr: *mut c_void) -> RawError;
    fn cudaMemcpyAsync(dst: *mut c_void, src: *const c_void, count: usize, kind: c_int, stream: RawStream) -> RawError;

    fn cudaStreamCreateWithFlags(stream: *mut RawStream, flags: c_uint) -> RawError;
    fn cudaStreamDestroy(stream: RawStream) -> RawError;
    fn cudaStreamSynchronize(stream: RawStream) -> RawError;
    fn cudaEventCreateWithFlags(event: *mut RawEvent, flags: c_uint) -> RawError;
    fn cudaEventDestroy(event: RawEvent) -> RawError;
    fn cudaEventRecord(event: RawEvent, stream: RawStream) -> RawError;
    fn cudaEventQuery(event: RawEvent) -> RawError;
    fn cudaEventSynchronize(event: RawEvent) -> RawError;
    fn cudaEventElapsedTime(ms: *mut f32, start: RawEvent, end: RawEvent) -> RawError;
    fn cudaPointerGetAttributes(attributes: *mut PointerAttributes, ptr: *const c_void) -> RawError;
}

/// `struct cudaPointerAttributes` of CUDA 12 and 13.
#[repr(C)]
struct PointerAttributes {
    kind: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
    reserved: [i64; 8],
}

const MEMORY_TYPE_HOST: c_int = 1;

/// Whether the CUDA runtime knows `ptr` as page-locked host memory (so that
/// copies from it are direct DMA).
pub fn is_pinned(ptr: *const u8) -> Result<bool, CudaError> {
    let mut attr = PointerAttributes {
        kind: 0,
        device: 0,
        device_pointer: ptr::null_mut(),
        host_pointer: ptr::null_mut(),
        reserved: [0; 8],
    };
    // SAFETY: writes one attributes structure; any pointer value may be
    // queried (unknown ones report as unregistered).
    check(
        unsafe { cudaPointerGetAttributes(&mut attr, ptr.cast()) },
        "cudaPointerGetAttributes",
    )?;
    Ok(attr.kind == MEMORY_TYPE_HOST)
}

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

fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return "unknown".into();
    }
    // SAFETY: the runtime returns pointers to static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(rc: RawError, call: &'static str) -> Result<(), CudaError> {
    if rc == SUCCESS {
        return Ok(());
    }
    // SAFETY: pure lookups of static strings; clearing the sticky last error
    // keeps it from being reported again by an unrelated later call.
    let (name, message) = unsafe {
        cudaGetLastError();
        (c_str(cudaGetErrorName(rc)), c_str(cudaGetErrorString(rc)))
    };
    Err(CudaError {
        code: rc,
        name,
        message,
        call,
    })
}

/// Number of usable CUDA devices; an error when no driver is usable.
pub fn device_count() -> Result<usize, CudaError> {
    let mut n: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { cudaGetDeviceCount(&mut n) }, "cudaGetDeviceCount")?;
    Ok(n.max(0) as usize)
}

/// Makes `ordinal` the current device of the calling thread.
pub fn set_device(ordinal: usize) -> Result<(), CudaError> {
    // SAFETY: plain runtime call; invalid ordinals are reported as errors.
    check(unsafe { cudaSetDevice(ordinal as c_int) }, "cudaSetDevice")
}

/// The device whose driver context pins and unpins host memory here; -1:
/// the calling thread's current device.
static PINNING_DEVICE: AtomicI32 = AtomicI32::new(-1);

/// Makes GPU `ordinal` the one whose driver context pins and unpins host
/// memory for the allocators of this module, whatever device the calling
/// thread has current (`None`: the calling thread's current device, the
/// default).
///
/// Pinned memory here is portable, so any device's context serves every
/// device; what matters is which context does it. Pinning from a thread
/// that never chose a device uses device 0, which creates a context (and
/// takes its memory) on a GPU the process may not have been given, and
/// once a device is lost its context refuses every call: a process proving
/// on several GPUs pins with one it uses and, when that one is lost, with
/// another (the engine does both).
pub fn pin_with_device(ordinal: Option<usize>) {
    let raw = ordinal.map_or(-1, |o| i32::try_from(o).unwrap_or(i32::MAX));
    PINNING_DEVICE.store(raw, Ordering::Relaxed);
}

/// The GPU set by [`pin_with_device`], if any.
pub fn pinning_device() -> Option<usize> {
    usize::try_from(PINNING_DEVICE.load(Ordering::Relaxed)).ok()
}

/// Runs `f` with the pinning device current on this thread, and makes the
/// thread's own current device current again after it.
fn on_pinning_device<T>(f: impl FnOnce() -> T) -> T {
    let Some(pinning) = pinning_device() else {
        return f();
    };
    let mut current: c_int = -1;
    // SAFETY: writes one int.
    let known = unsafe { cudaGetDevice(&mut current) } == SUCCESS;
    let switch = known && current != pinning as c_int;
    // A failed switch (an ordinal this machine lacks) leaves the thread's
    // device current, and its error is cleared so that no later check
    // mistakes it for its own.
    // SAFETY: plain runtime calls; invalid ordinals are reported as errors.
    let switched = switch && unsafe { cudaSetDevice(pinning as c_int) } == SUCCESS;
    if switch && !switched {
        // SAFETY: as above.
        unsafe { cudaGetLastError() };
    }
    let out = f();
    if switched {
        // SAFETY: as above; `current` was the thread's device a moment ago.
        unsafe { cudaSetDevice(current) };
    }
    out
}

/// Reads what device `ordinal` is. Makes it the thread's current device.
pub fn device_info(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    set_device(ordinal)?;
    let dev = ordinal as c_int;
    let mut prop = vec![0u64; DEVICE_PROP_BYTES / 8];
    let mut bus = [0 as c_char; 64];
    let (mut sms, mut drv, mut rt) = (0 as c_int, 0 as c_int, 0 as c_int);
    let (mut major, mut minor, mut coop) = (0 as c_int, 0 as c_int, 0 as c_int);
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: each call writes into a buffer at least as large as the
    // runtime's structure or the length passed.
    unsafe {
        check(
            cudaGetDeviceProperties(prop.as_mut_ptr().cast(), dev),
            "cudaGetDeviceProperties",
        )?;
        check(
            cudaDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as c_int, dev),
            "cudaDeviceGetPCIBusId",
        )?;
        for (value, attr) in [
            (&mut sms, DEV_ATTR_MULTIPROCESSOR_COUNT),
            (&mut major, DEV_ATTR_COMPUTE_CAPABILITY_MAJOR),
            (&mut minor, DEV_ATTR_COMPUTE_CAPABILITY_MINOR),
            (&mut coop, DEV_ATTR_COOPERATIVE_LAUNCH),
        ] {
            check(cudaDeviceGetAttribute(value, attr, dev), "cudaDeviceGetAttribute")?;
        }
        check(cudaMemGetInfo(&mut free, &mut total), "cudaMemGetInfo")?;
        check(cudaDriverGetVersion(&mut drv), "cudaDriverGetVersion")?;
        check(cudaRuntimeGetVersion(&mut rt), "cudaRuntimeGetVersion")?;
    }
    let name_bytes: Vec<u8> = prop
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .take(256)
        .take_while(|&b| b != 0)
        .collect();
    // SAFETY: `bus` is NUL-terminated by the runtime within its length.
    let pci_bus_id = unsafe { CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned();
    Ok(DeviceInfo {
        ordinal,
        name: String::from_utf8_lossy(&name_bytes).into_owned(),
        pci_bus_id,
        compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        cooperative_launch: coop != 0,
        multiprocessors: sms as u32,
        total_memory: total as u64,
        free_memory: free as u64,
        driver_version: drv as u32,
        runtime_version: rt as u32,
    })
}

/// Page-locked host memory from `cudaHostAlloc` (portable, so every device's
/// context can DMA from it; not write-combined, because the CPU reads these
/// buffers too).
#[derive(Debug)]
pub struct CudaPinnedAllocator {
    _private: (),
}

impl CudaPinnedAllocator {
    /// Succeeds when a driver and at least one device are usable.
    pub fn new() -> Result<Self, CudaError> {
        let n = device_count()?;
        if n == 0 {
            return Err(CudaError {
                code: 100,
                name: "cudaErrorNoDevice".into(),
                message: "no CUDA-capable device is detected".into(),
                call: "cudaGetDeviceCount",
            });
        }
        Ok(CudaPinnedAllocator { _private: () })
    }
}

// SAFETY: cudaHostAlloc returns page-aligned memory of at least `len` bytes,
// usable from any thread, freed only by the matching cudaFreeHost.
unsafe impl HostAllocator for CudaPinnedAllocator {
    fn kind(&self) -> MemoryKind {
        MemoryKind::CudaPinned
    }

    fn allocate(&self, len: usize) -> Result<NonNull<u8>> {
        let mut p: *mut c_void = ptr::null_mut();
        let rc = on_pinning_device(|| {
            // SAFETY: writes one pointer.
            unsafe { cudaHostAlloc(&mut p, len, HOST_ALLOC_PORTABLE) }
        });
        check(rc, "cudaHostAlloc").map_err(|e| Error::CudaAlloc {
            bytes: len,
            message: e.to_string(),
        })?;
        NonNull::new(p.cast()).ok_or(Error::CudaAlloc {
            bytes: len,
            message: "cudaHostAlloc returned a null pointer".into(),
        })
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, _len: usize) {
        let rc = on_pinning_device(|| {
            // SAFETY: the caller passes a pointer from cudaHostAlloc.
            unsafe { cudaFreeHost(ptr.as_ptr().cast()) }
        });
        if let Err(e) = check(rc, "cudaFreeHost") {
            tracing::error!("{e}");
        }
    }
}

/// Page-locked host memory made by [`PinMethod::Register`](PinMethod::Register): mapped and
/// faulted in like [`HeapAllocator`](pinprove_mem::HeapAllocator) memory, then
/// registered (portable) with the driver until it is freed.
#[derive(Debug)]
pub struct CudaRegisteredAllocator {
    heap: pinprove_mem::HeapAllocator,
}

impl CudaRegisteredAllocator {
    /// Succeeds when a driver and at least one device are usable.
    pub fn new() -> Result<Self, CudaError> {
        CudaPinnedAllocator::new()?;
        Ok(CudaRegisteredAllocator {
            heap: pinprove_mem::HeapAllocator::new(true),
        })
    }

    /// As [`new`](Self::new), faulting each buffer in with one call
    /// ([`PinMethod::RegisterWhole`](PinMethod::RegisterWhole)).
    pub fn populating_whole() -> Result<Self, CudaError> {
        let r = Self::new()?;
        Ok(CudaRegisteredAllocator {
            heap: r.heap.populating_whole(),
        })
    }
}

// SAFETY: the memory is a fresh mapping from `HeapAllocator` (page-aligned,
// at least `len` bytes, usable from any thread), locked by cudaHostRegister
// before it is handed out; `deallocate` unlocks it before the mapping goes.
unsafe impl HostAllocator for CudaRegisteredAllocator {
    fn kind(&self) -> MemoryKind {
        MemoryKind::CudaPinned
    }

    fn allocate(&self, len: usize) -> Result<NonNull<u8>> {
        let p = self.heap.allocate(len)?;
        let rc = on_pinning_device(|| {
            // SAFETY: `p` maps `len` bytes (rounded up to a page) that
            // nothing else refers to yet.
            unsafe {
                cudaHostRegister(
                    p.as_ptr().cast(),
                    len.next_multiple_of(pinprove_mem::PAGE),
                    HOST_REGISTER_PORTABLE,
                )
            }
        });
        if let Err(e) = check(rc, "cudaHostRegister") {
            // SAFETY: `p` came from this heap allocator with `len`.
            unsafe { self.heap.deallocate(p, len) };
            return Err(Error::CudaAlloc {
                bytes: len,
                message: e.to_string(),
            });
        }
        Ok(p)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        let rc = on_pinning_device(|| {
            // SAFETY: the caller passes a pointer this allocator registered.
            unsafe { cudaHostUnregister(ptr.as_ptr().cast()) }
        });
        if let Err(e) = check(rc, "cudaHostUnregister") {
            // Unmapping memory the driver may still use would be worse than
            // leaking it.
            tracing::error!("{e}; leaking {len} bytes");
            return;
        }
        // SAFETY: mapped by `self.heap` with `len`, and no longer registered.
        unsafe { self.heap.deallocate(ptr, len) };
    }
}

/// A pinned-memory allocator of `method`, or why there is none here.
pub fn pinned_allocator(method: PinMethod) -> Result<std::sync::Arc<dyn HostAllocator>, CudaError> {
    Ok(match method {
        PinMethod::HostAlloc => std::sync::Arc::new(CudaPinnedAllocator::new()?),
        PinMethod::Register => std::sync::Arc::new(CudaRegisteredAllocator::new()?),
        PinMethod::RegisterWhole => std::sync::Arc::new(CudaRegisteredAllocator::populating_whole()?),
    })
}

/// A device allocation, freed on drop.
pub struct DeviceBuffer {
    ptr: NonNull<c_void>,
    len: usize,
}

// SAFETY: device pointers are plain addresses valid in every host thread.
unsafe impl Send for DeviceBuffer {}
// SAFETY: shared references expose only the address and length.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocates `len` bytes on the current device.
    pub fn new(len: usize) -> Result<Self, CudaError> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: writes one pointer.
        check(unsafe { cudaMalloc(&mut p, len.max(1)) }, "cudaMalloc")?;
        Ok(DeviceBuffer {
            ptr: NonNull::new(p).expect("cudaMalloc succeeded with a non-null pointer"),
            len,
        })
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address.
    pub fn as_device_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cudaMalloc and owned by this value. cudaFree
        // synchronizes the device, so no queued work still uses it.
        if let Err(e) = check(unsafe { cudaFree(self.ptr.as_ptr()) }, "cudaFree") {
            tracing::error!("{e}");
        }
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer").field("len", &self.len).finish()
    }
}

/// A non-blocking stream on the current device, destroyed on drop.
pub struct Stream {
    raw: RawStream,
}

// SAFETY: CUDA streams may be used from any host thread.
unsafe impl Send for Stream {}
// SAFETY: the runtime serializes concurrent use of one stream.
unsafe impl Sync for Stream {}

impl Stream {
    /// A stream that does not synchronize with the legacy default stream.
    pub fn new() -> Result<Self, CudaError> {
        let mut raw: RawStream = ptr::null_mut();
        // SAFETY: writes one handle.
        check(
            unsafe { cudaStreamCreateWithFlags(&mut raw, STREAM_NON_BLOCKING) },
            "cudaStreamCreateWithFlags",
        )?;
        Ok(Stream { raw })
    }

    /// Waits for everything queued on the stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the handle is live for `self`'s lifetime.
        check(unsafe { cudaStreamSynchronize(self.raw) }, "cudaStreamSynchronize")
    }

    /// Copies `src` to the start of `dst`, and returns the time the copy took
    /// on the device, measured with events recorded around it. Returns after
    /// the copy has completed, so `src` is free again.
    pub fn timed_upload<T: Copy>(&self, dst: &mut DeviceBuffer, src: &[T]) -> Result<Duration, CudaError> {
        let bytes = std::mem::size_of_val(src);
        assert!(bytes <= dst.len(), "upload larger than the device buffer");
        let start = Event::timing()?;
        let end = Event::timing()?;
        start.record(self)?;
        // SAFETY: `dst` holds at least `bytes` bytes, the size of `src`; `src`
        // stays borrowed until the event after the copy has completed
        // (synchronized below). The device reads the bytes; no Rust value is
        // formed from them.
        check(
            unsafe {
                cudaMemcpyAsync(
                    dst.as_device_ptr(),
                    src.as_ptr().cast(),
                    bytes,
                    MEMCPY_HOST_TO_DEVICE,
                    self.raw,
                )
            },
            "cudaMemcpyAsync",
        )?;
        end.record(self)?;
        end.synchronize()?;
        end.elapsed_since(&start)
    }

    /// Enqueues a copy of the first `len` bytes of `src` into `dst` and
    /// returns at once, giving the buffer back to its pool with a fence: the
    /// pool hands it out again only after the copy has completed, never when
    /// it is merely enqueued. Returns the fence's twin, for waiting.
    pub fn upload_and_release(
        &self,
        dst: &mut DeviceBuffer,
        src: PoolBuffer,
        len: usize,
    ) -> Result<EventFence, CudaError> {
        assert!(len <= src.len() && len <= dst.len(), "upload larger than its buffers");
        // SAFETY: `dst` holds `len` bytes and is freed only by cudaFree,
        // which waits for the device. `src` is moved in and returned to its
        // pool fenced below: nobody can write it, and the pool neither reuses
        // nor frees it, until the event after the copy has completed.
        check(
            unsafe {
                cudaMemcpyAsync(
                    dst.as_device_ptr(),
                    src.as_ptr().cast(),
                    len,
                    MEMCPY_HOST_TO_DEVICE,
                    self.raw,
                )
            },
            "cudaMemcpyAsync",
        )?;
        let mut src = src;
        match EventFence::record(self) {
            Ok(fence) => src.set_use_fence(Box::new(fence)),
            Err(e) => {
                // No fence: the buffer may only go back once the copy is done.
                let _ = self.synchronize();
                return Err(e);
            }
        }
        drop(src);
        EventFence::record(self)
    }

    /// Copies the start of `src` back into `dst`, waiting for completion.
    pub fn download(&self, dst: &mut [u8], src: &DeviceBuffer) -> Result<(), CudaError> {
        assert!(dst.len() <= src.len(), "download larger than the device buffer");
        // SAFETY: sizes checked above; the stream is synchronized before
        // `dst`'s borrow ends.
        check(
            unsafe {
                cudaMemcpyAsync(
                    dst.as_mut_ptr().cast(),
                    src.as_device_ptr(),
                    dst.len(),
                    MEMCPY_DEVICE_TO_HOST,
                    self.raw,
                )
            },
            "cudaMemcpyAsync",
        )?;
        self.synchronize()
    }

    /// The raw handle, for calls into other CUDA code of the process.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by cudaStreamCreateWithFlags and owned by `self`.
        if let Err(e) = check(unsafe { cudaStreamDestroy(self.raw) }, "cudaStreamDestroy") {
            tracing::error!("{e}");
        }
    }
}

/// A CUDA event, destroyed on drop.
pub struct Event {
    raw: RawEvent,
}

// SAFETY: CUDA events may be used from any host thread.
unsafe impl Send for Event {}
// SAFETY: recording and querying one event concurrently is allowed.
unsafe impl Sync for Event {}

impl Event {
    fn create(flags: c_uint) -> Result<Self, CudaError> {
        let mut raw: RawEvent = ptr::null_mut();
        // SAFETY: writes one handle.
        check(
            unsafe { cudaEventCreateWithFlags(&mut raw, flags) },
            "cudaEventCreateWithFlags",
        )?;
        Ok(Event { raw })
    }

    /// An event that records timestamps.
    pub fn timing() -> Result<Self, CudaError> {
        Self::create(0)
    }

    /// An event for ordering only (cheaper).
    pub fn fence() -> Result<Self, CudaError> {
        Self::create(EVENT_DISABLE_TIMING)
    }

    /// Records the event after the work queued so far on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<(), CudaError> {
        // SAFETY: both handles are live.
        check(unsafe { cudaEventRecord(self.raw, stream.raw) }, "cudaEventRecord")
    }

    /// Whether the recorded work has completed.
    pub fn is_complete(&self) -> Result<bool, CudaError> {
        // SAFETY: the handle is live.
        match unsafe { cudaEventQuery(self.raw) } {
            SUCCESS => Ok(true),
            NOT_READY => Ok(false),
            rc => check(rc, "cudaEventQuery").map(|_| false),
        }
    }

    /// Blocks until the recorded work has completed.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the handle is live.
        check(unsafe { cudaEventSynchronize(self.raw) }, "cudaEventSynchronize")
    }

    /// The `cudaEvent_t`, for CUDA code of this process to record or wait
    /// on; valid while `self` lives.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }

    /// GPU time between `start` and this event, both completed.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration, CudaError> {
        let mut ms = 0f32;
        // SAFETY: writes one float; both handles are live.
        check(
            unsafe { cudaEventElapsedTime(&mut ms, start.raw, self.raw) },
            "cudaEventElapsedTime",
        )?;
        Ok(Duration::from_secs_f64(f64::from(ms) / 1e3))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cudaEventCreateWithFlags and owned by `self`.
        if let Err(e) = check(unsafe { cudaEventDestroy(self.raw) }, "cudaEventDestroy") {
            tracing::error!("{e}");
        }
    }
}

/// CUDA events kept for reuse, of one kind (timing or fence) and one
/// device: creating an event takes a lock of the driver that every other
/// CUDA call of the process contends for, and a proof uses a dozen. An
/// event belongs to the device that was current when it was created, so a
/// pool is used with its device current. Events come back when their
/// [`PooledEvent`] is dropped (a few dozen are kept; more are destroyed).
pub struct EventPool {
    timing: bool,
    free: std::sync::Mutex<Vec<Event>>,
}

/// Events a pool keeps idle.
const EVENTS_KEPT: usize = 64;

impl EventPool {
    /// A pool of timing events (`timing`) or fence events.
    pub fn new(timing: bool) -> std::sync::Arc<EventPool> {
        std::sync::Arc::new(EventPool {
            timing,
            free: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// An idle event, or a new one (created on the current device).
    pub fn take(self: &std::sync::Arc<Self>) -> Result<PooledEvent, CudaError> {
        let reused = self.free.lock().recover().pop();
        let event = match reused {
            Some(e) => e,
            None if self.timing => Event::timing()?,
            None => Event::fence()?,
        };
        Ok(PooledEvent {
            event: Some(event),
            pool: std::sync::Arc::downgrade(self),
        })
    }

    /// Events idle in the pool.
    pub fn idle(&self) -> usize {
        self.free.lock().recover().len()
    }
}

/// An event on loan from an [`EventPool`] (or a standalone one), given back
/// on drop. Re-recording a reused event is fine: waits queued on it before
/// captured the work of its earlier recording.
pub struct PooledEvent {
    event: Option<Event>,
    pool: std::sync::Weak<EventPool>,
}

impl PooledEvent {
    /// An event of no pool: destroyed on drop.
    pub fn standalone(event: Event) -> PooledEvent {
        PooledEvent {
            event: Some(event),
            pool: std::sync::Weak::new(),
        }
    }
}

impl std::ops::Deref for PooledEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        self.event.as_ref().expect("present until dropped")
    }
}

impl Drop for PooledEvent {
    fn drop(&mut self) {
        if let (Some(e), Some(pool)) = (self.event.take(), self.pool.upgrade()) {
            let mut free = pool.free.lock().recover();
            if free.len() < EVENTS_KEPT {
                free.push(e);
            }
        }
    }
}

/// A [`UseFence`] that completes when a CUDA event does: record it on the
/// stream after the copy that reads a pool buffer, attach it to the buffer,
/// and the pool will not hand the buffer out again before the copy is done.
/// Several buffers may share one event (`From<Arc<PooledEvent>>`).
pub struct EventFence(std::sync::Arc<PooledEvent>);

impl EventFence {
    /// Waits for the fence.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.0.synchronize()
    }

    /// Records a fence after the work queued so far on `stream`.
    pub fn record(stream: &Stream) -> Result<Self, CudaError> {
        let e = Event::fence()?;
        e.record(stream)?;
        Ok(EventFence::from(PooledEvent::standalone(e)))
    }
}

impl From<Event> for EventFence {
    /// A fence on an event that is (or will be, before the buffer is
    /// dropped) recorded after the buffer's last use.
    fn from(e: Event) -> Self {
        EventFence::from(PooledEvent::standalone(e))
    }
}

impl From<PooledEvent> for EventFence {
    /// As `From<Event>`; the event goes back to its pool with the fence.
    fn from(e: PooledEvent) -> Self {
        EventFence(std::sync::Arc::new(e))
    }
}

impl From<std::sync::Arc<PooledEvent>> for EventFence {
    /// As `From<PooledEvent>`, for an event recorded after the last use of
    /// several buffers; it goes back to its pool with the last of them.
    fn from(e: std::sync::Arc<PooledEvent>) -> Self {
        EventFence(e)
    }
}

impl UseFence for EventFence {
    fn is_complete(&self) -> bool {
        // An error means the device is gone: nothing is reading any more.
        self.0.is_complete().unwrap_or(true)
    }

    fn wait(&self) {
        if let Err(e) = self.0.synchronize() {
            tracing::error!("waiting for a pool buffer's last use: {e}");
        }
    }
}

/// Heap memory page-locked with `cudaHostRegister` for as long as this value
/// lives.
pub struct HostRegistration<'a> {
    bytes: &'a mut [u8],
}

impl<'a> HostRegistration<'a> {
    /// Pins `bytes` in place.
    pub fn new(bytes: &'a mut [u8]) -> Result<Self, CudaError> {
        // SAFETY: the slice is valid for its length and stays borrowed (so
        // neither moved nor freed) until unregistered in drop.
        check(
            unsafe { cudaHostRegister(bytes.as_mut_ptr().cast(), bytes.len(), HOST_REGISTER_PORTABLE) },
            "cudaHostRegister",
        )?;
        Ok(HostRegistration { bytes })
    }

    /// The pinned bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes
    }
}

impl Drop for HostRegistration<'_> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` with this address.
        if let Err(e) = check(
            unsafe { cudaHostUnregister(self.bytes.as_mut_ptr().cast()) },
            "cudaHostUnregister",
        ) {
            tracing::error!("{e}");
        }
    }
}

/// Host memory that another owner keeps allocated, page-locked in place with
/// `cudaHostRegister` for as long as this value lives, so that copies from
/// it run at full speed without blocking the host. The memory is only read
/// through it.
pub struct PinnedInPlace {
    ptr: *mut c_void,
}

// SAFETY: the value only names memory to unregister; the driver's
// registration is process-wide, not tied to a thread.
unsafe impl Send for PinnedInPlace {}
// SAFETY: as for Send: shared use does nothing.
unsafe impl Sync for PinnedInPlace {}

impl PinnedInPlace {
    /// Pins the `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` is allocated and stays so, unmoved, until the value
    /// is dropped; no other registration covers any of its pages.
    pub unsafe fn new(ptr: *const u8, len: usize) -> Result<Self, CudaError> {
        let ptr = ptr.cast_mut().cast::<c_void>();
        let rc = on_pinning_device(|| {
            // SAFETY: the caller keeps the range allocated for as long as
            // it is registered; registering writes nothing to it.
            unsafe { cudaHostRegister(ptr, len, HOST_REGISTER_PORTABLE) }
        });
        check(rc, "cudaHostRegister")?;
        Ok(PinnedInPlace { ptr })
    }
}

impl Drop for PinnedInPlace {
    fn drop(&mut self) {
        let rc = on_pinning_device(|| {
            // SAFETY: registered in `new` with this address, once.
            unsafe { cudaHostUnregister(self.ptr) }
        });
        if let Err(e) = check(rc, "cudaHostUnregister") {
            tracing::error!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where no GPU is usable the allocator reports why instead of failing
    /// later, and the default allocator falls back to the heap.
    #[test]
    fn availability_is_reported() {
        match CudaPinnedAllocator::new() {
            Ok(a) => {
                let p = a.allocate(1 << 20).unwrap();
                // SAFETY: just allocated, 1 MiB, ours.
                unsafe {
                    p.as_ptr().write_bytes(7, 1 << 20);
                    a.deallocate(p, 1 << 20);
                }
            }
            Err(e) => {
                assert!(!e.name.is_empty() && e.code != 0, "{e:?}");
                pinprove_mem::test_util::skip_without_gpu("availability_is_reported (pinned memory)", e);
            }
        }
    }

    /// Pinning with a chosen device leaves the calling thread's own current
    /// device as it was, and an ordinal the machine lacks pins with the
    /// thread's device instead, leaving no error behind.
    #[test]
    fn pinning_with_a_chosen_device_keeps_the_threads_own() {
        let a = match CudaPinnedAllocator::new() {
            Ok(a) => a,
            Err(e) => {
                pinprove_mem::test_util::skip_without_gpu("pinning_with_a_chosen_device_keeps_the_threads_own", e);
                return;
            }
        };
        let n = device_count().unwrap();
        let current = || {
            let mut d: c_int = -1;
            // SAFETY: writes one int.
            check(unsafe { cudaGetDevice(&mut d) }, "cudaGetDevice").unwrap();
            d
        };
        set_device(n - 1).unwrap();
        for pinning in [Some(0), Some(n), None] {
            pin_with_device(pinning);
            assert_eq!(pinning_device(), pinning);
            let p = a.allocate(1 << 20).unwrap();
            // SAFETY: just allocated, 1 MiB, ours.
            unsafe { a.deallocate(p, 1 << 20) };
            assert_eq!(current(), (n - 1) as c_int, "pinning with {pinning:?}");
            // SAFETY: reads and clears the thread's last error.
            assert_eq!(unsafe { cudaGetLastError() }, SUCCESS, "pinning with {pinning:?}");
        }
    }

    /// Heap memory pinned in place is known to the runtime as pinned
    /// while the registration lives, and only then; its contents are
    /// untouched.
    #[test]
    fn memory_pinned_in_place_is_pinned_until_dropped() {
        if let Err(e) = CudaPinnedAllocator::new() {
            pinprove_mem::test_util::skip_without_gpu("memory_pinned_in_place_is_pinned_until_dropped", e);
            return;
        }
        // As large as the matrices pinned in place: a mapping of its own.
        let v: Vec<u64> = (0..(64u64 << 20) / 8).collect();
        let bytes = v.as_ptr().cast::<u8>();
        assert!(!is_pinned(bytes).unwrap());
        // SAFETY: `v` outlives the registration and is not moved; nothing
        // else registers its pages.
        let pin = unsafe { PinnedInPlace::new(bytes, v.len() * 8) }.unwrap();
        assert!(is_pinned(bytes).unwrap());
        assert!(is_pinned(v.last().unwrap() as *const u64 as *const u8).unwrap());
        drop(pin);
        assert!(!is_pinned(bytes).unwrap());
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    }

    #[test]
    fn events_are_reused() {
        if let Err(e) = CudaPinnedAllocator::new() {
            pinprove_mem::test_util::skip_without_gpu("events_are_reused", e);
            return;
        }
        let pool = EventPool::new(false);
        let first = pool.take().unwrap().as_raw();
        assert_eq!(pool.idle(), 1, "given back on drop");
        let again = pool.take().unwrap();
        assert_eq!(again.as_raw(), first, "the same event, reused");
        let stream = Stream::new().unwrap();
        again.record(&stream).unwrap();
        again.synchronize().unwrap();
        let fence = EventFence::from(again);
        assert!(fence.is_complete());
        drop(fence);
        assert_eq!(pool.idle(), 1, "a fence gives its event back too");
    }

    #[test]
    fn upload_roundtrip_when_a_gpu_is_present() {
        if let Err(e) = CudaPinnedAllocator::new() {
            pinprove_mem::test_util::skip_without_gpu("upload_roundtrip_when_a_gpu_is_present", e);
            return;
        }
        let stream = Stream::new().unwrap();
        let mut dev = DeviceBuffer::new(1 << 20).unwrap();
        let src: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
        stream.timed_upload(&mut dev, &src).unwrap();
        let mut back = vec![0u8; 1 << 20];
        stream.download(&mut back, &dev).unwrap();
        assert_eq!(src, back);
    }
}
