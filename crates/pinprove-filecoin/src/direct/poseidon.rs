//! neptune's Poseidon gadget (`neptune::circuit::poseidon_hash`, which
//! filecoin-hashers' circuits call for every Poseidon hash: tree nodes,
//! column hashes, comm_r), witness only.
//!
//! The gadget keeps the state as linear combinations between S-boxes and
//! allocates only around them, so the witness is the state of neptune's
//! optimized permutation (compressed round constants, a pre-sparse matrix
//! then sparse matrices over the partial rounds) at the points the gadget
//! allocates, in its order:
//!
//! * first full round: the domain tag's S-box is a constant; each other
//!   element (already allocated) gets `(x + pre)²`, its square, and
//!   `x⁴·(x + pre) + post`;
//! * every later full round: each element `x` (a combination) is allocated,
//!   then `x²`, `x⁴` and `x⁴·x + post` (no `post` in the terminal round);
//! * every partial round: the same four for the first element only;
//! * the result: element 1 of the final state, allocated.
//!
//! The constants are neptune's own ([`PoseidonConstants`]), never retyped.

use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::PoseidonArity;
use neptune::poseidon::PoseidonConstants;

mod sum;

use sum::sum_of_products;

/// Allocations of one hash of arity `a`: what [`hash_with`] pushes.
pub fn allocations<A: PoseidonArity>(constants: &PoseidonConstants<Fr, A>) -> usize {
    let width = constants.width();
    // First round: three per input (the tag's S-box is constant); the other
    // full rounds four per element; partial rounds four; the result one.
    3 * (width - 1) + 4 * width * (constants.full_rounds - 1) + 4 * constants.partial_rounds + 1
}

/// The hash of `preimage` (arity `A`, with `A`'s own constants), pushing
/// every value the gadget allocates into `out`; the hash is the last.
pub fn hash<A: PoseidonArity>(preimage: &[Fr], out: &mut Vec<Fr>) -> Fr {
    hash_with(A::PARAMETERS(), preimage, out)
}

/// [`hash`] with the given constants.
pub fn hash_with<A: PoseidonArity>(constants: &PoseidonConstants<Fr, A>, preimage: &[Fr], out: &mut Vec<Fr>) -> Fr {
    let width = constants.width();
    assert_eq!(preimage.len() + 1, width, "a preimage of the constants' arity");
    assert!(width <= sum::MAX_TERMS, "a width of {width}");
    let keys = &constants.compressed_round_constants;
    // On the stack: a hash is a few hundred values, an allocation each
    // would show.
    let (mut state, mut next) = ([Fr::ZERO; sum::MAX_TERMS], [Fr::ZERO; sum::MAX_TERMS]);
    let (state, next) = (&mut state[..width], &mut next[..width]);
    state[0] = constants.domain_tag;
    state[1..].copy_from_slice(preimage);
    let mut key = 0;
    let mut round = 0;
    let half = constants.half_full_rounds;

    // The first full round adds a key before the S-box and one after; the
    // domain tag's S-box is a constant, each input's allocates (x + pre)²,
    // its square and the result.
    let (pre, post) = (&keys[key..key + width], &keys[key + width..key + 2 * width]);
    key += 2 * width;
    for i in 0..width {
        let [x2, x4, y] = quintic(state[i] + pre[i], post[i]);
        state[i] = y;
        if i > 0 {
            out.extend_from_slice(&[x2, x4, y]);
        }
    }
    mix(constants, round, state, next);
    round += 1;

    // Every later S-box allocates its input (a combination until now), its
    // square, fourth power and result.
    let sbox = |x: &mut Fr, post: Fr, out: &mut Vec<Fr>| {
        let [x2, x4, y] = quintic(*x, post);
        out.extend_from_slice(&[*x, x2, x4, y]);
        *x = y;
    };
    for _ in 1..half {
        for (x, k) in state.iter_mut().zip(&keys[key..key + width]) {
            sbox(x, *k, out);
        }
        key += width;
        mix(constants, round, state, next);
        round += 1;
    }
    for _ in 0..constants.partial_rounds {
        sbox(&mut state[0], keys[key], out);
        key += 1;
        mix(constants, round, state, next);
        round += 1;
    }
    for r in 0..half {
        // The terminal round adds no key.
        let last = r + 1 == half;
        for (i, x) in state.iter_mut().enumerate() {
            sbox(x, if last { Fr::ZERO } else { keys[key + i] }, out);
        }
        if !last {
            key += width;
        }
        mix(constants, round, state, next);
        round += 1;
    }
    out.push(state[1]);
    state[1]
}

/// x², x⁴ and x⁵ + `post`: what one S-box allocates after its input.
fn quintic(x: Fr, post: Fr) -> [Fr; 3] {
    let x2 = x.square();
    let x4 = x2.square();
    [x2, x4, x4 * x + post]
}

