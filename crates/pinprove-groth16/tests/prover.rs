//! The prover's behaviour around the proof itself: hints and spills,
//! release of a/b/c, batches, mismatched parameters, damaged files.

mod common;

use std::sync::Arc;

use blstrs::Scalar;
use common::*;
use ff::Field;
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHint, CapacityHints, CpuBackend, ParamsError, ProveError, ProvingJob, Srs, Validation,
    synthesize,
};

#[test]
fn a_correct_hint_means_zero_spills_and_zero_copies() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    let c = BenchCircuit::new(5000, WitnessMix::Bits).unwrap();
    for layout in [AbcLayout::Exact, AbcLayout::PaddedToDomain] {
        let (first, s1) = synthesize(c.clone(), &c.id(), &pool, &hints, layout, None).unwrap();
        assert!(
            s1.spills > 0 || s1.hinted,
            "the first synthesis learns the sizes by growing"
        );
        assert!(s1.hint_updated || s1.hinted);
        drop(first);
        let (asg, s2) = synthesize(c.clone(), &c.id(), &pool, &hints, layout, None).unwrap();
        assert!(s2.hinted);
        assert_eq!((s2.spills, s2.bytes_copied), (0, 0), "{layout:?}");
        assert!(!s2.hint_updated);
        assert_eq!(asg.num_constraints(), 5000);
        if layout == AbcLayout::PaddedToDomain {
            // Room for the FFT's whole domain.
            assert!(asg.a().unwrap().len() == 5000);
        }
    }
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
        .prove(ProvingJob {
            srs,
            assignments: vec![asg],
            randomness: vec![(r, s)],
        })
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
        .start(ProvingJob {
            srs: Arc::clone(&srs),
            assignments: vec![asg],
            randomness: vec![(Scalar::ONE, Scalar::ONE)],
        })
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
        .prove(ProvingJob {
            srs,
            assignments,
            randomness: randomness.clone(),
        })
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
        .prove(ProvingJob {
            srs,
            assignments: vec![asg],
            randomness: vec![(Scalar::ONE, Scalar::ONE)],
        })
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
    let empty = backend.prove(ProvingJob {
        srs: Arc::clone(&srs),
        assignments: vec![],
        randomness: vec![],
    });
    assert!(matches!(empty, Err(ProveError::EmptyBatch)));
    let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let missing_rs = backend.prove(ProvingJob {
        srs: Arc::clone(&srs),
        assignments: vec![asg],
        randomness: vec![],
    });
    assert!(matches!(missing_rs, Err(ProveError::RandomnessCount { .. })));
    let (a1, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let d = BenchCircuit::new(301, WitnessMix::Random).unwrap();
    let (a2, _) = synthesize(d.clone(), &d.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let mixed = backend.prove(ProvingJob {
        srs,
        assignments: vec![a1, a2],
        randomness: vec![(Scalar::ONE, Scalar::ONE); 2],
    });
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
    let mapped = Srs::read_file(&path, &pool, Validation::Subgroup).unwrap();
    assert_eq!(mapped.lengths(), srs.lengths());
    let header = Srs::read_file_header(&path).unwrap();
    assert_eq!(header.lengths(), srs.lengths());
    assert!(header.points().is_none() && header.vk() == srs.vk());
    assert_eq!(mapped.stats().file_bytes, bytes.len() as u64);
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
fn the_vec_baseline_records_exactly_what_the_prover_does() {
    let pool = pool();
    let hints = CapacityHints::in_memory();
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        let c = BenchCircuit::new(3000, mix).unwrap();
        let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
        let v = pinprove_groth16::baseline::VecAssignment::synthesize(c).unwrap();
        assert_eq!(asg.a().unwrap(), &v.a[..]);
        assert_eq!(asg.b().unwrap(), &v.b[..]);
        assert_eq!(asg.c().unwrap(), &v.c[..]);
        assert_eq!(asg.inputs(), &v.inputs[..]);
        assert_eq!(asg.aux(), &v.aux[..]);
    }
}
