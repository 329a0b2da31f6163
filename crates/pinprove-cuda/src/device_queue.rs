//! The order in which proofs queue their work on one GPU.
//!
//! Proofs queue their work one behind the other on a device's streams, so
//! the GPU always has the next work while the host collects the last
//! proof's. A GPU runs its queue in order, so what an urgent proof (a
//! WinningPoSt's) waits for is the work queued before it. The queue bounds
//! that: a background proof queues its work in pieces (a second or less of
//! GPU time each at 32 GiB), at most `depth` pieces are queued at once, and
//! between two pieces of a background proof an urgent proof takes its turn
//! and queues all of its work at once. It waits neither for room nor behind
//! background proofs waiting for room, only for the proof queueing at that
//! moment, and its device work runs behind at most `depth` pieces. A
//! background proof's pieces follow each other with no other background
//! proof's in between, so proofs finish in the order they started.
//!
//! Waiting for room happens outside the lock, so an urgent proof is never
//! held up by a background proof that waits for the device.
//!
//! Device memory is admitted the same way: before a proof queues work that
//! allocates device memory it reserves the bytes (its plan's peak for that
//! work, see `plan`), and each queued piece says how many of them it gives
//! back once its mark completes. A reservation waits, on the oldest marks,
//! until the queued work leaves room for it — an urgent proof's too: its
//! turn comes first, its memory only once there is some. So proofs queue
//! behind each other only as far as the GPU's memory allows, and an
//! allocation that fails is a bug of the plan, not a race.

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
    /// The completion marks of the pieces queued, oldest first, with the
    /// device bytes each gives back when it completes.
    queued: VecDeque<(Arc<C>, u64)>,
    /// Device bytes reserved: by queued pieces, and by the turn queueing
    /// now.
    held: u64,
    /// Device bytes proofs may reserve (u64::MAX: not bounded).
    room: u64,
    /// A proof is queueing its work now.
    issuing: bool,
    /// A background proof queued some of its pieces and will queue the
    /// rest: other background proofs wait for it.
    continuing: bool,
    /// Urgent proofs waiting for their turn: background proofs let them go
    /// first.
    urgent_waiting: usize,
}

/// One proof's turn to queue its work on the device; the next proof's turn
/// comes when it is dropped.
pub(crate) struct Turn<'a, C> {
    queue: &'a DeviceQueue<C>,
    /// A background proof's turn, which may queue its work in pieces.
    background: bool,
    /// Device bytes this proof reserved that no queued piece gives back
    /// yet.
    reserved: u64,
}

impl<C> DeviceQueue<C> {
    /// A queue of at most `depth` proofs (at least 1).
    pub(crate) fn new(depth: usize) -> DeviceQueue<C> {
        DeviceQueue {
            depth: depth.max(1),
            state: Mutex::new(State {
                queued: VecDeque::new(),
                held: 0,
                room: u64::MAX,
                issuing: false,
                continuing: false,
                urgent_waiting: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().recover()
    }

    /// Bounds the device bytes proofs may reserve (see [`Turn::reserve`]).
    pub(crate) fn set_room(&self, bytes: u64) {
        self.lock().room = bytes;
        self.changed.notify_all();
    }

    /// Device bytes reserved now (queued pieces and the turn queueing).
    #[cfg(test)]
    fn held(&self) -> u64 {
        self.lock().held
    }

    /// The oldest queued mark, taken off the queue once `wait` returned
    /// (its bytes given back); `None` when nothing is queued.
    fn wait_oldest<E>(&self, wait: &impl Fn(&C) -> Result<(), E>) -> Option<Result<(), E>> {
        let oldest = self.lock().queued.front().map(|(m, _)| Arc::clone(m))?;
        let waited = wait(&oldest);
        let mut s = self.lock();
        if s.queued.front().is_some_and(|(f, _)| Arc::ptr_eq(f, &oldest)) {
            let (_, bytes) = s.queued.pop_front().expect("checked above");
            s.held -= bytes;
        }
        drop(s);
        self.changed.notify_all();
        Some(waited)
    }

    /// Waits for a turn to queue work. A background proof waits for room
    /// (`wait` blocks until a queued piece's mark completes), for every
    /// urgent proof waiting and for a background proof between its pieces;
    /// an urgent one only for the proof queueing now. An error from `wait`
    /// is returned, the mark it came from dropped.
    pub(crate) fn enter<E>(&self, urgent: bool, wait: impl Fn(&C) -> Result<(), E>) -> Result<Turn<'_, C>, E> {
        if urgent {
            return Ok(self.exclusive());
        }
        self.background_turn(false, wait)
    }

    /// A background turn once no proof queues, no urgent one waits, there
    /// is room, and no other background proof is between its pieces
    /// (`continuing`: this proof is the one between its pieces).
    fn background_turn<E>(&self, continuing: bool, wait: impl Fn(&C) -> Result<(), E>) -> Result<Turn<'_, C>, E> {
        let mut s = self.lock();
        loop {
            if s.issuing || s.urgent_waiting > 0 || (s.continuing && !continuing) {
                s = self.changed.wait(s).recover();
                continue;
            }
            if s.queued.len() < self.depth {
                break;
            }
            drop(s);
            let waited = self.wait_oldest(&wait).unwrap_or(Ok(()));
            s = self.lock();
            if let Err(e) = waited {
                if continuing {
                    s.continuing = false;
                }
                self.changed.notify_all();
                return Err(e);
            }
        }
        s.issuing = true;
        s.continuing = false;
        Ok(Turn {
            queue: self,
            background: true,
            reserved: 0,
        })
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
        Turn {
            queue: self,
            background: false,
            reserved: 0,
        }
    }

    /// How many proofs are queued.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().queued.len()
    }
}

