//! Helpers shared by the engine's integration tests: an independent
//! accountant of the pool's memory, parameters, a test backend whose
//! timings and scratch memory are controlled, slow partitions.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use blstrs::{Bls12, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use pinprove_engine::{
    Device, DeviceId, Engine, EngineConfig, JobId, JobOutcome, JobSpec, Partition, Phase, Priority, SynthesisContext,
};
use pinprove_groth16::circuits::BenchCircuit;
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::synthetic::write_synthetic_params;
use pinprove_groth16::{
    AbcLayout, Backend, Capabilities, CapacityHint, CapacityHints, Proof, ProofBatch, ProveError, ProvingAssignment,
    QueryLengths, ResidentSrs, Srs, StartedProof, SynthesisStats, check_job, synthesize,
};
use pinprove_mem::{HeapAllocator, HostAllocator, MemoryBudget, MemoryKind, PinnedPool, PoolBuffer, PoolConfig};

/// The [`Backend`] methods a test backend wrapping another (in its field
/// `$inner`) takes from it unchanged: name, capabilities, SRS residency.
#[allow(unused_macros)]
macro_rules! delegate_identity {
    ($inner:tt) => {
        fn name(&self) -> &'static str {
            self.$inner.name()
        }
        fn capabilities(&self) -> pinprove_groth16::Capabilities {
            self.$inner.capabilities()
        }
        fn holds_srs(&self, srs: &pinprove_groth16::Srs) -> bool {
            self.$inner.holds_srs(srs)
        }
        fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
            self.$inner.resident_srs()
        }
    };
}
#[allow(unused_imports)]
pub(crate) use delegate_identity;

/// An allocator that keeps its own count of live bytes: the independent
/// accountant the budget is checked against.
#[derive(Debug)]
pub struct Accountant {
    pub heap: HeapAllocator,
    pub live: AtomicU64,
    pub max: AtomicU64,
}

// SAFETY: forwards to the heap allocator, which upholds the contract.
unsafe impl HostAllocator for Accountant {
    fn kind(&self) -> MemoryKind {
        MemoryKind::Heap
    }
    fn allocate(&self, len: usize) -> pinprove_mem::Result<NonNull<u8>> {
        let p = self.heap.allocate(len)?;
        let now = self.live.fetch_add(len as u64, Ordering::SeqCst) + len as u64;
        self.max.fetch_max(now, Ordering::SeqCst);
        Ok(p)
    }
    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        self.live.fetch_sub(len as u64, Ordering::SeqCst);
        // SAFETY: forwarded from our caller's promise.
        unsafe { self.heap.deallocate(ptr, len) }
    }
}

pub fn pool_with(total: u64) -> (Arc<PinnedPool>, Arc<Accountant>) {
    let acct = Arc::new(Accountant {
        heap: HeapAllocator::new(false),
        live: AtomicU64::new(0),
        max: AtomicU64::new(0),
    });
    let pool = PinnedPool::new(
        Arc::clone(&acct) as Arc<dyn HostAllocator>,
        MemoryBudget::new(total),
        PoolConfig {
            idle_timeout: None,
            ..PoolConfig::default()
        },
    );
    (pool, acct)
}

pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-engine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Synthetic parameters for `c` (valid points of the right shape).
pub fn synthetic_params(c: &BenchCircuit, dir: &Path) -> PathBuf {
    let pool = PinnedPool::new(
        Arc::new(HeapAllocator::new(false)),
        MemoryBudget::new(1 << 30),
        PoolConfig::default(),
    );
    let (asg, _) = synthesize(
        c.clone(),
        &c.id(),
        &pool,
        &CapacityHints::in_memory(),
        AbcLayout::Exact,
        None,
    )
    .unwrap();
    let path = dir.join(format!("{}.params", c.id()));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    write_synthetic_params(&CircuitShape::of(&asg), &mut f).unwrap();
    f.flush().unwrap();
    path
}

/// Real parameters for `c`, and bellperson's verifying key.
pub fn real_params(c: &BenchCircuit, dir: &Path) -> (PathBuf, bellperson::groth16::VerifyingKey<Bls12>) {
    use rand_chacha::rand_core::SeedableRng;
    let p = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(
        c.clone(),
        &mut rand_chacha::ChaCha8Rng::seed_from_u64(5),
    )
    .unwrap();
    let path = dir.join(format!("{}.params", c.id()));
    let mut bytes = Vec::new();
    p.write(&mut bytes).unwrap();
    std::fs::write(&path, bytes).unwrap();
    (path, p.vk)
}

