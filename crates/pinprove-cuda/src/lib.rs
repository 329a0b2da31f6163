//! pinprove's GPU layer: the one crate that knows CUDA.
//!
//! Its `cuda` feature (which the binaries turn on) links the CUDA runtime
//! and builds the GPU backends; without it the crate still compiles and
//! says so at run time ([`BUILT_WITH_CUDA`], [`GpuError::NotBuilt`]), so no
//! crate above needs a feature of its own. Three levels, as in any binding:
//!
//! * [`runtime`] (`cuda`) — in three files of its own: `sys` (the C
//!   declarations), `result` (one thin wrapper per call, returning
//!   `Result`), and the safe owning types built on them, `memory` (device
//!   buffers, the pinned allocators, memory pinned in place) and `stream`
//!   (streams, events and their reuse pool, fences).
//! * the functions at this crate's root — what the crates above ask in every build:
//!   [`gpus`], [`device_count`], [`pinned_allocator`] (the pool's page-locked
//!   host memory, through the one runtime the process links, so buffers the
//!   pool pins are pinned for the backends too), the pinning device, and
//!   the GPU backends ([`native_backend`], [`supraseal_backend`]).
//! * [`Nvml`] — utilization and PCIe throughput sampling (loaded at run
//!   time: a missing driver is an ordinary error).
//! * [`NativeBackend`] — pinprove's own backend: h and the MSMs on the GPU;
//!   [`SuprasealBackend`] — the supraseal-c2 reference backend (`cuda`).
//! * [`msm_lab`] (`cuda`) — one MSM at a time through the native backend's
//!   paths, timed, for `pinprove-bench msm`.
//! * [`base_tables`] — precomputed copies of an MSM's fixed bases and the
//!   signed window digits that index them, with a CPU reference.
//! * [`fault`] — CUDA errors sorted by what they leave of the device (the
//!   backends' [`DeviceFault`](pinprove_groth16::DeviceFault)s); [`plan`] —
//!   what fits in a device's memory.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod base_tables;
mod config;
mod device_queue;
pub mod fault;
mod gpu;
mod info;
#[cfg(feature = "cuda")]
mod native;
pub mod nvml;
mod pinning;
pub mod plan;
mod row_chunks;
#[cfg(feature = "cuda")]
pub mod runtime;
mod slices;
mod split;
#[cfg(feature = "cuda")]
mod supraseal;

pub use config::{MsmKernelKind, NativeConfig, SrsPlacement, UnknownMsmKernel};
pub use gpu::{
    BUILT_WITH_CUDA, GpuBackend, GpuError, UploadRates, delay_msm_marks_for_tests, device_count, device_info, gpus,
    measure_uploads, native_backend, pinned_allocator, supraseal_backend,
};
pub use info::{DeviceInfo, Gpu, OLDEST_SUPPORTED};
#[cfg(feature = "cuda")]
pub use native::msm_lab;
#[cfg(feature = "cuda")]
pub use native::{NativeBackend, NativePhases, PlacementReport};
pub use nvml::Nvml;
#[cfg(feature = "cuda")]
pub use runtime::{CudaError, CudaPinnedAllocator, CudaRegisteredAllocator, EventFence};
#[cfg(feature = "cuda")]
pub use supraseal::SuprasealBackend;
