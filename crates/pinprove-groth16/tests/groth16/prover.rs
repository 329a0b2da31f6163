//! The prover's behaviour around the proof itself: hints and spills,
//! release of a/b/c, batches, mismatched parameters, damaged files.

use std::sync::Arc;

use crate::common::*;
use blstrs::Scalar;
use ff::Field;
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHint, CapacityHints, CpuBackend, ParamsError, ProofBatch, ProveError, Srs, Validation,
    synthesize,
};

#[test]
fn a_correct_hint_means_zero_spills_and_zero_copies() {
    let pool = pool();
    let c = BenchCircuit::new(5000, WitnessMix::Bits).unwrap();
    for layout in [AbcLayout::Exact, AbcLayout::PaddedToDomain] {
        // Fresh hints per layout: the first synthesis of each learns.
        let hints = CapacityHints::in_memory();
        let (first, s1) = synthesize(c.clone(), &c.id(), &pool, &hints, layout, None).unwrap();
        assert!(!s1.hinted, "{layout:?}: nothing was learned yet");
        assert!(
            s1.spills > 0,
            "{layout:?}: the first synthesis learns the sizes by growing"
        );
        assert!(s1.hint_updated, "{layout:?}: and records them");
        drop(first);
        let (asg, s2) = synthesize(c.clone(), &c.id(), &pool, &hints, layout, None).unwrap();
        assert!(s2.hinted);
        assert_eq!((s2.spills, s2.bytes_copied), (0, 0), "{layout:?}");
        assert!(!s2.hint_updated);
        assert_eq!(asg.num_constraints(), 5000);
        let room = asg.abc_capacity();
        match layout {
            // Room for the FFT's whole domain, which it runs in place.
            AbcLayout::PaddedToDomain => assert!(room >= 8192, "{room}"),
            AbcLayout::Exact => assert!(room >= 5000, "{room}"),
        }
    }
}

/// A circuit that allocates `aux` variables and then fails.
struct FailsAfter {
    aux: usize,
}

impl bellpepper_core::Circuit<Scalar> for FailsAfter {
    fn synthesize<CS: bellpepper_core::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellpepper_core::SynthesisError> {
        for i in 0..self.aux {
            cs.alloc(|| "x", || Ok(Scalar::from(i as u64)))?;
        }
        Err(bellpepper_core::SynthesisError::Unsatisfiable)
    }
}

