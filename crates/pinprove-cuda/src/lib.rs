//! pinprove's GPU layer (feature `cuda`; without it only the pure-Rust
//! parts compile: the device-memory plan, fault classes, the device queue
//! and the scalar split).
//!
//! * [`pinned_allocator`] — the pool's CUDA pinned host memory, allocated
//!   through the one CUDA runtime the whole process links (the static
//!   runtime, linked once: the pool's allocator and the GPU backends share
//!   it, so buffers the pool pins are pinned for the backends too).
//! * [`gpus`] — device discovery: name, memory, PCIe link, driver.
//! * [`Nvml`] — utilization and PCIe throughput sampling.
//! * [`SuprasealBackend`] — the supraseal-c2 reference backend.
//! * [`NativeBackend`] — pinprove's own backend: h and the MSMs on the GPU.
//! * [`fault`] — CUDA errors sorted by what they leave of the device (the
//!   backends' [`DeviceFault`](pinprove_groth16::DeviceFault)s).

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "cuda")]
mod device;
mod device_queue;
pub mod fault;
#[cfg(feature = "cuda")]
mod native;
#[cfg(feature = "cuda")]
pub mod nvml;
pub mod plan;
mod slices;
mod split;
#[cfg(feature = "cuda")]
mod supraseal;

#[cfg(feature = "cuda")]
pub use device::{Gpu, gpus};
#[cfg(feature = "cuda")]
pub use native::{NativeBackend, NativeConfig, NativePhases, PlacementReport, SrsPlacement};
#[cfg(feature = "cuda")]
pub use nvml::Nvml;
#[cfg(feature = "cuda")]
pub use pinprove_mem::cuda::{CudaError, CudaPinnedAllocator, CudaRegisteredAllocator, EventFence, pinned_allocator};
#[cfg(feature = "cuda")]
pub use supraseal::SuprasealBackend;
