//! storage-proofs' PoR gadget over a Poseidon tree (`PoRCircuit`, the root
//! private: every TreeR, TreeC and PoSt inclusion), witness only.
//!
//! Per level of the path, from the leaf up, the gadget allocates the
//! node's position as `log2(arity)` bits (least significant first), the
//! `arity - 1` siblings, the inserted row (`insertion::insert`: picks, and
//! for arity 8 the bits' NOR and AND first), and the row's Poseidon hash.
//! The position bits of every level are then packed into public inputs and
//! the computed root is constrained equal to the given one.

use std::sync::OnceLock;

use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::poseidon::PoseidonFunction;
use filecoin_hashers::{HashFunction, PoseidonArity};
use generic_array::typenum::{U2, U4, U8};
use storage_proofs_core::gadgets::insertion::insert;

use super::count::{Counter, enforce_n};
use super::poseidon;

/// One level of an inclusion path: the node's position among its
/// `siblings.len() + 1` children and the other children, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathLevel {
    index: usize,
    siblings: Vec<Fr>,
}

/// An inclusion path in a Poseidon tree, from the leaf up (base, sub and
/// top tree levels in one list, as `MerkleProof::as_options` gives them).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PoseidonPath {
    levels: Vec<PathLevel>,
}

impl PoseidonPath {
    /// The path of a Merkle proof's `as_options()`; the error says which
    /// level does not fit (missing values, an arity other than 2, 4 or 8).
    pub fn from_options(options: Vec<(Vec<Option<Fr>>, Option<usize>)>) -> Result<Self, String> {
        let levels = options
            .into_iter()
            .enumerate()
            .map(|(level, (hashes, index))| {
                let arity = hashes.len() + 1;
                if !matches!(arity, 2 | 4 | 8) {
                    return Err(format!("level {level} has arity {arity} (2, 4 or 8 expected)"));
                }
                let siblings = hashes
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| format!("level {level} lacks a sibling"))?;
                let index = index.ok_or_else(|| format!("level {level} lacks its index"))?;
                // The gadget keeps the low bits only.
                Ok(PathLevel {
                    index: index & (arity - 1),
                    siblings,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { levels })
    }

    /// Its levels, from the leaf up.
    pub fn levels(&self) -> &[PathLevel] {
        &self.levels
    }
}

impl PathLevel {
    /// A level of `siblings.len() + 1` children, the node at `index`.
    pub fn new(index: usize, siblings: Vec<Fr>) -> Self {
        Self { index, siblings }
    }
}

/// What the PoR gadget allocates for `leaf`'s path, into `cs`; returns the
/// root it computes (constrained equal to the given root, a variable the
/// caller allocated). `allocate_leaf`: the gadget allocates the leaf itself
/// (`Root::Val`) rather than taking a variable (`Root::Var`). `scratch`
/// keeps the Poseidon values between calls.
pub fn inclusion<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    path: &PoseidonPath,
    leaf: Fr,
    allocate_leaf: bool,
    scratch: &mut Vec<Fr>,
) -> Result<Fr, SynthesisError> {
    let alloc = |cs: &mut CS, v: Fr| cs.alloc(|| "direct", || Ok(v)).map(drop);
    if allocate_leaf {
        alloc(cs, leaf)?;
    }
    let mut cur = leaf;
    let mut constraints = 0;
    // The position bits of every level, packed as the gadget packs them.
    let mut packed = Vec::with_capacity(1);
    let (mut word, mut coeff, mut bits_in_word) = (Fr::ZERO, Fr::ONE, 0);
    for level in &path.levels {
        let arity = level.siblings.len() + 1;
        let bits = arity.trailing_zeros() as usize;
        let position: [bool; 3] = std::array::from_fn(|i| i < bits && (level.index >> i) & 1 == 1);
        for &bit in &position[..bits] {
            alloc(cs, Fr::from(bit as u64))?;
            if bit {
                word += coeff;
            }
            coeff = coeff.double();
            bits_in_word += 1;
            if bits_in_word == Fr::CAPACITY {
                packed.push(word);
                (word, coeff, bits_in_word) = (Fr::ZERO, Fr::ONE, 0);
            }
        }
        for &s in &level.siblings {
            alloc(cs, s)?;
        }
        cur = hash_level(cs, cur, &level.siblings, position, scratch)?;
        // Each position bit is a boolean constraint.
        constraints += bits;
    }
    if bits_in_word > 0 {
        packed.push(word);
    }
    for &input in &packed {
        cs.alloc_input(|| "direct", || Ok(input))?;
    }
    // One packing constraint per input, and the root's equality.
    enforce_n(cs, constraints + packed.len() + 1);
    Ok(cur)
}

/// One level above `node` whose position bits and siblings the circuit
/// allocated already: what `insert` and the level's Poseidon hash allocate,
/// and their constraints; returns the hash.
pub fn hash_level<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    node: Fr,
    siblings: &[Fr],
    position: [bool; 3],
    scratch: &mut Vec<Fr>,
) -> Result<Fr, SynthesisError> {
    let arity = siblings.len() + 1;
    let mut row = [Fr::ZERO; 8];
    let row = &mut row[..arity];
    for pick in insertion(node, siblings, position, row) {
        cs.alloc(|| "insert", || Ok(pick))?;
    }
    scratch.clear();
    let hash = match arity {
        2 => poseidon::hash::<U2>(row, scratch),
        4 => poseidon::hash::<U4>(row, scratch),
        8 => poseidon::hash::<U8>(row, scratch),
        _ => return Err(SynthesisError::Unsatisfiable),
    };
    for &v in scratch.iter() {
        cs.alloc(|| "hash", || Ok(v))?;
    }
    enforce_n(cs, level_constraints(arity)?);
    Ok(hash)
}

