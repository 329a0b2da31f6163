use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use pinprove_mem::{Error, Evictor, MemoryBudget, Rank, Reservation};

/// Waits until `cond` holds, failing the test after a generous deadline
/// (the deadline only catches hangs; nothing here is timed).
fn wait_until(mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
    panic!("condition not reached");
}

#[test]
fn acquire_and_release_return_to_zero() {
    let b = MemoryBudget::new(1000);
    let r1 = b.try_acquire(300).unwrap();
    let r2 = b.acquire_blocking(700).unwrap();
    assert_eq!(b.used(), 1000);
    assert_eq!(b.available(), 0);
    drop(r1);
    assert_eq!(b.used(), 700);
    drop(r2);
    assert_eq!(b.used(), 0);
    assert_eq!(b.stats().peak, 1000);
}

#[test]
fn partial_release_split_and_merge() {
    let b = MemoryBudget::new(1000);
    let mut r = b.try_acquire(600).unwrap();
    assert_eq!(r.release(100), 100);
    assert_eq!(b.used(), 500);
    // Releasing more than held releases what is held.
    let mut part = r.split(200);
    assert_eq!((r.bytes(), part.bytes(), b.used()), (300, 200, 500));
    assert_eq!(part.release(1000), 200);
    assert_eq!(b.used(), 300);
    let other = b.try_acquire(50).unwrap();
    r.merge(other).unwrap();
    assert_eq!((r.bytes(), b.used()), (350, 350));
    let foreign = MemoryBudget::new(10).try_acquire(5).unwrap();
    assert!(matches!(r.merge(foreign), Err(Error::ForeignReservation)));
    drop(r);
    drop(part);
    assert_eq!(b.used(), 0);
}

#[test]
fn a_request_larger_than_the_budget_fails_at_once() {
    let b = MemoryBudget::new(1000);
    for result in [
        b.try_acquire(1001),
        b.acquire_blocking(1001),
        futures_block_on(b.acquire(5000)),
    ] {
        match result {
            Err(e @ Error::ExceedsBudget { requested, total }) => {
                assert!(requested > total);
                assert!(e.to_string().contains("exceeds the whole memory budget"));
            }
            other => panic!("expected ExceedsBudget, got {other:?}"),
        }
    }
    assert_eq!(b.used(), 0);
}

