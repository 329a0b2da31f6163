//! The order in which proofs queue their work on one GPU.
//!
//! Proofs queue whole, one behind the other, on a device's streams, so the
//! GPU always has the next proof's work while the host collects the last
//! one's. The queue bounds how many are queued at once (`depth`: each holds
//! device memory and host buffers until it has run) and lets an urgent
//! proof (a WinningPoSt's) go next: it waits neither for room nor behind
//! background proofs waiting for room, only for the proof issuing its work
//! at that moment. Its device work then runs behind the proofs already
//! queued (at most `depth`), not behind every proof that was waiting.
//!
//! Waiting for room happens outside the lock, so an urgent proof is never
//! held up by a background proof that waits for the device.

// Without `cuda` only the tests use this module.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use pinprove_mem::sync::Recover;

/// The proofs queued on one device, and whose turn it is to queue.
pub(crate) struct DeviceQueue<C> {
    depth: usize,
    state: Mutex<State<C>>,
    changed: Condvar,
}

struct State<C> {
    /// The completion marks of the proofs queued, oldest first.
    queued: VecDeque<Arc<C>>,
    /// A proof is queueing its work now.
    issuing: bool,
    /// Urgent proofs waiting for their turn: background proofs let them go
    /// first.
    urgent_waiting: usize,
}

/// One proof's turn to queue its work on the device; the next proof's turn
/// comes when it is dropped.
pub(crate) struct Turn<'a, C> {
    queue: &'a DeviceQueue<C>,
}

impl<C> DeviceQueue<C> {
    /// A queue of at most `depth` proofs (at least 1).
    pub(crate) fn new(depth: usize) -> DeviceQueue<C> {
        DeviceQueue {
            depth: depth.max(1),
            state: Mutex::new(State {
                queued: VecDeque::new(),
                issuing: false,
                urgent_waiting: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().recover()
    }

    /// Waits for a turn to queue work. A background proof waits for room
    /// (`wait` blocks until a queued proof's mark completes) and for every
    /// urgent proof waiting; an urgent one only for the proof queueing now.
    /// An error from `wait` is returned, the mark it came from dropped.
    pub(crate) fn enter<E>(&self, urgent: bool, wait: impl Fn(&C) -> Result<(), E>) -> Result<Turn<'_, C>, E> {
        if urgent {
            return Ok(self.exclusive());
        }
        let mut s = self.lock();
        loop {
            if s.issuing || s.urgent_waiting > 0 {
                s = self.changed.wait(s).recover();
                continue;
            }
            let Some(oldest) = s.queued.front().filter(|_| s.queued.len() >= self.depth).cloned() else {
                break;
            };
            drop(s);
            let waited = wait(&oldest);
            s = self.lock();
            if s.queued.front().is_some_and(|f| Arc::ptr_eq(f, &oldest)) {
                s.queued.pop_front();
            }
            if let Err(e) = waited {
                self.changed.notify_all();
                return Err(e);
            }
        }
        s.issuing = true;
        Ok(Turn { queue: self })
    }

    /// A turn as soon as no other proof is queueing its work, ahead of
    /// background proofs waiting (an urgent proof's turn, and the one to
    /// upload bases with).
    pub(crate) fn exclusive(&self) -> Turn<'_, C> {
        let mut s = self.lock();
        s.urgent_waiting += 1;
        while s.issuing {
            s = self.changed.wait(s).recover();
        }
        s.urgent_waiting -= 1;
        s.issuing = true;
        Turn { queue: self }
    }

    /// How many proofs are queued.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().queued.len()
    }
}

impl<C> Turn<'_, C> {
    /// The proof's work is queued; `done` completes after all of it.
    pub(crate) fn queued(self, done: Arc<C>) {
        self.queue.lock().queued.push_back(done);
    }
}

