//! A circuit made of independent parts synthesizes in parallel to exactly
//! the assignment (and the proof) of its sequential synthesis.

use std::sync::Arc;

use crate::common::*;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHints, CpuBackend, ProofBatch, ProvingAssignment, SynthesisTarget, parts_scratch_bytes,
    synthesize,
};

/// [`SynthesisTarget::synthesize_parts`] with these arguments.
fn synthesize_parts<T: Sync>(
    parts: &[T],
    circuit_id: &str,
    pool: &Arc<pinprove_mem::PinnedPool>,
    hints: &CapacityHints,
    layout: AbcLayout,
    funds: Option<pinprove_mem::Reservation>,
) -> Result<(ProvingAssignment, pinprove_groth16::SynthesisStats), pinprove_groth16::ProveError>
where
    for<'a> &'a T: Circuit<Scalar>,
{
    SynthesisTarget {
        circuit_id,
        pool,
        hints,
        layout,
        funds,
        fallback: None,
    }
    .synthesize_parts(parts)
}

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
    assert_eq!(a.densities().a_aux.words(), b.densities().a_aux.words());
    assert_eq!(a.densities().b_input.words(), b.densities().b_input.words());
    assert_eq!(a.densities().b_aux.words(), b.densities().b_aux.words());
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
            let (par, stats) = synthesize_parts(&parts, "parts", &pool, &parts_hints, layout, None).unwrap();
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
    )
    .unwrap();
    let proof = CpuBackend::new(Arc::clone(&pool))
        .prove(ProofBatch::new(srs, vec![asg], vec![(r, s)]))
        .unwrap()
        .remove(0);
    assert_eq!(proof.to_bytes().to_vec(), reference_proof(whole.clone(), &params, r, s));
    let inputs: Vec<Scalar> = parts.iter().map(|p| Scalar::from(p.0 + 2)).collect();
    assert!(verifies(&params, &proof, &inputs));
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

#[test]
fn groups_are_paid_out_of_the_funds_the_synthesis_was_admitted_with() {
    // Admitted for its assignment and its groups (what the engine counts
    // for a partition made of parts), a synthesis in parts asks the budget
    // for nothing more; what it did not spend stays with it.
    let parts: Vec<Part> = (0..203).map(Part).collect();
    let hints = CapacityHints::in_memory();
    synthesize(Whole(parts.clone()), "parts", &pool(), &hints, AbcLayout::Exact, None).unwrap();
    let shape = hints.get("parts").unwrap();
    let pool = pool(); // empty: every buffer is fresh
    let rounded = |elems: usize| pool.rounded_size(elems * 32).unwrap() as u64;
    let own = 3 * rounded(shape.constraints) + rounded(shape.inputs) + rounded(shape.aux);
    let scratch = parts_scratch_bytes(&pool, shape, parts.len());
    assert!(scratch > 0, "one wave of groups");
    let budget = Arc::clone(pool.budget());
    let funds = budget.try_acquire(own + scratch).unwrap();
    let grants = budget.stats().grants;
    let (asg, _) = synthesize_parts(&parts, "parts", &pool, &hints, AbcLayout::Exact, Some(funds)).unwrap();
    assert_eq!(
        budget.stats().grants,
        grants,
        "the groups' buffers came out of the funds, not from further grants"
    );
    // The job holds what it did not spend; the groups' buffers are the
    // pool's, idle, for the next synthesis.
    assert!(pool.stats().idle_buffers > 0);
    assert_eq!(budget.stats().used, own + scratch);
    drop(asg);
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
    )
    .unwrap_err();
    assert!(err.to_string().contains("synthesis failed"), "{err}");
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

/// A part that may allocate two more bits than the others.
struct Uneven {
    part: Part,
    extra: bool,
}

impl Circuit<Scalar> for &Uneven {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        (&self.part).synthesize(cs)?;
        for _ in 0..if self.extra { 2 } else { 0 } {
            let b = cs.alloc(|| "extra", || Ok(Scalar::ONE))?;
            cs.enforce(|| "extra", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
        }
        Ok(())
    }
}

#[test]
fn a_witness_of_parts_is_the_witness_of_the_whole() {
    use pinprove_groth16::precompiled::{record, synthesize_witness, synthesize_witness_parts};
    let pool = pool();
    let parts: Vec<Part> = (0..203).map(Part).collect();
    let recording = record(Whole(parts.clone()), "parts").unwrap();
    let whole = synthesize_witness(Whole(parts.clone()), &recording, &pool, None).unwrap();
    let par = synthesize_witness_parts(&parts, &recording, &pool, None).unwrap();
    assert_eq!(par.inputs.as_slice(), whole.inputs.as_slice());
    assert_eq!(par.aux.as_slice(), whole.aux.as_slice());

    // Parts of different shapes whose counts still divide evenly (two
    // longer parts among four): the sequential synthesis makes the witness.
    let uneven: Vec<Uneven> = (0..4)
        .map(|i| Uneven {
            part: Part(i),
            extra: i % 2 == 1,
        })
        .collect();
    struct Seq<'a>(&'a [Uneven]);
    impl Circuit<Scalar> for Seq<'_> {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            self.0.iter().try_for_each(|p| p.synthesize(cs))
        }
    }
    let rec = record(Seq(&uneven), "uneven").unwrap();
    assert_eq!(rec.num_aux() % 4, 0, "the counts divide evenly");
    let want = synthesize_witness(Seq(&uneven), &rec, &pool, None).unwrap();
    let got = synthesize_witness_parts(&uneven, &rec, &pool, None).unwrap();
    assert_eq!(got.aux.as_slice(), want.aux.as_slice());
    assert_eq!(got.inputs.as_slice(), want.inputs.as_slice());

    // Parts of another circuit: refused, counted against the recording.
    let other: Vec<Part> = (0..101).map(Part).collect();
    let err = synthesize_witness_parts(&other, &recording, &pool, None).err().unwrap();
    assert!(err.to_string().contains("recorded"), "{err}");
    drop((whole, par, want, got));
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

#[test]
fn a_circuit_of_parts_counts_the_same_shape_on_every_core() {
    use pinprove_groth16::shape::CircuitShape;
    for n in [0, 1, 7, 203] {
        let parts: Vec<Part> = (0..n).map(Part).collect();
        let whole = CircuitShape::of_blank(Whole(parts.clone())).unwrap();
        let in_parts = CircuitShape::of_blank_parts(&parts).unwrap();
        assert_eq!(in_parts, whole, "{n} parts");
    }
    // ONE counts once among B's inputs however many groups use it there.
    let parts: Vec<Part> = (0..64).map(Part).collect();
    let shape = CircuitShape::of_blank_parts(&parts).unwrap();
    assert_eq!(shape.b_inputs, 1 + 64, "ONE and each part's input");
}
