//! The planner's decisions: the kinds with work, most urgent first; for
//! each, what it needs in memory (its recording, its parameter sections,
//! its partitions' working sets), taken from free memory or from what may
//! be evicted; the first need that cannot be met stops everything behind
//! it, as the budget's order does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod prefetch;
mod victims;

use super::state::{KindCosts, KindState, PartitionState, Residency, State, Where};
use super::{Action, Plan, Policy, WaitReason};
use crate::Priority;

/// The plan for `state`, under `policy`, from the kinds' `costs`.
pub fn plan(costs: &BTreeMap<String, KindCosts>, policy: &Policy, state: &State) -> Plan {
    let mut d = Decider {
        costs,
        policy,
        s: state,
        kinds: state.kinds.clone(),
        used: state.used(costs),
        admitted: BTreeSet::new(),
        refused: BTreeSet::new(),
        blocked: None,
        giving_way: nothing_in_flight(state, policy),
        plan: Plan::default(),
    };
    for (kind, priority) in d.kinds_by_demand() {
        d.serve(&kind, priority);
    }
    d.spare_recordings();
    d.prefetch();
    d.in_flight_waits();
    d.plan
}

/// Whether nothing in flight will give memory back or change what is
/// resident: no load runs, and every partition is queued, or admitted and
/// stuck (its parameters absent, nobody loading them, and it may not
/// synthesize without them). An admitted partition that can go on is in
/// flight: it synthesizes and proves, and its memory comes back.
fn nothing_in_flight(s: &State, policy: &Policy) -> bool {
    s.loads_running == 0
        && s.partitions.iter().all(|p| match p.at {
            Where::Queued => true,
            Where::Admitted => {
                !policy.synthesize_while_loading
                    && s.kinds
                        .get(&p.kind)
                        .is_some_and(|k| k.sections.contains(&Residency::Absent))
            }
            _ => false,
        })
}

/// What taking memory for a need came to.
enum Taken {
    Yes,
    /// It waits (the reason is noted as what blocks everything after).
    No,
    /// It never fits: more than the budget gives its priority, or more
    /// than nothing in flight will ever free.
    Never {
        needed: u64,
        limit: u64,
    },
}

struct Decider<'a> {
    costs: &'a BTreeMap<String, KindCosts>,
    policy: &'a Policy,
    s: &'a State,
    /// Residency as the plan leaves it.
    kinds: BTreeMap<String, KindState>,
    /// Bytes held once the plan's actions are done.
    used: u64,
    /// Partitions this plan admits, and those it refuses.
    admitted: BTreeSet<u64>,
    refused: BTreeSet<u64>,
    /// The first need that could not be met, and why: nothing after it is
    /// granted (`None` for a load rather than a partition).
    blocked: Option<(Option<u64>, WaitReason)>,
    /// Nothing in flight will give memory back: what is kept for work to
    /// come gives way to the work that is here.
    giving_way: bool,
    plan: Plan,
}

