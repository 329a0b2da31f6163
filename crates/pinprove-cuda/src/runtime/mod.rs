//! CUDA pinned host memory, and the few runtime calls needed to move it to a
//! GPU and time that.
//!
//! Three levels, as in cudarc: `sys` declares the C interface, `result`
//! wraps each call (its error code as a [`CudaError`], its out-parameters
//! as values), and the owning types of `memory` and `stream` hold each
//! handle and release it on drop. Only `result` calls into `sys`.
//!
//! The runtime is linked statically (see the build script); the driver is
//! loaded by the runtime on first use.

mod memory;
mod result;
mod stream;
mod sys;
#[cfg(test)]
mod tests;

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

pub use crate::info::DeviceInfo;
pub use memory::{
    CudaPinnedAllocator, CudaRegisteredAllocator, DeviceBuffer, HostRegistration, PinnedInPlace, pinned_allocator,
};
pub use result::CudaError;
pub use stream::{Event, EventFence, EventPool, PooledEvent, Stream};

/// Whether the CUDA runtime knows `ptr` as page-locked host memory (so that
/// copies from it are direct DMA).
pub fn is_pinned(ptr: *const u8) -> Result<bool, CudaError> {
    result::is_host_memory(ptr.cast())
}

/// Number of usable CUDA devices; an error when no driver is usable.
pub fn device_count() -> Result<usize, CudaError> {
    Ok(result::device_count()?.max(0) as usize)
}

/// Makes `ordinal` the current device of the calling thread.
pub fn set_device(ordinal: usize) -> Result<(), CudaError> {
    result::set_device(c_int::try_from(ordinal).unwrap_or(c_int::MAX))
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

/// Pins with the first of `live` GPUs unless the one pinning now is one of
/// them (see [`HostAllocator::pin_with_one_of`](pinprove_mem::HostAllocator::pin_with_one_of)).
pub(crate) fn pin_with_one_of(live: &[usize]) {
    if let Some(gpu) = crate::pinning::pinning_gpu(pinning_device(), live) {
        tracing::info!(gpu, "host memory is pinned with GPU {gpu}");
        pin_with_device(Some(gpu));
    }
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
    let pinning = pinning as c_int;
    let current = result::get_device().ok();
    let switch = current.is_some_and(|c| c != pinning);
    // A failed switch (an ordinal this machine lacks) leaves the thread's
    // device current; `check` cleared its error, so that no later call
    // mistakes it for its own.
    let switched = switch && result::set_device(pinning).is_ok();
    let out = f();
    if let (true, Some(current)) = (switched, current) {
        // The thread's device a moment ago: nothing to report if it fails.
        let _ = result::set_device(current);
    }
    out
}

/// Reads what device `ordinal` is. Makes it the thread's current device.
pub fn device_info(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    set_device(ordinal)?;
    let dev = ordinal as c_int;
    let attr = |a| result::device_attribute(a, dev);
    let (free, total) = result::mem_get_info()?;
    Ok(DeviceInfo {
        ordinal,
        name: result::device_name(dev)?,
        pci_bus_id: result::pci_bus_id(dev)?,
        compute_capability: (
            attr(sys::DEV_ATTR_COMPUTE_CAPABILITY_MAJOR)?.max(0) as u32,
            attr(sys::DEV_ATTR_COMPUTE_CAPABILITY_MINOR)?.max(0) as u32,
        ),
        cooperative_launch: attr(sys::DEV_ATTR_COOPERATIVE_LAUNCH)? != 0,
        multiprocessors: attr(sys::DEV_ATTR_MULTIPROCESSOR_COUNT)? as u32,
        total_memory: total as u64,
        free_memory: free as u64,
        driver_version: result::driver_version()? as u32,
        runtime_version: result::runtime_version()? as u32,
    })
}
