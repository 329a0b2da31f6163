//! Admission through the pool: idle buffers set aside for admitted work, and
//! buffers handed to work waiting for memory instead of freed and pinned
//! again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::{Flag, spawn_on_device_lane};
use pinprove_mem::{HeapAllocator, MIB, MemoryBudget, PinnedPool, PoolConfig, Rank};

const M: u64 = MIB as u64;

fn pool(total: u64) -> (Arc<MemoryBudget>, Arc<PinnedPool>) {
    let budget = MemoryBudget::new(total);
    let config = PoolConfig {
        idle_timeout: None,
        ..PoolConfig::default()
    };
    let pool = PinnedPool::new(Arc::new(HeapAllocator::new(false)), Arc::clone(&budget), config);
    (budget, pool)
}

fn wait_for_waiter(budget: &MemoryBudget) {
    while !budget.has_waiters() {
        thread::sleep(Duration::from_millis(2));
    }
}

/// Until an admission waits in the pool too, not only in the budget: the
/// pool hands returned buffers only to admissions it knows of (between the
/// two, the budget's eviction frees them for the request).
fn wait_for_admission(pool: &PinnedPool) {
    while pool.stats().waiting_admissions == 0 {
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn idle_buffers_are_set_aside_and_not_asked_of_the_budget() {
    let (budget, pool) = pool(64 * M);
    drop(pool.try_checkout(16 * MIB).unwrap());
    assert_eq!(budget.used(), 16 * M);

    let mut funds = pool.admit_blocking(&[16 * MIB, 4 * MIB], 21 * M, Rank::NORMAL).unwrap();
    // The idle 16 MiB buffer covers itself: the budget gave 4 MiB + 1 MiB.
    assert_eq!(funds.bytes(), 5 * M);
    assert_eq!(budget.used(), 21 * M);
    let s = pool.stats();
    assert_eq!((s.idle_bytes, s.earmarked_bytes), (0, 16 * M));
    // Nobody else gets it.
    let other = pool.try_checkout(16 * MIB).unwrap();
    assert_eq!(pool.stats().fresh_allocations, 2);

    let big = pool.checkout_funded(16 * MIB, &mut funds).unwrap();
    assert_eq!(funds.bytes(), 5 * M, "a set-aside buffer takes nothing from the funds");
    let small = pool.checkout_funded(4 * MIB, &mut funds).unwrap();
    assert_eq!(funds.bytes(), M);
    let s = pool.stats();
    assert_eq!((s.fresh_allocations, s.reuse_hits, s.earmarked_bytes), (3, 1, 0));
    drop((big, small, other, funds));
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn what_was_set_aside_and_not_taken_goes_back_with_the_funds() {
    let (budget, pool) = pool(64 * M);
    drop(pool.try_checkout(16 * MIB).unwrap());
    let funds = pool.admit_blocking(&[16 * MIB], 16 * M, Rank::NORMAL).unwrap();
    assert_eq!(pool.stats().earmarked_bytes, 16 * M);
    drop(funds);
    let s = pool.stats();
    assert_eq!(
        (s.idle_bytes, s.earmarked_bytes, s.allocated_bytes),
        (16 * M, 0, 16 * M)
    );
    assert_eq!(budget.used(), 16 * M);
    // A split of the funds does not carry the earmark away.
    let mut funds = pool.admit_blocking(&[16 * MIB], 18 * M, Rank::NORMAL).unwrap();
    drop(funds.split(2 * M));
    assert_eq!(pool.stats().earmarked_bytes, 16 * M);
    let b = pool.checkout_funded(16 * MIB, &mut funds).unwrap();
    assert_eq!(pool.stats().fresh_allocations, 1);
    drop((b, funds));
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

/// Admits `sizes` on another thread, then checks out each of them with the
/// funds; sends back the fresh allocations counted after its checkouts.
fn admit_and_check_out(pool: &Arc<PinnedPool>, sizes: Vec<usize>, other: u64) -> thread::JoinHandle<(u64, u64)> {
    let pool = Arc::clone(pool);
    thread::spawn(move || {
        let total = other + sizes.iter().map(|&b| pool.rounded_size(b).unwrap() as u64).sum::<u64>();
        let mut funds = pool.admit_blocking(&sizes, total, Rank::NORMAL).unwrap();
        let granted = funds.bytes();
        let bufs: Vec<_> = sizes
            .iter()
            .map(|&b| pool.checkout_funded(b, &mut funds).unwrap())
            .collect();
        let fresh = pool.stats().fresh_allocations;
        drop(bufs);
        (granted, fresh)
    })
}

/// An admission of 48 MiB waiting in a 64 MiB pool whose one buffer, of
/// that size, has just come back fenced by `done` (false: still read by a
/// device).
fn admission_waiting_for_a_fenced_buffer(pool: &Arc<PinnedPool>) -> (Arc<AtomicBool>, thread::JoinHandle<(u64, u64)>) {
    let mut held = pool.try_checkout(48 * MIB).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    held.set_use_fence(Box::new(Flag(Arc::clone(&done))));
    let waiter = admit_and_check_out(pool, vec![48 * MIB], 0);
    wait_for_admission(pool);
    drop(held);
    (done, waiter)
}

#[test]
fn a_buffer_returned_while_an_admission_waits_is_handed_to_it() {
    let (budget, pool) = pool(64 * M);
    let held = pool.try_checkout(48 * MIB).unwrap();
    let waiter = admit_and_check_out(&pool, vec![48 * MIB], 2 * M);
    wait_for_admission(&pool);
    drop(held);
    let (granted, fresh) = waiter.join().unwrap();
    assert_eq!(granted, 2 * M, "the request was lowered by the buffer handed over");
    assert_eq!(fresh, 1, "the admission pinned nothing: it got the returned buffer");
    let s = pool.stats();
    assert_eq!((s.handed_over, s.freed_buffers, s.reuse_hits), (1, 0, 1));
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn a_lane_sets_buffer_coming_back_goes_to_no_admission_of_a_smaller_size() {
    let (budget, pool) = pool(64 * M);
    // A device lane's preparation buffer, kept for lanes, in use on a lane.
    pool.keep_for_lanes("prep", &[32 * MIB]).unwrap();
    let on_lane = spawn_on_device_lane(&pool, |p| p.try_checkout(32 * MIB).unwrap())
        .join()
        .unwrap();
    // An admission for a smaller buffer (one the lane's could serve) waits.
    let hog = budget.try_acquire(24 * M).unwrap();
    let waiter = admit_and_check_out(&pool, vec![24 * MIB], 0);
    wait_for_admission(&pool);
    // The lane's buffer comes back: it stays idle for the lanes.
    drop(on_lane);
    let s = pool.stats();
    assert_eq!((s.handed_over, s.idle_bytes), (0, 32 * M), "{s:?}");
    drop(hog);
    let (_, fresh) = waiter.join().unwrap();
    assert_eq!(fresh, 2, "the admission pinned its own buffer");
    assert_eq!(pool.stats().handed_over, 0);
    // A request of the buffer's own size is handed it as before.
    let hog = budget.try_acquire(budget.available()).unwrap();
    let on_lane = spawn_on_device_lane(&pool, |p| p.try_checkout(32 * MIB).unwrap())
        .join()
        .unwrap();
    let waiter = admit_and_check_out(&pool, vec![32 * MIB], 0);
    wait_for_admission(&pool);
    drop(on_lane);
    let (granted, _) = waiter.join().unwrap();
    assert_eq!((granted, pool.stats().handed_over), (0, 1));
    drop(hog);
}

#[test]
fn work_short_of_funds_is_handed_a_kept_buffer_that_comes_back_while_it_waits() {
    let (budget, pool) = pool(64 * M);
    // A device lane's preparation buffer, kept for lanes, in use on a lane.
    pool.keep_for_lanes("prep", &[16 * MIB]).unwrap();
    let on_lane = |pool: &Arc<PinnedPool>| {
        spawn_on_device_lane(pool, |pool| {
            let mut funds = pinprove_mem::Reservation::empty(pool.budget());
            pool.checkout_funded(16 * MIB, &mut funds).unwrap()
        })
    };
    let first = on_lane(&pool).join().unwrap();
    // Nothing left in the budget: a second lane, with no funds for the
    // buffer, waits.
    let hog = budget.try_acquire(budget.available()).unwrap();
    let (tx, rx) = mpsc::channel();
    let second = on_lane(&pool);
    let waiter = thread::spawn(move || tx.send(second.join().unwrap()).unwrap());
    wait_for_waiter(&budget);
    // The first lane's buffer comes back (kept idle under pressure): the
    // waiting lane gets it, nothing is pinned afresh.
    drop(first);
    let got = rx.recv_timeout(Duration::from_secs(10));
    let fresh = pool.stats().fresh_allocations;
    drop(hog);
    waiter.join().unwrap();
    let got = got.expect("the lane waited on for memory the kept buffer would have given it");
    assert_eq!((got.len(), fresh), (16 * MIB, 1));
    drop(got);
}

#[test]
fn a_fenced_buffer_is_handed_over_once_its_fence_completes() {
    let (budget, pool) = pool(64 * M);
    let (done, waiter) = admission_waiting_for_a_fenced_buffer(&pool);
    // Still read by the device: neither handed over nor freed.
    budget.reclaim();
    assert!(budget.has_waiters());
    assert_eq!(pool.stats().fenced_bytes, 48 * M);
    done.store(true, Ordering::SeqCst);
    // What the engine does now and then while requests wait.
    budget.reclaim();
    let (granted, fresh) = waiter.join().unwrap();
    assert_eq!((granted, fresh), (0, 1));
    let s = pool.stats();
    assert_eq!(s.freed_buffers, 0, "{s:?} {:?}", budget.stats());
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn shrinking_hands_a_buffer_whose_fence_just_completed_to_a_waiting_admission() {
    // The budget's eviction first offers idle buffers to the admission
    // waiting, then frees: a fence completing in between must not turn
    // the buffer into a freed one.
    let (budget, pool) = pool(64 * M);
    let (done, waiter) = admission_waiting_for_a_fenced_buffer(&pool);
    done.store(true, Ordering::SeqCst);
    pool.shrink(u64::MAX);
    let (granted, fresh) = waiter.join().unwrap();
    assert_eq!((granted, fresh), (0, 1), "the admission got the buffer");
    assert_eq!(pool.stats().freed_buffers, 0);
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn only_the_head_of_the_queue_is_handed_buffers() {
    let (budget, pool) = pool(64 * M);
    let held = pool.try_checkout(32 * MIB).unwrap();
    let also_held = pool.try_checkout(16 * MIB).unwrap();
    // First in the queue: a plain request, not through the pool.
    let (tx, rx) = mpsc::channel();
    let b = Arc::clone(&budget);
    let plain = thread::spawn(move || {
        let r = b.acquire_blocking(40 * M).unwrap();
        rx.recv().unwrap();
        drop(r);
    });
    wait_for_waiter(&budget);
    // Second: an admission that wants a buffer like the one held.
    let admission = admit_and_check_out(&pool, vec![32 * MIB], 0);
    while budget.stats().waiters < 2 {
        thread::sleep(Duration::from_millis(2));
    }
    // The returned buffer is freed for the head, not handed to the second.
    drop(held);
    drop(also_held);
    assert_eq!(pool.stats().handed_over, 0);
    assert_eq!(pool.stats().freed_buffers, 2);
    tx.send(()).unwrap();
    plain.join().unwrap();
    let (granted, fresh) = admission.join().unwrap();
    assert_eq!((granted, fresh), (32 * M, 3));
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn a_stream_of_admissions_under_pressure_pins_only_its_first_buffers() {
    // Room for two partitions' buffers at a time; eight partitions in
    // turn, each waiting for the one before the last to finish.
    let (budget, pool) = pool(80 * M);
    let sizes = vec![16 * MIB, 16 * MIB, 4 * MIB];
    let mut handles = Vec::new();
    for _ in 0..8 {
        let pool = Arc::clone(&pool);
        let sizes = sizes.clone();
        handles.push(thread::spawn(move || {
            let mut funds = pool.admit_blocking(&sizes, 37 * M, Rank::NORMAL).unwrap();
            let bufs: Vec<_> = sizes
                .iter()
                .map(|&b| pool.checkout_funded(b, &mut funds).unwrap())
                .collect();
            thread::sleep(Duration::from_millis(20));
            drop(bufs);
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let s = pool.stats();
    // Two partitions' buffers pinned at first (6); a few more where an
    // admission fit the budget before a buffer it wanted came back. Freeing
    // returned buffers for the waiting admissions pins 20 or more.
    assert!(s.fresh_allocations <= 9, "pinned again under pressure: {s:?}");
    assert!(s.handed_over >= 6, "{s:?}");
    assert_eq!(s.reuse_hits + s.fresh_allocations, 24);
    assert_eq!(budget.used(), s.allocated_bytes);
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn a_waiting_admission_handed_an_oversized_buffer_gives_back_what_it_holds_beyond_its_need() {
    let (budget, pool) = pool(64 * M);
    // Memory nobody gives back for as long as this lasts (a job's
    // parameters), and a 40 MiB buffer in use.
    let kept = budget.try_acquire(24 * M).unwrap();
    let held = pool.try_checkout(40 * MIB).unwrap();
    // An admission of a 24 MiB buffer and 8 MiB more waits for memory.
    let waiter = admit_and_check_out(&pool, vec![24 * MIB], 8 * M);
    wait_for_admission(&pool);
    // The buffer comes back and is handed to it, serving its 24 MiB: what
    // it still asks (8 MiB) is not there, and nothing idle is left to free.
    drop(held);
    assert_eq!(pool.stats().handed_over, 1);
    assert!(budget.has_waiters());
    // The budget's eviction (the engine's housekeeping asks every second)
    // trades the oversized buffer for the request it served: 16 MiB gained.
    budget.reclaim();
    let (granted, fresh) = waiter.join().unwrap();
    assert_eq!(granted, 32 * M, "the request was raised again by the buffer given back");
    assert_eq!(fresh, 2, "the admission pinned a buffer of its own size");
    drop(kept);
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

/// Background work waits beside a device lane's kept preparation set;
/// urgent work does not: the lane set gives way to it.
#[test]
fn a_lane_set_gives_way_to_urgent_work_and_not_to_background_work() {
    let (budget, pool) = pool(40 * M);
    budget.set_reserve(4 * M, Rank(2));
    let r = pool.keep_for_lanes("prep", &[12 * MIB, 12 * MIB]).unwrap();
    assert_eq!(r.allocated_bytes, 24 * M, "{r:?}");
    let held = budget.try_acquire(12 * M).unwrap();
    // Background work: 4 MiB left, and those are the reserve's.
    let p = Arc::clone(&pool);
    let background = thread::spawn(move || p.admit_blocking(&[], 8 * M, Rank(1)).unwrap());
    wait_for_admission(&pool);
    thread::sleep(Duration::from_millis(50));
    assert!(
        pool.holds_warm_set("prep"),
        "kept for the lanes while background work waits"
    );
    assert!(!background.is_finished());
    // Memory other work gives back goes to it; the lane set stays.
    drop(held);
    let background = background.join().unwrap();
    assert_eq!(background.bytes(), 8 * M);
    assert!(pool.holds_warm_set("prep"));
    // Urgent work: of the 8 MiB left it lacks 4, and one of the lane set's
    // buffers is freed for it.
    let urgent = pool.admit_blocking(&[], 12 * M, Rank(2)).unwrap();
    assert_eq!(urgent.bytes(), 12 * M);
    assert!(!pool.holds_warm_set("prep"), "the lane set gave way");
    assert_eq!(pool.stats().idle_bytes, 12 * M, "one buffer of two");
}

/// An admission waiting while nothing in flight will free memory first has
/// every idle buffer freed, kept ones too, and is granted when that is
/// enough; when it is not, it is refused with the numbers instead of
/// waiting forever.
#[test]
fn an_admission_with_nothing_in_flight_frees_kept_sets_or_is_refused_with_the_numbers() {
    let (budget, pool) = pool(40 * M);
    let r = pool.keep_reserved("urgent", &[8 * MIB]).unwrap();
    assert_eq!(r.allocated_bytes, 8 * M);
    // What nothing will give back here (parameters, say).
    let parameters = budget.try_acquire(24 * M).unwrap();
    let granted = pool.admit_unless_stuck(&[], 12 * M, Rank(1), || true).unwrap();
    assert_eq!(granted.bytes(), 12 * M);
    assert_eq!(pool.stats().idle_bytes, 0, "the kept set gave way");
    drop(granted);
    // 16 MiB are left; 20 never will be.
    let e = pool.admit_unless_stuck(&[], 20 * M, Rank(1), || true).unwrap_err();
    match &e {
        pinprove_mem::Error::NeverGranted {
            requested, total, used, ..
        } => assert_eq!((*requested, *total, *used), (20 * M, 40 * M, 24 * M)),
        other => panic!("{other}"),
    }
    let text = e.to_string();
    assert!(
        text.contains(&(20 * M).to_string()) && text.contains(&(40 * M).to_string()),
        "{text}"
    );
    assert!(!budget.has_waiters(), "the refused request left the queue");
    // While something is in flight the same request waits, and is granted
    // when that work gives its memory back.
    let in_flight = Arc::new(AtomicBool::new(true));
    let (p, flag) = (Arc::clone(&pool), Arc::clone(&in_flight));
    let waiting = thread::spawn(move || {
        p.admit_unless_stuck(&[], 20 * M, Rank(1), || !flag.load(Ordering::Acquire))
            .map(|r| r.bytes())
    });
    wait_for_admission(&pool);
    thread::sleep(Duration::from_millis(2500));
    assert!(!waiting.is_finished(), "work in flight: it waits");
    drop(parameters);
    assert_eq!(waiting.join().unwrap().unwrap(), 20 * M);
    in_flight.store(false, Ordering::Release);
}
