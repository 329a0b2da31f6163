//! Spare memory: recordings the engine reloads when nothing waits, and
//! what the next burst will load.

use super::Decider;
use super::victims::cover;
use crate::planner::Action;
use crate::planner::state::{KindCosts, Residency, Where};

impl Decider<'_> {
    /// Out of spare memory only (nobody waits, nothing evicted), the
    /// recordings of kinds with work, as the engine reloads a dropped one
    /// when the planner does not keep recordings first.
    pub(super) fn spare_recordings(&mut self) {
        if self.policy.recordings_first || self.blocked.is_some() {
            return;
        }
        let kinds: Vec<String> = self.kinds_by_demand().into_iter().map(|(k, _)| k).collect();
        let costs = self.costs;
        for kind in kinds {
            let c = &costs[&kind];
            let limit = self.s.budget - self.s.reserve;
            if c.recording_bytes > 0
                && self.kind(&kind).recording == Residency::Absent
                && self.used + c.recording_bytes <= limit
            {
                self.used += c.recording_bytes;
                self.kind(&kind).recording = Residency::Loading;
                self.plan.actions.push(Action::LoadRecording { kind });
            }
        }
    }

    /// With nothing waiting and nothing loading, spare memory takes the
    /// recordings and sections of kinds that had work, most urgent first
    /// (see [`Policy::prefetch`]); nothing is evicted for them.
    pub(super) fn prefetch(&mut self) {
        let loading = self.s.loads_running > 0
            || self
                .plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::Load { .. } | Action::LoadRecording { .. }));
        if !self.policy.prefetch || self.blocked.is_some() || loading {
            return;
        }
        let mut seen: Vec<(&String, &KindCosts)> = self
            .costs
            .iter()
            .filter(|(k, _)| self.kinds.get(*k).is_some_and(|k| k.last_arrival.is_some()))
            .collect();
        seen.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(b.0)));
        // Room is left for the partitions kinds with work will be admitted
        // with next: what prefetch takes, their admissions would evict
        // again (and prefetch load again).
        let mut next_admissions = 0;
        for (kind, c) in self.costs {
            // A background kind holds its partitions ahead and one on the
            // device; the room for those it does not hold yet is kept.
            let (mut held, mut queued) = (0, 0);
            for p in self.s.partitions.iter().filter(|p| &p.kind == kind) {
                match p.at {
                    Where::Queued if !self.admitted.contains(&p.id) => queued += 1,
                    _ => held += 1,
                }
            }
            let more = if c.priority.is_urgent() {
                queued
            } else {
                queued.min((self.policy.background_ahead + 1).saturating_sub(held))
            };
            next_admissions += more as u64 * c.partition_bytes;
        }
        let limit = (self.s.budget - self.s.reserve).saturating_sub(next_admissions);
        for (kind, c) in seen {
            // The recording first (the burst synthesizes from it as it
            // arrives); the sections in the room left beside it.
            let mut room = limit.saturating_sub(self.used);
            if c.recording_bytes > 0 && self.kind(kind).recording == Residency::Absent {
                // Its own sections make way for it, unless in use.
                let idle = !self.s.partitions.iter().any(|p| &p.kind == kind);
                if c.recording_bytes > room && idle {
                    let resident: Vec<usize> = (0..c.sections.len())
                        .filter(|&i| self.kind(kind).sections[i] == Residency::Resident && c.sections[i] > 0)
                        .collect();
                    let held: u64 = resident.iter().map(|&i| c.sections[i]).sum();
                    if held + room >= c.recording_bytes {
                        for i in cover(&resident, &c.sections, c.recording_bytes - room) {
                            self.evict(Action::Evict {
                                kind: kind.clone(),
                                section: i,
                            });
                        }
                        room = limit.saturating_sub(self.used);
                    }
                }
                if c.recording_bytes <= room {
                    self.used += c.recording_bytes;
                    self.kind(kind).recording = Residency::Loading;
                    self.plan.actions.push(Action::LoadRecording { kind: kind.clone() });
                    // One load at a time: the next plan goes on.
                    return;
                }
                room = room.saturating_sub(c.recording_bytes);
            }
            // The absent sections that fill the room best (all are needed
            // when the kind's work comes), the largest of them first.
            let absent: Vec<usize> = (0..c.sections.len())
                .filter(|&i| self.kind(kind).sections[i] == Residency::Absent && c.sections[i] > 0)
                .collect();
            let mut best = fill(&absent, &c.sections, room);
            best.sort_by_key(|&i| std::cmp::Reverse(c.sections[i]));
            if let Some(&i) = best.first() {
                self.used += c.sections[i];
                self.load(kind, i);
                return;
            }
        }
    }
}

/// The sections (among `absent`) whose bytes fill `room` best without
/// passing it, every subset tried.
fn fill(absent: &[usize], sizes: &[u64], room: u64) -> Vec<usize> {
    let n = absent.len().min(16);
    let mut best = (0u64, 0u32);
    for mask in 1u32..(1 << n) {
        let bytes: u64 = (0..n).filter(|b| mask & (1 << b) != 0).map(|b| sizes[absent[b]]).sum();
        if bytes <= room && bytes > best.0 {
            best = (bytes, mask);
        }
    }
    (0..n).filter(|b| best.1 & (1 << b) != 0).map(|b| absent[b]).collect()
}
