//! The native backend: configuration, SRS residency, and `start`, which
//! prepares the scalars on the CPU and queues the whole proof on the GPU.

use std::collections::HashMap;
use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use blstrs::Scalar;
use pinprove_groth16::domain::domain_size;
use pinprove_groth16::{
    AbcLayout, Backend, BackendHint, Capabilities, CapacityHint, LostDevice, ProveError, ProvingAssignment, ProvingJob,
    QueryLengths, Srs, StartedProof, check_job, precompiled,
};
use pinprove_mem::PinnedPool;
use pinprove_mem::cuda::{EventFence, PooledEvent};
use pinprove_mem::sync::Recover;

use super::h::{Events, HJob};
use super::matrices::{DeviceMatrices, ResidentMatrices};
use super::msm::{G1, G2, MsmScalars, msm};
use super::proof::{DeviceProof, DeviceReads, NativeStarted};
use super::resident::{ResidentSrs, srs_key};
use super::{NAME, NativeConfig, NativePhases, PlacementReport, SrsPlacement, backend_error, check, cuda_error, timed};
use crate::device_queue::DeviceQueue;
use crate::split::{self, LearnedShares, Mode, QueryScalars};

/// pinprove's GPU backend. See the module documentation.
pub struct NativeBackend {
    pool: Arc<PinnedPool>,
    config: NativeConfig,
    /// SRSs whose bases are on the device. A proof holds its own Arc, so
    /// an eviction during a proof frees the bases after it.
    resident: Mutex<HashMap<PathBuf, Arc<ResidentSrs>>>,
    /// Whose turn it is to queue device work (proofs queue whole, one
    /// behind the other, on the GPU's streams; urgent ones first), and the
    /// completion events of the proofs queued, at most `queue_depth` of
    /// background work. CPU work runs outside it.
    device: DeviceQueue<PooledEvent>,
    /// The CUDA events proofs use, reused (see [`EventPool`]).
    events: Events,
    last_phases: Arc<Mutex<Option<NativePhases>>>,
    /// The backend's own threads (see [`NativeConfig::prep_threads`]):
    /// scalar preparation before the device work, MSM sums after it.
    threads: Arc<rayon::ThreadPool>,
    /// Set by the first error that leaves the device unusable.
    lost: LostDevice,
    /// Per SRS, the preparation buffer sizes the pool keeps warm (see
    /// [`keep_preparation_warm`](Self::keep_preparation_warm)).
    prep_warm: Mutex<HashMap<PathBuf, Vec<usize>>>,
    /// Pre-compiled circuits' matrices on the device.
    matrices: ResidentMatrices,
    /// Preparation memory each circuit's proofs took (what admission counts
    /// once a proof was seen).
    prep_shares: LearnedShares,
    /// Per SRS, the most device memory the device's pool held after its
    /// proofs, and the most any proofs held: what the pool is grown back to
    /// after a large plain allocation trimmed it (resident bases, matrices)
    /// and ahead of a restarted process's first proof.
    pool_seen: Mutex<HashMap<PathBuf, u64>>,
    pool_target: std::sync::atomic::AtomicU64,
}

impl NativeBackend {
    /// A backend on the first CUDA device with the default configuration,
    /// drawing its host buffers from `pool`; fails when no CUDA device is
    /// usable.
    pub fn new(pool: Arc<PinnedPool>) -> Result<Self, ProveError> {
        Self::with_config(pool, NativeConfig::default())
    }

