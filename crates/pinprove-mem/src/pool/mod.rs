//! A pool of large host buffers, allocated once and reused.
//!
//! Pinning memory costs far more than using it (about 1.5 s to
//! `cudaHostAlloc` 4 GiB, against 78 ms to upload it), so buffers are kept
//! after use and handed out again. A request is served by the smallest idle
//! buffer that is large enough and not wastefully larger; sizes are rounded
//! up to one of eight classes per power of two, so that requests of similar
//! sizes land on the same buffers.
//!
//! Every byte the pool holds, idle or checked out, is covered by a
//! [`Reservation`] in the process's [`MemoryBudget`], and the pool registers
//! itself as an [`Evictor`] of its idle buffers. While other requests are
//! waiting for memory, returned buffers are freed rather than kept idle.
//!
//! A warm set ([`PinnedPool::keep_warm`]) names buffers the pool prepares
//! ahead of demand, out of spare budget, and keeps idle past the idle
//! timeout, so that the first work of a kind does not wait for pinning; the
//! budget can still evict them when admitted work needs the memory. A kept
//! set ([`PinnedPool::keep_reserved`]) is a warm set the pressure of other
//! work never takes: its buffers are neither evicted nor freed on return
//! while others wait, for work that must start at once (a WinningPoSt)
//! whatever the background is doing. A lane set
//! ([`PinnedPool::keep_for_lanes`]) is a kept set for what threads a device
//! waits for ask for, whose buffers smaller requests elsewhere leave alone.
//!
//! Work admitted through the pool ([`PinnedPool::admit_blocking`]) has the
//! idle buffers it will check out set aside for it, and while it waits for
//! memory a buffer coming back is handed to it rather than freed and pinned
//! again (see the `admission` module).
//!
//! A returned buffer can carry a [`UseFence`] — for example a CUDA event
//! recorded after the copy that reads it — and is reused only after the
//! fence has completed, never when the copy is merely enqueued.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak, mpsc};
use std::time::{Duration, Instant};

mod admission;
mod buffer;
mod warm;

use admission::{Earmarked, Wanting};
pub use buffer::PoolBuffer;
pub use warm::WarmReport;
use warm::WarmSet;

use crate::alloc::{HostAllocator, HostMemory, MemoryKind, PAGE};
use crate::budget::{Evictor, MemoryBudget, Rank, Reservation};
use crate::sync::Recover;
use crate::{Error, Result};

/// Pool settings.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Idle buffers unused for this long are freed. `None` keeps them until
    /// the budget asks for memory.
    pub idle_timeout: Option<Duration>,
    /// An idle buffer serves a request only if it is at most this many times
    /// the request's rounded size (unless memory is too tight to allocate a
    /// better fitting one).
    pub max_oversize: f64,
    /// The smallest buffer the pool allocates.
    pub min_buffer: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            idle_timeout: Some(Duration::from_secs(300)),
            max_oversize: 2.0,
            min_buffer: 64 * 1024,
        }
    }
}

/// Something that completes when the device work using a buffer is done.
///
/// Attach one with [`PoolBuffer::set_use_fence`] before dropping a buffer that
/// a GPU may still be reading; the pool then reuses or frees the buffer only
/// after the fence reports completion.
pub trait UseFence: Send + Sync {
    /// Whether the work has completed (does not block).
    fn is_complete(&self) -> bool;
    /// Blocks until the work has completed.
    fn wait(&self);
}

