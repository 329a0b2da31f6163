//! The phases of a partition's way through the engine, named once: tracing
//! spans, timeline spans, metric labels and benchmark analyses all use
//! [`Phase`].

use std::fmt;

use serde::{Serialize, Serializer};

/// One phase of a partition, from submission to proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Waiting in the priority queue for a synthesis worker.
    QueueWait,
    /// Waiting for the memory budget to admit its working set.
    Admission,
    /// Loading its parameters, when the partition had to.
    SrsLoad,
    /// Synthesis into pool buffers.
    Synthesis,
    /// Synthesized, waiting for a device worker.
    HandoffWait,
    /// The backend's first step (uploads, FFT part; on a GPU, queuing the
    /// device work).
    Start,
    /// Started, waiting for the finalizer.
    FinishWait,
    /// The backend's second step (MSMs, or waiting for the device and
    /// adding up its results).
    Finish,
    /// Everything from submission to proof.
    Total,
    /// Not a partition's: the engine recording a circuit type's R1CS (or
    /// loading its recording) for pre-compiled synthesis, in the background.
    /// No partition waits for it, so it is in no partition's timings and
    /// not in [`Phase::ALL`]; the timeline draws it.
    Recording,
}

impl Phase {
    /// Every phase, in pipeline order.
    pub const ALL: [Phase; 9] = [
        Phase::QueueWait,
        Phase::Admission,
        Phase::SrsLoad,
        Phase::Synthesis,
        Phase::HandoffWait,
        Phase::Start,
        Phase::FinishWait,
        Phase::Finish,
        Phase::Total,
    ];

    /// The phase's name in spans, metrics and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::QueueWait => "queue_wait",
            Phase::Admission => "admission",
            Phase::SrsLoad => "srs_load",
            Phase::Synthesis => "synthesis",
            Phase::HandoffWait => "handoff_wait",
            Phase::Start => "start",
            Phase::FinishWait => "finish_wait",
            Phase::Finish => "finish",
            Phase::Total => "total",
            Phase::Recording => "recording",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct() {
        let every = Phase::ALL.iter().chain([&Phase::Recording]);
        let names: std::collections::HashSet<&str> = every.map(|p| p.name()).collect();
        assert_eq!(names.len(), Phase::ALL.len() + 1);
        assert_eq!(serde_json::to_string(&Phase::HandoffWait).unwrap(), "\"handoff_wait\"");
    }
}
