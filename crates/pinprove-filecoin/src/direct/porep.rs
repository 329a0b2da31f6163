//! The witness of one PoRep partition (storage-proofs-porep 19.1's
//! `StackedCircuit`), with the SHA-256 parts computed directly.
//!
//! The allocation sequence is the circuit's. Replicas make the SHA-256
//! parts, the comm_d inclusion (a binary SHA-256 tree,
//! `Sha256Function::hash_multi_leaf_circuit` at each level) and the labels
//! (`create_label_circuit` on the parents' bits), ~99% of the circuit's
//! allocations, and the Poseidon parts: the column hashes and the TreeC and
//! TreeR inclusions. The few small gadgets left (the challenge's `UInt64`,
//! the encoding, comm_r's check) are the circuit's own.
//!
//! The circuit's own per-challenge type is private to storage-proofs, so
//! the inputs are taken from the vanilla proofs (the C1 output), as the
//! circuit's `From<vanilla::Proof>` takes them.

use std::marker::PhantomData;

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::sha256::{Sha256Domain, Sha256Hasher};
use filecoin_hashers::{HashFunction, Hasher};
use generic_array::typenum::{U2, U11};
use storage_proofs_core::gadgets::{constraint, encode::encode, insertion::insert, uint64::UInt64};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked;

use super::label::{create_porep_label, element_words, porep_label_message};
use super::partition::Replica;
use super::poseidon;
use super::tree::{PoseidonPath, inclusion};

mod constraints;
mod inputs;

/// Vanilla proofs the direct witness cannot be made from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectPoRepError {
    /// The public inputs carry no comm_d and comm_r.
    #[error("the public inputs have no tau (comm_d, comm_r)")]
    NoTau,
    /// A partition without challenge proofs.
    #[error("no challenge proofs")]
    NoProofs,
    /// Parts of the vanilla proofs that do not fit the circuit.
    #[error("challenge {challenge}: {what}")]
    Malformed {
        /// Which challenge proof of the partition.
        challenge: usize,
        /// What does not fit.
        what: String,
    },
}

/// One parent's column: its value in every layer, and its path in tree C.
struct ParentColumn {
    rows: Vec<Fr>,
    path: PoseidonPath,
}

/// What one challenge's proof contributes to the circuit.
struct Challenge {
    data_leaf: Fr,
    node: u64,
    /// Sibling and whether the path goes right, from the leaf up.
    comm_d_path: Vec<(Fr, bool)>,
    comm_r_last_path: PoseidonPath,
    comm_c_path: PoseidonPath,
    drg_parents: Vec<ParentColumn>,
    exp_parents: Vec<ParentColumn>,
}

/// The inputs of one PoRep partition's circuit; synthesizing it
/// ([`Replica`]) allocates exactly the circuit's inputs and aux values.
pub struct PoRepWitness<Tree: MerkleTreeTrait> {
    replica_id: Fr,
    comm_d: Fr,
    comm_r: Fr,
    comm_r_last: Fr,
    comm_c: Fr,
    challenges: Vec<Challenge>,
    /// The tree's shape is in the paths; the type keeps witnesses of
    /// different trees apart.
    tree: PhantomData<Tree>,
}

