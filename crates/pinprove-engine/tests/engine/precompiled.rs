//! Pre-compiled circuits in the engine: after a circuit type's first job
//! its partitions synthesize from a recording, with the same proofs; the
//! recording persists in the hints directory; damaged or stale recordings
//! and witness-dependent circuits fall back to the classic synthesis.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use pinprove_engine::{
    CircuitSynthesis, Device, DeviceId, Engine, EngineConfig, JobOutcome, JobSpec, PartitionResult, Priority,
    SynthesisMode, precompilable_partition, precompilable_partition_with_inputs,
};
use pinprove_groth16::CpuBackend;
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::precompiled::{Matrices, Recording, evaluate_pending_from, record};
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::synthetic::write_synthetic_params;
use pinprove_mem::PinnedPool;

fn cpu_engine(pool: &Arc<PinnedPool>, precompiled: bool, hints_dir: Option<&Path>) -> Engine {
    Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            hints_dir: hints_dir.map(Path::to_path_buf),
            precompiled,
            ..EngineConfig::default()
        },
        vec![Device {
            id: DeviceId::Cpu,
            backend: Arc::new(CpuBackend::new(Arc::clone(pool))),
        }],
        Arc::clone(pool),
    )
    .unwrap()
}

/// Fixed blinding factors, so two engines' proofs can be compared.
fn rs(seed: u64) -> (Scalar, Scalar) {
    (Scalar::from(seed + 11), Scalar::from(seed + 1_000_003))
}

/// Proves partitions of `shape` with these seeds; waits until the engine
/// is quiet (a recording it started is done).
fn prove(engine: &Engine, shape: &BenchCircuit, seeds: &[u64]) -> Vec<PartitionResult> {
    let partitions = seeds
        .iter()
        .map(|&s| {
            let c = shape.clone().with_seed(s);
            let inputs = c.public_inputs();
            precompilable_partition_with_inputs(c, inputs)
        })
        .collect();
    let id = engine
        .submit(JobSpec {
            circuit_id: shape.id(),
            priority: Priority::Normal,
            partitions,
            randomness: Some(seeds.iter().map(|&s| rs(s)).collect()),
        })
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(120))).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(60)));
    match outcome {
        JobOutcome::Completed(r) => r,
        other => panic!("{other:?}"),
    }
}

fn synthesis_of(engine: &Engine, id: &str) -> CircuitSynthesis {
    let status = engine.status();
    status
        .synthesis
        .into_iter()
        .find(|c| c.circuit_id == id)
        .unwrap_or_else(|| panic!("{id} not in the status"))
}

/// Partitions of seeds 6, 7 and 8 proved by `engine` are the bytes
/// `classic` proves for them, and verify.
fn same_as_classic(
    engine: &Engine,
    classic: &Engine,
    vk: &bellperson::groth16::VerifyingKey<Bls12>,
    shape: &BenchCircuit,
) {
    let seeds = [6, 7, 8];
    let pre = prove(engine, shape, &seeds);
    let want = prove(classic, shape, &seeds);
    for (p, (a, b)) in pre.iter().zip(&want).enumerate() {
        assert_eq!(a.proof.to_bytes(), b.proof.to_bytes(), "partition {p}");
    }
    verify(vk, shape, &seeds, &pre);
}

fn verify(vk: &bellperson::groth16::VerifyingKey<Bls12>, shape: &BenchCircuit, seeds: &[u64], r: &[PartitionResult]) {
    let pvk = bellperson::groth16::prepare_verifying_key(vk);
    for (&s, r) in seeds.iter().zip(r) {
        let proof = bellperson::groth16::Proof::<Bls12>::read(&r.proof.to_bytes()[..]).unwrap();
        let inputs = shape.clone().with_seed(s).public_inputs();
        assert!(
            bellperson::groth16::verify_proof(&pvk, &proof, &inputs).unwrap(),
            "seed {s}"
        );
    }
}

/// Back at idle values once the CPU backend's host copy of the parameters
/// (pool buffers it keeps checked out) is evicted; a recording stays.
fn idle(engine: &Engine, shape: &BenchCircuit, pool: &PinnedPool, acct: &Accountant, what: &str) {
    assert!(engine.wait_quiet(Duration::from_secs(30)), "{what}");
    assert!(engine.evict_srs(&shape.id()).is_some(), "{what}");
    assert_idle(engine, pool, acct, what);
}

fn recording_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "r1cs"))
        .collect()
}

