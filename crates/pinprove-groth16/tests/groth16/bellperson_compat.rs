//! Proofs are byte-identical to bellperson's for the same circuit,
//! parameters, r and s, and verify with bellperson's verifier.

use crate::common::*;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use pinprove_groth16::CapacityHints;
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};

fn assert_identical<C: Circuit<Scalar> + Clone + Send>(circuit: C, id: &str, inputs: &[Scalar]) {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let (params, srs) = params(circuit.clone(), &pool, 7);
    for seed in 0..2u64 {
        let mut rng = rng(100 + seed);
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let ours = our_proof(circuit.clone(), id, &srs, &pool, &hints, r, s);
        let theirs = reference_proof(circuit.clone(), &params, r, s);
        assert_eq!(
            ours.to_bytes().to_vec(),
            theirs,
            "{id}: proof bytes differ from bellperson's"
        );
        assert!(verifies(&params, &ours, inputs), "{id}: proof does not verify");
    }
}

#[test]
fn bench_circuits_with_random_and_bit_witnesses() {
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        // A power of two and an awkward size just above one.
        for n in [1 << 9, 777] {
            let c = BenchCircuit::new(n, mix).unwrap();
            assert_identical(c.clone(), &c.id(), &c.public_inputs());
        }
    }
}

#[test]
fn many_public_inputs() {
    let c = BenchCircuit::with_inputs(400, 60, WitnessMix::Random).unwrap();
    assert_identical(c.clone(), &c.id(), &c.public_inputs());
}

/// A variable used only in A, one only in C, an input used in B, and a
/// B query with no aux variable at all (an empty density column).
#[derive(Clone)]
struct Sparse;

impl Circuit<Scalar> for Sparse {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
        let y = cs.alloc(|| "y", || Ok(Scalar::from(3u64)))?;
        let pub_in = cs.alloc_input(|| "p", || Ok(Scalar::from(9u64)))?;
        // x · 1 = y: x only in A, y only in C.
        cs.enforce(|| "copy", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + y);
        // 3 · p = 27 · 1: the input appears in B.
        cs.enforce(
            || "input in b",
            |lc| lc + (Scalar::from(3u64), CS::one()),
            |lc| lc + pub_in,
            |lc| lc + (Scalar::from(27u64), CS::one()),
        );
        Ok(())
    }
}

#[test]
fn variables_only_in_c_and_empty_density_columns() {
    assert_identical(Sparse, "sparse", &[Scalar::from(9u64)]);
}

/// One constraint of its own.
#[derive(Clone)]
struct Single;

impl Circuit<Scalar> for Single {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::ONE))?;
        cs.enforce(|| "x*x=x", |lc| lc + x, |lc| lc + x, |lc| lc + x);
        Ok(())
    }
}

#[test]
fn a_single_constraint() {
    assert_identical(Single, "single", &[]);
}

/// Namespaces, inputs allocated between constraints, repeated variables in
/// one linear combination and zero coefficients.
#[derive(Clone)]
struct Interleaved;

impl Circuit<Scalar> for Interleaved {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut prev = cs.alloc(|| "start", || Ok(Scalar::from(2u64)))?;
        let mut value = Scalar::from(2u64);
        for i in 0..20u64 {
            let mut ns = cs.namespace(|| format!("round {i}"));
            let next_value = value * value + Scalar::from(i);
            let next = ns.alloc(|| "next", || Ok(next_value))?;
            ns.enforce(
                || "square plus i",
                |lc| lc + prev,
                |lc| lc + prev + (Scalar::ZERO, next),
                |lc| lc + next - (Scalar::from(i), CS::one()),
            );
            if i % 5 == 0 {
                let input = ns.alloc_input(|| "checkpoint", || Ok(next_value))?;
                ns.enforce(
                    || "bind",
                    |lc| lc + input + input,
                    |lc| lc + CS::one(),
                    |lc| lc + next + next,
                );
            }
            prev = next;
            value = next_value;
        }
        Ok(())
    }
}

#[test]
fn namespaces_and_interleaved_inputs() {
    let mut inputs = Vec::new();
    let mut v = Scalar::from(2u64);
    for i in 0..20u64 {
        v = v * v + Scalar::from(i);
        if i % 5 == 0 {
            inputs.push(v);
        }
    }
    assert_identical(Interleaved, "interleaved", &inputs);
}

#[test]
fn a_wrong_witness_gives_a_proof_that_does_not_verify() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let good = BenchCircuit::new(600, WitnessMix::Random).unwrap();
    let (params, srs) = params(good.clone(), &pool, 3);
    let bad = good.clone().corrupted();
    let mut rng = rng(5);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let proof = our_proof(bad.clone(), &bad.id(), &srs, &pool, &hints, r, s);
    assert!(!verifies(&params, &proof, &good.public_inputs()));
    // And the right witness with the same randomness does verify.
    let proof = our_proof(good.clone(), &good.id(), &srs, &pool, &hints, r, s);
    assert!(verifies(&params, &proof, &good.public_inputs()));
}
