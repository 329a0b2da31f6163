//! `Inner`: the handles of the engine's parts (its scheduler, devices,
//! precompiler, warm sets, SRS registry, pool and budget), what every
//! thread of the engine holds, and the job bookkeeping they share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pinprove_groth16::CapacityHints;
use pinprove_mem::{MemoryBudget, PinnedPool};

use super::job_table::JobTable;
use super::slots::DeviceSlots;
use super::state::{Gauges, JobCtl};
use crate::EngineConfig;
use crate::job::{JobId, JobOutcome};
use crate::metrics::Metrics;
use crate::srs::SrsRegistry;
use crate::timeline::Timeline;

pub(crate) struct Inner {
    pub(super) config: EngineConfig,
    pub(super) budget: Arc<MemoryBudget>,
    pub(super) pool: Arc<PinnedPool>,
    pub(super) hints: Arc<CapacityHints>,
    pub(super) srs: Arc<SrsRegistry>,
    pub(super) devices: DeviceSlots,
    pub(super) gauges: Arc<Gauges>,
    /// What a partition is admitted with.
    pub(super) sizing: Arc<super::sizing::Sizing>,
    /// The synthesis queue and the scheduling policy over it.
    pub(super) scheduler: super::scheduler::Scheduler,
    /// Threads an urgent partition's synthesis runs on: on rayon's global
    /// threads it would wait behind a stream's witness computations (a
    /// WinningPoSt took 4.4 s to synthesize beside a PoRep stream, against
    /// 0.3 s on idle threads).
    pub(super) urgent_threads: rayon::ThreadPool,
    /// Warm and kept sets, and the heap partitions hold.
    pub(super) warm: super::warm_sets::WarmSets,
    /// Circuit types' recordings (pre-compiled synthesis).
    pub(super) precompiled: Arc<super::precompiler::Precompiler>,
    pub(super) jobs: JobTable,
    pub(super) metrics: Metrics,
    pub(super) timeline: Arc<Timeline>,
    pub(super) shutdown: AtomicBool,
    pub(super) started_at: Instant,
    /// The reasons each partition waiting for its admission was seen to
    /// wait for (by [`status`](Inner::status)), named on its admission's
    /// span in the timeline once it is admitted.
    pub(super) waits_seen: Mutex<HashMap<(JobId, usize), Vec<&'static str>>>,
}

impl Inner {
    pub(super) fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    pub(super) fn drop_queued(&self, id: JobId) {
        self.scheduler.drop_job(id);
    }

    /// Ends a job as failed (unless it already ended), dropping its queued
    /// partitions; the running ones are abandoned at their next step.
    pub(super) fn fail(&self, job: &JobCtl, what: String) {
        tracing::warn!(job = %job.id, "{what}");
        self.metrics.proofs_failed.fetch_add(1, Ordering::Relaxed);
        if job.finish(JobOutcome::Failed(what)) {
            self.drop_queued(job.id);
            self.jobs.ended(job.id);
        }
    }

    /// A panic caught while a partition of `job` was handled: the job fails
    /// with its message; everything the partition held was dropped by the
    /// unwinding.
    pub(super) fn panicked(&self, job: &JobCtl, what: String) {
        self.metrics.panics.fetch_add(1, Ordering::Relaxed);
        self.fail(job, what);
    }

    /// Cancels a job; returns whether any of its partitions had started.
    pub(super) fn cancel(&self, job: &JobCtl) -> bool {
        let was_running = job.lock().started;
        if job.finish(JobOutcome::Cancelled) {
            self.metrics.jobs_cancelled.fetch_add(1, Ordering::Relaxed);
            self.drop_queued(job.id);
            self.jobs.ended(job.id);
        }
        was_running
    }
}
