//! A circuit synthesized from its recording (witness only, a/b/c from the
//! recorded matrices) gives the classic assignment field by field, and the
//! same proofs.

use std::sync::Arc;

use crate::common::*;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::precompiled::{Recording, defer, record, synthesize_precompiled, synthesize_witness};
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::synthetic::write_synthetic_params;
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHints, CpuBackend, PrecompiledError, Proof, ProofBatch, ProveError, ProvingAssignment,
    Srs, Validation, synthesize,
};
use pinprove_mem::PinnedPool;

fn same(classic: &ProvingAssignment, pre: &ProvingAssignment, what: &str) {
    assert_eq!(classic.num_constraints(), pre.num_constraints(), "{what}: constraints");
    assert_eq!(classic.a(), pre.a(), "{what}: a");
    assert_eq!(classic.b(), pre.b(), "{what}: b");
    assert_eq!(classic.c(), pre.c(), "{what}: c");
    assert_eq!(classic.inputs(), pre.inputs(), "{what}: inputs");
    assert_eq!(classic.aux(), pre.aux(), "{what}: aux");
    assert_eq!(
        classic.densities().a_aux,
        pre.densities().a_aux,
        "{what}: A aux density"
    );
    assert_eq!(
        classic.densities().b_input,
        pre.densities().b_input,
        "{what}: B input density"
    );
    assert_eq!(
        classic.densities().b_aux,
        pre.densities().b_aux,
        "{what}: B aux density"
    );
}

fn classic<C: Circuit<Scalar>>(c: C, id: &str, pool: &Arc<PinnedPool>, layout: AbcLayout) -> ProvingAssignment {
    synthesize(c, id, pool, &CapacityHints::in_memory(), layout, None)
        .unwrap()
        .0
}

fn prove(pool: &Arc<PinnedPool>, srs: &Arc<Srs>, asg: ProvingAssignment, r: Scalar, s: Scalar) -> Proof {
    let job = ProofBatch::new(Arc::clone(srs), vec![asg], vec![(r, s)]);
    CpuBackend::new(Arc::clone(pool)).prove(job).unwrap().pop().unwrap()
}

/// Parameters of the right shape without a setup (proofs do not verify,
/// but two ways of proving must still agree byte for byte).
fn synthetic_srs(asg: &ProvingAssignment, pool: &Arc<PinnedPool>) -> Arc<Srs> {
    let mut bytes = Vec::new();
    write_synthetic_params(&CircuitShape::of(asg), &mut bytes).unwrap();
    Arc::new(Srs::from_bytes(&bytes, pool, Validation::OnCurve).unwrap())
}

#[test]
fn bench_circuits_synthesize_from_their_recording_as_classically() {
    let pool = pool();
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        for n in [1 << 10, 3000] {
            // Recorded from one witness, used for another.
            let recorded = BenchCircuit::new(n, mix).unwrap();
            let rec = record(recorded.clone(), &recorded.id()).unwrap();
            assert_eq!(rec.num_constraints(), n);
            let circuit = recorded.with_seed(7);
            for layout in [AbcLayout::Exact, AbcLayout::PaddedToDomain] {
                let what = format!("{mix} {n} {layout:?}");
                let want = classic(circuit.clone(), &circuit.id(), &pool, layout);
                let (got, _) = synthesize_precompiled(circuit.clone(), &rec, &pool, layout, None).unwrap();
                same(&want, &got, &what);
                let room = got.abc_capacity();
                match layout {
                    AbcLayout::Exact => assert!(room >= n, "{what}: {room}"),
                    AbcLayout::PaddedToDomain => assert!(room >= n.next_power_of_two(), "{what}: {room}"),
                }
                assert_eq!(got.spills(), 0, "{what}: sized exactly from the recording");
            }
        }
    }
    assert_eq!(pool.stats().checked_out_bytes, 0, "everything went back to the pool");
}

#[test]
fn bench_circuit_proofs_from_a_recording_are_the_classic_proofs() {
    let pool = pool();
    let (r, s) = (Scalar::from(1234u64), Scalar::from(5678u64));
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        let c = BenchCircuit::new(1 << 10, mix).unwrap();
        let rec = record(c.clone(), &c.id()).unwrap();
        let circuit = c.with_seed(3);
        let want = classic(circuit.clone(), &circuit.id(), &pool, AbcLayout::PaddedToDomain);
        let srs = synthetic_srs(&want, &pool);
        let (got, _) = synthesize_precompiled(circuit, &rec, &pool, AbcLayout::PaddedToDomain, None).unwrap();
        let (p1, p2) = (prove(&pool, &srs, want, r, s), prove(&pool, &srs, got, r, s));
        assert_eq!(p1.to_bytes(), p2.to_bytes(), "{mix}");
    }
}