impl<'a, C> Turn<'a, C> {
    /// Reserves `bytes` of device memory for work this proof queues next,
    /// waiting (on the oldest queued marks, with `wait`) until the queued
    /// work leaves room. When nothing is queued it proceeds whatever the
    /// room: the plan made the proof fit an idle device.
    pub(crate) fn reserve<E>(&mut self, bytes: u64, wait: impl Fn(&C) -> Result<(), E>) -> Result<(), E> {
        loop {
            {
                let mut s = self.queue.lock();
                if s.held.saturating_add(bytes) <= s.room || s.queued.is_empty() {
                    s.held += bytes;
                    self.reserved += bytes;
                    return Ok(());
                }
            }
            if let Some(Err(e)) = self.queue.wait_oldest(&wait) {
                return Err(e);
            }
        }
    }

    /// Takes `bytes` (at most what the proof reserved) off its reservation
    /// to give back when `done` completes.
    fn release_at(&mut self, s: &mut State<C>, done: Arc<C>, bytes: u64) {
        let bytes = bytes.min(self.reserved);
        self.reserved -= bytes;
        s.queued.push_back((done, bytes));
    }

    /// The proof's work is queued; `done` completes after all of it, and
    /// gives back everything the proof still has reserved.
    pub(crate) fn queued(mut self, done: Arc<C>) {
        let queue = self.queue;
        let mut s = queue.lock();
        let all = self.reserved;
        self.release_at(&mut s, done, all);
    }

    /// A piece of the proof's work is queued (`done` completes after it
    /// and gives back `release` of the bytes reserved; the rest stays
    /// reserved for the pieces that follow) and more follows: a background
    /// proof lets urgent proofs queue theirs now and waits for room, ahead
    /// of every other background proof; an urgent proof (whose turn is
    /// exclusive anyway) keeps its turn. An error from `wait` ends the
    /// proof's turn.
    pub(crate) fn piece<E>(
        mut self,
        done: Arc<C>,
        release: u64,
        wait: impl Fn(&C) -> Result<(), E>,
    ) -> Result<Turn<'a, C>, E> {
        let queue = self.queue;
        if !self.background {
            // An urgent proof's pieces are one: what it reserved comes back
            // with its last mark.
            let _ = (done, release);
            return Ok(self);
        }
        let carried = {
            let mut s = queue.lock();
            self.release_at(&mut s, done, release);
            s.continuing = true;
            std::mem::take(&mut self.reserved)
        };
        // Ends this turn (issuing is cleared and everyone woken) with the
        // proof still marked as continuing.
        drop(self);
        let mut next = queue.background_turn(true, wait).inspect_err(|_| {
            let mut s = queue.lock();
            s.held -= carried;
        })?;
        next.reserved = carried;
        Ok(next)
    }
}

