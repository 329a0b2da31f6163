//! Panics and errors in circuits and backends fail one job, never the
//! engine; a soak of thousands of small jobs with random cancels, errors and
//! panics leaves nothing waiting, leaked or double-counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use pinprove_engine::{EngineConfig, JobId, JobOutcome, Partition, Priority};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common::*;

fn outcome(engine: &pinprove_engine::Engine, id: JobId) -> JobOutcome {
    engine.wait(id, Some(Duration::from_secs(60))).expect("the job ends")
}

fn failed_with(o: &JobOutcome, text: &str) -> bool {
    matches!(o, JobOutcome::Failed(why) if why.contains(text))
}

/// One job whose partition 1 goes wrong as `bad` says, between good jobs
/// running at the same time; returns the bad job's outcome.
fn one_bad_job(
    name: &str,
    bad: impl FnOnce(&Arc<Chaos>, &BenchCircuit, &Arc<AtomicU64>) -> Box<dyn Partition>,
) -> (JobOutcome, Arc<Chaos>, pinprove_engine::Engine) {
    let dir = temp_dir(name);
    let (pool, acct) = pool_with(1 << 30);
    let chaos = Chaos::new(&pool);
    let engine = chaos_engine(
        &pool,
        &chaos,
        EngineConfig {
            synthesis_workers: 3,
            ..EngineConfig::default()
        },
    );
    let shape = BenchCircuit::new(400, WitnessMix::Random).unwrap();
    engine.register_srs(&shape.id(), synthetic_params(&shape, &dir));
    let panics = Arc::new(AtomicU64::new(0));
    let good = |j: u64| {
        let parts = (0..3).map(|k| slow(&shape.clone().with_seed(100 * j + k), 5)).collect();
        engine.submit(spec(&shape.id(), Priority::Normal, parts)).unwrap()
    };
    let before: Vec<JobId> = (0..3).map(good).collect();
    let parts = vec![
        slow(&shape.clone().with_seed(900), 5),
        bad(&chaos, &shape.clone().with_seed(901), &panics),
        slow(&shape.clone().with_seed(902), 5),
    ];
    let bad_job = engine.submit(spec(&shape.id(), Priority::High, parts)).unwrap();
    let after: Vec<JobId> = (3..6).map(good).collect();
    let o = outcome(&engine, bad_job);
    for id in before.into_iter().chain(after) {
        assert!(
            matches!(outcome(&engine, id), JobOutcome::Completed(ref r) if r.len() == 3),
            "{name}: a good job beside the bad one did not complete"
        );
    }
    assert_idle(&engine, &pool, &acct, name);
    // The engine goes on serving.
    let later = good(7);
    assert!(
        matches!(outcome(&engine, later), JobOutcome::Completed(_)),
        "{name}: served after"
    );
    assert_idle(&engine, &pool, &acct, name);
    std::fs::remove_dir_all(&dir).unwrap();
    (o, chaos, engine)
}

#[test]
fn a_circuit_that_panics_in_synthesis_fails_only_its_job() {
    let (o, _, engine) = one_bad_job("synth-panic", |_, _, panics| {
        Box::new(Failing {
            fault: SynthesisFault::Panic,
            panics: Arc::clone(panics),
        })
    });
    assert!(
        failed_with(&o, "synthesis panicked: failing partition: synthesis panics"),
        "{o:?}"
    );
    assert!(failed_with(&o, "partition 1"), "{o:?}");
    assert_eq!(engine.metrics().panics(), 1);
    assert!(engine.metrics_text().contains("pinprove_panics_total 1"));
}

#[test]
fn a_circuit_whose_synthesis_fails_fails_only_its_job() {
    let (o, _, engine) = one_bad_job("synth-error", |_, _, panics| {
        Box::new(Failing {
            fault: SynthesisFault::Error,
            panics: Arc::clone(panics),
        })
    });
    assert!(failed_with(&o, "partition 1 synthesis: synthesis failed"), "{o:?}");
    assert_eq!(engine.metrics().panics(), 0);
}