/// Counters of a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// What the buffers are made of.
    pub kind: MemoryKind,
    /// Bytes of all buffers the pool holds.
    pub allocated_bytes: u64,
    /// Bytes of idle buffers, ready for reuse.
    pub idle_bytes: u64,
    /// Bytes of buffers checked out now.
    pub checked_out_bytes: u64,
    /// Bytes returned but still awaiting their use fence.
    pub fenced_bytes: u64,
    /// Number of idle buffers.
    pub idle_buffers: usize,
    /// Bytes of buffers set aside for admitted work that has not checked
    /// them out yet (see [`PinnedPool::admit_blocking`]).
    pub earmarked_bytes: u64,
    /// Returned buffers handed to an admission waiting for memory instead
    /// of being freed (and pinned again by that admission).
    pub handed_over: u64,
    /// Admissions waiting for memory, to which returned buffers can be
    /// handed (see [`PinnedPool::admit_blocking`]).
    pub waiting_admissions: usize,
    /// Bytes the warm sets ask the pool to hold (idle or in use).
    pub warm_bytes: u64,
    /// Of those, bytes the pool holds now.
    pub warm_ready_bytes: u64,
    /// Of the warm sets' bytes, those of kept sets (see
    /// [`PinnedPool::kept_bytes`]).
    pub kept_bytes: u64,
    /// Number of checked-out buffers.
    pub checked_out_buffers: usize,
    /// Checkouts served by an idle buffer.
    pub reuse_hits: u64,
    /// Checkouts that allocated a new buffer.
    pub fresh_allocations: u64,
    /// Time spent in the allocator.
    pub alloc_time: Duration,
    /// Of the fresh allocations, those made on a thread marked with
    /// [`mark_device_lane`] (a device waited for them).
    pub lane_allocations: u64,
    /// Time spent in those.
    pub lane_alloc_time: Duration,
    /// Buffers freed (shrink, idle timeout, eviction, pressure).
    pub freed_buffers: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// [`PinnedVec`](crate::PinnedVec)s that outgrew their buffer.
    pub spills: u64,
    /// Bytes copied by those spills.
    pub spill_bytes_copied: u64,
}

struct Block {
    mem: HostMemory,
    /// Covers `mem` in the budget for the block's whole life.
    _coverage: Reservation,
    id: u64,
}

struct Idle {
    block: Block,
    since: Instant,
}

struct Fenced {
    block: Block,
    fence: Box<dyn UseFence>,
}

#[derive(Default)]
struct State {
    /// Keyed by (size, id): ordered by size for best fit.
    idle: BTreeMap<(usize, u64), Idle>,
    fenced: Vec<Fenced>,
    allocated: u64,
    checked_out: u64,
    checked_out_buffers: usize,
    /// Buffers held per size, idle, fenced or checked out.
    held: BTreeMap<usize, usize>,
    /// Warm sets by name.
    warm: BTreeMap<String, WarmSet>,
    /// Buffers set aside for admitted work, by earmark id.
    earmarked: Vec<Earmarked>,
    /// Admissions waiting in the budget, with the buffers they lack.
    wanting: Vec<Wanting>,
}

impl State {
    /// Takes `block` out of the accounts, to be freed.
    fn drop_block(&mut self, block: Block) -> Block {
        let len = block.mem.len();
        self.allocated -= len as u64;
        self.forget_block(len);
        block
    }

    fn forget_block(&mut self, len: usize) {
        if let Some(n) = self.held.get_mut(&len) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&len);
            }
        }
    }

    fn idle_bytes(&self) -> u64 {
        self.idle.keys().map(|(len, _)| *len as u64).sum()
    }

    /// The best-fitting idle buffer of at least `size` and at most `limit`
    /// bytes. Off a device lane, a larger size that lane sets claim whole
    /// (see [`PinnedPool::keep_for_lanes`]) is passed over: those buffers
    /// exist for the lanes' requests, and a smaller request that took one
    /// sent a lane to pin afresh while its device waited (2^26 on the H200:
    /// synthesizing partitions took the preparation sets' buffers, and the
    /// lanes pinned 9 buffers, 5.95 s).
    fn best_idle(&self, size: usize, limit: usize) -> Option<(usize, u64)> {
        let barred = if DEVICE_LANE.with(Cell::get) {
            BTreeMap::new()
        } else {
            self.lane_counts()
        };
        self.idle
            .range((size, 0)..)
            .map(|(key, _)| *key)
            .take_while(|&(len, _)| len <= limit)
            .find(|&(len, _)| len == size || !self.claimed_whole(len, &barred))
    }

    /// Makes `block` idle, unused since `since`.
    fn put_idle(&mut self, block: Block, since: Instant) {
        self.idle.insert((block.mem.len(), block.id), Idle { block, since });
    }

    /// Moves buffers whose fences have completed to the idle set.
    fn collect_fenced(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.fenced.len() {
            if self.fenced[i].fence.is_complete() {
                let f = self.fenced.swap_remove(i);
                self.put_idle(f.block, now);
            } else {
                i += 1;
            }
        }
    }
}