    /// A backend with `config`.
    pub fn with_config(pool: Arc<PinnedPool>, config: NativeConfig) -> Result<Self, ProveError> {
        let n = pinprove_mem::cuda::device_count().map_err(cuda_error)?;
        if n == 0 {
            return Err(backend_error("no CUDA device"));
        }
        if config.device >= n {
            return Err(backend_error(format!(
                "no CUDA device {} (this machine has {n})",
                config.device
            )));
        }
        check_sppark_numbering(config.device)?;
        if config.workers_per_device == 0 {
            return Err(backend_error("workers_per_device must be at least 1"));
        }
        if config.queue_depth == 0 {
            return Err(backend_error("queue_depth must be at least 1"));
        }
        let threads = match config.prep_threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get() / 2).max(2),
            n => n,
        };
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("pinprove-native-{i}"))
            // A device worker waits for these threads' preparation.
            .start_handler(|_| pinprove_mem::mark_device_lane())
            .build()
            .map_err(|e| backend_error(format!("starting the backend's threads: {e}")))?;
        Ok(NativeBackend {
            threads: Arc::new(threads),
            pool,
            config,
            resident: Mutex::new(HashMap::new()),
            device: DeviceQueue::new(config.queue_depth),
            events: Events::new(),
            last_phases: Arc::new(Mutex::new(None)),
            lost: LostDevice::default(),
            prep_warm: Mutex::new(HashMap::new()),
            matrices: ResidentMatrices::default(),
            prep_shares: LearnedShares::default(),
            pool_seen: Mutex::new(HashMap::new()),
            pool_target: Default::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> NativeConfig {
        self.config
    }

    /// The phases of the last assignment proved (for benchmarks).
    pub fn last_phases(&self) -> Option<NativePhases> {
        *self.last_phases.lock().recover()
    }

    /// The SRSs whose bases are in device memory.
    pub fn resident(&self) -> Vec<PlacementReport> {
        self.lock()
            .iter()
            .map(|(k, r)| PlacementReport {
                srs: k.clone(),
                device_bytes: r.bytes,
            })
            .collect()
    }

    /// Has the pool keep, in the background, the preparation buffers of as
    /// many proofs as can be in flight on this device, at the sizes `sizes`
    /// (a proof's [`Prepared::buffer_bytes`](split::Prepared::buffer_bytes)),
    /// unless buffers at least that large are kept already. Their sizes
    /// depend on the witness, so they are learned from the circuit type's
    /// first proof; later proofs then find them idle instead of pinning
    /// fresh memory while the device waits.
    fn keep_preparation_warm(&self, key: &std::path::Path, sizes: Vec<usize>) {
        let wanted = {
            let mut warm = self.prep_warm.lock().recover();
            let kept = warm.entry(key.to_path_buf()).or_default();
            if kept.len() == sizes.len() {
                if kept.iter().zip(&sizes).all(|(k, s)| s <= k) {
                    return;
                }
                // Never shrink what is kept: sizes vary a little between
                // witnesses.
                for (k, s) in kept.iter_mut().zip(&sizes) {
                    *k = (*k).max(*s);
                }
            } else {
                *kept = sizes;
            }
            kept.clone()
        };
        let sets = self.config.queue_depth + self.config.workers_per_device;
        let all: Vec<usize> = (0..sets)
            .flat_map(|_| wanted.iter().copied().filter(|&b| b > 0))
            .collect();
        let pool = Arc::clone(&self.pool);
        let name = prep_warm_name(self.config.device, key);
        let spawned = std::thread::Builder::new()
            .name("native-prep-warm".into())
            .spawn(move || match pool.keep_warm(&name, &all) {
                Ok(r) => tracing::debug!(
                    set = %name,
                    wanted = r.wanted_bytes,
                    allocated = r.allocated_bytes,
                    missing = r.missing_bytes,
                    "preparation buffers kept warm"
                ),
                Err(e) => tracing::warn!(set = %name, "keeping preparation buffers warm failed: {e}"),
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start a thread to keep preparation buffers warm: {e}");
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Arc<ResidentSrs>>> {
        self.resident.lock().recover()
    }

    /// Bytes the device's stream-ordered pool holds now.
    fn pool_reserved(&self) -> Result<u64, ProveError> {
        let mut bytes = 0u64;
        // SAFETY: writes one integer; the device number is checked on the C
        // side.
        check(
            unsafe { super::ffi::pinprove_pool_reserved(self.ordinal(), &mut bytes) },
            "reading the device's memory pool",
        )?;
        Ok(bytes)
    }

    /// Grows the device's pool back to what proofs held (see
    /// [`pool_seen`](Self::pool_seen)), so that the next proof does not
    /// grow it on its way. Failing (too little device memory now) costs
    /// only that growth later.
    fn refill_pool(&self) {
        use std::sync::atomic::Ordering;
        let target = self.pool_target.load(Ordering::Relaxed);
        if target == 0 || self.lost.reason().is_some() {
            return;
        }
        // SAFETY: plain call; the device number is checked on the C side.
        let r = check(
            unsafe { super::ffi::pinprove_pool_reserve(self.ordinal(), target) },
            "reserving device memory for proofs",
        );
        match self.lost.note(r) {
            Ok(()) => tracing::debug!(
                device = self.config.device,
                bytes = target,
                "device memory pool reserved"
            ),
            Err(e) => tracing::warn!(
                device = self.config.device,
                bytes = target,
                "cannot reserve the device's memory pool: {e}"
            ),
        }
    }

    fn ordinal(&self) -> c_int {
        self.config.device as c_int
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            workers_per_device: self.config.workers_per_device,
            abc_layout: AbcLayout::Exact,
            uses_device: true,
            needs_srs_points: true,
            evaluates_recordings: true,
        }
    }

    fn extra_working_set(&self, shape: &CapacityHint, queries: Option<&QueryLengths>) -> u64 {
        // The prepared L, A and B scalars, their base indices and bitmaps (h
        // stays on the device), over each query's bases; without the
        // parameters' lengths, every variable in each. Once a proof of the
        // circuit was seen, what its proofs took instead.
        match queries {
            Some(q) => self
                .prep_shares
                .share(q, split::working_set(&self.pool, [q.l, q.a, q.b_g1])),
            None => split::working_set(&self.pool, [shape.inputs.saturating_add(shape.aux); 3]),
        }
    }

    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        self.lost.check(NAME)?;
        if self.config.srs_placement == SrsPlacement::Host {
            return Ok(0);
        }
        let Some(points) = srs.points() else {
            return Ok(0);
        };
        if self.is_resident(srs) {
            return Ok(0);
        }
        let key = srs_key(srs);
        let uploaded = {
            let _turn = self.device.exclusive();
            self.lost.note(ResidentSrs::upload(points, self.ordinal()))
        };
        match uploaded {
            Ok(r) => {
                tracing::info!(srs = %key.display(), bytes = r.bytes, "SRS bases resident on the device");
                self.lock().insert(key, Arc::new(r));
                // The upload handed the pool's cached memory back.
                self.refill_pool();
            }
            Err(e) if e.loses_device() => return Err(e),
            Err(e) => tracing::warn!(srs = %key.display(), error = %e, "SRS bases stay in host memory"),
        }
        // Device memory is not host memory: nothing for the host budget.
        Ok(0)
    }

    fn evict_srs(&self, srs: &Srs) {
        let key = srs_key(srs);
        self.lock().remove(&key);
        if self.prep_warm.lock().recover().remove(&key).is_some() {
            self.pool.stop_warm(&prep_warm_name(self.config.device, &key));
        }
    }

    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        let matrices = self
            .matrices
            .report()
            .into_iter()
            .map(|(circuit, bytes)| pinprove_groth16::ResidentSrs {
                srs: format!("matrices of {circuit}"),
                place: "device",
                bytes,
            });
        self.resident()
            .into_iter()
            .map(|r| pinprove_groth16::ResidentSrs {
                srs: r.srs.display().to_string(),
                place: "device",
                bytes: r.device_bytes,
            })
            .chain(matrices)
            .collect()
    }

    fn holds_srs(&self, srs: &Srs) -> bool {
        self.config.srs_placement == SrsPlacement::Host || self.is_resident(srs)
    }

    fn needs_host_points(&self, srs: &Srs) -> bool {
        // Streamed bases are read from the host; resident ones are not.
        self.config.srs_placement == SrsPlacement::Host || !self.is_resident(srs)
    }

    fn lost(&self) -> Option<String> {
        self.lost.reason()
    }

    fn gpu(&self) -> Option<usize> {
        Some(self.config.device)
    }

    fn hint(&self, srs: &Srs) -> Option<BackendHint> {
        use std::sync::atomic::Ordering;
        let key = srs_key(srs);
        let host_buffers = self
            .prep_warm
            .lock()
            .recover()
            .get(&key)?
            .iter()
            .map(|&b| b as u64)
            .collect();
        let preparation_bytes = self.prep_shares.most(srs.lengths())?;
        // The pool only grows between trims: what it holds now is what the
        // proofs so far needed at once.
        let now = self.pool_reserved().unwrap_or(0);
        self.pool_target.fetch_max(now, Ordering::Relaxed);
        let device_pool_bytes = {
            let mut seen = self.pool_seen.lock().recover();
            let s = seen.entry(key).or_default();
            *s = (*s).max(now);
            *s
        };
        Some(BackendHint {
            host_buffers,
            preparation_bytes,
            device_pool_bytes,
        })
    }

    fn apply_hint(&self, srs: &Srs, hint: &BackendHint) {
        use std::sync::atomic::Ordering;
        if self.lost.reason().is_some() {
            return;
        }
        let key = srs_key(srs);
        if hint.preparation_bytes > 0 {
            self.prep_shares.learn(*srs.lengths(), hint.preparation_bytes);
        }
        if !hint.host_buffers.is_empty() {
            self.keep_preparation_warm(&key, hint.host_buffers.iter().map(|&b| b as usize).collect());
        }
        if hint.device_pool_bytes > 0 {
            {
                let mut seen = self.pool_seen.lock().recover();
                let s = seen.entry(key).or_default();
                *s = (*s).max(hint.device_pool_bytes);
            }
            self.pool_target.fetch_max(hint.device_pool_bytes, Ordering::Relaxed);
            self.refill_pool();
        }
    }

    fn hold_recording(&self, recording: &Arc<precompiled::Recording>) -> Result<bool, ProveError> {
        self.lost.check(NAME)?;
        let held = self.lost.note(self.matrices.get(recording, self.ordinal()));
        // An upload handed the pool's cached memory back.
        self.refill_pool();
        match held {
            Ok(_) => Ok(true),
            Err(e) if e.loses_device() => Err(e),
            Err(e) => {
                tracing::warn!(
                    circuit = recording.circuit_id(),
                    error = %e,
                    "a circuit's matrices do not fit on the device; its proofs compute a/b/c on the host"
                );
                Ok(false)
            }
        }
    }

    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        self.lost.check(NAME)?;
        self.lost.note(self.queue(job))
    }
}

