//! Awaiting jobs from async code: many awaits on a small runtime, and an
//! awaiter that goes away cancelling its job.

use std::sync::Arc;
use std::time::Duration;

use pinprove_engine::{EngineConfig, JobOutcome, Priority};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};

use crate::common::*;

fn runtime() -> tokio::runtime::Runtime {
    // One thread for all the awaits: none of them may block it.
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn many_jobs_are_awaited_on_one_thread() {
    let dir = temp_dir("await-many");
    let (pool, acct) = pool_with(1 << 30);
    let chaos = Chaos::new(&pool);
    let engine = Arc::new(chaos_engine(&pool, &chaos, EngineConfig::default()));
    let shape = BenchCircuit::new(200, WitnessMix::Bits).unwrap();
    engine.register_srs(&shape.id(), synthetic_params(&shape, &dir));
    let n = 200u64;
    let ids: Vec<_> = (0..n)
        .map(|j| {
            let parts = (0..2).map(|k| slow(&shape.clone().with_seed(10 * j + k), 1)).collect();
            engine.submit(spec(&shape.id(), Priority::Normal, parts)).unwrap()
        })
        .collect();
    let outcomes = runtime().block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for &id in &ids {
            // Two awaiters per job.
            for _ in 0..2 {
                let fut = engine.outcome(id).unwrap();
                tasks.spawn(async move { (id, fut.await) });
            }
        }
        let mut v = Vec::new();
        while let Some(r) = tasks.join_next().await {
            v.push(r.unwrap());
        }
        v
    });
    assert_eq!(outcomes.len(), 2 * ids.len());
    for (id, o) in outcomes {
        assert!(matches!(o, JobOutcome::Completed(ref r) if r.len() == 2), "{id}: {o:?}");
        assert_eq!(
            engine.wait(id, Some(Duration::ZERO)).unwrap(),
            o,
            "the same outcome either way"
        );
    }
    assert_idle(&engine, &pool, &acct, "awaits");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_awaiter_that_goes_away_cancels_its_job() {
    let dir = temp_dir("await-drop");
    let (pool, acct) = pool_with(1 << 30);
    let chaos = Chaos::new(&pool);
    let engine = chaos_engine(
        &pool,
        &chaos,
        EngineConfig {
            synthesis_workers: 2,
            ..EngineConfig::default()
        },
    );
    let shape = BenchCircuit::new(200, WitnessMix::Bits).unwrap();
    engine.register_srs(&shape.id(), synthetic_params(&shape, &dir));
    let submit = |seed: u64, ms: u64| {
        let parts = (0..4).map(|k| slow(&shape.clone().with_seed(seed + k), ms)).collect();
        engine.submit(spec(&shape.id(), Priority::Normal, parts)).unwrap()
    };
    let rt = runtime();
    // A client awaits with a deadline and gives up: its job is cancelled,
    // wherever its partitions were.
    let slow_job = submit(0, 300);
    let guarded = engine.outcome(slow_job).unwrap().cancel_on_drop();
    let gave_up = rt.block_on(async { tokio::time::timeout(Duration::from_millis(100), guarded).await });
    assert!(gave_up.is_err(), "the timeout fired first");
    assert_eq!(
        engine.wait(slow_job, Some(Duration::from_secs(10))).unwrap(),
        JobOutcome::Cancelled
    );
    assert_idle(&engine, &pool, &acct, "after the dropped awaiter");
    // Without the guard, a dropped awaiter leaves the job alone.
    let kept = submit(100, 50);
    drop(engine.outcome(kept).unwrap());
    assert!(matches!(
        engine.wait(kept, Some(Duration::from_secs(30))).unwrap(),
        JobOutcome::Completed(_)
    ));
    // A guarded awaiter that saw the outcome cancels nothing.
    let done = submit(200, 0);
    let o = rt.block_on(engine.outcome(done).unwrap().cancel_on_drop());
    assert!(matches!(o, JobOutcome::Completed(_)));
    assert!(engine.metrics_text().contains("pinprove_jobs_cancelled_total 1"));
    assert_idle(&engine, &pool, &acct, "at the end");
    std::fs::remove_dir_all(&dir).unwrap();
}