thread_local! {
    static DEVICE_LANE: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as one a device waits for (a device worker, a
/// backend's preparation thread): fresh allocations made on it are counted
/// apart in [`PoolStats::lane_allocations`], since pinning there idles the GPU.
pub fn mark_device_lane() {
    DEVICE_LANE.with(|c| c.set(true));
}

#[derive(Default)]
struct Counters {
    reuse_hits: AtomicU64,
    fresh_allocations: AtomicU64,
    alloc_nanos: AtomicU64,
    lane_allocations: AtomicU64,
    lane_alloc_nanos: AtomicU64,
    freed_buffers: AtomicU64,
    freed_bytes: AtomicU64,
    spills: AtomicU64,
    spill_bytes: AtomicU64,
    handed_over: AtomicU64,
}

/// A pool of reusable host buffers. Create with [`PinnedPool::new`].
pub struct PinnedPool {
    allocator: Arc<dyn HostAllocator>,
    budget: Arc<MemoryBudget>,
    config: PoolConfig,
    state: Mutex<State>,
    /// Held by a warm-set call for as long as it pins (see `warm_set`).
    warming: Mutex<()>,
    counters: Counters,
    next_id: AtomicU64,
    next_earmark: AtomicU64,
    /// Dropping it stops the idle trimmer thread.
    _trimmer: Option<mpsc::Sender<()>>,
}

impl fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedPool")
            .field("kind", &self.allocator.kind())
            .field("stats", &self.stats())
            .finish()
    }
}

impl PinnedPool {
    /// A pool drawing buffers from `allocator`, accounted in `budget`.
    ///
    /// Registers the pool as the budget's first evictor and, when
    /// `config.idle_timeout` is set, starts a thread that frees buffers idle
    /// for longer than that (it ends with the pool).
    pub fn new(allocator: Arc<dyn HostAllocator>, budget: Arc<MemoryBudget>, config: PoolConfig) -> Arc<Self> {
        let pool = Arc::new_cyclic(|weak: &Weak<PinnedPool>| {
            let trimmer = config.idle_timeout.map(|timeout| spawn_trimmer(weak.clone(), timeout));
            PinnedPool {
                allocator,
                budget,
                config,
                state: Mutex::new(State::default()),
                warming: Mutex::new(()),
                counters: Counters::default(),
                next_id: AtomicU64::new(0),
                next_earmark: AtomicU64::new(0),
                _trimmer: trimmer,
            }
        });
        let as_evictor: Weak<dyn Evictor> = Arc::downgrade(&pool) as Weak<dyn Evictor>;
        pool.budget.register_evictor(as_evictor, 0);
        pool
    }

    /// Has the pool's allocator pin with one of `live_gpus` (see
    /// [`HostAllocator::pin_with_one_of`]).
    pub fn pin_with_one_of(&self, live_gpus: &[usize]) {
        self.allocator.pin_with_one_of(live_gpus);
    }

