//! The engine: a priority queue of partitions, synthesis workers admitted by
//! the memory budget, a bounded hand-off to each device's workers, and
//! finalizers that complete proofs while the device takes the next one.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use ff::Field;
use pinprove_groth16::{AbcLayout, Backend, CapacityHints, ProvingAssignment, Scalar, Srs, StartedProof};
use pinprove_mem::{MemoryBudget, PinnedPool};
use rand_core::OsRng;
use serde::Serialize;

use crate::EngineError;
use crate::job::{
    JobId, JobOutcome, JobSpec, JobState, JobStatus, Partition, PartitionResult, PartitionTimings, Priority,
};
use crate::metrics::{Metrics, counter, gauge};
use crate::srs::{SrsInfo, SrsRegistry};
use crate::timeline::Timeline;
use pinprove_mem::sync::Recover;

mod workers;

/// One device and the backend that drives it (the CPU backend counts as a
/// device).
#[derive(Clone)]
pub struct Device {
    /// A name for logs and status, such as "gpu0" or "cpu".
    pub name: String,
    /// The backend.
    pub backend: Arc<dyn Backend>,
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Threads that synthesize partitions. How many run at once is decided
    /// by the memory budget, and by `max_concurrent_syntheses`.
    pub synthesis_workers: usize,
    /// An optional cap on simultaneous syntheses, to limit CPU contention.
    pub max_concurrent_syntheses: Option<usize>,
    /// Workers per device; default from the backend's capabilities.
    pub workers_per_device: Option<usize>,
    /// An SRS unused for this long may be evicted under memory pressure.
    pub srs_idle_timeout: Duration,
    /// Where capacity hints persist; in memory only when `None`.
    pub hints_dir: Option<PathBuf>,
    /// Spans kept for the timeline.
    pub timeline_capacity: usize,
    /// Finished jobs kept for status and late waiters.
    pub finished_jobs_kept: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            synthesis_workers: thread::available_parallelism().map_or(2, |n| n.get()).max(2),
            max_concurrent_syntheses: None,
            workers_per_device: None,
            srs_idle_timeout: Duration::from_secs(300),
            hints_dir: None,
            timeline_capacity: 100_000,
            finished_jobs_kept: 1000,
        }
    }
}

/// Partitions waiting and in flight for one circuit type.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueStatus {
    /// The circuit type.
    pub circuit_id: String,
    /// Partitions waiting for a synthesis worker.
    pub pending: usize,
    /// Partitions being synthesized or proved.
    pub in_progress: usize,
}

/// A device's state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceStatus {
    /// The device's name.
    pub name: String,
    /// The backend.
    pub backend: &'static str,
    /// Workers.
    pub workers: usize,
    /// Partitions waiting for or inside the device's workers and finalizer.
    pub in_flight: usize,
    /// Fraction of the engine's lifetime the device's workers spent in the
    /// backend's first step (the device-bound part).
    pub busy_fraction: f64,
    /// The job the device works on now, if any.
    pub current_job: Option<JobId>,
    /// SRS copies the backend keeps itself (bases in device memory, …).
    pub resident_srs: Vec<pinprove_groth16::ResidentSrs>,
    /// Why the device takes no more work, once it was lost (a faulted
    /// kernel, a device gone from the bus): the engine routes around it, and
    /// a new process is needed to use it again.
    pub lost: Option<String>,
}

/// A snapshot of the engine.
#[derive(Clone, Debug, Serialize)]
pub struct EngineStatus {
    /// Per circuit type.
    pub queues: Vec<QueueStatus>,
    /// Per device.
    pub devices: Vec<DeviceStatus>,
    /// Registered and loaded parameters.
    pub srs: Vec<SrsInfo>,
    /// Budget total and use.
    pub budget_total: u64,
    /// Bytes reserved now.
    pub budget_used: u64,
    /// Pool bytes idle.
    pub pool_idle: u64,
    /// Pool bytes checked out.
    pub pool_checked_out: u64,
    /// Pool buffers allocated since start (each pins fresh memory: seconds
    /// per few GiB, during which a GPU can starve; a steady stream should
    /// allocate none).
    pub pool_fresh_allocations: u64,
    /// Time spent in those allocations since start.
    pub pool_alloc_time: Duration,
    /// Proofs completed since start.
    pub proofs_completed: u64,
    /// Proofs failed since start.
    pub proofs_failed: u64,
    /// Since start.
    pub uptime: Duration,
}

