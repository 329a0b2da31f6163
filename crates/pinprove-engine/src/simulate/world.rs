//! The simulated machine: events on a virtual clock, the planner's plans
//! carried out with measured times.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use super::{Fullest, JobRecord, Outcome, Setup};
use crate::Phase;
use crate::planner::{self, Action, KindState, PartitionState, Residency, State, Where};
use crate::timeline::Timeline;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Setup's arrival at this index.
    Arrive(usize),
    /// A partition's synthesis ended.
    Synthesized(u64),
    /// A piece of a partition's device work ended.
    Piece(u64),
    /// The planner asked to look again.
    Wake,
}

#[derive(Debug)]
enum Loading {
    Section(String, usize),
    Recording(String),
}

struct Load {
    what: Loading,
    /// Seconds of work left, at the loader's whole speed.
    left: f64,
    started: Duration,
}

struct Part {
    job: usize,
    index: usize,
    /// Device time still to do.
    device_left: Duration,
    /// The synthesis slot it holds: (urgent, index).
    slot: Option<(bool, usize)>,
}

struct Job {
    kind: String,
    partitions: usize,
    done: usize,
    stream: Option<usize>,
}

/// Idle spells of the device shorter than this are not listed.
const IDLE_SPELL: Duration = Duration::from_secs(1);

struct OnDevice {
    partition: u64,
    since: Duration,
    piece: Duration,
}

pub(super) struct World<'a> {
    setup: &'a Setup,
    timeline: Option<&'a Timeline>,
    now: Duration,
    state: State,
    parts: BTreeMap<u64, Part>,
    jobs: Vec<Job>,
    loads: Vec<Load>,
    device: Option<OnDevice>,
    /// Busy flags of the background and the urgent synthesis slots.
    slots: [Vec<bool>; 2],
    events: BinaryHeap<Reverse<(Duration, u64, Event)>>,
    seq: u64,
    next_partition: u64,
    wake: Option<Duration>,
    /// Per kind, when its current parameter load began.
    loading_since: BTreeMap<String, Duration>,
    /// Per waiting partition, its reason and since when.
    waiting: BTreeMap<u64, (&'static str, Duration)>,
    /// When the device last became idle.
    idle_since: Duration,
    out: Outcome,
}

/// Loads finishing within this many seconds of work are done (float
/// rounding of shared progress).
const EPSILON: f64 = 1e-9;

