//! One byte budget for everything large in the process.
//!
//! Work is admitted only when its memory fits. Requests are granted strictly
//! in order of [`Rank`], then of arrival: a large request at the head of the
//! queue is not overtaken by small ones that happen to fit, so it cannot
//! starve, and deadline-bound work (a higher rank) goes before background
//! work that waits. A reserve (see [`MemoryBudget::set_reserve`]) keeps part of
//! the budget for the higher ranks, so that urgent work is admitted at once
//! even when lower-ranked work has taken everything else. When a request does
//! not fit, the registered [`Evictor`]s (idle pool buffers, idle SRS) are asked
//! to free memory before the request waits.
//!
//! Grants are handed over by whoever releases memory: a release moves the
//! freed bytes to the waiters at the head of the queue, under the same lock,
//! so a grant is never lost between a release and a waiter going to sleep.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::sync::Recover;
use crate::{Error, GIB, Result, sys};

/// Something that holds memory it can give back on request, such as idle
/// pool buffers or an unused SRS.
///
/// Evictors are called without any budget lock held, and free memory by
/// dropping [`Reservation`]s. They may be called from any thread, including
/// from inside an allocation of their own.
pub trait Evictor: Send + Sync {
    /// A name for logs.
    fn name(&self) -> &str;

    /// Frees idle memory, aiming at `bytes` (it may free more or less), and
    /// returns how many bytes of the budget it released. `rank` is the
    /// highest rank among the requests the memory is for: an evictor may
    /// keep what work of that rank or above still needs (an SRS that queued
    /// jobs of such a rank want), since freeing it would only make that
    /// work load it again.
    fn evict(&self, bytes: u64, rank: Rank) -> u64;

    /// Like [`evict`](Self::evict), when the requests the memory is for are
    /// all the work there is: nothing in flight will bring memory back
    /// (see [`PinnedPool::admit_unless_stuck`](crate::PinnedPool::admit_unless_stuck)).
    /// What is kept for work that may come (an SRS idle for less time than
    /// its load took) then gives way to the work that is here; what work
    /// of `rank` or above still needs is kept as by `evict`. By default, the
    /// same as `evict`.
    fn give_way(&self, bytes: u64, rank: Rank) -> u64 {
        self.evict(bytes, rank)
    }
}

/// How the budget's total is chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetConfig {
    /// Exactly this many bytes.
    Fixed(u64),
    /// From the machine: the smaller of MemTotal and the cgroup memory limit,
    /// minus a safety margin for the rest of the process and the system:
    /// `max(margin_min, fraction × memory)`.
    Auto {
        /// Fraction of memory kept out of the budget.
        margin_fraction: f64,
        /// Lower bound of the margin in bytes.
        margin_min: u64,
    },
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig::Auto {
            margin_fraction: 0.10,
            margin_min: 2 * GIB as u64,
        }
    }
}

impl std::str::FromStr for BudgetConfig {
    type Err = String;

    /// "auto" (the default margin), or a size such as "96GiB", "1.5 TiB",
    /// "500M" or "4096" (see [`parse_bytes`]).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(BudgetConfig::default());
        }
        match parse_bytes(s)? {
            0 => Err("a memory budget of 0 bytes admits nothing".into()),
            n => Ok(BudgetConfig::Fixed(n)),
        }
    }
}

impl fmt::Display for BudgetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetConfig::Fixed(n) => write!(f, "{n}"),
            BudgetConfig::Auto { .. } => f.write_str("auto"),
        }
    }
}

/// Parses a byte count: a number (fractions allowed) and an optional unit,
/// binary (`KiB`, `MiB`, `GiB`, `TiB`, or just `K`, `M`, `G`, `T`) or
/// decimal (`kB`, `MB`, `GB`, `TB`); `B` or none for bytes.
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let value: f64 = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => (1u64 << 10) as f64,
        "m" | "mib" => (1u64 << 20) as f64,
        "g" | "gib" => (1u64 << 30) as f64,
        "t" | "tib" => (1u64 << 40) as f64,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "unknown size unit {unit:?} in {s:?} (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
            ));
        }
    };
    let bytes = value * mult;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("size out of range: {s:?}"));
    }
    Ok(bytes.round() as u64)
}

