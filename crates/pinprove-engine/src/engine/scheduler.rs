//! Who is synthesized next and which device work waits: the engine's
//! scheduling policy, in one place, over the state it alone writes.
//!
//! - The queue holds partitions waiting for synthesis, higher priority
//!   first and first come first served within one.
//! - Synthesis workers stay free for urgent (High, Critical) partitions: a
//!   partition below High is taken only while fewer than
//!   `synthesis_workers` such partitions are being prepared (the engine
//!   runs [`URGENT_WORKERS`] more threads than that) and fewer than
//!   [`ADMITTING_LIMIT`] wait for their admission; the others stay queued,
//!   where an urgent partition overtakes them. An optional cap bounds
//!   syntheses below High at once; urgent ones go around it.
//! - While Critical partitions are on their way to a device, its workers
//!   take only urgent ones, for at most [`CRITICAL_HOLD`].
//!
//! What the engine's other parts decide is elsewhere: memory ranks in the
//! budget, parameters kept by rank in the SRS registry, a device's queue in
//! its backend (ARCHITECTURE.md, "Changing the scheduling").

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;

use super::guard::Counted;
use super::handoff::Queued;
use super::state::Pending;
use crate::job::{JobId, Priority};

/// Partitions below High priority waiting for admission at once.
const ADMITTING_LIMIT: usize = 2;

/// Synthesis threads beyond `synthesis_workers`, so that an urgent partition
/// finds one even when every other is busy with background work.
pub(super) const URGENT_WORKERS: usize = 2;

/// While Critical partitions are on their way to a device, its workers
/// take only urgent partitions: one queued on the GPU now would run before
/// them (a GPU runs its queue in order), and a Filecoin partition takes
/// about as long on the device as a whole WinningPoSt may. For at most this
/// long, so that a Critical job of large partitions does not stall the rest.
const CRITICAL_HOLD: Duration = Duration::from_secs(3);

pub(super) struct Scheduler {
    queue: Mutex<BinaryHeap<Queued<Pending>>>,
    /// Signalled when partitions are queued, when the counts below drop
    /// (under the queue lock, so that a worker checking them cannot miss
    /// it), and when the engine stops.
    changed: Condvar,
    next_seq: AtomicU64,
    /// Partitions below High taken and waiting for their admission.
    admitting: AtomicUsize,
    /// Partitions below High taken and not yet handed to a device.
    normal_busy: AtomicUsize,
    /// Critical partitions queued and not yet started on a device.
    critical_waiting: Arc<AtomicUsize>,
    synthesis_workers: usize,
    max_concurrent_syntheses: Option<usize>,
    syntheses: Mutex<usize>,
    synthesis_ended: Condvar,
    stopped: AtomicBool,
}

