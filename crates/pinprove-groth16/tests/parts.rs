//! A circuit made of independent parts synthesizes in parallel to exactly
//! the assignment (and the proof) of its sequential synthesis.

mod common;

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use common::*;
use ff::Field;
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHints, CpuBackend, ProvingAssignment, ProvingJob, synthesize, synthesize_parts,
};

/// One part: a public input x, private x², x³ + 1 and a few bits, with
/// constraints that use ONE and the input in A, B and C.
#[derive(Clone)]
struct Part(u64);

impl Circuit<Scalar> for &Part {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = Scalar::from(self.0 + 2);
        let xv = cs.alloc_input(|| "x", || Ok(x))?;
        let sq = cs.alloc(|| "x^2", || Ok(x.square()))?;
        let cube = cs.alloc(|| "x^3+1", || Ok(x.square() * x + Scalar::ONE))?;
        cs.enforce(|| "sq", |lc| lc + xv, |lc| lc + xv, |lc| lc + sq);
        cs.enforce(|| "cube", |lc| lc + sq, |lc| lc + xv, |lc| lc + cube - CS::one());
        for k in 0..3 {
            let bit = (self.0 >> k) & 1;
            let b = cs.alloc(|| "bit", || Ok(Scalar::from(bit)))?;
            cs.enforce(|| "boolean", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
        }
        Ok(())
    }
}

/// The same parts, one after the other.
#[derive(Clone)]
struct Whole(Vec<Part>);

impl Circuit<Scalar> for Whole {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for p in &self.0 {
            p.synthesize(cs)?;
        }
        Ok(())
    }
}

fn same(a: &ProvingAssignment, b: &ProvingAssignment) {
    assert_eq!(a.a(), b.a());
    assert_eq!(a.b(), b.b());
    assert_eq!(a.c(), b.c());
    assert_eq!(a.inputs(), b.inputs());
    assert_eq!(a.aux(), b.aux());
    assert_eq!(a.a_aux_density().words(), b.a_aux_density().words());
    assert_eq!(a.b_input_density().words(), b.b_input_density().words());
    assert_eq!(a.b_aux_density().words(), b.b_aux_density().words());
}

#[test]
fn parts_synthesize_in_parallel_to_the_sequential_assignment_and_proof() {
    let pool = pool();
    let parts: Vec<Part> = (0..203).map(Part).collect();
    let whole = Whole(parts.clone());
    for layout in [AbcLayout::Exact, AbcLayout::PaddedToDomain] {
        let hints = CapacityHints::in_memory();
        let (seq, _) = synthesize(whole.clone(), "parts", &pool, &hints, layout, None).unwrap();
        // Unhinted, then hinted (sized from the learned hint).
        for round in 0..2 {
            let parts_hints = CapacityHints::in_memory();
            if round == 1 {
                parts_hints.record("parts", hints.get("parts").unwrap());
            }
            let (par, stats) = synthesize_parts(&parts, "parts", &pool, &parts_hints, layout, None, None).unwrap();
            same(&seq, &par);
            if round == 1 {
                assert!(stats.hinted);
                assert_eq!(stats.spills, 0, "a hinted synthesis in parts does not spill");
            }
        }
    }
    // The proofs are bellperson's.
    let (params, srs) = params(whole.clone(), &pool, 3);
    let (r, s) = (Scalar::from(11u64), Scalar::from(13u64));
    let (asg, _) = synthesize_parts(
        &parts,
        "parts",
        &pool,
        &CapacityHints::in_memory(),
        AbcLayout::PaddedToDomain,
        None,
        None,
    )
    .unwrap();
    let proof = CpuBackend::new(Arc::clone(&pool))
        .prove(ProvingJob {
            srs,
            assignments: vec![asg],
            randomness: vec![(r, s)],
            urgent: false,
        })
        .unwrap()
        .remove(0);
    assert_eq!(proof.to_bytes().to_vec(), reference_proof(whole.clone(), &params, r, s));
    let inputs: Vec<Scalar> = parts.iter().map(|p| Scalar::from(p.0 + 2)).collect();
    assert!(verifies(&params, &proof, &inputs));
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

#[test]
fn a_failing_part_fails_the_synthesis_and_returns_its_memory() {
    struct Bad;
    impl Circuit<Scalar> for &Bad {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            cs.alloc(|| "x", || Err(SynthesisError::AssignmentMissing))?;
            Ok(())
        }
    }
    let pool = pool();
    let parts: Vec<Bad> = (0..40).map(|_| Bad).collect();
    let err = synthesize_parts(
        &parts,
        "bad",
        &pool,
        &CapacityHints::in_memory(),
        AbcLayout::Exact,
        None,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("synthesis failed"), "{err}");
    assert_eq!(pool.stats().checked_out_bytes, 0);
}
