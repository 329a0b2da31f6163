//! What the circuit's `synthesize` allocates, in its order, from the
//! witness's values.
//!
//! Bits are plain booleans here: the circuit allocates every bit it uses
//! (`AllocatedBit`, never a constant), so a bit is one value and one
//! booleanity constraint, and what its gadgets pick or pack from it is
//! known from its value.

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use generic_array::typenum::U2;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::{POSEIDON_CONSTANTS_GEN_RANDOMNESS, TreeRHasher, hs};

use super::{ChallengeWitness, SnapWitness, bit};
use crate::direct::count::enforce_n;
use crate::direct::porep::sha256_node;
use crate::direct::{poseidon, tree};

impl<Tree> SnapWitness<Tree>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    /// Synthesizes into `cs` what the circuit allocates.
    pub fn synthesize<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        let pp = &self.pub_params;
        let hs = hs(pp.sector_nodes);
        let mut scratch = Vec::new();

        public(cs, self.k_and_h_select)?;
        let repr = self.k_and_h_select.to_repr();
        let bits: Vec<bool> = (0..pp.partition_bit_len + hs.len()).map(|i| bit(&repr, i)).collect();
        alloc_bits(cs, &bits)?;
        // The decomposition's sum.
        enforce_n(cs, 1);
        let (partition_bits, h_select) = bits.split_at(pp.partition_bit_len);
        let k = pack(cs, partition_bits)?;

        public(cs, self.comm_r_old)?;
        public(cs, self.comm_d_new)?;
        public(cs, self.comm_r_new)?;
        let phi = self.gen_randomness(cs, self.comm_d_new, self.comm_r_old, &mut scratch)?;

        for v in [self.comm_c, self.root_r_old, self.root_r_new] {
            cs.alloc(|| "private", || Ok(v))?;
        }
        let apex_leafs = self
            .apex_leafs
            .iter()
            .map(|&v| AllocatedNum::alloc(&mut *cs, || Ok(v)))
            .collect::<Result<Vec<_>, _>>()?;
        for &v in &self.partition_path {
            cs.alloc(|| "partition path", || Ok(v))?;
        }

        // comm_r = H(comm_c, root_r), old and new, each equal to its input.
        for root in [self.root_r_old, self.root_r_new] {
            scratch.clear();
            poseidon::hash::<U2>(&[self.comm_c, root], &mut scratch);
            for &v in &scratch {
                cs.alloc(|| "comm_r", || Ok(v))?;
            }
            enforce_n(cs, self.counts.hash2 + 1);
        }

        // The apex tree, and its root's path to comm_d.
        let mut row = apex_leafs;
        while row.len() > 1 {
            row = row
                .chunks(2)
                .map(|pair| match pair {
                    [left, right] => sha256_node(&mut *cs, left, right),
                    _ => Err(SynthesisError::Unsatisfiable),
                })
                .collect::<Result<_, _>>()?;
        }
        let apex_root = row
            .first()
            .and_then(|r| r.get_value())
            .ok_or(SynthesisError::Unsatisfiable)?;
        tree_d(cs, apex_root, &self.partition_path, partition_bits)?;

        let generated = self.challenge_bits(cs, k, &mut scratch)?;
        let apex = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
        for (c, random_bits) in self.challenges.iter().zip(generated) {
            let mut c_bits = random_bits;
            c_bits.extend_from_slice(partition_bits);
            let high = challenge_high(cs, &c_bits, h_select, &hs)?;
            let rho = self.gen_randomness(cs, phi, high, &mut scratch)?;
            self.challenge(cs, c, &c_bits, rho, apex, &mut scratch)?;
        }
        Ok(())
    }

    /// One challenge's encoding and its three inclusions, from `c_bits`
    /// (the challenge's bits, least significant first) and its `rho`.
    fn challenge<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        c: &ChallengeWitness,
        c_bits: &[bool],
        rho: Fr,
        apex: usize,
        scratch: &mut Vec<Fr>,
    ) -> Result<(), SynthesisError> {
        cs.alloc(|| "leaf_r_old", || Ok(c.leaf_r_old))?;
        cs.alloc(|| "leaf_d_new", || Ok(c.leaf_d_new))?;
        // label_r_new = label_r_old + label_d_new · rho: the product, then
        // the sum, one constraint each.
        let product = c.leaf_d_new * rho;
        let leaf_r_new = c.leaf_r_old + product;
        cs.alloc(|| "label_d_new * rho", || Ok(product))?;
        cs.alloc(|| "label_r_new", || Ok(leaf_r_new))?;
        enforce_n(cs, 2);
        // The circuit asserts the given label is the one it computes.
        if leaf_r_new != c.leaf_r_new {
            return Err(SynthesisError::Unsatisfiable);
        }

        tree_r(cs, c.leaf_r_old, &c.path_r_old, c_bits, scratch)?;
        tree_r(cs, leaf_r_new, &c.path_r_new, c_bits, scratch)?;

        let apex_bits = c_bits.get(apex..apex + self.pub_params.apex_leaf_bit_len);
        // The selected apex leaf is the root the TreeD path ends at: only a
        // constraint, whose value is not needed.
        select(cs, &self.apex_leafs, apex_bits.ok_or(SynthesisError::Unsatisfiable)?)?;
        for &v in &c.path_d {
            cs.alloc(|| "path to apex leaf", || Ok(v))?;
        }
        tree_d(cs, c.leaf_d_new, &c.path_d, &c_bits[..apex])
    }

    /// Poseidon of `a` and `b` with the gen-randomness constants: what
    /// neptune's gadget allocates; returns the hash.
    fn gen_randomness<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        a: Fr,
        b: Fr,
        scratch: &mut Vec<Fr>,
    ) -> Result<Fr, SynthesisError> {
        scratch.clear();
        let hash = poseidon::hash_with(&*POSEIDON_CONSTANTS_GEN_RANDOMNESS, &[a, b], scratch);
        for &v in scratch.iter() {
            cs.alloc(|| "poseidon", || Ok(v))?;
        }
        enforce_n(cs, self.counts.gen_randomness);
        Ok(hash)
    }

    /// Each challenge's random bits (least significant first): digest `j`
    /// of the partition is H(comm_r_new, k · digests + j), decomposed
    /// into bits, cut into challenges.
    fn challenge_bits<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        k: Fr,
        scratch: &mut Vec<Fr>,
    ) -> Result<Vec<Vec<bool>>, SynthesisError> {
        let pp = &self.pub_params;
        let per_challenge = pp.challenge_bit_len - pp.partition_bit_len;
        let per_digest = Fr::CAPACITY as usize / per_challenge;
        let digests = pp.challenge_count.div_ceil(per_digest);
        let mut out = Vec::with_capacity(pp.challenge_count);
        for j in 0..digests {
            let index = k * Fr::from(digests as u64) + Fr::from(j as u64);
            cs.alloc(|| "digest index", || Ok(index))?;
            enforce_n(cs, 1);
            let digest = self.gen_randomness(cs, self.comm_r_new, index, scratch)?;
            let repr = digest.to_repr();
            let bits: Vec<bool> = (0..Fr::NUM_BITS as usize).map(|i| bit(&repr, i)).collect();
            alloc_bits(cs, &bits)?;
            // The decomposition's sum.
            enforce_n(cs, 1);
            let take = (pp.challenge_count - out.len()).min(per_digest);
            out.extend(bits.chunks(per_challenge).take(take).map(<[bool]>::to_vec));
        }
        Ok(out)
    }
}

