//! Devices: urgent partitions past background ones, the choice of device,
//! work prepared off the device workers, a device lost.

use std::sync::Mutex;

use super::*;

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
        wait_completed(&engine, id);
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
        wait_completed(&engine, id);
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
        wait_completed(engine, id);
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
            gpu: None,
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
                    id: DeviceId::Gpu(0),
                    backend: backend(false, start_ms),
                },
                Device {
                    id: DeviceId::Gpu(1),
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
            gpu: None,
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
                id: DeviceId::Gpu(0),
                backend: backend(1500, true),
            },
            Device {
                id: DeviceId::Gpu(1),
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
    fn start(&self, mut job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
                id: DeviceId::Gpu(0),
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
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
        gpu: None,
    });
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 2,
            workers_per_device: Some(1),
            ..EngineConfig::default()
        },
        vec![
            Device {
                id: DeviceId::Gpu(0),
                backend: Arc::clone(&dying) as Arc<dyn Backend>,
            },
            Device {
                id: DeviceId::Gpu(1),
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
            id: DeviceId::Gpu(0),
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

/// Readings of GPU 7 only; every GPU asked for is noted.
#[derive(Debug, Default)]
struct FakeTelemetry {
    asked: Mutex<Vec<usize>>,
}

const GPU7: GpuReading = GpuReading {
    utilization_percent: 42.0,
    memory_used_bytes: 3 << 30,
    memory_total_bytes: 80 << 30,
    pcie_rx_bytes_per_s: 25e9,
    pcie_tx_bytes_per_s: 1e9,
};

impl GpuTelemetry for FakeTelemetry {
    fn read(&self, gpu: usize) -> Option<GpuReading> {
        self.asked.lock().unwrap().push(gpu);
        (gpu == 7).then_some(GPU7)
    }
}

#[test]
fn gpu_readings_reach_status_and_the_timeline_for_devices_with_a_gpu() {
    let (pool, _) = pool_with(1 << 30);
    let on = |gpu| {
        Arc::new(TestBackend {
            gpu,
            ..TestBackend::instant(&pool)
        })
    };
    let telemetry = Arc::new(FakeTelemetry::default());
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 1,
            gpu_telemetry: Some(Arc::clone(&telemetry) as Arc<dyn GpuTelemetry>),
            ..EngineConfig::default()
        },
        vec![
            Device {
                id: DeviceId::Gpu(7),
                backend: on(Some(7)),
            },
            Device {
                id: DeviceId::Gpu(3),
                backend: on(Some(3)),
            },
            Device {
                id: DeviceId::Cpu,
                backend: on(None),
            },
        ],
        Arc::clone(&pool),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.status().devices[0].gpu.is_none() {
        assert!(Instant::now() < deadline, "no reading of GPU 7 arrived");
        thread::sleep(Duration::from_millis(20));
    }
    let status = engine.status();
    assert_eq!(status.devices[0].gpu, Some(GPU7));
    // A GPU that cannot be read, and a device without one, have none.
    assert_eq!((status.devices[1].gpu, status.devices[2].gpu), (None, None));
    let asked = telemetry.asked.lock().unwrap().clone();
    assert!(
        asked.contains(&3) && asked.iter().all(|g| [3, 7].contains(g)),
        "{asked:?}"
    );
    // The GPU metrics the Grafana dashboard queries are exported.
    let text = engine.metrics_text();
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana-dashboard.json"
    ))
    .unwrap();
    let queried: Vec<&str> = dashboard
        .match_indices("pinprove_gpu_")
        .filter_map(|(i, _)| {
            dashboard[i..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
        })
        .collect();
    assert!(queried.len() >= 3, "{queried:?}");
    for name in queried {
        assert!(
            text.contains(&format!("# TYPE {name} gauge")),
            "the dashboard queries {name}: {text}"
        );
    }
    assert!(
        text.contains("pinprove_gpu_utilization_percent{device=\"gpu7\"} 42"),
        "{text}"
    );
    let samples = engine.timeline().samples();
    let value = |name: &str| samples.iter().find(|s| s.name == name).map(|s| s.value);
    assert_eq!(value("gpu7 util %"), Some(42.0));
    assert_eq!(value("gpu7 PCIe RX GB/s"), Some(25.0));
    assert!(
        samples.iter().all(|s| s.name.starts_with("gpu7")),
        "only GPU 7 was read"
    );
    // Without telemetry nothing is read.
    let quiet = Engine::new(
        EngineConfig::default(),
        vec![Device {
            id: DeviceId::Gpu(7),
            backend: on(Some(7)),
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_eq!(quiet.status().devices[0].gpu, None);
}

/// The CPU backend taking up to two background partitions of a circuit
/// per `start` (as a GPU streaming its bases does); each start is slowed
/// so that partitions pile up behind it. Records each start's partitions
/// and urgency.
struct TakesTwo {
    cpu: CpuBackend,
    start: Duration,
    starts: Mutex<Vec<(usize, bool)>>,
}

impl Backend for TakesTwo {
    fn name(&self) -> &'static str {
        "takes-two"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            workers_per_device: 1,
            ..self.cpu.capabilities()
        }
    }
    fn partitions_per_start(&self, _: &Srs) -> usize {
        2
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        self.starts.lock().unwrap().push((job.assignments.len(), job.urgent));
        thread::sleep(self.start);
        self.cpu.start(job)
    }
}

#[test]
fn background_partitions_started_together_each_get_their_own_verifying_proof() {
    let dir = temp_dir("takes-two");
    let (pool, acct) = pool_with(2 << 30);
    let shape = BenchCircuit::new(600, WitnessMix::Bits).unwrap();
    let (path, vk) = real_params(&shape, &dir);
    let backend = Arc::new(TakesTwo {
        cpu: CpuBackend::new(Arc::clone(&pool)),
        start: Duration::from_millis(150),
        starts: Mutex::new(Vec::new()),
    });
    let engine = Engine::new(
        EngineConfig {
            synthesis_workers: 3,
            ..EngineConfig::default()
        },
        vec![Device {
            id: DeviceId::Gpu(0),
            backend: Arc::clone(&backend) as Arc<dyn Backend>,
        }],
        Arc::clone(&pool),
    )
    .unwrap();
    engine.register_srs(&shape.id(), &path);
    let seed = |j: u64, p: u64| 100 * j + p;
    let submit = |j: u64, priority: Priority, partitions: u64| {
        let parts = (0..partitions)
            .map(|p| {
                let c = shape.clone().with_seed(seed(j, p));
                let inputs = c.public_inputs();
                circuit_partition_with_inputs(c, inputs)
            })
            .collect();
        engine.submit(spec(&shape.id(), priority, parts)).unwrap()
    };
    let jobs = [
        (submit(0, Priority::Normal, 5), 5),
        (submit(1, Priority::Normal, 4), 4),
        (submit(2, Priority::Critical, 1), 1),
    ];
    let pvk = bellperson::groth16::prepare_verifying_key(&vk);
    for (j, (id, n)) in jobs.into_iter().enumerate() {
        let JobOutcome::Completed(results) = engine.wait(id, Some(Duration::from_secs(120))).unwrap() else {
            panic!("job {j} did not complete");
        };
        assert_eq!(results.len(), n);
        for (p, r) in results.iter().enumerate() {
            assert_eq!(r.index, p);
            let inputs = shape.clone().with_seed(seed(j as u64, p as u64)).public_inputs();
            let proof = bellperson::groth16::Proof::<Bls12>::read(&r.proof.to_bytes()[..]).unwrap();
            assert!(
                bellperson::groth16::verify_proof(&pvk, &proof, &inputs).unwrap(),
                "job {j} partition {p}"
            );
        }
    }
    let starts = backend.starts.lock().unwrap().clone();
    assert_eq!(starts.iter().map(|s| s.0).sum::<usize>(), 10, "{starts:?}");
    assert!(
        starts.iter().all(|&(n, urgent)| n <= 2 && (!urgent || n == 1)),
        "{starts:?}"
    );
    assert!(
        starts.iter().any(|&(n, _)| n == 2),
        "background partitions waiting together were started together: {starts:?}"
    );
    assert!(engine.wait_quiet(Duration::from_secs(10)));
    let text = engine.metrics_text();
    assert!(text.contains("pinprove_proofs_completed_total 10"), "{text}");
    assert!(engine.evict_srs(&shape.id()).is_some());
    assert_idle(&engine, &pool, &acct, "after partitions started together");
    drop(engine);
    std::fs::remove_dir_all(&dir).unwrap();
}
