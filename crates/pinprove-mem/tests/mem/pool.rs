use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::{Flag, spawn_on_device_lane};
use pinprove_mem::{Error, HeapAllocator, HostAllocator, MIB, MemoryBudget, PinnedPool, PinnedVec, PoolConfig, Rank};

fn heap() -> Arc<dyn HostAllocator> {
    // Prefaulting is exercised by the allocator's own tests; here it would
    // only slow things down.
    Arc::new(HeapAllocator::new(false))
}

fn pool_with(total: u64, config: PoolConfig) -> (Arc<MemoryBudget>, Arc<PinnedPool>) {
    let budget = MemoryBudget::new(total);
    let pool = PinnedPool::new(heap(), Arc::clone(&budget), config);
    (budget, pool)
}

fn pool(total: u64) -> (Arc<MemoryBudget>, Arc<PinnedPool>) {
    pool_with(
        total,
        PoolConfig {
            idle_timeout: None,
            ..PoolConfig::default()
        },
    )
}

const M: u64 = MIB as u64;

#[test]
fn a_returned_buffer_is_reused() {
    let (budget, pool) = pool(64 * M);
    let b = pool.try_checkout(3 * MIB).unwrap();
    let addr = b.as_ptr();
    drop(b);
    let b = pool.try_checkout(3 * MIB).unwrap();
    assert_eq!(b.as_ptr(), addr);
    let s = pool.stats();
    assert_eq!((s.fresh_allocations, s.reuse_hits), (1, 1));
    assert_eq!(s.checked_out_bytes, 3 * M);
    drop(b);
    assert_eq!(budget.used(), 3 * M, "idle buffers stay covered by the budget");
}

#[test]
fn best_fit_picks_the_smallest_buffer_that_is_large_enough() {
    let (_budget, pool) = pool(256 * M);
    let sizes = [M, 4 * M, 16 * M, 5 * M];
    let bufs: Vec<_> = sizes.iter().map(|&s| pool.try_checkout(s as usize).unwrap()).collect();
    drop(bufs);
    let b = pool.try_checkout(3 * MIB).unwrap();
    assert_eq!(b.len(), 4 * MIB);
    let c = pool.try_checkout(4 * MIB + 1).unwrap();
    assert_eq!(c.len(), 5 * MIB, "4 MiB is taken, 5 MiB fits best");
    assert_eq!(pool.stats().reuse_hits, 2);
}

#[test]
fn similar_sizes_share_buffers_but_tiny_requests_do_not_take_huge_ones() {
    let (_budget, pool) = pool(1024 * M);
    drop(pool.try_checkout(100 * MIB).unwrap());
    // Same size class.
    let b = pool.try_checkout(97 * MIB).unwrap();
    assert_eq!(pool.stats().reuse_hits, 1);
    drop(b);
    // Far smaller: a fresh buffer rather than 104 MiB for 1 MiB.
    let small = pool.try_checkout(MIB).unwrap();
    assert_eq!(small.len(), MIB);
    assert_eq!(pool.stats().fresh_allocations, 2);
}

#[test]
fn under_pressure_an_oversized_idle_buffer_is_used_rather_than_evicted() {
    let (budget, pool) = pool(40 * M);
    drop(pool.try_checkout(32 * MIB).unwrap());
    // 8 MiB free, 16 MiB asked: reuse the 32 MiB idle buffer.
    let b = pool.try_checkout(16 * MIB).unwrap();
    assert_eq!(b.len(), 32 * MIB);
    assert_eq!(budget.used(), 32 * M);
}

#[test]
fn shrink_frees_largest_idle_buffers_first() {
    let (budget, pool) = pool(256 * M);
    let bufs: Vec<_> = [M, 2 * M, 8 * M, 32 * M]
        .iter()
        .map(|&s| pool.try_checkout(s as usize).unwrap())
        .collect();
    let keep = pool.try_checkout(16 * MIB).unwrap();
    drop(bufs);
    assert_eq!(budget.used(), 59 * M);
    let freed = pool.shrink(9 * M);
    assert_eq!(freed, 32 * M, "the largest buffer alone covers the request");
    let freed = pool.shrink(9 * M);
    assert_eq!(freed, 8 * M + 2 * M);
    assert_eq!(pool.stats().idle_bytes, M);
    assert_eq!(budget.used(), 17 * M, "checked-out buffers are never shrunk");
    drop(keep);
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
    assert_eq!(pool.stats().allocated_bytes, 0);
}

