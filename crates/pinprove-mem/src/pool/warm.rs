//! Warm and kept sets: buffers the pool prepares ahead of demand, out of
//! spare budget, and keeps past the idle timeout (a kept set also while
//! others wait for memory).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{PinnedPool, State};
use crate::Result;
use crate::sync::Recover;

/// What [`PinnedPool::keep_warm`] did. A call makes up for what every warm
/// set lacks, not only its own: allocated and missing bytes count all sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WarmReport {
    /// Bytes of the set asked for.
    pub wanted_bytes: u64,
    /// Bytes allocated now, for any warm set (the rest was held already, or
    /// is missing).
    pub allocated_bytes: u64,
    /// Bytes of any warm set the budget could not spare.
    pub missing_bytes: u64,
}

pub(super) struct WarmSet {
    /// Buffers per size.
    pub(super) sizes: BTreeMap<usize, usize>,
    pub(super) hold: Hold,
}

/// How a warm set holds its buffers; each kind also does what the one
/// before it does.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Hold {
    /// Past the idle timeout (see [`PinnedPool::keep_warm`]).
    Warm,
    /// Also under pressure (see [`PinnedPool::keep_reserved`]).
    Kept,
    /// Also out of smaller requests' reach off device lanes (see
    /// [`PinnedPool::keep_for_lanes`]).
    Lanes,
}

impl State {
    /// Buffers per size all warm sets together ask for.
    pub(super) fn warm_counts(&self) -> BTreeMap<usize, usize> {
        self.counts(|_| true)
    }

    /// Buffers per size the kept sets ask for.
    pub(super) fn kept_counts(&self) -> BTreeMap<usize, usize> {
        self.counts(|set| set.hold >= Hold::Kept)
    }

    /// Buffers per size the lane sets ask for.
    pub(super) fn lane_counts(&self) -> BTreeMap<usize, usize> {
        self.counts(|set| set.hold == Hold::Lanes)
    }

    pub(super) fn counts(&self, which: impl Fn(&WarmSet) -> bool) -> BTreeMap<usize, usize> {
        let mut all = BTreeMap::new();
        for set in self.warm.values().filter(|set| which(set)) {
            for (&size, &n) in &set.sizes {
                *all.entry(size).or_insert(0) += n;
            }
        }
        all
    }

    /// Per size, how many of the buffers held are beyond `wanted`: those
    /// that may be freed.
    pub(super) fn spare_beyond(&self, wanted: &BTreeMap<usize, usize>) -> BTreeMap<usize, usize> {
        self.held
            .iter()
            .map(|(&size, &n)| (size, n.saturating_sub(wanted.get(&size).copied().unwrap_or(0))))
            .collect()
    }

    /// Whether every buffer of `size` the pool holds is one a kept set
    /// asks for.
    pub(super) fn all_kept(&self, size: usize) -> bool {
        self.claimed_whole(size, &self.kept_counts())
    }

    /// Whether every buffer of `size` the pool holds is one that sets
    /// asking for `wanted` (per size) ask for.
    pub(super) fn claimed_whole(&self, size: usize, wanted: &BTreeMap<usize, usize>) -> bool {
        let held = self.held.get(&size).copied().unwrap_or(0);
        held > 0 && held <= wanted.get(&size).copied().unwrap_or(0)
    }

    /// Bytes the kept sets (the lane sets among them) ask for, held or not.
    pub(super) fn kept_bytes(&self) -> u64 {
        self.kept_counts().iter().map(|(&size, &n)| (size * n) as u64).sum()
    }

    /// The warm sets' bytes, and how many of them are held now.
    pub(super) fn warm_bytes(&self) -> (u64, u64) {
        self.warm_counts().iter().fold((0, 0), |(want, have), (&size, &n)| {
            let held = self.held.get(&size).copied().unwrap_or(0).min(n);
            (want + (size * n) as u64, have + (size * held) as u64)
        })
    }
}

impl PinnedPool {
    /// Keeps the buffers of `sizes` (requests in bytes, rounded as
    /// checkouts are) ready under `name`, replacing what `name` asked for
    /// before: missing buffers are allocated now, out of spare budget only
    /// (nothing is evicted and nobody waiting is overtaken), and held idle
    /// past the idle timeout. Buffers in use count as held. Call it from a
    /// thread that may wait: pinning takes long, and a warm-set call waits
    /// for another one in progress. Returns what was asked, made and left
    /// missing.
    pub fn keep_warm(self: &Arc<Self>, name: &str, sizes: &[usize]) -> Result<WarmReport> {
        self.warm_set(name, sizes, Hold::Warm)
    }

    /// Like [`keep_warm`](Self::keep_warm), and these buffers stay while
    /// others wait for memory: the budget's eviction leaves them and a
    /// returned one is kept idle, not freed. For work that must start at
    /// once whatever else runs (a WinningPoSt's buffers, what a device lane
    /// takes to prepare a proof), and no larger than that: their bytes are
    /// out of everyone else's reach for as long as the set lasts.
    pub fn keep_reserved(self: &Arc<Self>, name: &str, sizes: &[usize]) -> Result<WarmReport> {
        self.warm_set(name, sizes, Hold::Kept)
    }