impl BudgetConfig {
    /// The total this configuration gives on this machine.
    pub fn resolve(&self) -> u64 {
        match *self {
            BudgetConfig::Fixed(total) => total,
            BudgetConfig::Auto {
                margin_fraction,
                margin_min,
            } => {
                let memory = sys::usable_memory_bytes();
                let margin = ((memory as f64 * margin_fraction) as u64).max(margin_min);
                // On a tiny machine keep at least half of memory usable.
                memory.saturating_sub(margin).max(memory / 2)
            }
        }
    }
}

/// A snapshot of the budget's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// The budget's size in bytes.
    pub total: u64,
    /// Bytes reserved now.
    pub used: u64,
    /// Highest `used` seen.
    pub peak: u64,
    /// Requests queued now.
    pub waiters: usize,
    /// Bytes queued requests are asking for.
    pub waiting_bytes: u64,
    /// Requests granted since creation.
    pub grants: u64,
    /// Requests that had to wait.
    pub waits: u64,
    /// Total time requests spent waiting.
    pub wait_time: Duration,
    /// Bytes freed by evictors on behalf of requests.
    pub evicted_bytes: u64,
}

/// A request's place in the budget's queue: higher ranks are granted first,
/// in arrival order within a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rank(pub u8);

impl Rank {
    /// Plain admissions.
    pub const NORMAL: Rank = Rank(0);
    /// Memory needed to finish work already admitted (a vector outgrowing
    /// its estimate mid-proof): before every admission.
    pub const URGENT: Rank = Rank(u8::MAX);
}

struct Waiter {
    /// Bytes asked for; changed only under the state lock while the request
    /// waits (see [`Queued::lower_if_head`] and
    /// [`Queued::raise_unless_granted`]).
    bytes: AtomicU64,
    rank: Rank,
    /// Set, under the state lock, when the bytes were granted to this waiter.
    granted: AtomicBool,
    /// Wakes a blocking waiter; it waits on the state lock.
    cv: Condvar,
    /// Wakes an async waiter.
    waker: Mutex<Option<Waker>>,
}

struct State {
    used: u64,
    peak: u64,
    queue: VecDeque<Arc<Waiter>>,
    grants: u64,
    waits: u64,
    wait_time: Duration,
    evicted: u64,
    evictors: Vec<(u32, Weak<dyn Evictor>)>,
    /// Bytes only requests of `reserve_rank` or above may use.
    reserve: u64,
    reserve_rank: Rank,
}

/// The process's memory budget. Create it with [`MemoryBudget::new`] and
/// share the `Arc`.
pub struct MemoryBudget {
    total: u64,
    state: Mutex<State>,
    /// Serializes eviction rounds so that concurrent requests do not each
    /// evict for the same shortfall.
    evicting: Mutex<()>,
}

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.stats();
        f.debug_struct("MemoryBudget")
            .field("total", &s.total)
            .field("used", &s.used)
            .field("waiters", &s.waiters)
            .finish()
    }
}

impl MemoryBudget {
    /// A budget of `total` bytes.
    pub fn new(total: u64) -> Arc<Self> {
        Arc::new(MemoryBudget {
            total,
            state: Mutex::new(State {
                used: 0,
                peak: 0,
                queue: VecDeque::new(),
                grants: 0,
                waits: 0,
                wait_time: Duration::ZERO,
                evicted: 0,
                evictors: Vec::new(),
                reserve: 0,
                reserve_rank: Rank::URGENT,
            }),
            evicting: Mutex::new(()),
        })
    }

    /// A budget sized by `config`.
    pub fn from_config(config: &BudgetConfig) -> Arc<Self> {
        Self::new(config.resolve())
    }

    /// The budget's size in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Keeps `bytes` of the budget for requests of `rank` or above: lower
    /// ranks are granted only what fits beside it. (Urgent requests may
    /// always use it.)
    pub fn set_reserve(&self, bytes: u64, rank: Rank) {
        let mut s = self.lock();
        s.reserve = bytes.min(self.total);
        s.reserve_rank = rank;
        // Higher ranks may fit now.
        self.grant_waiters(&mut s);
    }