/// A backend that proves nothing: it checks the job, holds `scratch` bytes
/// of pool memory between its two steps, and sleeps as told.
pub struct TestBackend {
    pub pool: Arc<PinnedPool>,
    pub start: Duration,
    pub finish: Duration,
    pub scratch: usize,
    pub holds_srs: bool,
    /// The GPU it says it proves on (none: a CPU-like device).
    pub gpu: Option<usize>,
}

impl TestBackend {
    /// One that takes no time and no scratch memory, holding every SRS.
    pub fn instant(pool: &Arc<PinnedPool>) -> Self {
        TestBackend {
            pool: Arc::clone(pool),
            start: Duration::ZERO,
            finish: Duration::ZERO,
            scratch: 0,
            holds_srs: true,
            gpu: None,
        }
    }
}

pub struct TestStarted {
    _scratch: Option<PoolBuffer>,
    finish: Duration,
    n: usize,
}

impl Backend for TestBackend {
    fn name(&self) -> &'static str {
        "test"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            workers_per_device: 2,
            abc_layout: AbcLayout::Exact,
            uses_device: false,
            needs_srs_points: false,
            evaluates_recordings: false,
        }
    }
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&QueryLengths>, _: bool) -> u64 {
        self.pool.rounded_size(self.scratch).unwrap() as u64
    }
    fn holds_srs(&self, _: &Srs) -> bool {
        self.holds_srs
    }
    fn gpu(&self) -> Option<usize> {
        self.gpu
    }
    fn resident_srs(&self) -> Vec<ResidentSrs> {
        let copy = ResidentSrs {
            srs: "test".into(),
            place: "device",
            bytes: 1,
        };
        if self.holds_srs { vec![copy] } else { Vec::new() }
    }
    fn start(&self, mut job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        check_job(&job)?;
        thread::sleep(self.start);
        // Scratch memory paid out of the partition's admitted working set.
        let scratch = match (self.scratch, job.assignments[0].working_set_mut()) {
            (0, _) => None,
            (n, Some(funds)) => Some(self.pool.checkout_funded(n, funds)?),
            (n, None) => Some(self.pool.checkout_blocking(n)?),
        };
        for a in &mut job.assignments {
            a.release_abc();
        }
        Ok(Box::new(TestStarted {
            _scratch: scratch,
            finish: self.finish,
            n: job.assignments.len(),
        }))
    }
}

impl StartedProof for TestStarted {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        thread::sleep(self.finish);
        let p = Proof {
            a: G1Affine::identity(),
            b: G2Affine::identity(),
            c: G1Affine::identity(),
        };
        Ok(vec![p; self.n])
    }
}

/// A partition that takes at least `delay` to synthesize.
pub struct Slow {
    pub circuit: BenchCircuit,
    pub delay: Duration,
}

impl Partition for Slow {
    fn synthesize(
        self: Box<Self>,
        ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        thread::sleep(self.delay);
        ctx.synthesize(self.circuit)
    }
}

pub fn slow(c: &BenchCircuit, delay_ms: u64) -> Box<dyn Partition> {
    Box::new(Slow {
        circuit: c.clone(),
        delay: Duration::from_millis(delay_ms),
    })
}

/// Waits (a minute at most) for job `id` of `engine`, failing the test
/// unless it completed.
pub fn wait_completed(engine: &Engine, id: JobId) {
    let outcome = engine.wait(id, Some(Duration::from_secs(60))).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "{outcome:?}");
}

/// Submits `spec` to `engine` and waits for it to complete (see
/// [`wait_completed`]).
pub fn submit_and_complete(engine: &Engine, spec: JobSpec) {
    wait_completed(engine, engine.submit(spec).unwrap());
}

pub fn spec(id: &str, priority: Priority, partitions: Vec<Box<dyn Partition>>) -> JobSpec {
    JobSpec {
        circuit_id: id.to_string(),
        priority,
        partitions,
        randomness: None,
    }
}