#[test]
fn idle_buffers_are_trimmed_after_the_timeout() {
    let (budget, pool) = pool_with(
        64 * M,
        PoolConfig {
            idle_timeout: Some(Duration::from_millis(40)),
            ..PoolConfig::default()
        },
    );
    drop(pool.try_checkout(2 * MIB).unwrap());
    assert_eq!(pool.stats().idle_buffers, 1);
    // Long enough for a slow machine (under valgrind 2 s were once too
    // short); the loop ends as soon as the trimmer has freed the buffer
    // (counted once its memory and budget are released).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while pool.stats().freed_buffers == 0 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    let s = pool.stats();
    assert_eq!((s.idle_buffers, s.freed_buffers), (0, 1));
    assert_eq!(budget.used(), 0);
    // A buffer in use is never trimmed.
    let b = pool.try_checkout(2 * MIB).unwrap();
    assert_eq!(pool.trim_idle_older_than(Duration::ZERO), 0);
    drop(b);
    assert_eq!(pool.trim_idle_older_than(Duration::ZERO), 2 * M);
}

#[test]
fn the_budget_evicts_idle_pool_buffers_for_other_requests() {
    let (budget, pool) = pool(64 * M);
    drop(pool.try_checkout(48 * MIB).unwrap());
    assert_eq!(budget.used(), 48 * M);
    // Not a pool request: the pool gives up its idle buffer for it.
    let r = budget.try_acquire(40 * M).unwrap();
    assert_eq!(pool.stats().allocated_bytes, 0);
    assert_eq!(budget.used(), 40 * M);
    drop(r);
}

#[test]
fn buffers_returned_while_others_wait_are_freed() {
    let (budget, pool) = pool(64 * M);
    let b = pool.try_checkout(48 * MIB).unwrap();
    let b2 = Arc::clone(&budget);
    let waiter = thread::spawn(move || b2.acquire_blocking(40 * M).unwrap().bytes());
    while !budget.has_waiters() {
        thread::sleep(Duration::from_millis(2));
    }
    drop(b);
    assert_eq!(waiter.join().unwrap(), 40 * M);
    assert_eq!(pool.stats().idle_buffers, 0);
    assert_eq!(budget.used(), 0);
}

#[test]
fn oversized_requests_fail_clearly() {
    let (_budget, pool) = pool(16 * M);
    assert!(matches!(pool.try_checkout(32 * MIB), Err(Error::ExceedsBudget { .. })));
    assert!(matches!(
        pool.checkout_blocking(32 * MIB),
        Err(Error::ExceedsBudget { .. })
    ));
    assert!(matches!(pool.try_checkout(usize::MAX), Err(Error::CapacityOverflow(_))));
    assert_eq!(pool.stats().allocated_bytes, 0);
}

