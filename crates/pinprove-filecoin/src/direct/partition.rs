//! A Filecoin partition for the engine, for every kind: classically its real
//! circuit is synthesized (constraints and values); pre-compiled, the real
//! circuit is recorded once per circuit type and later partitions' witnesses
//! are made by the replicas, checked against the recording's counts. A
//! partition whose direct witness does not match is synthesized classically,
//! from its untouched circuit.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use pinprove_engine::{FreshCircuit, Partition, SynthesisContext};
use pinprove_groth16::precompiled::{PrecompiledError, Recording, WitnessValues, record, synthesize_witness};
use pinprove_groth16::{ProveError, ProvingAssignment, SynthesisStats};
use pinprove_mem::{PinnedPool, Reservation};

/// A partition's real circuit: how it synthesizes classically and how it
/// is recorded.
pub trait RealCircuit: Clone + Send + 'static {
    /// The classic synthesis (a whole circuit, or its parts in parallel).
    fn synthesize(self, ctx: SynthesisContext<'_>) -> Result<(ProvingAssignment, SynthesisStats), ProveError>;

    /// Records its R1CS.
    fn record(self, circuit_id: &str) -> Result<Recording, PrecompiledError>;

    /// Independent parts of its classic synthesis (see [`Partition::parts`]):
    /// 0, the engine's word for a circuit synthesized whole. Admission
    /// counts a scratch set of a/b/c and aux per group of parts, so 1 made
    /// every whole partition pay for a second a/b/c it never took: 16 GiB
    /// for a 32 GiB PoRep partition, which held the capped H100 stream to
    /// two partitions admitted at once (the budget 96.85 GiB used with
    /// 60.35 GiB in buffers, parameters and recordings).
    fn parts(&self) -> usize {
        0
    }
}

/// A circuit synthesized whole.
#[derive(Clone)]
pub struct Whole<C>(pub C);

impl<C: Circuit<Scalar> + Clone + Send + 'static> RealCircuit for Whole<C> {
    fn synthesize(self, ctx: SynthesisContext<'_>) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        ctx.synthesize(self.0)
    }

    fn record(self, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        record(self.0, circuit_id)
    }
}

/// A partition's witness made by the replicas.
pub trait DirectWitness: Send + Sync + 'static {
    /// The witness, into pool buffers sized from `recording` (paid for out
    /// of `funds` when given), checked against its counts.
    fn witness_values(
        &self,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError>;
}

/// A replica of a whole circuit: allocates what the circuit allocates, in
/// its order, into any constraint system.
pub trait Replica: Send + Sync + 'static {
    /// Allocates the values (and counts the constraints) into `cs`.
    fn synthesize<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS) -> Result<(), SynthesisError>;

    /// Called once per witness made for the engine (the kinds count them).
    fn made() {}
}

impl<R: Replica> DirectWitness for R {
    fn witness_values(
        &self,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError> {
        let values = synthesize_witness(ByRef(self), recording, pool, funds)?;
        R::made();
        Ok(values)
    }
}

/// A replica as a circuit by value (witness-only synthesis consumes its
/// circuit).
struct ByRef<'r, R>(&'r R);

impl<R: Replica> Circuit<Scalar> for ByRef<'_, R> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
}

/// `circuit` as a partition with public `inputs`; with `witness` (the same
/// partition, directly) the engine can synthesize it pre-compiled.
pub fn partition<C: RealCircuit, W: DirectWitness>(
    circuit: C,
    witness: Option<W>,
    inputs: Vec<Scalar>,
) -> Box<dyn Partition> {
    Box::new(DirectPartition {
        circuit,
        witness: witness.map(Arc::new),
        inputs,
    })
}

struct DirectPartition<C, W> {
    circuit: C,
    witness: Option<Arc<W>>,
    inputs: Vec<Scalar>,
}

impl<C: RealCircuit, W: DirectWitness> Partition for DirectPartition<C, W> {
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        self.circuit.synthesize(ctx)
    }

    fn public_inputs(&self) -> Option<Vec<Scalar>> {
        Some(self.inputs.clone())
    }

    fn parts(&self) -> usize {
        self.circuit.parts()
    }

    fn fresh_circuit(&self) -> Option<Box<dyn FreshCircuit>> {
        let witness = Arc::clone(self.witness.as_ref()?);
        Some(Box::new(DirectFresh {
            circuit: self.circuit.clone(),
            witness,
        }))
    }
}

/// Records the real circuit; synthesizes the direct witness.
struct DirectFresh<C, W> {
    circuit: C,
    witness: Arc<W>,
}

impl<C: RealCircuit, W: DirectWitness> FreshCircuit for DirectFresh<C, W> {
    fn record(self: Box<Self>, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        self.circuit.record(circuit_id)
    }

    fn synthesize_witness(
        self: Box<Self>,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError> {
        self.witness.witness_values(recording, pool, funds)
    }
}