#[test]
fn a_tampered_hints_file_is_discarded_and_relearned() {
    let dir = std::env::temp_dir().join(format!("pinprove-tampered-hints-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pool = pool();
    let c = BenchCircuit::new(3000, WitnessMix::Random).unwrap();
    // Overflows the domain's power of two; far beyond the 8 GiB budget.
    let tampered = [
        CapacityHint {
            constraints: usize::MAX / 2 + 2,
            inputs: 1,
            aux: 1,
        },
        CapacityHint {
            constraints: 1 << 40,
            inputs: 5,
            aux: 1 << 40,
        },
        CapacityHint {
            constraints: 10,
            inputs: usize::MAX,
            aux: 10,
        },
    ];
    for (i, bad) in tampered.into_iter().enumerate() {
        let file = serde_json::json!({ "version": 1, "hints": { c.id(): bad } });
        std::fs::write(dir.join("capacity-hints.json"), file.to_string()).unwrap();
        for layout in [AbcLayout::PaddedToDomain, AbcLayout::Exact] {
            let hints = CapacityHints::persistent(&dir);
            assert_eq!(hints.get(&c.id()), Some(bad), "case {i}: the tampered hint was read");
            let (asg, stats) = synthesize(c.clone(), &c.id(), &pool, &hints, layout, None).unwrap();
            assert!(!stats.hinted, "case {i} {layout:?}: the implausible hint was not used");
            assert_eq!(asg.num_constraints(), 3000);
            let learned = hints.get(&c.id()).unwrap();
            assert_eq!(learned, stats.shape, "case {i}: relearned");
            assert_eq!(
                CapacityHints::persistent(&dir).get(&c.id()),
                Some(learned),
                "and persisted"
            );
            std::fs::write(dir.join("capacity-hints.json"), file.to_string()).unwrap();
        }
    }
    assert_eq!(pool.stats().checked_out_bytes, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_synthesis_that_fails_past_its_hint_forgets_the_hint() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let small = CapacityHint {
        constraints: 1,
        inputs: 1,
        aux: 10,
    };
    hints.record("fails", small);
    let err = synthesize(FailsAfter { aux: 5000 }, "fails", &pool, &hints, AbcLayout::Exact, None).unwrap_err();
    assert!(matches!(err, ProveError::Synthesis(_)), "{err}");
    assert_eq!(hints.get("fails"), None, "the hint it outgrew is relearned");
    // A failure within the hint leaves it alone.
    hints.record(
        "fails",
        CapacityHint {
            constraints: 10,
            inputs: 10,
            aux: 10_000,
        },
    );
    synthesize(FailsAfter { aux: 5000 }, "fails", &pool, &hints, AbcLayout::Exact, None).unwrap_err();
    assert!(hints.get("fails").is_some());
    assert_eq!(
        pool.stats().checked_out_bytes,
        0,
        "a failed synthesis returns its buffers"
    );
}

#[test]
fn a_stale_hint_costs_a_spill_but_never_a_proof() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    // Larger than the pool's smallest buffer, so a tiny hint must grow.
    let c = BenchCircuit::new(5000, WitnessMix::Random).unwrap();
    // Far too small: vectors must grow.
    hints.record(
        &c.id(),
        CapacityHint {
            constraints: 10,
            inputs: 1,
            aux: 10,
        },
    );
    let (params, srs) = params(c.clone(), &pool, 11);
    let mut rng = rng(1);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let (asg, stats) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    assert!(stats.spills > 0 && stats.hint_updated);
    assert_eq!(hints.get(&c.id()).unwrap().constraints, 5000);
    let backend = CpuBackend::new(Arc::clone(&pool));
    let proof = backend
        .prove(ProofBatch::new(srs, vec![asg], vec![(r, s)]))
        .unwrap()
        .remove(0);
    assert_eq!(proof.to_bytes().to_vec(), reference_proof(c.clone(), &params, r, s));
}

#[test]
fn start_releases_abc_to_the_pool() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let c = BenchCircuit::new(1 << 12, WitnessMix::Random).unwrap();
    let (_params, srs) = params(c.clone(), &pool, 2);
    let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::PaddedToDomain, None).unwrap();
    let held_before = pool.stats().checked_out_bytes;
    let abc = 3 * 32 * (1 << 12) as u64;
    let backend = CpuBackend::new(Arc::clone(&pool));
    let started = backend
        .start(ProofBatch::new(
            Arc::clone(&srs),
            vec![asg],
            vec![(Scalar::ONE, Scalar::ONE)],
        ))
        .unwrap();
    let held_after = pool.stats().checked_out_bytes;
    // a/b/c are back; only h's scalars (one vector) were taken meanwhile.
    assert!(
        held_after + abc - 32 * (1 << 12) <= held_before,
        "{held_before} -> {held_after}"
    );
    started.finish().unwrap();
    drop(srs);
    assert_eq!(pool.stats().checked_out_bytes, 0, "everything went back");
}

#[test]
fn batches_prove_each_circuit_like_bellperson() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let shape = BenchCircuit::new(700, WitnessMix::Bits).unwrap();
    let (params, srs) = params(shape.clone(), &pool, 4);
    let circuits: Vec<_> = (0..3).map(|i| shape.clone().with_seed(10 + i)).collect();
    let mut rng = rng(9);
    let randomness: Vec<_> = (0..3)
        .map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng)))
        .collect();
    let assignments = circuits
        .iter()
        .map(|c| {
            synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::PaddedToDomain, None)
                .unwrap()
                .0
        })
        .collect();
    let proofs = CpuBackend::new(Arc::clone(&pool))
        .prove(ProofBatch::new(srs, assignments, randomness.clone()))
        .unwrap();
    for ((c, (r, s)), proof) in circuits.iter().zip(randomness).zip(&proofs) {
        assert_eq!(proof.to_bytes().to_vec(), reference_proof(c.clone(), &params, r, s));
        assert!(verifies(&params, proof, &c.public_inputs()));
    }
}

