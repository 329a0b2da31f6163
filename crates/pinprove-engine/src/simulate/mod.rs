//! A provider's day on a virtual clock: the [`planner`](crate::planner)
//! decides, exactly as it does for the engine, and this executes its plans
//! with measured costs in place of the work: a loader that reads at the
//! measured speed (loads side by side share it), synthesis slots that take
//! the measured synthesis times, one device that takes the measured time
//! per partition (a background partition in pieces, urgent work between
//! them), and memory that is counted, not allocated. A day of 24 hours runs
//! in well under a second.
//!
//! What it does not model: CPU contention between loads and syntheses (each
//! takes its measured time, measured beside a stream), the device's own
//! memory (the per-partition times are those measured at the card's free
//! memory), pairing of partitions on the device (the stream's measured time
//! per partition includes it).

mod world;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::Priority;
use crate::planner::{KindCosts, Policy};
use crate::timeline::Timeline;

/// Jobs of one kind arriving at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrival {
    /// When, from the day's start.
    pub at: Duration,
    /// The kind (a key of [`Setup::costs`]).
    pub kind: String,
    /// Partitions of its one job.
    pub partitions: usize,
}

/// A stream of jobs of one kind kept in flight: a new one is submitted as
/// soon as one ends, until the day ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    /// The kind.
    pub kind: String,
    /// Jobs kept in flight.
    pub in_flight: usize,
    /// Partitions per job.
    pub partitions: usize,
}

/// A day to simulate.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Each kind's measured costs (its priority among them).
    pub costs: BTreeMap<String, KindCosts>,
    /// How the planner decides.
    pub policy: Policy,
    /// Bytes the planner places (the budget less the backends' own
    /// buffers).
    pub budget: u64,
    /// Of `budget`, bytes only urgent work may use.
    pub reserve: u64,
    /// Synthesis workers: any partition may take one.
    pub synthesis_slots: usize,
    /// Workers beside them that only urgent partitions take.
    pub urgent_synthesis_slots: usize,
    /// A background partition's device work is cut into pieces this long
    /// at most; urgent work goes between pieces.
    pub device_piece: Duration,
    /// The most urgent priority whose partitions are cut into pieces too
    /// (the device queue cuts background work only: `Priority::Normal`;
    /// `High` lets a WinningPoSt go between a WindowPoSt's pieces).
    pub pieces_up_to: Priority,
    /// Kinds whose parameters are in memory when the day starts, in this
    /// order as long as they fit; the others are known to be wanted (the
    /// planner may prefetch them).
    pub preloaded: Vec<String>,
    /// Kinds whose recordings are in memory when the day starts.
    pub recorded: Vec<String>,
    /// How long the day lasts: no job starts after it.
    pub day: Duration,
    /// How long work in flight at the day's end may take to finish (the
    /// rest is unfinished).
    pub grace: Duration,
    /// Jobs arriving at set times.
    pub arrivals: Vec<Arrival>,
    /// Streams of jobs kept in flight.
    pub streams: Vec<Stream>,
}

/// One job's fate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRecord {
    /// Its kind.
    pub kind: String,
    /// When it arrived.
    pub arrived: Duration,
    /// When its last partition was proved.
    pub ended: Option<Duration>,
    /// Refused (it could never fit), with the bytes it needed.
    pub refused: Option<u64>,
}

/// The budget at its fullest, by holder.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Fullest {
    /// When.
    pub at: Duration,
    /// Bytes held in all.
    pub used: u64,
    /// Of them, by parameters (resident and loading).
    pub params: u64,
    /// By recordings.
    pub recordings: u64,
    /// By admitted partitions.
    pub partitions: u64,
}

/// What happened over a simulated day.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Outcome {
    /// Every job, in arrival order.
    pub jobs: Vec<JobRecord>,
    /// How long the device worked within the day.
    pub device_busy: Duration,
    /// Within the day, when the device stood idle for a second or more,
    /// and for how long.
    pub device_idle: Vec<(Duration, Duration)>,
    /// Per kind: times its parameters became fully resident by a load.
    pub params_loads: BTreeMap<String, u64>,
    /// Every load of a whole parameter set or of its missing sections:
    /// kind, when its first section started and how long until the last
    /// ended.
    pub load_spans: Vec<(String, Duration, Duration)>,
    /// Partition-seconds spent waiting, per reason.
    pub waited: BTreeMap<String, Duration>,
    /// The budget at its fullest.
    pub fullest: Fullest,
    /// When the last thing happened.
    pub ended_at: Duration,
}

impl Outcome {
    /// The jobs of `kind` proved: (arrival, time to proof).
    pub fn latencies(&self, kind: &str) -> Vec<(Duration, Duration)> {
        self.jobs
            .iter()
            .filter(|j| j.kind == kind)
            .filter_map(|j| Some((j.arrived, j.ended? - j.arrived)))
            .collect()
    }

    /// Jobs of `kind` proved by the end of the day's grace.
    pub fn proved(&self, kind: &str) -> usize {
        self.latencies(kind).len()
    }

    /// Jobs refused.
    pub fn refused(&self) -> usize {
        self.jobs.iter().filter(|j| j.refused.is_some()).count()
    }

    /// Jobs neither proved nor refused when the grace ran out.
    pub fn unfinished(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| j.ended.is_none() && j.refused.is_none())
            .count()
    }
}

/// Runs the day; spans go to `timeline` when given (its origin is the
/// day's start).
pub fn run(setup: &Setup, timeline: Option<&Timeline>) -> Outcome {
    world::World::new(setup, timeline).run()
}

#[cfg(test)]
mod tests;
