//! The planner's decisions: the kinds with work, most urgent first; for
//! each, what it needs in memory (its recording, its parameter sections,
//! its partitions' working sets), taken from free memory or from what may
//! be evicted; the first need that cannot be met stops everything behind
//! it, as the budget's order does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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

    /// Whether `kind`'s parameters are used by a partition in flight (one
    /// synthesizing holds them unless it may synthesize while they load),
    /// or by one this plan admits.
    fn params_in_use(&self, kind: &str) -> bool {
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
    fn recording_in_use(&self, kind: &str) -> bool {
        self.s.partitions.iter().any(|p| {
            p.kind == kind && (self.admitted.contains(&p.id) || matches!(p.at, Where::Admitted | Where::Synthesizing))
        })
    }

    /// What to evict to free `short` bytes for `kind`'s work of
    /// `priority`, or why it cannot be had now (`None`: held by work in
    /// flight).
    fn victims(&self, kind: &str, priority: Priority, short: u64) -> Result<Vec<Action>, Option<WaitReason>> {
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
            if k == kind || (self.policy.keep_critical_resident && c.priority == Priority::Critical) {
                continue;
            }
            if ks.recording == Residency::Resident && c.recording_bytes > 0 && !self.recording_in_use(k) {
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
            if !self.policy.burst_window.is_zero() && c.priority.is_urgent() && priority < c.priority {
                let until = ks.last_arrival.map(|a| a + self.policy.burst_window);
                if let Some(until) = until.filter(|u| *u > now) {
                    note(WaitReason::Burst { kind: k.clone(), until });
                    continue;
                }
            }
            if self.policy.keep_idle_parameters && !priority.is_urgent() && !self.giving_way {
                let until = ks.last_used + self.policy.idle_timeout.min(c.params_load());
                if until > now {
                    note(WaitReason::IdleParameters { kind: k.clone(), until });
                    continue;
                }
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

    /// Out of spare memory only (nobody waits, nothing evicted), the
    /// recordings of kinds with work, as the engine reloads a dropped one
    /// when the planner does not keep recordings first.
    fn spare_recordings(&mut self) {
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
    fn prefetch(&mut self) {
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

/// The sections (indices into `sizes`, among `resident`) to evict to free
/// at least `short` bytes: the fewest bytes that do (then the fewest
/// sections), every subset tried (a kind has five); all of them when
/// together they do not.
fn cover(resident: &[usize], sizes: &[u64], short: u64) -> Vec<usize> {
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
