//! Jobs: what is submitted, how it is reported.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bellpepper_core::Circuit;
use pinprove_groth16::precompiled::{Recording, WitnessValues, record, synthesize_witness};
use pinprove_groth16::{
    AbcLayout, CapacityHint, CapacityHints, PrecompiledError, Proof, ProveError, ProvingAssignment, Scalar,
    SynthesisStats, SynthesisTarget,
};
use pinprove_mem::{PinnedPool, Reservation};
use serde::Serialize;

use crate::Phase;

/// Scheduling priority; higher runs first, FIFO within a priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Priority {
    /// Background work.
    Low,
    /// The default (PoRep, SnapDeals).
    Normal,
    /// Deadline-bound work (WindowPoSt).
    High,
    /// Must run next (WinningPoSt).
    Critical,
}

impl Priority {
    /// Its place in the memory budget's queue: a waiting admission of a
    /// higher priority is granted first.
    pub const fn rank(self) -> pinprove_mem::Rank {
        pinprove_mem::Rank(match self {
            Priority::Low => 0,
            Priority::Normal => 1,
            Priority::High => 2,
            Priority::Critical => 3,
        })
    }

    /// The priority whose [`rank`](Self::rank) `rank` is (the urgent rank
    /// of memory admitted work needs counts as Critical).
    pub const fn of_rank(rank: pinprove_mem::Rank) -> Priority {
        match rank.0 {
            0 => Priority::Low,
            1 => Priority::Normal,
            2 => Priority::High,
            _ => Priority::Critical,
        }
    }

    /// Whether partitions of this priority go around the synthesis cap and
    /// may use the budget's reserve (see
    /// [`EngineConfig::priority_reserve`](crate::EngineConfig::priority_reserve)).
    pub fn is_urgent(self) -> bool {
        self >= Priority::High
    }

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }
}

/// A job's identifier, unique within an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

/// What a synthesis worker gives a partition to synthesize into.
pub struct SynthesisContext<'a> {
    /// The circuit type (capacity hints are kept per type).
    pub circuit_id: &'a str,
    /// Where the vectors come from.
    pub pool: &'a Arc<PinnedPool>,
    /// Capacity hints.
    pub hints: &'a CapacityHints,
    /// Layout the backend wants.
    pub layout: AbcLayout,
    /// The partition's admitted working set, which pays for its vectors.
    pub funds: Reservation,
    /// Sizes to use when no capacity hint is known yet: the shape the
    /// circuit type's parameters imply (what admission was sized from).
    pub shape: Option<CapacityHint>,
}

impl<'c> SynthesisContext<'c> {
    /// Synthesizes `circuit` as the engine admitted it: into the pool, sized
    /// by the circuit type's hint (or the parameters' shape), paid for by
    /// the admitted working set.
    pub fn synthesize<C: Circuit<Scalar>>(self, circuit: C) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        self.target().synthesize(circuit)
    }

    /// Like [`synthesize`](Self::synthesize) for a circuit made of
    /// independent `parts`, synthesized in parallel (see
    /// [`SynthesisTarget::synthesize_parts`]).
    pub fn synthesize_parts<T>(self, parts: &[T]) -> Result<(ProvingAssignment, SynthesisStats), ProveError>
    where
        T: Sync,
        for<'a> &'a T: Circuit<Scalar>,
    {
        self.target().synthesize_parts(parts)
    }

    fn target(self) -> SynthesisTarget<'c> {
        SynthesisTarget {
            circuit_id: self.circuit_id,
            pool: self.pool,
            hints: self.hints,
            layout: self.layout,
            funds: Some(self.funds),
            fallback: self.shape,
        }
    }
}