/// An allocated number made public (`inputize`: the input and its
/// equality).
fn public<CS: ConstraintSystem<Fr>>(cs: &mut CS, v: Fr) -> Result<(), SynthesisError> {
    cs.alloc(|| "value", || Ok(v))?;
    cs.alloc_input(|| "input", || Ok(v))?;
    enforce_n(cs, 1);
    Ok(())
}

/// `AllocatedBit`s of these values, each with its booleanity constraint.
fn alloc_bits<CS: ConstraintSystem<Fr>>(cs: &mut CS, bits: &[bool]) -> Result<(), SynthesisError> {
    for &b in bits {
        cs.alloc(|| "bit", || Ok(Fr::from(b as u64)))?;
    }
    enforce_n(cs, bits.len());
    Ok(())
}

/// `pack_bits`: the bits' number (least significant first), allocated.
fn pack<CS: ConstraintSystem<Fr>>(cs: &mut CS, bits: &[bool]) -> Result<Fr, SynthesisError> {
    let mut value = Fr::ZERO;
    for &b in bits.iter().rev() {
        value = value.double();
        if b {
            value += Fr::ONE;
        }
    }
    cs.alloc(|| "packed", || Ok(value))?;
    enforce_n(cs, 1);
    Ok(value)
}

/// The challenge's `h` high bits as a number, `h` the one `h_select`
/// selects among `hs`: each candidate packed and multiplied by its
/// selector bit, then their sum.
fn challenge_high<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    c_bits: &[bool],
    h_select: &[bool],
    hs: &[usize],
) -> Result<Fr, SynthesisError> {
    let mut sum = Fr::ZERO;
    for (&h, &selected) in hs.iter().zip(h_select) {
        let from = c_bits.len().checked_sub(h).ok_or(SynthesisError::Unsatisfiable)?;
        let high = pack(cs, &c_bits[from..])?;
        let high_or_zero = if selected { high } else { Fr::ZERO };
        cs.alloc(|| "c_high_or_zero", || Ok(high_or_zero))?;
        sum += high_or_zero;
    }
    cs.alloc(|| "c_high_selected", || Ok(sum))?;
    // One product per candidate, and the sum.
    enforce_n(cs, hs.len() + 1);
    Ok(sum)
}

