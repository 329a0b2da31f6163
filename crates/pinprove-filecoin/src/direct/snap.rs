//! The witness of one SnapDeals partition (storage-proofs-update 19.1's
//! `EmptySectorUpdateCircuit`), without gadgets.
//!
//! Nearly all of the circuit is SHA-256: each challenge's TreeD path from
//! its leaf up to its partition's apex leaf, the apex tree and the
//! partition's path from the apex root to comm_d (binary levels, the
//! `insert` of two and a SHA-256 node, the PoRep replica's). The rest is
//! Poseidon (TreeR old and new, phi, rho, the challenges' digests, comm_r's
//! checks), through the Poseidon and PoR-level replicas, and a few small
//! gadgets (bit decompositions, packings, the apex leaf's selection, the
//! encoding), replicated here as well: storage-proofs-update keeps its own
//! gadgets private, and their values are simple sums and picks.
//!
//! The allocation sequence is the circuit's; the constraints of the
//! Poseidon gadgets are counted on the gadgets once per witness, the rest
//! are one per pick, bit, packing or equality, as the gadgets enforce them.

use std::marker::PhantomData;

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::{HashFunction, Hasher};
use generic_array::typenum::Unsigned;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::EmptySectorUpdateCircuit;
use storage_proofs_update::PublicParams;
use storage_proofs_update::circuit::ChallengeProof;
use storage_proofs_update::constants::{ALLOWED_SECTOR_SIZES, POSEIDON_CONSTANTS_GEN_RANDOMNESS, TreeRHasher, hs};

use super::count::Counter;
use super::partition::Replica;
use crate::FilecoinError;

mod synthesis;

/// Update circuits the direct witness cannot be made from (each one the
/// circuit itself would refuse, most by panicking).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectSnapError {
    /// A value the circuit allocates is not given.
    #[error("{0} is missing")]
    Missing(String),
    /// Public parameters, public inputs or a tree type that do not fit.
    #[error("{0}")]
    Shape(String),
    /// One challenge's proofs do not fit.
    #[error("challenge {challenge}: {what}")]
    Challenge {
        /// Which challenge of the partition.
        challenge: usize,
        /// What does not fit.
        what: String,
    },
}

/// One challenge's proofs, as the circuit uses them.
struct ChallengeWitness {
    leaf_r_old: Fr,
    leaf_d_new: Fr,
    /// Only checked: the circuit computes it from the others.
    leaf_r_new: Fr,
    /// Siblings per level, from the leaf up (TreeR old and new).
    path_r_old: Vec<Vec<Fr>>,
    path_r_new: Vec<Vec<Fr>>,
    /// TreeD siblings from the leaf up to the apex leaf's level.
    path_d: Vec<Fr>,
}

/// Constraints of the Poseidon gadgets the replicas stand for.
struct Counts {
    /// neptune's `poseidon_hash` with the gen-randomness constants (phi,
    /// rho, the challenges' digests).
    gen_randomness: usize,
    /// `hash2_circuit` of TreeR's hasher (comm_r = H(comm_c, root_r)).
    hash2: usize,
}

/// The values of one SnapDeals partition's circuit; synthesizing it
/// allocates exactly the circuit's inputs and aux values.
pub struct SnapWitness<Tree: MerkleTreeTrait> {
    pub_params: PublicParams,
    k_and_h_select: Fr,
    comm_r_old: Fr,
    comm_d_new: Fr,
    comm_r_new: Fr,
    comm_c: Fr,
    root_r_old: Fr,
    root_r_new: Fr,
    apex_leafs: Vec<Fr>,
    /// TreeD siblings from the apex root up to comm_d, shared by every
    /// challenge of the partition.
    partition_path: Vec<Fr>,
    challenges: Vec<ChallengeWitness>,
    counts: Counts,
    /// The tree's shape is in the paths; the type keeps witnesses of
    /// different trees apart.
    tree: PhantomData<Tree>,
}