/// One circuit of a job, not yet synthesized.
pub trait Partition: Send + 'static {
    /// Synthesizes the circuit into pool buffers.
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError>;

    /// The public inputs (without ONE), when known, for reports and checks.
    fn public_inputs(&self) -> Option<Vec<Scalar>> {
        None
    }

    /// A copy of the circuit, when the partition can make one. With
    /// [`EngineConfig::precompiled`](crate::EngineConfig::precompiled) on,
    /// the engine records one such copy's constraints in the background and
    /// synthesizes later partitions of the circuit type from copies, witness
    /// only; the partition itself stays untouched for the classic synthesis
    /// should its copy not match the recording. `None` (the default): the
    /// partition is always synthesized classically.
    fn fresh_circuit(&self) -> Option<Box<dyn FreshCircuit>> {
        None
    }

    /// How many independent parts the circuit synthesizes in, in parallel
    /// groups ([`SynthesisContext::synthesize_parts`]); 0 (the default)
    /// for a circuit synthesized whole. Admission then counts the groups'
    /// memory beside the partition's own
    /// ([`pinprove_groth16::parts_scratch_bytes`]).
    fn parts(&self) -> usize {
        0
    }

    /// Heap bytes the partition holds while it synthesizes, besides the
    /// pool buffers it synthesizes into (a circuit generated in memory, a
    /// large vanilla proof): admission counts them until synthesis ends,
    /// so that the partitions synthesizing at once fit the machine, not
    /// only the budget's pinned memory. 0 by default (see [`holding_heap`]).
    fn heap_bytes(&self) -> u64 {
        0
    }
}

/// `partition`, saying that its synthesis holds `bytes` of heap (see
/// [`Partition::heap_bytes`]).
pub fn holding_heap(partition: Box<dyn Partition>, bytes: u64) -> Box<dyn Partition> {
    Box::new(HoldingHeap { partition, bytes })
}

struct HoldingHeap {
    partition: Box<dyn Partition>,
    bytes: u64,
}

impl Partition for HoldingHeap {
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        self.partition.synthesize(ctx)
    }

    fn public_inputs(&self) -> Option<Vec<Scalar>> {
        self.partition.public_inputs()
    }

    fn fresh_circuit(&self) -> Option<Box<dyn FreshCircuit>> {
        self.partition.fresh_circuit()
    }

    fn parts(&self) -> usize {
        self.partition.parts()
    }

    fn heap_bytes(&self) -> u64 {
        self.bytes
    }
}

/// A circuit the engine can record or synthesize from a recording (see
/// [`Partition::fresh_circuit`]); every `bellpepper-core` circuit is one.
pub trait FreshCircuit: Send {
    /// Records the circuit's R1CS (see [`pinprove_groth16::precompiled::record`]).
    fn record(self: Box<Self>, circuit_id: &str) -> Result<Recording, PrecompiledError>;

    /// Synthesizes the witness only, checked against `recording`'s shape
    /// (see [`pinprove_groth16::precompiled::synthesize_witness`]).
    fn synthesize_witness(
        self: Box<Self>,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError>;
}

impl<C: Circuit<Scalar> + Send> FreshCircuit for C {
    fn record(self: Box<Self>, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        record(*self, circuit_id)
    }

    fn synthesize_witness(
        self: Box<Self>,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError> {
        synthesize_witness(*self, recording, pool, funds)
    }
}

type CopyCircuit<C> = fn(&C) -> Box<dyn FreshCircuit>;

struct CircuitPartition<C> {
    circuit: C,
    inputs: Option<Vec<Scalar>>,
    /// Copies the circuit; only where the constructor knew it can be.
    copy: Option<CopyCircuit<C>>,
}

impl<C: Circuit<Scalar> + Send + 'static> Partition for CircuitPartition<C> {
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        ctx.synthesize(self.circuit)
    }

    fn public_inputs(&self) -> Option<Vec<Scalar>> {
        self.inputs.clone()
    }

    fn fresh_circuit(&self) -> Option<Box<dyn FreshCircuit>> {
        self.copy.map(|copy| copy(&self.circuit))
    }
}

/// A partition made of any `bellpepper-core` circuit.
pub fn circuit_partition<C: Circuit<Scalar> + Send + 'static>(circuit: C) -> Box<dyn Partition> {
    Box::new(CircuitPartition {
        circuit,
        inputs: None,
        copy: None,
    })
}

/// A partition whose public inputs are known up front (reported back with
/// the proof).
pub fn circuit_partition_with_inputs<C: Circuit<Scalar> + Send + 'static>(
    circuit: C,
    inputs: Vec<Scalar>,
) -> Box<dyn Partition> {
    Box::new(CircuitPartition {
        circuit,
        inputs: Some(inputs),
        copy: None,
    })
}