/// The linear layer after round `round`, as the gadget applies it: the
/// pre-sparse matrix after the last initial full round, a sparse matrix
/// after each partial round, the MDS matrix otherwise. Every row is a sum
/// of products, reduced once.
fn mix<A: PoseidonArity>(constants: &PoseidonConstants<Fr, A>, round: usize, state: &mut [Fr], next: &mut [Fr]) {
    let sparse_from = constants.half_full_rounds - 1;
    let dense = |m: &Vec<Vec<Fr>>, state: &mut [Fr], next: &mut [Fr]| {
        let mut column = [Fr::ZERO; sum::MAX_TERMS];
        let column = &mut column[..state.len()];
        for (j, n) in next.iter_mut().enumerate() {
            for (c, row) in column.iter_mut().zip(m) {
                *c = row[j];
            }
            *n = sum_of_products(state, column);
        }
        state.copy_from_slice(next);
    };
    if round == sparse_from {
        dense(&constants.pre_sparse_matrix, state, next);
    } else if round > sparse_from && round < constants.half_full_rounds + constants.partial_rounds {
        let sparse = &constants.sparse_matrixes[round - sparse_from - 1];
        let first = state[0];
        let head = sum_of_products(state, &sparse.w_hat);
        for (x, v) in state[1..].iter_mut().zip(&sparse.v_rest) {
            *x += first * v;
        }
        state[0] = head;
    } else {
        dense(&constants.mds_matrices.m, state, next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::ConstraintSystem;
    use bellpepper_core::num::AllocatedNum;
    use filecoin_hashers::poseidon::PoseidonFunction;
    use filecoin_hashers::{HashFunction, PoseidonMDArity};
    use generic_array::typenum::{U2, U4, U8, U11, U16};
    use neptune::poseidon::Poseidon;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use crate::direct::tests::Recorder;

    /// The gadget's allocations for one hash of `preimage`, and the
    /// constraints it enforced.
    fn gadget<A: PoseidonArity>(preimage: &[Fr]) -> (Vec<Fr>, Fr) {
        let mut cs = Recorder::default();
        let leaves: Vec<_> = preimage
            .iter()
            .enumerate()
            .map(|(i, v)| AllocatedNum::alloc(cs.namespace(|| format!("leaf {i}")), || Ok(*v)).unwrap())
            .collect();
        let first = cs.aux.len();
        let h = PoseidonFunction::hash_multi_leaf_circuit::<A, _>(cs.namespace(|| "hash"), &leaves, 0).unwrap();
        (cs.aux[first..].to_vec(), h.get_value().unwrap())
    }

    fn check<A: PoseidonArity>(rng: &mut ChaCha8Rng) {
        let preimage: Vec<Fr> = (0..A::to_usize()).map(|_| Fr::random(&mut *rng)).collect();
        let (values, h) = gadget::<A>(&preimage);
        let mut out = Vec::new();
        let direct = hash::<A>(&preimage, &mut out);
        assert_eq!(direct, h, "arity {}: the hash", A::to_usize());
        assert_eq!(out.len(), allocations(A::PARAMETERS()), "arity {}", A::to_usize());
        assert_eq!(out, values, "arity {}: every allocated value in order", A::to_usize());
    }

    #[test]
    fn every_value_the_gadget_allocates_for_every_arity_filecoin_uses() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        check::<U2>(&mut rng);
        check::<U4>(&mut rng);
        check::<U8>(&mut rng);
        check::<U11>(&mut rng);
        check::<U16>(&mut rng);
        check::<PoseidonMDArity>(&mut rng);
    }

    /// The direct hash against neptune's own (out of circuit) for many
    /// preimages: random ones and the extremes (all zero, all one, all
    /// r - 1, alternating).
    fn check_against_neptune<A: PoseidonArity>(rng: &mut ChaCha8Rng) {
        let arity = A::to_usize();
        let top = -Fr::ONE;
        let mut preimages = vec![vec![Fr::ZERO; arity], vec![Fr::ONE; arity], vec![top; arity]];
        preimages.push((0..arity).map(|i| if i % 2 == 0 { top } else { Fr::ZERO }).collect());
        for _ in 0..200 {
            preimages.push((0..arity).map(|_| Fr::random(&mut *rng)).collect());
        }
        let mut out = Vec::new();
        for preimage in &preimages {
            out.clear();
            let expected = Poseidon::new_with_preimage(preimage, A::PARAMETERS()).hash();
            assert_eq!(hash::<A>(preimage, &mut out), expected, "arity {arity}: {preimage:?}");
            assert_eq!(out.last(), Some(&expected));
        }
    }

    #[test]
    fn the_hash_is_neptunes_for_random_and_extreme_preimages() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        check_against_neptune::<U2>(&mut rng);
        check_against_neptune::<U4>(&mut rng);
        check_against_neptune::<U8>(&mut rng);
        check_against_neptune::<U11>(&mut rng);
        check_against_neptune::<U16>(&mut rng);
        check_against_neptune::<PoseidonMDArity>(&mut rng);
    }

    #[test]
    fn a_changed_round_constant_or_matrix_entry_is_caught() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let preimage: Vec<Fr> = (0..8).map(|_| Fr::random(&mut rng)).collect();
        let (values, _) = gadget::<U8>(&preimage);
        let base: &PoseidonConstants<Fr, U8> = U8::PARAMETERS();
        let mut key = base.clone();
        key.compressed_round_constants[40] += Fr::ONE;
        let mut sparse = base.clone();
        sparse.sparse_matrixes[3].v_rest[2] += Fr::ONE;
        let mut tag = base.clone();
        tag.domain_tag += Fr::ONE;
        for (what, c) in [("round constant", key), ("sparse matrix", sparse), ("domain tag", tag)] {
            let mut out = Vec::new();
            hash_with(&c, &preimage, &mut out);
            assert_ne!(out, values, "a changed {what} went unnoticed");
        }
    }
}
