//! Parameter loads and the admissions around them: loads whose time is set
//! on a clock moved by hand (a 40 s load without waiting 40 s), an SRS
//! evicted between an admission and its load, preloads, and loads of
//! different kinds at once.

use pinprove_engine::clock::ManualClock;

use super::*;

/// A test backend whose parameter loads take `load` on `clock`: it moves
/// the clock while the load runs, as a 40 s read from disk would.
struct LoadsIn(TestBackend, Arc<ManualClock>, Duration);

impl Backend for LoadsIn {
    delegate_identity!(0);
    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        self.1.advance(self.2);
        self.0.prepare_srs(srs)
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        self.0.start(job)
    }
}

/// An engine over `pool` proving on a [`LoadsIn`] backend of `load`, its
/// durations read from `clock`.
fn engine_loading_in(
    pool: &Arc<pinprove_mem::PinnedPool>,
    config: EngineConfig,
    clock: &Arc<ManualClock>,
    load: Duration,
) -> Engine {
    let backend = LoadsIn(TestBackend::instant(pool), Arc::clone(clock), load);
    Engine::new(
        EngineConfig {
            clock: Arc::clone(clock) as _,
            ..config
        },
        vec![Device {
            id: DeviceId::Cpu,
            backend: Arc::new(backend),
        }],
        Arc::clone(pool),
    )
    .unwrap()
}