    /// The budget this pool is accounted in.
    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.budget
    }

    /// What the pool's buffers are made of.
    pub fn kind(&self) -> MemoryKind {
        self.allocator.kind()
    }

    /// The size a request of `bytes` is rounded up to.
    pub fn rounded_size(&self, bytes: usize) -> Result<usize> {
        round_size(bytes.max(self.config.min_buffer))
    }

    /// Checks out a buffer of at least `bytes` without waiting for memory.
    pub fn try_checkout(self: &Arc<Self>, bytes: usize) -> Result<PoolBuffer> {
        let size = self.rounded_size(bytes)?;
        if let Some(b) = self.take_idle(size, false) {
            return Ok(b);
        }
        if let Some(b) = self.take_oversized_if_tight(size) {
            return Ok(b);
        }
        let coverage = self.budget.try_acquire(size as u64)?;
        self.allocate(size, coverage)
    }

    /// Checks out a buffer of at least `bytes`, waiting for memory if the
    /// budget is full.
    pub fn checkout_blocking(self: &Arc<Self>, bytes: usize) -> Result<PoolBuffer> {
        self.checkout_waiting(bytes, |budget, n| budget.acquire_blocking(n))
    }

    /// Like [`checkout_blocking`](Self::checkout_blocking) for memory that
    /// work already admitted needs to finish (a vector outgrowing its
    /// estimate): waits for memory but not behind queued admissions.
    pub fn checkout_urgent(self: &Arc<Self>, bytes: usize) -> Result<PoolBuffer> {
        self.checkout_waiting(bytes, |budget, n| budget.acquire_urgent_blocking(n))
    }

    /// An idle buffer, or a fresh one covered by what `acquire` waits for.
    fn checkout_waiting(
        self: &Arc<Self>,
        bytes: usize,
        acquire: impl FnOnce(&Arc<MemoryBudget>, u64) -> Result<Reservation>,
    ) -> Result<PoolBuffer> {
        let size = self.rounded_size(bytes)?;
        if let Some(b) = self.take_idle(size, false) {
            return Ok(b);
        }
        if let Some(b) = self.take_oversized_if_tight(size) {
            return Ok(b);
        }
        let coverage = acquire(&self.budget, size as u64)?;
        // Waiting may have taken long: a buffer may have come back meanwhile.
        if let Some(b) = self.take_idle(size, false) {
            return Ok(b);
        }
        self.allocate(size, coverage)
    }

    /// Checks out a buffer of at least `bytes` paid for by `funds`, a
    /// reservation its caller made for this memory (a job's working set).
    ///
    /// Nothing is counted twice: a reused idle buffer is already covered by
    /// the pool, so the matching bytes of `funds` are released; a fresh
    /// buffer takes its coverage out of `funds`. When `funds` holds too
    /// little, the buffer is waited for as an urgent admission (the work
    /// was admitted already): a buffer of its size coming back is handed to
    /// it, or the budget grants a fresh one.
    pub fn checkout_funded(self: &Arc<Self>, bytes: usize, funds: &mut Reservation) -> Result<PoolBuffer> {
        if !Arc::ptr_eq(funds.budget(), &self.budget) {
            return Err(Error::ForeignReservation);
        }
        let size = self.rounded_size(bytes)?;
        // Set aside for this work at its admission: covered, and not in `funds`.
        if let Some(b) = funds.tie.as_ref().and_then(|e| self.take_earmarked(e.key(), size)) {
            return Ok(b);
        }
        if let Some(b) = self.take_idle(size, false) {
            funds.release(size as u64);
            return Ok(b);
        }
        let coverage = funds.split(size as u64);
        let short = size as u64 - coverage.bytes();
        if short > 0 {
            if let Some(b) = self.take_oversized_if_tight(size) {
                // `coverage` drops back into the budget: the old buffer is covered.
                return Ok(b);
            }
            // The caller's work was admitted with these funds: topping them
            // up must not queue behind other admissions. Through the pool,
            // not the budget alone: a kept buffer of this size returned
            // while it waits stays idle under pressure, and a wait for
            // budget only would not end while kept buffers make up the rest
            // (a device lane whose preparation set was in use, say).
            drop(coverage);
            let mut topped = self.admit_blocking(&[size], size as u64, Rank::URGENT)?;
            return self.checkout_funded(size, &mut topped);
        }
        self.allocate(size, coverage)
    }

    /// Frees idle buffers, largest first, until at least `bytes` are freed
    /// or none is left. Returns the bytes freed.
    pub fn shrink(&self, bytes: u64) -> u64 {
        self.shrink_beyond(bytes, |_| BTreeMap::new())
    }

    /// Like [`shrink`](Self::shrink), leaving the buffers kept sets ask for
    /// (what the budget's eviction frees).
    fn shrink_unkept(&self, bytes: u64) -> u64 {
        self.shrink_beyond(bytes, State::kept_counts)
    }

    /// Like [`shrink`](Self::shrink), leaving per size the buffers `leave`
    /// counts.
    fn shrink_beyond(&self, bytes: u64, leave: impl Fn(&State) -> BTreeMap<usize, usize>) -> u64 {
        let victims = {
            let mut s = self.lock();
            // A buffer whose fence completed since the last offer goes to a
            // waiting admission, not to the allocator: freed here, it would
            // be pinned again by that admission.
            self.offer_locked(&mut s);
            s.collect_fenced();
            let mut spare = s.spare_beyond(&leave(&s));
            let mut victims = Vec::new();
            let mut freed = 0u64;
            let keys: Vec<(usize, u64)> = s.idle.keys().rev().copied().collect();
            for key in keys {
                if freed >= bytes {
                    break;
                }
                match spare.get_mut(&key.0) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => continue,
                }
                let idle = s.idle.remove(&key).expect("key just listed");
                freed += key.0 as u64;
                s.forget_block(key.0);
                victims.push(idle.block);
            }
            s.allocated -= freed;
            victims
        };
        // Free outside the lock: releasing pinned memory can take long.
        self.free(victims)
    }

    /// Frees every idle buffer. Returns the bytes freed.
    pub fn clear_idle(&self) -> u64 {
        self.shrink(u64::MAX)
    }

    /// Frees buffers idle for longer than the configured timeout. Called by
    /// the trimmer thread; callable at any time.
    pub fn trim_idle(&self) -> u64 {
        let Some(timeout) = self.config.idle_timeout else {
            return 0;
        };
        self.trim_idle_older_than(timeout)
    }

    /// Frees buffers idle for longer than `age`, except those the warm sets
    /// keep. Returns the bytes freed.
    pub fn trim_idle_older_than(&self, age: Duration) -> u64 {
        let victims = {
            let mut s = self.lock();
            s.collect_fenced();
            let now = Instant::now();
            let mut spare = s.spare_beyond(&s.warm_counts());
            let old: Vec<(usize, u64)> = s
                .idle
                .iter()
                .filter(|(_, i)| now.duration_since(i.since) >= age)
                .map(|(k, _)| *k)
                .filter(|(len, _)| match spare.get_mut(len) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        true
                    }
                    _ => false,
                })
                .collect();
            let victims: Vec<Block> = old.iter().map(|k| s.idle.remove(k).expect("listed").block).collect();
            for (len, _) in &old {
                s.forget_block(*len);
            }
            s.allocated -= old.iter().map(|(len, _)| *len as u64).sum::<u64>();
            victims
        };
        self.free(victims)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> PoolStats {
        let mut s = self.lock();
        s.collect_fenced();
        let (warm_bytes, warm_ready_bytes) = s.warm_bytes();
        let c = &self.counters;
        PoolStats {
            kind: self.allocator.kind(),
            allocated_bytes: s.allocated,
            idle_bytes: s.idle_bytes(),
            checked_out_bytes: s.checked_out,
            fenced_bytes: s.fenced.iter().map(|f| f.block.mem.len() as u64).sum(),
            idle_buffers: s.idle.len(),
            earmarked_bytes: s.earmarked.iter().map(|e| e.block.mem.len() as u64).sum(),
            handed_over: c.handed_over.load(Ordering::Relaxed),
            waiting_admissions: s.wanting.len(),
            warm_bytes,
            warm_ready_bytes,
            kept_bytes: s.kept_bytes(),
            checked_out_buffers: s.checked_out_buffers,
            reuse_hits: c.reuse_hits.load(Ordering::Relaxed),
            fresh_allocations: c.fresh_allocations.load(Ordering::Relaxed),
            alloc_time: Duration::from_nanos(c.alloc_nanos.load(Ordering::Relaxed)),
            lane_allocations: c.lane_allocations.load(Ordering::Relaxed),
            lane_alloc_time: Duration::from_nanos(c.lane_alloc_nanos.load(Ordering::Relaxed)),
            freed_buffers: c.freed_buffers.load(Ordering::Relaxed),
            freed_bytes: c.freed_bytes.load(Ordering::Relaxed),
            spills: c.spills.load(Ordering::Relaxed),
            spill_bytes_copied: c.spill_bytes.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn record_spill(&self, bytes_copied: u64) {
        self.counters.spills.fetch_add(1, Ordering::Relaxed);
        self.counters.spill_bytes.fetch_add(bytes_copied, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().recover()
    }

    /// Best fit among idle buffers no larger than `max_oversize × size`
    /// (any size when `any_size`).
    fn take_idle(self: &Arc<Self>, size: usize, any_size: bool) -> Option<PoolBuffer> {
        let limit = if any_size { usize::MAX } else { self.fit_limit(size) };
        let mut s = self.lock();
        s.collect_fenced();
        let key = s.best_idle(size, limit)?;
        let idle = s.idle.remove(&key).expect("key just found");
        Some(self.reuse(s, idle.block))
    }

    /// Checks out `block`, a buffer the pool held (idle or set aside) and
    /// took out of `s`.
    fn reuse(self: &Arc<Self>, mut s: MutexGuard<'_, State>, block: Block) -> PoolBuffer {
        s.checked_out += block.mem.len() as u64;
        s.checked_out_buffers += 1;
        drop(s);
        self.counters.reuse_hits.fetch_add(1, Ordering::Relaxed);
        PoolBuffer::new(Arc::clone(self), block)
    }

    /// The largest buffer that serves a request of `size` bytes.
    fn fit_limit(&self, size: usize) -> usize {
        ((size as f64) * self.config.max_oversize) as usize
    }

    /// When the budget cannot fund a fresh buffer without evicting, a larger
    /// idle buffer is better than evicting it and allocating anew.
    fn take_oversized_if_tight(self: &Arc<Self>, size: usize) -> Option<PoolBuffer> {
        let tight = self.budget.has_waiters() || self.budget.available() < size as u64;
        if tight { self.take_idle(size, true) } else { None }
    }

    fn allocate(self: &Arc<Self>, size: usize, coverage: Reservation) -> Result<PoolBuffer> {
        debug_assert_eq!(coverage.bytes(), size as u64);
        let started = Instant::now();
        let mem = HostMemory::allocate(&self.allocator, size)?;
        let nanos = started.elapsed().as_nanos() as u64;
        self.counters.alloc_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.counters.fresh_allocations.fetch_add(1, Ordering::Relaxed);
        if DEVICE_LANE.with(Cell::get) {
            self.counters.lane_allocations.fetch_add(1, Ordering::Relaxed);
            self.counters.lane_alloc_nanos.fetch_add(nanos, Ordering::Relaxed);
            tracing::debug!(bytes = size, ms = nanos / 1_000_000, "fresh pinning on a device lane");
        }
        tracing::debug!(bytes = size, kind = %self.allocator.kind(), ms = nanos / 1_000_000, "pool allocated a buffer");
        let block = Block {
            mem,
            _coverage: coverage,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
        };
        let mut s = self.lock();
        s.allocated += size as u64;
        *s.held.entry(size).or_insert(0) += 1;
        s.checked_out += size as u64;
        s.checked_out_buffers += 1;
        drop(s);
        Ok(PoolBuffer::new(Arc::clone(self), block))
    }

    /// Takes a buffer back from a dropped [`PoolBuffer`]; frees it rather
    /// than keeping it idle when `discard` is set or others wait for memory.
    fn give_back(&self, block: Block, fence: Option<Box<dyn UseFence>>, discard: bool) {
        let len = block.mem.len() as u64;
        let pressure = self.budget.has_waiters();
        let mut s = self.lock();
        s.checked_out -= len;
        s.checked_out_buffers -= 1;
        let victim = match fence {
            Some(fence) if !fence.is_complete() => {
                s.fenced.push(Fenced { block, fence });
                None
            }
            _ => self.place(&mut s, block, discard, pressure),
        };
        drop(s);
        self.free(victim.into_iter().collect());
    }

    /// Puts a buffer nobody uses where it belongs: to an admission waiting
    /// for one of its size, idle, or — when `discard` is set or others wait
    /// for memory (and no kept set needs it) — out of the pool, returned
    /// for the caller to free outside the lock.
    fn place(&self, s: &mut State, block: Block, discard: bool, pressure: bool) -> Option<Block> {
        let len = block.mem.len();
        if discard {
            return Some(s.drop_block(block));
        }
        let block = self.hand_over(s, block)?;
        if pressure && !s.all_kept(len) {
            return Some(s.drop_block(block));
        }
        s.put_idle(block, Instant::now());
        None
    }

    fn free(&self, blocks: Vec<Block>) -> u64 {
        let bytes: u64 = blocks.iter().map(|b| b.mem.len() as u64).sum();
        let count = blocks.len() as u64;
        // Counted once gone (memory and budget coverage released), so that
        // whoever sees them counted also sees the budget lower.
        drop(blocks);
        if count > 0 {
            self.counters.freed_buffers.fetch_add(count, Ordering::Relaxed);
            self.counters.freed_bytes.fetch_add(bytes, Ordering::Relaxed);
            tracing::debug!(buffers = count, bytes, "pool freed idle buffers");
        }
        bytes
    }
}

impl Evictor for PinnedPool {
    fn name(&self) -> &str {
        "pinned-pool"
    }

    fn evict(&self, bytes: u64, rank: Rank) -> u64 {
        // Idle buffers are idle for everyone. Buffers an admission at the
        // head of the queue waits for go to it (they lower its request),
        // those set aside for admissions behind it are taken back; the rest
        // is freed as asked, less what the buffers handed over lowered the
        // requests by (computed before, `bytes` would also free a buffer
        // that was handed over, used and returned meanwhile).
        let (lowered, raised) = self.rebalance();
        let wanted = bytes.saturating_add(raised).saturating_sub(lowered);
        let mut freed = self.shrink_unkept(wanted);
        if freed < wanted {
            freed += self.release_oversized();
        }
        if freed < wanted && rank >= self.budget.reserve_rank() {
            // Urgent work goes before background work's preparation
            // buffers: the device lanes' sets give way (the urgent kept sets
            // stay). Left in place, a WindowPoSt stream at 15 GiB free
            // waited forever beside three 4.8 GB lane sets (H100,
            // 2026-12-07).
            freed += self.shrink_beyond(wanted - freed, |s| s.counts(|set| set.hold == warm::Hold::Kept));
        }
        freed
    }
}

impl Drop for PinnedPool {
    fn drop(&mut self) {
        // Buffers the device may still read must outlive its reads.
        let s = self.state.get_mut().recover();
        for f in s.fenced.drain(..) {
            f.fence.wait();
        }
    }
}

fn spawn_trimmer(pool: Weak<PinnedPool>, timeout: Duration) -> mpsc::Sender<()> {
    let (stop, stopped) = mpsc::channel::<()>();
    let tick = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
    let spawned = std::thread::Builder::new().name("pool-trimmer".into()).spawn(move || {
        while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(tick) {
            let Some(pool) = pool.upgrade() else { break };
            pool.trim_idle();
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("could not start the pool's idle trimmer ({e}); idle buffers are freed only on demand");
    }
    stop
}

/// Rounds `bytes` up to whole pages and to one of eight size classes per
/// power of two (at most 12.5% larger than asked).
fn round_size(bytes: usize) -> Result<usize> {
    let bytes = bytes.max(PAGE);
    let log2 = usize::BITS - 1 - bytes.leading_zeros();
    let step = (1usize << log2.saturating_sub(3)).max(PAGE);
    bytes
        .checked_next_multiple_of(step)
        .ok_or(Error::CapacityOverflow("pool buffer size"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MIB;

    #[test]
    fn sizes_round_to_classes() {
        assert_eq!(round_size(1).unwrap(), PAGE);
        assert_eq!(round_size(PAGE + 1).unwrap(), 2 * PAGE);
        // 8 classes per power of two: 1 MiB + 1 rounds to 1.125 MiB.
        assert_eq!(round_size(MIB + 1).unwrap(), MIB + MIB / 8);
        assert_eq!(round_size(3 * MIB - 5).unwrap(), 3 * MIB);
        assert_eq!(round_size(4096 * MIB - 1).unwrap(), 4096 * MIB);
        assert_eq!(round_size(4096 * MIB + 1).unwrap(), 4608 * MIB);
        // Similar sizes share a class.
        assert_eq!(round_size(100 * MIB).unwrap(), round_size(97 * MIB).unwrap());
        assert!(round_size(usize::MAX).is_err());
        for n in [1usize, 5000, 70_000, 3 << 20, 1 << 33] {
            let r = round_size(n).unwrap();
            assert!(r >= n && r.is_multiple_of(PAGE) && (r as f64) < n as f64 * 1.126 + PAGE as f64);
        }
    }
}