impl<C> Drop for Turn<'_, C> {
    fn drop(&mut self) {
        let mut s = self.queue.lock();
        // Reserved for work that was never queued (an error on the way).
        s.held -= self.reserved;
        s.issuing = false;
        drop(s);
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
        let urgent_mark = q.lock().queued.back().map(|(m, _)| Arc::clone(m)).unwrap();
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

    /// A thread queueing a background proof in pieces, one per mark (each
    /// completed by the test), saying "`name` `i`" as it queues piece i.
    fn pieces_in_thread(
        q: &Arc<DeviceQueue<Mark>>,
        tx: mpsc::Sender<String>,
        name: &'static str,
        marks: Vec<Arc<Mark>>,
    ) -> thread::JoinHandle<()> {
        let q = Arc::clone(q);
        thread::spawn(move || {
            let mut turn = q.enter(false, Mark::wait).unwrap();
            let last = marks.len() - 1;
            for (i, m) in marks.into_iter().enumerate() {
                tx.send(format!("{name} {i}")).unwrap();
                if i == last {
                    turn.queued(m);
                    return;
                }
                turn = turn.piece(m, 0, Mark::wait).unwrap();
            }
        })
    }

    #[test]
    fn an_urgent_proof_queues_between_two_pieces_of_a_background_one() {
        let q = Arc::new(DeviceQueue::<Mark>::new(1));
        let marks: Vec<Arc<Mark>> = (0..3).map(|_| Arc::new(Mark::default())).collect();
        let (tx, rx) = mpsc::channel();
        let bg = pieces_in_thread(&q, tx.clone(), "background", marks.clone());
        assert_eq!(rx.recv().unwrap(), "background 0");
        // The first piece is queued; the second waits for room.
        thread::sleep(Duration::from_millis(50));
        assert!(rx.try_recv().is_err());
        // An urgent proof queues now, behind the one piece only.
        let urgent = q.enter(true, Mark::wait).unwrap();
        assert_eq!(q.len(), 1, "one piece ahead of it, not the whole proof");
        let urgent_mark = Arc::new(Mark::default());
        urgent.queued(Arc::clone(&urgent_mark));
        marks[0].complete();
        urgent_mark.complete();
        assert_eq!(rx.recv().unwrap(), "background 1");
        marks[1].complete();
        assert_eq!(rx.recv().unwrap(), "background 2");
        bg.join().unwrap();
    }

    #[test]
    fn no_background_proof_queues_between_the_pieces_of_another() {
        let q = Arc::new(DeviceQueue::<Mark>::new(2));
        let (tx, rx) = mpsc::channel();
        let first: Vec<Arc<Mark>> = (0..3).map(|_| Arc::new(Mark::default())).collect();
        let a = pieces_in_thread(&q, tx.clone(), "a", first.clone());
        assert_eq!(rx.recv().unwrap(), "a 0");
        let second: Vec<Arc<Mark>> = (0..2).map(|_| Arc::new(Mark::default())).collect();
        let b = pieces_in_thread(&q, tx.clone(), "b", second.clone());
        for m in first.iter().chain(&second) {
            m.complete();
        }
        a.join().unwrap();
        b.join().unwrap();
        let order: Vec<String> = rx.try_iter().collect();
        assert_eq!(order, ["a 1", "a 2", "b 0", "b 1"]);
    }

    #[test]
    fn an_urgent_turn_is_kept_across_its_pieces() {
        let q = DeviceQueue::<Mark>::new(1);
        let turn = q.enter(true, Mark::wait).unwrap();
        let turn = turn.piece(Arc::new(Mark::default()), 0, Mark::wait).unwrap();
        assert_eq!(
            q.len(),
            0,
            "an urgent proof's pieces are one: nothing queued in between"
        );
        turn.queued(Arc::new(Mark::default()));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn a_failed_wait_between_pieces_ends_the_proof_and_frees_the_queue() {
        let q = DeviceQueue::<Mark>::new(1);
        let turn = q.enter(false, Mark::wait).unwrap();
        let err = turn
            .piece(Arc::new(Mark::default()), 0, |_: &Mark| Err::<(), _>("device lost"))
            .err();
        assert_eq!(err, Some("device lost"));
        let _next = q.enter(false, Mark::wait).unwrap();
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

    #[test]
    fn a_proof_waits_for_the_device_memory_queued_work_holds() {
        let q = Arc::new(DeviceQueue::<Mark>::new(8));
        q.set_room(10);
        let mut a = q.enter(false, Mark::wait).unwrap();
        a.reserve(8, Mark::wait).unwrap();
        let first = Arc::new(Mark::default());
        a.queued(Arc::clone(&first));
        assert_eq!(q.held(), 8);
        let entered = Arc::new(AtomicBool::new(false));
        let t = {
            let (q, entered) = (Arc::clone(&q), Arc::clone(&entered));
            thread::spawn(move || {
                // Urgent or not, memory is waited for.
                let mut b = q.enter(true, Mark::wait).unwrap();
                b.reserve(5, Mark::wait).unwrap();
                entered.store(true, Ordering::SeqCst);
                let m = Arc::new(Mark::default());
                b.queued(m);
            })
        };
        thread::sleep(Duration::from_millis(100));
        assert!(!entered.load(Ordering::SeqCst), "8 + 5 bytes do not fit in 10");
        first.complete();
        t.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(q.held(), 5, "the first proof's bytes came back with its mark");
    }

    #[test]
    fn a_piece_gives_back_part_of_a_reservation_and_the_rest_follows_the_proof() {
        let q = DeviceQueue::<Mark>::new(8);
        q.set_room(100);
        let mut t = q.enter(false, Mark::wait).unwrap();
        t.reserve(12, Mark::wait).unwrap();
        let h = Arc::new(Mark::default());
        let mut t = t.piece(Arc::clone(&h), 8, Mark::wait).unwrap();
        t.reserve(3, Mark::wait).unwrap();
        let last = Arc::new(Mark::default());
        t.queued(Arc::clone(&last));
        assert_eq!(q.held(), 15);
        h.complete();
        last.complete();
        // Waiting for room takes completed marks off the queue.
        let mut u = q.enter(false, Mark::wait).unwrap();
        u.reserve(100, Mark::wait).unwrap();
        assert_eq!(q.held(), 100);
        drop(u);
        assert_eq!(q.held(), 0, "a reservation no work took comes back when the turn ends");
    }

    #[test]
    fn a_reservation_larger_than_the_room_goes_ahead_on_an_idle_device() {
        let q = DeviceQueue::<Mark>::new(2);
        q.set_room(10);
        let mut t = q.enter(false, Mark::wait).unwrap();
        t.reserve(50, Mark::wait).unwrap();
        t.queued(Arc::new(Mark::default()));
        assert_eq!(q.held(), 50);
    }
}
