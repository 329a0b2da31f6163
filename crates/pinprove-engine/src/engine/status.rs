//! What the engine reports of itself to status pages, metrics and tools
//! (read from its state in `snapshot.rs`).

use std::time::Duration;

use pinprove_groth16::ResidentSrs;
use serde::Serialize;

use super::precompiler::CircuitSynthesis;
use crate::Phase;
use crate::job::JobId;
use crate::srs::SrsInfo;

/// Partitions waiting and in flight for one circuit type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueStatus {
    /// The circuit type.
    pub circuit_id: String,
    /// Partitions waiting for a synthesis worker.
    pub pending: usize,
    /// Partitions being synthesized or proved.
    pub in_progress: usize,
}

/// A device's state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceStatus {
    /// Which device ("cpu", "gpu0" in the JSON, under its old key).
    #[serde(rename = "name")]
    pub id: crate::DeviceId,
    /// The backend.
    pub backend: &'static str,
    /// Workers.
    pub workers: usize,
    /// Partitions waiting for or inside the device's workers and finalizer.
    pub in_flight: usize,
    /// Fraction of the engine's lifetime the device's workers spent in the
    /// backend's first step (the device-bound part).
    pub busy_fraction: f64,
    /// The time its workers spent in that step since the engine started,
    /// divided by its workers (`busy_fraction` over any window is this
    /// value's growth over the window's length).
    pub busy_seconds: f64,
    /// The job the device works on now, if any.
    pub current_job: Option<JobId>,
    /// SRS copies the backend keeps itself (bases in device memory, …).
    pub resident_srs: Vec<ResidentSrs>,
    /// Why the device takes no more work, once it was lost (a faulted
    /// kernel, a device gone from the bus): the engine routes around it, and
    /// a new process is needed to use it again.
    pub lost: Option<String>,
    /// The latest NVML reading of its GPU (GPU builds, with NVML, for
    /// backends on one GPU of their own).
    pub gpu: Option<GpuReading>,
}

/// The latest NVML reading of one device's GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GpuReading {
    /// Percent of the last sampling period in which a kernel ran.
    pub utilization_percent: f64,
    /// Device memory in use (by any process).
    pub memory_used_bytes: u64,
    /// Device memory in all.
    pub memory_total_bytes: u64,
    /// PCIe host-to-device throughput.
    pub pcie_rx_bytes_per_s: f64,
    /// PCIe device-to-host throughput.
    pub pcie_tx_bytes_per_s: f64,
}

/// A partition out of the queue, and where it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionStatus {
    /// Its job.
    pub job: JobId,
    /// Its index in the job.
    pub index: usize,
    /// The job's circuit type.
    pub circuit_id: String,
    /// The phase it is in.
    pub phase: Phase,
    /// The device it was routed to, once synthesized.
    pub device: Option<crate::DeviceId>,
    /// Time in that phase so far.
    pub in_phase: Duration,
    /// While it waits for its admission, why, as the planner reads the
    /// engine's state (see [`planner::WaitReason`](crate::planner::WaitReason)).
    pub waiting_for: Option<crate::planner::WaitReason>,
}

/// A snapshot of the engine.
#[derive(Clone, Debug, Serialize)]
pub struct EngineStatus {
    /// Per circuit type.
    pub queues: Vec<QueueStatus>,
    /// Per device.
    pub devices: Vec<DeviceStatus>,
    /// Every partition out of the queue.
    pub partitions: Vec<PartitionStatus>,
    /// Registered and loaded parameters.
    pub srs: Vec<SrsInfo>,
    /// How each circuit type seen so far is synthesized (classic or from a
    /// recording, see [`EngineConfig::precompiled`](crate::EngineConfig::precompiled)).
    pub synthesis: Vec<CircuitSynthesis>,
    /// Circuit recordings made since start.
    pub recordings_made: u64,
    /// Circuit recordings loaded from the hints directory since start.
    pub recordings_loaded: u64,
    /// Partitions that could not be synthesized from their recording and
    /// were synthesized classically instead, since start.
    pub precompiled_fallbacks: u64,
    /// Budget total and use.
    pub budget_total: u64,
    /// Bytes reserved now.
    pub budget_used: u64,
    /// Pool bytes idle.
    pub pool_idle: u64,
    /// Pool bytes the warm sets ask for (buffers prepared ahead of demand
    /// for preloaded circuits).
    pub pool_warm: u64,
    /// Of those, bytes held now.
    pub pool_warm_ready: u64,
    /// Of the warm sets' bytes, those kept under pressure too (urgent
    /// circuits' buffers, device lanes' preparation buffers): out of reach
    /// of other work.
    pub pool_kept: u64,
    /// Pool bytes checked out.
    pub pool_checked_out: u64,
    /// Pool buffers allocated since start (each pins fresh memory: seconds
    /// per few GiB, during which a GPU can starve; a steady stream should
    /// allocate none).
    pub pool_fresh_allocations: u64,
    /// Time spent in those allocations since start.
    pub pool_alloc_time: Duration,
    /// Buffers given back while a partition waited for memory and handed
    /// to it, instead of being freed and pinned again, since start.
    pub pool_handed_over: u64,
    /// Proofs completed since start.
    pub proofs_completed: u64,
    /// Proofs failed since start.
    pub proofs_failed: u64,
    /// Since start.
    pub uptime: Duration,
}

impl EngineStatus {
    /// Partitions the devices could take once admitted: queued for a
    /// synthesis worker, or waiting for their admission or their
    /// parameters. Work waiting while the devices idle shows here.
    pub fn partitions_waiting(&self) -> usize {
        let queued: usize = self.queues.iter().map(|q| q.pending).sum();
        let held = self
            .partitions
            .iter()
            .filter(|p| matches!(p.phase, crate::Phase::Admission | crate::Phase::SrsLoad))
            .count();
        queued + held
    }
}
