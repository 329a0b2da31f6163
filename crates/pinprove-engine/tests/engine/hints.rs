//! Capacity and backend hints: learned, persisted, checked, given back.

use super::*;

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
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
                id: DeviceId::Gpu(0),
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
