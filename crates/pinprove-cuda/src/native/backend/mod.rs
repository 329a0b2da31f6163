//! The native backend: configuration, SRS residency and the `Backend`
//! implementation; `start` ([`start`]) queues a proof's device work, and
//! [`warm`] keeps what the next proof needs ready.

mod start;
mod warm;

#[cfg(test)]
pub(super) use start::{H_MSM_PART_BASES, WINDOW_BASES};
use warm::{KeptPreparation, prep_warm_name};

use std::collections::HashMap;
use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::runtime::PooledEvent;
use pinprove_groth16::{
    AbcLayout, Backend, BackendHint, Capabilities, CapacityHint, LostDevice, ProofBatch, ProveError, ProvingAssignment,
    QueryLengths, Srs, StartedProof, precompiled,
};
use pinprove_mem::PinnedPool;
use pinprove_mem::sync::Recover;

use super::h::Events;
use super::matrices::ResidentMatrices;
use super::resident::{ResidentSrs, srs_key};
use super::{NAME, NativeConfig, NativePhases, PlacementReport, SrsPlacement, backend_error, cuda_error};
use crate::config::MsmKernelKind;
use crate::device_queue::DeviceQueue;
use crate::info::OLDEST_SUPPORTED;
use crate::plan::{CircuitSizes, MatrixPlacement, Plan, SLACK};
use crate::split::{self, LearnedShares};

/// Bits per window of pinprove's MSM kernel over the backend's tables.
const TABLE_WINDOW_BITS: u32 = 16;

/// pinprove's GPU backend. See the module documentation.
pub struct NativeBackend {
    pool: Arc<PinnedPool>,
    config: NativeConfig,
    /// SRSs whose bases are on the device. A proof holds its own Arc, so
    /// an eviction during a proof frees the bases after it.
    resident: Mutex<HashMap<PathBuf, Arc<ResidentSrs>>>,
    /// Whose turn it is to queue device work (background proofs in pieces,
    /// urgent ones whole and between two pieces, all on the GPU's
    /// streams), and the completion events of the pieces queued, at most
    /// `queue_depth`. CPU work runs outside it.
    device: DeviceQueue<PooledEvent>,
    /// The CUDA events proofs use, reused (see [`EventPool`]).
    events: Events,
    last_phases: Arc<Mutex<Option<NativePhases>>>,
    /// The backend's own threads (see [`NativeConfig::prep_threads`]):
    /// scalar preparation before the device work, MSM sums after it; for
    /// background proofs, and for urgent ones.
    threads: Arc<rayon::ThreadPool>,
    urgent_threads: Arc<rayon::ThreadPool>,
    /// Set by the first error that leaves the device unusable.
    lost: LostDevice,
    /// Per SRS, the preparation buffers the pool keeps warm (see
    /// [`keep_preparation_warm`](Self::keep_preparation_warm)).
    prep_warm: Mutex<HashMap<PathBuf, KeptPreparation>>,
    /// Pre-compiled circuits' matrices where the device reads them.
    matrices: ResidentMatrices,
    /// Preparation memory each circuit's proofs took (what admission counts
    /// once a proof was seen).
    prep_shares: LearnedShares,
    /// Per SRS, the most device memory the device's pool held after its
    /// proofs (or an earlier process's, from a hint). The most of all is
    /// what the pool is grown back to after a large plain allocation
    /// trimmed it (resident bases, matrices) and ahead of a restarted
    /// process's first proof.
    pool_seen: Mutex<HashMap<PathBuf, u64>>,
    /// The device memory the backend may use: the limit, or the GPU's free
    /// memory at start when that is lower.
    usable: u64,
    /// Per SRS, its circuit's sizes and plan (see [`crate::plan`]).
    plans: Mutex<HashMap<PathBuf, Planned>>,
    /// Where each pre-compiled circuit's matrices are read from, decided
    /// once per circuit type.
    matrix_placements: Mutex<HashMap<String, MatrixPlacement>>,
    /// Device bytes proofs may take beside what circuits hold there (the
    /// device queue's room), as last reckoned.
    proof_room: std::sync::atomic::AtomicU64,
}