#[test]
fn funded_checkouts_never_count_memory_twice() {
    let (budget, pool) = pool(64 * M);
    // A job reserves its working set up front.
    let mut funds = budget.try_acquire(20 * M).unwrap();
    let fresh = pool.checkout_funded(8 * MIB, &mut funds).unwrap();
    assert_eq!(funds.bytes(), 12 * M);
    assert_eq!(
        budget.used(),
        20 * M,
        "fresh buffer moved 8 MiB from the job to the pool"
    );
    drop(fresh);
    // The buffer is idle, covered by the pool; reuse releases the job's share.
    let reused = pool.checkout_funded(8 * MIB, &mut funds).unwrap();
    assert_eq!(funds.bytes(), 4 * M);
    assert_eq!(budget.used(), 12 * M);
    // Short funds are topped up from the budget.
    let big = pool.checkout_funded(16 * MIB, &mut funds).unwrap();
    assert_eq!(funds.bytes(), 0);
    assert_eq!(budget.used(), 24 * M);
    let foreign = MemoryBudget::new(100 * M);
    let mut other = foreign.try_acquire(M).unwrap();
    assert!(matches!(
        pool.checkout_funded(M as usize, &mut other),
        Err(Error::ForeignReservation)
    ));
    drop((reused, big, funds));
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn a_buffer_is_reused_only_after_its_fence_completes() {
    let (_budget, pool) = pool(64 * M);
    let done = Arc::new(AtomicBool::new(false));
    let mut b = pool.try_checkout(4 * MIB).unwrap();
    let addr = b.as_ptr();
    b.set_use_fence(Box::new(Flag(Arc::clone(&done))));
    drop(b);
    let s = pool.stats();
    assert_eq!((s.fenced_bytes, s.idle_buffers), (4 * M, 0));
    // The device is still "reading": a new checkout gets another buffer,
    // and shrinking cannot free the fenced one.
    let other = pool.try_checkout(4 * MIB).unwrap();
    assert_ne!(other.as_ptr(), addr);
    assert_eq!(pool.shrink(u64::MAX), 0);
    done.store(true, Ordering::SeqCst);
    let again = pool.try_checkout(4 * MIB).unwrap();
    assert_eq!(again.as_ptr(), addr);
    assert_eq!(pool.stats().fenced_bytes, 0);
}

#[test]
fn dropping_the_pool_waits_for_fenced_buffers() {
    let (budget, pool) = pool(64 * M);
    let done = Arc::new(AtomicBool::new(false));
    let mut b = pool.try_checkout(MIB).unwrap();
    b.set_use_fence(Box::new(Flag(Arc::clone(&done))));
    drop(b);
    let d = Arc::clone(&done);
    let setter = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        d.store(true, Ordering::SeqCst);
    });
    drop(pool); // blocks until the fence completes
    assert!(done.load(Ordering::SeqCst));
    setter.join().unwrap();
    assert_eq!(budget.used(), 0);
}