    /// The most one request of `rank` may ever be granted: the budget, less
    /// the reserve when `rank` is below it.
    pub fn limit_for(&self, rank: Rank) -> u64 {
        Self::limit(self.total, &self.lock(), rank)
    }

    fn limit(total: u64, s: &State, rank: Rank) -> u64 {
        if rank < s.reserve_rank {
            total - s.reserve
        } else {
            total
        }
    }

    /// The lowest rank the reserve is kept for: urgent work.
    pub fn reserve_rank(&self) -> Rank {
        self.lock().reserve_rank
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// Bytes not reserved now (some may be promised to queued requests).
    pub fn available(&self) -> u64 {
        self.total - self.lock().used
    }

    /// Whether requests are waiting for memory. Holders of idle memory use
    /// this to free it instead of keeping it cached.
    pub fn has_waiters(&self) -> bool {
        !self.lock().queue.is_empty()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BudgetStats {
        let s = self.lock();
        BudgetStats {
            total: self.total,
            used: s.used,
            peak: s.peak,
            waiters: s.queue.len(),
            waiting_bytes: s.queue.iter().map(|w| w.bytes()).sum(),
            grants: s.grants,
            waits: s.waits,
            wait_time: s.wait_time,
            evicted_bytes: s.evicted,
        }
    }

    /// Registers an evictor. Lower `priority` values are asked first (the
    /// pinned pool uses 0, circuit recordings 50, SRS residency 100). The budget keeps only a weak
    /// reference: an evictor that is dropped is forgotten.
    pub fn register_evictor(&self, evictor: Weak<dyn Evictor>, priority: u32) {
        let mut s = self.lock();
        s.evictors.retain(|(_, e)| e.strong_count() > 0);
        s.evictors.push((priority, evictor));
        s.evictors.sort_by_key(|(p, _)| *p);
    }

    /// Reserves `bytes` without waiting. Evictors are asked to make room when
    /// the request does not fit; if it still does not fit, or other requests
    /// are queued ahead, returns [`Error::WouldBlock`].
    pub fn try_acquire(self: &Arc<Self>, bytes: u64) -> Result<Reservation> {
        self.check_size(bytes, Rank::NORMAL)?;
        if let Some(r) = self.grant_now(bytes, Rank::NORMAL) {
            return Ok(r);
        }
        self.evict_for(bytes, Rank::NORMAL, false);
        self.grant_now(bytes, Rank::NORMAL).ok_or_else(|| Error::WouldBlock {
            requested: bytes,
            available: self.available(),
            total: self.total,
        })
    }

    /// Reserves `bytes` only out of memory nobody holds: no evictor is asked
    /// and nothing queued is overtaken. For work that is worth doing only
    /// with spare memory (preparing buffers ahead of demand).
    pub fn try_acquire_spare(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        self.grant_now(bytes, Rank::NORMAL)
    }

    /// Like [`try_acquire_spare`](Self::try_acquire_spare), the reserve
    /// included: spare memory as work of the reserve's rank sees it. For
    /// buffers kept for that work (a WinningPoSt's), which must exist
    /// however full the rest of the budget is.
    pub fn try_acquire_reserved(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        let rank = self.lock().reserve_rank;
        self.grant_now(bytes, rank)
    }

    /// Reserves `bytes`, blocking the thread until they are granted. For
    /// threads outside an async runtime (synthesis workers).
    pub fn acquire_blocking(self: &Arc<Self>, bytes: u64) -> Result<Reservation> {
        self.wait_blocking(bytes, Rank::NORMAL)
    }

    /// Like [`acquire_blocking`](Self::acquire_blocking), queued by `rank`:
    /// granted before every waiting request of a lower rank.
    pub fn acquire_blocking_ranked(self: &Arc<Self>, bytes: u64, rank: Rank) -> Result<Reservation> {
        self.wait_blocking(bytes, rank)
    }

    /// Reserves `bytes` needed to finish work that was already admitted (a
    /// vector outgrowing its estimate mid-proof), blocking until granted.
    ///
    /// Such requests go before every waiting admission (FIFO among
    /// themselves): admitted work must be able to finish and release its
    /// memory, or an admission waiting for that memory at the head of the
    /// queue would wait forever.
    pub fn acquire_urgent_blocking(self: &Arc<Self>, bytes: u64) -> Result<Reservation> {
        self.wait_blocking(bytes, Rank::URGENT)
    }

    fn wait_blocking(self: &Arc<Self>, bytes: u64, rank: Rank) -> Result<Reservation> {
        match self.enqueue(bytes, rank)? {
            Enqueued::Granted(r) => Ok(r),
            Enqueued::Waiting(waiter) => Ok(self.wait_for_grant(&waiter)),
        }
    }

    fn wait_for_grant(self: &Arc<Self>, waiter: &Waiter) -> Reservation {
        let started = Instant::now();
        let mut s = self.lock();
        while !waiter.granted.load(Ordering::Acquire) {
            s = waiter.cv.wait(s).recover();
        }
        s.wait_time += started.elapsed();
        drop(s);
        // What was granted: the request, less what it was lowered by.
        Reservation::new(Arc::clone(self), waiter.bytes())
    }

    /// Like [`acquire_blocking_ranked`](Self::acquire_blocking_ranked), in
    /// two steps: the request is granted now or queued, and a queued one
    /// can be lowered while it waits (the pool lowers an admission's request
    /// when it hands the admission a returned buffer instead of freeing it).
    /// No evictor is asked before the request is queued: the caller asks
    /// ([`reclaim`](Self::reclaim)) once it can be handed memory.
    pub(crate) fn enqueue_lowerable(
        self: &Arc<Self>,
        bytes: u64,
        rank: Rank,
    ) -> Result<std::result::Result<Reservation, Queued>> {
        Ok(match self.enqueue_as_is(bytes, rank)? {
            Enqueued::Granted(r) => Ok(r),
            Enqueued::Waiting(waiter) => Err(Queued {
                budget: Arc::clone(self),
                waiter,
            }),
        })
    }

    /// Reserves `bytes`, waiting asynchronously until they are granted.
    ///
    /// Dropping the future before it completes gives its place in the queue
    /// (or its grant) back. Evictors run on the polling thread; they should
    /// be quick.
    pub fn acquire(self: &Arc<Self>, bytes: u64) -> Acquire {
        Acquire {
            budget: Arc::clone(self),
            bytes,
            state: AcquireState::Start,
        }
    }

    /// Asks the evictors to free memory for the queued requests. Holders of
    /// memory that just became evictable call this (for example when an SRS
    /// stops being used) so that waiters are not left waiting for memory
    /// that could be freed.
    pub fn reclaim(&self) {
        self.evict_for(0, Rank::URGENT, false);
    }

    /// Like [`reclaim`](Self::reclaim), for a caller that knows the queued
    /// requests are all the work there is: evictors give way (see
    /// [`Evictor::give_way`]).
    pub fn give_way(&self) {
        self.evict_for(0, Rank::URGENT, true);
    }

    fn check_size(&self, bytes: u64, rank: Rank) -> Result<()> {
        let limit = self.limit_for(rank);
        if bytes > limit {
            return Err(Error::ExceedsBudget {
                requested: bytes,
                total: limit,
            });
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counters torn: every
        // update is a single assignment. Keep going.
        self.state.lock().recover()
    }

    /// Whether a new request may be granted now: it fits under its rank's
    /// limit, and nothing of its rank or above is queued (the queue is
    /// sorted by rank, so its head says).
    fn may_grant(&self, s: &State, bytes: u64, rank: Rank) -> bool {
        let ahead = s.queue.front().is_some_and(|w| w.rank >= rank);
        !ahead && Self::limit(self.total, s, rank).saturating_sub(s.used) >= bytes
    }

    /// Grants `bytes` at once if allowed (see [`may_grant`](Self::may_grant)).
    fn grant_now(self: &Arc<Self>, bytes: u64, rank: Rank) -> Option<Reservation> {
        let mut s = self.lock();
        if self.may_grant(&s, bytes, rank) {
            Self::take(&mut s, bytes);
            drop(s);
            return Some(Reservation::new(Arc::clone(self), bytes));
        }
        None
    }

    fn take(s: &mut State, bytes: u64) {
        s.used += bytes;
        s.peak = s.peak.max(s.used);
        s.grants += 1;
    }

    /// Fast path, then eviction, then a place in the queue.
    fn enqueue(self: &Arc<Self>, bytes: u64, rank: Rank) -> Result<Enqueued> {
        self.check_size(bytes, rank)?;
        if let Some(r) = self.grant_now(bytes, rank) {
            return Ok(Enqueued::Granted(r));
        }
        self.evict_for(bytes, rank, false);
        self.enqueue_as_is(bytes, rank)
    }

    /// Grants now if allowed, or queues, without asking evictors.
    fn enqueue_as_is(self: &Arc<Self>, bytes: u64, rank: Rank) -> Result<Enqueued> {
        self.check_size(bytes, rank)?;
        let mut s = self.lock();
        if self.may_grant(&s, bytes, rank) {
            Self::take(&mut s, bytes);
            drop(s);
            return Ok(Enqueued::Granted(Reservation::new(Arc::clone(self), bytes)));
        }
        let waiter = Arc::new(Waiter {
            bytes: AtomicU64::new(bytes),
            rank,
            granted: AtomicBool::new(false),
            cv: Condvar::new(),
            waker: Mutex::new(None),
        });
        // Behind every request of its rank or above, before lower ones.
        let at = s.queue.iter().position(|w| w.rank < rank).unwrap_or(s.queue.len());
        s.queue.insert(at, Arc::clone(&waiter));
        s.waits += 1;
        Ok(Enqueued::Waiting(waiter))
    }

    /// Evicts what the queued requests plus a new request of `extra` bytes
    /// at `rank` lack. Evictors are asked in priority order until nothing is
    /// missing; with `give_way`, to give way (see [`Evictor::give_way`]).
    fn evict_for(&self, extra: u64, rank: Rank, give_way: bool) {
        if self.missing(extra, rank) == 0 {
            return;
        }
        // The most urgent request the memory is for: the new one, or the
        // head of the queue (sorted by rank).
        let head = self.lock().queue.front().map(|w| w.rank);
        let rank = match head {
            Some(h) if extra == 0 || h > rank => h,
            _ => rank,
        };
        let _round = self.evicting.lock().recover();
        let evictors: Vec<Arc<dyn Evictor>> = {
            let mut s = self.lock();
            s.evictors.retain(|(_, e)| e.strong_count() > 0);
            s.evictors.iter().filter_map(|(_, e)| e.upgrade()).collect()
        };
        let mut freed = 0u64;
        for e in evictors {
            // Recomputed each time: memory may have come back meanwhile.
            let missing = self.missing(extra, rank);
            if missing == 0 {
                break;
            }
            let n = if give_way {
                e.give_way(missing, rank)
            } else {
                e.evict(missing, rank)
            };
            if n > 0 {
                tracing::debug!(evictor = e.name(), bytes = n, "evicted idle memory for the budget");
            }
            freed += n;
        }
        if freed > 0 {
            self.lock().evicted += freed;
        }
    }

    /// Bytes the queued requests and a new one of `extra` bytes at `rank`
    /// lack, counting the reserve as taken when one of them ranks below it.
    fn missing(&self, extra: u64, rank: Rank) -> u64 {
        let s = self.lock();
        let waiting: u64 = s.queue.iter().map(|w| w.bytes()).sum();
        let low = (extra > 0 && rank < s.reserve_rank) || s.queue.iter().any(|w| w.rank < s.reserve_rank);
        let reserve = if low { s.reserve } else { 0 };
        (waiting + extra + reserve).saturating_sub(self.total - s.used)
    }

    /// Returns `bytes` and hands them to the waiters at the head of the queue.
    fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut s = self.lock();
        debug_assert!(s.used >= bytes, "budget released more than it granted");
        s.used -= bytes.min(s.used);
        self.grant_waiters(&mut s);
    }

    fn grant_waiters(&self, s: &mut State) {
        while let Some(head) = s.queue.front() {
            if Self::limit(self.total, s, head.rank).saturating_sub(s.used) < head.bytes() {
                break;
            }
            let head = s.queue.pop_front().expect("front exists");
            Self::take(s, head.bytes());
            head.granted.store(true, Ordering::Release);
            head.cv.notify_one();
            if let Some(w) = head.waker.lock().recover().take() {
                w.wake();
            }
        }
    }

    /// Withdraws a queued waiter, or returns its grant if it had one.
    fn abandon(&self, waiter: &Arc<Waiter>) {
        let mut s = self.lock();
        if waiter.granted.load(Ordering::Acquire) {
            s.used -= waiter.bytes();
        } else {
            s.queue.retain(|w| !Arc::ptr_eq(w, waiter));
        }
        // Either way the head may now fit.
        self.grant_waiters(&mut s);
    }
}

impl Waiter {
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }
}

enum Enqueued {
    Granted(Reservation),
    Waiting(Arc<Waiter>),
}

/// A request waiting in a [`MemoryBudget`]'s queue (see
/// [`MemoryBudget::enqueue_lowerable`]). Clones refer to the same request.
#[derive(Clone)]
pub(crate) struct Queued {
    budget: Arc<MemoryBudget>,
    waiter: Arc<Waiter>,
}

impl Queued {
    /// Lowers the request by up to `bytes` if it is at the head of the
    /// queue and not granted yet, and grants it if it fits now. Returns
    /// whether it was lowered. Only the head is lowered: memory handed to a
    /// request further back would overtake the head.
    pub(crate) fn lower_if_head(&self, bytes: u64) -> bool {
        let mut s = self.budget.lock();
        let head = s.queue.front().is_some_and(|w| Arc::ptr_eq(w, &self.waiter));
        if !head || self.waiter.granted.load(Ordering::Acquire) {
            return false;
        }
        let left = self.waiter.bytes().saturating_sub(bytes);
        self.waiter.bytes.store(left, Ordering::Release);
        self.budget.grant_waiters(&mut s);
        true
    }

