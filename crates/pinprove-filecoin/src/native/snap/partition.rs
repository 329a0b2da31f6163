//! A SnapDeals partition for the engine whose witness-only synthesis runs
//! [`SnapWitness`]: the engine records the real update circuit (the
//! constraints come from it), then synthesizes later partitions' witnesses
//! natively, checked against the recording's counts; a partition whose
//! witness does not match is synthesized classically, from its circuit.

use std::sync::Arc;

use bellpepper_core::Circuit;
use blstrs::Scalar;
use pinprove_engine::{FreshCircuit, Partition, SynthesisContext};
use pinprove_groth16::precompiled::{PrecompiledError, Recording, WitnessValues, record, synthesize_witness};
use pinprove_groth16::{ProveError, ProvingAssignment, SynthesisStats};
use pinprove_mem::{PinnedPool, Reservation};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;

use super::{SharedWitness, SnapWitness};

/// `circuit` (the update circuit `witness` was made from) as a partition
/// with public `inputs`, its witness made from `witness` when the engine
/// synthesizes it pre-compiled.
pub fn native_partition<C, Tree>(circuit: C, witness: SnapWitness<Tree>, inputs: Vec<Scalar>) -> Box<dyn Partition>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    Box::new(NativePartition {
        circuit,
        witness: Arc::new(witness),
        inputs,
    })
}

struct NativePartition<C, Tree: 'static + MerkleTreeTrait> {
    circuit: C,
    witness: Arc<SnapWitness<Tree>>,
    inputs: Vec<Scalar>,
}

impl<C, Tree> Partition for NativePartition<C, Tree>
where
    C: Circuit<Scalar> + Clone + Send + 'static,
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
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
struct NativeFresh<C, Tree: 'static + MerkleTreeTrait> {
    circuit: C,
    witness: Arc<SnapWitness<Tree>>,
}

impl<C, Tree> FreshCircuit for NativeFresh<C, Tree>
where
    C: Circuit<Scalar> + Send + 'static,
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
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