impl<'a> World<'a> {
    pub(super) fn new(setup: &'a Setup, timeline: Option<&'a Timeline>) -> World<'a> {
        let mut kinds: BTreeMap<String, KindState> = setup
            .costs
            .iter()
            .map(|(kind, c)| (kind.clone(), KindState::absent(c.sections.len())))
            .collect();
        // Recordings made before the day, then preloads in their order, as
        // much of each as the budget holds (the rest is only known to be
        // wanted: the planner may prefetch it).
        let mut used = 0;
        for kind in &setup.recorded {
            let c = &setup.costs[kind];
            if c.recording_bytes > 0 && used + c.recording_bytes <= setup.budget {
                used += c.recording_bytes;
                kinds.get_mut(kind).expect("a kind of the day").recording = Residency::Resident;
            }
        }
        for kind in &setup.preloaded {
            let c = &setup.costs[kind];
            let k = kinds.get_mut(kind).expect("a kind of the day");
            k.last_arrival = Some(Duration::ZERO);
            if used + c.params_bytes() <= setup.budget - setup.reserve {
                used += c.params_bytes();
                k.sections.fill(Residency::Resident);
            }
        }
        let mut w = World {
            setup,
            timeline,
            now: Duration::ZERO,
            state: State {
                budget: setup.budget,
                reserve: setup.reserve,
                kinds,
                ..State::default()
            },
            parts: BTreeMap::new(),
            jobs: Vec::new(),
            loads: Vec::new(),
            device: None,
            slots: [
                vec![false; setup.synthesis_slots.max(1)],
                vec![false; setup.urgent_synthesis_slots.max(1)],
            ],
            events: BinaryHeap::new(),
            seq: 0,
            next_partition: 0,
            wake: None,
            loading_since: BTreeMap::new(),
            waiting: BTreeMap::new(),
            idle_since: Duration::ZERO,
            out: Outcome::default(),
        };
        for (i, a) in setup.arrivals.iter().enumerate() {
            w.at(a.at, Event::Arrive(i));
        }
        for (i, s) in setup.streams.iter().enumerate() {
            for _ in 0..s.in_flight {
                w.submit(&s.kind, s.partitions, Some(i));
            }
        }
        w
    }

    fn at(&mut self, t: Duration, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    pub(super) fn run(mut self) -> Outcome {
        let end = self.setup.day + self.setup.grace;
        loop {
            self.settle();
            let Some(t) = self.next_time() else { break };
            if t > end {
                self.advance_loads(end);
                self.now = end;
                break;
            }
            self.advance_loads(t);
            self.now = t;
            while let Some(Reverse((at, _, e))) = self.events.peek().copied() {
                if at > t {
                    break;
                }
                self.events.pop();
                self.handle(e);
            }
        }
        let now = self.now;
        let idle = self.setup.day.saturating_sub(self.idle_since);
        if self.device.is_none() && idle >= IDLE_SPELL {
            self.out.device_idle.push((self.idle_since, idle));
        }
        for (_, (reason, since)) in std::mem::take(&mut self.waiting) {
            *self.out.waited.entry(reason.into()).or_default() += now - since;
        }
        self.out.ended_at = now;
        self.out
    }

    fn submit(&mut self, kind: &str, partitions: usize, stream: Option<usize>) {
        let job = self.jobs.len();
        self.jobs.push(Job {
            kind: kind.into(),
            partitions,
            done: 0,
            stream,
        });
        self.out.jobs.push(JobRecord {
            kind: kind.into(),
            arrived: self.now,
            ended: None,
            refused: None,
        });
        let Some(c) = self.setup.costs.get(kind) else {
            self.out.jobs[job].refused = Some(0);
            return;
        };
        for index in 0..partitions {
            let id = self.next_partition;
            self.next_partition += 1;
            self.parts.insert(
                id,
                Part {
                    job,
                    index,
                    device_left: c.device,
                    slot: None,
                },
            );
            self.state.partitions.push(PartitionState {
                id,
                kind: kind.into(),
                priority: c.priority,
                arrived: self.now,
                at: Where::Queued,
            });
        }
        if let Some(k) = self.state.kinds.get_mut(kind) {
            k.last_arrival = Some(self.now);
        }
    }

    fn next_time(&self) -> Option<Duration> {
        let event = self.events.peek().map(|Reverse((t, _, _))| *t);
        let load = self.next_load_end();
        [event, load, self.wake].into_iter().flatten().min()
    }

    /// Indices of the loads running now: those of the most urgent kind
    /// waiting, side by side or the first of them; the others wait.
    fn running(&self) -> Vec<usize> {
        let priorities: Vec<crate::Priority> = self.loads.iter().map(|l| self.load_priority(l)).collect();
        let Some(&top) = priorities.iter().max() else {
            return Vec::new();
        };
        let mut run: Vec<usize> = (0..self.loads.len()).filter(|&i| priorities[i] == top).collect();
        if !self.setup.policy.parallel_loads {
            run.truncate(1);
        }
        run
    }

    /// A load runs at its kind's priority while work of the kind is
    /// there, at the lowest otherwise (a prefetch).
    fn load_priority(&self, l: &Load) -> crate::Priority {
        let kind = match &l.what {
            Loading::Section(k, _) | Loading::Recording(k) => k,
        };
        if self.state.partitions.iter().any(|p| &p.kind == kind) {
            self.setup.costs[kind].priority
        } else {
            crate::Priority::Low
        }
    }

    fn next_load_end(&self) -> Option<Duration> {
        let run = self.running();
        let left = run.iter().map(|&i| self.loads[i].left).min_by(f64::total_cmp)?;
        Some(self.now + Duration::from_secs_f64(left.max(0.0) * run.len() as f64))
    }

    /// Moves the loads on to `t` (never past the next load's end), ending
    /// those done.
    fn advance_loads(&mut self, t: Duration) {
        let run = self.running();
        if run.is_empty() {
            return;
        }
        let share = (t - self.now).as_secs_f64() / run.len() as f64;
        for &i in &run {
            self.loads[i].left -= share;
        }
        for i in run.into_iter().rev() {
            if self.loads[i].left <= EPSILON {
                let l = self.loads.remove(i);
                self.loaded(l, t);
            }
        }
    }

    fn loaded(&mut self, l: Load, now: Duration) {
        let (kind, lane, phase) = match &l.what {
            Loading::Section(k, _) => (k.clone(), format!("load {k}"), Phase::SrsLoad),
            Loading::Recording(k) => (k.clone(), format!("recording {k}"), Phase::Recording),
        };
        if let Some(tl) = self.timeline {
            tl.record_at(&lane, phase, l.started, now - l.started, format!("{:?}", l.what));
        }
        let Some(k) = self.state.kinds.get_mut(&kind) else {
            return;
        };
        match l.what {
            Loading::Section(_, i) => {
                k.sections[i] = Residency::Resident;
                k.last_used = now;
                if k.params_resident() {
                    *self.out.params_loads.entry(kind.clone()).or_default() += 1;
                    let since = self.loading_since.remove(&kind).unwrap_or(l.started);
                    self.out.load_spans.push((kind, since, now - since));
                }
            }
            Loading::Recording(_) => k.recording = Residency::Resident,
        }
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Arrive(i) => {
                let a = &self.setup.arrivals[i];
                self.submit(&a.kind.clone(), a.partitions, None);
            }
            Event::Synthesized(id) => {
                if let Some((urgent, slot)) = self.parts.get_mut(&id).and_then(|p| p.slot.take()) {
                    self.slots[usize::from(urgent)][slot] = false;
                }
                self.set(id, Where::Synthesized);
            }
            Event::Piece(id) => self.piece_ended(id),
            Event::Wake => self.wake = None,
        }
    }

    fn set(&mut self, id: u64, at: Where) {
        if let Some(p) = self.state.partitions.iter_mut().find(|p| p.id == id) {
            p.at = at;
        }
    }

    fn partition(&self, id: u64) -> &PartitionState {
        self.state
            .partitions
            .iter()
            .find(|p| p.id == id)
            .expect("a live partition")
    }

    fn label(&self, id: u64) -> String {
        let p = &self.parts[&id];
        format!("{} job {}/{}", self.jobs[p.job].kind, p.job, p.index)
    }

    /// Plans and carries out the plan until nothing more starts now.
    fn settle(&mut self) {
        for _ in 0..10_000 {
            self.update_released();
            self.state.now = self.now;
            self.state.loads_running = self.loads.len();
            let plan = planner::plan(&self.setup.costs, &self.setup.policy, &self.state);
            let acted = !plan.actions.is_empty();
            for a in plan.actions {
                self.apply(a);
            }
            self.note_waits(&plan.waits);
            let started = self.start_syntheses() | self.start_device();
            self.note_fullest();
            let used = self.state.used(&self.setup.costs);
            assert!(
                used <= self.setup.budget,
                "the plan holds {used} bytes of a {} budget at {:?}",
                self.setup.budget,
                self.now
            );
            if let Some(t) = plan.wake_at.filter(|t| *t > self.now)
                && self.wake.is_none_or(|w| w > t)
            {
                self.wake = Some(t);
                self.at(t, Event::Wake);
            }
            if !acted && !started {
                return;
            }
        }
        panic!("the planner kept acting at {:?}", self.now);
    }

    fn apply(&mut self, a: Action) {
        let now = self.now;
        tracing::trace!(
            at = now.as_secs_f64(),
            used = self.state.used(&self.setup.costs),
            "{a:?}"
        );
        match a {
            Action::Evict { kind, section } => self.kind(&kind).sections[section] = Residency::Absent,
            Action::EvictRecording { kind } => self.kind(&kind).recording = Residency::Absent,
            Action::Load { kind, section } => {
                self.kind(&kind).sections[section] = Residency::Loading;
                self.loading_since.entry(kind.clone()).or_insert(now);
                let left = self.setup.costs[&kind].section_load[section].as_secs_f64();
                self.loads.push(Load {
                    what: Loading::Section(kind, section),
                    left,
                    started: now,
                });
            }
            Action::LoadRecording { kind } => {
                self.kind(&kind).recording = Residency::Loading;
                let left = self.setup.costs[&kind].recording_load.as_secs_f64();
                self.loads.push(Load {
                    what: Loading::Recording(kind),
                    left,
                    started: now,
                });
            }
            Action::Admit { partition } => {
                let arrived = self.partition(partition).arrived;
                let reason = self.waiting.get(&partition).map_or("none", |w| w.0);
                if let Some(tl) = self.timeline {
                    let label = format!("{}: {reason}", self.label(partition));
                    tl.record_at("admission", Phase::Admission, arrived, now - arrived, label);
                }
                self.set(partition, Where::Admitted);
            }
            Action::Refuse { partition, needed, .. } => {
                // Its job's other partitions went with the first refused.
                let Some(job) = self.parts.get(&partition).map(|p| p.job) else {
                    return;
                };
                self.out.jobs[job].refused = Some(needed);
                let gone: Vec<u64> = self
                    .parts
                    .iter()
                    .filter(|(_, p)| p.job == job)
                    .map(|(id, _)| *id)
                    .filter(|id| self.partition(*id).at == Where::Queued)
                    .collect();
                for id in gone {
                    self.parts.remove(&id);
                    self.state.partitions.retain(|p| p.id != id);
                }
            }
        }
    }

    fn kind(&mut self, kind: &str) -> &mut KindState {
        self.state.kinds.get_mut(kind).expect("a kind of the day")
    }

    fn note_waits(&mut self, waits: &[(u64, planner::WaitReason)]) {
        let now = self.now;
        let mut next = BTreeMap::new();
        for (id, reason) in waits {
            let name = reason.name();
            let since = match self.waiting.remove(id) {
                Some((old, since)) if old == name => since,
                Some((old, since)) => {
                    *self.out.waited.entry(old.into()).or_default() += now - since;
                    now
                }
                None => now,
            };
            next.insert(*id, (name, since));
        }
        for (_, (old, since)) in std::mem::replace(&mut self.waiting, next) {
            *self.out.waited.entry(old.into()).or_default() += now - since;
        }
    }

    /// Starts the syntheses admitted partitions may begin now; whether any
    /// began.
    fn start_syntheses(&mut self) -> bool {
        let mut ready: Vec<(crate::Priority, Duration, u64)> = self
            .state
            .partitions
            .iter()
            .filter(|p| p.at == Where::Admitted)
            .map(|p| (p.priority, p.arrived, p.id))
            .collect();
        ready.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let mut started = false;
        for (priority, _, id) in ready {
            let kind = self.partition(id).kind.clone();
            let c = &self.setup.costs[&kind];
            let k = &self.state.kinds[&kind];
            if k.recording == Residency::Loading
                || (!self.setup.policy.synthesize_while_loading && !k.params_resident())
            {
                continue;
            }
            // Urgent work may take any worker; background work only its own.
            let urgent = priority.is_urgent();
            let free = |b: &Vec<bool>| b.iter().position(|busy| !busy);
            let Some((urgent_slot, slot)) = free(&self.slots[0])
                .map(|i| (false, i))
                .or_else(|| free(&self.slots[1]).filter(|_| urgent).map(|i| (true, i)))
            else {
                continue;
            };
            let took = if k.recording == Residency::Resident {
                c.synthesis
            } else {
                c.classic_synthesis
            };
            self.slots[usize::from(urgent_slot)][slot] = true;
            if let Some(p) = self.parts.get_mut(&id) {
                p.slot = Some((urgent_slot, slot));
            }
            self.set(id, Where::Synthesizing);
            if let Some(tl) = self.timeline {
                let lane = format!("{}synth-{slot}", if urgent_slot { "urgent-" } else { "" });
                tl.record_at(&lane, Phase::Synthesis, self.now, took, self.label(id));
            }
            self.at(self.now + took, Event::Synthesized(id));
            started = true;
        }
        started
    }

    /// Whether the sections `p` still reads are resident (a partition
    /// part way through its device work is past the first ones).
    fn reads_resident(&self, p: &PartitionState) -> bool {
        let c = &self.setup.costs[&p.kind];
        let done = c.device.saturating_sub(self.parts[&p.id].device_left);
        let share = done.as_secs_f64() / c.device.as_secs_f64().max(f64::MIN_POSITIVE);
        let past = c.section_release.iter().take_while(|f| **f <= share + 1e-9).count();
        self.state.kinds[&p.kind].sections[past..]
            .iter()
            .all(|r| *r == Residency::Resident)
    }

    /// The leading sections each kind's last partition in flight reads no
    /// more (see [`KindState::released`]), from its device work done.
    fn update_released(&mut self) {
        let costs = &self.setup.costs;
        for (kind, k) in self.state.kinds.iter_mut() {
            let mut of_kind = self.state.partitions.iter().filter(|p| &p.kind == kind);
            let (Some(p), None) = (of_kind.next(), of_kind.next()) else {
                k.released = 0;
                continue;
            };
            let c = &costs[kind];
            let mut done = c.device.saturating_sub(self.parts[&p.id].device_left);
            if let Some(d) = self.device.as_ref().filter(|d| d.partition == p.id) {
                done += self.now - d.since;
            }
            let share = done.as_secs_f64() / c.device.as_secs_f64().max(f64::MIN_POSITIVE);
            k.released = if matches!(p.at, Where::Device | Where::Synthesized) {
                c.section_release.iter().take_while(|f| **f <= share + 1e-9).count()
            } else {
                0
            };
        }
    }

    /// Gives the idle device its next partition: the most urgent one
    /// synthesized whose parameters are resident.
    fn start_device(&mut self) -> bool {
        if self.device.is_some() {
            return false;
        }
        let next = self
            .state
            .partitions
            .iter()
            .filter(|p| p.at == Where::Synthesized && self.reads_resident(p))
            .min_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then(a.arrived.cmp(&b.arrived))
                    .then(a.id.cmp(&b.id))
            })
            .map(|p| (p.id, p.priority));
        let Some((id, priority)) = next else { return false };
        let left = self.parts[&id].device_left;
        let piece = if priority > self.setup.pieces_up_to {
            left
        } else {
            left.min(self.setup.device_piece.max(Duration::from_millis(1)))
        };
        let idle = self
            .now
            .min(self.setup.day)
            .saturating_sub(self.idle_since.min(self.setup.day));
        if idle >= IDLE_SPELL {
            self.out.device_idle.push((self.idle_since, idle));
        }
        self.set(id, Where::Device);
        self.device = Some(OnDevice {
            partition: id,
            since: self.now,
            piece,
        });
        self.at(self.now + piece, Event::Piece(id));
        // The last of its kind: the planner looks again as it passes each
        // section.
        let kind = self.partition(id).kind.clone();
        if self.state.partitions.iter().filter(|p| p.kind == kind).count() == 1 {
            let c = &self.setup.costs[&kind];
            let done = c.device.saturating_sub(left);
            let marks: Vec<Duration> = c
                .section_release
                .iter()
                .map(|f| c.device.mul_f64(*f))
                .filter(|m| *m > done && *m - done < piece)
                .map(|m| self.now + (m - done))
                .collect();
            for t in marks {
                self.at(t, Event::Wake);
            }
        }
        true
    }

    fn piece_ended(&mut self, id: u64) {
        let Some(d) = self.device.take() else { return };
        debug_assert_eq!(d.partition, id);
        self.idle_since = self.now;
        let day = self.setup.day;
        let within = self.now.min(day).saturating_sub(d.since.min(day));
        self.out.device_busy += within;
        if let Some(tl) = self.timeline {
            tl.record_at("gpu0", Phase::Start, d.since, d.piece, self.label(id));
        }
        let Some(p) = self.parts.get_mut(&id) else { return };
        p.device_left = p.device_left.saturating_sub(d.piece);
        if !p.device_left.is_zero() {
            // The next piece, unless urgent work goes first.
            self.set(id, Where::Synthesized);
            return;
        }
        let job = p.job;
        self.parts.remove(&id);
        let kind = self.partition(id).kind.clone();
        self.state.partitions.retain(|p| p.id != id);
        self.kind(&kind).last_used = self.now;
        let j = &mut self.jobs[job];
        j.done += 1;
        if j.done == j.partitions && self.out.jobs[job].refused.is_none() {
            self.out.jobs[job].ended = Some(self.now);
            if let Some(s) = j.stream
                && self.now < day
            {
                let stream = &self.setup.streams[s];
                self.submit(&stream.kind.clone(), stream.partitions, Some(s));
            }
        }
    }

    fn note_fullest(&mut self) {
        let costs = &self.setup.costs;
        let used = self.state.used(costs);
        if used <= self.out.fullest.used {
            return;
        }
        let mut f = Fullest {
            at: self.now,
            used,
            ..Fullest::default()
        };
        for (kind, k) in &self.state.kinds {
            let c = &costs[kind];
            f.params += k
                .sections
                .iter()
                .zip(&c.sections)
                .filter(|(r, _)| r.holds())
                .map(|(_, b)| b)
                .sum::<u64>();
            if k.recording.holds() {
                f.recordings += c.recording_bytes;
            }
        }
        f.partitions = used - f.params - f.recordings;
        self.out.fullest = f;
    }
}