/// `select` of the leaf at `bits` (least significant first) among
/// `leafs`: the candidates halved per bit from the most significant, each
/// kept one a pick (a value and a constraint).
fn select<CS: ConstraintSystem<Fr>>(cs: &mut CS, leafs: &[Fr], bits: &[bool]) -> Result<(), SynthesisError> {
    if leafs.len() != 1 << bits.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut state = leafs.to_vec();
    let mut half = leafs.len() / 2;
    for &b in bits.iter().rev() {
        // Candidate `j` reads `j` and `half + j` only: in place is safe.
        for j in 0..half {
            let v = if b { state[half + j] } else { state[j] };
            cs.alloc(|| "pick", || Ok(v))?;
            state[j] = v;
        }
        half /= 2;
    }
    enforce_n(cs, leafs.len() - 1);
    Ok(())
}

/// TreeR's PoR from `leaf` up (`por_no_challenge_input`): the siblings,
/// then per level the insertion and the hash at the position the
/// challenge's bits give, then the root's equality.
fn tree_r<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    leaf: Fr,
    path: &[Vec<Fr>],
    c_bits: &[bool],
    scratch: &mut Vec<Fr>,
) -> Result<(), SynthesisError> {
    for &v in path.iter().flatten() {
        cs.alloc(|| "sibling", || Ok(v))?;
    }
    let mut bits = c_bits.iter();
    let mut cur = leaf;
    for siblings in path {
        let width = (siblings.len() + 1).trailing_zeros() as usize;
        let mut position = [false; 3];
        for p in position.iter_mut().take(width) {
            *p = *bits.next().ok_or(SynthesisError::Unsatisfiable)?;
        }
        cur = tree::hash_level(cs, cur, siblings, position, scratch)?;
    }
    if bits.next().is_some() {
        return Err(SynthesisError::Unsatisfiable);
    }
    enforce_n(cs, 1);
    Ok(())
}

/// TreeD's PoR from `leaf` up, its siblings allocated already: per level
/// the ordered pair (two picks) and its SHA-256 node, then the root's
/// equality.
fn tree_d<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    leaf: Fr,
    siblings: &[Fr],
    bits: &[bool],
) -> Result<(), SynthesisError> {
    if siblings.len() != bits.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut cur = leaf;
    for (&sibling, &right) in siblings.iter().zip(bits) {
        let (l, r) = if right { (sibling, cur) } else { (cur, sibling) };
        let l = AllocatedNum::alloc(&mut *cs, || Ok(l))?;
        let r = AllocatedNum::alloc(&mut *cs, || Ok(r))?;
        enforce_n(cs, 2);
        cur = sha256_node(&mut *cs, &l, &r)?
            .get_value()
            .ok_or(SynthesisError::AssignmentMissing)?;
    }
    enforce_n(cs, 1);
    Ok(())
}
