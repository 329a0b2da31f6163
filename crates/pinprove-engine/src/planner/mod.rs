//! The planner: one deterministic room that decides, from the memory
//! budget, the measured costs of each kind and the work there is, which
//! kinds' parameters (section by section) and recordings are resident,
//! what is loaded and what is evicted, which waiting partition is admitted
//! now, and why every other one waits.
//!
//! It reads a [`State`] and returns a [`Plan`]; it holds no lock, starts no
//! thread and reads no clock (the time is in the state), so the simulator
//! ([`crate::simulate`]) drives it with a virtual clock, and the same state
//! always gives the same plan.
//!
//! Its rules, in order:
//! - Work is served strictly by priority, then arrival, as the budget
//!   grants it: what a more urgent partition waits for, nothing less
//!   urgent takes.
//! - A kind's parameters and recording are held while work of its
//!   priority or above wants them, and while a partition uses them; others
//!   may take them, under the rules of [`Policy`].
//! - Nothing is refused that fits once what the plan evicts is gone; a
//!   partition is refused (with the numbers) only when it needs more than
//!   the budget, or when nothing in flight will ever free what it needs.
//!   No partition is left waiting on something that will not come.
//!
//! Each idea of issue 67 is a switch of [`Policy`], so that the simulator
//! measures it against the rest.

mod decide;
pub mod keep;
mod state;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::Serialize;

pub use self::decide::plan;
pub use self::state::{KindCosts, KindState, PartitionState, Residency, State, Where};

/// How the planner decides: the engine's rules of this commit with every
/// switch off ([`Policy::default`]), each idea a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Parameters unused this long may go to any work waiting for memory;
    /// sooner once idle as long as their load took (`srs_idle_timeout`).
    pub idle_timeout: Duration,
    /// Partitions of a background kind admitted ahead of the device at
    /// once.
    pub background_ahead: usize,
    /// Loads run side by side, sharing the disk, instead of one after
    /// another.
    pub parallel_loads: bool,
    /// Evict only the sections that make room, not a kind's whole
    /// parameters.
    pub evict_sections: bool,
    /// Load a kind's parameters section by section as memory frees (while
    /// another kind's last partitions prove), not all at once with its
    /// first partition's admission.
    pub load_ahead: bool,
    /// Synthesize a partition from its recording while its parameters
    /// load (they are needed only at the device).
    pub synthesize_while_loading: bool,
    /// Keep recordings ahead of parameters: evict parameters first, and
    /// load a missing recording as planned work, not only out of spare
    /// memory.
    pub recordings_first: bool,
    /// Keep the parameters and recordings of Critical kinds (WinningPoSt's
    /// small set) resident always.
    pub keep_critical_resident: bool,
    /// Switch once per burst: an urgent kind's parameters stay, for work
    /// less urgent, until this long after its latest partition arrived
    /// (zero: off), even when nothing else is in flight.
    pub burst_window: Duration,
    /// Parameters nobody wants stay, for work below High, until idle as
    /// long as their load took (at most `idle_timeout`), unless nothing is
    /// in flight: the engine's rule, which a burst window replaces.
    pub keep_idle_parameters: bool,
    /// Spare memory (nothing waits, nothing loads) holds the recordings
    /// and parameter sections of kinds that had work, most urgent first:
    /// what the next burst would load, given back at once to any work.
    pub prefetch: bool,
    /// Sections the last partition of a kind reads no more (its device
    /// work is past them: [`KindState::released`]) may go while it proves.
    pub release_sections_early: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            idle_timeout: Duration::from_secs(300),
            background_ahead: 4,
            parallel_loads: false,
            evict_sections: false,
            load_ahead: false,
            synthesize_while_loading: false,
            recordings_first: false,
            keep_critical_resident: false,
            burst_window: Duration::ZERO,
            keep_idle_parameters: true,
            prefetch: false,
            release_sections_early: false,
        }
    }
}

impl Policy {
    /// Every idea on.
    pub fn planned() -> Policy {
        Policy {
            parallel_loads: true,
            evict_sections: true,
            load_ahead: true,
            synthesize_while_loading: true,
            recordings_first: true,
            keep_critical_resident: true,
            burst_window: Duration::from_secs(60),
            keep_idle_parameters: false,
            prefetch: true,
            release_sections_early: true,
            // One on the device and two ahead (a pair to start together):
            // memory for prefetch beside the stream.
            background_ahead: 2,
            ..Policy::default()
        }
    }
}

/// Why a partition waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum WaitReason {
    /// For memory that work in flight holds and will give back.
    Memory {
        /// Bytes it needs.
        needed: u64,
        /// Bytes free for it now.
        free: u64,
    },
    /// Behind a more urgent (or earlier) partition that waits for memory:
    /// the budget grants in order.
    Behind {
        /// The partition ahead.
        partition: u64,
    },
    /// For another kind's parameters, kept until they have been idle as
    /// long as their load took.
    IdleParameters {
        /// That kind.
        kind: String,
        /// When they may go.
        until: Duration,
    },
    /// For an urgent kind's parameters, kept for the rest of its burst.
    Burst {
        /// That kind.
        kind: String,
        /// When they may go.
        until: Duration,
    },
    /// For memory a Critical kind keeps resident.
    Critical {
        /// That kind.
        kind: String,
    },
    /// For its parameters to load.
    Parameters,
    /// For its recording to load.
    Recording,
    /// For a synthesis slot.
    Synthesis,
    /// For the device.
    Device,
    /// Enough partitions of its kind are admitted ahead of it.
    Turn,
}

impl WaitReason {
    /// A short name, for status and the timeline.
    pub fn name(&self) -> &'static str {
        match self {
            WaitReason::Memory { .. } => "memory",
            WaitReason::Behind { .. } => "behind",
            WaitReason::IdleParameters { .. } => "idle_parameters",
            WaitReason::Burst { .. } => "burst",
            WaitReason::Critical { .. } => "critical",
            WaitReason::Parameters => "parameters",
            WaitReason::Recording => "recording",
            WaitReason::Synthesis => "synthesis",
            WaitReason::Device => "device",
            WaitReason::Turn => "turn",
        }
    }
}

/// One thing the plan says to do now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Free a parameter section.
    Evict {
        /// Its kind.
        kind: String,
        /// Its index in [`KindCosts::sections`].
        section: usize,
    },
    /// Free a recording.
    EvictRecording {
        /// Its kind.
        kind: String,
    },
    /// Start loading a parameter section (its bytes held from now on).
    Load {
        /// Its kind.
        kind: String,
        /// Its index.
        section: usize,
    },
    /// Start loading a recording.
    LoadRecording {
        /// Its kind.
        kind: String,
    },
    /// Admit a partition: its bytes are held from now on.
    Admit {
        /// The partition.
        partition: u64,
    },
    /// Refuse a partition that can never fit, with the numbers.
    Refuse {
        /// The partition.
        partition: u64,
        /// Bytes it needs (with its parameters when they are not
        /// resident).
        needed: u64,
        /// The most its priority may ever be granted.
        limit: u64,
    },
}

/// What to do now, and why the rest waits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// In order: evictions before the loads and admissions they make room
    /// for.
    pub actions: Vec<Action>,
    /// Every partition not admitted by this plan nor on the device, and
    /// why it waits.
    pub waits: Vec<(u64, WaitReason)>,
    /// When the plan may change though nothing else happens (parameters
    /// become evictable, a burst's window ends).
    pub wake_at: Option<Duration>,
}