#[test]
fn parameters_of_another_circuit_are_a_clear_error() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let small = BenchCircuit::new(300, WitnessMix::Random).unwrap();
    let other = BenchCircuit::new(600, WitnessMix::Random).unwrap();
    let (_p, srs) = params(other, &pool, 1);
    let (asg, _) = synthesize(
        small.clone(),
        &small.id(),
        &pool,
        &hints,
        AbcLayout::PaddedToDomain,
        None,
    )
    .unwrap();
    let err = CpuBackend::new(Arc::clone(&pool))
        .prove(ProofBatch::new(srs, vec![asg], vec![(Scalar::ONE, Scalar::ONE)]))
        .unwrap_err();
    assert!(matches!(err, ProveError::ParamsMismatch { .. }), "{err}");
    assert!(err.to_string().contains("do not match the circuit"), "{err}");
}

#[test]
fn malformed_jobs_are_errors() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let c = BenchCircuit::new(300, WitnessMix::Random).unwrap();
    let (_p, srs) = params(c.clone(), &pool, 1);
    let backend = CpuBackend::new(Arc::clone(&pool));
    let empty = backend.prove(ProofBatch::new(Arc::clone(&srs), vec![], vec![]));
    assert!(matches!(empty, Err(ProveError::EmptyBatch)));
    let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let missing_rs = backend.prove(ProofBatch::new(Arc::clone(&srs), vec![asg], vec![]));
    assert!(matches!(missing_rs, Err(ProveError::RandomnessCount { .. })));
    let (a1, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let d = BenchCircuit::new(301, WitnessMix::Random).unwrap();
    let (a2, _) = synthesize(d.clone(), &d.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let mixed = backend.prove(ProofBatch::new(srs, vec![a1, a2], vec![(Scalar::ONE, Scalar::ONE); 2]));
    assert!(matches!(mixed, Err(ProveError::BatchShapeMismatch { index: 1, .. })));
}

#[test]
fn synthesis_errors_are_reported_not_panicked() {
    use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};

    struct Fails;
    impl Circuit<Scalar> for Fails {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            cs.alloc(|| "x", || Err(SynthesisError::AssignmentMissing))?;
            Ok(())
        }
    }
    struct Dangling;
    impl Circuit<Scalar> for Dangling {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            // A variable nobody allocated.
            let ghost = Variable::new_unchecked(Index::Aux(7));
            cs.enforce(|| "ghost", |lc| lc + ghost, |lc| lc, |lc| lc);
            Ok(())
        }
    }
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let e = synthesize(Fails, "fails", &pool, &hints, AbcLayout::Exact, None).unwrap_err();
    assert!(matches!(e, ProveError::Synthesis(SynthesisError::AssignmentMissing)));
    let e = synthesize(Dangling, "dangling", &pool, &hints, AbcLayout::Exact, None).unwrap_err();
    assert!(matches!(e, ProveError::Synthesis(SynthesisError::AssignmentMissing)));
    assert!(hints.get("fails").is_none(), "failed syntheses teach no hint");
}

fn param_bytes() -> Vec<u8> {
    let c = BenchCircuit::new(200, WitnessMix::Random).unwrap();
    let p = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(c, &mut rng(8)).unwrap();
    let mut bytes = Vec::new();
    p.write(&mut bytes).unwrap();
    bytes
}