impl<Tree> PoRepWitness<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    /// The witness of the circuit `StackedCompound::circuit(pub_in, (),
    /// proofs, ..)` builds.
    pub fn new(
        pub_in: &stacked::PublicInputs<PoseidonDomain, Sha256Domain>,
        proofs: &[stacked::Proof<Tree, Sha256Hasher>],
    ) -> Result<Self, DirectPoRepError> {
        let tau = pub_in.tau.as_ref().ok_or(DirectPoRepError::NoTau)?;
        let first = proofs.first().ok_or(DirectPoRepError::NoProofs)?;
        let challenges = proofs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                inputs::challenge::<Tree>(p).map_err(|what| DirectPoRepError::Malformed { challenge: i, what })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            replica_id: pub_in.replica_id.into(),
            comm_d: tau.comm_d.into(),
            comm_r: tau.comm_r.into(),
            comm_r_last: first.comm_r_last().into(),
            comm_c: first.comm_c().into(),
            challenges,
            tree: PhantomData,
        })
    }

    /// Synthesizes into `cs`.
    pub fn synthesize<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        let replica_id = AllocatedNum::alloc(cs.namespace(|| "replica_id"), || Ok(self.replica_id))?;
        replica_id.inputize(cs.namespace(|| "replica_id_input"))?;
        // The label messages take these bits' values from `replica_id`.
        replica_id.to_bits_le(cs.namespace(|| "replica_id_bits"))?;
        let comm_d = AllocatedNum::alloc(cs.namespace(|| "comm_d"), || Ok(self.comm_d))?;
        comm_d.inputize(cs.namespace(|| "comm_d_input"))?;
        let comm_r = AllocatedNum::alloc(cs.namespace(|| "comm_r"), || Ok(self.comm_r))?;
        comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
        let comm_r_last = AllocatedNum::alloc(cs.namespace(|| "comm_r_last"), || Ok(self.comm_r_last))?;
        let comm_c = AllocatedNum::alloc(cs.namespace(|| "comm_c"), || Ok(self.comm_c))?;
        let hash = <PoseidonHasher as Hasher>::Function::hash2_circuit(
            cs.namespace(|| "H_comm_c_comm_r_last"),
            &comm_c,
            &comm_r_last,
        )?;
        constraint::equal(cs, || "comm_r", &comm_r, &hash);

        let replica_id = self.replica_id.to_repr();
        let mut scratch = Vec::new();
        for (i, c) in self.challenges.iter().enumerate() {
            let mut cs = cs.namespace(|| format!("challenge_{i}"));
            c.synthesize(&mut cs, &replica_id, &comm_d, &mut scratch)?;
        }
        Ok(())
    }
}

impl Challenge {
    /// The challenge's part of the circuit. Its TreeC and TreeR inclusions
    /// end in constraints on comm_c and comm_r_last, which only count here.
    fn synthesize<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        replica_id: &[u8; 32],
        comm_d: &AllocatedNum<Fr>,
        scratch: &mut Vec<Fr>,
    ) -> Result<(), SynthesisError> {
        let data_leaf = AllocatedNum::alloc(cs.namespace(|| "data_leaf"), || Ok(self.data_leaf))?;
        comm_d_inclusion(
            cs.namespace(|| "comm_d_inclusion"),
            &self.comm_d_path,
            comm_d,
            &data_leaf,
        )?;

        for parent in self.drg_parents.iter().chain(&self.exp_parents) {
            for &row in &parent.rows {
                cs.alloc(|| "row", || Ok(row))?;
            }
            let hash = column_hash(cs, &parent.rows, scratch)?;
            inclusion(cs, &parent.path, hash, false, scratch)?;
        }

        let node = UInt64::alloc(cs.namespace(|| "challenge"), Some(self.node))?;
        node.pack_into_input(cs.namespace(|| "challenge input"))?;

        let layers = self.drg_parents.first().map_or(0, |p| p.rows.len());
        let mut labels = Vec::with_capacity(layers);
        for layer in 1..=layers {
            let mut cs = cs.namespace(|| format!("labeling_{layer}"));
            labels.push(self.label(&mut cs, replica_id, layer)?);
        }
        let key = labels.last().ok_or(SynthesisError::Unsatisfiable)?;
        let encoded = encode(cs.namespace(|| "encode_node"), key, &data_leaf)?;
        let value = |n: &AllocatedNum<Fr>| n.get_value().ok_or(SynthesisError::AssignmentMissing);
        inclusion(cs, &self.comm_r_last_path, value(&encoded)?, false, scratch)?;
        let labels = labels.iter().map(value).collect::<Result<Vec<_>, _>>()?;
        let column = column_hash(cs, &labels, scratch)?;
        inclusion(cs, &self.comm_c_path, column, false, scratch)?;
        Ok(())
    }

    /// The label of the challenged node in `layer` (1-based): the parents'
    /// bit decompositions, then `create_label_circuit` on them.
    fn label<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        replica_id: &[u8; 32],
        layer: usize,
    ) -> Result<AllocatedNum<Fr>, SynthesisError> {
        // Layer 1 hashes the base parents only; the expander parents'
        // columns start at layer 2, so layer `l` takes their row `l - 1`.
        let exp: &[ParentColumn] = if layer > 1 { &self.exp_parents } else { &[] };
        let base = self.drg_parents.iter().map(|p| p.rows.get(layer - 1));
        let mut parents = Vec::with_capacity(self.drg_parents.len() + exp.len());
        for value in base.chain(exp.iter().map(|p| p.rows.get(layer - 2))) {
            let bytes = value.ok_or(SynthesisError::Unsatisfiable)?.to_repr();
            alloc_bits_le(cs, &bytes)?;
            constraints::enforce_n(cs, constraints::to_bits_le()?);
            parents.push(bytes);
        }
        if parents.is_empty() {
            return Err(SynthesisError::Unsatisfiable);
        }
        // The hash takes 37 parents: the list repeated, cut at 37 (6 base
        // parents on layer 1, 14 parents after it, as the circuit has them).
        let expanded: Vec<[u8; 32]> = (0..super::label::TOTAL_PARENTS)
            .map(|i| parents[i % parents.len()])
            .collect();
        let layer = u32::try_from(layer).map_err(|_| SynthesisError::Unsatisfiable)?;
        let message =
            porep_label_message(replica_id, &expanded, layer, self.node).map_err(|_| SynthesisError::Unsatisfiable)?;
        let label = create_porep_label(cs.namespace(|| "create_label"), &message)?;
        constraints::enforce_n(cs, constraints::label(layer)?);
        Ok(label)
    }
}