#[test]
fn pending_assignments_prove_the_same_where_the_backend_computes_a_b_c() {
    let pool = pool();
    let (r, s) = (Scalar::from(99u64), Scalar::from(101u64));
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        let c = BenchCircuit::new(3000, mix).unwrap();
        let rec = Arc::new(record(c.clone(), &c.id()).unwrap());
        let circuit = c.with_seed(5);
        let want = classic(circuit.clone(), &circuit.id(), &pool, AbcLayout::PaddedToDomain);
        let srs = synthetic_srs(&want, &pool);
        let witness = synthesize_witness(circuit, &rec, &pool, None).unwrap();
        let pending = defer(Arc::clone(&rec), witness, &mut None).unwrap();
        assert!(Arc::ptr_eq(pending.recording().unwrap(), &rec), "{mix}");
        assert_eq!(pending.num_constraints(), want.num_constraints(), "{mix}");
        assert!(
            pending.a().is_none() && !pending.abc_released(),
            "{mix}: pending, not released"
        );
        // The CPU backend computes a/b/c itself first.
        let (p1, p2) = (prove(&pool, &srs, want, r, s), prove(&pool, &srs, pending, r, s));
        assert_eq!(p1.to_bytes(), p2.to_bytes(), "{mix}");
    }
    assert_eq!(pool.stats().checked_out_bytes, 0, "everything went back to the pool");
}

#[test]
fn released_matrices_are_refused_on_the_host_and_a_copy_still_proves() {
    let pool = pool();
    let (r, s) = (Scalar::from(7u64), Scalar::from(8u64));
    let c = BenchCircuit::new(3000, WitnessMix::Random).unwrap();
    let rec = Arc::new(record(c.clone(), &c.id()).unwrap());
    let stats = rec.stats();
    let copy = (*rec.matrices().unwrap()).clone();
    let circuit = c.with_seed(3);
    let want = classic(circuit.clone(), &circuit.id(), &pool, AbcLayout::PaddedToDomain);
    let srs = synthetic_srs(&want, &pool);

    assert!(rec.holds_matrices());
    assert_eq!(rec.release_matrices(), stats.matrix_bytes);
    assert_eq!(rec.release_matrices(), 0, "released once");
    assert!(!rec.holds_matrices());
    assert_eq!(rec.stats(), stats, "counts and sizes stay");
    assert!(matches!(rec.matrices(), Err(ProveError::MatricesReleased { .. })));
    let dir = std::env::temp_dir().join(format!("pinprove-released-{}", std::process::id()));
    assert!(rec.save(&dir.join("x.r1cs")).is_err(), "nothing to save");

    // The witness-only synthesis needs the counts only.
    let witness = synthesize_witness(circuit.clone(), &rec, &pool, None).unwrap();
    let mut pending = defer(Arc::clone(&rec), witness, &mut None).unwrap();
    let err = pinprove_groth16::precompiled::evaluate_pending(&mut pending, AbcLayout::PaddedToDomain).unwrap_err();
    assert!(err.to_string().contains("released"), "{err}");
    // A copy of its own (a device's) computes a/b/c, the same proof.
    pinprove_groth16::precompiled::evaluate_pending_from(&mut pending, &copy, AbcLayout::PaddedToDomain).unwrap();
    assert!(pending.recording().is_none(), "evaluated");
    assert_eq!(
        prove(&pool, &srs, want, r, s).to_bytes(),
        prove(&pool, &srs, pending, r, s).to_bytes()
    );
    drop(srs);
    assert_eq!(pool.stats().checked_out_bytes, 0, "everything went back to the pool");
}

#[test]
fn a_witness_of_another_shape_is_not_deferred() {
    let pool = pool();
    let small = BenchCircuit::new(1000, WitnessMix::Bits).unwrap();
    let large = BenchCircuit::new(2000, WitnessMix::Bits).unwrap();
    let rec_small = Arc::new(record(small.clone(), &small.id()).unwrap());
    let rec_large = record(large.clone(), &large.id()).unwrap();
    let witness = synthesize_witness(large, &rec_large, &pool, None).unwrap();
    let e = defer(rec_small, witness, &mut None).expect_err("a mismatch");
    assert!(e.is_mismatch(), "{e}");
}

/// Public inputs allocated between aux variables, variables used only in
/// C, ONE and an input in B, a term that cancels to zero, coefficients
/// other than ±1. Values are `None` in its blank form.
#[derive(Clone)]
struct Mixed {
    x: Option<u64>,
}

