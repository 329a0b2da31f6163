//! The types that travel through the engine: jobs' control blocks,
//! partitions on their way through the pipeline, and the counts of what is
//! in flight. `Inner`, which holds them, is in `inner.rs`, above every part.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use pinprove_groth16::{ProvingAssignment, Scalar, Srs, StartedProof};
use pinprove_mem::sync::Recover;

use super::guard::Counted;
use super::handoff::Prioritized;
use crate::Phase;
use crate::job::{JobId, JobOutcome, JobState, Partition, PartitionResult, PartitionTimings, Priority};

pub(super) struct JobInner {
    pub(super) results: Vec<Option<PartitionResult>>,
    pub(super) outcome: Option<JobOutcome>,
    pub(super) started: bool,
    pub(super) proved: usize,
    /// Tasks awaiting the outcome (see [`JobFuture`](crate::JobFuture)).
    wakers: Vec<Waker>,
}

/// A job's control block, shared by the workers handling its partitions.
pub(crate) struct JobCtl {
    pub(super) id: JobId,
    pub(super) circuit_id: String,
    pub(super) priority: Priority,
    pub(super) total: usize,
    pub(super) submitted: Instant,
    stopped: AtomicBool,
    inner: Mutex<JobInner>,
    pub(super) done: Condvar,
    /// Keeps the circuit type's recording until the job ends.
    in_use: Mutex<Option<super::precompiler::InUse>>,
    /// Keeps the circuit type's SRS from eviction for work of the job's
    /// rank or below until the job ends.
    wanted: Mutex<Option<crate::srs::Wanted>>,
}

impl JobCtl {
    pub(super) fn new(id: JobId, circuit_id: String, priority: Priority, total: usize) -> JobCtl {
        JobCtl {
            id,
            circuit_id,
            priority,
            total,
            submitted: Instant::now(),
            stopped: AtomicBool::new(false),
            inner: Mutex::new(JobInner {
                results: vec![None; total],
                outcome: None,
                started: false,
                proved: 0,
                wakers: Vec::new(),
            }),
            done: Condvar::new(),
            in_use: Mutex::new(None),
            wanted: Mutex::new(None),
        }
    }

    /// Holds `hold` (its circuit type's recording) until the job ends.
    pub(super) fn holding(self, hold: super::precompiler::InUse) -> JobCtl {
        *self.in_use.lock().recover() = Some(hold);
        self
    }