impl Scheduler {
    pub(super) fn new(synthesis_workers: usize, max_concurrent_syntheses: Option<usize>) -> Scheduler {
        Scheduler {
            queue: Mutex::new(BinaryHeap::new()),
            changed: Condvar::new(),
            next_seq: AtomicU64::new(0),
            admitting: AtomicUsize::new(0),
            normal_busy: AtomicUsize::new(0),
            critical_waiting: Arc::new(AtomicUsize::new(0)),
            synthesis_workers: synthesis_workers.max(1),
            max_concurrent_syntheses,
            syntheses: Mutex::new(0),
            synthesis_ended: Condvar::new(),
            stopped: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BinaryHeap<Queued<Pending>>> {
        self.queue.lock().recover()
    }

    /// What a partition of `priority` carries until it reaches its device:
    /// for Critical ones, the count that holds device workers back.
    pub(super) fn critical_mark(&self, priority: Priority) -> Option<Counted> {
        (priority == Priority::Critical).then(|| {
            self.critical_waiting.fetch_add(1, Ordering::AcqRel);
            Counted(Arc::clone(&self.critical_waiting))
        })
    }

    /// Queues a job's partitions, all of `priority`, in their order.
    pub(super) fn enqueue(&self, priority: Priority, partitions: impl IntoIterator<Item = Pending>) {
        {
            let mut q = self.lock();
            for item in partitions {
                q.push(Queued {
                    priority,
                    seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
                    item,
                });
            }
        }
        self.changed.notify_all();
    }

    /// The next partition the policy lets a synthesis worker take, waiting
    /// for one; `None` once stopped. `counted` runs under the queue's lock,
    /// so that the partition is never out of the queue without being
    /// counted in flight.
    pub(super) fn take<T>(&self, counted: impl Fn(&Pending) -> T) -> Option<(Pending, T, Taken<'_>)> {
        let mut q = self.lock();
        loop {
            if self.stopped.load(Ordering::Acquire) {
                return None;
            }
            let urgent = q.peek().is_some_and(|p| p.priority.is_urgent());
            let room = urgent
                || (self.admitting.load(Ordering::Acquire) < ADMITTING_LIMIT
                    && self.normal_busy.load(Ordering::Acquire) < self.synthesis_workers);
            if !q.is_empty() && room {
                let p = q.pop().expect("peeked").item;
                if !urgent {
                    self.admitting.fetch_add(1, Ordering::AcqRel);
                    self.normal_busy.fetch_add(1, Ordering::AcqRel);
                }
                let c = counted(&p);
                let taken = Taken {
                    scheduler: self,
                    admitting: !urgent,
                    busy: !urgent,
                };
                return Some((p, c, taken));
            }
            q = self.changed.wait(q).recover();
        }
    }

    /// A slot of the synthesis cap, waiting for one; urgent partitions go
    /// around it (`None`), as everyone does without a cap.
    pub(super) fn synthesis_slot(&self, priority: Priority) -> Option<SynthesisSlot<'_>> {
        if priority.is_urgent() {
            return None;
        }
        let cap = self.max_concurrent_syntheses?.max(1);
        let mut n = self.syntheses.lock().recover();
        while *n >= cap && !self.stopped.load(Ordering::Acquire) {
            n = self.synthesis_ended.wait(n).recover();
        }
        *n += 1;
        Some(SynthesisSlot(self))
    }

    /// Whether a device worker holds back partitions below High now;
    /// `holding` is since when it has (its own, kept between calls).
    pub(super) fn hold_background(&self, holding: &mut Option<Instant>) -> bool {
        if self.critical_waiting.load(Ordering::Acquire) > 0 {
            holding.get_or_insert_with(Instant::now).elapsed() < CRITICAL_HOLD
        } else {
            *holding = None;
            false
        }
    }

    /// Drops the queued partitions of job `id`.
    pub(super) fn drop_job(&self, id: JobId) {
        self.lock().retain(|p| p.item.job.id != id);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The circuit types of the queued partitions, one entry each.
    pub(super) fn queued_circuits(&self) -> Vec<String> {
        self.lock().iter().map(|p| p.item.job.circuit_id.clone()).collect()
    }

    /// Waits up to `timeout`, or until the queue changes or the engine
    /// stops: the pace of the engine's periodic threads.
    pub(super) fn wait(&self, timeout: Duration) {
        let q = self.lock();
        if !self.stopped.load(Ordering::Acquire) {
            drop(self.changed.wait_timeout(q, timeout).recover());
        }
    }

    /// Stops: the queue is emptied and every waiting thread wakes.
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.lock().clear();
        self.changed.notify_all();
        let _n = self.syntheses.lock().recover();
        self.synthesis_ended.notify_all();
    }

    fn give_back(&self, counter: &AtomicUsize) {
        let _q = self.lock();
        counter.fetch_sub(1, Ordering::AcqRel);
        self.changed.notify_all();
    }
}

/// A partition below High priority, counted as waiting for admission until
/// [`admitted`](Taken::admitted) and as being prepared until dropped (urgent
/// ones are not counted).
pub(super) struct Taken<'a> {
    scheduler: &'a Scheduler,
    admitting: bool,
    busy: bool,
}

impl Taken<'_> {
    pub(super) fn admitted(&mut self) {
        if std::mem::take(&mut self.admitting) {
            self.scheduler.give_back(&self.scheduler.admitting);
        }
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.admitted();
        if std::mem::take(&mut self.busy) {
            self.scheduler.give_back(&self.scheduler.normal_busy);
        }
    }
}

/// A slot of the synthesis cap, given back on drop.
pub(super) struct SynthesisSlot<'a>(&'a Scheduler);

impl Drop for SynthesisSlot<'_> {
    fn drop(&mut self) {
        let mut n = self.0.syntheses.lock().recover();
        *n = n.saturating_sub(1);
        self.0.synthesis_ended.notify_one();
    }
}
