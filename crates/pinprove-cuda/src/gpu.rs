//! The GPU layer as the crates above it see it, in every build.
//!
//! With the `cuda` feature these functions reach the CUDA runtime and build
//! the GPU backends; without it each answers that this build has no GPU
//! support. So the `cuda` feature is this crate's alone (the binaries turn it
//! on): the engine and the daemon ask here, at run time, what a build can do.

use std::sync::Arc;

use pinprove_groth16::{Backend, ProveError};
use pinprove_mem::{HostAllocator, PinMethod, PinnedPool};

use crate::config::NativeConfig;
use crate::info::{DeviceInfo, Gpu};

/// Whether this build has GPU support (the `cuda` feature).
pub const BUILT_WITH_CUDA: bool = cfg!(feature = "cuda");

/// Why the GPU layer could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// This build has no GPU support.
    #[error("this build has no GPU support (it was built without the `cuda` feature)")]
    NotBuilt,
    /// The CUDA runtime refused (no driver, no such device, ...).
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Cuda(#[from] crate::runtime::CudaError),
}

/// GPUs the CUDA runtime sees.
pub fn device_count() -> Result<usize, GpuError> {
    #[cfg(feature = "cuda")]
    return Ok(crate::runtime::device_count()?);
    #[cfg(not(feature = "cuda"))]
    Err(GpuError::NotBuilt)
}

/// What device `ordinal` is (it becomes the calling thread's current device).
pub fn device_info(ordinal: usize) -> Result<DeviceInfo, GpuError> {
    #[cfg(feature = "cuda")]
    return Ok(crate::runtime::device_info(ordinal)?);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        Err(GpuError::NotBuilt)
    }
}

/// Every usable GPU, with its driver version and PCIe link from NVML where
/// NVML is there. An error when no CUDA driver is usable at all (or the
/// build has no GPU support); an empty list when a driver has no devices.
pub fn gpus() -> Result<Vec<Gpu>, GpuError> {
    #[cfg(not(feature = "cuda"))]
    return Err(GpuError::NotBuilt);
    #[cfg(feature = "cuda")]
    {
        use crate::nvml::Nvml;
        let n = crate::runtime::device_count()?;
        let nvml = Nvml::load()
            .map_err(|e| tracing::debug!("{e}; PCIe link and driver version not reported"))
            .ok();
        let driver_version = nvml.as_ref().and_then(|n| n.driver_version().ok());
        (0..n)
            .map(|ordinal| {
                let device = crate::runtime::device_info(ordinal)?;
                let pcie = nvml
                    .as_ref()
                    .and_then(|n| n.device_by_pci_bus_id(&device.pci_bus_id).and_then(|d| n.link(d)).ok());
                Ok(Gpu {
                    device,
                    driver_version: driver_version.clone(),
                    pcie,
                })
            })
            .collect()
    }
}

/// An allocator of page-locked host memory made as `method` says, for the
/// pool: uploads from it run at the line rate.
pub fn pinned_allocator(method: PinMethod) -> Result<Arc<dyn HostAllocator>, GpuError> {
    #[cfg(feature = "cuda")]
    return Ok(crate::runtime::pinned_allocator(method)?);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = method;
        Err(GpuError::NotBuilt)
    }
}

/// Upload rates from this host to one GPU (see [`measure_uploads`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UploadRates {
    /// Bytes per upload.
    pub bytes: usize,
    /// From page-locked memory, what the pool hands out: GB/s.
    pub pinned_gbps: f64,
    /// From ordinary heap memory: GB/s.
    pub pageable_gbps: f64,
}

/// Times uploads of `bytes` to GPU `ordinal` from heap memory, then from the
/// same memory page-locked: the median of `reps` after a warm-up each. What
/// a host's PCIe link and pinning give, as an operator checks a new host.
pub fn measure_uploads(ordinal: usize, bytes: usize, reps: usize) -> Result<UploadRates, GpuError> {
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (ordinal, bytes, reps);
        Err(GpuError::NotBuilt)
    }
    #[cfg(feature = "cuda")]
    {
        use crate::runtime::{DeviceBuffer, HostRegistration, Stream, set_device};
        let bytes = bytes.max(1);
        set_device(ordinal)?;
        let stream = Stream::new()?;
        let mut dst = DeviceBuffer::new(bytes)?;
        let mut host = vec![0x5au8; bytes];
        let pageable = median_upload(&stream, &mut dst, &host, reps)?;
        let pinned = {
            let registered = HostRegistration::new(&mut host)?;
            median_upload(&stream, &mut dst, registered.as_slice(), reps)?
        };
        let gbps = |t: std::time::Duration| bytes as f64 / t.as_secs_f64().max(1e-9) / 1e9;
        Ok(UploadRates {
            bytes,
            pinned_gbps: gbps(pinned),
            pageable_gbps: gbps(pageable),
        })
    }
}

