//! What the planner reads: the measured costs of each kind, what is
//! resident, and where each partition is, at one moment.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::Priority;

/// What one kind (one circuit type) costs, as measured: the numbers the
/// planner decides by.
#[derive(Clone, Debug, PartialEq)]
pub struct KindCosts {
    /// The priority its jobs come at.
    pub priority: Priority,
    /// Host bytes of each parameter section once loaded, in the file's
    /// order (h, l, a, b_g1, b_g2); none for a kind whose parameters hold
    /// no host memory once loaded (every device holds them).
    pub sections: Vec<u64>,
    /// Time to load each section alone (reading and checking it).
    pub section_load: Vec<Duration>,
    /// Host bytes of its recording (0: it has none, and synthesizes
    /// classically).
    pub recording_bytes: u64,
    /// Time to load its recording again (from the hints directory).
    pub recording_load: Duration,
    /// Host bytes one partition holds from its admission until its device
    /// work ends.
    pub partition_bytes: u64,
    /// Synthesis of one partition from the recording.
    pub synthesis: Duration,
    /// Synthesis of one partition without the recording.
    pub classic_synthesis: Duration,
    /// Device time of one partition.
    pub device: Duration,
    /// Per section, the share of a partition's device time after which it
    /// reads the section no more (the MSMs run in the sections' order);
    /// empty when not measured.
    pub section_release: Vec<f64>,
}

impl KindCosts {
    /// Host bytes of all its parameter sections.
    pub fn params_bytes(&self) -> u64 {
        self.sections.iter().sum()
    }

    /// Time to load all its parameter sections, one after another.
    pub fn params_load(&self) -> Duration {
        self.section_load.iter().sum()
    }
}

/// Whether something is in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Residency {
    /// Not in memory.
    #[default]
    Absent,
    /// Being loaded: its bytes are held already.
    Loading,
    /// In memory.
    Resident,
}

impl Residency {
    /// Whether it holds its bytes (loading or loaded).
    pub fn holds(self) -> bool {
        self != Residency::Absent
    }
}

/// One kind's parameters and recording.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindState {
    /// Each parameter section, in the order of [`KindCosts::sections`].
    pub sections: Vec<Residency>,
    /// Its recording.
    pub recording: Residency,
    /// When its parameters were last used (a partition's device work ended
    /// or a load finished).
    pub last_used: Duration,
    /// When its latest partition arrived.
    pub last_arrival: Option<Duration>,
    /// Leading sections no partition in flight reads any more: the last
    /// one's device work is past them.
    pub released: usize,
}

impl KindState {
    /// A kind with nothing in memory, of `sections` sections.
    pub fn absent(sections: usize) -> KindState {
        KindState {
            sections: vec![Residency::Absent; sections],
            ..KindState::default()
        }
    }

    /// Whether every parameter section is resident.
    pub fn params_resident(&self) -> bool {
        self.sections.iter().all(|s| *s == Residency::Resident)
    }
}

/// Where a partition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Where {
    /// Waiting to be admitted: holds nothing.
    Queued,
    /// Admitted (its bytes held), waiting to synthesize.
    Admitted,
    /// Synthesizing.
    Synthesizing,
    /// Synthesized, waiting for the device (and for its parameters).
    Synthesized,
    /// On the device.
    Device,
}

/// One partition not yet proved.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionState {
    /// Unique among partitions.
    pub id: u64,
    /// Its kind.
    pub kind: String,
    /// Its job's priority.
    pub priority: Priority,
    /// When its job arrived.
    pub arrived: Duration,
    /// Where it is.
    pub at: Where,
}

impl PartitionState {
    /// Whether it holds memory (admitted, not yet done).
    pub fn holds(&self) -> bool {
        self.at != Where::Queued
    }
}

/// Everything the planner decides from, at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// The time.
    pub now: Duration,
    /// Bytes the planner places: the budget less what it does not plan
    /// (the backends' own buffers).
    pub budget: u64,
    /// Of `budget`, bytes only urgent work (High and Critical) may use.
    pub reserve: u64,
    /// Per kind, what it holds in memory.
    pub kinds: BTreeMap<String, KindState>,
    /// Every partition not yet proved, in arrival order.
    pub partitions: Vec<PartitionState>,
    /// Loads (of parameter sections or recordings) running now.
    pub loads_running: usize,
}

impl State {
    /// Bytes held now: resident and loading parameter sections and
    /// recordings, and admitted partitions.
    pub fn used(&self, costs: &BTreeMap<String, KindCosts>) -> u64 {
        let mut used = 0;
        for (kind, k) in &self.kinds {
            let Some(c) = costs.get(kind) else { continue };
            used += held_sections(k, c);
            if k.recording.holds() {
                used += c.recording_bytes;
            }
        }
        for p in self.partitions.iter().filter(|p| p.holds()) {
            used += costs.get(&p.kind).map_or(0, |c| c.partition_bytes);
        }
        used
    }
}

/// Bytes of `k`'s parameter sections held (resident or loading).
pub(super) fn held_sections(k: &KindState, c: &KindCosts) -> u64 {
    k.sections
        .iter()
        .zip(&c.sections)
        .filter(|(r, _)| r.holds())
        .map(|(_, b)| *b)
        .sum()
}
