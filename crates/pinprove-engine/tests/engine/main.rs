//! The engine with the CPU backend and with a test backend whose timings and
//! allocations are controlled: jobs, priorities, the budget, cancellation,
//! timelines and spans here; admission and memory, devices, warm and kept
//! sets, and hints in their modules.

#[path = "../common/mod.rs"]
mod common;
mod devices;
mod faults;
mod hints;
mod loads;
mod memory;
mod outcome;
mod precompiled;
mod warm;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use blstrs::Bls12;
use pinprove_engine::telemetry::GpuTelemetry;
use pinprove_engine::{
    Device, DeviceId, Engine, EngineConfig, EngineError, GpuReading, JobId, JobOutcome, Phase, Priority,
    circuit_partition_with_inputs, holding_heap,
};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::{
    AbcLayout, Backend, BackendHint, Capabilities, CapacityHint, CapacityHints, CpuBackend, DeviceFault, ProofBatch,
    ProveError, Srs, StartedProof, check_job,
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
            id: DeviceId::Cpu,
            backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &path);
    // Before any load, the key comes from the parameters' header.
    let same_key = |k: &pinprove_groth16::VerifyingKey| {
        (
            k.alpha_g1, k.beta_g1, k.beta_g2, k.gamma_g2, k.delta_g1, k.delta_g2, &k.ic,
        ) == (
            vk.alpha_g1,
            vk.beta_g1,
            vk.beta_g2,
            vk.gamma_g2,
            vk.delta_g1,
            vk.delta_g2,
            &vk.ic,
        )
    };
    assert!(same_key(&engine.verifying_key(&shape.id()).unwrap()));
    assert!(matches!(
        engine.verifying_key("no-such-circuit"),
        Err(EngineError::UnknownCircuit(_))
    ));
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
    // Proofs are verified after their SRS may have gone: the key stays.
    assert!(engine.evict_srs(&shape.id()).is_some());
    assert!(same_key(&engine.verifying_key(&shape.id()).unwrap()));
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

/// A partition that notes the thread it is synthesized on.
struct NotesThread(BenchCircuit, Arc<std::sync::Mutex<Vec<String>>>);

impl pinprove_engine::Partition for NotesThread {
    fn synthesize(
        self: Box<Self>,
        ctx: pinprove_engine::SynthesisContext<'_>,
    ) -> Result<(pinprove_groth16::ProvingAssignment, pinprove_groth16::SynthesisStats), ProveError> {
        let name = thread::current().name().unwrap_or_default().to_string();
        self.1.lock().unwrap().push(name);
        ctx.synthesize(self.0)
    }
}

/// An urgent partition's synthesis runs on threads of its own, not on the
/// global threads a stream's witness computations keep busy; the others
/// stay where they were.
#[test]
fn urgent_partitions_synthesize_on_threads_of_their_own() {
    let dir = temp_dir("urgent-threads");
    let (pool, _) = pool_with(1 << 30);
    let c = BenchCircuit::new(300, WitnessMix::Random).unwrap();
    let path = synthetic_params(&c, &dir);
    let engine = test_engine(&pool, EngineConfig::default(), 0, 0, 0);
    engine.register_srs(&c.id(), &path);
    let mut threads = Vec::new();
    for priority in [Priority::Normal, Priority::High, Priority::Critical] {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let job = engine
            .submit(spec(
                &c.id(),
                priority,
                vec![Box::new(NotesThread(c.clone(), Arc::clone(&seen)))],
            ))
            .unwrap();
        wait_completed(&engine, job);
        threads.push(seen.lock().unwrap().clone());
    }
    let urgent = |names: &Vec<String>| names.len() == 1 && names[0].starts_with("urgent-synth-");
    assert!(!urgent(&threads[0]), "{threads:?}");
    assert!(urgent(&threads[1]) && urgent(&threads[2]), "{threads:?}");
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
    for phase in ["synthesis", "start", "finish", "admission", "srs_load", "thread_name"] {
        assert!(names.contains(&phase), "{phase} missing");
    }
    assert!(engine.timeline().svg().contains("cpu-worker-0"));
    let m = engine.metrics_text();
    for line in [
        "pinprove_budget_total_bytes",
        "pinprove_pool_idle_bytes",
        "pinprove_pool_fresh_allocations_total",
        "pinprove_pool_alloc_seconds_total",
        "pinprove_pool_handed_over_total",
        "pinprove_device_busy_fraction{device=\"cpu\"}",
    ] {
        assert!(m.contains(line), "{line} missing:\n{m}");
    }
    // The run allocated pool buffers (the pool started empty).
    assert!(engine.status().pool_fresh_allocations > 0);
    assert!(engine.status().devices[0].busy_fraction > 0.0);
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