impl<Tree> SnapWitness<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    /// The witness of `circuit`; the error says which value is missing or
    /// what does not fit the circuit.
    pub fn new(circuit: &EmptySectorUpdateCircuit<Tree>) -> Result<Self, DirectSnapError> {
        let pp = circuit.pub_params.clone();
        let nodes = pp.sector_nodes;
        if !ALLOWED_SECTOR_SIZES.contains(&nodes) || PublicParams::from_sector_size((nodes as u64) << 5) != pp {
            return Err(DirectSnapError::Shape(format!(
                "{pp:?} are not the public parameters of a sector size"
            )));
        }
        let tree_r = tree_r_arities::<Tree>(&pp)?;
        let need = |v: Option<Fr>, what: &str| v.ok_or_else(|| DirectSnapError::Missing(what.to_string()));
        let inputs = &circuit.pub_inputs;
        let k_and_h_select = need(inputs.k_and_h_select, "k_and_h_select")?;
        check_k_and_h_select(k_and_h_select, &pp)?;
        let private = &circuit.priv_inputs;
        let apex_leafs = private
            .apex_leafs
            .iter()
            .enumerate()
            .map(|(i, leaf)| need(*leaf, &format!("apex leaf {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        if apex_leafs.len() != pp.apex_leaf_count {
            return Err(DirectSnapError::Shape(format!(
                "{} apex leafs ({} expected)",
                apex_leafs.len(),
                pp.apex_leaf_count
            )));
        }
        let proofs = &private.challenge_proofs;
        if proofs.len() != pp.challenge_count {
            return Err(DirectSnapError::Shape(format!(
                "{} challenge proofs ({} expected)",
                proofs.len(),
                pp.challenge_count
            )));
        }
        // The levels above the apex root, as the first challenge has them;
        // every other challenge must have the same.
        let top = pp.challenge_bit_len - pp.partition_bit_len;
        let shared = proofs[0].path_d_new.get(top..).unwrap_or_default();
        let partition_path = shared
            .iter()
            .enumerate()
            .map(|(level, siblings)| match siblings.as_slice() {
                [sibling] => need(*sibling, &format!("partition path sibling {level}")),
                _ => Err(DirectSnapError::Shape(format!(
                    "partition path level {level} has {} siblings (1 expected)",
                    siblings.len()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let challenges = proofs
            .iter()
            .enumerate()
            .map(|(i, proof)| {
                challenge(proof, &pp, &tree_r, shared).map_err(|what| DirectSnapError::Challenge { challenge: i, what })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            k_and_h_select,
            comm_r_old: need(inputs.comm_r_old, "comm_r_old")?,
            comm_d_new: need(inputs.comm_d_new, "comm_d_new")?,
            comm_r_new: need(inputs.comm_r_new, "comm_r_new")?,
            comm_c: need(private.comm_c, "comm_c")?,
            root_r_old: need(private.root_r_old, "root_r_old")?,
            root_r_new: need(private.root_r_new, "root_r_new")?,
            apex_leafs,
            partition_path,
            challenges,
            counts: counts().map_err(|e| DirectSnapError::Shape(format!("counting the Poseidon gadgets: {e}")))?,
            pub_params: pp,
            tree: PhantomData,
        })
    }
}

/// The arity of each TreeR level from the leaf up: `Tree`'s base levels,
/// then its sub- and top-tree levels, if `Tree` is the shape of the
/// parameters' sector size.
fn tree_r_arities<Tree: MerkleTreeTrait>(pp: &PublicParams) -> Result<Vec<usize>, DirectSnapError> {
    fn arities<T: MerkleTreeTrait>() -> Result<[usize; 3], FilecoinError> {
        Ok([
            T::Arity::to_usize(),
            T::SubTreeArity::to_usize(),
            T::TopTreeArity::to_usize(),
        ])
    }
    let bytes = (pp.sector_nodes as u64) << 5;
    let expected = with_tree!(bytes, arities,).map_err(|e| DirectSnapError::Shape(e.to_string()))?;
    let [base, sub, top] = arities::<Tree>().map_err(|e| DirectSnapError::Shape(e.to_string()))?;
    if [base, sub, top] != expected {
        return Err(DirectSnapError::Shape(format!(
            "a TreeR of arities {:?} for {bytes}-byte sectors (the circuit takes {expected:?})",
            [base, sub, top]
        )));
    }
    let bits = |arity: usize| arity.trailing_zeros() as usize;
    let upper: Vec<usize> = [sub, top].into_iter().filter(|&a| a > 0).collect();
    let base_bits = pp.challenge_bit_len - upper.iter().map(|&a| bits(a)).sum::<usize>();
    let mut levels = vec![base; base_bits / bits(base)];
    levels.extend(upper);
    Ok(levels)
}

/// The checks the circuit makes on `k_and_h_select`: `k` a partition of
/// the sector, exactly one `h` selected, no other bit set.
fn check_k_and_h_select(value: Fr, pp: &PublicParams) -> Result<(), DirectSnapError> {
    let repr = value.to_repr();
    let h_bits = hs(pp.sector_nodes).len();
    let k = (0..pp.partition_bit_len)
        .filter(|&i| bit(&repr, i))
        .map(|i| 1usize << i)
        .sum::<usize>();
    let selected = (pp.partition_bit_len..pp.partition_bit_len + h_bits)
        .filter(|&i| bit(&repr, i))
        .count();
    let high = (pp.partition_bit_len + h_bits..256).any(|i| bit(&repr, i));
    if k >= pp.partition_count || selected != 1 || high {
        return Err(DirectSnapError::Shape(format!(
            "k_and_h_select {value:?}: partition {k} of {}, {selected} h selected",
            pp.partition_count
        )));
    }
    Ok(())
}

/// Bit `i` (least significant first) of a little-endian representation.
fn bit(repr: &[u8; 32], i: usize) -> bool {
    (repr[i / 8] >> (i % 8)) & 1 == 1
}

/// One challenge's proofs checked against the circuit's shape: `tree_r`
/// the arities of TreeR's levels, `shared` the partition's path above the
/// apex root.
fn challenge<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: &ChallengeProof<Tree>,
    pp: &PublicParams,
    tree_r: &[usize],
    shared: &[Vec<Option<Fr>>],
) -> Result<ChallengeWitness, String> {
    let path_r = |path: &[Vec<Option<Fr>>], which: &str| -> Result<Vec<Vec<Fr>>, String> {
        if path.len() != tree_r.len() {
            return Err(format!("{which} has {} levels ({} expected)", path.len(), tree_r.len()));
        }
        path.iter()
            .zip(tree_r)
            .enumerate()
            .map(|(level, (siblings, &arity))| {
                if siblings.len() + 1 != arity {
                    return Err(format!(
                        "{which} level {level} has {} siblings ({arity} expected)",
                        siblings.len() + 1
                    ));
                }
                siblings
                    .iter()
                    .copied()
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("{which} level {level} lacks a sibling"))
            })
            .collect()
    };
    let d = &proof.path_d_new;
    if d.len() != pp.challenge_bit_len {
        return Err(format!(
            "path_d_new has {} levels ({} expected)",
            d.len(),
            pp.challenge_bit_len
        ));
    }
    let apex = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    if d[pp.challenge_bit_len - pp.partition_bit_len..] != *shared {
        return Err("path_d_new differs from the partition's above the apex root".into());
    }
    let path_d = d[..apex]
        .iter()
        .enumerate()
        // The circuit takes each level's first sibling.
        .map(|(level, siblings)| {
            siblings
                .first()
                .copied()
                .flatten()
                .ok_or(format!("path_d_new level {level} lacks a sibling"))
        })
        .collect::<Result<_, _>>()?;
    let leaf = |v: Option<Fr>, what: &str| v.ok_or_else(|| format!("{what} is missing"));
    Ok(ChallengeWitness {
        leaf_r_old: leaf(proof.leaf_r_old, "leaf_r_old")?,
        leaf_d_new: leaf(proof.leaf_d_new, "leaf_d_new")?,
        leaf_r_new: leaf(proof.leaf_r_new, "leaf_r_new")?,
        path_r_old: path_r(&proof.path_r_old, "path_r_old")?,
        path_r_new: path_r(&proof.path_r_new, "path_r_new")?,
        path_d,
    })
}

/// The Poseidon gadgets' constraints, counted on the gadgets.
fn counts() -> Result<Counts, SynthesisError> {
    let mut cs = Counter::default();
    let a = AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE))?;
    let b = AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE))?;
    let before = cs.constraints;
    neptune::circuit::poseidon_hash(&mut cs, vec![a.clone(), b.clone()], &*POSEIDON_CONSTANTS_GEN_RANDOMNESS)?;
    let gen_randomness = cs.constraints - before;
    let before = cs.constraints;
    <TreeRHasher as Hasher>::Function::hash2_circuit(&mut cs, &a, &b)?;
    Ok(Counts {
        gen_randomness,
        hash2: cs.constraints - before,
    })
}

impl<Tree> Replica for SnapWitness<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    fn synthesize<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        SnapWitness::synthesize(self, cs)
    }

    fn made() {
        super::witness_made(crate::ProofKind::SnapDeals);
    }
}

#[cfg(test)]
mod tests;