    /// Holds `wanted` (its circuit type's claim on its SRS) until the job
    /// ends.
    pub(super) fn wanting(self, wanted: crate::srs::Wanted) -> JobCtl {
        *self.wanted.lock().recover() = Some(wanted);
        self
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, JobInner> {
        self.inner.lock().recover()
    }

    /// Whether its partitions should be abandoned (cancelled or failed).
    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Ends the job with `outcome` unless it already ended; wakes everyone
    /// waiting. Returns whether this call ended it.
    pub(super) fn finish(&self, outcome: JobOutcome) -> bool {
        self.stopped.store(true, Ordering::Release);
        if self.lock().outcome.is_some() {
            return false;
        }
        // The recording and the SRS are let go before anyone learns that
        // the job ended: whoever waited for the end finds them evictable.
        self.in_use.lock().recover().take();
        self.wanted.lock().recover().take();
        let wakers = {
            let mut g = self.lock();
            if g.outcome.is_some() {
                return false;
            }
            g.outcome = Some(outcome);
            self.done.notify_all();
            std::mem::take(&mut g.wakers)
        };
        for w in wakers {
            w.wake();
        }
        true
    }

    pub(super) fn outcome(&self) -> Option<JobOutcome> {
        self.lock().outcome.clone()
    }

    /// The outcome once there is one; until then `cx`'s task is woken when
    /// it comes.
    pub(super) fn poll_outcome(&self, cx: &mut Context<'_>) -> Poll<JobOutcome> {
        let mut g = self.lock();
        if let Some(o) = &g.outcome {
            return Poll::Ready(o.clone());
        }
        if !g.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            g.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    pub(super) fn state(&self) -> JobState {
        let g = self.lock();
        match &g.outcome {
            Some(JobOutcome::Completed(_)) => JobState::Completed,
            Some(JobOutcome::Failed(_)) => JobState::Failed,
            Some(JobOutcome::Cancelled) => JobState::Cancelled,
            None if g.started => JobState::Running,
            None => JobState::Queued,
        }
    }
}

/// A partition waiting in the priority queue (its job's priority orders it).
pub(super) struct Pending {
    pub(super) job: Arc<JobCtl>,
    pub(super) index: usize,
    pub(super) partition: Box<dyn Partition>,
    pub(super) randomness: (Scalar, Scalar),
    pub(super) enqueued: Instant,
    /// The partition's tracing span, parent of one span per phase.
    pub(super) span: tracing::Span,
    /// The `queue_wait` span, closed when a synthesis worker takes it.
    pub(super) wait: tracing::Span,
    /// For Critical jobs, counted by the scheduler until the partition
    /// reaches its device (or is dropped).
    pub(super) critical: Option<Counted>,
}

/// Where a partition out of the queue is now.
#[derive(Clone, Debug)]
pub(super) struct Whereabouts {
    pub(super) circuit_id: String,
    pub(super) phase: Phase,
    pub(super) device: Option<usize>,
    pub(super) since: Instant,
}

/// What is in flight: partitions out of the queue per circuit type and per
/// device, and where each one is. Kept apart from [`Inner`] so the tickets
/// that partitions carry through channels hold no reference to the engine.
#[derive(Default)]
pub(super) struct Gauges {
    in_progress: Mutex<HashMap<String, usize>>,
    pub(super) quiet: Condvar,
    device: Vec<AtomicUsize>,
    partitions: Mutex<HashMap<(JobId, usize), Whereabouts>>,
}

impl Gauges {
    pub(super) fn new(devices: usize) -> Arc<Gauges> {
        Arc::new(Gauges {
            device: (0..devices).map(|_| AtomicUsize::new(0)).collect(),
            ..Gauges::default()
        })
    }

    /// Counts a partition of `job` taken out of the queue.
    pub(super) fn ticket(self: &Arc<Self>, job: &JobCtl, index: usize) -> Ticket {
        *self
            .in_progress
            .lock()
            .recover()
            .entry(job.circuit_id.clone())
            .or_insert(0) += 1;
        self.partitions.lock().recover().insert(
            (job.id, index),
            Whereabouts {
                circuit_id: job.circuit_id.clone(),
                phase: Phase::Admission,
                device: None,
                since: Instant::now(),
            },
        );
        Ticket {
            gauges: Arc::clone(self),
            key: (job.id, index),
            circuit_id: job.circuit_id.clone(),
            device: None,
        }
    }

    /// Whether every partition out of the queue waits for its admission:
    /// none holds memory that will come back.
    pub(super) fn only_admissions(&self) -> bool {
        self.partitions
            .lock()
            .recover()
            .values()
            .all(|w| w.phase == Phase::Admission)
    }

    /// Partitions routed to device `d` and not yet done.
    pub(super) fn device_load(&self, d: usize) -> usize {
        self.device[d].load(Ordering::Relaxed)
    }

    /// Partitions out of the queue, per circuit type (zeros left out).
    pub(super) fn in_progress(&self) -> Vec<(String, usize)> {
        let g = self.in_progress.lock().recover();
        g.iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    }

    /// Where every partition out of the queue is.
    pub(super) fn partitions(&self) -> Vec<((JobId, usize), Whereabouts)> {
        let g = self.partitions.lock().recover();
        let mut v: Vec<_> = g.iter().map(|(k, w)| (*k, w.clone())).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Waits until nothing is in progress (as `busy` also says of the
    /// queue), or `deadline` passes.
    pub(super) fn wait_quiet(&self, deadline: Instant, queue_empty: impl Fn() -> bool) -> bool {
        loop {
            // The queue first, without holding the counts: a synthesis
            // worker takes the queue's lock and then the counts'. A partition
            // it popped is counted before the queue's lock is let go, so an
            // empty queue seen here cannot hide one.
            let empty = queue_empty();
            let g = self.in_progress.lock().recover();
            if empty && !g.values().any(|n| *n > 0) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let _ = self
                .quiet
                .wait_timeout(g, (deadline - now).min(Duration::from_millis(50)));
        }
    }
}

/// A partition's place in the counts, from the moment a synthesis worker
/// takes it out of the queue until it leaves the pipeline — done, failed,
/// abandoned or dropped by a panic: whatever path it leaves by, dropping the
/// ticket gives its counts back.
pub(super) struct Ticket {
    gauges: Arc<Gauges>,
    key: (JobId, usize),
    circuit_id: String,
    device: Option<usize>,
}

impl Ticket {
    /// Counts the partition on device `d` (off the one it was on, if any).
    pub(super) fn route(&mut self, d: usize) {
        if let Some(old) = self.device.replace(d) {
            self.gauges.device[old].fetch_sub(1, Ordering::Relaxed);
        }
        self.gauges.device[d].fetch_add(1, Ordering::Relaxed);
        if let Some(w) = self.gauges.partitions.lock().recover().get_mut(&self.key) {
            w.device = Some(d);
        }
    }

    /// The device it is routed to.
    pub(super) fn device(&self) -> Option<usize> {
        self.device
    }

    /// Notes the phase the partition enters now.
    pub(super) fn enter(&self, phase: Phase) {
        if let Some(w) = self.gauges.partitions.lock().recover().get_mut(&self.key) {
            w.phase = phase;
            w.since = Instant::now();
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(d) = self.device {
            self.gauges.device[d].fetch_sub(1, Ordering::Relaxed);
        }
        self.gauges.partitions.lock().recover().remove(&self.key);
        let mut g = self.gauges.in_progress.lock().recover();
        if let Some(n) = g.get_mut(&self.circuit_id) {
            *n = n.saturating_sub(1);
        }
        self.gauges.quiet.notify_all();
    }
}

/// A partition on its way through the pipeline.
pub(super) struct InFlight {
    pub(super) job: Arc<JobCtl>,
    pub(super) index: usize,
    pub(super) srs: Arc<Srs>,
    pub(super) randomness: (Scalar, Scalar),
    pub(super) inputs: Option<Vec<Scalar>>,
    pub(super) timings: PartitionTimings,
    pub(super) ready_at: Instant,
    pub(super) span: tracing::Span,
    /// The span of the wait in progress (`handoff_wait`, `finish_wait`).
    pub(super) wait: tracing::Span,
    pub(super) ticket: Ticket,
    /// See [`Pending::critical`].
    pub(super) critical: Option<Counted>,
}

impl InFlight {
    /// "job-3/2": the partition in logs and timeline labels.
    pub(super) fn label(&self) -> String {
        format!("{}/{}", self.job.id, self.index)
    }
}

/// A synthesized partition, routed to a device.
pub(super) struct Synthesized {
    pub(super) flight: InFlight,
    pub(super) assignment: ProvingAssignment,
}

impl Prioritized for Synthesized {
    fn priority(&self) -> Priority {
        self.flight.job.priority
    }
}

/// Partitions whose first step ran together, waiting for their second.
pub(super) struct Started {
    /// In the order of the backend's job (and of its proofs).
    pub(super) flights: Vec<InFlight>,
    pub(super) started: Box<dyn StartedProof>,
    pub(super) device: usize,
}