#[test]
fn every_conversion_returns_the_buffer_exactly_once() {
    let (budget, pool) = pool(256 * M);
    let fill = |n: usize| {
        let mut v = PinnedVec::<u64>::with_capacity_in(n, &pool).unwrap();
        v.extend((0..n as u64).map(|i| i * 3));
        v
    };
    let v = fill(1000);
    drop(v);
    let v = fill(1000);
    v.release();
    let v = fill(1000);
    let copy = v.into_vec();
    assert_eq!(copy[999], 2997);
    let v = fill(1000);
    let (buf, len) = v.into_buffer().unwrap();
    assert_eq!(len, 1000);
    assert_eq!(pool.stats().checked_out_buffers, 1, "into_buffer keeps it out");
    drop(buf);
    let empty = PinnedVec::<u64>::new_in(&pool);
    assert!(empty.into_buffer().is_none());

    let s = pool.stats();
    assert_eq!(s.checked_out_buffers, 0);
    assert_eq!(s.checked_out_bytes, 0);
    assert_eq!(s.fresh_allocations, 1, "one buffer served every vector");
    assert_eq!(s.idle_buffers, 1);
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

#[test]
fn concurrent_checkouts_keep_the_books_straight() {
    let (budget, pool) = pool(128 * M);
    let seen = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (pool, seen) = (Arc::clone(&pool), Arc::clone(&seen));
            thread::spawn(move || {
                for i in 0..50 {
                    let bytes = ((t * 7 + i * 13) % 6 + 1) * MIB;
                    let mut b = pool.checkout_blocking(bytes).unwrap();
                    // Two holders of one buffer would be a double return.
                    let addr = b.as_ptr() as usize;
                    assert!(seen.lock().unwrap().insert(addr), "buffer handed out twice");
                    b.as_uninit_mut()[0].write(t as u8);
                    thread::yield_now();
                    assert!(seen.lock().unwrap().remove(&addr));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = pool.stats();
    assert_eq!((s.checked_out_buffers, s.checked_out_bytes), (0, 0));
    assert_eq!(budget.used(), s.allocated_bytes);
    assert!(s.reuse_hits > s.fresh_allocations);
    pool.clear_idle();
    assert_eq!(budget.used(), 0);
}

/// Heap memory that takes `delay` to allocate, as pinning does.
#[derive(Debug)]
struct SlowHeap {
    heap: HeapAllocator,
    delay: Duration,
}

// SAFETY: every call is passed on to a HeapAllocator, which keeps the
// trait's promises; the delay changes nothing of the memory.
unsafe impl HostAllocator for SlowHeap {
    fn kind(&self) -> pinprove_mem::MemoryKind {
        self.heap.kind()
    }
    fn allocate(&self, len: usize) -> pinprove_mem::Result<std::ptr::NonNull<u8>> {
        thread::sleep(self.delay);
        self.heap.allocate(len)
    }
    unsafe fn deallocate(&self, ptr: std::ptr::NonNull<u8>, len: usize) {
        // SAFETY: the caller's promise, passed on unchanged.
        unsafe { self.heap.deallocate(ptr, len) }
    }
}

#[test]
fn warm_sets_asked_for_at_once_pin_each_missing_buffer_once() {
    // Each call makes up what all sets lack. Two at once (the engine's
    // warm set and a backend's lane set after a first proof) must not both
    // pin the same missing buffers while the other is still pinning.
    let slow = SlowHeap {
        heap: HeapAllocator::new(false),
        delay: Duration::from_millis(30),
    };
    let pool = PinnedPool::new(
        Arc::new(slow),
        MemoryBudget::new(256 * M),
        PoolConfig {
            idle_timeout: None,
            ..PoolConfig::default()
        },
    );
    let warm = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || pool.keep_warm("circuit", &[4 * MIB; 4]).unwrap())
    };
    thread::sleep(Duration::from_millis(10));
    let lanes = pool.keep_for_lanes("lanes", &[4 * MIB; 4]).unwrap();
    let warm = warm.join().unwrap();
    let s = pool.stats();
    assert_eq!(s.warm_bytes, 32 * M);
    assert_eq!(
        (s.allocated_bytes, s.fresh_allocations),
        (32 * M, 8),
        "{warm:?} {lanes:?}"
    );
    assert_eq!(warm.allocated_bytes + lanes.allocated_bytes, 32 * M);
}

#[test]
fn a_warm_set_is_made_from_spare_memory_kept_past_the_timeout_and_evictable() {
    let (budget, pool) = pool(40 * M);
    // Two 8 MiB and one 4 MiB buffer, ahead of demand.
    let sizes = [8 * MIB, 8 * MIB, 4 * MIB];
    let r = pool.keep_warm("circuit", &sizes).unwrap();
    assert_eq!(
        (r.wanted_bytes, r.allocated_bytes, r.missing_bytes),
        (20 * M, 20 * M, 0)
    );
    let s = pool.stats();
    assert_eq!(
        (s.idle_bytes, s.warm_bytes, s.warm_ready_bytes),
        (20 * M, 20 * M, 20 * M)
    );
    assert_eq!(budget.used(), 20 * M, "covered by the budget");
    // Asking again makes nothing new.
    assert_eq!(pool.keep_warm("circuit", &sizes).unwrap().allocated_bytes, 0);
    // The idle timeout does not take them; other idle buffers it does.
    drop(pool.try_checkout(MIB).unwrap());
    assert_eq!(pool.trim_idle_older_than(Duration::ZERO), M);
    assert_eq!(pool.stats().idle_bytes, 20 * M);
    // Work of that shape finds them: no fresh allocation.
    let fresh = pool.stats().fresh_allocations;
    let (a, b, c) = (
        pool.try_checkout(8 * MIB).unwrap(),
        pool.try_checkout(8 * MIB - 100).unwrap(),
        pool.try_checkout(4 * MIB).unwrap(),
    );
    assert_eq!(pool.stats().fresh_allocations, fresh);
    // Buffers in use count as held: nothing more is made for the set.
    assert_eq!(pool.keep_warm("circuit", &sizes).unwrap().allocated_bytes, 0);
    drop((a, b, c));
    // Admitted work that needs the memory evicts them (largest first, as
    // much as it lacks).
    let big = budget.try_acquire(36 * M).unwrap();
    assert_eq!(pool.stats().idle_bytes, 4 * M);
    // Only spare memory is used: with the budget taken, the set stays short.
    let r = pool.keep_warm("circuit", &sizes).unwrap();
    assert_eq!((r.allocated_bytes, r.missing_bytes), (0, 16 * M));
    assert_eq!(pool.stats().warm_ready_bytes, 4 * M);
    assert_eq!(budget.used(), 40 * M);
    drop(big);
    // A second set adds to the first (and any set tops up all of them);
    // dropping a set lets its buffers age out.
    let r = pool.keep_warm("other", &[8 * MIB]).unwrap();
    assert_eq!((r.wanted_bytes, r.allocated_bytes), (8 * M, 24 * M));
    assert_eq!(pool.keep_warm("circuit", &sizes).unwrap().allocated_bytes, 0);
    assert_eq!(pool.stats().warm_bytes, 28 * M);
    pool.stop_warm("other");
    pool.stop_warm("circuit");
    assert_eq!(pool.stats().warm_bytes, 0);
    assert_eq!(pool.trim_idle_older_than(Duration::ZERO), 28 * M);
    assert_eq!(budget.used(), 0);
}

#[test]
fn fresh_allocations_on_a_device_lane_are_counted_apart() {
    let (_budget, pool) = pool(64 * M);
    let other = pool.try_checkout(2 * MIB).unwrap();
    let on_lane = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            pinprove_mem::mark_device_lane();
            let fresh = pool.try_checkout(4 * MIB).unwrap();
            drop(fresh);
            // Served by the idle buffer: no allocation at all.
            pool.try_checkout(4 * MIB).unwrap()
        })
        .join()
        .unwrap()
    };
    let s = pool.stats();
    assert_eq!(s.fresh_allocations, 2);
    assert_eq!(s.lane_allocations, 1, "only the lane thread's fresh buffer");
    assert!(s.lane_alloc_time <= s.alloc_time);
    drop((other, on_lane));
}