struct JobInner {
    results: Vec<Option<PartitionResult>>,
    outcome: Option<JobOutcome>,
    started: bool,
    proved: usize,
}

/// A job's control block, shared by the workers handling its partitions.
struct JobCtl {
    id: JobId,
    circuit_id: String,
    priority: Priority,
    total: usize,
    submitted: Instant,
    stopped: AtomicBool,
    inner: Mutex<JobInner>,
    done: Condvar,
}

impl JobCtl {
    fn lock(&self) -> MutexGuard<'_, JobInner> {
        self.inner.lock().recover()
    }

    /// Whether its partitions should be abandoned (cancelled or failed).
    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    fn finish(&self, outcome: JobOutcome) -> bool {
        self.stopped.store(true, Ordering::Release);
        let mut g = self.lock();
        if g.outcome.is_some() {
            return false;
        }
        g.outcome = Some(outcome);
        self.done.notify_all();
        true
    }

    fn state(&self) -> JobState {
        let g = self.lock();
        match &g.outcome {
            Some(JobOutcome::Completed(_)) => JobState::Completed,
            Some(JobOutcome::Failed(_)) => JobState::Failed,
            Some(JobOutcome::Cancelled) => JobState::Cancelled,
            None if g.started => JobState::Running,
            None => JobState::Queued,
        }
    }
}

struct Pending {
    priority: Priority,
    seq: u64,
    job: Arc<JobCtl>,
    index: usize,
    partition: Box<dyn Partition>,
    randomness: (Scalar, Scalar),
    enqueued: Instant,
    /// The partition's tracing span, parent of one span per phase.
    span: tracing::Span,
    /// The `queue_wait` span, closed when a synthesis worker takes it.
    wait: tracing::Span,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.priority, self.seq) == (other.priority, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    /// Higher priority first; within a priority, earlier first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.priority.cmp(&other.priority).then(other.seq.cmp(&self.seq))
    }
}

/// A partition on its way through the pipeline.
struct InFlight {
    job: Arc<JobCtl>,
    index: usize,
    srs: Arc<Srs>,
    randomness: (Scalar, Scalar),
    inputs: Option<Vec<Scalar>>,
    timings: PartitionTimings,
    ready_at: Instant,
    span: tracing::Span,
    /// The span of the wait in progress (`handoff_wait`, `finish_wait`).
    wait: tracing::Span,
}

struct Synthesized {
    flight: InFlight,
    assignment: ProvingAssignment,
}

/// A synthesized partition and the device chosen for it.
struct Routed {
    device: usize,
    synthesized: Synthesized,
}

struct Started {
    flight: InFlight,
    started: Box<dyn StartedProof>,
    device: usize,
}

struct DeviceSlot {
    name: String,
    backend: Arc<dyn Backend>,
    workers: usize,
    handoff: (Sender<Synthesized>, Receiver<Synthesized>),
    in_flight: AtomicUsize,
    busy_nanos: AtomicU64,
    current_job: Mutex<Option<JobId>>,
    /// The error that lost the device, as the engine saw it.
    lost: pinprove_groth16::LostDevice,
}

impl DeviceSlot {
    /// Why the device can no longer be used, if it cannot.
    fn lost(&self) -> Option<String> {
        self.lost.reason().or_else(|| self.backend.lost())
    }
}

