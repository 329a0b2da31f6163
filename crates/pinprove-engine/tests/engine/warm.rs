//! Warm and kept sets: the pool prepared for a circuit before its
//! partitions ask, and kept for urgent ones under pressure.

use super::memory::LearnsScratch;
use super::*;

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
    submit_and_complete(
        &engine,
        spec(&c.id(), Priority::Normal, (0..3).map(|_| slow(&c, 50)).collect()),
    );
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
        submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
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
    submit_and_complete(
        &engine,
        spec(&c.id(), Priority::Normal, (0..3).map(|_| slow(&c, 0)).collect()),
    );
    assert_eq!(
        pool.stats().fresh_allocations,
        fresh,
        "every buffer came from the warm set"
    );
    assert_idle(&engine, &pool, &acct, "warm hinted");
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
        id: DeviceId::Cpu,
        backend: Arc::new(backend),
    };
    let engine = Engine::new(EngineConfig::default(), vec![device], Arc::clone(&pool)).unwrap();
    engine.register_srs(&c.id(), synthetic_params(&c, &dir));
    engine.keep_ready(&c.id(), 1).unwrap();
    engine.preload_srs(&c.id()).unwrap();
    let prove = || {
        submit_and_complete(&engine, spec(&c.id(), Priority::Critical, vec![slow(&c, 0)]));
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
    delegate_identity!(inner);
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&pinprove_groth16::QueryLengths>, _: bool) -> u64 {
        if self.proofs.load(Ordering::Acquire) > 0 {
            0
        } else {
            256 << 20
        }
    }
    fn hint(&self, _: &Srs) -> Option<BackendHint> {
        let proofs = self.proofs.load(Ordering::Acquire);
        (proofs > 0).then(|| BackendHint {
            host_buffers: Vec::new(),
            preparation_bytes: proofs,
            device_pool_bytes: 0,
        })
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        let started = self.inner.start(job);
        self.proofs.fetch_add(1, Ordering::AcqRel);
        started
    }
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
        id: DeviceId::Cpu,
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
        submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
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
    delegate_identity!(inner);
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&pinprove_groth16::QueryLengths>, urgent: bool) -> u64 {
        if !urgent && self.inner.pool.holds_warm_set("lanes") {
            0
        } else {
            self.share
        }
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
        submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
        let srs: u64 = engine.status().srs.iter().map(|i| i.bytes).sum();
        (engine.working_set(&c.id(), 0).unwrap(), srs)
    };
    let total = srs + ws * 17 / 2;
    let (pool, acct) = pool_with(total);
    let set = pool.rounded_size(2 * ws as usize).unwrap();
    assert!((set as u64) < ws * 5 / 2, "a pool class of {set} bytes for {ws}");
    let device = Device {
        id: DeviceId::Cpu,
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
    submit_and_complete(&engine, spec(&c.id(), Priority::Normal, vec![slow(&c, 0)]));
    assert!(engine.wait_quiet(Duration::from_secs(30)), "the warm-up ended");
    assert!(pool.holds_warm_set("lanes"));
    let s = pool.stats();
    assert_eq!(s.kept_bytes, set as u64);
    assert_eq!(engine.status().pool_kept, set as u64);
    // (The test backend's share of 64 KiB is gone too.)
    let ws = engine.working_set(&c.id(), 0).unwrap();
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
            submit_and_complete(&engine, spec(&c.id(), Priority::Critical, vec![slow(c, 0)]));
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