impl<C> Drop for Turn<'_, C> {
    fn drop(&mut self) {
        self.queue.lock().issuing = false;
        self.queue.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    use super::*;

    /// A completion mark the test completes by hand.
    #[derive(Default)]
    struct Mark {
        done: Mutex<bool>,
        cv: Condvar,
    }

    impl Mark {
        fn complete(&self) {
            *self.done.lock().unwrap() = true;
            self.cv.notify_all();
        }

        fn wait(&self) -> Result<(), String> {
            let mut d = self.done.lock().unwrap();
            while !*d {
                d = self.cv.wait(d).unwrap();
            }
            Ok(())
        }
    }

    fn queue_one(q: &DeviceQueue<Mark>) -> Arc<Mark> {
        let m = Arc::new(Mark::default());
        q.enter(false, Mark::wait).unwrap().queued(Arc::clone(&m));
        m
    }

    #[test]
    fn a_background_proof_waits_for_room() {
        let q = Arc::new(DeviceQueue::<Mark>::new(1));
        let first = queue_one(&q);
        let entered = Arc::new(AtomicBool::new(false));
        let t = {
            let (q, entered) = (Arc::clone(&q), Arc::clone(&entered));
            thread::spawn(move || {
                let _turn = q.enter(false, Mark::wait).unwrap();
                entered.store(true, Ordering::SeqCst);
            })
        };
        thread::sleep(Duration::from_millis(100));
        assert!(!entered.load(Ordering::SeqCst), "no room until the first proof ran");
        first.complete();
        t.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(q.len(), 0, "the completed proof left the queue");
    }

    #[test]
    fn an_urgent_proof_goes_ahead_of_background_proofs_waiting_for_room() {
        let q = Arc::new(DeviceQueue::<Mark>::new(1));
        let first = queue_one(&q);
        let (order_tx, order_rx) = mpsc::channel();
        // Two background proofs wait for room...
        let background: Vec<_> = (0..2)
            .map(|i| {
                let (q, tx) = (Arc::clone(&q), order_tx.clone());
                thread::spawn(move || {
                    let turn = q.enter(false, Mark::wait).unwrap();
                    tx.send(format!("background {i}")).unwrap();
                    let m = Arc::new(Mark::default());
                    m.complete();
                    turn.queued(m);
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(100));
        // ...and an urgent one gets its turn at once, the queue still full.
        let urgent = q.enter(true, Mark::wait).unwrap();
        order_tx.send("urgent".to_string()).unwrap();
        assert_eq!(q.len(), 1, "the urgent proof did not wait for the queued one");
        urgent.queued(Arc::new(Mark::default()));
        assert_eq!(order_rx.try_recv().unwrap(), "urgent");
        // The background proofs wait for the queued proofs to run, the
        // urgent one's included.
        thread::sleep(Duration::from_millis(50));
        assert!(order_rx.try_recv().is_err());
        first.complete();
        let urgent_mark = q.lock().queued.back().cloned().unwrap();
        urgent_mark.complete();
        for t in background {
            t.join().unwrap();
        }
        let rest: Vec<String> = order_rx.try_iter().collect();
        assert_eq!(rest.len(), 2);
        assert!(rest.iter().all(|s| s.starts_with("background")));
    }

    #[test]
    fn an_urgent_proof_waits_for_the_proof_queueing_now() {
        let q = Arc::new(DeviceQueue::<Mark>::new(4));
        let turn = q.enter(false, Mark::wait).unwrap();
        let entered = Arc::new(AtomicBool::new(false));
        let t = {
            let (q, entered) = (Arc::clone(&q), Arc::clone(&entered));
            thread::spawn(move || {
                let _turn = q.enter(true, Mark::wait).unwrap();
                entered.store(true, Ordering::SeqCst);
            })
        };
        thread::sleep(Duration::from_millis(100));
        assert!(!entered.load(Ordering::SeqCst), "one proof queues its work at a time");
        drop(turn);
        t.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
    }

    #[test]
    fn background_proofs_wait_while_an_urgent_one_waits_for_its_turn() {
        let q = Arc::new(DeviceQueue::<Mark>::new(4));
        let turn = q.enter(false, Mark::wait).unwrap();
        let (tx, rx) = mpsc::channel();
        let urgent = {
            let (q, tx) = (Arc::clone(&q), tx.clone());
            thread::spawn(move || {
                let _t = q.enter(true, Mark::wait).unwrap();
                tx.send("urgent").unwrap();
            })
        };
        thread::sleep(Duration::from_millis(50));
        let background = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                let _t = q.enter(false, Mark::wait).unwrap();
                tx.send("background").unwrap();
            })
        };
        thread::sleep(Duration::from_millis(50));
        drop(turn);
        urgent.join().unwrap();
        background.join().unwrap();
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["urgent", "background"]);
    }

    #[test]
    fn a_failed_wait_is_returned_and_the_queue_serves_on() {
        let q = DeviceQueue::<Mark>::new(1);
        let _first = queue_one(&q);
        let err = q.enter(false, |_: &Mark| Err::<(), _>("device lost")).err();
        assert_eq!(err, Some("device lost"));
        assert_eq!(q.len(), 0, "the mark that failed left the queue");
        let _turn = q.enter(false, Mark::wait).unwrap();
    }
}