impl Decider<'_> {
    /// Kinds with work (or kept resident), most urgent first, then by the
    /// arrival of their most urgent work.
    fn kinds_by_demand(&self) -> Vec<(String, Priority)> {
        let mut demand: BTreeMap<&str, (Priority, Duration)> = BTreeMap::new();
        for p in self.s.partitions.iter().filter(|p| !self.refused.contains(&p.id)) {
            let e = demand.entry(&p.kind).or_insert((p.priority, p.arrived));
            if p.priority > e.0 || (p.priority == e.0 && p.arrived < e.1) {
                *e = (p.priority, p.arrived);
            }
        }
        if self.policy.keep_critical_resident {
            for (kind, c) in self.costs {
                if c.priority == Priority::Critical {
                    demand.entry(kind).or_insert((c.priority, Duration::ZERO));
                }
            }
        }
        let mut kinds: Vec<(&str, (Priority, Duration))> = demand.into_iter().collect();
        kinds.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.1.1.cmp(&b.1.1)).then(a.0.cmp(b.0)));
        kinds.into_iter().map(|(k, (p, _))| (k.to_string(), p)).collect()
    }

    fn kind(&mut self, kind: &str) -> &mut KindState {
        let sections = self.costs.get(kind).map_or(0, |c| c.sections.len());
        self.kinds
            .entry(kind.to_string())
            .or_insert_with(|| KindState::absent(sections))
    }

    /// Serves one kind: its recording, its parameters and its queued
    /// partitions, in that order.
    fn serve(&mut self, kind: &str, priority: Priority) {
        let costs = self.costs;
        let Some(c) = costs.get(kind) else {
            return;
        };
        let mut queued: Vec<&PartitionState> = self
            .s
            .partitions
            .iter()
            .filter(|p| p.kind == kind && p.at == Where::Queued)
            .collect();
        queued.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then(a.arrived.cmp(&b.arrived))
                .then(a.id.cmp(&b.id))
        });
        let mut never = None;
        self.kind(kind);
        if self.policy.evict_sections {
            self.make_room(kind, priority, c, &queued);
        }
        // The recording is wanted while partitions of the kind are still to
        // synthesize; after that it may go, and come back by prefetch.
        let to_synthesize = self
            .s
            .partitions
            .iter()
            .any(|p| p.kind == kind && matches!(p.at, Where::Queued | Where::Admitted));
        if c.recording_bytes > 0
            && to_synthesize
            && self.kind(kind).recording == Residency::Absent
            && self.policy.recordings_first
        {
            match self.take(kind, priority, c.recording_bytes, None) {
                Taken::Yes => {
                    self.kind(kind).recording = Residency::Loading;
                    self.plan.actions.push(Action::LoadRecording { kind: kind.into() });
                }
                Taken::No => {}
                Taken::Never { needed, limit } => never = Some((needed, limit)),
            }
        }
        let missing = self.missing(kind, c);
        if self.policy.load_ahead {
            for &i in &missing {
                match self.take(kind, priority, c.sections[i], None) {
                    Taken::Yes => self.load(kind, i),
                    Taken::No => break,
                    Taken::Never { needed, limit } => {
                        never = Some((needed, limit));
                        break;
                    }
                }
            }
        }
        if let Some((needed, limit)) = never {
            for p in queued {
                self.refuse(p.id, needed, limit);
            }
            return;
        }
        self.admit_queued(kind, c, &queued);
    }

    /// `kind`'s absent sections that work in flight or to come still
    /// reads (not those its last partition is past).
    fn missing(&self, kind: &str, c: &KindCosts) -> Vec<usize> {
        let k = &self.kinds[kind];
        let past = if self.policy.release_sections_early {
            k.released
        } else {
            0
        };
        (past..c.sections.len())
            .filter(|&i| k.sections[i] == Residency::Absent)
            .collect()
    }

    fn refuse(&mut self, partition: u64, needed: u64, limit: u64) {
        self.refused.insert(partition);
        self.plan.actions.push(Action::Refuse {
            partition,
            needed,
            limit,
        });
    }

    /// Before `kind`'s needs are taken one by one: when they do not fit
    /// together, evicts at once what covers all of them, so that the
    /// choice of sections is made for the whole shortfall, not need by
    /// need (which evicted 33 GiB where 24 would do).
    fn make_room(&mut self, kind: &str, priority: Priority, c: &KindCosts, queued: &[&PartitionState]) {
        if self.blocked.is_some() {
            return;
        }
        let k = &self.kinds[kind];
        let mut need = 0;
        if self.policy.recordings_first && k.recording == Residency::Absent && !queued.is_empty() {
            need += c.recording_bytes;
        }
        need += self.missing(kind, c).iter().map(|&i| c.sections[i]).sum::<u64>();
        let ahead = self
            .s
            .partitions
            .iter()
            .filter(|p| p.kind == kind && matches!(p.at, Where::Admitted | Where::Synthesizing | Where::Synthesized))
            .count();
        let admissible = if priority.is_urgent() {
            queued.len()
        } else {
            queued.len().min(self.policy.background_ahead.saturating_sub(ahead))
        };
        need += admissible as u64 * c.partition_bytes;
        let limit = self.s.budget - if priority.is_urgent() { 0 } else { self.s.reserve };
        let free = limit.saturating_sub(self.used);
        if need > free
            && need <= limit
            && let Ok(victims) = self.victims(kind, priority, need - free)
        {
            for v in victims {
                self.evict(v);
            }
        }
    }

    /// Admits `kind`'s queued partitions in order while memory and the
    /// policy allow; the others get their reason.
    fn admit_queued(&mut self, kind: &str, c: &KindCosts, queued: &[&PartitionState]) {
        let mut ahead = self
            .s
            .partitions
            .iter()
            .filter(|p| p.kind == kind && matches!(p.at, Where::Admitted | Where::Synthesizing | Where::Synthesized))
            .count();
        for p in queued {
            if let Some((first, reason)) = &self.blocked {
                let reason = match first {
                    Some(f) if *f != p.id => WaitReason::Behind { partition: *f },
                    _ => reason.clone(),
                };
                self.plan.waits.push((p.id, reason));
                continue;
            }
            if !p.priority.is_urgent() && ahead >= self.policy.background_ahead {
                self.plan.waits.push((p.id, WaitReason::Turn));
                continue;
            }
            let k = self.kind(kind);
            let loading = k.sections.contains(&Residency::Loading);
            let missing: Vec<usize> = (0..c.sections.len())
                .filter(|&i| k.sections[i] == Residency::Absent)
                .collect();
            // Without loading ahead, the first partition's admission pays
            // for the load; the others wait for it. Loading ahead without
            // synthesizing meanwhile, a partition is admitted once every
            // section is at least loading.
            let carries = !self.policy.load_ahead && !missing.is_empty();
            let waits_for_params = if self.policy.load_ahead {
                !self.policy.synthesize_while_loading && !missing.is_empty()
            } else {
                loading
            };
            if waits_for_params {
                self.plan.waits.push((p.id, WaitReason::Parameters));
                continue;
            }
            let load: u64 = if carries {
                missing.iter().map(|&i| c.sections[i]).sum()
            } else {
                0
            };
            match self.take(kind, p.priority, c.partition_bytes + load, Some(p.id)) {
                Taken::Yes => {
                    if carries {
                        for &i in &missing {
                            self.load(kind, i);
                        }
                    }
                    self.admitted.insert(p.id);
                    self.plan.actions.push(Action::Admit { partition: p.id });
                    ahead += 1;
                }
                Taken::No => {
                    let reason = self.blocked.as_ref().map(|b| b.1.clone()).expect("noted");
                    self.plan.waits.push((p.id, reason));
                }
                Taken::Never { needed, limit } => self.refuse(p.id, needed, limit),
            }
        }
    }

    fn load(&mut self, kind: &str, section: usize) {
        self.kind(kind).sections[section] = Residency::Loading;
        self.plan.actions.push(Action::Load {
            kind: kind.into(),
            section,
        });
    }

    /// Takes `bytes` for `kind`'s work of `priority` (a partition's
    /// admission when `partition` is given, a load otherwise): from free
    /// memory, or from what may be evicted.
    fn take(&mut self, kind: &str, priority: Priority, bytes: u64, partition: Option<u64>) -> Taken {
        let limit = self.s.budget - if priority.is_urgent() { 0 } else { self.s.reserve };
        if bytes > limit {
            return Taken::Never { needed: bytes, limit };
        }
        if self.blocked.is_some() {
            return Taken::No;
        }
        let free = limit.saturating_sub(self.used);
        if bytes <= free {
            self.used += bytes;
            // What this plan starts is in flight.
            self.giving_way = false;
            return Taken::Yes;
        }
        match self.victims(kind, priority, bytes - free) {
            Ok(victims) => {
                for v in victims {
                    self.evict(v);
                }
                self.used += bytes;
                self.giving_way = false;
                Taken::Yes
            }
            // Nothing in flight, nothing kept for a while: it never fits.
            Err(None) if self.giving_way => Taken::Never { needed: bytes, limit },
            Err(protected) => {
                let reason = protected.unwrap_or(WaitReason::Memory { needed: bytes, free });
                if let WaitReason::IdleParameters { until, .. } | WaitReason::Burst { until, .. } = &reason {
                    self.plan.wake_at = Some(self.plan.wake_at.map_or(*until, |w| w.min(*until)));
                }
                self.blocked = Some((partition, reason));
                Taken::No
            }
        }
    }

    fn evict(&mut self, v: Action) {
        match &v {
            Action::Evict { kind, section } => {
                let bytes = self.costs[kind].sections[*section];
                self.kind(kind).sections[*section] = Residency::Absent;
                self.used -= bytes;
            }
            Action::EvictRecording { kind } => {
                let bytes = self.costs[kind].recording_bytes;
                self.kind(kind).recording = Residency::Absent;
                self.used -= bytes;
            }
            _ => unreachable!("only evictions"),
        }
        self.plan.actions.push(v);
    }

    /// Why each partition in flight, not on the device and not working,
    /// waits.
    fn in_flight_waits(&mut self) {
        for p in &self.s.partitions {
            let Some(k) = self.kinds.get(&p.kind) else { continue };
            let reason = match p.at {
                Where::Admitted if !self.policy.synthesize_while_loading && !k.params_resident() => {
                    WaitReason::Parameters
                }
                Where::Admitted if k.recording == Residency::Loading => WaitReason::Recording,
                Where::Admitted => WaitReason::Synthesis,
                Where::Synthesized if !k.params_resident() => WaitReason::Parameters,
                Where::Synthesized => WaitReason::Device,
                _ => continue,
            };
            self.plan.waits.push((p.id, reason));
        }
    }
}
