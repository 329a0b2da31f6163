//! Admission through the pool: buffers set aside for admitted work, and
//! buffers handed to work waiting for memory instead of being freed.
//!
//! Without this, a pool under pressure churns: while an admission waits for
//! memory, every buffer that comes back is freed so that its bytes go to the
//! admission, which then pins a fresh buffer of the same size — pinning the
//! GPU ends up waiting for (measured on the H200 at 2^26: 27 fresh pins,
//! 15 s, on threads a device waited for, in a pool that had stopped
//! growing). Admitting through the pool keeps the buffer instead: the
//! admission's request in the budget is lowered by the buffer's size, and
//! the buffer, still covered by its own reservation, is set aside (an
//! earmark) for that admission's checkouts. Only the request at the head of
//! the budget's queue is handed buffers, so nothing overtakes it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{PinnedPool, PoolBuffer, State};
use crate::budget::{Queued, Rank};
use crate::{Error, Reservation, Result};

/// How often an admission waiting for memory asks whether anything in
/// flight could still free some (see [`PinnedPool::admit_unless_stuck`]).
const STUCK_CHECK: Duration = Duration::from_secs(1);

/// Pool buffers set aside for one admission, travelling with its
/// [`Reservation`]; when the reservation drops, the buffers it did not
/// check out go back to the pool.
pub(crate) struct Earmark {
    pool: Weak<PinnedPool>,
    id: u64,
}

impl crate::budget::Tie for Earmark {
    fn key(&self) -> u64 {
        self.id
    }
}

impl Drop for Earmark {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.release_earmark(self.id);
        }
    }
}

/// A buffer set aside for an admission.
pub(super) struct Earmarked {
    earmark: u64,
    pub(super) block: super::Block,
    /// The size (rounded) of the request it serves: what the admission's
    /// budget request was spared.
    serves: usize,
}

/// An admission waiting in the budget, and the buffer sizes (rounded) it
/// has not got yet.
pub(super) struct Wanting {
    earmark: u64,
    sizes: Vec<usize>,
    queued: Queued,
}

impl PinnedPool {
    /// Admits work that needs `total` bytes, among them buffers of `sizes`
    /// bytes it will check out (through
    /// [`checkout_funded`](Self::checkout_funded) with the returned
    /// reservation; counted as the pool rounds them), waiting for memory as
    /// [`MemoryBudget::acquire_blocking_ranked`](crate::MemoryBudget::acquire_blocking_ranked)
    /// does at `rank`.
    ///
    /// Idle buffers that fit are set aside for the work now, and the budget
    /// is asked only for what they do not cover; while the request waits,
    /// buffers coming back that it lacks are handed to it. The reservation
    /// holds the bytes asked for less those of the buffers set aside; its
    /// checkouts take those buffers first, and the ones left when it drops
    /// go back to the pool.
    pub fn admit_blocking(self: &Arc<Self>, sizes: &[usize], total: u64, rank: Rank) -> Result<Reservation> {
        self.admit_unless_stuck(sizes, total, rank, || false)
    }