/// Like [`circuit_partition`], for a circuit that can be copied: the
/// engine may then pre-compile its circuit type (see
/// [`Partition::fresh_circuit`]). A separate constructor because not every
/// circuit can be cloned (storage-proofs' SnapDeals circuit cannot; the
/// Filecoin front wraps it in a type that can).
pub fn precompilable_partition<C: Circuit<Scalar> + Clone + Send + 'static>(circuit: C) -> Box<dyn Partition> {
    Box::new(CircuitPartition {
        circuit,
        inputs: None,
        copy: Some(copy_circuit::<C>),
    })
}

/// Like [`circuit_partition_with_inputs`], for a circuit that can be copied
/// (see [`precompilable_partition`]).
pub fn precompilable_partition_with_inputs<C: Circuit<Scalar> + Clone + Send + 'static>(
    circuit: C,
    inputs: Vec<Scalar>,
) -> Box<dyn Partition> {
    Box::new(CircuitPartition {
        circuit,
        inputs: Some(inputs),
        copy: Some(copy_circuit::<C>),
    })
}

fn copy_circuit<C: Circuit<Scalar> + Clone + Send + 'static>(c: &C) -> Box<dyn FreshCircuit> {
    Box::new(c.clone())
}

/// A job: partitions of one circuit type, proved with that type's SRS.
pub struct JobSpec {
    /// The circuit type: its SRS and capacity hints are found by this id.
    pub circuit_id: String,
    /// Scheduling priority.
    pub priority: Priority,
    /// The partitions, proved independently; results keep this order.
    pub partitions: Vec<Box<dyn Partition>>,
    /// Blinding factors per partition; fresh random ones when `None`.
    pub randomness: Option<Vec<(Scalar, Scalar)>>,
}

/// Where the time of one partition went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PartitionTimings {
    /// Waiting in the priority queue for a synthesis worker.
    pub queue_wait: Duration,
    /// Waiting for the memory budget to admit its working set.
    pub budget_wait: Duration,
    /// Loading the SRS, when this partition had to.
    pub srs_load: Duration,
    /// Synthesis.
    pub synthesis: Duration,
    /// Waiting for a GPU (or backend) worker.
    pub handoff_wait: Duration,
    /// The backend's first step (FFT part, uploads).
    pub start: Duration,
    /// Waiting for the finalizer.
    pub finish_wait: Duration,
    /// The backend's second step (MSMs).
    pub finish: Duration,
}

impl PartitionTimings {
    /// The time spent in `phase` ([`Phase::Total`]: all of it).
    pub fn get(&self, phase: Phase) -> Duration {
        match phase {
            Phase::QueueWait => self.queue_wait,
            Phase::Admission => self.budget_wait,
            Phase::SrsLoad => self.srs_load,
            Phase::Synthesis => self.synthesis,
            Phase::HandoffWait => self.handoff_wait,
            Phase::Start => self.start,
            Phase::FinishWait => self.finish_wait,
            Phase::Finish => self.finish,
            Phase::Total => self.total(),
            Phase::Recording => Duration::ZERO,
        }
    }

    /// Everything from submission to proof.
    pub fn total(&self) -> Duration {
        self.queue_wait
            + self.budget_wait
            + self.srs_load
            + self.synthesis
            + self.handoff_wait
            + self.start
            + self.finish_wait
            + self.finish
    }
}

/// One proof of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    /// The partition's index in its job.
    pub index: usize,
    /// The proof.
    pub proof: Proof,
    /// Its public inputs, when the partition knew them.
    pub public_inputs: Option<Vec<Scalar>>,
    /// Where the time went.
    pub timings: PartitionTimings,
    /// The device (backend) that proved it.
    pub device: usize,
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every partition proved, in partition order.
    Completed(Vec<PartitionResult>),
    /// A partition failed; the others were abandoned.
    Failed(String),
    /// Cancelled before it finished.
    Cancelled,
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum JobState {
    /// No partition has started.
    Queued,
    /// Some partition is being worked on.
    Running,
    /// Done: every proof is ready.
    Completed,
    /// Done: a partition failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

/// A snapshot of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobStatus {
    /// The job.
    pub id: JobId,
    /// Its circuit type.
    pub circuit_id: String,
    /// Its priority.
    pub priority: Priority,
    /// Where it is.
    pub state: JobState,
    /// Partitions in the job.
    pub partitions: usize,
    /// Partitions proved.
    pub proved: usize,
    /// Time since submission.
    pub age: Duration,
}