    /// Raises the request by `bytes` unless it was granted already (memory
    /// handed to it is taken back while it waits behind another). Returns
    /// whether it was raised.
    pub(crate) fn raise_unless_granted(&self, bytes: u64) -> bool {
        let _s = self.budget.lock();
        if self.waiter.granted.load(Ordering::Acquire) {
            return false;
        }
        self.waiter.bytes.fetch_add(bytes, Ordering::AcqRel);
        true
    }

    /// Whether the request is at the head of the queue.
    pub(crate) fn is_head(&self) -> bool {
        let s = self.budget.lock();
        s.queue.front().is_some_and(|w| Arc::ptr_eq(w, &self.waiter))
    }

    /// Waits up to `timeout` for the request to be granted: `None` if it is
    /// still waiting then. The reservation holds what was asked less what
    /// it was lowered by.
    pub(crate) fn wait_timeout(&self, timeout: Duration) -> Option<Reservation> {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut s = self.budget.lock();
        while !self.waiter.granted.load(Ordering::Acquire) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                s.wait_time += started.elapsed();
                return None;
            }
            s = self.waiter.cv.wait_timeout(s, left).recover().0;
        }
        s.wait_time += started.elapsed();
        drop(s);
        Some(Reservation::new(Arc::clone(&self.budget), self.waiter.bytes()))
    }

    /// Bytes the request still asks for.
    pub(crate) fn bytes(&self) -> u64 {
        self.waiter.bytes()
    }

    /// Withdraws the request from the queue; if it was granted meanwhile,
    /// the grant is returned as a reservation instead.
    pub(crate) fn withdraw(self) -> Option<Reservation> {
        let mut s = self.budget.lock();
        if self.waiter.granted.load(Ordering::Acquire) {
            drop(s);
            return Some(Reservation::new(Arc::clone(&self.budget), self.waiter.bytes()));
        }
        s.queue.retain(|w| !Arc::ptr_eq(w, &self.waiter));
        // The request behind it may fit now.
        self.budget.grant_waiters(&mut s);
        None
    }
}

