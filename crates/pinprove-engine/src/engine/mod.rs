//! The engine: a priority queue of partitions, synthesis workers admitted by
//! the memory budget, a bounded hand-off to each device's workers, and
//! finalizers that complete proofs while the device takes the next one.
//!
//! * [`state`] — jobs' control blocks, partitions in flight and their
//!   tickets (the counts of what is in flight, given back on drop).
//! * [`synthesis`] — admission, parameters, synthesis, routing to a device.
//! * [`device`] — the backend's two steps, and the background threads.
//! * [`outcome`] — awaiting a job from async code.
//! * [`status`] — snapshots for status pages and metrics.
//! * [`precompiled`] — circuit types' recordings, and synthesis from them.
//!
//! Every thread turns a panic into the failure of the job it was working
//! on (its memory comes back as the unwinding drops it) and keeps serving.

mod device;
mod guard;
mod handoff;
mod inner;
mod job_table;
mod outcome;
mod plan_view;
mod precompiled;
mod precompiler;
mod scheduler;
mod sizing;
mod slots;
mod snapshot;
mod state;
mod status;
mod synthesis;
mod warm_sets;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ff::Field;
#[cfg(any(test, feature = "lab"))]
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::{Backend, CapacityHints, Scalar, VerifyingKey};
use pinprove_mem::ErrorChain;
use pinprove_mem::PinnedPool;
use pinprove_mem::sync::Recover;
use rand_core::OsRng;

use self::guard::supervise;
use self::inner::Inner;
pub use self::outcome::JobFuture;
pub use self::precompiler::{CircuitSynthesis, SynthesisMode};
use self::state::{Gauges, JobCtl, Pending};
pub use self::status::{DeviceStatus, EngineStatus, GpuReading, PartitionStatus, QueueStatus};
use crate::clock::{Clock, WallClock};
use crate::job::{JobId, JobOutcome, JobSpec, JobStatus};
use crate::metrics::Metrics;
use crate::srs::{SrsRegistry, SrsSource};
use crate::telemetry::GpuTelemetry;
use crate::timeline::Timeline;
use crate::{EngineError, Phase};

/// One device and the backend that drives it (the CPU backend counts as a
/// device).
#[derive(Clone)]
pub struct Device {
    /// Which device it is (logs, status and metrics name it so).
    pub id: crate::DeviceId,
    /// The backend.
    pub backend: Arc<dyn Backend>,
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Partitions below High priority prepared (admitted, synthesized) at
    /// once at most; two more threads are kept for High and Critical ones,
    /// which therefore never wait for a worker. How many synthesize at once
    /// is decided by the memory budget, and by `max_concurrent_syntheses`.
    pub synthesis_workers: usize,
    /// An optional cap on simultaneous syntheses, to limit CPU contention.
    pub max_concurrent_syntheses: Option<usize>,
    /// Workers per device; default from the backend's capabilities.
    pub workers_per_device: Option<usize>,
    /// An SRS unused for this long may be evicted under memory pressure;
    /// sooner, once idle as long as loading it took, for work that waits
    /// for its memory.
    pub srs_idle_timeout: Duration,
    /// Where capacity hints persist; in memory only when `None`.
    pub hints_dir: Option<PathBuf>,
    /// Spans kept for the timeline.
    pub timeline_capacity: usize,
    /// Finished jobs kept for status and late waiters.
    pub finished_jobs_kept: usize,
    /// Bytes of the memory budget that only High and Critical partitions
    /// may use, so that a WinningPoSt is admitted at once even while
    /// sealing work has taken the rest. `None`: the smaller of 2 GiB and a
    /// sixteenth of the budget.
    pub priority_reserve: Option<u64>,
    /// Partitions whose pool buffers (a, b, c, inputs, aux) are prepared
    /// ahead of demand when a circuit's parameters are preloaded, out of
    /// spare budget, in the background. `None`: as many as the budget admits
    /// at once, at most `synthesis_workers`; `Some(0)` turns it off.
    pub warm_partitions: Option<usize>,
    /// Pre-compiled circuits: a circuit type's R1CS is recorded in the
    /// background after its first partition (kept in `hints_dir` when set,
    /// paid for out of the memory budget), and later partitions synthesize
    /// only their witness and compute a, b and c from the recorded
    /// matrices: on the device where the backend's memory plan keeps the
    /// matrices there, otherwise on the host inside the partition's
    /// admission. A partition whose witness does not match the recording
    /// is synthesized classically; a circuit none of whose partitions ever
    /// matches falls back for good. Off in this library's default (the
    /// recording costs memory and a first synthesis's time); the daemon
    /// turns it on (`synthesis.precompiled`).
    pub precompiled: bool,
    /// Where the devices' GPU readings come from (see
    /// [`GpuTelemetry`](crate::telemetry::GpuTelemetry)); none are taken
    /// when `None`. The assembled stacks of a GPU build read NVML.
    pub gpu_telemetry: Option<Arc<dyn GpuTelemetry>>,
    /// What the engine's decisions that depend on durations (how long a
    /// parameter set took to load, how long it has been idle) read the
    /// time from: the wall clock, or in tests a
    /// [`ManualClock`](crate::clock::ManualClock).
    pub clock: Arc<dyn Clock>,
    /// The planner's rules the engine carries out today, when set (`None`:
    /// the engine's own, [`Policy::default`](crate::planner::Policy)):
    /// idle parameters kept by [`planner::keep::kept`](crate::planner::keep::kept)
    /// (a burst window instead of idle-as-long-as-the-load, Critical kinds'
    /// kept), and recordings evicted after parameters
    /// (`recordings_first`). Its other switches need machinery the engine
    /// does not have yet (parameters by section, prefetch) and are
    /// measured in the simulator only. Off until a GPU day confirms it.
    pub planner: Option<crate::planner::Policy>,
}