pub fn test_engine(
    pool: &Arc<PinnedPool>,
    config: EngineConfig,
    start_ms: u64,
    finish_ms: u64,
    scratch: usize,
) -> Engine {
    let backend = Arc::new(TestBackend {
        pool: Arc::clone(pool),
        start: Duration::from_millis(start_ms),
        finish: Duration::from_millis(finish_ms),
        scratch,
        holds_srs: true,
        gpu: None,
    });
    Engine::new(
        config,
        vec![Device {
            id: DeviceId::Cpu,
            backend,
        }],
        Arc::clone(pool),
    )
    .unwrap()
}

/// Checks the engine is back at its idle values: nothing queued or in
/// flight, no pool buffer checked out, the budget holding only the pool's
/// idle buffers, the backends' SRS copies and circuit recordings, and the
/// accountant (the allocator's own count) agreeing with the pool.
pub fn assert_idle(engine: &Engine, pool: &PinnedPool, acct: &Accountant, what: &str) {
    assert!(
        engine.wait_quiet(Duration::from_secs(30)),
        "{what}: the pipeline did not drain"
    );
    let status = engine.status();
    assert!(
        status.queues.iter().all(|q| q.pending == 0 && q.in_progress == 0),
        "{what}: {:?}",
        status.queues
    );
    assert!(status.partitions.is_empty(), "{what}: {:?}", status.partitions);
    assert!(
        status.devices.iter().all(|d| d.in_flight == 0),
        "{what}: {:?}",
        status.devices
    );
    let s = pool.stats();
    assert_eq!(s.checked_out_bytes, 0, "{what}: buffers still out");
    let srs: u64 = status.srs.iter().map(|i| i.bytes).sum();
    // Circuit recordings are held (and paid for) for the engine's life.
    let recordings: u64 = status.synthesis.iter().map(|c| c.recording_bytes).sum();
    assert_eq!(
        pool.budget().used(),
        s.allocated_bytes + srs + recordings,
        "{what}: reservations still held"
    );
    assert_eq!(
        acct.live.load(Ordering::SeqCst),
        s.allocated_bytes,
        "{what}: the accountant disagrees"
    );
}

/// What a [`Chaos`] backend does to the partition whose first public input
/// has these bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `start` returns an error.
    StartError,
    /// `start` panics.
    StartPanic,
    /// `finish` returns an error.
    FinishError,
    /// `finish` panics.
    FinishPanic,
}

/// A test backend that misbehaves on marked partitions (recognized by their
/// first public input), and counts what it did: the independent tally a
/// soak test checks the engine's counters against.
pub struct Chaos {
    pub pool: Arc<PinnedPool>,
    pub marks: std::sync::Mutex<std::collections::HashMap<[u8; 32], Fault>>,
    pub tally: Arc<Tally>,
}

/// What a [`Chaos`] backend did.
#[derive(Default)]
pub struct Tally {
    /// Proofs its `finish` returned.
    pub proofs: AtomicU64,
    /// Panics it raised.
    pub panics: AtomicU64,
    /// Errors it returned.
    pub errors: AtomicU64,
}

impl Chaos {
    pub fn new(pool: &Arc<PinnedPool>) -> Arc<Chaos> {
        Arc::new(Chaos {
            pool: Arc::clone(pool),
            marks: Default::default(),
            tally: Arc::default(),
        })
    }

    /// Marks the partitions of circuit `c` (by its first public input).
    pub fn mark(&self, c: &BenchCircuit, fault: Fault) {
        let key = c.public_inputs()[0].to_bytes_le();
        self.marks.lock().unwrap().insert(key, fault);
    }

    fn fault_of(&self, job: &ProofBatch) -> Option<Fault> {
        let key = job.assignments[0].inputs().get(1)?.to_bytes_le();
        self.marks.lock().unwrap().get(&key).copied()
    }
}

pub struct ChaosStarted {
    tally: Arc<Tally>,
    fault: Option<Fault>,
    _scratch: PoolBuffer,
}