#[test]
fn off_a_device_lane_a_smaller_request_leaves_buffers_a_lane_set_claims_whole() {
    let (budget, pool) = pool(40 * M);
    // A device lane's preparation buffer, kept for lanes, and nothing else
    // idle.
    pool.keep_for_lanes("prep", &[4 * MIB]).unwrap();
    assert_eq!(pool.stats().idle_bytes, 4 * M);
    // Other work asking for less pins its own rather than take it, also
    // when the budget is tight (where a larger idle buffer is otherwise
    // taken rather than evicted).
    let fresh = pool.stats().fresh_allocations;
    let other = pool.try_checkout(3 * MIB).unwrap();
    assert_eq!(other.len(), 3 * MIB);
    assert_eq!(pool.stats().fresh_allocations, fresh + 1);
    let hog = budget.try_acquire(budget.available() - 2 * M).unwrap();
    assert!(
        pool.try_checkout(3 * MIB).is_err(),
        "no room for a fresh buffer, and the lanes' buffer is not for it"
    );
    // A lane asking for a little less than it did before takes it.
    let on_lane = spawn_on_device_lane(&pool, |p| p.try_checkout(3 * MIB).map(|b| b.len()));
    assert_eq!(on_lane.join().unwrap().unwrap(), 4 * MIB);
    drop(hog);
    // So does a request of its own size, anywhere.
    let fresh = pool.stats().fresh_allocations;
    let prep = pool.try_checkout(4 * MIB).unwrap();
    assert_eq!(pool.stats().fresh_allocations, fresh, "the kept buffer served its size");
    // Beyond what the lane set claims, a larger buffer serves smaller
    // requests as before; and a kept set that is not for lanes does too.
    let spare = pool.try_checkout(4 * MIB).unwrap();
    drop((prep, spare));
    let fresh = pool.stats().fresh_allocations;
    let served = pool.try_checkout(3 * MIB).unwrap();
    assert_eq!(served.len(), 4 * MIB);
    drop(served);
    pool.keep_for_lanes("prep", &[]).unwrap();
    pool.keep_reserved("urgent", &[4 * MIB, 4 * MIB]).unwrap();
    let (a, b) = (pool.try_checkout(3 * MIB).unwrap(), pool.try_checkout(3 * MIB).unwrap());
    assert_eq!((a.len(), b.len()), (4 * MIB, 4 * MIB));
    assert_eq!(pool.stats().fresh_allocations, fresh);
    drop((a, b, other));
}

