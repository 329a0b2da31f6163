//! A PoRep partition for the engine whose witness-only synthesis runs
//! [`PoRepWitness`]: the engine records the real `StackedCircuit` (the
//! constraints come from it), then synthesizes later partitions' witnesses
//! natively, checked against the recording's counts; a partition whose
//! witness does not match is synthesized classically, from its circuit.

use std::sync::Arc;

use blstrs::Scalar;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::sha256::Sha256Hasher;
use pinprove_engine::{FreshCircuit, Partition, SynthesisContext};
use pinprove_groth16::precompiled::{PrecompiledError, Recording, WitnessValues, record, synthesize_witness};
use pinprove_groth16::{ProveError, ProvingAssignment, SynthesisStats};
use pinprove_mem::{PinnedPool, Reservation};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::StackedCircuit;

use super::{PoRepWitness, SharedWitness};

type Circuit<Tree> = StackedCircuit<Tree, Sha256Hasher>;

/// `circuit` as a partition with public `inputs`, its witness made from
/// `witness` when the engine synthesizes it pre-compiled.
pub fn native_partition<Tree>(
    circuit: Circuit<Tree>,
    witness: PoRepWitness<Tree>,
    inputs: Vec<Scalar>,
) -> Box<dyn Partition>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    Box::new(NativePartition {
        circuit,
        witness: Arc::new(witness),
        inputs,
    })
}

struct NativePartition<Tree: 'static + MerkleTreeTrait> {
    circuit: Circuit<Tree>,
    witness: Arc<PoRepWitness<Tree>>,
    inputs: Vec<Scalar>,
}

impl<Tree> Partition for NativePartition<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        ctx.synthesize(self.circuit)
    }

    fn public_inputs(&self) -> Option<Vec<Scalar>> {
        Some(self.inputs.clone())
    }

    fn fresh_circuit(&self) -> Option<Box<dyn FreshCircuit>> {
        Some(Box::new(NativeFresh {
            circuit: self.circuit.clone(),
            witness: Arc::clone(&self.witness),
        }))
    }
}

/// Records the real circuit; synthesizes the native witness.
struct NativeFresh<Tree: 'static + MerkleTreeTrait> {
    circuit: Circuit<Tree>,
    witness: Arc<PoRepWitness<Tree>>,
}

impl<Tree> FreshCircuit for NativeFresh<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    fn record(self: Box<Self>, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        record(self.circuit, circuit_id)
    }

    fn synthesize_witness(
        self: Box<Self>,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError> {
        synthesize_witness(SharedWitness(self.witness), recording, pool, funds)
    }
}
