//! What may be evicted, and in which order, for a need that does not fit.

use std::time::Duration;

use super::Decider;
use crate::Priority;
use crate::planner::keep::{IdleParams, kept};
use crate::planner::state::{Residency, Where};
use crate::planner::{Action, WaitReason};

impl Decider<'_> {
    /// Whether `kind`'s parameters are used by a partition in flight (one
    /// synthesizing holds them unless it may synthesize while they load),
    /// or by one this plan admits.
    pub(super) fn params_in_use(&self, kind: &str) -> bool {
        self.s.partitions.iter().any(|p| {
            p.kind == kind
                && (self.admitted.contains(&p.id)
                    || match p.at {
                        Where::Synthesized | Where::Device => true,
                        Where::Admitted | Where::Synthesizing => !self.policy.synthesize_while_loading,
                        Where::Queued => false,
                    })
        })
    }

    /// Whether a partition admitted and not yet synthesized needs `kind`'s
    /// recording.
    pub(super) fn recording_in_use(&self, kind: &str) -> bool {
        self.s.partitions.iter().any(|p| {
            p.kind == kind && (self.admitted.contains(&p.id) || matches!(p.at, Where::Admitted | Where::Synthesizing))
        })
    }

    /// What to evict to free `short` bytes for `kind`'s work of
    /// `priority`, or why it cannot be had now (`None`: held by work in
    /// flight).
    pub(super) fn victims(
        &self,
        kind: &str,
        priority: Priority,
        short: u64,
    ) -> Result<Vec<Action>, Option<WaitReason>> {
        let now = self.s.now;
        let mut protected: Option<WaitReason> = None;
        let mut note = |r: WaitReason| {
            let until = |r: &WaitReason| match r {
                WaitReason::IdleParameters { until, .. } | WaitReason::Burst { until, .. } => *until,
                _ => Duration::MAX,
            };
            if protected.as_ref().is_none_or(|p| until(&r) < until(p)) {
                protected = Some(r);
            }
        };
        let mut recordings = Vec::new();
        let mut params: Vec<(&str, Vec<usize>, Duration)> = Vec::new();
        for (k, ks) in &self.kinds {
            let Some(c) = self.costs.get(k) else { continue };
            if k == kind {
                continue;
            }
            let critical = self.policy.keep_critical_resident && c.priority == Priority::Critical;
            if ks.recording == Residency::Resident && c.recording_bytes > 0 && !critical && !self.recording_in_use(k) {
                recordings.push(k.as_str());
            }
            let in_use = self.params_in_use(k);
            let released = if self.policy.release_sections_early {
                ks.released
            } else {
                0
            };
            let resident: Vec<usize> = (0..c.sections.len())
                .filter(|&i| ks.sections[i] == Residency::Resident && c.sections[i] > 0)
                .filter(|&i| !in_use || i < released)
                .collect();
            if resident.is_empty() {
                continue;
            }
            if in_use {
                // Only sections its last partition is done with.
                params.push((k, resident, ks.last_used));
                continue;
            }
            // A burst's parameters (not its recording: reloaded between
            // bursts, while other work proves) stay for its window.
            let idle = IdleParams {
                priority: c.priority,
                last_used: ks.last_used,
                last_arrival: ks.last_arrival,
                load_time: c.params_load(),
            };
            if let Some(reason) = kept(self.policy, k, idle, priority, now, self.giving_way) {
                note(reason);
                continue;
            }
            params.push((k, resident, ks.last_used));
        }
        params.sort_by(|a, b| a.2.cmp(&b.2).then(a.0.cmp(b.0)));
        // Recordings first: while less urgent partitions in flight will
        // soon let their parameters go, a recording (slower to load again
        // than as many bytes of parameters) is not taken for this.
        if self.policy.recordings_first
            && self.kinds.iter().any(|(k, ks)| {
                k != kind
                    && ks.sections.contains(&Residency::Resident)
                    && self.params_in_use(k)
                    && self.costs.get(k).is_some_and(|c| c.priority < priority)
            })
        {
            recordings.clear();
        }
        let mut victims = Vec::new();
        let mut freed = 0u64;
        let take_recordings = |victims: &mut Vec<Action>, freed: &mut u64| {
            for k in &recordings {
                if *freed >= short {
                    return;
                }
                *freed += self.costs[*k].recording_bytes;
                victims.push(Action::EvictRecording { kind: k.to_string() });
            }
        };
        if !self.policy.recordings_first {
            take_recordings(&mut victims, &mut freed);
        }
        for (k, resident, _) in &params {
            if freed >= short {
                break;
            }
            let sizes = &self.costs[*k].sections;
            let chosen = if self.policy.evict_sections {
                cover(resident, sizes, short - freed)
            } else {
                resident.clone()
            };
            for i in chosen {
                freed += sizes[i];
                victims.push(Action::Evict {
                    kind: k.to_string(),
                    section: i,
                });
            }
        }
        if self.policy.recordings_first {
            take_recordings(&mut victims, &mut freed);
        }
        if freed >= short { Ok(victims) } else { Err(protected) }
    }
}

/// The sections (indices into `sizes`, among `resident`) to evict to free
/// at least `short` bytes: the fewest bytes that do (then the fewest
/// sections), every subset tried (a kind has five); all of them when
/// together they do not.
pub(super) fn cover(resident: &[usize], sizes: &[u64], short: u64) -> Vec<usize> {
    let n = resident.len().min(16);
    let mut best: Option<(u64, u32, u32)> = None;
    for mask in 1u32..(1 << n) {
        let bytes: u64 = (0..n)
            .filter(|b| mask & (1 << b) != 0)
            .map(|b| sizes[resident[b]])
            .sum();
        let key = (bytes, mask.count_ones(), mask);
        if bytes >= short && best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
            best = Some(key);
        }
    }
    match best {
        Some((_, _, mask)) => (0..n).filter(|b| mask & (1 << b) != 0).map(|b| resident[b]).collect(),
        None => resident.to_vec(),
    }
}