#[test]
fn a_kept_set_is_held_once_its_buffers_are_whatever_a_warm_set_of_its_size_lacks() {
    let (_budget, pool) = pool(36 * M);
    // The lanes' set first, then a synthesis warm set asking for more of
    // the same size than the budget has left.
    let r = pool.keep_for_lanes("prep", &[8 * MIB, 8 * MIB]).unwrap();
    assert_eq!(r.missing_bytes, 0, "{r:?}");
    let r = pool.keep_warm("stream", &[8 * MIB; 4]).unwrap();
    assert!(r.missing_bytes > 0, "{r:?}");
    assert!(pool.holds_warm_set("prep"), "held buffers serve the kept sets first");
    assert!(!pool.holds_warm_set("stream"), "the warm set lacks some");
    // Once a kept buffer is gone, neither is held.
    pool.stop_warm("stream");
    pool.clear_idle();
    assert!(!pool.holds_warm_set("prep"));
}

#[test]
fn a_lane_set_is_made_whole_out_of_idle_warm_buffers_and_says_when_it_is() {
    let (budget, pool) = pool(36 * M);
    assert!(!pool.holds_warm_set("prep"), "not known");
    // A synthesis's warm set takes the spare budget first, beside an idle
    // buffer nobody asks for.
    drop(pool.try_checkout(16 * MIB).unwrap());
    pool.keep_warm("stream", &[8 * MIB, 8 * MIB]).unwrap();
    assert_eq!(budget.used(), 32 * M);
    // The lanes' set frees idle memory for its buffers: first what no set
    // asks for, then as little of the warm set's as it needs.
    let r = pool.keep_for_lanes("prep", &[12 * MIB, 12 * MIB]).unwrap();
    assert_eq!((r.allocated_bytes, r.missing_bytes), (24 * M, 0), "{r:?}");
    assert!(pool.holds_warm_set("prep"));
    assert!(!pool.holds_warm_set("stream"), "one of its buffers was freed");
    assert_eq!(pool.stats().warm_ready_bytes, 32 * M);
    // A buffer of the lanes' size in use still counts as held; one freed
    // does not.
    let on_lane = spawn_on_device_lane(&pool, |p| p.try_checkout(12 * MIB).unwrap())
        .join()
        .unwrap();
    assert!(pool.holds_warm_set("prep"));
    drop(on_lane);
    pool.clear_idle();
    assert!(!pool.holds_warm_set("prep"));
    // A set that is not for lanes frees nothing for itself.
    pool.stop_warm("prep");
    pool.stop_warm("stream");
    drop(pool.try_checkout(16 * MIB).unwrap());
    let hog = budget.try_acquire(budget.available() - 4 * M).unwrap();
    let r = pool.keep_reserved("urgent", &[8 * MIB]).unwrap();
    assert_eq!((r.missing_bytes, pool.stats().idle_bytes), (8 * M, 16 * M), "{r:?}");
    drop(hog);
}