struct Inner {
    config: EngineConfig,
    budget: Arc<MemoryBudget>,
    pool: Arc<PinnedPool>,
    hints: CapacityHints,
    srs: Arc<SrsRegistry>,
    devices: Vec<DeviceSlot>,
    layout: AbcLayout,
    queue: Mutex<BinaryHeap<Pending>>,
    queue_cv: Condvar,
    /// Partitions out of the queue and not yet done, per circuit type.
    in_progress: Mutex<HashMap<String, usize>>,
    quiet: Condvar,
    synth_running: Mutex<usize>,
    synth_cv: Condvar,
    jobs: Mutex<HashMap<JobId, Arc<JobCtl>>>,
    finished: Mutex<VecDeque<JobId>>,
    finalize: (Sender<Started>, Receiver<Started>),
    metrics: Metrics,
    timeline: Timeline,
    next_job: AtomicU64,
    next_seq: AtomicU64,
    shutdown: AtomicBool,
    started_at: Instant,
    /// The latest NVML sample of each GPU.
    #[cfg(feature = "cuda")]
    gpu_samples: Mutex<HashMap<usize, pinprove_cuda::nvml::Sample>>,
}

/// The proving engine. Dropping it stops its workers; unfinished jobs end
/// as failed.
pub struct Engine {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl Engine {
    /// Starts an engine proving on `devices`, with memory from `pool`
    /// (accounted in its budget).
    pub fn new(config: EngineConfig, devices: Vec<Device>, pool: Arc<PinnedPool>) -> Result<Engine, EngineError> {
        if devices.is_empty() {
            return Err(EngineError::NoDevice);
        }
        let budget = Arc::clone(pool.budget());
        let backends: Vec<Arc<dyn Backend>> = devices.iter().map(|d| Arc::clone(&d.backend)).collect();
        let srs = SrsRegistry::new(
            Arc::clone(&pool),
            Arc::clone(&budget),
            backends,
            config.srs_idle_timeout,
        );
        let hints = match &config.hints_dir {
            Some(d) => CapacityHints::persistent(d),
            None => CapacityHints::in_memory(),
        };
        // Synthesis serves every device: pad for the FFT when any backend
        // runs it on the CPU.
        let layout = if devices
            .iter()
            .any(|d| d.backend.capabilities().abc_layout == AbcLayout::PaddedToDomain)
        {
            AbcLayout::PaddedToDomain
        } else {
            AbcLayout::Exact
        };
        let slots: Vec<DeviceSlot> = devices
            .into_iter()
            .map(|d| {
                let workers = config
                    .workers_per_device
                    .unwrap_or_else(|| d.backend.capabilities().workers_per_device)
                    .max(1);
                DeviceSlot {
                    name: d.name,
                    backend: d.backend,
                    workers,
                    // One partition ready per worker keeps it fed without
                    // holding more synthesized memory than that.
                    handoff: bounded(workers),
                    in_flight: AtomicUsize::new(0),
                    busy_nanos: AtomicU64::new(0),
                    current_job: Mutex::new(None),
                    lost: pinprove_groth16::LostDevice::default(),
                }
            })
            .collect();
        let inner = Arc::new(Inner {
            timeline: Timeline::new(config.timeline_capacity),
            config,
            budget,
            pool,
            hints,
            srs,
            devices: slots,
            layout,
            queue: Mutex::new(BinaryHeap::new()),
            queue_cv: Condvar::new(),
            in_progress: Mutex::new(HashMap::new()),
            quiet: Condvar::new(),
            synth_running: Mutex::new(0),
            synth_cv: Condvar::new(),
            jobs: Mutex::new(HashMap::new()),
            finished: Mutex::new(VecDeque::new()),
            finalize: unbounded(),
            metrics: Metrics::default(),
            next_job: AtomicU64::new(1),
            next_seq: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            started_at: Instant::now(),
            #[cfg(feature = "cuda")]
            gpu_samples: Mutex::new(HashMap::new()),
        });
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| thread::Builder::new().name(name).spawn(f);
        for w in 0..inner.config.synthesis_workers.max(1) {
            let i = Arc::clone(&inner);
            threads.push(spawn(format!("synth-{w}"), Box::new(move || i.synthesis_worker(w)))?);
        }
        for (d, slot) in inner.devices.iter().enumerate() {
            for w in 0..slot.workers {
                let i = Arc::clone(&inner);
                threads.push(spawn(
                    format!("{}-worker-{w}", slot.name),
                    Box::new(move || i.device_worker(d, w)),
                )?);
            }
            let i = Arc::clone(&inner);
            threads.push(spawn(
                format!("{}-finalizer", slot.name),
                Box::new(move || i.finalizer(d)),
            )?);
        }
        let i = Arc::clone(&inner);
        threads.push(spawn("engine-housekeeping".into(), Box::new(move || i.housekeeping()))?);
        #[cfg(feature = "cuda")]
        if let Ok(nvml) = pinprove_cuda::Nvml::load() {
            let i = Arc::clone(&inner);
            threads.push(spawn("engine-nvml".into(), Box::new(move || i.sample_gpus(nvml)))?);
        }
        Ok(Engine { inner, threads })
    }