/// A circuit's sizes and its plan on this device.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planned {
    pub(super) sizes: CircuitSizes,
    pub(super) plan: Plan,
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
        let n = crate::runtime::device_count().map_err(cuda_error)?;
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
        let info = crate::runtime::device_info(config.device).map_err(cuda_error)?;
        let usable = config
            .memory_limit
            .map_or(info.free_memory, |l| l.min(info.free_memory));
        if let Some(limit) = config.memory_limit {
            // SAFETY: plain values; the call only records the limit for the
            // lane the first proof makes.
            let applied = unsafe { super::ffi::pinprove_lane_limit(config.device as c_int, limit) };
            if !applied {
                // Another backend in this process made the lane: its pool
                // stays as it is; proofs are still planned within the limit.
                tracing::debug!(
                    gpu = config.device,
                    "the device's memory pool was made before this limit"
                );
            }
        }
        tracing::info!(
            gpu = config.device,
            free = info.free_memory,
            limit = ?config.memory_limit,
            usable,
            "device memory pinprove may use"
        );
        let pool_of = |n: usize, name: &'static str| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(move |i| format!("{name}-{i}"))
                // A device worker waits for these threads' preparation.
                .start_handler(|_| pinprove_mem::mark_device_lane())
                .build()
                .map(Arc::new)
                .map_err(|e| backend_error(format!("starting the backend's threads: {e}")))
        };
        let device = DeviceQueue::new(config.queue_depth);
        device.set_room(usable.saturating_sub(SLACK));
        Ok(NativeBackend {
            urgent_threads: pool_of((threads / 4).max(2), "pinprove-native-urgent")?,
            threads: pool_of(threads, "pinprove-native")?,
            pool,
            config,
            resident: Mutex::new(HashMap::new()),
            device,
            events: Events::new(),
            last_phases: Arc::new(Mutex::new(None)),
            lost: LostDevice::default(),
            prep_warm: Mutex::new(HashMap::new()),
            matrices: ResidentMatrices::default(),
            prep_shares: LearnedShares::default(),
            pool_seen: Mutex::new(HashMap::new()),
            usable,
            plans: Mutex::new(HashMap::new()),
            matrix_placements: Mutex::new(HashMap::new()),
            proof_room: std::sync::atomic::AtomicU64::new(usable.saturating_sub(SLACK)),
        })
    }

    /// The device memory the backend may use.
    pub fn usable_memory(&self) -> u64 {
        self.usable
    }

    /// Each SRS's plan on this device (for status and benchmarks).
    pub fn plans(&self) -> Vec<(PathBuf, Plan)> {
        self.plans
            .lock()
            .recover()
            .iter()
            .map(|(k, p)| (k.clone(), p.plan))
            .collect()
    }

    /// Device bytes held across proofs (bases, matrices) by circuits other
    /// than `except`.
    fn held_elsewhere(&self, except: Option<&PathBuf>) -> u64 {
        let bases: u64 = self
            .lock()
            .iter()
            .filter(|(k, _)| Some(*k) != except)
            .map(|(_, r)| r.bytes)
            .sum();
        bases + self.matrices.device_bytes()
    }

    /// Bounds what proofs may reserve on the device by what circuits hold
    /// there now.
    fn update_room(&self) {
        let room = self.usable.saturating_sub(SLACK + self.held_elsewhere(None));
        self.proof_room.store(room, std::sync::atomic::Ordering::Relaxed);
        self.device.set_room(room);
    }

    /// `srs`'s plan: made the first time, from the memory left beside what
    /// other circuits hold on the device.
    pub(super) fn plan_for(&self, srs: &Srs) -> Result<Planned, ProveError> {
        let key = srs_key(srs);
        if let Some(p) = self.plans.lock().recover().get(&key) {
            return Ok(*p);
        }
        let sizes = CircuitSizes::of_srs(srs);
        let mut plan = Plan::new(&sizes, self.usable.saturating_sub(self.held_elsewhere(Some(&key))))
            .map_err(|e| backend_error(format!("GPU {}: {e}", self.config.device)))?;
        if self.config.srs_placement == SrsPlacement::Host && plan.bases_resident {
            // Told to stream.
            plan = Plan::streaming(&sizes, plan.usable)
                .map_err(|e| backend_error(format!("GPU {}: {e}", self.config.device)))?;
        }
        tracing::info!(
            srs = %key.display(),
            usable = plan.usable,
            bases_resident = plan.bases_resident,
            window = plan.window,
            proof_bytes = plan.proof_bytes,
            proofs_at_once = plan.proofs_at_once,
            "device memory planned"
        );
        let planned = Planned { sizes, plan };
        self.plans.lock().recover().insert(key, planned);
        Ok(planned)
    }

    /// Tables of precomputed copies of `r`'s bases for pinprove's MSM
    /// kernel, in the device memory left beside what circuits hold and
    /// `queue_depth` proofs of this one. A table that fails to build (the
    /// memory was taken meanwhile) leaves the query without one; only the
    /// loss of the device is an error.
    fn build_tables(&self, r: &mut ResidentSrs, planned: &Planned, key: &std::path::Path) -> Result<(), ProveError> {
        let proofs = self.config.queue_depth.max(1) as u64;
        let room = self
            .usable
            .saturating_sub(SLACK + self.held_elsewhere(None) + r.bytes + proofs * planned.plan.proof_bytes);
        let built = {
            let _turn = self.device.exclusive();
            self.lost.note(r.build_tables(TABLE_WINDOW_BITS, room))
        };
        match built {
            Ok(bytes) => tracing::info!(srs = %key.display(), bytes, room, "tables of bases built"),
            Err(e) if e.loses_device() => return Err(e),
            Err(e) => tracing::warn!(srs = %key.display(), error = %e, "a table of bases was not built"),
        }
        Ok(())
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

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Arc<ResidentSrs>>> {
        self.resident.lock().recover()
    }

    fn ordinal(&self) -> c_int {
        self.config.device as c_int
    }

    /// The threads that prepare and sum a proof (urgent or not).
    fn threads_for(&self, urgent: bool) -> &Arc<rayon::ThreadPool> {
        if urgent { &self.urgent_threads } else { &self.threads }
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

    fn evaluates_recording(&self, recording: &Arc<pinprove_groth16::precompiled::Recording>) -> bool {
        self.matrix_placement(recording) != MatrixPlacement::Host
    }

    fn extra_working_set(&self, shape: &CapacityHint, queries: Option<&QueryLengths>, urgent: bool) -> u64 {
        // The prepared L, A and B scalars, their base indices and bitmaps (h
        // stays on the device), over each query's bases; without the
        // parameters' lengths, every variable in each. Once a proof of the
        // circuit was seen, what its proofs took instead; and nothing for a
        // background proof once the buffers its lane prepares into are kept
        // (they are in the budget already). Counted again for each
        // partition, they kept half of a 2^26 pipeline's partitions waiting
        // 25 s for admission on the H200, the GPU idle meanwhile.
        match queries {
            Some(q) if !urgent && self.preparation_kept(q) => 0,
            Some(q) => self
                .prep_shares
                .share(q, split::working_set(&self.pool, [q.l, q.a, q.b_g1])),
            None => split::working_set(&self.pool, [shape.inputs.saturating_add(shape.aux); 3]),
        }
    }

    fn prepare(&self, srs: &Srs, assignment: &mut ProvingAssignment, urgent: bool) -> Result<(), ProveError> {
        // Urgent proofs only, whose buffers their circuit's kept set holds.
        // A background partition prepared ahead would hold its buffers
        // through the wait for the device, so every partition waiting
        // there needs a set of its own: measured on the H200 at 2^24 (16
        // partitions), 80 fresh buffers pinned in 52 s on the synthesis
        // threads, 1844 proofs per hour against 2190, the GPU 81.6% busy
        // while partitions waited against 94.5%. Prepared in `start`, they
        // reuse the few sets kept warm for the proofs at the device.
        if !urgent {
            return Ok(());
        }
        self.lost.check(NAME)?;
        let _ = srs;
        self.prepare_ahead(assignment)
    }

    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        self.lost.check(NAME)?;
        let planned = self.plan_for(srs)?;
        if !planned.plan.bases_resident {
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
            Ok(mut r) => {
                if self.config.msm_kernel == MsmKernelKind::Tables {
                    self.build_tables(&mut r, &planned, &key)?;
                }
                tracing::info!(srs = %key.display(), bytes = r.bytes, "SRS bases resident on the device");
                self.lock().insert(key, Arc::new(r));
                self.update_room();
                // The upload handed the pool's cached memory back.
                self.refill_pool();
            }
            Err(e) if e.loses_device() => return Err(e),
            Err(e) => {
                // Planned to fit, yet it did not: another process took the
                // memory. The circuit streams its bases instead.
                tracing::warn!(srs = %key.display(), error = %e, "SRS bases stay in host memory");
                let mut plans = self.plans.lock().recover();
                if let Some(p) = plans.get_mut(&key) {
                    p.plan = Plan::streamed(&p.sizes, p.plan.usable, crate::plan::MIN_WINDOW);
                }
            }
        }
        // Device memory is not host memory: nothing for the host budget.
        Ok(0)
    }

    fn partitions_per_start(&self, srs: &Srs) -> usize {
        self.partitions_per_start_of(&srs_key(srs))
    }

    fn evict_srs(&self, srs: &Srs) {
        let key = srs_key(srs);
        self.lock().remove(&key);
        self.plans.lock().recover().remove(&key);
        // A plan made again later is placed again with the recordings: a
        // placement decided under the old one may not fit the new one.
        self.matrix_placements.lock().recover().clear();
        self.update_room();
        if self.prep_warm.lock().recover().remove(&key).is_some() {
            self.pool.stop_warm(&prep_warm_name(self.config.device, &key));
        }
    }

    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        // Matrices in device memory (their bytes there), or streamed from
        // pinned host memory (each proof's chunk buffers).
        let matrices =
            self.matrices
                .report()
                .into_iter()
                .map(|(circuit, placement, bytes)| pinprove_groth16::ResidentSrs {
                    srs: format!("matrices of {circuit}"),
                    place: if placement == MatrixPlacement::Device {
                        "device"
                    } else {
                        "streamed"
                    },
                    bytes,
                });
        // What the plans stream instead: bases through windows (their
        // device bytes, per proof), matrices left on the host.
        let streamed: Vec<_> = self
            .plans
            .lock()
            .recover()
            .iter()
            .filter(|(_, p)| !p.plan.bases_resident)
            .map(|(k, p)| pinprove_groth16::ResidentSrs {
                srs: format!("{} (bases through windows of {} bases)", k.display(), p.plan.window),
                place: "streamed",
                bytes: 2 * p.plan.window as u64 * crate::plan::G2_BASE,
            })
            .collect();
        let host_matrices: Vec<_> = self
            .matrix_placements
            .lock()
            .recover()
            .iter()
            .filter(|(_, p)| **p == MatrixPlacement::Host)
            .map(|(id, _)| pinprove_groth16::ResidentSrs {
                srs: format!("matrices of {id}"),
                place: "host",
                bytes: 0,
            })
            .collect();
        self.resident()
            .into_iter()
            .map(|r| pinprove_groth16::ResidentSrs {
                srs: r.srs.display().to_string(),
                place: "device",
                bytes: r.device_bytes,
            })
            .chain(matrices)
            .chain(streamed)
            .chain(host_matrices)
            .collect()
    }

    fn holds_srs(&self, srs: &Srs) -> bool {
        // Planned to stream: the host copy is all it reads.
        self.is_resident(srs)
            || self
                .plans
                .lock()
                .recover()
                .get(&srs_key(srs))
                .is_some_and(|p| !p.plan.bases_resident)
    }

    fn needs_host_points(&self, srs: &Srs) -> bool {
        // Streamed bases are read from the host; resident ones are not.
        !self.is_resident(srs)
    }

    fn lost(&self) -> Option<String> {
        self.lost.reason()
    }

    fn gpu(&self) -> Option<usize> {
        Some(self.config.device)
    }

    fn hint(&self, srs: &Srs) -> Option<BackendHint> {
        self.learned(srs)
    }

    fn apply_hint(&self, srs: &Srs, hint: &BackendHint) {
        self.prepare_from(srs, hint);
    }

    fn hold_recording(&self, recording: &Arc<precompiled::Recording>) -> Result<bool, ProveError> {
        self.lost.check(NAME)?;
        // Streamed matrices are the host copy, pinned: the engine keeps it.
        let copy = self.matrix_copy(recording)?;
        Ok(copy.is_some_and(|c| c.placement() == MatrixPlacement::Device))
    }

    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        self.lost.check(NAME)?;
        self.lost.note(self.queue(job))
    }
}

impl NativeBackend {
    /// Whether `srs`'s bases are on this device.
    /// Partitions a start takes together for the SRS at `key`: where its
    /// bases stream, `partitions_sharing_bases`; resident bases cross PCIe
    /// once already.
    fn partitions_per_start_of(&self, key: &std::path::Path) -> usize {
        if self.lock().contains_key(key) {
            1
        } else {
            self.config.partitions_sharing_bases.max(1)
        }
    }

    fn is_resident(&self, srs: &Srs) -> bool {
        self.lock().contains_key(&srs_key(srs))
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
        let d = crate::runtime::device_info(ordinal).map_err(cuda_error)?;
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
        // sppark counts Volta in, but CUDA 13 builds no code for it: the
        // kernels would fail at their first launch.
        if ordinal == device && (major, minor) < OLDEST_SUPPORTED {
            return Err(backend_error(format!(
                "GPU {ordinal} ({}, compute capability {major}.{minor}) is older than the oldest architecture \
                 this build has kernels for (Turing, {}.{}): prove on another GPU",
                d.name, OLDEST_SUPPORTED.0, OLDEST_SUPPORTED.1
            )));
        }
    }
    Ok(())
}
