//! A PoSt partition for the engine: classically, the circuit's sectors
//! synthesized through the gadgets in parallel groups; pre-compiled, the
//! real circuit recorded once and later partitions' witnesses made by the
//! native replicas, every sector at once. A partition whose witness does not
//! match the recording is synthesized classically.

use std::sync::Arc;

use blstrs::Scalar;
use pinprove_engine::{FreshCircuit, Partition, SynthesisContext};
use pinprove_groth16::precompiled::{PrecompiledError, Recording, WitnessValues, record, synthesize_witness_parts};
use pinprove_groth16::{ProveError, ProvingAssignment, SynthesisStats};
use pinprove_mem::{PinnedPool, Reservation};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::FallbackPoStCircuit;

use super::SectorWitness;

/// `circuit` as a partition with public `inputs`; with `witness` (the same
/// sectors, natively) it can be synthesized pre-compiled.
pub fn partition<Tree: 'static + MerkleTreeTrait>(
    circuit: FallbackPoStCircuit<Tree>,
    witness: Option<Vec<SectorWitness>>,
    inputs: Vec<Scalar>,
) -> Box<dyn Partition> {
    Box::new(PoStPartition {
        circuit,
        witness: witness.map(Arc::new),
        inputs,
    })
}

struct PoStPartition<Tree: 'static + MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    witness: Option<Arc<Vec<SectorWitness>>>,
    inputs: Vec<Scalar>,
}

impl<Tree: 'static + MerkleTreeTrait> Partition for PoStPartition<Tree> {
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        ctx.synthesize_parts(&self.circuit.sectors)
    }

    fn public_inputs(&self) -> Option<Vec<Scalar>> {
        Some(self.inputs.clone())
    }

    fn parts(&self) -> usize {
        self.circuit.sectors.len()
    }

    fn fresh_circuit(&self) -> Option<Box<dyn FreshCircuit>> {
        let witness = Arc::clone(self.witness.as_ref()?);
        Some(Box::new(PoStFresh {
            circuit: self.circuit.clone(),
            witness,
        }))
    }
}

/// Records the real circuit; synthesizes the native witness.
struct PoStFresh<Tree: 'static + MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    witness: Arc<Vec<SectorWitness>>,
}

impl<Tree: 'static + MerkleTreeTrait> FreshCircuit for PoStFresh<Tree> {
    fn record(self: Box<Self>, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        record(self.circuit, circuit_id)
    }

    fn synthesize_witness(
        self: Box<Self>,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError> {
        let values = synthesize_witness_parts(&self.witness, recording, pool, funds)?;
        super::count_witness();
        Ok(values)
    }
}