impl Circuit<Scalar> for Mixed {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let val = |f: fn(Scalar) -> Scalar| {
            let x = self.x;
            move || x.map(|x| f(Scalar::from(x))).ok_or(SynthesisError::AssignmentMissing)
        };
        let a = cs.alloc(|| "a", val(|x| x))?;
        let x_in = cs.alloc_input(|| "x", val(|x| x))?;
        let sq = cs.alloc(|| "a^2", val(|x| x.square()))?;
        let y_in = cs.alloc_input(|| "y = a^2", val(|x| x.square()))?;
        // 7·a·(a + 2·ONE) = c_only, c_only appears in C alone.
        let c_only = cs.alloc(|| "c only", val(|x| Scalar::from(7u64) * x * (x + Scalar::from(2u64))))?;
        let bits: Vec<_> = (0..3)
            .map(|k| {
                let x = self.x;
                cs.alloc(
                    || "bit",
                    move || {
                        x.map(|x| Scalar::from((x >> k) & 1))
                            .ok_or(SynthesisError::AssignmentMissing)
                    },
                )
            })
            .collect::<Result<_, _>>()?;
        let z_in = cs.alloc_input(|| "z = x", val(|x| x))?;
        cs.enforce(|| "a = x", |lc| lc + a, |lc| lc + CS::one(), |lc| lc + x_in);
        cs.enforce(|| "sq", |lc| lc + a, |lc| lc + x_in, |lc| lc + sq);
        cs.enforce(|| "y", |lc| lc + y_in + sq - sq, |lc| lc + CS::one(), |lc| lc + sq);
        cs.enforce(
            || "c only",
            |lc| lc + (Scalar::from(7u64), a) + (Scalar::from(3u64), sq) - (Scalar::from(3u64), sq),
            |lc| lc + a + (Scalar::from(2u64), CS::one()),
            |lc| lc + c_only,
        );
        for &b in &bits {
            cs.enforce(|| "boolean", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
        }
        // The low bits of x recomposed, times ONE, against z − x + (x mod 8).
        cs.enforce(
            || "bits",
            |lc| lc + bits[0] + (Scalar::from(2u64), bits[1]) + (Scalar::from(4u64), bits[2]),
            |lc| lc + z_in - x_in + CS::one(),
            |lc| lc + bits[0] + (Scalar::from(2u64), bits[1]) + (Scalar::from(4u64), bits[2]),
        );
        let after = cs.alloc(|| "after the inputs", val(|x| x + Scalar::ONE))?;
        cs.enforce(
            || "after",
            |lc| lc + x_in + CS::one(),
            |lc| lc + CS::one(),
            |lc| lc + after,
        );
        Ok(())
    }
}

