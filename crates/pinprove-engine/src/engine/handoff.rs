//! The hand-off from synthesis to one device's workers: bounded, so that a
//! device does not collect more synthesized memory than it can start on,
//! and by priority, so that an urgent partition is started next even when
//! background partitions are waiting already (and is never held back by the
//! bound).

use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use pinprove_mem::sync::Recover;

use crate::job::Priority;

/// What a hand-off orders its entries by.
pub(super) trait Prioritized {
    fn priority(&self) -> Priority;
}

/// An entry of a priority queue (partitions waiting for synthesis, or for
/// a device): higher priority first; within a priority, earlier first.
pub(super) struct Queued<T> {
    pub(super) priority: Priority,
    /// Arrival order.
    pub(super) seq: u64,
    pub(super) item: T,
}

impl<T> PartialEq for Queued<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.priority, self.seq) == (other.priority, other.seq)
    }
}
impl<T> Eq for Queued<T> {}
impl<T> PartialOrd for Queued<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Queued<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.priority.cmp(&other.priority).then(other.seq.cmp(&self.seq))
    }
}

struct Queue<T> {
    entries: BinaryHeap<Queued<T>>,
    next_seq: u64,
}

pub(super) struct Handoff<T> {
    queue: Mutex<Queue<T>>,
    capacity: usize,
    /// Signalled when an entry is taken (room for a waiting sender).
    room: Condvar,
    /// Signalled when an entry arrives.
    ready: Condvar,
}

impl<T: Prioritized> Handoff<T> {
    /// A hand-off holding up to `capacity` partitions below High priority.
    pub(super) fn new(capacity: usize) -> Handoff<T> {
        Handoff {
            queue: Mutex::new(Queue {
                entries: BinaryHeap::new(),
                next_seq: 0,
            }),
            capacity: capacity.max(1),
            room: Condvar::new(),
            ready: Condvar::new(),
        }
    }

    /// Queues `item`. A partition below High priority waits for room, for
    /// at most `patience`; it is given back when there was none (so that the
    /// caller can check whether to go on waiting).
    pub(super) fn push(&self, item: T, patience: Duration) -> Option<T> {
        let priority = item.priority();
        let mut q = self.queue.lock().recover();
        if !priority.is_urgent() && q.entries.len() >= self.capacity {
            q = self.room.wait_timeout(q, patience).recover().0;
            if q.entries.len() >= self.capacity {
                return Some(item);
            }
        }
        self.enqueue(&mut q, item);
        None
    }

    /// Queues `item` without waiting for room (a partition moved from a lost
    /// device: it holds its memory already).
    pub(super) fn push_now(&self, item: T) {
        let mut q = self.queue.lock().recover();
        self.enqueue(&mut q, item);
    }

    fn enqueue(&self, q: &mut Queue<T>, item: T) {
        let seq = q.next_seq;
        q.next_seq += 1;
        q.entries.push(Queued {
            priority: item.priority(),
            seq,
            item,
        });
        // All: a worker that takes urgent partitions only must not be the
        // one woken for another.
        self.ready.notify_all();
    }

    /// The most urgent partition waiting, if one arrives within `timeout`;
    /// with `urgent_only`, only a High or Critical one.
    pub(super) fn pop(&self, timeout: Duration, urgent_only: bool) -> Option<T> {
        let mut q = self.queue.lock().recover();
        let eligible = |q: &Queue<T>| q.entries.peek().is_some_and(|e| !urgent_only || e.priority.is_urgent());
        if !eligible(&q) {
            q = self.ready.wait_timeout(q, timeout).recover().0;
            if !eligible(&q) {
                return None;
            }
        }
        let e = q.entries.pop()?;
        self.room.notify_one();
        Some(e.item)
    }
}
