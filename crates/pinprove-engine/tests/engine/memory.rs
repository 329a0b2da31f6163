//! Admission and memory: what a partition is admitted with, jobs that
//! cannot fit, parameters loaded and evicted, buffers handed over.

use super::*;

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
    let ws = engine.working_set(&c.id(), 0).unwrap();
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
    submit_and_complete(
        &engine,
        spec(&c.id(), Priority::Normal, vec![holding_heap(slow(&c, 100), heap)]),
    );
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
/// loads only once the first is unreferenced and was idle as long as its
/// load took, not the hour of the idle timeout (a stream waiting that long
/// for a PoSt's idle parameters would starve).
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
            srs_idle_timeout: Duration::from_secs(3600),
            ..EngineConfig::default()
        },
        vec![Device {
            id: DeviceId::Cpu,
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
    let a_load = engine
        .status()
        .srs
        .iter()
        .find(|s| s.circuit_id == a.id())
        .unwrap()
        .load_time;
    let jb = engine
        .submit(spec(&b.id(), Priority::Normal, vec![slow(&b, 0)]))
        .unwrap();
    assert!(matches!(
        engine.wait(jb, Some(Duration::from_secs(60))).unwrap(),
        JobOutcome::Completed(_)
    ));
    assert!(
        done_a.elapsed() >= a_load,
        "A was evicted before it was idle as long as its load took ({a_load:?})"
    );
    assert!(!loaded(&engine, &a.id()) && loaded(&engine, &b.id()));
    // An explicit eviction frees the points at once.
    let before = pool.stats().allocated_bytes;
    assert!(engine.evict_srs(&b.id()).unwrap() > 0);
    assert!(pool.stats().allocated_bytes < before);
    assert_eq!(engine.evict_srs(&b.id()), None);
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
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
            id: DeviceId::Gpu(0),
            backend: Arc::new(HoldsOnDevice(test(), !also_host)) as Arc<dyn Backend>,
        }];
        if also_host {
            devices.push(Device {
                id: DeviceId::Cpu,
                backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
            });
        }
        let engine = Engine::new(EngineConfig::default(), devices, Arc::clone(&pool)).unwrap();
        engine.register_srs(&c.id(), &params);
        submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
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
        (e.working_set(&c.id(), 0).unwrap(), srs)
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
    wait_completed(&engine, critical);
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
) -> (Arc<pinprove_mem::PinnedPool>, u64) {
    let dir = temp_dir(name);
    let c = BenchCircuit::new(20_000, WitnessMix::Random).unwrap();
    let params = synthetic_params(&c, &dir);
    let config = || EngineConfig {
        synthesis_workers: 4,
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let (ws, srs) = working_set_and_srs(&c, &params, config());
    let total = srs + ws * halves / 2;
    let (pool, acct) = pool_with(total);
    let engine = test_engine(&pool, config(), device_ms, device_ms, 0);
    engine.register_srs(&c.id(), &params);
    submit_and_complete(
        &engine,
        spec(
            &c.id(),
            Priority::Normal,
            (0..partitions).map(|_| slow(&c, synthesis_ms)).collect(),
        ),
    );
    assert!(acct.max.load(Ordering::SeqCst) <= total);
    assert_idle(&engine, &pool, &acct, name);
    assert_eq!(engine.status().pool_handed_over, pool.stats().handed_over);
    let loads = engine.status().srs.iter().map(|s| s.loads).sum();
    std::fs::remove_dir_all(&dir).unwrap();
    (pool, loads)
}

#[test]
fn a_stream_waiting_for_memory_is_handed_returned_buffers_instead_of_pinning_again() {
    // A budget for about two partitions beside the parameters, and a job of
    // eight: partitions wait for memory while others give their buffers
    // back. Those buffers go to the waiting partitions; freeing them for
    // their bytes would make each partition pin its five buffers afresh.
    let (pool, _) = prove_in_tight_budget("handover", 5, 8, 20, 5);
    let s = pool.stats();
    assert!(s.handed_over > 0, "no partition waited for memory: {s:?}");
    // Two partitions' five buffers, and a few where a partition fitted the
    // budget before a buffer it needed came back; 40 if every partition
    // pinned its own.
    assert!(s.fresh_allocations <= 16, "{s:?}");
}

/// A [`TestBackend`] that reports its scratch buffer in its hint, as the
/// native backend reports its preparation buffers.
pub(super) struct LearnsScratch(pub(super) TestBackend);

impl Backend for LearnsScratch {
    delegate_identity!(0);
    fn extra_working_set(
        &self,
        shape: &CapacityHint,
        queries: Option<&pinprove_groth16::QueryLengths>,
        urgent: bool,
    ) -> u64 {
        self.0.extra_working_set(shape, queries, urgent)
    }
    fn hint(&self, _: &Srs) -> Option<BackendHint> {
        let bytes = self.0.pool.rounded_size(self.0.scratch).ok()? as u64;
        (self.0.scratch > 0).then(|| BackendHint {
            host_buffers: vec![bytes],
            preparation_bytes: bytes,
            device_pool_bytes: 0,
        })
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
        id: DeviceId::Cpu,
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
    // (Idle pool buffers may be freed for a waiting partition meanwhile:
    // what is counted is the parameters' loads.)
    let (_, loads) = prove_in_tight_budget("load-claim", 3, 4, 0, 0);
    assert_eq!(loads, 1, "the parameters were loaded once");
}

#[test]
fn a_job_waiting_for_memory_keeps_its_parameters_however_long_they_were_idle() {
    // Parameters loaded ahead and idle past their timeout (as a 32 GiB
    // WindowPoSt's were while its circuit was recorded), then a job whose
    // first admission finds the budget short. Were the parameters not kept
    // for the job, that admission would evict them and the partition would
    // load them again, 60 GiB at 32 GiB: on a 95 GiB budget it stalled.
    let dir = temp_dir("wanted");
    let c = BenchCircuit::new(20_000, WitnessMix::Random).unwrap();
    let params = synthetic_params(&c, &dir);
    let config = || EngineConfig {
        synthesis_workers: 2,
        warm_partitions: Some(0),
        srs_idle_timeout: Duration::ZERO,
        ..EngineConfig::default()
    };
    let (ws, srs) = working_set_and_srs(&c, &params, config());
    let total = srs + ws + ws / 2;
    let (pool, acct) = pool_with(total);
    let engine = test_engine(&pool, config(), 5, 5, 0);
    engine.register_srs(&c.id(), &params);
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)));
    // Other memory takes all but half a partition's room for a while.
    let other = pool.budget().try_acquire(ws).unwrap();
    let job = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0), slow(&c, 0)]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        engine.status().srs.iter().any(|s| s.circuit_id == c.id() && s.loaded),
        "the job's parameters were evicted for its own admission"
    );
    drop(other);
    assert!(matches!(
        engine.wait(job, Some(Duration::from_secs(60))).unwrap(),
        JobOutcome::Completed(_)
    ));
    assert_eq!(
        pool.budget().stats().evicted_bytes,
        0,
        "the parameters were loaded once"
    );
    assert_idle(&engine, &pool, &acct, "wanted");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backend that adds `extra` host bytes to urgent partitions only (as
/// the native backend does once the buffers its background proofs prepare
/// into are kept).
struct UrgentExtra {
    inner: TestBackend,
    extra: u64,
}

impl Backend for UrgentExtra {
    delegate_identity!(inner);
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&pinprove_groth16::QueryLengths>, urgent: bool) -> u64 {
        if urgent { self.extra } else { 0 }
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        self.inner.start(job)
    }
}