#[test]
fn a_hand_written_circuit_proves_the_same_from_its_blank_recording() {
    let pool = pool();
    let rec = record(Mixed { x: None }, "mixed").unwrap();
    assert_eq!((rec.num_inputs(), rec.num_aux()), (4, 7));
    // The cancelled terms are not in the matrices: sq in A of "y" and "c
    // only".
    assert_eq!(
        rec.densities().a_aux.iter_ones().collect::<Vec<_>>(),
        vec![0, 3, 4, 5],
        "a and the bits in A; sq only with coefficients that cancel"
    );
    assert!(
        rec.densities().b_aux.get(0) && !rec.densities().b_aux.get(2),
        "a in B; c_only not"
    );
    assert_eq!(
        rec.densities().b_input.iter_ones().collect::<Vec<_>>(),
        vec![0, 1, 3],
        "ONE, x and z in B"
    );
    let circuit = Mixed { x: Some(13) };
    for layout in [AbcLayout::Exact, AbcLayout::PaddedToDomain] {
        let want = classic(circuit.clone(), "mixed", &pool, layout);
        let (got, _) = synthesize_precompiled(circuit.clone(), &rec, &pool, layout, None).unwrap();
        same(&want, &got, &format!("{layout:?}"));
    }

    // Through a file, then proved: bellperson's proof, and it verifies.
    let dir = std::env::temp_dir().join(format!("pinprove-precompiled-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mixed.r1cs");
    rec.save(&path).unwrap();
    let rec = Recording::load(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    let (params, srs) = params(Mixed { x: None }, &pool, 5);
    let (r, s) = (Scalar::from(21u64), Scalar::from(34u64));
    let want = classic(circuit.clone(), "mixed", &pool, AbcLayout::PaddedToDomain);
    let (got, _) = synthesize_precompiled(circuit.clone(), &rec, &pool, AbcLayout::PaddedToDomain, None).unwrap();
    let (p1, p2) = (prove(&pool, &srs, want, r, s), prove(&pool, &srs, got, r, s));
    assert_eq!(p1.to_bytes(), p2.to_bytes());
    assert_eq!(p2.to_bytes().to_vec(), reference_proof(circuit, &params, r, s));
    let inputs = [13u64, 169, 13].map(Scalar::from);
    assert!(verifies(&params, &p2, &inputs));
}

/// As many constraints (and aux variables) as its witness says.
struct Varying {
    constraints: usize,
    aux: usize,
}

impl Circuit<Scalar> for Varying {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let vars: Vec<_> = (0..self.aux)
            .map(|_| cs.alloc(|| "v", || Ok(Scalar::ONE)))
            .collect::<Result<_, _>>()?;
        for k in 0..self.constraints {
            let v = vars[k % vars.len()];
            cs.enforce(|| "c", |lc| lc + v, |lc| lc + CS::one(), |lc| lc + v);
        }
        Ok(())
    }
}

#[test]
fn a_circuit_whose_shape_depends_on_its_witness_is_a_mismatch() {
    let pool = pool();
    let rec = record(
        Varying {
            constraints: 10,
            aux: 4,
        },
        "varying",
    )
    .unwrap();
    let ok = synthesize_precompiled(
        Varying {
            constraints: 10,
            aux: 4,
        },
        &rec,
        &pool,
        AbcLayout::Exact,
        None,
    );
    assert!(ok.is_ok());
    drop(ok);
    for (constraints, aux, what) in [
        (11, 4, "constraints"),
        (9, 4, "constraints"),
        (10, 5, "aux variables"),
        (10, 3, "aux variables"),
    ] {
        let e = synthesize_precompiled(Varying { constraints, aux }, &rec, &pool, AbcLayout::Exact, None)
            .expect_err("a mismatch");
        assert!(e.is_mismatch(), "{e:?}");
        assert!(
            matches!(e, PrecompiledError::ShapeMismatch { what: w, .. } if w == what),
            "{constraints} {aux}: {e:?}"
        );
    }
    // A recording of another circuit.
    let e = synthesize_precompiled(Mixed { x: Some(1) }, &rec, &pool, AbcLayout::Exact, None).expect_err("a mismatch");
    assert!(e.is_mismatch(), "{e:?}");
    // The circuit's own failure is not a mismatch.
    let e = synthesize_precompiled(
        Mixed { x: None },
        &record(Mixed { x: None }, "m").unwrap(),
        &pool,
        AbcLayout::Exact,
        None,
    )
    .expect_err("no witness");
    assert!(!e.is_mismatch(), "{e:?}");
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

#[test]
fn buffers_are_paid_for_out_of_the_jobs_reservation() {
    let pool = pool();
    let c = BenchCircuit::new(2000, WitnessMix::Bits).unwrap();
    let rec = record(c.clone(), &c.id()).unwrap();
    let granted = 4 << 20;
    let funds = pool.budget().try_acquire(granted).unwrap();
    let (mut asg, _) = synthesize_precompiled(c, &rec, &pool, AbcLayout::PaddedToDomain, Some(funds)).unwrap();
    let left = asg
        .working_set_mut()
        .expect("the rest stays with the assignment")
        .bytes();
    assert!(left < granted, "the vectors were charged: {left}");
    assert!(
        left + asg.held_bytes() >= granted - (1 << 20),
        "charged about what it holds: {left} + {}",
        asg.held_bytes()
    );
    drop(asg);
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

/// Prints what the classic and the pre-compiled synthesis take on a 2^18
/// bench circuit of each mix (run with `--ignored --nocapture`; timings are
/// printed, never asserted, and mean little outside a release build).
#[test]
#[ignore]
fn measure_precompiled_against_classic_synthesis() {
    use std::time::{Duration, Instant};
    let pool = pool();
    let threads = rayon::current_num_threads();
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        let c = BenchCircuit::new(1 << 18, mix).unwrap();
        let hints = CapacityHints::in_memory();
        // The first synthesis learns the hint; the second is what a proof pays.
        drop(synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::PaddedToDomain, None).unwrap());
        let t = Instant::now();
        let rec = record(c.clone(), &c.id()).unwrap();
        let recording = t.elapsed();
        let (want, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::PaddedToDomain, None).unwrap();
        let (got, _) = synthesize_precompiled(c.clone(), &rec, &pool, AbcLayout::PaddedToDomain, None).unwrap();
        same(&want, &got, mix.as_str());
        drop((want, got));
        // The best of five of each, alternating, with warm pool buffers.
        let (mut classic, mut witness, mut evaluation) = (Duration::MAX, Duration::MAX, Duration::MAX);
        for _ in 0..5 {
            let t = Instant::now();
            let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::PaddedToDomain, None).unwrap();
            classic = classic.min(t.elapsed());
            drop(asg);
            let (asg, stats) = synthesize_precompiled(c.clone(), &rec, &pool, AbcLayout::PaddedToDomain, None).unwrap();
            (witness, evaluation) = (witness.min(stats.witness), evaluation.min(stats.evaluation));
            drop(asg);
        }
        let dir = std::env::temp_dir().join(format!("pinprove-precompiled-measure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.r1cs");
        let t = Instant::now();
        rec.save(&path).unwrap();
        let save = t.elapsed();
        let file_bytes = std::fs::metadata(&path).unwrap().len();
        let t = Instant::now();
        let back = Recording::load(&path).unwrap();
        let load = t.elapsed();
        assert_eq!(back, rec);
        std::fs::remove_dir_all(&dir).unwrap();
        let s = rec.stats();
        println!(
            "{mix} 2^18 on {threads} threads: classic {classic:?}; recording {recording:?} \
             (nnz {:?}, {} coefficients, {:.1} MiB in memory, file {:.1} MiB, save {save:?}, load {load:?}); \
             pre-compiled: witness {witness:?} + evaluation {evaluation:?}",
            s.nnz,
            s.coefficients,
            s.bytes as f64 / (1 << 20) as f64,
            file_bytes as f64 / (1 << 20) as f64,
        );
    }
}

/// One step of a random circuit.
#[derive(Clone, Debug)]
enum Op {
    Aux(u64),
    Input(u64),
    /// Terms of A, B and C: (which variable among those allocated so far,
    /// which coefficient).
    Enforce([Vec<(usize, usize)>; 3]),
}

/// A circuit of random steps: any interleaving of inputs and aux
/// variables, repeated and cancelling terms, zero coefficients.
#[derive(Clone, Debug)]
struct Random(Vec<Op>);

impl Circuit<Scalar> for Random {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let coeffs = [
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::ZERO,
            Scalar::from(2u64),
            -Scalar::from(2u64),
            Scalar::from(u64::MAX),
        ];
        let mut vars = vec![CS::one()];
        for op in self.0 {
            match op {
                Op::Aux(v) => vars.push(cs.alloc(|| "aux", || Ok(Scalar::from(v)))?),
                Op::Input(v) => vars.push(cs.alloc_input(|| "input", || Ok(Scalar::from(v)))?),
                Op::Enforce(terms) => {
                    let lc = |t: &Vec<(usize, usize)>| {
                        t.iter()
                            .fold(bellpepper_core::LinearCombination::zero(), |lc, &(v, k)| {
                                lc + (coeffs[k % coeffs.len()], vars[v % vars.len()])
                            })
                    };
                    let [a, b, c] = [lc(&terms[0]), lc(&terms[1]), lc(&terms[2])];
                    cs.enforce(|| "random", |_| a, |_| b, |_| c);
                }
            }
        }
        Ok(())
    }
}