/// Threads the engine never exceeds for any one kind of worker: a
/// configuration asking for more is an error, not thousands of threads.
pub const MAX_THREADS: usize = 1024;

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
            priority_reserve: None,
            warm_partitions: None,
            precompiled: false,
            gpu_telemetry: None,
            clock: Arc::new(WallClock::new()),
            planner: None,
        }
    }
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
        let too_many =
            |what: &'static str, n: usize| (n > MAX_THREADS).then_some(EngineError::TooManyThreads { what, asked: n });
        if let Some(e) = too_many("synthesis workers", config.synthesis_workers)
            .or_else(|| too_many("workers per device", config.workers_per_device.unwrap_or(0)))
        {
            return Err(e);
        }
        let budget = Arc::clone(pool.budget());
        let reserve = config
            .priority_reserve
            .unwrap_or_else(|| (2u64 << 30).min(budget.total() / 16));
        budget.set_reserve(reserve, crate::Priority::High.rank());
        let backends: Vec<Arc<dyn Backend>> = devices.iter().map(|d| Arc::clone(&d.backend)).collect();
        let hints = Arc::new(match &config.hints_dir {
            Some(d) => CapacityHints::persistent(d),
            None => CapacityHints::in_memory(),
        });
        let srs = SrsRegistry::new(
            Arc::clone(&pool),
            Arc::clone(&budget),
            backends.clone(),
            Arc::clone(&hints),
            config.srs_idle_timeout,
            Arc::clone(&config.clock),
            config.planner,
        );
        let slots = slots::DeviceSlots::new(devices, config.workers_per_device, Arc::clone(&pool));
        let timeline = Arc::new(Timeline::new(config.timeline_capacity));
        let gpu_telemetry = config.gpu_telemetry.clone();
        let precompiled = precompiler::Precompiler::new(
            config.precompiled,
            config.hints_dir.clone(),
            Arc::clone(&budget),
            backends.clone(),
            Arc::clone(&timeline),
            config.planner.is_some_and(|p| p.recordings_first),
        );
        let sizing = Arc::new(sizing::Sizing::new(
            Arc::clone(&pool),
            Arc::clone(&srs),
            Arc::clone(&hints),
            Arc::clone(&precompiled),
            backends,
        ));
        let warm = warm_sets::WarmSets::new(
            Arc::clone(&sizing),
            Arc::clone(&pool),
            Arc::clone(&srs),
            config.warm_partitions,
            config.synthesis_workers,
        );
        // As many as rayon's global threads: alone, an urgent synthesis
        // runs as fast as it would there; beside a stream the kernel shares
        // the cores between the two sets.
        let urgent_threads = rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("urgent-synth-{i}"))
            .build()
            .map_err(std::io::Error::other)?;
        let scheduler = scheduler::Scheduler::new(config.synthesis_workers, config.max_concurrent_syntheses);
        let finished_jobs_kept = config.finished_jobs_kept;
        let inner = Arc::new(Inner {
            timeline,
            scheduler,
            urgent_threads,
            gauges: Gauges::new(slots.len()),
            config,
            budget,
            pool,
            hints,
            srs,
            devices: slots,
            sizing,
            warm,
            precompiled,
            jobs: job_table::JobTable::new(finished_jobs_kept),
            metrics: Metrics::default(),
            shutdown: AtomicBool::new(false),
            started_at: Instant::now(),
            waits_seen: Default::default(),
        });
        inner.devices.pin_with_a_live_gpu();
        let mut engine = Engine {
            inner: Arc::clone(&inner),
            threads: Vec::new(),
        };
        for w in 0..inner.config.synthesis_workers.max(1) + scheduler::URGENT_WORKERS {
            engine.spawn(format!("synth-{w}"), move |i| i.synthesis_worker(w))?;
        }
        for (d, slot) in inner.devices.iter().enumerate() {
            // The last takes High and Critical partitions only: one of them
            // never waits for a worker stuck behind background work on the
            // device.
            let lanes = (0..slot.workers())
                .map(|w| (format!("{}-worker-{w}", slot.id()), false))
                .chain([(format!("{}-urgent-worker", slot.id()), true)]);
            for (lane, urgent_only) in lanes {
                let name = lane.clone();
                engine.spawn(name, move |i| i.device_worker(d, &lane, urgent_only))?;
            }
            for urgent in [false, true] {
                let lane = format!("{}-{}finalizer", slot.id(), if urgent { "urgent-" } else { "" });
                engine.spawn(lane.clone(), move |i| i.finalizer(d, &lane, urgent))?;
            }
        }
        engine.spawn("engine-housekeeping".into(), |i| i.housekeeping())?;
        // Only devices with a GPU of their own are sampled.
        if let Some(telemetry) = gpu_telemetry
            && inner.devices.iter().any(|d| d.backend().gpu().is_some())
        {
            engine.spawn("engine-gpu-telemetry".into(), move |i| i.sample_gpus(&*telemetry))?;
        }
        Ok(engine)
    }

    /// Starts a supervised engine thread (see [`state::supervise`]). On
    /// failure the engine built so far is dropped, which stops the threads
    /// already started.
    fn spawn(&mut self, name: String, body: impl Fn(&Inner) + Send + 'static) -> Result<(), EngineError> {
        let inner = Arc::clone(&self.inner);
        let thread_name = name.clone();
        let handle = thread::Builder::new()
            .name(thread_name)
            .spawn(move || supervise(&name, &inner.metrics, || body(&inner)))?;
        self.threads.push(handle);
        Ok(())
    }

    /// Says where the parameters of a circuit type are.
    pub fn register_srs(&self, circuit_id: &str, path: impl Into<PathBuf>) {
        self.inner.srs.register(circuit_id, SrsSource::File(path.into()));
    }

    /// Registers synthetic parameters of `shape` for a circuit type: made
    /// in memory when first needed, for measurements at sizes whose real
    /// parameters are not at hand. Its proofs do not verify. The lab's
    /// only (the `lab` feature).
    #[cfg(any(test, feature = "lab"))]
    pub fn register_synthetic_srs(&self, circuit_id: &str, shape: CircuitShape) {
        self.inner.srs.register(circuit_id, SrsSource::Synthetic(shape));
    }

    /// Host bytes one partition of `circuit_id` made of `parts` parts (see
    /// [`Partition::parts`](crate::Partition::parts); 0 for one
    /// synthesized whole) is admitted with: its vectors, densities, what
    /// the backends add and its groups' scratch (from its capacity hint, or
    /// from its parameters before the first synthesis), in a background
    /// job.
    pub fn working_set(&self, circuit_id: &str, parts: usize) -> Result<u64, EngineError> {
        self.inner.sizing.working_set(circuit_id, parts, false)
    }

    /// The shape of a circuit type as its registered parameters give it
    /// (the domain, inputs and aux; the exact constraint count is learned
    /// at its first synthesis).
    pub fn circuit_shape(&self, circuit_id: &str) -> Result<pinprove_groth16::CapacityHint, EngineError> {
        self.inner.srs.shape(circuit_id)
    }

    /// The verifying key of a circuit type: the one its parameters were
    /// loaded with (kept after they are evicted), or read from their
    /// header when they were never loaded.
    pub fn verifying_key(&self, circuit_id: &str) -> Result<Arc<VerifyingKey>, EngineError> {
        self.inner.srs.verifying_key(circuit_id)
    }

    /// Loads a circuit type's parameters before proofs arrive, admitted by
    /// the memory budget as background work is: refused at once with the
    /// numbers when they need more than the budget
    /// ([`EngineError::ParamsTooLarge`]), waiting while work in flight holds
    /// the memory, refused with the numbers when nothing will free it.
    /// Returns whether they were already loaded, and the load time.
    pub fn preload_srs(&self, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        let inner = &self.inner;
        let loaded = inner.srs.preload(
            circuit_id,
            crate::Priority::Normal.rank(),
            || inner.nothing_in_flight(),
            || inner.shutting_down(),
        )?;
        // What a stream of this circuit will ask the pool for, ready before
        // it arrives.
        self.inner.warm.warm(circuit_id)?;
        Ok(loaded)
    }

    /// Has the pool keep the buffers of `partitions` partitions of
    /// `circuit_id` ready even while other work waits for memory: the
    /// budget's eviction leaves them, and they are not freed when returned
    /// under pressure (see [`PinnedPool::keep_reserved`](pinprove_mem::PinnedPool::keep_reserved)). For a circuit
    /// whose proofs are due at once and small, a WinningPoSt's: otherwise
    /// a stream of background partitions waiting for admission takes its
    /// buffers, and each WinningPoSt pins fresh memory beside their
    /// pinning. Takes effect when the circuit's parameters are preloaded
    /// (at once if they were).
    pub fn keep_ready(&self, circuit_id: &str, partitions: usize) -> Result<(), EngineError> {
        self.inner.warm.keep(circuit_id, partitions);
        if self.inner.warm.warmed(circuit_id).is_some() {
            self.inner.warm.warm(circuit_id)?;
        }
        Ok(())
    }

    /// Prepares, in the background and out of spare budget, the pool
    /// buffers of every circuit the capacity hints know and no warm set
    /// covers yet (as [`preload_srs`](Self::preload_srs) does for one), so
    /// that a restarted engine does not pin on live work. Returns the
    /// circuits warmed.
    pub fn warm_hinted(&self) -> Vec<String> {
        self.inner
            .warm
            .not_warmed(self.inner.hints.all().into_keys())
            .into_iter()
            .filter(|id| match self.inner.warm.warm(id) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(circuit = %id, "cannot warm the pool for a hinted circuit: {}", ErrorChain(&e));
                    false
                }
            })
            .collect()
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
        if inner.shutting_down() {
            return Err(EngineError::ShutDown);
        }
        if spec.partitions.is_empty() {
            return Err(EngineError::EmptyJob);
        }
        inner.devices.usable()?;
        let n = spec.partitions.len();
        if let Some(r) = &spec.randomness
            && r.len() != n
        {
            return Err(EngineError::Randomness {
                pairs: r.len(),
                partitions: n,
            });
        }
        let heap = spec.partitions.iter().map(|p| p.heap_bytes()).max().unwrap_or(0);
        let needed = inner
            .sizing
            .working_set(&spec.circuit_id, 0, spec.priority.is_urgent())?
            .saturating_add(heap)
            .saturating_add(inner.srs.load_estimate(&spec.circuit_id)?);
        let limit = inner.budget.limit_for(spec.priority.rank());
        if needed > limit {
            return Err(EngineError::TooLarge { needed, total: limit });
        }
        let job = inner.jobs.insert(|id| {
            JobCtl::new(id, spec.circuit_id.clone(), spec.priority, n)
                .holding(inner.precompiled.in_use(&spec.circuit_id))
                .wanting(inner.srs.want(&spec.circuit_id, spec.priority.rank()))
        });
        let id = job.id;
        let randomness = spec
            .randomness
            .unwrap_or_else(|| (0..n).map(|_| (Scalar::random(OsRng), Scalar::random(OsRng))).collect());
        let pending: Vec<Pending> = spec
            .partitions
            .into_iter()
            .zip(randomness)
            .enumerate()
            .map(|(index, (partition, rs))| {
                let span = tracing::info_span!("partition", job = %id, index, circuit = %spec.circuit_id);
                let wait = tracing::info_span!(parent: &span, Phase::QueueWait.name());
                Pending {
                    job: Arc::clone(&job),
                    index,
                    partition,
                    randomness: rs,
                    enqueued: Instant::now(),
                    span,
                    wait,
                    critical: inner.scheduler.critical_mark(spec.priority),
                }
            })
            .collect();
        inner.scheduler.enqueue(spec.priority, pending);
        tracing::debug!(job = %id, circuit = %spec.circuit_id, partitions = n, priority = spec.priority.as_str(), "job submitted");
        Ok(id)
    }

    /// Waits for a job to end, at most `timeout` (forever when `None`).
    /// Blocks the calling thread; async code awaits [`outcome`](Self::outcome).
    pub fn wait(&self, id: JobId, timeout: Option<Duration>) -> Result<JobOutcome, EngineError> {
        let job = self.inner.jobs.get(id)?;
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

    /// A future that resolves to the job's outcome, without holding a
    /// thread while it waits. With [`JobFuture::cancel_on_drop`], dropping
    /// it before the job ends cancels the job.
    pub fn outcome(&self, id: JobId) -> Result<JobFuture, EngineError> {
        let job = self.inner.jobs.get(id)?;
        Ok(JobFuture::new(job, Arc::downgrade(&self.inner)))
    }

    /// Cancels a job: queued partitions are dropped now, running ones at
    /// their next safe point; every buffer and reservation comes back.
    /// Returns whether any partition had started.
    pub fn cancel(&self, id: JobId) -> Result<bool, EngineError> {
        let job = self.inner.jobs.get(id)?;
        Ok(self.inner.cancel(&job))
    }

    /// A job's status.
    pub fn job_status(&self, id: JobId) -> Result<JobStatus, EngineError> {
        let job = self.inner.jobs.get(id)?;
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

    /// A snapshot of queues, devices, partitions in flight, parameters and
    /// memory.
    pub fn status(&self) -> EngineStatus {
        self.inner.status()
    }

    /// Prometheus text: budget, pool, queues, phase latencies, proofs,
    /// device busy fractions, GPU readings.
    pub fn metrics_text(&self) -> String {
        self.metrics_text_of(&self.status())
    }

    /// [`metrics_text`](Self::metrics_text) of a status the caller already
    /// read, so that one reading serves both.
    pub fn metrics_text_of(&self, status: &EngineStatus) -> String {
        crate::metrics::render(&self.inner.metrics, status)
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

    /// Records `circuit_id`'s R1CS now, from a copy of `partition`, in the
    /// background and out of spare budget, when
    /// [`EngineConfig::precompiled`] is on and the circuit type has no
    /// recording yet ([`wait_quiet`](Self::wait_quiet) waits for it); the
    /// engine does this by itself with a circuit type's first partition.
    /// Returns whether a recording is held or being made; `false` when the
    /// mode is off, or the partition cannot copy its circuit.
    pub fn precompile(&self, circuit_id: &str, partition: &dyn crate::Partition) -> bool {
        self.inner.precompile(circuit_id, partition)
    }

    /// Waits until no partition is queued or in flight, the pool is not
    /// being warmed and no circuit is being recorded (or `timeout` passes);
    /// returns whether the engine is quiet.
    pub fn wait_quiet(&self, timeout: Duration) -> bool {
        let inner = &self.inner;
        inner.gauges.wait_quiet(Instant::now() + timeout, || {
            inner.scheduler.is_empty() && !background_running(inner)
        })
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let inner = &self.inner;
        inner.shutdown.store(true, Ordering::Release);
        inner.scheduler.stop();
        // Unfinished jobs end; their partitions are abandoned.
        for job in inner.jobs.all() {
            job.finish(JobOutcome::Failed("the engine shut down".into()));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Recordings and pool warm-ups run on threads of their own and use
        // the backend (pinned memory, uploads to a GPU). A process that
        // exits while one runs unloads the CUDA runtime under it, which
        // crashed `pinprove selftest` at exit after it had passed; so the
        // engine is gone only once they are, or after a bounded wait.
        let background = || background_running(inner);
        if background() {
            tracing::info!("waiting for recordings and pool warm-ups to end");
            let deadline = Instant::now() + BACKGROUND_GRACE;
            while background() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            if background() {
                tracing::warn!(
                    "recordings or pool warm-ups still running after {BACKGROUND_GRACE:?}; the engine goes without them"
                );
            }
        }
    }
}

/// Whether a recording or a pool warm-up is running on a thread of its own.
fn background_running(inner: &Inner) -> bool {
    inner.warm.busy() || inner.precompiled.running.load(Ordering::Acquire) > 0
}

/// How long a dropped engine waits for its background recordings and pool
/// warm-ups, so that a stuck one cannot hold a shutdown forever.
const BACKGROUND_GRACE: Duration = Duration::from_secs(120);