#[test]
fn later_jobs_synthesize_from_the_recording_with_the_same_proofs() {
    let dir = temp_dir("precompiled-same");
    for (mix, n) in [(WitnessMix::Random, 1 << 10), (WitnessMix::Bits, 1500)] {
        let shape = BenchCircuit::new(n, mix).unwrap();
        let (params, vk) = real_params(&shape, &dir);
        let (pool, acct) = pool_with(2 << 30);
        let (classic_pool, classic_acct) = pool_with(2 << 30);
        let engine = cpu_engine(&pool, true, None);
        let classic = cpu_engine(&classic_pool, false, None);
        engine.register_srs(&shape.id(), &params);
        classic.register_srs(&shape.id(), &params);

        prove(&engine, &shape, &[1]);
        let s = synthesis_of(&engine, &shape.id());
        assert_eq!(s.mode, SynthesisMode::Precompiled, "{mix}: {s:?}");
        assert_eq!((s.classic_partitions, s.precompiled_partitions), (1, 0), "{mix}");
        assert!(s.recording_bytes > 0);
        assert_eq!(engine.status().recordings_made, 1);
        // The recording is drawn on the timeline, on a lane of its own.
        let recorded: Vec<_> = engine
            .timeline()
            .spans()
            .into_iter()
            .filter(|sp| sp.name == pinprove_engine::Phase::Recording)
            .collect();
        assert_eq!(recorded.len(), 1, "{mix}: {recorded:?}");
        assert_eq!(
            (recorded[0].lane.as_str(), recorded[0].label.as_str()),
            ("precompiler", &*shape.id())
        );

        let seeds = [3, 4, 5];
        let pre = prove(&engine, &shape, &seeds);
        let s = synthesis_of(&engine, &shape.id());
        assert_eq!((s.classic_partitions, s.precompiled_partitions), (1, 3), "{mix}");
        let want = prove(&classic, &shape, &seeds);
        for (p, (a, b)) in pre.iter().zip(&want).enumerate() {
            assert_eq!(a.proof.to_bytes(), b.proof.to_bytes(), "{mix}: partition {p}");
        }
        verify(&vk, &shape, &seeds, &pre);
        assert_eq!(
            synthesis_of(&classic, &shape.id()).mode,
            SynthesisMode::Classic,
            "off by default"
        );
        let text = engine.metrics_text();
        let circuit = format!("circuit=\"{}\"", shape.id());
        assert!(
            text.contains(&format!("pinprove_synthesis_mode{{{circuit},mode=\"precompiled\"}} 1")),
            "{text}"
        );
        assert!(text.contains(&format!("pinprove_precompiled_partitions_total{{{circuit}}} 3")));
        assert!(text.contains("pinprove_recordings_made_total 1"));
        idle(&engine, &shape, &pool, &acct, "precompiled");
        idle(&classic, &shape, &classic_pool, &classic_acct, "classic");
        // Dropping the engine gives the recording's budget back.
        drop(engine);
        assert_eq!(pool.budget().used(), pool.stats().allocated_bytes);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_persisted_recording_is_used_by_a_fresh_engine_and_a_damaged_one_is_made_again() {
    let dir = temp_dir("precompiled-persist");
    let hints = dir.join("hints");
    let shape = BenchCircuit::new(1 << 10, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, acct) = pool_with(2 << 30);
    let run = |what: &str| {
        let engine = cpu_engine(&pool, true, Some(&hints));
        engine.register_srs(&shape.id(), &params);
        prove(&engine, &shape, &[1]);
        prove(&engine, &shape, &[2, 3]);
        let s = synthesis_of(&engine, &shape.id());
        assert_eq!(s.mode, SynthesisMode::Precompiled, "{what}");
        assert_eq!(s.precompiled_partitions, 2, "{what}");
        let status = engine.status();
        idle(&engine, &shape, &pool, &acct, what);
        (status.recordings_made, status.recordings_loaded)
    };
    assert_eq!(run("first engine"), (1, 0));
    let files = recording_files(&hints);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("precompiled-bench-"), "{name}");
    assert_eq!(run("second engine"), (0, 1), "loaded, not recorded again");

    let mut bytes = std::fs::read(&files[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&files[0], &bytes).unwrap();
    assert_eq!(run("damaged file"), (1, 0), "recorded anew");
    assert_eq!(run("file made again"), (0, 1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dropped_engine_waits_for_the_recording_it_started() {
    let dir = temp_dir("precompiled-drop");
    let hints = dir.join("hints");
    let shape = BenchCircuit::new(1 << 19, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, _acct) = pool_with(4 << 30);
    let engine = cpu_engine(&pool, true, Some(&hints));
    engine.register_srs(&shape.id(), &params);
    let c = shape.clone().with_seed(1);
    let inputs = c.public_inputs();
    assert!(engine.precompile(&shape.id(), &*precompilable_partition_with_inputs(c, inputs)));
    drop(engine);
    // A process may exit right after: the recording ended (and was saved)
    // before the engine was gone, not under the process's teardown.
    let saved = if hints.exists() {
        recording_files(&hints)
    } else {
        Vec::new()
    };
    assert_eq!(saved.len(), 1, "recorded before the drop returned");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stale_recording_is_refused_against_the_parameters_and_made_again() {
    let dir = temp_dir("precompiled-stale");
    let hints = dir.join("hints");
    let shape = BenchCircuit::new(1 << 10, WitnessMix::Random).unwrap();
    let (params, vk) = real_params(&shape, &dir);
    let (pool, acct) = pool_with(2 << 30);
    // A recording of another shape under this circuit id (the circuit
    // changed, its id did not).
    let first = cpu_engine(&pool, true, Some(&hints));
    first.register_srs(&shape.id(), &params);
    prove(&first, &shape, &[1]);
    idle(&first, &shape, &pool, &acct, "first");
    drop(first);
    let file = recording_files(&hints).pop().unwrap();
    let other = BenchCircuit::new(900, WitnessMix::Random).unwrap();
    record(other, &shape.id()).unwrap().save(&file).unwrap();

    let engine = cpu_engine(&pool, true, Some(&hints));
    engine.register_srs(&shape.id(), &params);
    prove(&engine, &shape, &[2]);
    // The file does not match the parameters' queries: not loaded, made
    // again from this circuit and saved over it.
    let status = engine.status();
    assert_eq!((status.recordings_loaded, status.recordings_made), (0, 1));
    assert_eq!(synthesis_of(&engine, &shape.id()).mode, SynthesisMode::Precompiled);
    let seeds = [3, 4];
    let results = prove(&engine, &shape, &seeds);
    verify(&vk, &shape, &seeds, &results);
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!((s.precompiled_partitions, s.classic_partitions), (2, 1), "{s:?}");
    assert_eq!(engine.status().precompiled_fallbacks, 0);
    idle(&engine, &shape, &pool, &acct, "stale");
    drop(engine);

    // The file written now is this circuit's: a later engine loads it.
    let again = cpu_engine(&pool, true, Some(&hints));
    again.register_srs(&shape.id(), &params);
    prove(&again, &shape, &[5]);
    let status = again.status();
    assert_eq!((status.recordings_loaded, status.recordings_made), (1, 0));
    drop(again);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A circuit with one more constraint for odd seeds than for even ones (of
/// variables used already, so that one set of parameters fits both).
#[derive(Clone)]
struct Wobbly {
    seed: u64,
}

impl Circuit<Scalar> for Wobbly {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = Scalar::from(self.seed + 2);
        let input = cs.alloc_input(|| "x", || Ok(x))?;
        let mut prev = (input, x);
        for i in 0..40 {
            let sq = prev.1.square();
            let v = cs.alloc(|| format!("sq {i}"), || Ok(sq))?;
            cs.enforce(
                || format!("square {i}"),
                |lc| lc + prev.0,
                |lc| lc + prev.0,
                |lc| lc + v,
            );
            prev = (v, sq);
            if i == 0 && self.seed % 2 == 1 {
                cs.enforce(|| "again", |lc| lc + input, |lc| lc + input, |lc| lc + v);
            }
        }
        Ok(())
    }
}

/// An engine with a recording of [`Wobbly`] made from seed 0, kept in
/// `dir/hints`.
fn wobbly_engine(dir: &Path, pool: &Arc<PinnedPool>) -> Engine {
    let engine = wobbly_unrecorded(dir, pool);
    wobbly_job(&engine, &[0]);
    assert_eq!(synthesis_of(&engine, "wobbly").mode, SynthesisMode::Precompiled);
    engine
}

/// An engine that knows [`Wobbly`]'s parameters and has proved nothing.
fn wobbly_unrecorded(dir: &Path, pool: &Arc<PinnedPool>) -> Engine {
    let params = dir.join("wobbly.params");
    let (asg, _) = pinprove_groth16::synthesize(
        Wobbly { seed: 0 },
        "wobbly",
        &pool_with(1 << 30).0,
        &pinprove_groth16::CapacityHints::in_memory(),
        pinprove_groth16::AbcLayout::Exact,
        None,
    )
    .unwrap();
    let mut bytes = Vec::new();
    write_synthetic_params(&CircuitShape::of(&asg), &mut bytes).unwrap();
    std::fs::write(&params, bytes).unwrap();
    // The test backend checks the assignments, not their parameters: both
    // shapes prove.
    let engine = test_engine(
        pool,
        EngineConfig {
            synthesis_workers: 2,
            precompiled: true,
            hints_dir: Some(dir.join("hints")),
            ..EngineConfig::default()
        },
        0,
        0,
        0,
    );
    engine.register_srs("wobbly", &params);
    engine
}

/// Proves one job of [`Wobbly`] partitions of `seeds`; every one proves.
fn wobbly_job(engine: &Engine, seeds: &[u64]) {
    let parts = seeds
        .iter()
        .map(|&seed| precompilable_partition(Wobbly { seed }))
        .collect();
    let job = engine.submit(spec("wobbly", Priority::Normal, parts)).unwrap();
    let out = engine.wait(job, Some(Duration::from_secs(60))).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)));
    match out {
        JobOutcome::Completed(r) => assert_eq!(r.len(), seeds.len()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_partition_of_parts_is_admitted_with_its_groups_scratch_only_until_its_circuit_is_recorded() {
    let dir = temp_dir("precompiled-parts");
    let (pool, _) = pool_with(1 << 30);
    let engine = wobbly_unrecorded(&dir, &pool);
    let whole = engine.working_set("wobbly", 0).unwrap();
    assert!(
        engine.working_set("wobbly", 64).unwrap() > whole,
        "synthesized classically, the parts' groups have buffers of their own"
    );
    wobbly_job(&engine, &[0]);
    assert_eq!(synthesis_of(&engine, "wobbly").mode, SynthesisMode::Precompiled);
    // From the recording the witness is computed whole: no group scratch.
    assert_eq!(
        engine.working_set("wobbly", 64).unwrap(),
        engine.working_set("wobbly", 0).unwrap()
    );
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_partition_that_does_not_match_its_recording_falls_back_alone_and_the_recording_stays() {
    let dir = temp_dir("precompiled-mismatch");
    let (pool, acct) = pool_with(1 << 30);
    let engine = wobbly_engine(&dir, &pool);
    assert_eq!(recording_files(&dir.join("hints")).len(), 1);
    // Seed 1 does not match the recording (one constraint more): it alone
    // is synthesized classically, as a malformed request's partition would
    // be, and the circuit type keeps its recording and its file.
    wobbly_job(&engine, &[2, 1, 4]);
    let s = synthesis_of(&engine, "wobbly");
    assert_eq!(s.mode, SynthesisMode::Precompiled, "{s:?}");
    assert_eq!((s.precompiled_partitions, s.classic_partitions), (2, 2), "{s:?}");
    for _ in 0..10 {
        wobbly_job(&engine, &[3]);
    }
    wobbly_job(&engine, &[6]);
    let s = synthesis_of(&engine, "wobbly");
    assert_eq!(s.mode, SynthesisMode::Precompiled, "{s:?}");
    assert_eq!((s.precompiled_partitions, s.classic_partitions), (3, 12), "{s:?}");
    assert_eq!(
        recording_files(&dir.join("hints")).len(),
        1,
        "the recording's file stays"
    );
    assert_idle(&engine, &pool, &acct, "wobbly");
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_circuit_none_of_whose_partitions_match_its_recording_goes_classic() {
    let dir = temp_dir("precompiled-wobbly");
    let (pool, acct) = pool_with(1 << 30);
    let engine = wobbly_engine(&dir, &pool);
    // Only odd seeds from here on: none matches the recording of seed 0.
    wobbly_job(&engine, &[1, 3, 5, 7, 9, 11, 13]);
    assert_eq!(synthesis_of(&engine, "wobbly").mode, SynthesisMode::Precompiled);
    wobbly_job(&engine, &[15]);
    let s = synthesis_of(&engine, "wobbly");
    assert_eq!(s.mode, SynthesisMode::ClassicOnly, "{s:?}");
    assert_eq!((s.precompiled_partitions, s.classic_partitions), (0, 9), "{s:?}");
    wobbly_job(&engine, &[2]);
    assert_eq!(synthesis_of(&engine, "wobbly").classic_partitions, 10);
    assert_idle(&engine, &pool, &acct, "wobbly");
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn partitions_that_cannot_copy_their_circuit_are_never_recorded() {
    let dir = temp_dir("precompiled-nocopy");
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, acct) = pool_with(1 << 30);
    let engine = test_engine(
        &pool,
        EngineConfig {
            precompiled: true,
            ..EngineConfig::default()
        },
        0,
        0,
        0,
    );
    engine.register_srs(&shape.id(), &params);
    for seed in 0..2 {
        let c = shape.clone().with_seed(seed);
        let job = engine
            .submit(spec(
                &shape.id(),
                Priority::Normal,
                vec![pinprove_engine::circuit_partition(c)],
            ))
            .unwrap();
        assert!(matches!(
            engine.wait(job, Some(Duration::from_secs(60))).unwrap(),
            JobOutcome::Completed(_)
        ));
        assert!(engine.wait_quiet(Duration::from_secs(30)));
    }
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!((s.mode, s.classic_partitions), (SynthesisMode::Classic, 2));
    assert_eq!(engine.status().recordings_made, 0);
    assert_idle(&engine, &pool, &acct, "no copy");
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_recording_gives_its_memory_back_when_work_needs_it() {
    let dir = temp_dir("precompiled-evict");
    let shape = BenchCircuit::new(1 << 10, WitnessMix::Random).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, _acct) = pool_with(1 << 30);
    let engine = cpu_engine(&pool, true, None);
    engine.register_srs(&shape.id(), &params);
    prove(&engine, &shape, &[1]);
    let held = synthesis_of(&engine, &shape.id()).recording_bytes;
    assert!(held > 0, "recorded");

    // More than is free without the recording: before, such a request
    // waited forever, since nothing could evict a recording.
    pool.clear_idle();
    let budget = pool.budget();
    // All a normal request may have, less what others hold (the
    // parameters): only with the recording's bytes does it fit.
    let limit = budget.limit_for(pinprove_mem::Rank::NORMAL);
    let want = limit - (budget.used() - held);
    assert!(want > limit - budget.used(), "needs the recording's memory");
    let taken = budget.try_acquire(want).expect("the recording was evicted for it");
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!((s.mode, s.recording_bytes), (SynthesisMode::Classic, 0), "{s:?}");
    drop(taken);
    // The engine goes on (classically until the recording is made again).
    prove(&engine, &shape, &[2]);
    drop(engine);
    assert_eq!(pool.budget().used(), pool.stats().allocated_bytes);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Under the planner's rules (`recordings_first`), memory that work needs
/// comes from idle parameters before recordings: loaded again, a recording
/// costs more per byte, and without it partitions synthesize classically.
#[test]
fn under_the_planner_idle_parameters_go_before_a_recording() {
    let dir = temp_dir("precompiled-recordings-first");
    let shape = BenchCircuit::new(1 << 10, WitnessMix::Random).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, _acct) = pool_with(1 << 30);
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            precompiled: true,
            planner: Some(pinprove_engine::planner::Policy::planned()),
            ..EngineConfig::default()
        },
        vec![Device {
            id: DeviceId::Cpu,
            backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &params);
    prove(&engine, &shape, &[1]);
    let held = synthesis_of(&engine, &shape.id()).recording_bytes;
    let srs: u64 = engine.status().srs.iter().map(|s| s.bytes).sum();
    assert!(held > 0 && srs >= held, "recorded, and the parameters are the larger");
    pool.clear_idle();
    let budget = pool.budget();
    let limit = budget.limit_for(pinprove_mem::Rank::NORMAL);
    let taken = budget
        .try_acquire(limit - (budget.used() - held))
        .expect("something was evicted for it");
    assert_eq!(
        synthesis_of(&engine, &shape.id()).recording_bytes,
        held,
        "the recording stayed"
    );
    assert!(!engine.status().srs.iter().any(|s| s.loaded), "the parameters went");
    drop(taken);
    prove(&engine, &shape, &[2]);
    assert_eq!(synthesis_of(&engine, &shape.id()).mode, SynthesisMode::Precompiled);
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_recording_is_not_dropped_for_memory_while_a_job_of_its_circuit_runs() {
    let dir = temp_dir("precompiled-in-use");
    let shape = BenchCircuit::new(1 << 10, WitnessMix::Random).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, _acct) = pool_with(1 << 30);
    let engine = cpu_engine(&pool, true, None);
    engine.register_srs(&shape.id(), &params);
    prove(&engine, &shape, &[1]);
    let held = synthesis_of(&engine, &shape.id()).recording_bytes;
    assert!(held > 0, "recorded");
    pool.clear_idle();
    // A job of the circuit type is under way (its partition in synthesis):
    // a request that needs the recording's bytes does not get them, or the
    // job's next partitions would fall back to the classic synthesis.
    let job = engine
        .submit(spec(&shape.id(), Priority::Normal, vec![slow(&shape, 1500)]))
        .unwrap();
    wait_for_partitions_in(
        &engine,
        pinprove_engine::Phase::Synthesis,
        1,
        "the slow partition synthesizes",
    );
    let budget = pool.budget();
    let want =
        |budget: &pinprove_mem::MemoryBudget| budget.limit_for(pinprove_mem::Rank::NORMAL) - (budget.used() - held);
    assert!(
        budget.try_acquire(want(budget)).is_err(),
        "the recording stays while its job runs"
    );
    assert_eq!(synthesis_of(&engine, &shape.id()).recording_bytes, held);
    wait_completed(&engine, job);
    // Once the job has ended it is given up for work that needs it.
    pool.clear_idle();
    let taken = budget
        .try_acquire(want(budget))
        .expect("the recording was evicted for it");
    assert_eq!(synthesis_of(&engine, &shape.id()).recording_bytes, 0);
    drop(taken);
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The CPU backend, claiming to compute pending a/b/c itself (it does, on
/// the host, as every backend may), counting the pending ones it gets;
/// with `host_plan`, its memory plan leaves every circuit's matrices on the
/// host (it says it does not compute their a/b/c).
struct ComputesAbc {
    cpu: CpuBackend,
    pending: std::sync::atomic::AtomicUsize,
    host_plan: bool,
}

impl pinprove_groth16::Backend for ComputesAbc {
    fn name(&self) -> &'static str {
        "computes-abc"
    }
    fn capabilities(&self) -> pinprove_groth16::Capabilities {
        pinprove_groth16::Capabilities {
            evaluates_recordings: true,
            ..self.cpu.capabilities()
        }
    }
    fn extra_working_set(
        &self,
        shape: &pinprove_groth16::CapacityHint,
        queries: Option<&pinprove_groth16::QueryLengths>,
        urgent: bool,
    ) -> u64 {
        self.cpu.extra_working_set(shape, queries, urgent)
    }
    fn evaluates_recording(&self, _: &Arc<Recording>) -> bool {
        !self.host_plan
    }
    fn start(
        &self,
        job: pinprove_groth16::ProofBatch,
    ) -> Result<Box<dyn pinprove_groth16::StartedProof>, pinprove_groth16::ProveError> {
        let pending = job.assignments.iter().filter(|a| a.recording().is_some()).count();
        self.pending.fetch_add(pending, std::sync::atomic::Ordering::Relaxed);
        self.cpu.start(job)
    }
}

impl ComputesAbc {
    /// Pending assignments handed to it so far.
    fn pending(&self) -> usize {
        self.pending.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A pre-compiling engine of two synthesis workers over `config`, on a
/// backend that computes a/b/c itself.
fn computes_abc_engine(pool: &Arc<PinnedPool>, config: EngineConfig) -> (Engine, Arc<ComputesAbc>) {
    abc_engine(pool, config, false)
}

fn abc_engine(pool: &Arc<PinnedPool>, config: EngineConfig, host_plan: bool) -> (Engine, Arc<ComputesAbc>) {
    let backend = Arc::new(ComputesAbc {
        cpu: CpuBackend::new(Arc::clone(pool)),
        pending: Default::default(),
        host_plan,
    });
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            precompiled: true,
            ..config
        },
        vec![Device {
            id: DeviceId::Gpu(0),
            backend: Arc::clone(&backend) as Arc<dyn pinprove_groth16::Backend>,
        }],
        Arc::clone(pool),
    )
    .unwrap();
    (engine, backend)
}

/// A 1500-constraint circuit recorded by a first job, then three partitions
/// proved on a backend that can compute a/b/c (planning them on the host
/// with `host_plan`), checked against the classic engine's proofs and
/// bellperson's verifier: what the tests of both placements share.
struct AbcRun {
    dir: PathBuf,
    shape: BenchCircuit,
    pool: Arc<PinnedPool>,
    acct: Arc<Accountant>,
    engine: Engine,
    backend: Arc<ComputesAbc>,
    classic: Engine,
    _classic_pool: Arc<PinnedPool>,
    /// Pending assignments the backend got by the end of the first job.
    pending_first: usize,
}

impl AbcRun {
    fn new(name: &str, host_plan: bool) -> AbcRun {
        let dir = temp_dir(name);
        let shape = BenchCircuit::new(1500, WitnessMix::Random).unwrap();
        let (params, vk) = real_params(&shape, &dir);
        let (pool, acct) = pool_with(2 << 30);
        let (engine, backend) = abc_engine(&pool, EngineConfig::default(), host_plan);
        let (classic_pool, _) = pool_with(2 << 30);
        let classic = cpu_engine(&classic_pool, false, None);
        engine.register_srs(&shape.id(), &params);
        classic.register_srs(&shape.id(), &params);
        prove(&engine, &shape, &[1]);
        let pending_first = backend.pending();
        same_as_classic(&engine, &classic, &vk, &shape);
        let s = synthesis_of(&engine, &shape.id());
        assert_eq!((s.classic_partitions, s.precompiled_partitions), (1, 3));
        AbcRun {
            dir,
            shape,
            pool,
            acct,
            engine,
            backend,
            classic,
            _classic_pool: classic_pool,
            pending_first,
        }
    }

    /// The working sets of a partition: this engine's, the classic one's.
    fn working_sets(&self) -> (u64, u64) {
        (
            self.engine.working_set(&self.shape.id(), 0).unwrap(),
            self.classic.working_set(&self.shape.id(), 0).unwrap(),
        )
    }

    fn finish(self, what: &str) {
        idle(&self.engine, &self.shape, &self.pool, &self.acct, what);
        std::fs::remove_dir_all(&self.dir).unwrap();
    }
}

#[test]
fn a_backend_that_computes_a_b_c_gets_the_witness_only() {
    let run = AbcRun::new("precompiled-deferred", false);
    assert_eq!(
        run.pending_first, 0,
        "the first job runs classically while it is recorded"
    );
    assert_eq!(run.backend.pending(), 3, "a/b/c left to the backend");
    let id = run.shape.id();
    assert!(
        synthesis_of(&run.engine, &id).abc_on_device,
        "{:?}",
        synthesis_of(&run.engine, &id)
    );
    assert!(!synthesis_of(&run.classic, &id).abc_on_device);
    let metric = format!("pinprove_precompiled_abc_on_device{{circuit=\"{id}\"}} 1");
    assert!(run.engine.metrics_text().contains(&metric), "{metric}");
    // Admission no longer counts a/b/c on the host.
    let (ws, classic_ws) = run.working_sets();
    assert!(ws + 3 * 32 * 1500 <= classic_ws, "{ws} vs {classic_ws}");
    run.finish("deferred");
}

/// A backend able to compute a/b/c whose memory plan leaves a circuit's
/// matrices on the host: the engine computes them at synthesis, within the
/// partition's admission, and never hands that backend pending ones (the
/// native backend computed them itself, on the host, outside any admission:
/// with the budget full of admitted partitions waiting for the device, the
/// first proof of a 32 GiB PoRep capped at 15 GiB waited forever).
#[test]
fn a_backend_that_plans_a_circuits_matrices_on_the_host_gets_a_b_c_computed() {
    let run = AbcRun::new("precompiled-host-plan", true);
    assert_eq!(
        run.backend.pending(),
        0,
        "no pending a/b/c for a circuit the backend plans on the host"
    );
    let s = synthesis_of(&run.engine, &run.shape.id());
    assert!(!s.abc_on_device, "{s:?}");
    // Admission counts a/b/c on the host, as the classic engine's does.
    let (ws, classic_ws) = run.working_sets();
    assert!(ws + 3 * 32 * 1500 > classic_ws, "{ws} vs {classic_ws}");
    run.finish("host plan");
}

/// A device backend that keeps a copy of each recording's matrices of its
/// own (as the native backend keeps them in device memory) and computes
/// a/b/c from that copy, never from the recording's host matrices.
struct KeepsMatrices {
    cpu: CpuBackend,
    copies: std::sync::Mutex<Vec<(std::sync::Weak<Recording>, Arc<Matrices>)>>,
}

impl pinprove_groth16::Backend for KeepsMatrices {
    fn name(&self) -> &'static str {
        "keeps-matrices"
    }
    fn capabilities(&self) -> pinprove_groth16::Capabilities {
        pinprove_groth16::Capabilities {
            evaluates_recordings: true,
            ..self.cpu.capabilities()
        }
    }
    fn hold_recording(&self, recording: &Arc<Recording>) -> Result<bool, pinprove_groth16::ProveError> {
        let copy = Arc::new((*recording.matrices()?).clone());
        self.copies.lock().unwrap().push((Arc::downgrade(recording), copy));
        Ok(true)
    }
    fn start(
        &self,
        mut job: pinprove_groth16::ProofBatch,
    ) -> Result<Box<dyn pinprove_groth16::StartedProof>, pinprove_groth16::ProveError> {
        let layout = self.cpu.capabilities().abc_layout;
        for asg in &mut job.assignments {
            let Some(rec) = asg.recording().cloned() else { continue };
            let copy = self
                .copies
                .lock()
                .unwrap()
                .iter()
                .find(|(r, _)| std::ptr::eq(r.as_ptr(), Arc::as_ptr(&rec)))
                .map(|(_, m)| Arc::clone(m))
                .expect("every recording proved from was held first");
            evaluate_pending_from(asg, &copy, layout)?;
        }
        self.cpu.start(job)
    }
}

#[test]
fn the_host_copy_of_the_matrices_is_released_once_every_device_holds_one() {
    let dir = temp_dir("precompiled-released");
    let shape = BenchCircuit::new(1500, WitnessMix::Random).unwrap();
    let (params, vk) = real_params(&shape, &dir);
    let (pool, acct) = pool_with(2 << 30);
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            precompiled: true,
            ..EngineConfig::default()
        },
        vec![Device {
            id: DeviceId::Gpu(0),
            backend: Arc::new(KeepsMatrices {
                cpu: CpuBackend::new(Arc::clone(&pool)),
                copies: Default::default(),
            }),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    let (classic_pool, _) = pool_with(2 << 30);
    let classic = cpu_engine(&classic_pool, false, None);
    engine.register_srs(&shape.id(), &params);
    classic.register_srs(&shape.id(), &params);
    prove(&engine, &shape, &[1]);
    let full = record(shape.clone(), &shape.id()).unwrap().stats();
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!(s.mode, SynthesisMode::Precompiled);
    assert!(!s.host_matrices, "{s:?}");
    assert_eq!(
        s.recording_bytes,
        full.bytes - full.matrix_bytes,
        "only the densities are paid for"
    );
    // Later partitions prove from the device's copy, the same proofs.
    same_as_classic(&engine, &classic, &vk, &shape);
    assert_eq!(synthesis_of(&engine, &shape.id()).precompiled_partitions, 3);
    idle(&engine, &shape, &pool, &acct, "released");
    // What it still holds is not dropped for memory: that would free next
    // to nothing and send the circuit back to the classic synthesis.
    pool.clear_idle();
    let budget = pool.budget();
    let all = budget.limit_for(pinprove_mem::Rank::NORMAL) - (budget.used() - s.recording_bytes);
    drop(budget.try_acquire(all));
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!(
        (s.mode, s.recording_bytes),
        (SynthesisMode::Precompiled, full.bytes - full.matrix_bytes)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_backend_without_a_copy_of_its_own_keeps_the_host_matrices() {
    let dir = temp_dir("precompiled-kept");
    let shape = BenchCircuit::new(1500, WitnessMix::Bits).unwrap();
    let (params, _) = real_params(&shape, &dir);
    let (pool, _) = pool_with(2 << 30);
    let (engine, _) = computes_abc_engine(&pool, EngineConfig::default());
    engine.register_srs(&shape.id(), &params);
    prove(&engine, &shape, &[1]);
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!(s.mode, SynthesisMode::Precompiled);
    assert!(s.host_matrices, "{s:?}");
    assert_eq!(
        s.recording_bytes,
        record(shape.clone(), &shape.id()).unwrap().stats().bytes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_warm_set_drops_a_b_c_once_the_devices_compute_them() {
    // Preloaded before its recording exists, a circuit is warmed with a/b/c;
    // once it is recorded and the backend computes a/b/c, the warm set keeps
    // only the witness buffers.
    let dir = temp_dir("precompiled-rewarm");
    let shape = BenchCircuit::new(1 << 14, WitnessMix::Random).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, acct) = pool_with(2 << 30);
    // Housekeeping (which warms again) runs every 50 ms.
    let config = EngineConfig {
        srs_idle_timeout: Duration::from_millis(200),
        ..EngineConfig::default()
    };
    let (engine, _) = computes_abc_engine(&pool, config);
    engine.register_srs(&shape.id(), &params);
    engine.preload_srs(&shape.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(60)));
    let with_abc = engine.status().pool_warm;
    assert!(with_abc > 0);
    let part = precompilable_partition(shape.clone().with_seed(3));
    assert!(engine.precompile(&shape.id(), &*part));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while engine.status().pool_warm * 2 >= with_abc {
        assert!(
            std::time::Instant::now() < deadline,
            "the warm set still holds a/b/c: {} of {with_abc} bytes",
            engine.status().pool_warm
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(engine.wait_quiet(Duration::from_secs(60)));
    let s = engine.status();
    assert!(s.pool_warm_ready <= s.pool_warm, "{s:?}");
    // The witness-only partitions then prove from the warm buffers.
    prove(&engine, &shape, &[4]);
    drop(part);
    idle(&engine, &shape, &pool, &acct, "rewarm");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_circuit_recorded_ahead_runs_pre_compiled_from_its_first_job() {
    let dir = temp_dir("precompiled-ahead");
    let shape = BenchCircuit::new(1 << 10, WitnessMix::Random).unwrap();
    let params = synthetic_params(&shape, &dir);
    let (pool, acct) = pool_with(2 << 30);
    let engine = cpu_engine(&pool, true, None);
    engine.register_srs(&shape.id(), &params);
    let part = precompilable_partition(shape.clone().with_seed(9));
    assert!(engine.precompile(&shape.id(), &*part));
    assert!(engine.wait_quiet(Duration::from_secs(60)));
    assert_eq!(synthesis_of(&engine, &shape.id()).mode, SynthesisMode::Precompiled);
    assert!(engine.precompile(&shape.id(), &*part), "held already");
    prove(&engine, &shape, &[1, 2]);
    let s = synthesis_of(&engine, &shape.id());
    assert_eq!((s.classic_partitions, s.precompiled_partitions), (0, 2));
    // Off: nothing is recorded.
    let (off_pool, _) = pool_with(2 << 30);
    let off = cpu_engine(&off_pool, false, None);
    off.register_srs(&shape.id(), &params);
    assert!(!off.precompile(&shape.id(), &*part));
    assert!(off.wait_quiet(Duration::from_secs(10)));
    assert_eq!(off.status().recordings_made, 0);
    drop(part);
    idle(&engine, &shape, &pool, &acct, "recorded ahead");
    std::fs::remove_dir_all(&dir).unwrap();
}