fn random_circuit() -> impl proptest::strategy::Strategy<Value = Random> {
    use proptest::prelude::*;
    let terms = || proptest::collection::vec((0usize..64, 0usize..6), 0..6);
    let op = prop_oneof![
        3 => any::<u64>().prop_map(Op::Aux),
        1 => any::<u64>().prop_map(Op::Input),
        4 => (terms(), terms(), terms()).prop_map(|(a, b, c)| Op::Enforce([a, b, c])),
    ];
    proptest::collection::vec(op, 0..40).prop_map(Random)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(64),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Any circuit synthesizes from its recording (made with another
    /// witness) to its classic assignment.
    #[test]
    fn random_circuits_synthesize_from_their_recording_as_classically(circuit in random_circuit()) {
        let pool = pool();
        // The recording sees other values: only the structure may matter.
        let other = Random(
            circuit
                .0
                .iter()
                .map(|op| match op {
                    Op::Aux(v) => Op::Aux(v.wrapping_add(1)),
                    Op::Input(v) => Op::Input(v ^ 5),
                    e => e.clone(),
                })
                .collect(),
        );
        let rec = record(other, "random").unwrap();
        let want = classic(circuit.clone(), "random", &pool, AbcLayout::Exact);
        let (got, _) = synthesize_precompiled(circuit, &rec, &pool, AbcLayout::Exact, None).unwrap();
        same(&want, &got, "random");
    }
}