#[cfg(feature = "cuda")]
fn median_upload(
    stream: &crate::runtime::Stream,
    dst: &mut crate::runtime::DeviceBuffer,
    src: &[u8],
    reps: usize,
) -> Result<std::time::Duration, GpuError> {
    stream.timed_upload(dst, src)?;
    let mut times = (0..reps.max(1))
        .map(|_| stream.timed_upload(dst, src))
        .collect::<Result<Vec<_>, _>>()?;
    times.sort_unstable();
    Ok(times[times.len() / 2])
}

/// A GPU backend as built, with its concrete type for the callers that need
/// a backend's own calls (benchmarks: the native backend's phases). Without
/// GPU support there is none: this type has no values.
#[derive(Clone)]
pub enum GpuBackend {
    /// pinprove's own backend.
    #[cfg(feature = "cuda")]
    Native(Arc<crate::NativeBackend>),
    /// supraseal-c2, the reference.
    #[cfg(feature = "cuda")]
    Supraseal(Arc<crate::SuprasealBackend>),
}

impl GpuBackend {
    /// The backend behind the trait the engine uses.
    pub fn as_dyn(&self) -> Arc<dyn Backend> {
        match self {
            #[cfg(feature = "cuda")]
            GpuBackend::Native(b) => Arc::clone(b) as Arc<dyn Backend>,
            #[cfg(feature = "cuda")]
            GpuBackend::Supraseal(b) => Arc::clone(b) as Arc<dyn Backend>,
            #[cfg(not(feature = "cuda"))]
            _ => match *self {},
        }
    }

    /// Whether it is pinprove's own backend (else supraseal-c2).
    pub fn is_native(&self) -> bool {
        match self {
            #[cfg(feature = "cuda")]
            GpuBackend::Native(_) => true,
            #[cfg(feature = "cuda")]
            GpuBackend::Supraseal(_) => false,
            #[cfg(not(feature = "cuda"))]
            _ => match *self {},
        }
    }
}

/// pinprove's own GPU backend on `config.device`, drawing from `pool`.
pub fn native_backend(pool: Arc<PinnedPool>, config: NativeConfig) -> Result<GpuBackend, ProveError> {
    #[cfg(feature = "cuda")]
    return Ok(GpuBackend::Native(Arc::new(crate::NativeBackend::with_config(
        pool, config,
    )?)));
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (pool, config);
        Err(not_built("native"))
    }
}

/// supraseal-c2's backend (on the GPUs it finds itself).
pub fn supraseal_backend() -> Result<GpuBackend, ProveError> {
    #[cfg(feature = "cuda")]
    return Ok(GpuBackend::Supraseal(Arc::new(crate::SuprasealBackend::new()?)));
    #[cfg(not(feature = "cuda"))]
    Err(not_built("supraseal"))
}

#[cfg(not(feature = "cuda"))]
fn not_built(backend: &'static str) -> ProveError {
    ProveError::Backend {
        backend,
        message: GpuError::NotBuilt.to_string(),
    }
}

/// For tests of what reads a proof's GPU times: from now on (in this
/// process) the native backend queues `us` microseconds of device time
/// before the marks that close each group of MSMs, so that the marks
/// complete well after the results they follow, as they do at production
/// size when partitions share streamed bases. 0 turns it off. Without the
/// `cuda` feature it does nothing.
pub fn delay_msm_marks_for_tests(us: u32) {
    #[cfg(feature = "cuda")]
    crate::native::MARK_DELAY_US.store(us, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "cuda"))]
    let _ = us;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without GPU support every question has the same clear answer, and
    /// nothing panics; with it, the answers come from the runtime.
    #[test]
    fn a_build_says_what_it_can_do() {
        if BUILT_WITH_CUDA {
            return;
        }
        assert!(matches!(device_count(), Err(GpuError::NotBuilt)));
        assert!(matches!(gpus(), Err(GpuError::NotBuilt)));
        assert!(matches!(measure_uploads(0, 1 << 20, 1), Err(GpuError::NotBuilt)));
        assert!(matches!(
            pinned_allocator(PinMethod::default()),
            Err(GpuError::NotBuilt)
        ));
        let pool = PinnedPool::new(
            Arc::new(pinprove_mem::HeapAllocator::default()),
            pinprove_mem::MemoryBudget::new(1 << 20),
            pinprove_mem::PoolConfig::default(),
        );
        let e = native_backend(pool, NativeConfig::default())
            .err()
            .expect("no native backend without GPU support");
        assert!(e.to_string().contains("without the `cuda` feature"), "{e}");
    }
}