/// Two kinds whose parameters do not fit together: right after an urgent
/// burst of one (a WindowPoSt deadline), a partition of the other is
/// admitted once the burst's parameters give way, though they have been
/// idle for no time and took 40 s to load. Nothing else runs, so nothing
/// else will ever free memory: keeping them for a burst that may come
/// again would leave the device idle, and on bcf8eca the partition was
/// refused ("can never be granted") two seconds after the burst.
#[test]
fn a_partition_after_a_burst_is_admitted_though_the_bursts_parameters_are_fresh() {
    let dir = temp_dir("after-burst");
    let stream = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let burst = BenchCircuit::new(40_001, WitnessMix::Random).unwrap();
    let ps = synthetic_params(&stream, &dir);
    let pb = synthetic_params(&burst, &dir);
    let config = || EngineConfig {
        synthesis_workers: 1,
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let (ws, srs) = working_set_and_srs(&stream, &ps, config());
    // One kind's parameters and two partitions, never both kinds'.
    let (pool, acct) = pool_with(srs + 2 * ws + srs / 4);
    let clock = Arc::new(ManualClock::new());
    let engine = engine_loading_in(&pool, config(), &clock, Duration::from_secs(40));
    engine.register_srs(&stream.id(), &ps);
    engine.register_srs(&burst.id(), &pb);
    submit_and_complete(&engine, spec(&burst.id(), Priority::High, vec![slow(&burst, 0)]));
    let t = Instant::now();
    let job = engine
        .submit(spec(&stream.id(), Priority::Normal, vec![slow(&stream, 0)]))
        .unwrap();
    let outcome = engine.wait(job, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
    assert!(t.elapsed() < Duration::from_secs(30), "admitted in {:?}", t.elapsed());
    let loaded = |id: &str| engine.status().srs.iter().any(|s| s.circuit_id == id && s.loaded);
    assert!(loaded(&stream.id()) && !loaded(&burst.id()));
    assert_idle(&engine, &pool, &acct, "after a burst");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A partition admitted without its parameters' load (they were
/// resident), which finds them evicted before it could take them, is
/// admitted again with the load, and waits as any admission does: shown
/// waiting for admission, and refused with the numbers when nothing in
/// flight will free the memory. On bcf8eca it was left in `srs_load`,
/// which told every admission that something was still running, and
/// waited forever.
#[test]
fn a_partition_whose_parameters_went_before_its_load_is_admitted_again_and_never_waits_forever() {
    let dir = temp_dir("needs-funds");
    let c = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let params = synthetic_params(&c, &dir);
    let config = || EngineConfig {
        synthesis_workers: 2,
        warm_partitions: Some(0),
        ..EngineConfig::default()
    };
    let (ws, srs) = working_set_and_srs(&c, &params, config());
    assert!(srs > ws + ws / 2, "the test needs parameters larger than a partition");
    // The parameters and one partition, not two.
    let (pool, _) = pool_with(srs + ws + ws / 2);
    let budget = Arc::clone(pool.budget());
    let engine = test_engine(&pool, config(), 0, 0, 0);
    engine.register_srs(&c.id(), &params);
    engine.preload_srs(&c.id()).unwrap();
    let job = engine
        .submit(spec(&c.id(), Priority::Normal, vec![slow(&c, 1500), slow(&c, 0)]))
        .unwrap();
    wait_for_partitions_in(&engine, Phase::Synthesis, 1, "the first partition never synthesized");
    wait_for_partitions_in(&engine, Phase::Admission, 1, "the second never waited for admission");
    // It says why: memory the first holds.
    let waiting = engine
        .status()
        .partitions
        .into_iter()
        .find(|p| p.phase == Phase::Admission)
        .unwrap();
    assert!(
        matches!(
            waiting.waiting_for,
            Some(pinprove_engine::planner::WaitReason::Memory { .. })
        ),
        "{waiting:?}"
    );
    // The parameters go: the second partition is granted what it asked
    // for, which does not cover their load.
    assert!(engine.evict_srs(&c.id()).is_some());
    // Memory nothing in the engine will give back, taken before any
    // admission: the second partition and the load never fit again.
    let outside = budget.acquire_urgent_blocking(ws).unwrap();
    let outcome = match engine.wait(job, Some(Duration::from_secs(30))) {
        Ok(o) => o,
        Err(e) => panic!("{e}: {:?}", engine.status().partitions),
    };
    let JobOutcome::Failed(why) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(why.contains("nothing in flight will free memory"), "{why}");
    drop(outside);
    submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A preload of parameters larger than the whole budget is refused at
/// once with the numbers, and loads of other kinds go on. On bcf8eca it
/// loaded section by section without funds under the one lock of every
/// load, and waited forever for memory the budget would never have: every
/// later load waited behind it.
#[test]
fn a_preload_larger_than_the_budget_is_refused_at_once_and_other_loads_go_on() {
    let dir = temp_dir("preload-too-large");
    let big = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let small = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let pbig = synthetic_params(&big, &dir);
    // The CPU backend decodes the points into the pool: the budget holds
    // each section of the big set, not all of them.
    let file = std::fs::metadata(&pbig).unwrap().len();
    let (pool, _) = pool_with(file * 2 / 3);
    let engine = Engine::new(
        EngineConfig::default(),
        vec![Device {
            id: DeviceId::Cpu,
            backend: Arc::new(CpuBackend::new(Arc::clone(&pool))),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&big.id(), &pbig);
    engine.register_srs(&small.id(), synthetic_params(&small, &dir));
    let engine = Arc::new(engine);
    let preload = {
        let e = Arc::clone(&engine);
        let id = big.id();
        thread::spawn(move || e.preload_srs(&id))
    };
    let t = Instant::now();
    while !preload.is_finished() {
        assert!(t.elapsed() < Duration::from_secs(20), "the preload still waits");
        thread::sleep(Duration::from_millis(10));
    }
    let err = preload.join().unwrap().unwrap_err();
    assert!(matches!(err, EngineError::ParamsTooLarge { .. }), "{err}");
    assert!(err.to_string().contains(&big.id()), "{err}");
    assert_eq!(pool.stats().checked_out_bytes, 0);
    submit_and_complete(&engine, spec(&small.id(), Priority::High, vec![slow(&small, 0)]));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A test backend whose parameter loads take `delay` (really) for the
/// circuits whose L query has one of `slow_l` lengths.
struct SlowLoads(TestBackend, Vec<usize>, Duration);

impl Backend for SlowLoads {
    delegate_identity!(0);
    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        if self.1.contains(&srs.lengths().l) {
            thread::sleep(self.2);
        }
        self.0.prepare_srs(srs)
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        self.0.start(job)
    }
}

/// While a stream's large parameters load (slowly), an urgent job of
/// another kind loads its own and proves: loads of different kinds do not
/// wait for one another where the budget holds both. On bcf8eca every
/// load took one lock in turn, and a WindowPoSt's waited behind a 45 GiB
/// PoRep load.
#[test]
fn an_urgent_load_does_not_wait_behind_a_streams_load() {
    let dir = temp_dir("parallel-loads");
    let stream = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let urgent = BenchCircuit::new(3000, WitnessMix::Bits).unwrap();
    let (pool, acct) = pool_with(1 << 30);
    let l_of = |c: &BenchCircuit, path: &std::path::Path| {
        Srs::read_file_header(path)
            .map(|h| h.lengths().l)
            .unwrap_or_else(|e| panic!("{}: {e}", c.id()))
    };
    let ps = synthetic_params(&stream, &dir);
    let slow_load = Duration::from_secs(3);
    let backend = SlowLoads(TestBackend::instant(&pool), vec![l_of(&stream, &ps)], slow_load);
    let engine = Engine::new(
        EngineConfig::default(),
        vec![Device {
            id: DeviceId::Cpu,
            backend: Arc::new(backend),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&stream.id(), &ps);
    engine.register_srs(&urgent.id(), synthetic_params(&urgent, &dir));
    let t = Instant::now();
    let sealing = engine
        .submit(spec(&stream.id(), Priority::Normal, vec![slow(&stream, 0)]))
        .unwrap();
    wait_for_partitions_in(&engine, Phase::SrsLoad, 1, "the stream's load never started");
    let post = engine
        .submit(spec(&urgent.id(), Priority::High, vec![slow(&urgent, 0)]))
        .unwrap();
    wait_completed(&engine, post);
    assert!(
        t.elapsed() < slow_load,
        "the urgent job waited for the stream's load: done after {:?}",
        t.elapsed()
    );
    wait_completed(&engine, sealing);
    assert_idle(&engine, &pool, &acct, "parallel loads");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Under the planner's rules (`EngineConfig::planner`), a burst's
/// parameters stay for its window after its last job came, even while a
/// partition of another kind waits with nothing else in flight: it waits,
/// is not refused, and is admitted once the window ends. The engine's own
/// rules give them way at once (the test above).
#[test]
fn under_the_planner_a_bursts_parameters_stay_for_its_window_and_the_stream_waits_not_refused() {
    let dir = temp_dir("burst-window");
    let stream = BenchCircuit::new(40_000, WitnessMix::Random).unwrap();
    let burst = BenchCircuit::new(40_001, WitnessMix::Random).unwrap();
    let ps = synthetic_params(&stream, &dir);
    let pb = synthetic_params(&burst, &dir);
    let config = || EngineConfig {
        synthesis_workers: 1,
        warm_partitions: Some(0),
        planner: Some(pinprove_engine::planner::Policy::planned()),
        ..EngineConfig::default()
    };
    let (ws, srs) = working_set_and_srs(&stream, &ps, config());
    let (pool, acct) = pool_with(srs + 2 * ws + srs / 4);
    let clock = Arc::new(ManualClock::new());
    let engine = engine_loading_in(&pool, config(), &clock, Duration::from_secs(40));
    engine.register_srs(&stream.id(), &ps);
    engine.register_srs(&burst.id(), &pb);
    submit_and_complete(&engine, spec(&burst.id(), Priority::High, vec![slow(&burst, 0)]));
    let job = engine
        .submit(spec(&stream.id(), Priority::Normal, vec![slow(&stream, 0)]))
        .unwrap();
    // Longer than an admission with nothing in flight waits before it is
    // refused (two checks a second apart).
    assert!(matches!(
        engine.wait(job, Some(Duration::from_millis(3500))),
        Err(EngineError::Timeout)
    ));
    let status = engine.status();
    assert_eq!(status.partitions[0].phase, Phase::Admission);
    // The status says why: the burst's parameters, until its window ends.
    assert_eq!(
        status.partitions[0].waiting_for,
        Some(pinprove_engine::planner::WaitReason::Burst {
            kind: burst.id(),
            until: Duration::from_secs(60)
        }),
        "{status:?}"
    );
    // The window (60 s from the burst's job) ends.
    clock.advance(Duration::from_secs(61));
    wait_completed(&engine, job);
    // The timeline names it on the wait's span.
    let spans = engine.timeline().spans();
    assert!(
        spans
            .iter()
            .any(|s| s.name == Phase::Admission && s.label.ends_with("(waited for burst)")),
        "{spans:?}"
    );
    let loaded = |id: &str| engine.status().srs.iter().any(|s| s.circuit_id == id && s.loaded);
    assert!(loaded(&stream.id()) && !loaded(&burst.id()));
    assert_idle(&engine, &pool, &acct, "burst window");
    std::fs::remove_dir_all(&dir).unwrap();
}