    /// Like [`admit_blocking`](Self::admit_blocking), for a caller that
    /// knows when nothing it runs holds memory that will come back:
    /// `nothing_in_flight` says so. While the request waits at the head of
    /// the queue and that holds, every idle buffer is freed, those of kept
    /// sets too, and the other holders are asked to give way
    /// ([`Evictor::give_way`](crate::Evictor::give_way));
    /// if it still holds a check later and the request still waits, it is
    /// refused with [`Error::NeverGranted`] and the numbers, never left
    /// waiting for memory nothing will free.
    pub fn admit_unless_stuck(
        self: &Arc<Self>,
        sizes: &[usize],
        total: u64,
        rank: Rank,
        nothing_in_flight: impl Fn() -> bool,
    ) -> Result<Reservation> {
        let mut wanted = Vec::with_capacity(sizes.len());
        for &b in sizes.iter().filter(|&&b| b > 0) {
            wanted.push(self.rounded_size(b)?);
        }
        let other = total.saturating_sub(wanted.iter().map(|&b| b as u64).sum());
        // Largest first: a big buffer is the one worth not pinning again.
        wanted.sort_unstable_by(|a, b| b.cmp(a));
        let earmark = Earmark {
            pool: Arc::downgrade(self),
            id: self.next_earmark.fetch_add(1, Ordering::Relaxed),
        };
        let mut missing = Vec::new();
        {
            let mut s = self.lock();
            s.collect_fenced();
            for size in wanted {
                match s.best_idle(size, self.fit_limit(size)) {
                    Some(key) => {
                        let idle = s.idle.remove(&key).expect("key just found");
                        s.earmarked.push(Earmarked {
                            earmark: earmark.id,
                            block: idle.block,
                            serves: size,
                        });
                    }
                    None => missing.push(size),
                }
            }
        }
        let need = missing.iter().map(|&b| b as u64).fold(other, u64::saturating_add);
        // On error the earmark drops here, and what it set aside goes back.
        let queued = match self.budget.enqueue_lowerable(need, rank)? {
            Ok(mut granted) => {
                granted.tie = Some(Box::new(earmark));
                return Ok(granted);
            }
            Err(queued) => queued,
        };
        {
            let mut s = self.lock();
            s.wanting.push(Wanting {
                earmark: earmark.id,
                sizes: missing,
                queued: queued.clone(),
            });
            // Buffers that came back while the request was being queued.
            self.offer_locked(&mut s);
        }
        // Only now, with idle buffers it lacks handed to it, is idle memory
        // evicted for the request.
        self.budget.reclaim();
        let waited = self.wait_unless_stuck(queued, nothing_in_flight);
        self.lock().wanting.retain(|w| w.earmark != earmark.id);
        // Refused: the earmark drops here, and what it set aside goes back.
        let mut granted = waited?;
        granted.tie = Some(Box::new(earmark));
        Ok(granted)
    }

    /// Waits for `queued`'s grant; refuses it (see
    /// [`admit_unless_stuck`](Self::admit_unless_stuck)) once it waited at
    /// the head of the queue through two checks with nothing in flight,
    /// every idle buffer freed between them.
    fn wait_unless_stuck(&self, queued: Queued, nothing_in_flight: impl Fn() -> bool) -> Result<Reservation> {
        let mut gave_way = false;
        loop {
            if let Some(granted) = queued.wait_timeout(STUCK_CHECK) {
                return Ok(granted);
            }
            if !queued.is_head() || !nothing_in_flight() {
                gave_way = false;
                continue;
            }
            if !gave_way {
                // Kept sets, and whatever else is kept for work to come,
                // give way: this work is here and nothing else will bring
                // memory back.
                let freed = self.shrink(u64::MAX);
                tracing::info!(
                    freed,
                    waiting = queued.bytes(),
                    "an admission waits with nothing in flight: every idle buffer freed, kept ones too"
                );
                self.budget.give_way();
                gave_way = true;
                continue;
            }
            let requested = queued.bytes();
            if let Some(granted) = queued.withdraw() {
                return Ok(granted);
            }
            let stats = self.stats();
            let used = self.budget.used();
            tracing::warn!(requested, used, "an admission can never be granted: refused");
            return Err(Error::NeverGranted {
                requested,
                total: self.budget.total(),
                used,
                pool_checked_out: stats.checked_out_bytes,
                pool_idle: stats.idle_bytes,
            });
        }
    }

    /// A buffer set aside under `earmark` that serves a request of `size`
    /// (rounded) bytes, checked out.
    pub(super) fn take_earmarked(self: &Arc<Self>, earmark: u64, size: usize) -> Option<PoolBuffer> {
        let limit = self.fit_limit(size);
        let mut s = self.lock();
        let at = s
            .earmarked
            .iter()
            .enumerate()
            .filter(|(_, e)| e.earmark == earmark && (size..=limit).contains(&e.block.mem.len()))
            .min_by_key(|(_, e)| e.block.mem.len())
            .map(|(i, _)| i)?;
        let block = s.earmarked.swap_remove(at).block;
        Some(self.reuse(s, block))
    }

    /// Hands `block` to the admission at the head of the budget's queue if
    /// it lacks a buffer `block` serves, lowering its request; returns the
    /// block otherwise.
    pub(super) fn hand_over(&self, s: &mut State, block: super::Block) -> Option<super::Block> {
        let len = block.mem.len();
        // Admissions are made off device lanes: a buffer lane sets claim
        // whole goes only to a request of its own size (see `best_idle`).
        // Handed to a synthesizing partition as a smaller buffer, it sent a
        // lane to pin 3.75 GiB afresh (2.6 s) while the GPU waited (2^26 on
        // the H200).
        let lanes_only = s.claimed_whole(len, &s.lane_counts());
        for w in &mut s.wanting {
            // The largest size this block serves.
            let Some(i) = (0..w.sizes.len())
                .filter(|&i| w.sizes[i] <= len && len <= self.fit_limit(w.sizes[i]))
                .filter(|&i| w.sizes[i] == len || !lanes_only)
                .max_by_key(|&i| w.sizes[i])
            else {
                continue;
            };
            if w.queued.lower_if_head(w.sizes[i] as u64) {
                let serves = w.sizes.swap_remove(i);
                s.earmarked.push(Earmarked {
                    earmark: w.earmark,
                    block,
                    serves,
                });
                self.counters.handed_over.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(bytes = len, "pool handed a returned buffer to a waiting admission");
                return None;
            }
        }
        Some(block)
    }