#[test]
fn a_kept_set_takes_the_urgent_reserve_when_other_work_holds_the_rest() {
    let (budget, pool) = pool(40 * M);
    budget.set_reserve(8 * M, Rank(2));
    // Sealing work holds everything but the reserve.
    let hog = budget.try_acquire(budget.limit_for(Rank::NORMAL)).unwrap();
    let warm = pool.keep_warm("stream", &[4 * MIB]).unwrap();
    assert_eq!(warm.missing_bytes, 4 * M, "a warm set takes spare memory only");
    // A WinningPoSt's buffers are urgent work's: they come out of its reserve.
    let kept = pool.keep_reserved("urgent", &[4 * MIB, 2 * MIB]).unwrap();
    assert_eq!(kept.allocated_bytes, 6 * M, "{kept:?}");
    assert_eq!(
        kept.missing_bytes,
        4 * M,
        "the stream's buffer, not the kept set's: {kept:?}"
    );
    assert_eq!(pool.stats().kept_bytes, 6 * M);
    // Not beyond it.
    let more = pool.keep_reserved("urgent-2", &[4 * MIB]).unwrap();
    assert_eq!(more.allocated_bytes, 0, "{more:?}");
    drop(hog);
}

#[test]
fn a_kept_set_survives_other_works_pressure() {
    let (budget, pool) = pool(40 * M);
    // A kept set (a WinningPoSt's buffers) and a warm one (a stream's).
    let r = pool.keep_reserved("urgent", &[4 * MIB, 2 * MIB]).unwrap();
    assert_eq!((r.wanted_bytes, r.allocated_bytes), (6 * M, 6 * M));
    pool.keep_warm("stream", &[8 * MIB, 8 * MIB]).unwrap();
    assert_eq!(pool.stats().warm_bytes, 22 * M);
    // Admitted work that needs memory evicts the warm set, not the kept one.
    let big = budget.try_acquire(34 * M).unwrap();
    let s = pool.stats();
    assert_eq!((s.idle_bytes, s.warm_ready_bytes), (6 * M, 6 * M));
    // The budget has nothing more to evict: a request waits.
    assert!(budget.try_acquire(M).is_err());
    // While it waits, the urgent work's buffers come back and stay idle;
    // a buffer no kept set needs is freed as before.
    let (a, b) = (pool.try_checkout(4 * MIB).unwrap(), pool.try_checkout(2 * MIB).unwrap());
    let b2 = Arc::clone(&budget);
    let waiter = thread::spawn(move || b2.acquire_blocking(2 * M).unwrap().bytes());
    while !budget.has_waiters() {
        thread::sleep(Duration::from_millis(2));
    }
    drop((a, b));
    assert_eq!(pool.stats().idle_bytes, 6 * M, "kept under pressure");
    let fresh = pool.stats().fresh_allocations;
    drop(pool.try_checkout(4 * MIB).unwrap());
    assert_eq!(
        pool.stats().fresh_allocations,
        fresh,
        "the urgent work found its buffer"
    );
    drop(big);
    assert_eq!(waiter.join().unwrap(), 2 * M);
    // Beyond what the kept set asks for, buffers of its sizes go as others do.
    let extra = [pool.try_checkout(4 * MIB).unwrap(), pool.try_checkout(4 * MIB).unwrap()];
    let held = pool.stats().allocated_bytes;
    let b2 = Arc::clone(&budget);
    let hog = budget.try_acquire(40 * M - held - 2 * M).unwrap();
    let waiter = thread::spawn(move || b2.acquire_blocking(4 * M).unwrap().bytes());
    while !budget.has_waiters() {
        thread::sleep(Duration::from_millis(2));
    }
    drop(extra);
    assert_eq!(waiter.join().unwrap(), 4 * M);
    assert_eq!(
        pool.stats().idle_bytes,
        6 * M,
        "one 4 MiB buffer freed, the kept one idle"
    );
    drop(hog);
    // An explicit clear frees everything; stopping the set lets its
    // buffers go under pressure again.
    pool.stop_warm("urgent");
    pool.stop_warm("stream");
    assert_eq!(pool.clear_idle(), 6 * M);
    assert_eq!(budget.used(), 0);
}