#[test]
fn try_acquire_would_block_when_full() {
    let b = MemoryBudget::new(100);
    let _r = b.try_acquire(80).unwrap();
    match b.try_acquire(30) {
        Err(Error::WouldBlock {
            requested: 30,
            available: 20,
            total: 100,
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn blocking_acquire_wakes_on_release() {
    let b = MemoryBudget::new(100);
    let r = b.try_acquire(100).unwrap();
    let b2 = Arc::clone(&b);
    let waiter = thread::spawn(move || b2.acquire_blocking(60).unwrap().bytes());
    wait_until(|| b.has_waiters());
    drop(r);
    assert_eq!(waiter.join().unwrap(), 60);
    assert_eq!(b.used(), 0);
    assert_eq!(b.stats().waits, 1);
}

#[test]
fn waiters_are_served_in_fifo_order() {
    let b = MemoryBudget::new(100);
    let mut held = b.try_acquire(100).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));

    // A large request queues first, then a small one.
    let spawn = |bytes: u64, tag: &'static str| {
        let (b, order) = (Arc::clone(&b), Arc::clone(&order));
        thread::spawn(move || {
            let r = b.acquire_blocking(bytes).unwrap();
            order.lock().unwrap().push(tag);
            r
        })
    };
    let big = spawn(90, "big");
    wait_until(|| b.stats().waiters == 1);
    let small = spawn(10, "small");
    wait_until(|| b.stats().waiters == 2);

    // 20 free: the small one would fit, but the big one is ahead of it.
    held.release(20);
    thread::sleep(Duration::from_millis(50));
    assert!(
        order.lock().unwrap().is_empty(),
        "small request overtook the queue head"
    );
    // A try_acquire does not jump the queue either.
    assert!(matches!(b.try_acquire(5), Err(Error::WouldBlock { .. })));

    // 90 free: exactly the head's request; the small one must keep waiting.
    held.release(70);
    let big_r = big.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["big"]);
    assert_eq!(b.stats().waiters, 1);
    drop(held);
    drop(big_r);
    let small_r = small.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["big", "small"]);
    assert_eq!(b.used(), 10);
    drop(small_r);
    assert_eq!(b.used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_acquire_waits_and_cancels_cleanly() {
    let b = MemoryBudget::new(100);
    let held = b.acquire(100).await.unwrap();

    // A pending acquire that is dropped leaves the queue.
    let pending = b.acquire(50);
    let timed_out = tokio::time::timeout(Duration::from_millis(20), pending).await;
    assert!(timed_out.is_err());
    assert!(!b.has_waiters(), "cancelled acquire still queued");

    // A waiting acquire completes when memory comes back.
    let b2 = Arc::clone(&b);
    let task = tokio::spawn(async move { b2.acquire(70).await.unwrap() });
    tokio::time::timeout(Duration::from_secs(10), async {
        while !b.has_waiters() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .unwrap();
    drop(held);
    let r = task.await.unwrap();
    assert_eq!((r.bytes(), b.used()), (70, 70));
    drop(r);
    assert_eq!(b.used(), 0);
}

#[test]
fn a_granted_but_unclaimed_async_acquire_returns_its_bytes() {
    let b = MemoryBudget::new(100);
    let held = b.try_acquire(100).unwrap();
    let mut fut = Box::pin(b.acquire(40));
    assert!(poll_once(fut.as_mut()).is_none());
    assert!(b.has_waiters());
    drop(held); // grants 40 to the future, which is never polled again
    assert_eq!(b.used(), 40);
    drop(fut);
    assert_eq!(b.used(), 0);
}

/// Holds reservations like a cache and gives them up when asked.
struct TestEvictor {
    name: &'static str,
    held: Mutex<Vec<Reservation>>,
    calls: AtomicUsize,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl Evictor for TestEvictor {
    fn name(&self) -> &str {
        self.name
    }
    fn evict(&self, bytes: u64, _rank: Rank) -> u64 {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.log.lock().unwrap().push(self.name);
        let mut held = self.held.lock().unwrap();
        let mut freed = 0;
        while freed < bytes {
            let Some(r) = held.pop() else { break };
            freed += r.bytes();
        }
        freed
    }
}

fn evictor(
    b: &Arc<MemoryBudget>,
    name: &'static str,
    chunks: &[u64],
    log: &Arc<Mutex<Vec<&'static str>>>,
) -> Arc<TestEvictor> {
    Arc::new(TestEvictor {
        name,
        held: Mutex::new(chunks.iter().map(|&n| b.try_acquire(n).unwrap()).collect()),
        calls: AtomicUsize::new(0),
        log: Arc::clone(log),
    })
}

#[test]
fn evictors_are_asked_in_priority_order_before_waiting() {
    let b = MemoryBudget::new(1000);
    let log = Arc::new(Mutex::new(Vec::new()));
    let srs = evictor(&b, "srs", &[400], &log);
    let pool = evictor(&b, "pool", &[100, 100, 100], &log);
    b.register_evictor(Arc::downgrade(&srs) as _, 100);
    b.register_evictor(Arc::downgrade(&pool) as _, 0);
    assert_eq!(b.used(), 700);

    // Needs 150 more than the 300 free: the pool alone can give it.
    let r = b.try_acquire(450).unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["pool"]);
    assert_eq!(srs.calls.load(Ordering::SeqCst), 0);
    assert_eq!(b.used(), 450 + 100 + 400);

    // Needs more than the pool has left: the SRS goes too.
    let r2 = b.acquire_blocking(500).unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["pool", "pool", "srs"]);
    assert_eq!(b.used(), 950);
    assert!(b.stats().evicted_bytes >= 600);
    drop((r, r2));
    assert_eq!(b.used(), 0);
}

#[test]
fn dropped_evictors_are_forgotten() {
    let b = MemoryBudget::new(100);
    let log = Arc::new(Mutex::new(Vec::new()));
    let e = evictor(&b, "gone", &[], &log);
    b.register_evictor(Arc::downgrade(&e) as _, 0);
    drop(e);
    let _r = b.try_acquire(100).unwrap();
    assert!(b.try_acquire(1).is_err());
    assert!(log.lock().unwrap().is_empty());
}

#[test]
fn reclaim_serves_waiters_from_newly_evictable_memory() {
    let b = MemoryBudget::new(100);
    let log = Arc::new(Mutex::new(Vec::new()));
    let cache = evictor(&b, "cache", &[], &log);
    b.register_evictor(Arc::downgrade(&cache) as _, 0);
    let busy = b.try_acquire(100).unwrap();
    let b2 = Arc::clone(&b);
    let waiter = thread::spawn(move || b2.acquire_blocking(50).unwrap().bytes());
    wait_until(|| b.has_waiters());
    // The busy memory becomes idle, cached by the evictor: reclaim frees it.
    cache.held.lock().unwrap().push(busy);
    b.reclaim();
    assert_eq!(waiter.join().unwrap(), 50);
    assert_eq!(b.used(), 0);
}

/// Many threads reserve random amounts, hold them briefly and release them
/// in parts. An accountant outside the budget tracks what is held and checks
/// it never exceeds the total.
#[test]
fn concurrent_mixed_workload_never_exceeds_the_total() {
    const TOTAL: u64 = 10_000;
    let b = MemoryBudget::new(TOTAL);
    let outstanding = Arc::new(AtomicU64::new(0));
    let max_seen = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let (b, outstanding, max_seen) = (Arc::clone(&b), Arc::clone(&outstanding), Arc::clone(&max_seen));
            thread::spawn(move || {
                let mut x = t * 7919 + 1;
                for i in 0..300u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let bytes = 1 + (x >> 33) % (TOTAL / 3);
                    let mut r = if i % 3 == 0 {
                        match b.try_acquire(bytes) {
                            Ok(r) => r,
                            Err(Error::WouldBlock { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    } else {
                        b.acquire_blocking(bytes).unwrap()
                    };
                    let now = outstanding.fetch_add(bytes, Ordering::SeqCst) + bytes;
                    max_seen.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= TOTAL, "accountant saw {now} > {TOTAL}");
                    // Two-phase release, as the pipeline does.
                    let first = bytes / 2;
                    outstanding.fetch_sub(first, Ordering::SeqCst);
                    r.release(first);
                    thread::yield_now();
                    outstanding.fetch_sub(r.bytes(), Ordering::SeqCst);
                    drop(r);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(b.used(), 0);
    assert_eq!(outstanding.load(Ordering::SeqCst), 0);
    assert!(b.stats().peak <= TOTAL);
    assert!(
        max_seen.load(Ordering::SeqCst) > TOTAL / 3,
        "the workload never contended"
    );
}

// A tiny executor for the synchronous tests.
fn futures_block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match f.poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[test]
fn urgent_requests_go_before_admissions() {
    let b = MemoryBudget::new(100);
    let held = b.try_acquire(70).unwrap();
    // An admission of 50 waits at the head of the queue.
    let b2 = Arc::clone(&b);
    let admission = thread::spawn(move || b2.acquire_blocking(50).unwrap().bytes());
    wait_until(|| b.stats().waiters == 1);
    // 30 are free: an urgent request of 20 is granted at once anyway...
    let urgent = b.acquire_urgent_blocking(20).unwrap();
    assert_eq!(b.used(), 90);
    // ...while an ordinary one would have to queue.
    assert!(matches!(b.try_acquire(5), Err(Error::WouldBlock { .. })));
    // An urgent request that does not fit queues ahead of the admission.
    let b3 = Arc::clone(&b);
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = Arc::clone(&order);
    let second = thread::spawn(move || {
        let r = b3.acquire_urgent_blocking(40).unwrap();
        o.lock().unwrap().push("urgent");
        r
    });
    wait_until(|| b.stats().waiters == 2);
    drop(held); // 80 free: the urgent 40 first, then the admission of 50 does not fit
    let r = second.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["urgent"]);
    assert_eq!(b.used(), 60);
    drop((r, urgent));
    assert_eq!(admission.join().unwrap(), 50);
    assert_eq!(b.used(), 0);
}

#[test]
fn higher_ranks_go_first_and_the_reserve_is_theirs() {
    let b = MemoryBudget::new(100);
    b.set_reserve(20, Rank(2));
    // Below the reserve's rank only 80 can ever be granted.
    assert_eq!(b.limit_for(Rank(1)), 80);
    assert_eq!(b.limit_for(Rank(2)), 100);
    assert!(matches!(
        b.acquire_blocking_ranked(90, Rank(1)),
        Err(Error::ExceedsBudget { total: 80, .. })
    ));
    let held = b.acquire_blocking_ranked(70, Rank(1)).unwrap();
    // 30 free, but only 10 of them for rank 1: its 15 waits...
    let b2 = Arc::clone(&b);
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = Arc::clone(&order);
    let low = thread::spawn(move || {
        let r = b2.acquire_blocking_ranked(15, Rank(1)).unwrap();
        o.lock().unwrap().push("low");
        r
    });
    wait_until(|| b.stats().waiters == 1);
    // ...while rank 2 gets 25 of the reserve at once, ahead of it.
    let high = b.acquire_blocking_ranked(25, Rank(2)).unwrap();
    assert_eq!(b.used(), 95);
    // A waiting rank-3 request goes before the waiting rank-1 one.
    let b3 = Arc::clone(&b);
    let o = Arc::clone(&order);
    let higher = thread::spawn(move || {
        let r = b3.acquire_blocking_ranked(10, Rank(3)).unwrap();
        o.lock().unwrap().push("higher");
        r
    });
    wait_until(|| b.stats().waiters == 2);
    drop(high); // 30 free: rank 3's 10 first; rank 1 may use up to 80 of 80 used
    let h = higher.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["higher"]);
    assert_eq!(b.used(), 80);
    drop(held); // 10 used: the rank-1 request fits under its limit now
    let l = low.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["higher", "low"]);
    assert_eq!(b.used(), 25);
    drop((h, l));
    assert_eq!(b.used(), 0);
}

#[test]
fn budgets_and_sizes_parse() {
    use pinprove_mem::{BudgetConfig, parse_bytes};
    assert_eq!(parse_bytes("4096"), Ok(4096));
    assert_eq!(parse_bytes("96GiB"), Ok(96 << 30));
    assert_eq!(parse_bytes("1.5 TiB"), Ok(3 << 39));
    assert_eq!(parse_bytes("500M"), Ok(500 << 20));
    assert_eq!(parse_bytes("2 GB"), Ok(2_000_000_000));
    assert!(parse_bytes("12 parsecs").unwrap_err().contains("unknown size unit"));
    assert!(parse_bytes("lots").is_err());
    assert!(parse_bytes("1e30").is_err());
    assert!(parse_bytes("99999999999 TiB").unwrap_err().contains("out of range"));
    assert!(matches!("auto".parse::<BudgetConfig>(), Ok(BudgetConfig::Auto { .. })));
    assert!(matches!("64GiB".parse::<BudgetConfig>(), Ok(BudgetConfig::Fixed(n)) if n == 64 << 30));
    assert!("0".parse::<BudgetConfig>().is_err());
}