/// Future returned by [`MemoryBudget::acquire`].
pub struct Acquire {
    budget: Arc<MemoryBudget>,
    bytes: u64,
    state: AcquireState,
}

enum AcquireState {
    Start,
    Waiting(Arc<Waiter>, Instant),
    Done,
}

impl Future for Acquire {
    type Output = Result<Reservation>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match &this.state {
            AcquireState::Start => match this.budget.enqueue(this.bytes, Rank::NORMAL) {
                Err(e) => {
                    this.state = AcquireState::Done;
                    Poll::Ready(Err(e))
                }
                Ok(Enqueued::Granted(r)) => {
                    this.state = AcquireState::Done;
                    Poll::Ready(Ok(r))
                }
                Ok(Enqueued::Waiting(w)) => {
                    let waiting = Arc::clone(&w);
                    this.state = AcquireState::Waiting(w, Instant::now());
                    Self::park(&this.budget, &waiting, this.bytes, cx, &mut this.state)
                }
            },
            AcquireState::Waiting(w, _) => {
                let w = Arc::clone(w);
                Self::park(&this.budget, &w, this.bytes, cx, &mut this.state)
            }
            AcquireState::Done => panic!("Acquire polled after completion"),
        }
    }
}

impl Acquire {
    fn park(
        budget: &Arc<MemoryBudget>,
        waiter: &Arc<Waiter>,
        bytes: u64,
        cx: &mut Context<'_>,
        state: &mut AcquireState,
    ) -> Poll<Result<Reservation>> {
        // Store the waker under the state lock: a grant happens under it too,
        // so either we see `granted` or the granter sees our waker.
        let mut s = budget.lock();
        if waiter.granted.load(Ordering::Acquire) {
            if let AcquireState::Waiting(_, since) = state {
                s.wait_time += since.elapsed();
            }
            drop(s);
            *state = AcquireState::Done;
            return Poll::Ready(Ok(Reservation::new(Arc::clone(budget), bytes)));
        }
        *waiter.waker.lock().recover() = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let AcquireState::Waiting(w, _) = &self.state {
            self.budget.abandon(w);
        }
    }
}

