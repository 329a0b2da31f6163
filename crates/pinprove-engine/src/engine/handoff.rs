//! The hand-off from synthesis to one device's workers: bounded, so that a
//! device does not collect more synthesized memory than it can start on,
//! and by priority, so that an urgent partition is started next even when
//! background partitions are waiting already (and is never held back by the
//! bound).

use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
    /// Senders waiting for room now: entries on their way.
    arriving: usize,
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
                arriving: 0,
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
            q.arriving += 1;
            q = self.room.wait_timeout(q, patience).recover().0;
            q.arriving -= 1;
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

    /// Up to `n` entries that `matches` accepts, most urgent (then oldest)
    /// first: the partners of the entry just popped, started together with
    /// it. While a sender waits for room (an entry on its way in, let in by
    /// the pop just made), it waits up to `patience` for it; else it takes
    /// only what is here.
    pub(super) fn pop_matching(&self, n: usize, patience: Duration, matches: impl Fn(&T) -> bool) -> Vec<T> {
        let deadline = Instant::now() + patience;
        let mut out = Vec::new();
        let mut q = self.queue.lock().recover();
        while out.len() < n {
            let mut entries = std::mem::take(&mut q.entries).into_vec();
            let best = (0..entries.len())
                .filter(|&i| matches(&entries[i].item))
                .max_by(|&i, &j| entries[i].cmp(&entries[j]));
            let taken = best.map(|i| entries.swap_remove(i).item);
            q.entries = BinaryHeap::from(entries);
            if let Some(item) = taken {
                out.push(item);
                self.room.notify_one();
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || q.arriving == 0 {
                break;
            }
            q = self.ready.wait_timeout(q, left).recover().0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item(Priority, &'static str);
    impl Prioritized for Item {
        fn priority(&self) -> Priority {
            self.0
        }
    }

    fn names(v: &[Item]) -> Vec<&'static str> {
        v.iter().map(|i| i.1).collect()
    }

    #[test]
    fn partners_are_taken_by_priority_then_age_and_the_others_stay() {
        let h = Handoff::new(8);
        for (p, name) in [
            (Priority::Normal, "a1"),
            (Priority::Normal, "b1"),
            (Priority::Critical, "w"),
            (Priority::Normal, "a2"),
            (Priority::High, "a3"),
        ] {
            assert!(h.push(Item(p, name), Duration::ZERO).is_none());
        }
        let got = h.pop_matching(2, Duration::ZERO, |i| i.1.starts_with('a'));
        assert_eq!(names(&got), ["a3", "a1"]);
        let rest: Vec<Item> = std::iter::from_fn(|| h.pop(Duration::ZERO, false)).collect();
        assert_eq!(names(&rest), ["w", "b1", "a2"]);
    }

    #[test]
    fn a_partner_on_its_way_in_is_waited_for_and_none_is_waited_for_otherwise() {
        let h = Handoff::new(1);
        assert!(h.push(Item(Priority::Normal, "first"), Duration::ZERO).is_none());
        std::thread::scope(|s| {
            // Waits for room: the pop below lets it in.
            let sender = s.spawn(|| h.push(Item(Priority::Normal, "next"), Duration::from_secs(5)).is_none());
            while h.queue.lock().unwrap().arriving == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(h.pop(Duration::ZERO, false).map(|i| i.1), Some("first"));
            let got = h.pop_matching(1, Duration::from_secs(5), |_| true);
            assert_eq!(names(&got), ["next"]);
            assert!(sender.join().unwrap());
        });
        // Nobody on the way: no wait.
        let t = Instant::now();
        assert!(h.pop_matching(1, Duration::from_secs(5), |_| true).is_empty());
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