#[test]
fn a_backend_that_panics_in_start_fails_only_its_job() {
    let (o, chaos, engine) = one_bad_job("start-panic", |chaos, c, _| {
        chaos.mark(c, Fault::StartPanic);
        slow(c, 5)
    });
    assert!(
        failed_with(&o, "the backend's first step panicked: chaos: start panics"),
        "{o:?}"
    );
    assert_eq!(chaos.tally.panics.load(Ordering::SeqCst), 1);
    assert_eq!(engine.metrics().panics(), 1);
    assert!(
        engine.status().devices[0].lost.is_none(),
        "a panic is not a lost device"
    );
}

#[test]
fn a_backend_that_panics_in_finish_fails_only_its_job() {
    let (o, chaos, engine) = one_bad_job("finish-panic", |chaos, c, _| {
        chaos.mark(c, Fault::FinishPanic);
        slow(c, 5)
    });
    assert!(
        failed_with(&o, "the backend's second step panicked: chaos: finish panics"),
        "{o:?}"
    );
    assert_eq!(chaos.tally.panics.load(Ordering::SeqCst), 1);
    assert_eq!(engine.metrics().panics(), 1);
}

#[test]
fn backend_errors_fail_only_their_job() {
    for (name, fault, text) in [
        ("start-error", Fault::StartError, "chaos: start fails"),
        ("finish-error", Fault::FinishError, "chaos: finish fails"),
    ] {
        let (o, chaos, _) = one_bad_job(name, |chaos, c, _| {
            chaos.mark(c, fault);
            slow(c, 5)
        });
        assert!(failed_with(&o, text), "{name}: {o:?}");
        assert_eq!(chaos.tally.errors.load(Ordering::SeqCst), 1, "{name}");
    }
}

/// What the soak did to one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Good,
    Synthesis(SynthesisFault),
    Backend(Fault),
}