    /// Says where the parameters of a circuit type are.
    pub fn register_srs(&self, circuit_id: &str, path: impl Into<PathBuf>) {
        self.inner.srs.register(circuit_id, path);
    }

    /// Loads a circuit type's parameters before proofs arrive. Returns
    /// whether they were already loaded, and the load time.
    pub fn preload_srs(&self, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        self.inner.srs.preload(circuit_id)
    }

    /// Drops a circuit type's parameters; returns the bytes freed, if loaded.
    pub fn evict_srs(&self, circuit_id: &str) -> Option<u64> {
        self.inner.srs.evict(circuit_id)
    }

    /// Submits a job and returns its id at once.
    ///
    /// Fails at once when the job can never fit: one partition's working
    /// set together with its parameters exceeds the whole memory budget.
    pub fn submit(&self, spec: JobSpec) -> Result<JobId, EngineError> {
        let inner = &self.inner;
        if inner.shutdown.load(Ordering::Acquire) {
            return Err(EngineError::ShutDown);
        }
        if spec.partitions.is_empty() {
            return Err(EngineError::EmptyJob);
        }
        inner.usable_device()?;
        let n = spec.partitions.len();
        if let Some(r) = &spec.randomness
            && r.len() != n
        {
            return Err(EngineError::Randomness {
                pairs: r.len(),
                partitions: n,
            });
        }
        let needed = inner.working_set(&spec.circuit_id)? + inner.srs.load_estimate(&spec.circuit_id)?;
        if needed > inner.budget.total() {
            return Err(EngineError::TooLarge {
                needed,
                total: inner.budget.total(),
            });
        }
        let id = JobId(inner.next_job.fetch_add(1, Ordering::Relaxed));
        let job = Arc::new(JobCtl {
            id,
            circuit_id: spec.circuit_id.clone(),
            priority: spec.priority,
            total: n,
            submitted: Instant::now(),
            stopped: AtomicBool::new(false),
            inner: Mutex::new(JobInner {
                results: vec![None; n],
                outcome: None,
                started: false,
                proved: 0,
            }),
            done: Condvar::new(),
        });
        inner.jobs_lock().insert(id, Arc::clone(&job));
        let randomness = spec
            .randomness
            .unwrap_or_else(|| (0..n).map(|_| (Scalar::random(OsRng), Scalar::random(OsRng))).collect());
        {
            let mut q = inner.queue_lock();
            for (index, (partition, rs)) in spec.partitions.into_iter().zip(randomness).enumerate() {
                let span = tracing::info_span!("partition", job = %id, index, circuit = %spec.circuit_id);
                let wait = tracing::info_span!(parent: &span, "queue_wait");
                q.push(Pending {
                    priority: spec.priority,
                    seq: inner.next_seq.fetch_add(1, Ordering::Relaxed),
                    job: Arc::clone(&job),
                    index,
                    partition,
                    randomness: rs,
                    enqueued: Instant::now(),
                    span,
                    wait,
                });
            }
        }
        inner.queue_cv.notify_all();
        tracing::debug!(job = %id, circuit = %spec.circuit_id, partitions = n, priority = spec.priority.as_str(), "job submitted");
        Ok(id)
    }