impl Backend for Chaos {
    fn name(&self) -> &'static str {
        "chaos"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            workers_per_device: 2,
            abc_layout: AbcLayout::Exact,
            uses_device: false,
            needs_srs_points: false,
            evaluates_recordings: false,
        }
    }
    fn extra_working_set(&self, _: &CapacityHint, _: Option<&QueryLengths>, _: bool) -> u64 {
        self.pool.rounded_size(64 << 10).unwrap() as u64
    }
    fn start(&self, mut job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        check_job(&job)?;
        let fault = self.fault_of(&job);
        // Scratch held between the steps, paid out of the working set: a
        // panic or error later must give it back.
        let funds = job.assignments[0].working_set_mut().expect("funded");
        let scratch = self.pool.checkout_funded(64 << 10, funds)?;
        match fault {
            Some(Fault::StartPanic) => {
                self.tally.panics.fetch_add(1, Ordering::SeqCst);
                panic!("chaos: start panics");
            }
            Some(Fault::StartError) => {
                self.tally.errors.fetch_add(1, Ordering::SeqCst);
                return Err(ProveError::Backend {
                    backend: "chaos",
                    message: "chaos: start fails".into(),
                });
            }
            _ => {}
        }
        job.assignments[0].release_abc();
        Ok(Box::new(ChaosStarted {
            tally: Arc::clone(&self.tally),
            fault,
            _scratch: scratch,
        }))
    }
}

impl StartedProof for ChaosStarted {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        match self.fault {
            Some(Fault::FinishPanic) => {
                self.tally.panics.fetch_add(1, Ordering::SeqCst);
                panic!("chaos: finish panics");
            }
            Some(Fault::FinishError) => {
                self.tally.errors.fetch_add(1, Ordering::SeqCst);
                Err(ProveError::Backend {
                    backend: "chaos",
                    message: "chaos: finish fails".into(),
                })
            }
            _ => {
                self.tally.proofs.fetch_add(1, Ordering::SeqCst);
                let p = Proof {
                    a: G1Affine::identity(),
                    b: G2Affine::identity(),
                    c: G1Affine::identity(),
                };
                Ok(vec![p])
            }
        }
    }
}

/// How a [`Failing`] partition goes wrong during synthesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthesisFault {
    /// It returns an error.
    Error,
    /// It panics.
    Panic,
}

/// A partition that takes pool memory out of its admitted working set and
/// then fails its synthesis; counts its panics.
pub struct Failing {
    pub fault: SynthesisFault,
    pub panics: Arc<AtomicU64>,
}

impl Partition for Failing {
    fn synthesize(
        self: Box<Self>,
        mut ctx: SynthesisContext<'_>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        let held = pinprove_mem::PinnedVec::<u64>::with_capacity_charged(4096, ctx.pool, Some(&mut ctx.funds))?;
        match self.fault {
            SynthesisFault::Panic => {
                self.panics.fetch_add(1, Ordering::SeqCst);
                panic!(
                    "failing partition: synthesis panics with {} words held",
                    held.capacity()
                );
            }
            SynthesisFault::Error => Err(ProveError::Synthesis(bellpepper_core::SynthesisError::Unsatisfiable)),
        }
    }
}

/// An engine over one [`Chaos`] device.
pub fn chaos_engine(pool: &Arc<PinnedPool>, chaos: &Arc<Chaos>, config: EngineConfig) -> Engine {
    Engine::new(
        config,
        vec![Device {
            id: DeviceId::Cpu,
            backend: Arc::clone(chaos) as Arc<dyn Backend>,
        }],
        Arc::clone(pool),
    )
    .unwrap()
}

/// Waits (30 s at most, else fails with `what`) until at least `n`
/// partitions are in `phase`.
pub fn wait_for_partitions_in(engine: &Engine, phase: Phase, n: usize, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while engine.status().partitions.iter().filter(|p| p.phase == phase).count() < n {
        assert!(std::time::Instant::now() < deadline, "{what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// A partition's working set and the loaded parameters' bytes of circuit
/// `c` (parameters in `params`), as an engine of `config` over the test
/// backend counts them.
pub fn working_set_and_srs(c: &BenchCircuit, params: &Path, config: EngineConfig) -> (u64, u64) {
    let (pool, _) = pool_with(1 << 30);
    let engine = test_engine(&pool, config, 5, 5, 0);
    engine.register_srs(&c.id(), params);
    engine.preload_srs(&c.id()).unwrap();
    assert!(engine.wait_quiet(Duration::from_secs(30)));
    let srs: u64 = engine.status().srs.iter().map(|i| i.bytes).sum();
    (engine.working_set(&c.id(), 0).unwrap(), srs)
}
