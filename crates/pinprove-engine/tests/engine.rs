//! The engine with the CPU backend and with a test backend whose timings and
//! allocations are controlled.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use blstrs::Bls12;
use pinprove_engine::{
    Device, Engine, EngineConfig, EngineError, JobId, JobOutcome, Phase, Priority, circuit_partition_with_inputs,
    holding_heap,
};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::{
    AbcLayout, Backend, BackendHint, Capabilities, CapacityHint, CapacityHints, CpuBackend, DeviceFault, ProveError,
    ProvingJob, Srs, StartedProof, check_job,
};

use common::*;

#[test]
fn interleaved_jobs_get_their_own_verifying_proofs_in_partition_order() {
    let dir = temp_dir("verify");
    let (pool, _) = pool_with(4 << 30);
    let shape = BenchCircuit::new(600, WitnessMix::Bits).unwrap();
    let (path, vk) = real_params(&shape, &dir);
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            ..EngineConfig::default()
        },
        vec![Device {
            name: "cpu".into(),
            backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &path);
    let priorities = [Priority::Low, Priority::Critical, Priority::Normal];
    let jobs: Vec<_> = (0..3u64)
        .map(|j| {
            let parts = (0..3u64)
                .map(|p| {
                    let c = shape.clone().with_seed(100 * j + p);
                    let inputs = c.public_inputs();
                    circuit_partition_with_inputs(c, inputs)
                })
                .collect();
            engine.submit(spec(&shape.id(), priorities[j as usize], parts)).unwrap()
        })
        .collect();
    let pvk = bellperson::groth16::prepare_verifying_key(&vk);
    for (j, id) in jobs.into_iter().enumerate() {
        let JobOutcome::Completed(results) = engine.wait(id, Some(Duration::from_secs(120))).unwrap() else {
            panic!("job {j} did not complete");
        };
        assert_eq!(results.len(), 3);
        for (p, r) in results.iter().enumerate() {
            assert_eq!(r.index, p);
            let expected = shape.clone().with_seed(100 * j as u64 + p as u64).public_inputs();
            assert_eq!(r.public_inputs.as_deref(), Some(&expected[..]));
            let proof = bellperson::groth16::Proof::<Bls12>::read(&r.proof.to_bytes()[..]).unwrap();
            assert!(
                bellperson::groth16::verify_proof(&pvk, &proof, &expected).unwrap(),
                "job {j} partition {p}"
            );
            // Another partition's inputs must not verify.
            let other = shape.clone().with_seed(999).public_inputs();
            assert!(!bellperson::groth16::verify_proof(&pvk, &proof, &other).unwrap());
        }
    }
    assert!(engine.wait_quiet(Duration::from_secs(10)));
    let text = engine.metrics_text();
    assert!(text.contains("pinprove_proofs_completed_total 9"), "{text}");
    assert!(text.contains("pinprove_phase_seconds_count{phase=\"synthesis\"} 9"));
    assert_eq!(
        pool.stats().checked_out_bytes,
        engine.status().srs[0].bytes,
        "only the SRS stays checked out"
    );
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn higher_priorities_run_first_and_fifo_within_one() {
    let dir = temp_dir("priority");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(300, WitnessMix::Random).unwrap();
    let path = synthetic_params(&c, &dir);
    let engine = test_engine(
        &pool,
        EngineConfig {
            synthesis_workers: 1,
            ..EngineConfig::default()
        },
        0,
        0,
        0,
    );
    engine.register_srs(&c.id(), &path);
    // Keeps the only synthesis worker busy while the others queue.
    let blocker = engine
        .submit(spec(&c.id(), Priority::Low, vec![slow(&c, 300)]))
        .unwrap();
    thread::sleep(Duration::from_millis(100));
    let low = engine
        .submit(spec(&c.id(), Priority::Low, vec![slow(&c, 0), slow(&c, 0)]))
        .unwrap();
    let normal = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
        .unwrap();
    let critical = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]))
        .unwrap();
    let high = engine.submit(spec(&c.id(), Priority::High, vec![slow(&c, 0)])).unwrap();
    for id in [blocker, low, normal, critical, high] {
        assert!(matches!(
            engine.wait(id, Some(Duration::from_secs(30))).unwrap(),
            JobOutcome::Completed(_)
        ));
    }
    let order: Vec<String> = engine
        .timeline()
        .spans()
        .into_iter()
        .filter(|s| s.name == Phase::Synthesis)
        .map(|s| s.label)
        .collect();
    let label = |id: JobId, p: usize| format!("{id}/{p}");
    // Urgent partitions do not wait for the busy background worker: each
    // takes a worker kept for urgent work and is done before the blocker.
    let at = |l: String| order.iter().position(|o| *o == l).unwrap();
    assert!(at(label(critical, 0)) < at(label(blocker, 0)), "{order:?}");
    assert!(at(label(high, 0)) < at(label(blocker, 0)), "{order:?}");
    // The rest by priority, first come first served within one.
    let rest: Vec<String> = order
        .iter()
        .filter(|o| **o != label(critical, 0) && **o != label(high, 0))
        .cloned()
        .collect();
    let want: Vec<String> = [(blocker, 0), (normal, 0), (low, 0), (low, 1)]
        .iter()
        .map(|&(id, p)| label(id, p))
        .collect();
    assert_eq!(rest, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Many jobs of two sizes and all priorities on a budget that fits only a
/// few partitions at once. The accountant (the allocator's own live count)
/// never sees more memory than the budget, and everything comes back.
#[test]
fn the_budget_is_never_exceeded_under_a_mixed_workload() {
    let dir = temp_dir("budget");
    const TOTAL: u64 = 40 << 20;
    let (pool, acct) = pool_with(TOTAL);
    let small = BenchCircuit::new(2000, WitnessMix::Bits).unwrap();
    let big = BenchCircuit::new(20_000, WitnessMix::Random).unwrap();
    let engine = test_engine(
        &pool,
        EngineConfig {
            synthesis_workers: 6,
            // Lets the two types' parameters take turns in memory.
            srs_idle_timeout: Duration::from_millis(20),
            ..EngineConfig::default()
        },
        5,
        5,
        1 << 20,
    );
    for c in [&small, &big] {
        engine.register_srs(&c.id(), synthetic_params(c, &dir));
    }
    let prios = [Priority::Low, Priority::Normal, Priority::High, Priority::Critical];
    let mut ids = Vec::new();
    for i in 0..12 {
        let c = if i % 3 == 0 { &big } else { &small };
        let parts = (0..3).map(|k| slow(&c.clone().with_seed(i * 10 + k), 2)).collect();
        ids.push(engine.submit(spec(&c.id(), prios[i as usize % 4], parts)).unwrap());
    }
    for id in ids {
        assert!(matches!(
            engine.wait(id, Some(Duration::from_secs(60))).unwrap(),
            JobOutcome::Completed(_)
        ));
    }
    assert!(engine.wait_quiet(Duration::from_secs(10)));
    let max = acct.max.load(Ordering::SeqCst);
    assert!(max <= TOTAL, "the accountant saw {max} bytes live, budget {TOTAL}");
    assert!(max > TOTAL / 4, "the workload never filled the budget ({max})");
    let s = pool.stats();
    assert_eq!(s.checked_out_bytes, 0);
    // What stays reserved: idle pool buffers and the backends' SRS copies.
    let srs: u64 = engine.status().srs.iter().map(|i| i.bytes).sum();
    assert_eq!(pool.budget().used(), s.allocated_bytes + srs);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Cancels a job while its partitions are queued, synthesizing, waiting for
/// a device worker, in the backend's first step, and in its second step:
/// every time all memory comes back.
#[test]
fn cancellation_at_every_stage_returns_everything() {
    let dir = temp_dir("cancel");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(3000, WitnessMix::Random).unwrap();
    let engine = test_engine(
        &pool,
        EngineConfig {
            synthesis_workers: 2,
            workers_per_device: Some(1),
            ..EngineConfig::default()
        },
        300,
        300,
        1 << 20,
    );
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(10)), "the pool's warm-up ended");
    // The SRS copies (the pool's buffers are counted on their own below).
    let idle_used = pool.budget().used() - pool.stats().allocated_bytes;
    // (label, delay before cancelling, synthesis delay)
    for (stage, wait_ms, synth_ms) in [
        ("queued", 0, 400),
        ("synthesizing", 150, 600),
        ("device step", 450, 50),
        ("finishing", 700, 50),
    ] {
        let parts = (0..4).map(|k| slow(&c.clone().with_seed(k), synth_ms)).collect();
        let id = engine.submit(spec(&c.id(), Priority::Normal, parts)).unwrap();
        thread::sleep(Duration::from_millis(wait_ms));
        engine.cancel(id).unwrap();
        assert_eq!(
            engine.wait(id, Some(Duration::from_secs(5))).unwrap(),
            JobOutcome::Cancelled,
            "{stage}"
        );
        assert!(
            engine.wait_quiet(Duration::from_secs(10)),
            "{stage}: pipeline did not drain"
        );
        let s = pool.stats();
        assert_eq!(s.checked_out_bytes, 0, "{stage}: buffers still out");
        assert_eq!(
            pool.budget().used(),
            s.allocated_bytes + idle_used,
            "{stage}: reservations still held"
        );
    }
    assert!(matches!(
        engine.cancel(pinprove_engine::JobId(999)),
        Err(EngineError::UnknownJob(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_partitions_own_heap_is_admitted_with_it_until_its_synthesis_ends() {
    let dir = temp_dir("heap");
    let (pool, acct) = pool_with(64 << 20);
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let config = EngineConfig {
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let engine = test_engine(&pool, config, 0, 0, 0);
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)));
    let ws = engine.working_set(&c.id()).unwrap();
    // More heap than the budget has beside the partition's buffers: never.
    let err = engine
        .submit(spec(
            &c.id(),
            Priority::Normal,
            vec![holding_heap(slow(&c, 0), 64 << 20)],
        ))
        .unwrap_err();
    assert!(matches!(err, EngineError::TooLarge { .. }), "{err}");
    // Held through synthesis, then given back.
    let heap = 32 << 20;
    let before = pool.budget().used();
    let id = engine
        .submit(spec(&c.id(), Priority::Normal, vec![holding_heap(slow(&c, 100), heap)]))
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    let peak = pool.budget().stats().peak;
    assert!(peak >= before + ws + heap, "peak {peak}, before {before}, ws {ws}");
    assert_idle(&engine, &pool, &acct, "heap released");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_job_that_can_never_fit_fails_at_once() {
    let dir = temp_dir("too-large");
    let (pool, _) = pool_with(2 << 20);
    let c = BenchCircuit::new(50_000, WitnessMix::Random).unwrap();
    let engine = test_engine(&pool, EngineConfig::default(), 0, 0, 0);
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    let t = Instant::now();
    let err = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
        .unwrap_err();
    assert!(matches!(err, EngineError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("more than the whole memory budget"));
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(matches!(
        engine.submit(spec("nobody", Priority::Normal, vec![slow(&c, 0)])),
        Err(EngineError::UnknownCircuit(_))
    ));
    assert!(matches!(
        engine.submit(spec(&c.id(), Priority::Normal, vec![])),
        Err(EngineError::EmptyJob)
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two circuit types whose parameters do not fit together: the second
/// loads only once the first is both unreferenced and idle for the timeout.
#[test]
fn an_srs_is_evicted_only_when_idle_and_unreferenced() {
    let dir = temp_dir("evict");
    let a = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let b = BenchCircuit::new(40_001, WitnessMix::Random).unwrap();
    let pa = synthetic_params(&a, &dir);
    let pb = synthetic_params(&b, &dir);
    let file = std::fs::metadata(&pa).unwrap().len();
    // Room for one SRS (the CPU backend decodes points) and its partitions,
    // not for two.
    let (pool, _) = pool_with(file + file / 2 + (24 << 20));
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 1,
            srs_idle_timeout: Duration::from_millis(300),
            ..EngineConfig::default()
        },
        vec![Device {
            name: "cpu".into(),
            backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&a.id(), &pa);
    engine.register_srs(&b.id(), &pb);
    let ja = engine
        .submit(spec(&a.id(), Priority::Normal, vec![slow(&a, 0)]))
        .unwrap();
    assert!(matches!(
        engine.wait(ja, Some(Duration::from_secs(60))).unwrap(),
        JobOutcome::Completed(_)
    ));
    let done_a = Instant::now();
    let loaded = |e: &Engine, id: &str| e.status().srs.iter().any(|s| s.circuit_id == id && s.loaded);
    assert!(loaded(&engine, &a.id()));
    let jb = engine
        .submit(spec(&b.id(), Priority::Normal, vec![slow(&b, 0)]))
        .unwrap();
    assert!(matches!(
        engine.wait(jb, Some(Duration::from_secs(60))).unwrap(),
        JobOutcome::Completed(_)
    ));
    assert!(
        done_a.elapsed() >= Duration::from_millis(300),
        "A was evicted before it was idle long enough"
    );
    assert!(!loaded(&engine, &a.id()) && loaded(&engine, &b.id()));
    // An explicit eviction frees the points at once.
    let before = pool.stats().allocated_bytes;
    assert!(engine.evict_srs(&b.id()).unwrap() > 0);
    assert!(pool.stats().allocated_bytes < before);
    assert_eq!(engine.evict_srs(&b.id()), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn timelines_and_metrics_describe_the_run() {
    let dir = temp_dir("timeline");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(500, WitnessMix::Bits).unwrap();
    let engine = test_engine(&pool, EngineConfig::default(), 10, 10, 0);
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    let id = engine
        .submit(spec(
            &c.id(),
            Priority::High,
            (0..4).map(|k| slow(&c.clone().with_seed(k), 5)).collect(),
        ))
        .unwrap();
    let JobOutcome::Completed(results) = engine.wait(id, None).unwrap() else {
        panic!()
    };
    for r in &results {
        assert!(r.timings.start >= Duration::from_millis(10) && r.timings.finish >= Duration::from_millis(10));
        assert!(r.timings.synthesis >= Duration::from_millis(5));
        assert!(r.timings.total() >= r.timings.synthesis + r.timings.start + r.timings.finish);
    }
    let status = engine.job_status(id).unwrap();
    assert_eq!((status.proved, status.partitions), (4, 4));
    let trace: serde_json::Value = serde_json::from_str(&engine.timeline().chrome_trace()).unwrap();
    let names: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for phase in ["synthesis", "start", "finish", "admission", "thread_name"] {
        assert!(names.contains(&phase), "{phase} missing");
    }
    assert!(engine.timeline().svg().contains("test0-worker-0"));
    let m = engine.metrics_text();
    for line in [
        "pinprove_budget_total_bytes",
        "pinprove_pool_idle_bytes",
        "pinprove_pool_fresh_allocations_total",
        "pinprove_pool_alloc_seconds_total",
        "pinprove_pool_handed_over_total",
        "pinprove_device_busy_fraction{device=\"test0\"}",
    ] {
        assert!(m.contains(line), "{line} missing:\n{m}");
    }
    // The run allocated pool buffers (the pool started empty).
    assert!(engine.status().pool_fresh_allocations > 0);
    assert!(engine.status().devices[0].busy_fraction > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn learned_hints_persist_for_the_next_engine() {
    let dir = temp_dir("hints");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(700, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    let config = EngineConfig {
        hints_dir: Some(dir.join("cache")),
        ..EngineConfig::default()
    };
    {
        let engine = test_engine(&pool, config.clone(), 0, 0, 0);
        engine.register_srs(&c.id(), &params);
        let id = engine
            .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
            .unwrap();
        assert!(matches!(
            engine.wait(id, Some(Duration::from_secs(30))).unwrap(),
            JobOutcome::Completed(_)
        ));
    }
    let engine = test_engine(&pool, config, 0, 0, 0);
    assert_eq!(engine.hints().get(&c.id()).map(|h| h.constraints), Some(700));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tampered_hints_are_discarded_and_relearned_through_the_engine() {
    // A hints file that asks for more than the budget (or overflows), and
    // one that is plausible but disagrees with the parameters: each is
    // discarded at submission, the job runs and the right hint is learned.
    let dir = temp_dir("tampered-hints");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(700, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    let cache = dir.join("cache");
    let huge = CapacityHint {
        constraints: usize::MAX / 2,
        inputs: 1,
        aux: 1 << 40,
    };
    let wrong_shape = CapacityHint {
        constraints: 600,
        inputs: 1,
        aux: 3,
    };
    for (what, bad) in [("huge", huge), ("wrong shape", wrong_shape)] {
        CapacityHints::persistent(&cache).record(&c.id(), bad);
        let engine = test_engine(
            &pool,
            EngineConfig {
                hints_dir: Some(cache.clone()),
                ..EngineConfig::default()
            },
            0,
            0,
            0,
        );
        assert_eq!(
            engine.hints().get(&c.id()),
            Some(bad),
            "{what}: the tampered file is read"
        );
        engine.register_srs(&c.id(), &params);
        let id = engine
            .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let outcome = engine.wait(id, Some(Duration::from_secs(30))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{what}: {outcome:?}");
        assert_eq!(engine.hints().get(&c.id()).map(|h| h.constraints), Some(700), "{what}");
        drop(engine);
        assert_eq!(
            CapacityHints::persistent(&cache).get(&c.id()).map(|h| h.constraints),
            Some(700),
            "{what}: the file holds the relearned hint"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend that keeps every base on its (pretend) device: it needs the
/// points to make its copy, never afterwards. The flag: whether its proofs
/// must find the host points freed.
struct HoldsOnDevice(TestBackend, bool);

impl Backend for HoldsOnDevice {
    fn name(&self) -> &'static str {
        "holds-on-device"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            needs_srs_points: true,
            evaluates_recordings: false,
            ..self.0.capabilities()
        }
    }
    fn needs_host_points(&self, _: &pinprove_groth16::Srs) -> bool {
        false
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        assert!(!self.1 || job.srs.points().is_none(), "the host points were freed");
        self.0.start(job)
    }
}

#[test]
fn host_points_are_freed_once_every_device_holds_the_srs() {
    let dir = temp_dir("host-points");
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    let run = |also_host: bool| {
        let (pool, acct) = pool_with(1 << 30);
        let test = || TestBackend::instant(&pool);
        let mut devices = vec![Device {
            name: "device0".into(),
            backend: Arc::new(HoldsOnDevice(test(), !also_host)) as Arc<dyn Backend>,
        }];
        if also_host {
            devices.push(Device {
                name: "cpu".into(),
                backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
            });
        }
        let engine = Engine::new(EngineConfig::default(), devices, Arc::clone(&pool)).unwrap();
        engine.register_srs(&c.id(), &params);
        let id = engine
            .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
            .unwrap();
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
        let bytes = engine
            .status()
            .srs
            .iter()
            .find(|s| s.circuit_id == c.id())
            .unwrap()
            .bytes;
        if !also_host {
            // No pool buffer holds points any more.
            assert_idle(&engine, &pool, &acct, "host points");
        }
        bytes
    };
    // One device that holds the bases: nothing of the SRS stays on the host.
    assert_eq!(run(false), 0);
    // A CPU device beside it reads the host points: they stay.
    assert!(run(true) > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_critical_job_is_admitted_at_once_while_background_work_holds_the_memory() {
    // Background partitions take all the memory they may (two at a time) and
    // every background worker; a critical job submitted then is admitted
    // from the reserve, synthesized by a worker kept for urgent work, and
    // done before any of them.
    let dir = temp_dir("critical-reserve");
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    // The working set and the SRS copy, measured on a roomy engine.
    let (ws, srs) = {
        let (pool, _) = pool_with(1 << 30);
        let e = test_engine(&pool, EngineConfig::default(), 0, 0, 0);
        e.register_srs(&c.id(), &params);
        e.preload_srs(&c.id()).unwrap();
        let srs = e.status().srs.iter().find(|s| s.circuit_id == c.id()).unwrap().bytes;
        (e.working_set(&c.id()).unwrap(), srs)
    };
    let reserve = ws + ws / 4;
    let (pool, acct) = pool_with(srs + 2 * ws + ws / 2 + reserve);
    let engine = test_engine(
        &pool,
        EngineConfig {
            synthesis_workers: 3,
            priority_reserve: Some(reserve),
            ..EngineConfig::default()
        },
        0,
        0,
        0,
    );
    engine.register_srs(&c.id(), &params);
    engine.preload_srs(&c.id()).unwrap();
    let background = engine
        .submit(spec(
            &c.id(),
            Priority::Normal,
            (0..6).map(|_| slow(&c, 2000)).collect(),
        ))
        .unwrap();
    wait_for_partitions_in(
        &engine,
        Phase::Synthesis,
        2,
        "two background partitions never synthesized",
    );
    // The budget admits no third background partition now.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        engine
            .status()
            .partitions
            .iter()
            .filter(|p| p.phase == Phase::Synthesis)
            .count(),
        2
    );
    let critical = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]))
        .unwrap();
    let outcome = engine.wait(critical, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    let bg = engine.job_status(background).unwrap();
    assert_eq!(
        bg.proved, 0,
        "the critical job finished before any background partition"
    );
    assert!(matches!(
        engine.wait(background, Some(Duration::from_secs(60))).unwrap(),
        JobOutcome::Completed(_)
    ));
    assert_idle(&engine, &pool, &acct, "critical");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A test engine (three synthesis workers; `workers` device workers, or
/// the backend's choice, whose starts take `start_ms`) and the small
/// circuit it proves, its parameters registered; with the temporary
/// directory, the pool and its accountant.
fn busy_device_engine(
    name: &str,
    workers: Option<usize>,
    start_ms: u64,
    finish_ms: u64,
) -> (
    std::path::PathBuf,
    Arc<pinprove_mem::PinnedPool>,
    Arc<Accountant>,
    BenchCircuit,
    Engine,
) {
    let dir = temp_dir(name);
    let (pool, acct) = pool_with(1 << 30);
    let c = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    let engine = test_engine(
        &pool,
        EngineConfig {
            synthesis_workers: 3,
            workers_per_device: workers,
            ..EngineConfig::default()
        },
        start_ms,
        finish_ms,
        0,
    );
    engine.register_srs(&c.id(), &params);
    (dir, pool, acct, c, engine)
}

#[test]
fn a_critical_partition_is_started_next_on_a_busy_device() {
    // One device worker, slow starts: background partitions pile up before
    // the device. A critical partition synthesized then is the next one the
    // device starts.
    let (dir, pool, acct, c, engine) = busy_device_engine("critical-handoff", Some(1), 300, 0);
    let background = engine
        .submit(spec(&c.id(), Priority::Normal, (0..6).map(|_| slow(&c, 0)).collect()))
        .unwrap();
    wait_for_partitions_in(
        &engine,
        Phase::HandoffWait,
        3,
        "the background partitions never queued for the device",
    );
    let critical = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]))
        .unwrap();
    for id in [critical, background] {
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    }
    let starts: Vec<String> = engine
        .timeline()
        .spans()
        .into_iter()
        .filter(|s| s.name == Phase::Start)
        .map(|s| s.label)
        .collect();
    let at = starts.iter().position(|l| *l == format!("{critical}/0")).unwrap();
    assert!(at <= 1, "the critical partition was started {at}th: {starts:?}");
    assert_idle(&engine, &pool, &acct, "handoff");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn devices_start_no_background_partition_while_a_critical_one_is_on_its_way() {
    // Two device workers, quick starts: background partitions stream to the
    // device. A critical partition that takes a while to synthesize is
    // submitted; until it starts, no background partition starts (a GPU
    // runs its queue in order, so each one started would delay it).
    let (dir, pool, acct, c, engine) = busy_device_engine("critical-hold", None, 20, 0);
    let background = engine
        .submit(spec(&c.id(), Priority::Normal, (0..40).map(|_| slow(&c, 0)).collect()))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while engine.job_status(background).unwrap().proved < 4 {
        assert!(Instant::now() < deadline, "the background partitions never ran");
        thread::sleep(Duration::from_millis(5));
    }
    let critical = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 300)]))
        .unwrap();
    for id in [critical, background] {
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    }
    let spans = engine.timeline().spans();
    let crit = format!("{critical}/0");
    let find = |phase: Phase| {
        spans
            .iter()
            .find(|s| s.name == phase && s.label == crit)
            .unwrap_or_else(|| panic!("no {phase:?} span of the critical partition"))
    };
    let (synthesized, started) = (find(Phase::Synthesis), find(Phase::Start));
    // Starts already under way when it was submitted take 20 ms at most.
    let window = (synthesized.start + Duration::from_millis(50))..started.start;
    let overtaking: Vec<_> = spans
        .iter()
        .filter(|s| s.name == Phase::Start && s.label != crit && window.contains(&s.start))
        .map(|s| (s.label.clone(), s.start))
        .collect();
    assert!(
        overtaking.is_empty(),
        "background partitions started while the critical one synthesized ({window:?}): {overtaking:?}"
    );
    assert!(started.start >= synthesized.start + Duration::from_millis(250));
    assert_idle(&engine, &pool, &acct, "critical hold");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Submits `n` background partitions and, once `k` of them are in
/// `phase`, a critical one; waits for both jobs. Returns the critical
/// partition's span of `phase` and every partition's.
fn critical_behind_background(
    engine: &Engine,
    c: &BenchCircuit,
    n: usize,
    phase: Phase,
    k: usize,
) -> (pinprove_engine::timeline::Span, Vec<pinprove_engine::timeline::Span>) {
    let background = engine
        .submit(spec(&c.id(), Priority::Normal, (0..n).map(|_| slow(c, 0)).collect()))
        .unwrap();
    wait_for_partitions_in(engine, phase, k, "the background partitions never got there");
    let critical = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(c, 0)]))
        .unwrap();
    for id in [critical, background] {
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    }
    let spans: Vec<_> = engine
        .timeline()
        .spans()
        .into_iter()
        .filter(|s| s.name == phase)
        .collect();
    let crit = spans
        .iter()
        .find(|s| s.label == format!("{critical}/0"))
        .cloned()
        .expect("the critical partition's span");
    (crit, spans)
}

#[test]
fn an_urgent_partition_finds_a_device_worker_while_all_others_are_busy() {
    // Slow starts keep both device workers busy with background partitions;
    // a critical partition does not wait for either: the device's urgent
    // worker starts it.
    let (dir, pool, acct, c, engine) = busy_device_engine("urgent-worker", Some(2), 600, 0);
    let (crit, starts) = critical_behind_background(&engine, &c, 4, Phase::Start, 2);
    assert!(crit.lane.ends_with("urgent-worker"), "{}", crit.lane);
    // It started while the first two background starts were still running.
    let first_end = starts
        .iter()
        .filter(|s| s.label != crit.label)
        .map(|s| s.start + s.duration)
        .min()
        .unwrap();
    assert!(crit.start < first_end, "{:?} vs {first_end:?}", crit.start);
    assert_idle(&engine, &pool, &acct, "urgent worker");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_urgent_partition_is_finished_by_its_own_finalizer_not_behind_background_ones() {
    // Slow finishes (a backend waiting for its device work): background
    // partitions queue for the finalizer. A critical partition started then
    // is finished at once by the urgent finalizer, not after all of them.
    let (dir, pool, acct, c, engine) = busy_device_engine("urgent-finalizer", Some(2), 0, 400);
    let (crit, finishes) = critical_behind_background(&engine, &c, 6, Phase::Finish, 1);
    assert!(crit.lane.ends_with("urgent-finalizer"), "{}", crit.lane);
    let last_background = finishes
        .iter()
        .filter(|s| s.label != crit.label)
        .map(|s| s.start)
        .max()
        .unwrap();
    assert!(
        crit.start < last_background,
        "the critical finish began at {:?}, after every background one (last at {last_background:?})",
        crit.start
    );
    assert_idle(&engine, &pool, &acct, "urgent finalizer");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn preloading_warms_the_pool_for_a_stream_of_the_circuit() {
    // After a preload, the pool holds (in the background, out of spare
    // budget) the buffers of as many partitions as run at once; a job of
    // that many partitions then pins nothing new.
    let dir = temp_dir("warm");
    let (pool, acct) = pool_with(1 << 30);
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    let engine = test_engine(
        &pool,
        EngineConfig {
            synthesis_workers: 3,
            ..EngineConfig::default()
        },
        0,
        0,
        0,
    );
    engine.register_srs(&c.id(), &params);
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    let s = engine.status();
    assert!(s.pool_warm > 0 && s.pool_warm_ready == s.pool_warm, "{s:?}");
    // Three partitions' a, b, c, inputs and aux.
    assert_eq!(pool.stats().idle_buffers, 15);
    let fresh = pool.stats().fresh_allocations;
    let id = engine
        .submit(spec(&c.id(), Priority::Normal, (0..3).map(|_| slow(&c, 50)).collect()))
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    assert_eq!(
        pool.stats().fresh_allocations,
        fresh,
        "every buffer came from the warm set"
    );
    // The idle timeout does not take a warm set.
    pool.trim_idle_older_than(Duration::ZERO);
    assert_eq!(pool.stats().idle_buffers, 15);
    assert_idle(&engine, &pool, &acct, "warm");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A job of `partitions` partitions of a 20,000-constraint circuit, each
/// `synthesis_ms` slower to synthesize and `device_ms` to prove, run to
/// completion in a budget of the parameters and `halves`/2 partitions'
/// working sets (measured first with room to spare; no warm set, so that
/// the pool grows only by the partitions' checkouts). Returns the pool,
/// once the engine has gone idle and never held more than the budget.
fn prove_in_tight_budget(
    name: &str,
    halves: u64,
    partitions: usize,
    synthesis_ms: u64,
    device_ms: u64,
) -> Arc<pinprove_mem::PinnedPool> {
    let dir = temp_dir(name);
    let c = BenchCircuit::new(20_000, WitnessMix::Random).unwrap();
    let params = synthetic_params(&c, &dir);
    let config = || EngineConfig {
        synthesis_workers: 4,
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let (ws, srs) = {
        let (pool, _) = pool_with(1 << 30);
        let engine = test_engine(&pool, config(), 5, 5, 0);
        engine.register_srs(&c.id(), &params);
        engine.preload_srs(&c.id()).unwrap();
        assert!(engine.wait_quiet(Duration::from_secs(30)));
        let srs: u64 = engine.status().srs.iter().map(|i| i.bytes).sum();
        (engine.working_set(&c.id()).unwrap(), srs)
    };
    let total = srs + ws * halves / 2;
    let (pool, acct) = pool_with(total);
    let engine = test_engine(&pool, config(), device_ms, device_ms, 0);
    engine.register_srs(&c.id(), &params);
    let id = engine
        .submit(spec(
            &c.id(),
            Priority::Normal,
            (0..partitions).map(|_| slow(&c, synthesis_ms)).collect(),
        ))
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    assert!(acct.max.load(Ordering::SeqCst) <= total);
    assert_idle(&engine, &pool, &acct, name);
    assert_eq!(engine.status().pool_handed_over, pool.stats().handed_over);
    std::fs::remove_dir_all(&dir).unwrap();
    pool
}

#[test]
fn a_stream_waiting_for_memory_is_handed_returned_buffers_instead_of_pinning_again() {
    // A budget for about two partitions beside the parameters, and a job of
    // eight: partitions wait for memory while others give their buffers
    // back. Those buffers go to the waiting partitions; freeing them for
    // their bytes would make each partition pin its five buffers afresh.
    let pool = prove_in_tight_budget("handover", 5, 8, 20, 5);
    let s = pool.stats();
    assert!(s.handed_over > 0, "no partition waited for memory: {s:?}");
    // Two partitions' five buffers, and a few where a partition fitted the
    // budget before a buffer it needed came back; 40 if every partition
    // pinned its own.
    assert!(s.fresh_allocations <= 16, "{s:?}");
}

/// A [`TestBackend`] that reports its scratch buffer in its hint, as the
/// native backend reports its preparation buffers.
struct LearnsScratch(TestBackend);

impl Backend for LearnsScratch {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn extra_working_set(
        &self,
        shape: &CapacityHint,
        queries: Option<&pinprove_groth16::QueryLengths>,
        urgent: bool,
    ) -> u64 {
        self.0.extra_working_set(shape, queries, urgent)
    }
    fn holds_srs(&self, srs: &Srs) -> bool {
        self.0.holds_srs(srs)
    }
    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        self.0.resident_srs()
    }
    fn hint(&self, _: &Srs) -> Option<BackendHint> {
        let bytes = self.0.pool.rounded_size(self.0.scratch).ok()? as u64;
        (self.0.scratch > 0).then(|| BackendHint {
            host_buffers: vec![bytes],
            preparation_bytes: bytes,
            device_pool_bytes: 0,
        })
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        self.0.start(job)
    }
}

/// A partition that synthesizes, then waits `after` before it is done.
struct SlowAfter {
    circuit: BenchCircuit,
    after: Duration,
}

impl pinprove_engine::Partition for SlowAfter {
    fn synthesize(
        self: Box<Self>,
        ctx: pinprove_engine::SynthesisContext<'_>,
    ) -> Result<(pinprove_groth16::ProvingAssignment, pinprove_groth16::SynthesisStats), ProveError> {
        let done = ctx.synthesize(self.circuit);
        thread::sleep(self.after);
        done
    }
}

#[test]
fn admission_sets_aside_for_urgent_work_the_buffers_a_backend_learned_to_take() {
    // The backend's `start` (on a device worker) takes a scratch buffer,
    // which it reports in its hint after the circuit's first proof. A later
    // urgent partition's admission sets an idle one aside for it, with the
    // buffers it synthesizes into: under pressure, a buffer not set aside
    // for anyone is freed, and the device worker would pin a new one.
    // Background partitions do not hold one from admission on (see
    // `admission_buffers`).
    let dir = temp_dir("scratch-earmark");
    let (pool, acct) = pool_with(1 << 30);
    let c = BenchCircuit::new(2000, WitnessMix::Random).unwrap();
    let params = synthetic_params(&c, &dir);
    let scratch = 3 << 20;
    let backend = LearnsScratch(TestBackend {
        scratch,
        ..TestBackend::instant(&pool)
    });
    let config = EngineConfig {
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let device = Device {
        name: "test0".into(),
        backend: Arc::new(backend),
    };
    let engine = Engine::new(config, vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), &params);
    let prove = |priority: Priority, after: u64| {
        let p = Box::new(SlowAfter {
            circuit: c.clone(),
            after: Duration::from_millis(after),
        });
        engine.submit(spec(&c.id(), priority, vec![p])).unwrap()
    };
    let first = prove(Priority::Normal, 0);
    assert!(matches!(engine.wait(first, None).unwrap(), JobOutcome::Completed(_)));
    assert_eq!(pool.stats().earmarked_bytes, 0);

    // Synthesized (its own buffers checked out), not yet started: what is
    // set aside for it is the scratch buffer, for an urgent partition only.
    for priority in [Priority::Critical, Priority::Normal] {
        let second = prove(priority, 500);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while pool.stats().checked_out_buffers < 5 {
            assert!(std::time::Instant::now() < deadline, "the partition never synthesized");
            thread::sleep(Duration::from_millis(5));
        }
        let s = pool.stats();
        if priority.is_urgent() {
            assert!(
                s.earmarked_bytes >= pool.rounded_size(scratch).unwrap() as u64,
                "the scratch buffer is not set aside: {s:?}"
            );
        } else {
            assert_eq!(s.earmarked_bytes, 0, "{s:?}");
        }
        assert!(matches!(engine.wait(second, None).unwrap(), JobOutcome::Completed(_)));
        assert_eq!(pool.stats().earmarked_bytes, 0);
    }
    assert_idle(&engine, &pool, &acct, "scratch earmark");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn partitions_of_a_type_not_yet_loaded_let_one_of_them_pay_for_the_load() {
    // Room for the parameters once and a partition and a half. Were every
    // partition to reserve the load, those queued behind the first would
    // keep asking for the parameters' bytes after it loaded them, and wait
    // until the idle parameters were evicted (minutes: the job would time
    // out), only to load them again.
    let pool = prove_in_tight_budget("load-claim", 3, 4, 0, 0);
    assert_eq!(
        pool.budget().stats().evicted_bytes,
        0,
        "the parameters were loaded once"
    );
}

#[test]
fn a_restarted_engine_warms_the_pool_for_the_circuits_its_hints_know() {
    // An engine proves a circuit (its capacity hint is persisted); a new
    // engine over the same hints directory, as after a restart, prepares
    // that circuit's buffers before any job, without a preload.
    let dir = temp_dir("warm-hinted");
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    let config = || EngineConfig {
        synthesis_workers: 3,
        hints_dir: Some(dir.join("hints")),
        ..EngineConfig::default()
    };
    {
        let (pool, _) = pool_with(1 << 30);
        let engine = test_engine(&pool, config(), 0, 0, 0);
        engine.register_srs(&c.id(), &params);
        assert!(engine.warm_hinted().is_empty(), "no hints yet");
        let id = engine
            .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
            .unwrap();
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    }
    let (pool, acct) = pool_with(1 << 30);
    let engine = test_engine(&pool, config(), 0, 0, 0);
    engine.register_srs(&c.id(), &params);
    assert_eq!(engine.warm_hinted(), vec![c.id()]);
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    let s = engine.status();
    assert!(s.pool_warm > 0 && s.pool_warm_ready == s.pool_warm, "{s:?}");
    assert_eq!(
        pool.stats().idle_buffers,
        15,
        "three partitions' a, b, c, inputs and aux"
    );
    assert!(engine.warm_hinted().is_empty(), "warmed once");
    let fresh = pool.stats().fresh_allocations;
    let id = engine
        .submit(spec(&c.id(), Priority::Normal, (0..3).map(|_| slow(&c, 0)).collect()))
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    assert_eq!(
        pool.stats().fresh_allocations,
        fresh,
        "every buffer came from the warm set"
    );
    assert_idle(&engine, &pool, &acct, "warm hinted");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shutting_down_ends_unfinished_jobs() {
    let dir = temp_dir("shutdown");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(500, WitnessMix::Bits).unwrap();
    let engine = test_engine(&pool, EngineConfig::default(), 200, 0, 0);
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    let id = engine
        .submit(spec(&c.id(), Priority::Normal, (0..3).map(|_| slow(&c, 100)).collect()))
        .unwrap();
    // The job's end is seen after the engine is gone.
    let end = engine.outcome(id).unwrap();
    thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    drop(engine);
    assert!(t.elapsed() < Duration::from_secs(5), "shutdown hung");
    let o = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(end);
    assert_eq!(o, JobOutcome::Failed("the engine shut down".into()));
    assert_eq!(pool.stats().checked_out_bytes, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn devices_that_hold_the_srs_are_preferred_until_they_are_busy() {
    let dir = temp_dir("prefer");
    let (pool, _) = pool_with(4 << 30);
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let path = synthetic_params(&shape, &dir);
    let backend = |holds_srs, start_ms| {
        Arc::new(TestBackend {
            pool: Arc::clone(&pool),
            start: Duration::from_millis(start_ms),
            finish: Duration::ZERO,
            scratch: 0,
            holds_srs,
        })
    };
    let run = |start_ms: u64, delay_ms: u64, synthesis_workers: usize| {
        let engine = Engine::new(
            EngineConfig {
                synthesis_workers,
                workers_per_device: Some(1),
                ..EngineConfig::default()
            },
            // The device without the SRS comes first: order must not decide.
            vec![
                Device {
                    name: "cold".into(),
                    backend: backend(false, start_ms),
                },
                Device {
                    name: "warm".into(),
                    backend: backend(true, start_ms),
                },
            ],
            Arc::clone(&pool),
        )
        .unwrap();
        engine.register_srs(&shape.id(), &path);
        let parts = (0..4).map(|_| slow(&shape, delay_ms)).collect();
        let id = engine.submit(spec(&shape.id(), Priority::Normal, parts)).unwrap();
        let JobOutcome::Completed(results) = engine.wait(id, Some(Duration::from_secs(60))).unwrap() else {
            panic!("the job did not complete");
        };
        // Status says which device keeps its own copy.
        let status = engine.status();
        assert!(status.devices[0].resident_srs.is_empty());
        assert_eq!(status.devices[1].resident_srs[0].place, "device");
        results.iter().map(|r| r.device).collect::<Vec<_>>()
    };
    // One partition at a time: the holder has a free worker each time.
    assert_eq!(run(1, 50, 1), vec![1; 4]);
    // Partitions pile up while the holder is busy: the other device helps.
    let spread = run(400, 0, 4);
    assert!(spread.contains(&0) && spread.contains(&1), "{spread:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn each_device_finishes_its_own_partitions_without_waiting_for_another() {
    let dir = temp_dir("own-finalizer");
    let (pool, _) = pool_with(4 << 30);
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let path = synthetic_params(&shape, &dir);
    // A device whose second step takes long (a GPU still busy with the
    // partitions queued on it), preferred while it has a free worker, and
    // one whose second step is quick: the first partitions go to the slow
    // one, and their second steps start before any of the quick one's.
    let backend = |finish_ms, holds_srs| {
        Arc::new(TestBackend {
            pool: Arc::clone(&pool),
            start: Duration::from_millis(20),
            finish: Duration::from_millis(finish_ms),
            scratch: 0,
            holds_srs,
        })
    };
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 4,
            workers_per_device: Some(2),
            ..EngineConfig::default()
        },
        vec![
            Device {
                name: "slow".into(),
                backend: backend(1500, true),
            },
            Device {
                name: "quick".into(),
                backend: backend(0, false),
            },
        ],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &path);
    let parts = (0..8).map(|_| slow(&shape, 0)).collect();
    let id = engine.submit(spec(&shape.id(), Priority::Normal, parts)).unwrap();
    let JobOutcome::Completed(results) = engine.wait(id, Some(Duration::from_secs(60))).unwrap() else {
        panic!("the job did not complete");
    };
    let on = |d: usize| results.iter().filter(|r| r.device == d).collect::<Vec<_>>();
    let (slow_parts, quick_parts) = (on(0), on(1));
    assert!(!slow_parts.is_empty() && !quick_parts.is_empty(), "both devices proved");
    // The quick device's partitions never waited for a finalizer busy with
    // the slow device's.
    for r in &quick_parts {
        assert!(
            r.timings.finish_wait < Duration::from_millis(700),
            "partition {} on the quick device waited {:?} for its second step",
            r.index,
            r.timings.finish_wait
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend that has learned something of its proofs (see
/// `Backend::hint`) and notes what it is given back.
struct Hinting {
    inner: TestBackend,
    learned: BackendHint,
    applied: std::sync::Mutex<Vec<BackendHint>>,
}

impl Backend for Hinting {
    fn name(&self) -> &'static str {
        "hinting"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn hint(&self, _: &Srs) -> Option<BackendHint> {
        Some(self.learned.clone())
    }
    fn apply_hint(&self, _: &Srs, hint: &BackendHint) {
        self.applied.lock().unwrap().push(hint.clone());
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        self.inner.start(job)
    }
}

#[test]
fn what_a_backend_learned_is_given_back_to_it_when_a_restarted_engine_loads_the_srs() {
    let dir = temp_dir("backend-hints");
    let (pool, _) = pool_with(1 << 30);
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let path = synthetic_params(&shape, &dir);
    let learned = BackendHint {
        host_buffers: vec![4096, 8192],
        preparation_bytes: 12288,
        device_pool_bytes: 1 << 30,
    };
    let engine = |learned: BackendHint| {
        let backend = Arc::new(Hinting {
            inner: TestBackend::instant(&pool),
            learned,
            applied: Default::default(),
        });
        let e = Engine::new(
            EngineConfig {
                hints_dir: Some(dir.join("hints")),
                ..EngineConfig::default()
            },
            vec![Device {
                name: "dev".into(),
                backend: Arc::clone(&backend) as Arc<dyn Backend>,
            }],
            Arc::clone(&pool),
        )
        .unwrap();
        e.register_srs(&shape.id(), &path);
        (e, backend)
    };
    let (first, backend) = engine(learned.clone());
    first.preload_srs(&shape.id()).unwrap();
    assert!(backend.applied.lock().unwrap().is_empty(), "nothing learned yet");
    let id = first
        .submit(spec(&shape.id(), Priority::Normal, vec![slow(&shape, 0)]))
        .unwrap();
    assert!(matches!(first.wait(id, None).unwrap(), JobOutcome::Completed(_)));
    assert_eq!(
        first.hints().backend_hint(&shape.id(), "hinting"),
        Some(learned.clone())
    );
    drop(first);

    // A new process: the hint comes back from the file when the SRS loads.
    let (again, backend) = engine(BackendHint::default());
    again.preload_srs(&shape.id()).unwrap();
    assert_eq!(*backend.applied.lock().unwrap(), vec![learned]);
    drop(again);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend that prepares on the host ahead of `start` (see
/// `Backend::prepare`): it notes the thread each preparation ran on and
/// what `start` found prepared; with `fail`, preparing fails.
struct PreparesAhead {
    inner: TestBackend,
    fail: bool,
    prepared_on: std::sync::Mutex<Vec<String>>,
    found_in_start: std::sync::Mutex<Vec<Option<String>>>,
}

impl Backend for PreparesAhead {
    fn name(&self) -> &'static str {
        "prepares-ahead"
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn prepare(&self, _: &Srs, asg: &mut pinprove_groth16::ProvingAssignment, _: bool) -> Result<(), ProveError> {
        if self.fail {
            return Err(ProveError::Backend {
                backend: "prepares-ahead",
                message: "cannot prepare".into(),
            });
        }
        let thread = thread::current().name().unwrap_or("?").to_string();
        self.prepared_on.lock().unwrap().push(thread.clone());
        asg.set_prepared(Box::new(thread));
        Ok(())
    }
    fn start(&self, mut job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        for asg in &mut job.assignments {
            let found = asg
                .take_prepared()
                .and_then(|p| p.downcast::<String>().ok())
                .map(|s| *s);
            self.found_in_start.lock().unwrap().push(found);
        }
        self.inner.start(job)
    }
}

#[test]
fn a_backend_prepares_each_partition_on_the_thread_that_synthesized_it_not_on_a_device_worker() {
    let dir = temp_dir("prepare-ahead");
    let (pool, _) = pool_with(1 << 30);
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let path = synthetic_params(&shape, &dir);
    let engine = |fail: bool| {
        let backend = Arc::new(PreparesAhead {
            inner: TestBackend::instant(&pool),
            fail,
            prepared_on: Default::default(),
            found_in_start: Default::default(),
        });
        let e = Engine::new(
            EngineConfig::default(),
            vec![Device {
                name: "dev".into(),
                backend: Arc::clone(&backend) as Arc<dyn Backend>,
            }],
            Arc::clone(&pool),
        )
        .unwrap();
        e.register_srs(&shape.id(), &path);
        (e, backend)
    };

    let (e, backend) = engine(false);
    let id = e
        .submit(spec(
            &shape.id(),
            Priority::Normal,
            (0..3).map(|i| slow(&shape, i)).collect(),
        ))
        .unwrap();
    assert!(matches!(e.wait(id, None).unwrap(), JobOutcome::Completed(_)));
    let on = backend.prepared_on.lock().unwrap().clone();
    assert_eq!(on.len(), 3, "one preparation per partition: {on:?}");
    assert!(on.iter().all(|t| t.starts_with("synth-")), "prepared on {on:?}");
    let found = backend.found_in_start.lock().unwrap().clone();
    assert_eq!(found.len(), 3);
    assert!(
        found
            .iter()
            .all(|f| f.as_deref().is_some_and(|t| t.starts_with("synth-"))),
        "start found {found:?}"
    );
    drop(e);

    // A preparation that fails fails its job, with the backend's reason.
    let (e, backend) = engine(true);
    let id = e
        .submit(spec(&shape.id(), Priority::Normal, vec![slow(&shape, 0)]))
        .unwrap();
    match e.wait(id, None).unwrap() {
        JobOutcome::Failed(why) => assert!(why.contains("cannot prepare"), "{why}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(backend.found_in_start.lock().unwrap().is_empty(), "never started");
    drop(e);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A span's name and its parent's name.
type SpanSeen = (String, Option<String>);

/// Records each new span's name and its parent's name.
struct SpanRecorder(Arc<std::sync::Mutex<Vec<SpanSeen>>>);

impl<S> tracing_subscriber::Layer<S> for SpanRecorder
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.name().to_string());
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_string(), parent));
    }
}

#[test]
fn every_phase_of_a_partition_is_a_tracing_span() {
    use tracing_subscriber::layer::SubscriberExt;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    // Worker threads log too, so the subscriber must be global; this is
    // the only test that installs one.
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(SpanRecorder(Arc::clone(&seen))))
        .unwrap();
    let dir = temp_dir("spans");
    let (pool, _) = pool_with(1 << 30);
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let path = synthetic_params(&shape, &dir);
    let engine = test_engine(&pool, EngineConfig::default(), 1, 1, 0);
    engine.register_srs(&shape.id(), &path);
    let id = engine
        .submit(spec(
            &shape.id(),
            Priority::High,
            vec![slow(&shape, 1), slow(&shape, 1)],
        ))
        .unwrap();
    assert!(matches!(
        engine.wait(id, Some(Duration::from_secs(30))).unwrap(),
        JobOutcome::Completed(_)
    ));
    drop(engine);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.iter().filter(|(n, _)| n == "partition").count(), 2);
    for phase in [
        "queue_wait",
        "admission",
        "synthesis",
        "handoff_wait",
        "start",
        "finish_wait",
        "finish",
    ] {
        let under_partition = seen
            .iter()
            .filter(|(n, p)| n == phase && p.as_deref() == Some("partition"))
            .count();
        assert_eq!(under_partition, 2, "phase {phase}: {seen:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A device that is lost at its first proof: `start` takes `start`, then
/// fails with [`DeviceFault::Lost`], as every call after it does. It does
/// not say so through `Backend::lost`: the engine must learn it from the
/// error.
struct Dying {
    start: Duration,
    starts: AtomicU64,
}

impl Backend for Dying {
    fn name(&self) -> &'static str {
        "dying"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            workers_per_device: 1,
            abc_layout: AbcLayout::Exact,
            uses_device: true,
            needs_srs_points: false,
            evaluates_recordings: false,
        }
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        check_job(&job)?;
        self.starts.fetch_add(1, Ordering::SeqCst);
        thread::sleep(self.start);
        Err(ProveError::Device {
            backend: "dying",
            fault: DeviceFault::Lost,
            message: "an illegal memory access".into(),
        })
    }
}

#[test]
fn a_lost_device_gets_no_more_work_and_the_others_carry_on() {
    let dir = temp_dir("lost");
    let (pool, _) = pool_with(4 << 30);
    let shape = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
    let path = synthetic_params(&shape, &dir);
    let dying = Arc::new(Dying {
        start: Duration::from_millis(500),
        starts: AtomicU64::new(0),
    });
    let good = Arc::new(TestBackend {
        pool: Arc::clone(&pool),
        start: Duration::from_millis(100),
        finish: Duration::ZERO,
        scratch: 0,
        holds_srs: true,
    });
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            workers_per_device: Some(1),
            ..EngineConfig::default()
        },
        vec![
            Device {
                name: "gpu0".into(),
                backend: Arc::clone(&dying) as Arc<dyn Backend>,
            },
            Device {
                name: "gpu1".into(),
                backend: good,
            },
        ],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &path);
    // The first partition goes to gpu0 (both idle, it comes first) and dies
    // with it; meanwhile the next job's partitions are spread over both
    // busy devices, so some wait in gpu0's queue when it is lost.
    let first = engine
        .submit(spec(&shape.id(), Priority::Normal, vec![slow(&shape, 0)]))
        .unwrap();
    thread::sleep(Duration::from_millis(100));
    let parts = (0..6).map(|_| slow(&shape, 0)).collect();
    let second = engine.submit(spec(&shape.id(), Priority::Normal, parts)).unwrap();
    match engine.wait(first, Some(Duration::from_secs(60))).unwrap() {
        JobOutcome::Failed(why) => assert!(why.contains("device lost") && why.contains("gpu0"), "{why}"),
        other => panic!("the first job: {other:?}"),
    }
    let JobOutcome::Completed(results) = engine.wait(second, Some(Duration::from_secs(60))).unwrap() else {
        panic!("the second job did not complete");
    };
    assert!(results.iter().all(|r| r.device == 1), "all on gpu1");
    assert_eq!(dying.starts.load(Ordering::SeqCst), 1, "nothing more went to gpu0");
    assert!(
        engine.metrics().partitions_rerouted() >= 1,
        "partitions waiting for gpu0 moved to gpu1"
    );
    let status = engine.status();
    let lost = status.devices[0].lost.as_deref().expect("gpu0 is reported lost");
    assert!(lost.contains("illegal memory access"), "{lost}");
    assert!(status.devices[1].lost.is_none());
    let text = engine.metrics_text();
    assert!(text.contains("pinprove_device_lost{device=\"gpu0\"} 1"), "{text}");
    assert!(text.contains("pinprove_device_lost{device=\"gpu1\"} 0"), "{text}");
    drop(engine);

    // With its only device lost, an engine refuses new jobs at once.
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 1,
            ..EngineConfig::default()
        },
        vec![Device {
            name: "gpu0".into(),
            backend: Arc::new(Dying {
                start: Duration::ZERO,
                starts: AtomicU64::new(0),
            }),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &path);
    let id = engine
        .submit(spec(&shape.id(), Priority::Normal, vec![slow(&shape, 0)]))
        .unwrap();
    assert!(matches!(
        engine.wait(id, Some(Duration::from_secs(60))).unwrap(),
        JobOutcome::Failed(_)
    ));
    let err = engine
        .submit(spec(&shape.id(), Priority::Normal, vec![slow(&shape, 0)]))
        .unwrap_err();
    assert!(
        matches!(err, EngineError::DevicesLost(ref why) if why.contains("gpu0")),
        "{err}"
    );
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Background work holding all the memory it may, and a request for more
/// waiting behind it: the pool under pressure.
struct Pressure {
    hog: pinprove_mem::Reservation,
    wanted: u64,
    waiting: thread::JoinHandle<Result<u64, pinprove_mem::Error>>,
}

impl Pressure {
    fn on(budget: &Arc<pinprove_mem::MemoryBudget>) -> Pressure {
        let limit = budget.limit_for(Priority::Normal.rank());
        let hog = budget.try_acquire(limit - budget.used()).unwrap();
        // More than eviction can free: it waits until the hog is gone.
        let wanted = limit / 2;
        let waiting = {
            let budget = Arc::clone(budget);
            thread::spawn(move || budget.acquire_blocking(wanted).map(|r| r.bytes()))
        };
        while !budget.has_waiters() {
            thread::sleep(Duration::from_millis(2));
        }
        Pressure { hog, wanted, waiting }
    }

    /// Ends it: the waiting request gets its memory.
    fn end(self) {
        drop(self.hog);
        assert_eq!(self.waiting.join().unwrap().unwrap(), self.wanted);
    }
}

#[test]
fn a_circuit_kept_ready_also_keeps_the_buffers_its_backend_learned_to_take() {
    // As below, with a backend whose `start` takes a scratch buffer it
    // reports after the first proof: from then on the kept set holds that
    // buffer too, so an urgent proof does not pin it afresh under pressure.
    let dir = temp_dir("kept-scratch");
    let (pool, acct) = pool_with(1 << 30);
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let backend = LearnsScratch(TestBackend {
        scratch: 3 << 20,
        ..TestBackend::instant(&pool)
    });
    let device = Device {
        name: "test0".into(),
        backend: Arc::new(backend),
    };
    let engine = Engine::new(EngineConfig::default(), vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    engine.keep_ready(&c.id(), 1).unwrap();
    engine.preload_srs(&c.id()).unwrap();
    let prove = || {
        let id = engine
            .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]))
            .unwrap();
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    };
    // The first proof, from which the backend learns.
    prove();
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    let pressure = Pressure::on(pool.budget());
    let before = pool.stats().fresh_allocations;
    for _ in 0..2 {
        prove();
        assert!(pool.budget().has_waiters(), "the pressure lasted");
    }
    let s = pool.stats();
    assert_eq!(
        s.fresh_allocations, before,
        "the kept circuit found every buffer: {s:?}"
    );
    pressure.end();
    assert_idle(&engine, &pool, &acct, "kept scratch");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend whose preparation share is the worst case until its first
/// proof, and nothing once it was learned (as the native backend's); its
/// hint changes with every proof.
struct LearnsShare {
    inner: TestBackend,
    proofs: AtomicU64,
}

impl Backend for LearnsShare {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&pinprove_groth16::QueryLengths>, _: bool) -> u64 {
        if self.proofs.load(Ordering::Acquire) > 0 {
            0
        } else {
            256 << 20
        }
    }
    fn holds_srs(&self, srs: &Srs) -> bool {
        self.inner.holds_srs(srs)
    }
    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        self.inner.resident_srs()
    }
    fn hint(&self, _: &Srs) -> Option<BackendHint> {
        let proofs = self.proofs.load(Ordering::Acquire);
        (proofs > 0).then(|| BackendHint {
            host_buffers: Vec::new(),
            preparation_bytes: proofs,
            device_pool_bytes: 0,
        })
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        let started = self.inner.start(job);
        self.proofs.fetch_add(1, Ordering::AcqRel);
        started
    }
}

/// A backend that adds `extra` host bytes to urgent partitions only (as
/// the native backend does once the buffers its background proofs prepare
/// into are kept).
struct UrgentExtra {
    inner: TestBackend,
    extra: u64,
}

impl Backend for UrgentExtra {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&pinprove_groth16::QueryLengths>, urgent: bool) -> u64 {
        if urgent { self.extra } else { 0 }
    }
    fn holds_srs(&self, srs: &Srs) -> bool {
        self.inner.holds_srs(srs)
    }
    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        self.inner.resident_srs()
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        self.inner.start(job)
    }
}

#[test]
fn a_partition_is_admitted_with_what_its_backend_adds_at_its_urgency() {
    let dir = temp_dir("urgent-extra");
    let (pool, _) = pool_with(64 << 20);
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let device = Device {
        name: "test0".into(),
        backend: Arc::new(UrgentExtra {
            inner: TestBackend::instant(&pool),
            extra: 1 << 30,
        }),
    };
    let engine = Engine::new(EngineConfig::default(), vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    assert!(engine.working_set(&c.id()).unwrap() < 64 << 20);
    let id = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    let err = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]))
        .unwrap_err();
    assert!(matches!(err, EngineError::TooLarge { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_warm_set_grows_when_a_proof_shows_that_more_partitions_fit() {
    // Before its first proof the backend's share is the worst case, and
    // the budget admits 3 partitions at once; once learned, all 8 workers'.
    // The warm set follows, so a stream after the first proof does not pin
    // the buffers of the partitions it runs beyond the first 3.
    let dir = temp_dir("warm-regrows");
    let (pool, acct) = pool_with(1 << 30);
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let device = Device {
        name: "test0".into(),
        backend: Arc::new(LearnsShare {
            inner: TestBackend::instant(&pool),
            proofs: AtomicU64::new(0),
        }),
    };
    let config = EngineConfig {
        synthesis_workers: 8,
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    let before = pool.stats().warm_bytes;
    assert!(before > 0);
    let prove = || {
        let id = engine
            .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
            .unwrap();
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
        assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    };
    prove();
    let after = pool.stats();
    // (A partition's buffers are also a little smaller once its synthesis
    // told its exact shape.)
    assert!(
        after.warm_bytes > 2 * before,
        "warmed for 3 partitions ({before} bytes), then for 8: {after:?}"
    );
    assert_eq!(after.warm_ready_bytes, after.warm_bytes);
    // Later hints change too, but no more partitions fit: the warm set is
    // not made again (on the H200 one made again under pressure was freed
    // again). Freed here, it holds only what the next proof pinned.
    pool.clear_idle();
    prove();
    let s = pool.stats();
    assert!(
        s.warm_ready_bytes < s.warm_bytes / 2,
        "the warm set was made again: {s:?}"
    );
    assert_idle(&engine, &pool, &acct, "warm set regrown");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend whose first proof has the pool keep a set of `set` bytes for
/// its device lanes, and which adds `share` to a background partition until
/// the pool holds that set (as the native backend does with its
/// preparation buffers). Its hint never changes.
struct KeepsLaneSet {
    inner: TestBackend,
    set: usize,
    share: u64,
}

impl Backend for KeepsLaneSet {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&pinprove_groth16::QueryLengths>, urgent: bool) -> u64 {
        if !urgent && self.inner.pool.holds_warm_set("lanes") {
            0
        } else {
            self.share
        }
    }
    fn holds_srs(&self, srs: &Srs) -> bool {
        self.inner.holds_srs(srs)
    }
    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        self.inner.resident_srs()
    }
    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        self.inner.pool.keep_for_lanes("lanes", &[self.set]).unwrap();
        self.inner.start(job)
    }
}

#[test]
fn a_warm_set_is_made_again_for_the_partitions_that_fit_beside_lane_sets_once_held() {
    // Room for 8.5 partitions beside the parameters. Before the first
    // proof each partition also counts a share of one partition's bytes:
    // 4 fit. The proof has the pool keep a lane set of about 2 partitions'
    // bytes, after which the share is not counted; no hint changes. The
    // warm set is made again for those that fit beside the lane set (more
    // if it counted the lane set's bytes as its own; still 4 if nothing
    // made it again).
    let dir = temp_dir("warm-beside-lanes");
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let params = synthetic_params(&c, &dir);
    // The hints persist the partition's exact shape, so that its buffers
    // are the same before the proof and after.
    let config = || EngineConfig {
        synthesis_workers: 16,
        priority_reserve: Some(0),
        hints_dir: Some(dir.join("hints")),
        ..EngineConfig::default()
    };
    let (ws, srs) = {
        let (pool, _) = pool_with(1 << 30);
        let engine = test_engine(&pool, config(), 0, 0, 0);
        engine.register_srs(&c.id(), &params);
        let id = engine
            .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
            .unwrap();
        let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
        let srs: u64 = engine.status().srs.iter().map(|i| i.bytes).sum();
        (engine.working_set(&c.id()).unwrap(), srs)
    };
    let total = srs + ws * 17 / 2;
    let (pool, acct) = pool_with(total);
    let set = pool.rounded_size(2 * ws as usize).unwrap();
    assert!((set as u64) < ws * 5 / 2, "a pool class of {set} bytes for {ws}");
    let device = Device {
        name: "test0".into(),
        backend: Arc::new(KeepsLaneSet {
            inner: TestBackend::instant(&pool),
            set,
            share: ws,
        }),
    };
    let engine = Engine::new(config(), vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), &params);
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    let per_partition = pool.stats().warm_bytes / 4;
    assert_eq!(pool.stats().warm_bytes, 4 * per_partition, "warmed for 4 partitions");
    let id = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
        .unwrap();
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    assert!(pool.holds_warm_set("lanes"));
    let s = pool.stats();
    assert_eq!(s.kept_bytes, set as u64);
    assert_eq!(engine.status().pool_kept, set as u64);
    // (The test backend's share of 64 KiB is gone too.)
    let ws = engine.working_set(&c.id()).unwrap();
    let fit = (total - srs - set as u64) / ws;
    assert!(fit > 4 && fit < (total - srs) / ws, "{fit} partitions of {ws} bytes");
    assert_eq!(
        s.warm_bytes - s.kept_bytes,
        fit * per_partition,
        "warmed for {fit} partitions: {s:?}"
    );
    assert_idle(&engine, &pool, &acct, "warm beside lanes");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_circuit_kept_ready_keeps_its_buffers_while_background_work_waits_for_memory() {
    // Background work holds all the memory it may and more waits for it:
    // the pool then frees what comes back and gives idle buffers up to the
    // waiting. A circuit kept ready (a WinningPoSt's) keeps its buffers
    // through that, so its proofs pin nothing; another circuit's proofs pin
    // afresh each time.
    let dir = temp_dir("kept");
    let (pool, acct) = pool_with(1 << 30);
    let kept = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    // Of other sizes (but for the smallest buffers, which both share).
    let other = BenchCircuit::new(20_000, WitnessMix::Bits).unwrap();
    let engine = test_engine(&pool, EngineConfig::default(), 0, 0, 0);
    for c in [&kept, &other] {
        engine.register_srs(&c.id(), synthetic_params(c, &dir));
    }
    engine.keep_ready(&kept.id(), 1).unwrap();
    for c in [&kept, &other] {
        engine.preload_srs(&c.id()).unwrap();
    }
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    let pressure = Pressure::on(pool.budget());
    let budget = Arc::clone(pool.budget());
    let fresh_pins = |c: &BenchCircuit| {
        let before = pool.stats().fresh_allocations;
        for _ in 0..2 {
            let id = engine
                .submit(spec(&c.id(), Priority::Critical, vec![slow(c, 0)]))
                .unwrap();
            let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
            assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
            assert!(budget.has_waiters(), "the pressure lasted");
        }
        pool.stats().fresh_allocations - before
    };
    assert_eq!(fresh_pins(&kept), 0, "the kept circuit found its buffers both times");
    let other_pins = fresh_pins(&other);
    assert!(
        other_pins >= 2 * 3,
        "the other pinned a, b and c each time: {other_pins} fresh pins"
    );
    pressure.end();
    assert_idle(&engine, &pool, &acct, "kept");
    std::fs::remove_dir_all(&dir).unwrap();
}