/// The values `insert` allocates to put `node` at position `b` (bits, least
/// significant first) among `siblings`, in its order; `row` receives the
/// inserted row.
fn insertion(node: Fr, siblings: &[Fr], bits: [bool; 3], row: &mut [Fr]) -> impl Iterator<Item = Fr> {
    // The names are the gadget's: `a` the node, `b`.. the siblings, `b0`..
    // the position's bits; `pick(c, x, y)` is "if c { x } else { y }".
    let pick = |c: bool, x: Fr, y: Fr| if c { x } else { y };
    let [b0, b1, b2] = bits;
    let a = node;
    let mut picks = [Fr::ZERO; 22];
    let n = match *siblings {
        [s] => {
            picks[..2].copy_from_slice(&[pick(b0, s, a), pick(b0, a, s)]);
            row.copy_from_slice(&picks[..2]);
            2
        }
        [b, c, d] => {
            let p0_x0 = pick(b0, b, a);
            let p0 = pick(b1, b, p0_x0);
            let p1_x0 = pick(b0, a, b);
            let p1 = pick(b1, c, p1_x0);
            let p2_x1 = pick(b0, d, a);
            let p2 = pick(b1, p2_x1, c);
            let p3_x1 = pick(b0, a, d);
            let p3 = pick(b1, p3_x1, d);
            picks[..8].copy_from_slice(&[p0_x0, p0, p1_x0, p1, p2_x1, p2, p3_x1, p3]);
            row.copy_from_slice(&[p0, p1, p2, p3]);
            8
        }
        [b, c, d, e, f, g, h] => {
            let nor = !b0 && !b1;
            let and = b0 && b1;
            let p0_xx0 = pick(nor, a, b);
            let p0 = pick(b2, b, p0_xx0);
            let p1_x00 = pick(b0, a, b);
            let p1_xx0 = pick(b1, c, p1_x00);
            let p1 = pick(b2, c, p1_xx0);
            let p2_x10 = pick(b0, d, a);
            let p2_xx0 = pick(b1, p2_x10, c);
            let p2 = pick(b2, d, p2_xx0);
            let p3_xx0 = pick(and, a, d);
            let p3 = pick(b2, e, p3_xx0);
            let p4_xx1 = pick(nor, a, f);
            let p4 = pick(b2, p4_xx1, e);
            let p5_x01 = pick(b0, a, f);
            let p5_xx1 = pick(b1, g, p5_x01);
            let p5 = pick(b2, p5_xx1, f);
            let p6_x11 = pick(b0, h, a);
            let p6_xx1 = pick(b1, p6_x11, g);
            let p6 = pick(b2, p6_xx1, g);
            let p7_xx1 = pick(and, a, h);
            let p7 = pick(b2, p7_xx1, h);
            picks = [
                Fr::from(nor as u64),
                Fr::from(and as u64),
                p0_xx0,
                p0,
                p1_x00,
                p1_xx0,
                p1,
                p2_x10,
                p2_xx0,
                p2,
                p3_xx0,
                p3,
                p4_xx1,
                p4,
                p5_x01,
                p5_xx1,
                p5,
                p6_x11,
                p6_xx1,
                p6,
                p7_xx1,
                p7,
            ];
            row.copy_from_slice(&[p0, p1, p2, p3, p4, p5, p6, p7]);
            22
        }
        _ => 0,
    };
    picks.into_iter().take(n)
}

/// Constraints of one level of arity `arity` (its insertion and hash),
/// counted on the gadgets once per process.
fn level_constraints(arity: usize) -> Result<usize, SynthesisError> {
    static COUNTS: OnceLock<Option<[usize; 3]>> = OnceLock::new();
    let counts = COUNTS.get_or_init(|| {
        Some([
            count_level::<U2>().ok()?,
            count_level::<U4>().ok()?,
            count_level::<U8>().ok()?,
        ])
    });
    let counts = counts.as_ref().ok_or(SynthesisError::Unsatisfiable)?;
    match arity {
        2 => Ok(counts[0]),
        4 => Ok(counts[1]),
        8 => Ok(counts[2]),
        _ => Err(SynthesisError::Unsatisfiable),
    }
}

fn count_level<A: PoseidonArity>() -> Result<usize, SynthesisError> {
    let mut cs = Counter::default();
    let arity = A::to_usize();
    let node = AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE))?;
    let siblings = (0..arity - 1)
        .map(|_| AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE)))
        .collect::<Result<Vec<_>, _>>()?;
    let bits = (0..arity.trailing_zeros())
        .map(|_| AllocatedBit::alloc(&mut cs, Some(false)).map(Boolean::from))
        .collect::<Result<Vec<_>, _>>()?;
    let before = cs.constraints;
    let row = insert(&mut cs, &node, &bits, &siblings)?;
    PoseidonFunction::hash_multi_leaf_circuit::<A, _>(&mut cs, &row, 0)?;
    Ok(cs.constraints - before)
}

#[cfg(test)]
mod tests;