/// Thousands of small jobs (`PINPROVE_SOAK_JOBS`, default 3000) of mixed
/// priorities and sizes, a twentieth of them cancelled at random moments,
/// about a tenth with an error or a panic injected into synthesis or one of
/// the backend's steps. Afterwards every job has ended as its plan allows,
/// the engine's counters agree with the backend's own tally, and every
/// byte is back. Seeded: a failure reproduces with `PINPROVE_SOAK_SEED`.
#[test]
fn soak_mixed_jobs_with_cancels_errors_and_panics() {
    let jobs: usize = std::env::var("PINPROVE_SOAK_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("PINPROVE_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20261201);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dir = temp_dir("soak");
    // Room for a few partitions at once: admission waits are part of it.
    let (pool, acct) = pool_with(24 << 20);
    let chaos = Chaos::new(&pool);
    let engine = chaos_engine(
        &pool,
        &chaos,
        EngineConfig {
            synthesis_workers: 4,
            // Every outcome stays to be checked at the end.
            finished_jobs_kept: jobs + 1,
            ..EngineConfig::default()
        },
    );
    let shapes = [
        BenchCircuit::new(64, WitnessMix::Bits).unwrap(),
        BenchCircuit::new(300, WitnessMix::Random).unwrap(),
    ];
    for c in &shapes {
        engine.register_srs(&c.id(), synthetic_params(c, &dir));
    }
    let synthesis_panics = Arc::new(AtomicU64::new(0));
    let priorities = [Priority::Low, Priority::Normal, Priority::High, Priority::Critical];
    let started = Instant::now();
    let mut submitted: Vec<(JobId, Plan, usize)> = Vec::with_capacity(jobs);
    let mut cancelled = Vec::new();
    for j in 0..jobs {
        let shape = &shapes[rng.gen_range(0..shapes.len())];
        let n = rng.gen_range(1..=3);
        let roll: f64 = rng.r#gen();
        let plan = match roll {
            r if r < 0.02 => Plan::Synthesis(SynthesisFault::Error),
            r if r < 0.04 => Plan::Synthesis(SynthesisFault::Panic),
            r if r < 0.06 => Plan::Backend(Fault::StartError),
            r if r < 0.08 => Plan::Backend(Fault::StartPanic),
            r if r < 0.09 => Plan::Backend(Fault::FinishError),
            r if r < 0.10 => Plan::Backend(Fault::FinishPanic),
            _ => Plan::Good,
        };
        let bad = rng.gen_range(0..n);
        let parts: Vec<Box<dyn Partition>> = (0..n)
            .map(|k| {
                let c = shape.clone().with_seed((j * 4 + k) as u64);
                match plan {
                    Plan::Synthesis(fault) if k == bad => Box::new(Failing {
                        fault,
                        panics: Arc::clone(&synthesis_panics),
                    }) as Box<dyn Partition>,
                    Plan::Backend(fault) if k == bad => {
                        chaos.mark(&c, fault);
                        slow(&c, 0)
                    }
                    _ => slow(&c, 0),
                }
            })
            .collect();
        let priority = priorities[rng.gen_range(0..priorities.len())];
        let id = engine.submit(spec(&shape.id(), priority, parts)).unwrap();
        submitted.push((id, plan, n));
        // Cancel a random earlier job now and then, wherever it is.
        if rng.gen_bool(0.05) {
            let (victim, _, _) = submitted[rng.gen_range(0..submitted.len())];
            engine.cancel(victim).unwrap();
            cancelled.push(victim);
        }
        if j % 200 == 199 {
            thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
        }
    }
    let (mut completed, mut proofs_of_completed) = (0u64, 0u64);
    for &(id, plan, n) in &submitted {
        let o = outcome(&engine, id);
        let was_cancelled = cancelled.contains(&id);
        match (&o, plan) {
            (JobOutcome::Completed(r), Plan::Good) => {
                assert_eq!(r.len(), n);
                assert!(r.iter().enumerate().all(|(i, p)| p.index == i), "results in order");
                completed += 1;
                proofs_of_completed += n as u64;
            }
            (JobOutcome::Cancelled, _) => assert!(was_cancelled, "{id} cancelled by nobody"),
            (JobOutcome::Failed(why), p) if p != Plan::Good => {
                let expected = match p {
                    Plan::Synthesis(SynthesisFault::Panic) => "synthesis panicked",
                    Plan::Synthesis(SynthesisFault::Error) => "synthesis failed",
                    Plan::Backend(Fault::StartPanic) => "first step panicked",
                    Plan::Backend(Fault::FinishPanic) => "second step panicked",
                    Plan::Backend(Fault::StartError) => "chaos: start fails",
                    Plan::Backend(Fault::FinishError) => "chaos: finish fails",
                    Plan::Good => unreachable!(),
                };
                assert!(why.contains(expected), "{id} ({p:?}): {why}");
            }
            (o, p) => panic!("{id}: plan {p:?}, cancelled {was_cancelled}, ended {o:?}"),
        }
    }
    let took = started.elapsed();
    assert_idle(&engine, &pool, &acct, "soak");
    let m = engine.metrics();
    // Every proof the backend returned was counted once, and only those.
    assert_eq!(m.proofs_completed(), chaos.tally.proofs.load(Ordering::SeqCst));
    assert!(m.proofs_completed() >= proofs_of_completed);
    // Every panic raised was caught once.
    let raised = chaos.tally.panics.load(Ordering::SeqCst) + synthesis_panics.load(Ordering::SeqCst);
    assert_eq!(m.panics(), raised);
    assert!(raised > 0 && completed > (jobs as u64) / 2, "the soak exercised little");
    eprintln!(
        "soak: {jobs} jobs (seed {seed}) in {:.1} s: {completed} completed, {} cancel requests, {raised} panics, {} errors",
        took.as_secs_f64(),
        cancelled.len(),
        chaos.tally.errors.load(Ordering::SeqCst)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