#[test]
fn a_partition_is_admitted_with_what_its_backend_adds_at_its_urgency() {
    let dir = temp_dir("urgent-extra");
    let (pool, _) = pool_with(64 << 20);
    let c = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let device = Device {
        id: DeviceId::Cpu,
        backend: Arc::new(UrgentExtra {
            inner: TestBackend::instant(&pool),
            extra: 1 << 30,
        }),
    };
    let engine = Engine::new(EngineConfig::default(), vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    assert!(engine.working_set(&c.id(), 0).unwrap() < 64 << 20);
    submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
    let err = engine
        .submit(spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]))
        .unwrap_err();
    assert!(matches!(err, EngineError::TooLarge { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An admission that waits while nothing the engine runs holds memory
/// that will come back fails its job with the numbers, instead of waiting
/// forever (a WindowPoSt stream waited 200 s and more on a 16 GB card,
/// beside kept sets nothing would free; that they give way first is the
/// pool's test), and the engine serves on.
#[test]
fn an_admission_nothing_in_flight_will_free_memory_for_fails_its_job_with_the_numbers() {
    let dir = temp_dir("stuck");
    let (pool, acct) = pool_with(1 << 30);
    let c = BenchCircuit::new(20_000, WitnessMix::Bits).unwrap();
    let config = EngineConfig {
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let engine = test_engine(&pool, config, 0, 0, 0);
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    engine.preload_srs(&c.id()).unwrap();
    submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
    assert!(engine.wait_quiet(Duration::from_secs(30)));
    pool.clear_idle();
    let budget = Arc::clone(pool.budget());
    let ws = engine.working_set(&c.id(), 0).unwrap();
    // Memory outside the engine (nothing it runs will give it back) leaves
    // half the partition's working set.
    let outside = budget
        .try_acquire(budget.limit_for(Priority::Normal.rank()) - budget.used() - ws / 2)
        .unwrap();
    let t = Instant::now();
    let job = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]))
        .unwrap();
    let outcome = engine.wait(job, Some(Duration::from_secs(60))).unwrap();
    let JobOutcome::Failed(why) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(why.contains("nothing in flight will free memory"), "{why}");
    assert!(why.contains(&budget.total().to_string()), "{why}");
    assert!(t.elapsed() < Duration::from_secs(30), "refused in {:?}", t.elapsed());
    drop(outside);
    // The engine serves on.
    submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
    assert_idle(&engine, &pool, &acct, "stuck admission");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A host too small for two kinds' parameters at once: an urgent burst of
/// another kind (a WindowPoSt deadline) displaces the background stream's
/// parameters between two of its partitions, and once the burst is done
/// the stream loads them again and goes on, each kind's parameters read
/// once per switch (a day on 8171b47's figures proved no PoRep after the
/// first WindowPoSt took the memory).
#[test]
fn an_urgent_burst_displaces_a_streams_parameters_and_the_stream_gets_them_back() {
    let dir = temp_dir("displace");
    let stream = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let burst = BenchCircuit::new(40_001, WitnessMix::Random).unwrap();
    let ps = synthetic_params(&stream, &dir);
    let pb = synthetic_params(&burst, &dir);
    let config = || EngineConfig {
        synthesis_workers: 1,
        warm_partitions: Some(0),
        srs_idle_timeout: Duration::from_secs(3600),
        ..EngineConfig::default()
    };
    let (ws, srs) = working_set_and_srs(&stream, &ps, config());
    // One kind's parameters and two partitions, never both kinds'.
    let (pool, acct) = pool_with(srs + 2 * ws + srs / 4);
    let engine = test_engine(&pool, config(), 20, 20, 0);
    engine.register_srs(&stream.id(), &ps);
    engine.register_srs(&burst.id(), &pb);
    let sealing: Vec<_> = (0..3)
        .map(|_| {
            engine
                .submit(spec(
                    &stream.id(),
                    Priority::Normal,
                    vec![slow(&stream, 30), slow(&stream, 30)],
                ))
                .unwrap()
        })
        .collect();
    // The deadline opens while the stream proves.
    std::thread::sleep(Duration::from_millis(100));
    let posts: Vec<_> = (0..2)
        .map(|_| {
            engine
                .submit(spec(&burst.id(), Priority::High, vec![slow(&burst, 0)]))
                .unwrap()
        })
        .collect();
    for (what, jobs) in [("the burst", &posts), ("the stream", &sealing)] {
        for &j in jobs.iter() {
            assert!(
                matches!(
                    engine.wait(j, Some(Duration::from_secs(120))).unwrap(),
                    JobOutcome::Completed(_)
                ),
                "{what}: job {j} did not complete"
            );
        }
    }
    let loads = |id: &str| engine.status().srs.iter().find(|s| s.circuit_id == id).unwrap().loads;
    assert_eq!(loads(&burst.id()), 1, "the burst's parameters were read once");
    // Displaced (the burst did not wait for the whole stream) and read
    // again once after it.
    assert_eq!(
        loads(&stream.id()),
        2,
        "the stream's parameters: read before the burst and once after"
    );
    assert_idle(&engine, &pool, &acct, "displace");
    std::fs::remove_dir_all(&dir).unwrap();
}
