//! Owners of memory the runtime hands out or page-locks: pinned host
//! allocators for the pool, device buffers, and host memory pinned in place.
//! Each frees or unregisters what it holds on drop, once.

use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use pinprove_mem::{Error, HostAllocator, MemoryKind, PinMethod, Result};

use super::result::{self, CudaError};
use super::{device_count, on_pinning_device};

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
        if device_count()? == 0 {
            return Err(CudaError::no_device("cudaGetDeviceCount"));
        }
        Ok(CudaPinnedAllocator { _private: () })
    }
}

fn alloc_error(len: usize, e: CudaError) -> Error {
    Error::CudaAlloc {
        bytes: len,
        message: e.to_string(),
    }
}

// SAFETY: cudaHostAlloc returns page-aligned memory of at least `len` bytes,
// usable from any thread, freed only by the matching cudaFreeHost.
unsafe impl HostAllocator for CudaPinnedAllocator {
    fn kind(&self) -> MemoryKind {
        MemoryKind::CudaPinned
    }

    fn pin_with_one_of(&self, live_gpus: &[usize]) {
        super::pin_with_one_of(live_gpus);
    }

    fn allocate(&self, len: usize) -> Result<NonNull<u8>> {
        on_pinning_device(|| result::host_alloc(len))
            .map(NonNull::cast)
            .map_err(|e| alloc_error(len, e))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, _len: usize) {
        // SAFETY: the caller passes a pointer from `allocate`, once.
        if let Err(e) = on_pinning_device(|| unsafe { result::free_host(ptr.as_ptr().cast()) }) {
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

    fn pin_with_one_of(&self, live_gpus: &[usize]) {
        super::pin_with_one_of(live_gpus);
    }

    fn allocate(&self, len: usize) -> Result<NonNull<u8>> {
        let p = self.heap.allocate(len)?;
        let pages = len.next_multiple_of(pinprove_mem::PAGE);
        // SAFETY: `p` maps `pages` bytes that nothing else refers to yet,
        // unregistered in `deallocate` before they are unmapped.
        let registered = on_pinning_device(|| unsafe { result::host_register(p.as_ptr().cast(), pages) });
        if let Err(e) = registered {
            // SAFETY: `p` came from this heap allocator with `len`.
            unsafe { self.heap.deallocate(p, len) };
            return Err(alloc_error(len, e));
        }
        Ok(p)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY: the caller passes a pointer this allocator registered.
        if let Err(e) = on_pinning_device(|| unsafe { result::host_unregister(ptr.as_ptr().cast()) }) {
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
pub fn pinned_allocator(method: PinMethod) -> Result<Arc<dyn HostAllocator>, CudaError> {
    Ok(match method {
        PinMethod::HostAlloc => Arc::new(CudaPinnedAllocator::new()?),
        PinMethod::Register => Arc::new(CudaRegisteredAllocator::new()?),
        PinMethod::RegisterWhole => Arc::new(CudaRegisteredAllocator::populating_whole()?),
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
        Ok(DeviceBuffer {
            ptr: result::malloc(len)?,
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
        // SAFETY: allocated by `malloc` and owned by this value; cudaFree
        // waits for the device, so no queued work still uses it.
        if let Err(e) = unsafe { result::free(self.ptr.as_ptr()) } {
            tracing::error!("{e}");
        }
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer").field("len", &self.len).finish()
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
        unsafe { result::host_register(bytes.as_mut_ptr().cast(), bytes.len())? };
        Ok(HostRegistration { bytes })
    }

    /// The pinned bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes
    }
}

impl Drop for HostRegistration<'_> {
    fn drop(&mut self) {
        // SAFETY: registered in `new` with this address, once.
        if let Err(e) = unsafe { result::host_unregister(self.bytes.as_mut_ptr().cast()) } {
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
        // SAFETY: the caller keeps the range allocated for as long as it is
        // registered; registering writes nothing to it.
        on_pinning_device(|| unsafe { result::host_register(ptr, len) })?;
        Ok(PinnedInPlace { ptr })
    }
}

impl Drop for PinnedInPlace {
    fn drop(&mut self) {
        // SAFETY: registered in `new` with this address, once.
        if let Err(e) = on_pinning_device(|| unsafe { result::host_unregister(self.ptr) }) {
            tracing::error!("{e}");
        }
    }
}