/// `PoRCircuit` over a binary SHA-256 tree, the root private (what the
/// circuit's `enforce_inclusion` of the data leaf in tree D allocates):
/// each level's index bit, sibling, ordered pair, and hash, then the index
/// bits packed into public inputs.
fn comm_d_inclusion<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    path: &[(Fr, bool)],
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len());
    for (i, &(sibling, right)) in path.iter().enumerate() {
        let mut cs = cs.namespace(|| format!("level_{i}"));
        let bit = Boolean::from(AllocatedBit::alloc(cs.namespace(|| "index bit"), Some(right))?);
        let sibling = AllocatedNum::alloc(cs.namespace(|| "sibling"), || Ok(sibling))?;
        let pair = insert(&mut cs, &cur, std::slice::from_ref(&bit), &[sibling])?;
        let [left, right] = pair.as_slice() else {
            return Err(SynthesisError::Unsatisfiable);
        };
        cur = sha256_node(cs.namespace(|| "hash"), left, right)?;
        index_bits.push(bit);
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &index_bits)?;
    constraint::equal(&mut cs, || "root", &cur, root);
    Ok(())
}

/// `Sha256Function::hash_multi_leaf_circuit` of two nodes: both decomposed
/// (`to_bits_le`), hashed, the digest packed into one element; SHA-256's
/// `hash2_circuit` allocates the same.
pub(crate) fn sha256_node<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    left: &AllocatedNum<Fr>,
    right: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut message = Vec::with_capacity(16);
    for num in [left, right] {
        let bytes = num.get_value().ok_or(SynthesisError::AssignmentMissing)?.to_repr();
        alloc_bits_le(&mut cs, &bytes)?;
        message.extend(element_words(&bytes).ok_or(SynthesisError::Unsatisfiable)?);
    }
    // The label's hash-and-pack is this one on another message.
    let hash = create_porep_label(&mut cs, &message)?;
    constraints::enforce_n(&mut cs, constraints::sha256_node()?);
    Ok(hash)
}

/// What `AllocatedNum::to_bits_le` allocates: the element's 255 bits,
/// least significant first.
fn alloc_bits_le<CS: ConstraintSystem<Fr>>(cs: &mut CS, bytes: &[u8; 32]) -> Result<(), SynthesisError> {
    for i in 0..Fr::NUM_BITS as usize {
        let bit = (bytes[i / 8] >> (i % 8)) & 1 == 1;
        cs.alloc(|| "bit", || Ok(if bit { Fr::ONE } else { Fr::ZERO }))?;
    }
    Ok(())
}

/// storage-proofs' `hash_single_column` (Poseidon of the column's rows,
/// allocated already), allocating what the gadget allocates.
fn column_hash<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    rows: &[Fr],
    scratch: &mut Vec<Fr>,
) -> Result<Fr, SynthesisError> {
    scratch.clear();
    let hash = match rows.len() {
        2 => poseidon::hash::<U2>(rows, scratch),
        11 => poseidon::hash::<U11>(rows, scratch),
        _ => return Err(SynthesisError::Unsatisfiable),
    };
    for &v in scratch.iter() {
        cs.alloc(|| "column hash", || Ok(v))?;
    }
    constraints::enforce_n(cs, constraints::column_hash(rows.len())?);
    Ok(hash)
}

impl<Tree> Replica for PoRepWitness<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    fn synthesize<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        PoRepWitness::synthesize(self, cs)
    }

    fn made() {
        super::witness_made(crate::ProofKind::PoRep);
    }
}

#[cfg(test)]
mod bench;

#[cfg(test)]
mod tests;