    /// Waits for a job to end, at most `timeout` (forever when `None`).
    pub fn wait(&self, id: JobId, timeout: Option<Duration>) -> Result<JobOutcome, EngineError> {
        let job = self.inner.job(id)?;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut g = job.lock();
        loop {
            if let Some(o) = &g.outcome {
                return Ok(o.clone());
            }
            match deadline {
                None => g = job.done.wait(g).recover(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(EngineError::Timeout);
                    }
                    g = job.done.wait_timeout(g, d - now).recover().0;
                }
            }
        }
    }

    /// Cancels a job: queued partitions are dropped now, running ones at
    /// their next safe point; every buffer and reservation comes back.
    /// Returns whether any partition had started.
    pub fn cancel(&self, id: JobId) -> Result<bool, EngineError> {
        let job = self.inner.job(id)?;
        let was_running = job.lock().started;
        if job.finish(JobOutcome::Cancelled) {
            self.inner.metrics.jobs_cancelled.fetch_add(1, Ordering::Relaxed);
            self.inner.drop_queued(id);
            self.inner.remember_finished(id);
        }
        Ok(was_running)
    }

    /// A job's status.
    pub fn job_status(&self, id: JobId) -> Result<JobStatus, EngineError> {
        let job = self.inner.job(id)?;
        let proved = job.lock().proved;
        Ok(JobStatus {
            id,
            circuit_id: job.circuit_id.clone(),
            priority: job.priority,
            state: job.state(),
            partitions: job.total,
            proved,
            age: job.submitted.elapsed(),
        })
    }

    /// A snapshot of queues, devices, parameters and memory.
    pub fn status(&self) -> EngineStatus {
        let inner = &self.inner;
        let mut queues: HashMap<String, QueueStatus> = HashMap::new();
        for p in inner.queue_lock().iter() {
            queues
                .entry(p.job.circuit_id.clone())
                .or_insert_with(|| QueueStatus {
                    circuit_id: p.job.circuit_id.clone(),
                    ..Default::default()
                })
                .pending += 1;
        }
        for (k, n) in inner.in_progress.lock().recover().iter() {
            if *n > 0 {
                queues
                    .entry(k.clone())
                    .or_insert_with(|| QueueStatus {
                        circuit_id: k.clone(),
                        ..Default::default()
                    })
                    .in_progress += n;
            }
        }
        let mut queues: Vec<QueueStatus> = queues.into_values().collect();
        queues.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        let uptime = inner.started_at.elapsed();
        let devices = inner
            .devices
            .iter()
            .map(|d| DeviceStatus {
                name: d.name.clone(),
                backend: d.backend.name(),
                workers: d.workers,
                in_flight: d.in_flight.load(Ordering::Relaxed),
                busy_fraction: busy_fraction(d, uptime),
                current_job: *d.current_job.lock().recover(),
                resident_srs: d.backend.resident_srs(),
                lost: d.lost(),
            })
            .collect();
        let pool = inner.pool.stats();
        EngineStatus {
            queues,
            devices,
            srs: inner.srs.status(),
            budget_total: inner.budget.total(),
            budget_used: inner.budget.used(),
            pool_idle: pool.idle_bytes,
            pool_checked_out: pool.checked_out_bytes,
            pool_fresh_allocations: pool.fresh_allocations,
            pool_alloc_time: pool.alloc_time,
            proofs_completed: inner.metrics.proofs_completed(),
            proofs_failed: inner.metrics.proofs_failed(),
            uptime,
        }
    }