#[test]
fn parameter_files_round_trip_byte_for_byte() {
    let pool = pool();
    let bytes = param_bytes();
    let srs = Srs::from_bytes(&bytes, &pool, Validation::OnCurve).unwrap();
    let mut again = Vec::new();
    srs.write(&mut again).unwrap();
    assert_eq!(again, bytes);
    let dir = std::env::temp_dir().join(format!("pinprove-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.params");
    std::fs::write(&path, &bytes).unwrap();
    let from_file = Srs::read_file(&path, &pool, Validation::Subgroup).unwrap();
    assert_eq!(from_file.lengths(), srs.lengths());
    let header = Srs::read_file_header(&path).unwrap();
    assert_eq!(header.lengths(), srs.lengths());
    assert!(header.points().is_none() && header.vk() == srs.vk());
    assert_eq!(from_file.stats().file_bytes, bytes.len() as u64);
    let missing = Srs::read_file(dir.join("nope"), &pool, Validation::OnCurve).unwrap_err();
    assert!(matches!(missing, ParamsError::Io { .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_parameter_files_are_clear_errors() {
    let pool = pool();
    let bytes = param_bytes();
    // Truncated anywhere: never a panic, always `Truncated`.
    for cut in [0usize, 10, 500, 864, 900, bytes.len() / 2, bytes.len() - 1] {
        match Srs::from_bytes(&bytes[..cut], &pool, Validation::OnCurve) {
            Err(ParamsError::Truncated { .. }) => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 7]);
    assert!(matches!(
        Srs::from_bytes(&longer, &pool, Validation::OnCurve),
        Err(ParamsError::TrailingBytes { extra: 7 })
    ));
    // A point in the middle of the h section no longer on the curve.
    let ic = u32::from_be_bytes(bytes[864..868].try_into().unwrap()) as usize;
    let h_start = 868 + 96 * ic + 4;
    let mut bad = bytes.clone();
    bad[h_start + 96 * 3 + 50] ^= 0x01;
    match Srs::from_bytes(&bad, &pool, Validation::OnCurve) {
        Err(ParamsError::InvalidPoint {
            section: "h", index: 3, ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // An absurd section count is a truncation, not an allocation.
    let mut huge = bytes.clone();
    huge[h_start - 4..h_start].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(matches!(
        Srs::from_bytes(&huge, &pool, Validation::OnCurve),
        Err(ParamsError::Truncated { section: "h", .. })
    ));
    // The point at infinity where a real point is needed.
    let mut inf = bytes.clone();
    inf[h_start..h_start + 96].fill(0);
    inf[h_start] = 0x40;
    assert!(matches!(
        Srs::from_bytes(&inf, &pool, Validation::OnCurve),
        Err(ParamsError::PointAtInfinity { section: "h", index: 0 })
    ));
}

#[test]
fn verifying_keys_round_trip() {
    let c = BenchCircuit::new(200, WitnessMix::Bits).unwrap();
    let p = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(c, &mut rng(3)).unwrap();
    let mut theirs = Vec::new();
    p.vk.write(&mut theirs).unwrap();
    let dir = std::env::temp_dir().join(format!("pinprove-vk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vk");
    std::fs::write(&path, &theirs).unwrap();
    let vk = pinprove_groth16::VerifyingKey::read_file(&path).unwrap();
    assert_eq!(vk.ic.len(), 5);
    let mut ours = Vec::new();
    vk.write(&mut ours).unwrap();
    assert_eq!(ours, theirs);
    std::fs::write(&path, &theirs[..theirs.len() - 1]).unwrap();
    assert!(matches!(
        pinprove_groth16::VerifyingKey::read_file(&path),
        Err(ParamsError::Truncated { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncating_a_parameter_file_while_it_loads_never_crashes() {
    use pinprove_groth16::shape::CircuitShape;
    use pinprove_groth16::synthetic::write_synthetic_params;
    let pool = pool();
    let dir = std::env::temp_dir().join(format!("pinprove-truncating-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.params");
    let n = 1 << 17;
    let shape = CircuitShape {
        inputs: 2,
        aux: n,
        constraints: n,
        a_aux: n,
        b_inputs: 2,
        b_aux: n,
    };
    let mut bytes = Vec::new();
    write_synthetic_params(&shape, &mut bytes).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let t = std::time::Instant::now();
    Srs::read_file(&path, &pool, Validation::OnCurve).unwrap();
    let whole = t.elapsed();
    let mut truncated = 0;
    for i in 0..12u32 {
        std::fs::write(&path, &bytes).unwrap();
        let cutter = {
            let path = path.clone();
            let delay = whole * i / 12;
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(1000)
                    .unwrap();
            })
        };
        match Srs::read_file(&path, &pool, Validation::OnCurve) {
            Ok(_) => {}
            Err(ParamsError::Truncated { .. }) => truncated += 1,
            Err(other) => panic!("{other}"),
        }
        cutter.join().unwrap();
    }
    assert!(truncated > 0, "some load met the truncation");
    assert_eq!(pool.stats().checked_out_bytes, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