    /// Like [`keep_reserved`](Self::keep_reserved), for what device lanes
    /// (threads marked with [`mark_device_lane`](super::mark_device_lane))
    /// ask for: besides, off a lane, a request of a smaller size does not
    /// take these buffers (one of their own size still does). For buffers
    /// whose sizes were learned from the lanes' own requests, such as a
    /// backend's preparation buffers.
    pub fn keep_for_lanes(self: &Arc<Self>, name: &str, sizes: &[usize]) -> Result<WarmReport> {
        self.warm_set(name, sizes, Hold::Lanes)
    }

    fn warm_set(self: &Arc<Self>, name: &str, sizes: &[usize], hold: Hold) -> Result<WarmReport> {
        // One call at a time: each makes up what every set lacks, and two
        // at once (a circuit's warm set and a backend's lane set after a
        // first proof) would both pin the same missing buffers.
        let _one = self.warming.lock().recover();
        let mut set: BTreeMap<usize, usize> = BTreeMap::new();
        for &b in sizes {
            *set.entry(self.rounded_size(b)?).or_insert(0) += 1;
        }
        let wanted: u64 = set.iter().map(|(&size, &n)| (size * n) as u64).sum();
        let missing: Vec<(usize, bool)> = {
            let mut s = self.lock();
            if set.is_empty() {
                s.warm.remove(name);
            } else {
                s.warm.insert(name.to_string(), WarmSet { sizes: set, hold });
            }
            // Held buffers serve the kept sets first; what those still lack
            // may come out of the reserve (see below).
            let warm = s.warm_counts();
            let kept = s.counts(|set| set.hold == Hold::Kept);
            warm.iter()
                .flat_map(|(&size, &n)| {
                    let held = s.held.get(&size).copied().unwrap_or(0);
                    let for_kept = kept.get(&size).copied().unwrap_or(0).saturating_sub(held);
                    let missing = n.saturating_sub(held);
                    std::iter::repeat_n((size, true), for_kept.min(missing))
                        .chain(std::iter::repeat_n((size, false), missing.saturating_sub(for_kept)))
                })
                .collect()
        };
        let mut report = WarmReport {
            wanted_bytes: wanted,
            ..WarmReport::default()
        };
        for (size, kept) in missing {
            // Kept sets are urgent work's buffers: they may take the reserve
            // (on the H100 with 15 GiB of its memory free, a WinningPoSt
            // circuit registered while a PoRep stream filled the rest of the
            // budget got no kept set, pinned its buffers afresh and spent
            // 2.2-2.3 s in synthesis, against 0.36 s with buffers at hand).
            let spare = if kept {
                self.budget.try_acquire_reserved(size as u64)
            } else {
                self.budget.try_acquire_spare(size as u64)
            };
            let for_lanes = || (hold == Hold::Lanes).then(|| self.room_for_lanes(size)).flatten();
            let Some(coverage) = spare.or_else(for_lanes) else {
                report.missing_bytes += size as u64;
                continue;
            };
            let buffer = self.allocate(size, coverage)?;
            report.allocated_bytes += size as u64;
            // Straight to the idle set.
            drop(buffer);
        }
        if report.missing_bytes > 0 {
            tracing::info!(
                after = name,
                missing = report.missing_bytes,
                "warm sets only partly allocated (all sets together): the budget has no more to spare"
            );
        }
        Ok(report)
    }

    /// Frees idle buffers for a lane set's missing buffer of `size` bytes:
    /// those no warm set asks for first, then those of sets not kept. A
    /// device lane's preparation goes before a synthesis's buffers kept
    /// warm: on the H200 at 2^26, a circuit's warm set took the spare
    /// budget first, three 3.75 GiB preparation buffers were left missing,
    /// and the lanes would have pinned them while the GPU waited.
    fn room_for_lanes(&self, size: usize) -> Option<crate::Reservation> {
        for leave in [State::warm_counts, State::kept_counts] {
            self.shrink_beyond((size as u64).saturating_sub(self.budget.available()), leave);
            if let Some(r) = self.budget.try_acquire_spare(size as u64) {
                return Some(r);
            }
        }
        None
    }

    /// Whether the pool holds (idle or in use) every buffer the warm set
    /// `name` asks for, counting first what the sets served before it ask
    /// of the same sizes; false for a set not known. Held buffers serve the
    /// kept sets (and the lanes') first, so such a set is held once the
    /// kept sets' buffers of its sizes are, whatever the plain warm sets
    /// lack. Counted against those too, a backend's preparation buffers of
    /// the size of a synthesis buffer never counted as held beside a
    /// circuit's warm set of many partitions that the budget could not fill,
    /// and each partition was charged its preparation again at admission.
    pub fn holds_warm_set(&self, name: &str) -> bool {
        let s = self.lock();
        let Some(set) = s.warm.get(name) else {
            return false;
        };
        let ahead = if set.hold >= Hold::Kept {
            s.kept_counts()
        } else {
            s.warm_counts()
        };
        set.sizes
            .keys()
            .all(|size| s.held.get(size).copied().unwrap_or(0) >= ahead.get(size).copied().unwrap_or(0))
    }

    /// Bytes the kept sets (those of [`keep_reserved`](Self::keep_reserved)
    /// and [`keep_for_lanes`](Self::keep_for_lanes)) ask for, held or not:
    /// memory the budget's eviction leaves to them, so no other work can
    /// count on it.
    pub fn kept_bytes(&self) -> u64 {
        self.lock().kept_bytes()
    }

    /// Drops the warm set `name`: its buffers age out like any idle one.
    pub fn stop_warm(&self, name: &str) {
        self.lock().warm.remove(name);
    }
}
