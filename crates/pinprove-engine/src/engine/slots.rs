//! The engine's devices: each one's slot (its backend, the hand-off to its
//! workers, its finalizers' channels, its readings), which device takes a
//! partition, and what a lost one leaves behind.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};
use pinprove_groth16::{Backend, LostDevice, ProveError, Srs};
use pinprove_mem::sync::Recover;
use pinprove_mem::{ErrorChain, PinnedPool};

use super::handoff::Handoff;
use super::state::{Gauges, Started, Synthesized};
use super::status::GpuReading;
use crate::job::JobId;
use crate::{Device, EngineError, MAX_THREADS};

pub(super) struct DeviceSlot {
    id: crate::DeviceId,
    backend: Arc<dyn Backend>,
    workers: usize,
    handoff: Handoff<Synthesized>,
    /// Time the device's workers spent in the backend's first step.
    busy_nanos: AtomicU64,
    current_job: Mutex<Option<JobId>>,
    /// The error that lost the device, as the engine saw it.
    lost: LostDevice,
    /// Partitions started on this device for its finalizers: background
    /// ones, and urgent ones (High and Critical), which their own finalizer
    /// takes at once instead of behind background partitions waiting for
    /// the device. Per device, so that no finish waits for another GPU.
    finalize: (Sender<Started>, Receiver<Started>),
    finalize_urgent: (Sender<Started>, Receiver<Started>),
    /// The latest NVML reading of its GPU.
    gpu_reading: Mutex<Option<GpuReading>>,
}

impl DeviceSlot {
    /// Which device it is.
    pub(super) fn id(&self) -> crate::DeviceId {
        self.id
    }

    /// The backend driving it.
    pub(super) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Its device workers (besides the one for urgent partitions).
    pub(super) fn workers(&self) -> usize {
        self.workers
    }

    /// The queue from synthesis to its workers.
    pub(super) fn handoff(&self) -> &Handoff<Synthesized> {
        &self.handoff
    }

    /// The partitions started on it of urgent (High and Critical) jobs, or
    /// of the others, on their way to a finalizer.
    pub(super) fn finalize_queue(&self, urgent: bool) -> &(Sender<Started>, Receiver<Started>) {
        if urgent { &self.finalize_urgent } else { &self.finalize }
    }

    /// Notes the job its workers started last (`None`: idle).
    pub(super) fn set_current_job(&self, job: Option<JobId>) {
        *self.current_job.lock().recover() = job;
    }

    /// The job its workers started last, if one is running.
    pub(super) fn current_job(&self) -> Option<JobId> {
        *self.current_job.lock().recover()
    }

    /// Counts `took` of a worker's time in the backend's first step.
    pub(super) fn note_busy(&self, took: Duration) {
        self.busy_nanos.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The share of `uptime` its workers spent in the backend's first step.
    pub(super) fn busy_fraction(&self, uptime: Duration) -> f64 {
        (self.busy_seconds() / uptime.as_secs_f64().max(1e-9)).min(1.0)
    }

    /// The time its workers spent in the backend's first step, divided by
    /// its workers: over a window, its growth is the window's busy share.
    pub(super) fn busy_seconds(&self) -> f64 {
        let busy = Duration::from_nanos(self.busy_nanos.load(Ordering::Relaxed)).as_secs_f64();
        busy / self.workers as f64
    }

    /// Keeps the latest reading of its GPU.
    pub(super) fn note_reading(&self, reading: GpuReading) {
        *self.gpu_reading.lock().recover() = Some(reading);
    }

    /// The latest reading of its GPU.
    pub(super) fn reading(&self) -> Option<GpuReading> {
        *self.gpu_reading.lock().recover()
    }

    /// Why the device can no longer be used, if it cannot.
    pub(super) fn lost(&self) -> Option<String> {
        self.lost.reason().or_else(|| self.backend.lost())
    }
}

/// Every device of the engine, in the order they were given, and the pool
/// whose allocator pins host memory with one of their GPUs.
pub(super) struct DeviceSlots {
    slots: Vec<DeviceSlot>,
    pool: Arc<PinnedPool>,
}

impl Deref for DeviceSlots {
    type Target = [DeviceSlot];
    fn deref(&self) -> &[DeviceSlot] {
        &self.slots
    }
}

impl DeviceSlots {
    /// A slot per device, each with `workers_per_device` workers (its
    /// backend's choice when `None`).
    pub(super) fn new(devices: Vec<Device>, workers_per_device: Option<usize>, pool: Arc<PinnedPool>) -> DeviceSlots {
        let slots = devices
            .into_iter()
            .map(|d| {
                let workers = workers_per_device
                    .unwrap_or_else(|| d.backend.capabilities().workers_per_device)
                    .clamp(1, MAX_THREADS);
                DeviceSlot {
                    id: d.id,
                    backend: d.backend,
                    workers,
                    // One partition ready per worker keeps it fed without
                    // holding more synthesized memory than that.
                    handoff: Handoff::new(workers),
                    busy_nanos: AtomicU64::new(0),
                    current_job: Mutex::new(None),
                    lost: LostDevice::default(),
                    finalize: unbounded(),
                    finalize_urgent: unbounded(),
                    gpu_reading: Mutex::new(None),
                }
            })
            .collect();
        DeviceSlots { slots, pool }
    }

    /// Among the devices not lost: one with a free worker that already
    /// holds the SRS; else one with a free worker; else the least loaded
    /// holder (by the partitions on their way to each, `gauges`). Moving an SRS
    /// to a device costs more than waiting a little for one that has it.
    pub(super) fn pick(&self, srs: &Srs, gauges: &Gauges) -> Result<usize, EngineError> {
        (0..self.len())
            .filter(|&i| self[i].lost().is_none())
            .min_by_key(|&i| {
                let d = &self[i];
                let load = gauges.device_load(i);
                (load >= d.workers, !d.backend.holds_srs(srs), load)
            })
            .ok_or_else(|| self.all_lost())
    }

    /// Ok while some device can take work.
    pub(super) fn usable(&self) -> Result<(), EngineError> {
        if self.iter().any(|d| d.lost().is_none()) {
            Ok(())
        } else {
            Err(self.all_lost())
        }
    }

    fn all_lost(&self) -> EngineError {
        let why: Vec<String> = self
            .iter()
            .map(|d| format!("{}: {}", d.id, d.lost().unwrap_or_default()))
            .collect();
        EngineError::DevicesLost(why.join("; "))
    }

    /// Notes device `d` lost by `err`, if it is (the engine stops routing
    /// work to it).
    pub(super) fn note_error(&self, d: usize, err: &ProveError) {
        let dev = &self[d];
        if dev.lost.record(err) {
            tracing::error!(device = %dev.id, "device lost, no more work goes to it: {}", ErrorChain(err));
            self.pin_with_a_live_gpu();
        }
    }

    /// Has host memory pinned with the GPU of a device not lost (see
    /// [`HostAllocator::pin_with_one_of`](pinprove_mem::HostAllocator::pin_with_one_of)),
    /// so that the other devices keep getting pinned buffers when one is
    /// lost.
    pub(super) fn pin_with_a_live_gpu(&self) {
        let live: Vec<usize> = self
            .iter()
            .filter(|d| d.lost().is_none())
            .filter_map(|d| d.backend.gpu())
            .collect();
        self.pool.pin_with_one_of(&live);
    }
}
