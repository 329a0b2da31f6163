//! What the engine reads of its GPUs' activity.
//!
//! The engine samples each device's GPU about every 100 ms into the
//! timeline and the device's status (utilization, memory, PCIe traffic:
//! the view that shows whether uploads keep a GPU fed). Where the readings
//! come from is the assembler's choice: NVML on a GPU host
//! (the `pinprove-stack` crate supplies it), a fake in tests, nothing on
//! the CPU.

use std::fmt::Debug;

use crate::GpuReading;

/// A source of GPU readings.
pub trait GpuTelemetry: Send + Sync + Debug {
    /// A reading of the GPU with CUDA ordinal `gpu` now; `None` when it
    /// cannot be read (the sample is skipped).
    fn read(&self, gpu: usize) -> Option<GpuReading>;
}