    /// For the budget's eviction: takes back the buffers set aside for
    /// admissions that wait behind another (raising their requests again),
    /// so that no request waits for memory set aside for one behind it, and
    /// hands idle buffers to the admission at the head of the queue.
    /// Returns the bytes by which waiting requests were lowered and raised
    /// in all.
    pub(super) fn rebalance(&self) -> (u64, u64) {
        let mut s = self.lock();
        let served = |s: &State| s.earmarked.iter().map(|e| e.serves as u64).sum::<u64>();
        let before = served(&s);
        let now = std::time::Instant::now();
        let taken_back = s.take_back(|w, _| !w.queued.is_head());
        let raised: u64 = taken_back.iter().map(|e| e.serves as u64).sum();
        for e in taken_back {
            s.put_idle(e.block, now);
        }
        self.offer_locked(&mut s);
        let lowered = (served(&s) + raised).saturating_sub(before);
        (lowered, raised)
    }

    /// For the budget's eviction once nothing idle is left: frees the
    /// buffers set aside for waiting admissions that are larger than the
    /// request they serve, raising each request by what its buffer served
    /// (a buffer of the right size may be handed to it later). Returns the
    /// bytes gained, each buffer's size less what it served. Without it an
    /// admission at the head of the queue, handed a 1 MiB buffer for a
    /// 640 KiB request, waited for the very bytes that buffer held beyond
    /// its need, with nothing else left to free (an engine test hung so
    /// about once in 200 runs on a loaded machine).
    pub(super) fn release_oversized(&self) -> u64 {
        let mut s = self.lock();
        let released = s.take_back(|_, e| e.block.mem.len() > e.serves);
        let gained = released.iter().map(|e| (e.block.mem.len() - e.serves) as u64).sum();
        let victims: Vec<_> = released.into_iter().map(|e| s.drop_block(e.block)).collect();
        drop(s);
        self.free(victims);
        gained
    }

    pub(super) fn offer_locked(&self, s: &mut State) {
        if s.wanting.is_empty() {
            return;
        }
        s.collect_fenced();
        let keys: Vec<(usize, u64)> = s.idle.keys().copied().collect();
        for key in keys {
            let idle = s.idle.remove(&key).expect("key just listed");
            if let Some(block) = self.hand_over(s, idle.block) {
                s.put_idle(block, idle.since);
            }
        }
    }

    /// Puts back what `earmark` set aside and nobody checked out.
    fn release_earmark(&self, earmark: u64) {
        let pressure = self.budget.has_waiters();
        let mut s = self.lock();
        let mut victims = Vec::new();
        while let Some(at) = s.earmarked.iter().position(|e| e.earmark == earmark) {
            let block = s.earmarked.swap_remove(at).block;
            victims.extend(self.place(&mut s, block, false, pressure));
        }
        drop(s);
        self.free(victims);
    }
}

impl State {
    /// Takes back the buffers set aside for waiting admissions that `which`
    /// picks (given the admission and the buffer), raising each one's
    /// request by what its buffer served; an admission granted meanwhile
    /// keeps its buffer. Returns the buffers taken, for the caller to keep
    /// idle or free.
    fn take_back(&mut self, which: impl Fn(&Wanting, &Earmarked) -> bool) -> Vec<Earmarked> {
        let State { wanting, earmarked, .. } = self;
        let mut taken = Vec::new();
        let mut i = 0;
        while i < earmarked.len() {
            let e = &earmarked[i];
            let back = wanting.iter_mut().find(|w| w.earmark == e.earmark).is_some_and(|w| {
                let back = which(w, e) && w.queued.raise_unless_granted(e.serves as u64);
                if back {
                    w.sizes.push(e.serves);
                }
                back
            });
            if back {
                taken.push(earmarked.swap_remove(i));
            } else {
                i += 1;
            }
        }
        taken
    }
}