/// Bytes reserved in a [`MemoryBudget`]; returned when dropped.
///
/// A reservation can be released in parts ([`release`](Self::release)),
/// split into two ([`split`](Self::split)) and merged
/// ([`merge`](Self::merge)), which is how a job's working set is handed from
/// one stage to the next without ever leaving the budget.
#[must_use = "dropping a reservation releases its bytes at once"]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
    /// What a client of the budget tied to these bytes: kept through
    /// [`merge`](Self::merge), not passed on by [`split`](Self::split),
    /// dropped with the reservation. (The pool ties the buffers it set aside
    /// for an admission this way; the budget knows nothing of them.)
    pub(crate) tie: Option<Box<dyn Tie>>,
}

/// Something tied to a [`Reservation`] by a client of the budget, found
/// again by its key and released by its own `Drop` when the reservation
/// goes.
pub(crate) trait Tie: Send + Sync {
    /// Which of its owner's ties this is.
    fn key(&self) -> u64;
}

impl Reservation {
    fn new(budget: Arc<MemoryBudget>, bytes: u64) -> Self {
        Reservation {
            budget,
            bytes,
            tie: None,
        }
    }

    /// An empty reservation of `budget`, to merge others into.
    pub fn empty(budget: &Arc<MemoryBudget>) -> Self {
        Reservation::new(Arc::clone(budget), 0)
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The budget the bytes belong to.
    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.budget
    }

    /// Returns up to `bytes` to the budget now and keeps the rest. Returns
    /// the number of bytes released.
    pub fn release(&mut self, bytes: u64) -> u64 {
        let n = bytes.min(self.bytes);
        self.bytes -= n;
        self.budget.release(n);
        n
    }

    /// Moves up to `bytes` into a new reservation, without touching the
    /// budget.
    pub fn split(&mut self, bytes: u64) -> Reservation {
        let n = bytes.min(self.bytes);
        self.bytes -= n;
        Reservation::new(Arc::clone(&self.budget), n)
    }

    /// Takes over the bytes of `other`, which must belong to the same budget.
    pub fn merge(&mut self, mut other: Reservation) -> Result<()> {
        if !Arc::ptr_eq(&self.budget, &other.budget) {
            return Err(Error::ForeignReservation);
        }
        self.bytes += std::mem::take(&mut other.bytes);
        if self.tie.is_none() {
            self.tie = other.tie.take();
        }
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation").field("bytes", &self.bytes).finish()
    }
}