impl NativeBackend {
    /// Whether `srs`'s bases are on this device.
    fn is_resident(&self, srs: &Srs) -> bool {
        self.lock().contains_key(&srs_key(srs))
    }

    /// `start` on a device not known lost.
    fn queue(&self, mut job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        let n = check_job(&job)?;
        let key = srs_key(&job.srs);
        // Host points are needed only where the bases are not resident (the
        // engine frees them once every device holds its own copy).
        let points = job.srs.points();
        let m = domain_size(n)?;
        if m < 2 {
            return Err(backend_error(
                "a domain of one element (a circuit without constraints) has no h to compute",
            ));
        }
        let lg_m = m.trailing_zeros();
        if job.srs.lengths().h != m - 1 {
            return Err(backend_error(format!(
                "the parameters have {} h bases, the circuit's domain needs {}",
                job.srs.lengths().h,
                m - 1
            )));
        }
        let device = self.ordinal();
        let mut proofs = Vec::with_capacity(job.assignments.len());
        for mut asg in job.assignments.drain(..) {
            let t0 = Instant::now();
            // CPU side first, outside the device lock.
            let matrices = self.matrices_for(&mut asg)?;
            let abc = match &matrices {
                Some(_) => None,
                None => {
                    let [a, b, c] = asg.take_abc().ok_or(ProveError::AbcReleased)?;
                    if [a.len(), b.len(), c.len()] != [n; 3] {
                        return Err(backend_error(format!(
                            "a/b/c must hold exactly {n} evaluations (exact layout)"
                        )));
                    }
                    Some([a, b, c])
                }
            };
            let mut w = asg.into_witness();
            let resident = self.lock().get(&key).cloned();
            if resident.is_none() && points.is_none() {
                return Err(backend_error(
                    "the parameters' host points were freed and their bases are not resident on this device",
                ));
            }
            let mode = if resident.is_some() { Mode::Split } else { Mode::Dense };
            let prep = self.threads.install(|| split::prepare(&mut w, &self.pool, mode))?;
            let prep_bytes = prep.buffer_bytes();
            self.prep_shares
                .learn(*job.srs.lengths(), prep_bytes.iter().map(|&b| b as u64).sum());
            self.keep_preparation_warm(&key, prep_bytes);
            let q = |i: usize| resident.as_deref().map(|r| &r.queries[i]);
            // Events belong to the device current when they are created, and
            // are recorded on this device's streams.
            pinprove_mem::cuda::set_device(self.config.device).map_err(cuda_error)?;
            let events = self.events.proof().map_err(cuda_error)?;
            // Recorded after each of a, b and c is uploaded: pool fences.
            let uploaded = self.events.fences().map_err(cuda_error)?;

            let t1 = Instant::now();
            let turn = self
                .device
                .enter(job.urgent, |e: &PooledEvent| e.synchronize().map_err(cuda_error))?;
            let t2 = Instant::now();
            let (h_job, evaluated) = match (&matrices, abc) {
                (Some(mats), _) => {
                    let done = self.events.timing().map_err(cuda_error)?;
                    let job = HJob::begin_precompiled(mats, (&w.inputs, &w.aux), lg_m, &events.marks, &done)?;
                    (job, Some(done))
                }
                (None, Some([a, b, c])) => {
                    let job = HJob::begin(device, [&a, &b, &c], lg_m, &uploaded, &events.marks)?;
                    // Back to the pool now; it hands each buffer out again
                    // only once its copy has landed.
                    for (mut v, e) in [a, b, c].into_iter().zip(uploaded) {
                        v.set_use_fence(Box::new(EventFence::from(e)));
                    }
                    (job, None)
                }
                (None, None) => unreachable!("a/b/c are taken whenever the device does not compute them"),
            };
            let aux: &[Scalar] = &w.aux;
            let streamed = resident.is_none();
            if streamed {
                // sppark's own driver reads h synchronously.
                h_job.wait()?;
            }
            // With resident bases each call queues its MSM and returns at
            // once; with streamed ones it runs the MSM to completion.
            let mark = |k: usize| (!streamed).then(|| &**events.msms[k]);
            let mut t = [Duration::ZERO; 5];
            let h = timed(&mut t[0], || {
                msm::<G1>(
                    device,
                    points.map(|p| p.h()),
                    q(0),
                    MsmScalars::Device(h_job.scalars()),
                    mark(0),
                )
            })?;
            drop(h_job);
            let l = timed(&mut t[1], || {
                msm::<G1>(
                    device,
                    points.map(|p| p.l()),
                    q(1),
                    MsmScalars::Query(&prep.l, aux),
                    mark(1),
                )
            })?;
            let a = timed(&mut t[2], || {
                msm::<G1>(
                    device,
                    points.map(|p| p.a()),
                    q(2),
                    MsmScalars::Query(&prep.a, aux),
                    mark(2),
                )
            })?;
            let b_g1 = timed(&mut t[3], || {
                msm::<G1>(
                    device,
                    points.map(|p| p.b_g1()),
                    q(3),
                    MsmScalars::Query(&prep.b, aux),
                    mark(3),
                )
            })?;
            let b_g2 = timed(&mut t[4], || {
                msm::<G2>(
                    device,
                    points.map(|p| p.b_g2()),
                    q(4),
                    MsmScalars::Query(&prep.b, aux),
                    mark(4),
                )
            })?;
            if !streamed {
                turn.queued(Arc::clone(&events.msms[4]));
            } else {
                drop(turn);
            }
            let t3 = Instant::now();

            let listed = |p: &QueryScalars| p.list(aux).len();
            let batched = |p: &QueryScalars| p.ones_count + p.small_values.as_ref().map_or(0, |v| v.len());
            let phases = NativePhases {
                preparation: t1 - t0,
                device_wait: t2 - t1,
                queueing: t3 - t2,
                abc_bytes: if matrices.is_some() { 0 } else { 3 * n as u64 * 32 },
                witness_bytes: if matrices.is_some() {
                    ((w.inputs.len() + w.aux.len()) * 32) as u64
                } else {
                    0
                },
                // Host times; with resident bases `finish` replaces them by
                // GPU times.
                msm: [
                    (t[0], m - 1),
                    (t[1], prep.l.bases),
                    (t[2], prep.a.bases),
                    (t[3], prep.b.bases),
                    (t[4], prep.b.bases),
                ],
                pippenger_points: [
                    m - 1,
                    listed(&prep.l),
                    listed(&prep.a),
                    listed(&prep.b),
                    listed(&prep.b),
                ],
                batched_points: [
                    0,
                    batched(&prep.l),
                    batched(&prep.a),
                    batched(&prep.b),
                    batched(&prep.b),
                ],
                resident_bases: resident.is_some(),
                ..NativePhases::default()
            };
            let reads = DeviceReads {
                // All five MSMs are queued: the last one's mark follows
                // all of the proof's device work.
                done: (!streamed).then(|| Arc::clone(&events.msms[4])),
                _prep: prep,
                _witness: w,
                _resident: resident,
                _matrices: matrices,
            };
            proofs.push(DeviceProof {
                h,
                l,
                a,
                b_g1,
                b_g2,
                events,
                evaluated,
                phases,
                _reads: reads,
            });
        }
        Ok(Box::new(NativeStarted {
            srs: job.srs,
            randomness: job.randomness,
            proofs,
            last_phases: Arc::clone(&self.last_phases),
            lost: self.lost.clone(),
            threads: Arc::clone(&self.threads),
        }))
    }
}
impl NativeBackend {
    /// For an assignment whose a/b/c are pending, its circuit's matrices
    /// on this device (uploaded on first use); when they cannot be put
    /// there, a/b/c are computed on the host instead (the witness is kept
    /// either way).
    fn matrices_for(&self, asg: &mut ProvingAssignment) -> Result<Option<Arc<DeviceMatrices>>, ProveError> {
        let Some(recording) = asg.recording().cloned() else {
            return Ok(None);
        };
        match self.lost.note(self.matrices.get(&recording, self.ordinal())) {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.loses_device() => Err(e),
            Err(e) => {
                tracing::warn!(
                    circuit = recording.circuit_id(),
                    error = %e,
                    "a circuit's matrices do not fit on the device; a/b/c computed on the host"
                );
                self.threads
                    .install(|| precompiled::evaluate_pending(asg, AbcLayout::Exact))?;
                Ok(None)
            }
        }
    }
}

impl std::fmt::Debug for NativeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// sppark numbers only the GPUs it can use (Volta or newer, with
/// cooperative launch), and the C side selects GPUs by that number: the
/// backend for CUDA device `device` is right only when no GPU before it is
/// left out. Otherwise it would prove on another GPU than the one named.
fn check_sppark_numbering(device: usize) -> Result<(), ProveError> {
    for ordinal in 0..=device {
        let d = pinprove_mem::cuda::device_info(ordinal).map_err(cuda_error)?;
        let (major, minor) = d.compute_capability;
        if major < 7 || !d.cooperative_launch {
            return Err(backend_error(format!(
                "GPU {ordinal} ({}, compute capability {major}.{minor}{}) cannot run pinprove's kernels, \
                 and it numbers the GPUs after it differently from CUDA: hide it with CUDA_VISIBLE_DEVICES",
                d.name,
                if d.cooperative_launch {
                    ""
                } else {
                    ", no cooperative launch"
                },
            )));
        }
    }
    Ok(())
}

/// The pool's name for the preparation buffers kept warm for an SRS.
fn prep_warm_name(device: usize, key: &std::path::Path) -> String {
    format!("native-prep:gpu{device}:{}", key.display())
}