    /// Prometheus text: budget, pool, queues, phase latencies, proofs,
    /// device busy fractions.
    pub fn metrics_text(&self) -> String {
        let s = self.status();
        let mut out = String::new();
        self.inner.metrics.render_into(&mut out);
        gauge(
            &mut out,
            "pinprove_budget_total_bytes",
            "The memory budget.",
            "",
            s.budget_total as f64,
        );
        gauge(
            &mut out,
            "pinprove_budget_used_bytes",
            "Bytes reserved in the budget.",
            "",
            s.budget_used as f64,
        );
        gauge(
            &mut out,
            "pinprove_pool_idle_bytes",
            "Idle pool buffers.",
            "",
            s.pool_idle as f64,
        );
        gauge(
            &mut out,
            "pinprove_pool_checked_out_bytes",
            "Pool buffers in use.",
            "",
            s.pool_checked_out as f64,
        );
        counter(
            &mut out,
            "pinprove_pool_fresh_allocations_total",
            "Pool buffers allocated (fresh pinned memory).",
            s.pool_fresh_allocations as f64,
        );
        counter(
            &mut out,
            "pinprove_pool_alloc_seconds_total",
            "Time spent allocating pool buffers.",
            s.pool_alloc_time.as_secs_f64(),
        );
        for q in &s.queues {
            let l = format!("circuit=\"{}\"", q.circuit_id);
            gauge(
                &mut out,
                "pinprove_queue_pending",
                "Partitions waiting.",
                &l,
                q.pending as f64,
            );
            gauge(
                &mut out,
                "pinprove_queue_in_progress",
                "Partitions in the pipeline.",
                &l,
                q.in_progress as f64,
            );
        }
        for d in &s.devices {
            let l = format!("device=\"{}\"", d.name);
            gauge(
                &mut out,
                "pinprove_device_busy_fraction",
                "Fraction of uptime in the backend's device step.",
                &l,
                d.busy_fraction,
            );
            gauge(
                &mut out,
                "pinprove_device_lost",
                "1 once the device was lost (it takes no more work), else 0.",
                &l,
                f64::from(u8::from(d.lost.is_some())),
            );
        }
        for srs in &s.srs {
            let l = format!("circuit=\"{}\"", srs.circuit_id);
            gauge(
                &mut out,
                "pinprove_srs_bytes",
                "Host bytes of loaded parameters.",
                &l,
                srs.bytes as f64,
            );
        }
        #[cfg(feature = "cuda")]
        for (i, g) in self.inner.gpu_samples.lock().recover().iter() {
            let l = format!("gpu=\"{i}\"");
            let rx = g.pcie_rx_bytes_per_s as f64;
            let tx = g.pcie_tx_bytes_per_s as f64;
            gauge(
                &mut out,
                "pinprove_gpu_utilization_percent",
                "NVML GPU utilization.",
                &l,
                f64::from(g.gpu_percent),
            );
            gauge(
                &mut out,
                "pinprove_gpu_pcie_rx_bytes_per_second",
                "NVML PCIe host to device.",
                &l,
                rx,
            );
            gauge(
                &mut out,
                "pinprove_gpu_pcie_tx_bytes_per_second",
                "NVML PCIe device to host.",
                &l,
                tx,
            );
        }
        out
    }

    /// The recorded timeline.
    pub fn timeline(&self) -> &Timeline {
        &self.inner.timeline
    }

    /// The engine's counters.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The pool the engine draws from.
    pub fn pool(&self) -> &Arc<PinnedPool> {
        &self.inner.pool
    }

    /// Capacity hints learned so far.
    pub fn hints(&self) -> &CapacityHints {
        &self.inner.hints
    }

    /// Waits until no partition is queued or in flight (or `timeout`
    /// passes); returns whether the engine is quiet.
    pub fn wait_quiet(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.inner.in_progress.lock().recover();
        loop {
            let busy = g.values().any(|n| *n > 0) || !self.inner.queue_lock().is_empty();
            if !busy {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .inner
                .quiet
                .wait_timeout(g, (deadline - now).min(Duration::from_millis(50)))
                .recover()
                .0;
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.shutdown.store(true, Ordering::Release);
        // Unfinished jobs end; their partitions are abandoned.
        for job in inner.jobs_lock().values() {
            job.finish(JobOutcome::Failed("the engine shut down".into()));
        }
        inner.queue_lock().clear();
        inner.queue_cv.notify_all();
        inner.synth_cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn busy_fraction(d: &DeviceSlot, uptime: Duration) -> f64 {
    let busy = Duration::from_nanos(d.busy_nanos.load(Ordering::Relaxed)).as_secs_f64();
    (busy / (d.workers as f64 * uptime.as_secs_f64().max(1e-9))).min(1.0)
}
