//! pinprove's own GPU backend: the whole proof's arithmetic on the GPU
//! (`cuda/native_h.cu` and `cuda/native_msm.cu`, on sppark).
//!
//! `start` prepares the L, A and B scalars on the CPU before taking the
//! device (see [`crate::split`]: one parallel pass over the aux assignment
//! sorts scalars into ones, zeros and the rest), then, under the device lock,
//! queues the proof's device work on the GPU's streams (`cuda/lane.cuh`) and
//! returns without waiting for it: a/b/c's uploads in chunks on the copy
//! stream, with the NTTs of each vector waiting on the device for that
//! vector only; each a/b/c buffer goes back to the pool at once with a
//! CUDA-event fence, so the pool reuses it the moment its copy has landed; h
//! is computed on the device and feeds the h MSM without a round trip
//! through host memory; the L, A and B MSMs — bit-valued terms by batched
//! addition, the rest by Pippenger over gathered bases — leave their bucket
//! sums in pinned host memory. `finish` waits for those and sums them on the
//! host. So the GPU always has the next proof queued behind the running one
//! (up to [`NativeConfig::queue_depth`] proofs), and no host step — scalar
//! preparation, result sums, the next partition's synthesis — leaves it
//! idle.
//!
//! SRS placement: [`SrsPlacement::Device`] (the default) uploads each
//! query's bases to device memory once, in `prepare_srs`, and MSMs read them
//! from HBM; when that fails (too little device memory) or with
//! [`SrsPlacement::Host`] the bases stream from the SRS's pinned pool
//! buffers on every MSM through sppark's own Pippenger driver, every scalar
//! goes through Pippenger, and `start` runs the MSMs to completion.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use group::Group;
use pinprove_groth16::{
    AbcLayout, Backend, Capabilities, CapacityHint, LostDevice, Proof, ProveError, ProvingJob, Srs, SrsPoints,
    StartedProof, Witness, assemble, check_job,
};
use pinprove_mem::PinnedPool;
use pinprove_mem::cuda::{Event, EventFence};

use crate::fault::device_error;
use crate::split::{self, Mode, QueryScalars};
use pinprove_mem::sync::Recover;

const NAME: &str = "native";

unsafe extern "C" {
    // cuda/native_h.cu
    fn pinprove_h_begin(
        out: *mut *mut c_void,
        device: c_int,
        a: *const Scalar,
        b: *const Scalar,
        c: *const Scalar,
        n: usize,
        lg_m: u32,
        uploaded: *const *mut c_void,
        marks: *const *mut c_void,
    ) -> sppark::Error;
    fn pinprove_h_result(job: *mut c_void, h: *mut *const Scalar, ready: *mut *mut c_void);
    fn pinprove_h_wait(job: *mut c_void) -> sppark::Error;
    #[cfg(test)]
    fn pinprove_h_download(job: *mut c_void, h_out: *mut Scalar) -> sppark::Error;
    fn pinprove_h_free(job: *mut c_void);
    // cuda/native_msm.cu
    fn pinprove_msm_g1(
        out: *mut blst_p1,
        device: c_int,
        bases: *const blst_p1_affine,
        scalars: *const Scalar,
        d_scalars: *const Scalar,
        n: usize,
        mont: bool,
    ) -> sppark::Error;
    fn pinprove_msm_g2(
        out: *mut blst_p2,
        device: c_int,
        bases: *const blst_p2_affine,
        scalars: *const Scalar,
        d_scalars: *const Scalar,
        n: usize,
        mont: bool,
    ) -> sppark::Error;
    fn pinprove_msm_resident_g1_begin(
        out: *mut *mut c_void,
        resident: *const c_void,
        call: *const MsmCall,
    ) -> sppark::Error;
    fn pinprove_msm_resident_g2_begin(
        out: *mut *mut c_void,
        resident: *const c_void,
        call: *const MsmCall,
    ) -> sppark::Error;
    fn pinprove_msm_wait(pending: *const c_void) -> sppark::Error;
    fn pinprove_msm_parts(pending: *const c_void) -> usize;
    fn pinprove_msm_g1_part(pending: *const c_void, i: usize, out: *mut blst_p1);
    fn pinprove_msm_g2_part(pending: *const c_void, i: usize, out: *mut blst_p2);
    fn pinprove_msm_free(pending: *mut c_void);
    fn pinprove_resident_g1(
        out: *mut *mut c_void,
        device: c_int,
        bases: *const blst_p1_affine,
        n: usize,
    ) -> sppark::Error;
    fn pinprove_resident_g2(
        out: *mut *mut c_void,
        device: c_int,
        bases: *const blst_p2_affine,
        n: usize,
    ) -> sppark::Error;
    fn pinprove_resident_g1_free(p: *mut c_void);
    fn pinprove_resident_g2_free(p: *mut c_void);
}

fn backend_error(message: impl Into<String>) -> ProveError {
    ProveError::Backend {
        backend: NAME,
        message: message.into(),
    }
}

fn check(err: sppark::Error, what: &str) -> Result<(), ProveError> {
    if err.code == 0 {
        Ok(())
    } else {
        let code = err.code;
        Err(device_error(NAME, code, format!("{what}: {}", String::from(err))))
    }
}

/// Where the MSM bases live while proofs run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum SrsPlacement {
    /// Uploaded to device memory once per SRS (falls back to `Host` when
    /// the device has too little memory).
    #[default]
    Device,
    /// Streamed from the SRS's pinned host buffers for every MSM.
    Host,
}

/// How the native backend runs.
#[derive(Clone, Copy, Debug)]
pub struct NativeConfig {
    /// Where MSM bases live.
    pub srs_placement: SrsPlacement,
    /// Workers the engine should run per device.
    pub workers_per_device: usize,
    /// The GPU, by CUDA ordinal (the order sppark enumerates them in when
    /// every visible GPU is Volta or newer, as on any machine this runs on).
    pub device: usize,
    /// Proofs whose device work may be queued on the GPU at once (resident
    /// bases): with 2, one runs while the next waits behind it, so the GPU
    /// never waits for the host. Each holds its device memory (a/b/c,
    /// scalars, MSM scratch) until it has run.
    pub queue_depth: usize,
    /// Threads of the backend's own pool, which prepares scalars before the
    /// device work and adds up the MSMs' results after it (0: half the
    /// CPUs, at least 2). Not rayon's global pool: synthesis keeps that one
    /// saturated, and a preparation queued behind it would leave the GPU
    /// without work.
    pub prep_threads: usize,
}

impl Default for NativeConfig {
    fn default() -> Self {
        NativeConfig {
            srs_placement: SrsPlacement::Device,
            workers_per_device: 2,
            device: 0,
            queue_depth: 2,
            prep_threads: 0,
        }
    }
}

/// One query's bases in device memory.
struct Resident {
    handle: *mut c_void,
    g2: bool,
}

// SAFETY: the handle names device memory and its size; queued device work
// only reads it (each proof holds an Arc until its device work completed),
// and it is freed once, in Drop. Nothing ties it to the thread that created
// it.
unsafe impl Send for Resident {}
// SAFETY: as for Send: shared use only reads.
unsafe impl Sync for Resident {}

impl Drop for Resident {
    fn drop(&mut self) {
        // SAFETY: the handle came from the matching pinprove_resident_* and
        // is freed exactly once, here; an Arc keeps it alive through any
        // proof that uses it.
        unsafe {
            if self.g2 {
                pinprove_resident_g2_free(self.handle)
            } else {
                pinprove_resident_g1_free(self.handle)
            }
        }
    }
}

/// An SRS's five queries on the device: h, l, a, b_g1, b_g2.
struct ResidentSrs {
    queries: [Resident; 5],
    bytes: u64,
}

fn resident<C: Curve>(device: c_int, bases: &[C::Affine]) -> Result<Resident, ProveError> {
    let mut handle = std::ptr::null_mut();
    // SAFETY: `bases` holds `len` points; the call copies them to the device
    // before returning and writes one handle.
    check(
        unsafe { C::upload(&mut handle, device, bases.as_ptr(), bases.len()) },
        C::UPLOAD,
    )?;
    Ok(Resident { handle, g2: C::G2 })
}

impl ResidentSrs {
    fn upload(p: &SrsPoints, device: c_int) -> Result<ResidentSrs, ProveError> {
        let bytes = (std::mem::size_of_val(p.h())
            + std::mem::size_of_val(p.l())
            + std::mem::size_of_val(p.a())
            + std::mem::size_of_val(p.b_g1())
            + std::mem::size_of_val(p.b_g2())) as u64;
        Ok(ResidentSrs {
            queries: [
                resident::<G1>(device, p.h())?,
                resident::<G1>(device, p.l())?,
                resident::<G1>(device, p.a())?,
                resident::<G1>(device, p.b_g1())?,
                resident::<G2>(device, p.b_g2())?,
            ],
            bytes,
        })
    }
}

/// An SRS is known by its file, or by where its points live.
fn srs_key(srs: &Srs) -> Option<PathBuf> {
    srs.stats()
        .path
        .clone()
        .or_else(|| srs.points().map(|p| PathBuf::from(format!("mem:{:p}", p.h().as_ptr()))))
}

/// pinprove's GPU backend. See the module documentation.
pub struct NativeBackend {
    pool: Arc<PinnedPool>,
    config: NativeConfig,
    /// SRSs whose bases are on the device. A proof holds its own Arc, so
    /// an eviction during a proof frees the bases after it.
    resident: Mutex<HashMap<PathBuf, Arc<ResidentSrs>>>,
    /// Held while one proof queues its device work (proofs queue whole, one
    /// behind the other, on the GPU's streams); it holds the completion
    /// events of the proofs still queued, oldest first, at most
    /// `queue_depth`. CPU work runs outside it.
    device: Mutex<VecDeque<Arc<Event>>>,
    last_phases: Arc<Mutex<Option<NativePhases>>>,
    /// The backend's own threads (see [`NativeConfig::prep_threads`]):
    /// scalar preparation before the device work, MSM sums after it.
    threads: Arc<rayon::ThreadPool>,
    /// Set by the first error that leaves the device unusable.
    lost: LostDevice,
}

/// Where the time of one assignment's `start` went.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct NativePhases {
    /// Scalar preparation on the CPU, before the device lock.
    pub preparation: Duration,
    /// Waiting for the device lock (another worker queuing its proof) and
    /// for room in the device queue (the oldest queued proof to run).
    pub device_wait: Duration,
    /// Queuing the proof's device work (returns before it runs, except
    /// with streamed bases, where the MSMs run to completion here).
    pub queueing: Duration,
    /// Summing the MSMs' results on the host, in `finish` (includes
    /// waiting for the device work to complete).
    pub sums: Duration,
    /// GPU time of the a/b/c uploads (first copy queued to last landed).
    pub upload: Duration,
    /// Bytes of a/b/c uploaded for h.
    pub abc_bytes: u64,
    /// GPU time from the compute stream reaching the proof to h
    /// computed (seven NTTs and the quotient, and any wait for a/b/c's
    /// uploads).
    pub h: Duration,
    /// The MSMs h, l, a, b (G1), b (G2): GPU time (host time with
    /// streamed bases) and number of bases each.
    pub msm: [(Duration, usize); 5],
    /// Of each MSM's bases, how many went through Pippenger …
    pub pippenger_points: [usize; 5],
    /// … and how many were summed by batched addition: scalar 1, or a
    /// small value added bit plane by bit plane (the rest had scalar 0).
    pub batched_points: [usize; 5],
    /// Whether the bases were resident in device memory.
    pub resident_bases: bool,
}

impl NativePhases {
    /// Names of the MSMs, in the order of [`NativePhases::msm`].
    pub const MSM_NAMES: [&'static str; 5] = ["h", "l", "a", "b_g1", "b_g2"];

    /// GPU time: h and the MSMs.
    pub fn device(&self) -> Duration {
        self.h + self.msm.iter().map(|(t, _)| *t).sum::<Duration>()
    }
}

impl std::fmt::Debug for NativeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Where one SRS's bases are, for status reports.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PlacementReport {
    /// The SRS's file.
    pub srs: PathBuf,
    /// Device bytes its bases take.
    pub device_bytes: u64,
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
            .build()
            .map_err(|e| backend_error(format!("starting the backend's threads: {e}")))?;
        Ok(NativeBackend {
            threads: Arc::new(threads),
            pool,
            config,
            resident: Mutex::new(HashMap::new()),
            device: Mutex::new(VecDeque::new()),
            last_phases: Arc::new(Mutex::new(None)),
            lost: LostDevice::default(),
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

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Arc<ResidentSrs>>> {
        self.resident.lock().recover()
    }

    fn ordinal(&self) -> c_int {
        self.config.device as c_int
    }
}

/// G1 or G2 for the MSM calls.
trait Curve {
    type Affine;
    type Raw: Default;
    type Point: Copy + Send + Group;
    const G2: bool;
    const UPLOAD: &'static str;
    const MSM: &'static str;
    /// # Safety
    /// As `pinprove_resident_g1`.
    unsafe fn upload(out: *mut *mut c_void, device: c_int, bases: *const Self::Affine, n: usize) -> sppark::Error;
    /// # Safety
    /// As `pinprove_msm_g1`.
    unsafe fn host(
        out: *mut Self::Raw,
        device: c_int,
        bases: *const Self::Affine,
        scalars: *const Scalar,
        d_scalars: *const Scalar,
        n: usize,
    ) -> sppark::Error;
    /// # Safety
    /// As `pinprove_msm_resident_g1_begin`.
    unsafe fn begin(out: *mut *mut c_void, resident: *const c_void, call: &MsmCall) -> sppark::Error;
    /// # Safety
    /// As `pinprove_msm_g1_part`: `pending` from this curve's `begin`.
    unsafe fn part(pending: *const c_void, i: usize, out: *mut Self::Raw);
    fn point(raw: Self::Raw) -> Self::Point;
}

struct G1;
struct G2;

/// One MSM over resident bases: `msm_call_t` in `cuda/native_msm.cu`.
#[repr(C)]
struct MsmCall {
    scalars: *const Scalar,
    d_scalars: *const Scalar,
    d_ready: *mut c_void,
    ones: *const u32,
    idx: *const u32,
    n: usize,
    small_idx: *const u32,
    small_values: *const u64,
    n_small: usize,
    small_bits: u32,
    mont: bool,
    mark: *mut c_void,
    max_batch: usize,
}

/// `impl Curve` for one group: the same forwarding over that group's FFI.
macro_rules! curve {
    ($curve:ident, $affine:ty, $raw:ty, $point:ty, $g2:expr, $name:literal,
     $upload:ident, $host:ident, $begin:ident, $part:ident) => {
        impl Curve for $curve {
            type Affine = $affine;
            type Raw = $raw;
            type Point = $point;
            const G2: bool = $g2;
            const UPLOAD: &'static str = concat!("uploading ", $name, " bases");
            const MSM: &'static str = concat!($name, " MSM");
            unsafe fn upload(out: *mut *mut c_void, device: c_int, bases: *const $affine, n: usize) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $upload(out, device, bases, n) }
            }
            unsafe fn host(
                out: *mut $raw,
                device: c_int,
                bases: *const $affine,
                scalars: *const Scalar,
                d_scalars: *const Scalar,
                n: usize,
            ) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $host(out, device, bases, scalars, d_scalars, n, true) }
            }
            unsafe fn begin(out: *mut *mut c_void, resident: *const c_void, call: &MsmCall) -> sppark::Error {
                // SAFETY: forwarded contract.
                unsafe { $begin(out, resident, call) }
            }
            unsafe fn part(pending: *const c_void, i: usize, out: *mut $raw) {
                // SAFETY: forwarded contract.
                unsafe { $part(pending, i, out) }
            }
            fn point(raw: $raw) -> $point {
                let mut p = <$point>::identity();
                *p.as_mut() = raw;
                p
            }
        }
    };
}

curve!(
    G1,
    blst_p1_affine,
    blst_p1,
    G1Projective,
    false,
    "G1",
    pinprove_resident_g1,
    pinprove_msm_g1,
    pinprove_msm_resident_g1_begin,
    pinprove_msm_g1_part
);
curve!(
    G2,
    blst_p2_affine,
    blst_p2,
    G2Projective,
    true,
    "G2",
    pinprove_resident_g2,
    pinprove_msm_g2,
    pinprove_msm_resident_g2_begin,
    pinprove_msm_g2_part
);

/// The scalars of one MSM.
enum MsmScalars<'a> {
    /// h, on the device: `len` scalars at a device address.
    Device(DeviceScalars<'a>),
    /// A prepared query; `aux` stands for its list when it has none.
    Query(&'a QueryScalars, &'a [Scalar]),
}

/// Scalars in device memory, borrowed from the job that owns them,
/// readable once `ready` (a CUDA event) has completed.
struct DeviceScalars<'a> {
    ptr: *const Scalar,
    len: usize,
    ready: *mut c_void,
    _job: std::marker::PhantomData<&'a HJob>,
}

/// An MSM queued on the device; [`Msm::sum`] waits for it and sums its
/// results on the host. Dropping it waits for its device work, so the host
/// memory it reads (which its owner must keep alive until then) and its
/// result buffer are never in use by the device afterwards.
enum Msm<C: Curve> {
    Pending(*mut c_void),
    Done(C::Point),
}

// SAFETY: the pending handle is a C++ object that any thread may wait on,
// sum and free (CUDA events are not tied to threads); it is used by one
// owner at a time.
unsafe impl<C: Curve> Send for Msm<C> {}

/// A pending MSM whose device work has completed: its results are only
/// read from here on.
#[derive(Clone, Copy)]
struct Completed(*const c_void);

// SAFETY: after pinprove_msm_wait succeeded nothing writes the pending
// MSM's results any more; pinprove_msm_*_part only reads them, from any
// number of threads at once.
unsafe impl Send for Completed {}
// SAFETY: as for Send.
unsafe impl Sync for Completed {}

impl Completed {
    // A method, so that closures capture the Sync wrapper, not the pointer.
    fn raw(self) -> *const c_void {
        self.0
    }
}

impl<C: Curve> Msm<C> {
    /// Waits for the device work, then adds up the MSM's parts on `threads`.
    fn sum(&mut self, threads: &rayon::ThreadPool) -> Result<C::Point, ProveError> {
        use rayon::prelude::*;
        match self {
            Msm::Done(p) => Ok(*p),
            Msm::Pending(raw) => {
                // SAFETY: `raw` came from C::begin and is not freed yet.
                check(unsafe { pinprove_msm_wait(*raw) }, C::MSM)?;
                let done = Completed(*raw);
                // SAFETY: as above.
                let parts = unsafe { pinprove_msm_parts(done.raw()) };
                let p = threads.install(|| {
                    (0..parts)
                        .into_par_iter()
                        .map(|i| {
                            let mut out = C::Raw::default();
                            // SAFETY: the work has completed (waited for
                            // above), i is below the part count, and the
                            // handle lives until `self` is replaced below.
                            unsafe { C::part(done.raw(), i, &mut out) };
                            C::point(out)
                        })
                        .reduce(C::Point::identity, |a, b| a + b)
                });
                *self = Msm::Done(p); // drops the pending handle
                Ok(p)
            }
        }
    }
}

impl<C: Curve> Drop for Msm<C> {
    fn drop(&mut self) {
        if let Msm::Pending(raw) = *self {
            // SAFETY: from C::begin, freed once; the call waits for the
            // device work first.
            unsafe { pinprove_msm_free(raw) }
        }
    }
}

/// Points per Pippenger batch; 0 leaves the C side's default (2^24).
/// Tests set a small value to run the batch loop on small inputs.
static MAX_BATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Queues one MSM over a query's bases (resident ones when given: then it
/// returns at once; streamed bases run to completion here). `mark` (a
/// timing event) is recorded after the MSM's device work.
fn msm<C: Curve>(
    device: c_int,
    bases: &[C::Affine],
    resident: Option<&Resident>,
    scalars: MsmScalars<'_>,
    mark: Option<&Event>,
) -> Result<Msm<C>, ProveError> {
    let (list, d_scalars, d_ready, n, idx, ones, small) = match &scalars {
        MsmScalars::Device(d) => (&[][..], d.ptr, d.ready, d.len, None, None, None),
        MsmScalars::Query(q, aux) => {
            let list = q.list(aux);
            if q.bases != bases.len() {
                return Err(backend_error(format!(
                    "{} assignments for {} bases in a {}",
                    q.bases,
                    bases.len(),
                    C::MSM
                )));
            }
            let idx = q.idx.as_deref();
            if idx.is_some_and(|i| i.len() != list.len()) {
                return Err(backend_error("an index per listed scalar"));
            }
            let small = match (&q.small_idx, &q.small_values) {
                (Some(i), Some(v)) if i.len() == v.len() && q.small_bits <= 64 => Some((&i[..], &v[..], q.small_bits)),
                (None, None) => None,
                _ => return Err(backend_error("small values without their bases")),
            };
            let ones = q.ones.as_deref();
            (
                list,
                std::ptr::null(),
                std::ptr::null_mut(),
                list.len(),
                idx,
                ones,
                small,
            )
        }
    };
    let whole = idx.is_none() && ones.is_none() && small.is_none();
    if whole && n != bases.len() {
        return Err(backend_error(format!(
            "{n} scalars for {} bases in a {}",
            bases.len(),
            C::MSM
        )));
    }
    if ones.is_some_and(|o| o.len() * 32 < bases.len().next_multiple_of(1024)) {
        return Err(backend_error("a bitmap shorter than its bases"));
    }
    let ptr = |s: Option<&[u32]>| s.map_or(std::ptr::null(), <[u32]>::as_ptr);
    match resident {
        Some(r) => {
            let call = MsmCall {
                scalars: list.as_ptr(),
                d_scalars,
                d_ready,
                ones: ptr(ones),
                idx: ptr(idx),
                n,
                small_idx: ptr(small.map(|s| s.0)),
                small_values: small.map_or(std::ptr::null(), |s| s.1.as_ptr()),
                n_small: small.map_or(0, |s| s.0.len()),
                small_bits: small.map_or(0, |s| s.2),
                mont: true,
                mark: mark.map_or(std::ptr::null_mut(), Event::as_raw),
                max_batch: MAX_BATCH.load(std::sync::atomic::Ordering::Relaxed),
            };
            let mut raw = std::ptr::null_mut();
            // SAFETY: the resident handle is alive (borrowed) and holds
            // `bases.len()` points; `list` holds `n` scalars, `idx` (if any)
            // n indices below bases.len() (as `split::prepare` builds them),
            // `ones` a padded bitmap over the bases (checked above), the
            // small values as many base indices below bases.len(), or
            // `d_scalars` n device scalars kept alive by the borrowed job and
            // readable after `d_ready`. The caller keeps the host inputs and
            // the resident bases alive until the returned Msm is dropped,
            // which waits for the device work.
            check(unsafe { C::begin(&mut raw, r.handle, &call) }, C::MSM)?;
            Ok(Msm::Pending(raw))
        }
        None if !whole => Err(backend_error("split scalars need resident bases")),
        None => {
            let mut out = C::Raw::default();
            // SAFETY: `bases` holds n points (checked), paired one to one
            // with the n scalars in `list` or at `d_scalars`, which the
            // caller has waited for. The call returns after its device work
            // completed.
            check(
                unsafe { C::host(&mut out, device, bases.as_ptr(), list.as_ptr(), d_scalars, n) },
                C::MSM,
            )?;
            Ok(Msm::Done(C::point(out)))
        }
    }
}

/// Runs `f`, noting its time in `slot`.
fn timed<T>(slot: &mut Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    *slot = t.elapsed();
    out
}

/// h of one proof, computed on the device (or being computed).
struct HJob {
    raw: *mut c_void,
    m: usize,
}

/// The CUDA timing events of one proof.
struct ProofEvents {
    /// Timing: before and after the uploads (copy stream), before the first
    /// transform and after h (compute stream).
    marks: [Event; 4],
    /// Timing: after each MSM (compute stream). The last one completes
    /// when all of the proof's device work has.
    msms: [Arc<Event>; 5],
}

impl ProofEvents {
    fn new() -> Result<Self, pinprove_mem::cuda::CudaError> {
        Ok(ProofEvents {
            marks: [Event::timing()?, Event::timing()?, Event::timing()?, Event::timing()?],
            msms: [
                Arc::new(Event::timing()?),
                Arc::new(Event::timing()?),
                Arc::new(Event::timing()?),
                Arc::new(Event::timing()?),
                Arc::new(Event::timing()?),
            ],
        })
    }
}

/// Three fence events, one per a/b/c upload.
fn fences() -> Result<[Event; 3], pinprove_mem::cuda::CudaError> {
    Ok([Event::fence()?, Event::fence()?, Event::fence()?])
}

impl HJob {
    /// Queues the uploads of a/b/c and the transforms. `uploaded[k]` is
    /// recorded after vector k's copy; the marks as [`ProofEvents::marks`].
    fn begin(
        device: c_int,
        abc: [&[Scalar]; 3],
        lg_m: u32,
        uploaded: &[Event; 3],
        marks: &[Event; 4],
    ) -> Result<HJob, ProveError> {
        let n = abc[0].len();
        if abc.iter().any(|v| v.len() != n) {
            return Err(backend_error("a, b and c differ in length"));
        }
        let events = uploaded.each_ref().map(Event::as_raw);
        let marks = marks.each_ref().map(Event::as_raw);
        let mut raw = std::ptr::null_mut();
        // SAFETY: a, b and c hold n scalars each (checked) and stay valid
        // until their `uploaded` event completes: the caller keeps them
        // alive or hands them to the pool fenced by those events. The events
        // are live for the call. Scalar is blst's Montgomery-form fr, the
        // layout of sppark's fr_t.
        check(
            unsafe {
                pinprove_h_begin(
                    &mut raw,
                    device,
                    abc[0].as_ptr(),
                    abc[1].as_ptr(),
                    abc[2].as_ptr(),
                    n,
                    lg_m,
                    events.as_ptr(),
                    marks.as_ptr(),
                )
            },
            "h on the GPU",
        )?;
        Ok(HJob { raw, m: 1 << lg_m })
    }

    /// h's m − 1 coefficients on the device, once computed.
    fn scalars(&self) -> DeviceScalars<'_> {
        let mut ptr = std::ptr::null();
        let mut ready = std::ptr::null_mut();
        // SAFETY: the job is live; the call writes a device address and
        // the job's event handle, valid while the job is.
        unsafe { pinprove_h_result(self.raw, &mut ptr, &mut ready) };
        DeviceScalars {
            ptr,
            len: self.m - 1,
            ready,
            _job: std::marker::PhantomData,
        }
    }

    /// Blocks until h is computed.
    fn wait(&self) -> Result<(), ProveError> {
        // SAFETY: the job is live.
        check(unsafe { pinprove_h_wait(self.raw) }, "h on the GPU")
    }

    /// h's coefficients in host memory (for checks).
    #[cfg(test)]
    fn download(&self) -> Result<Vec<Scalar>, ProveError> {
        let mut h = vec![Scalar::from(0u64); self.m - 1];
        // SAFETY: `h` holds m − 1 scalars, as the call writes.
        check(
            unsafe { pinprove_h_download(self.raw, h.as_mut_ptr()) },
            "downloading h",
        )?;
        Ok(h)
    }
}

impl Drop for HJob {
    fn drop(&mut self) {
        // SAFETY: from pinprove_h_begin, freed once; the device memory is
        // released in stream order, after the work queued that reads it.
        unsafe { pinprove_h_free(self.raw) }
    }
}

/// One assignment's proof: its MSMs queued on the device (or done), and
/// what their device work reads.
struct DeviceProof {
    // Declared (so dropped) first: each waits for its device work, which
    // reads the host memory and the resident bases held below.
    h: Msm<G1>,
    l: Msm<G1>,
    a: Msm<G1>,
    b_g1: Msm<G1>,
    b_g2: Msm<G2>,
    events: ProofEvents,
    /// With streamed bases the MSM times are already in (host times: the
    /// MSMs ran to completion in `start`); else they come from `events`.
    phases: NativePhases,
    _prep: split::Prepared,
    _witness: Witness,
    _resident: Option<Arc<ResidentSrs>>,
}

impl DeviceProof {
    /// GPU times from the proof's events, once its work has completed.
    fn device_times(&mut self) -> Result<(), pinprove_mem::cuda::CudaError> {
        let [up0, up1, h0, h1] = &self.events.marks;
        self.phases.upload = up1.elapsed_since(up0)?;
        self.phases.h = h1.elapsed_since(h0)?;
        if self.phases.resident_bases {
            let mut prev = h1;
            for (slot, e) in self.phases.msm.iter_mut().zip(&self.events.msms) {
                slot.0 = e.elapsed_since(prev)?;
                prev = e;
            }
        }
        Ok(())
    }
}

struct NativeStarted {
    srs: Arc<Srs>,
    randomness: Vec<(Scalar, Scalar)>,
    proofs: Vec<DeviceProof>,
    last_phases: Arc<Mutex<Option<NativePhases>>>,
    lost: LostDevice,
    threads: Arc<rayon::ThreadPool>,
}

impl StartedProof for NativeStarted {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        let lost = self.lost.clone();
        // Proofs queued before the device was lost fail on their own
        // errors; no need to check first.
        lost.note((*self).sum_and_assemble())
    }
}

impl NativeStarted {
    fn sum_and_assemble(self) -> Result<Vec<Proof>, ProveError> {
        let NativeStarted {
            srs,
            randomness,
            proofs,
            last_phases,
            threads,
            ..
        } = self;
        let mut out = Vec::with_capacity(proofs.len());
        for (mut p, (r, s)) in proofs.into_iter().zip(randomness) {
            let t = Instant::now();
            // In the order the device finishes them; each one's windows
            // are summed in parallel, so little is left after the last.
            let h = p.h.sum(&threads)?;
            let l = p.l.sum(&threads)?;
            let a = p.a.sum(&threads)?;
            let b_g1 = p.b_g1.sum(&threads)?;
            let b_g2 = p.b_g2.sum(&threads)?;
            p.phases.sums = t.elapsed();
            p.device_times().map_err(cuda_error)?;
            tracing::debug!(phases = ?p.phases, "native proof");
            *last_phases.lock().recover() = Some(p.phases);
            out.push(assemble(&srs, r, s, a, b_g1, b_g2, h, l));
        }
        Ok(out)
    }
}

fn cuda_error(e: pinprove_mem::cuda::CudaError) -> ProveError {
    device_error(NAME, e.code, e.to_string())
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
        }
    }

    fn extra_working_set(&self, shape: &CapacityHint) -> u64 {
        // The prepared L, A and B scalars and their base indices (h stays on
        // the device).
        split::working_set(shape.inputs, shape.aux)
    }

    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        self.lost.check(NAME)?;
        if self.config.srs_placement == SrsPlacement::Host {
            return Ok(0);
        }
        let (Some(key), Some(points)) = (srs_key(srs), srs.points()) else {
            return Ok(0);
        };
        if self.lock().contains_key(&key) {
            return Ok(0);
        }
        let uploaded = {
            let _device = self.device.lock().recover();
            self.lost.note(ResidentSrs::upload(points, self.ordinal()))
        };
        match uploaded {
            Ok(r) => {
                tracing::info!(srs = %key.display(), bytes = r.bytes, "SRS bases resident on the device");
                self.lock().insert(key, Arc::new(r));
            }
            Err(e) if e.loses_device() => return Err(e),
            Err(e) => tracing::warn!(srs = %key.display(), error = %e, "SRS bases stay in host memory"),
        }
        // Device memory is not host memory: nothing for the host budget.
        Ok(0)
    }

    fn evict_srs(&self, srs: &Srs) {
        if let Some(key) = srs_key(srs) {
            self.lock().remove(&key);
        }
    }

    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        self.resident()
            .into_iter()
            .map(|r| pinprove_groth16::ResidentSrs {
                srs: r.srs.display().to_string(),
                place: "device",
                bytes: r.device_bytes,
            })
            .collect()
    }

    fn holds_srs(&self, srs: &Srs) -> bool {
        self.config.srs_placement == SrsPlacement::Host || srs_key(srs).is_some_and(|k| self.lock().contains_key(&k))
    }

    fn lost(&self) -> Option<String> {
        self.lost.reason()
    }

    fn start(&self, job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        self.lost.check(NAME)?;
        self.lost.note(self.queue(job))
    }
}

impl NativeBackend {
    /// `start` on a device not known lost.
    fn queue(&self, mut job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        let n = check_job(&job)?;
        let points = job
            .srs
            .points()
            .ok_or_else(|| backend_error("the parameters were read without their points"))?;
        let m = n.next_power_of_two().max(2);
        let lg_m = m.trailing_zeros();
        if points.h().len() != m - 1 {
            return Err(backend_error(format!(
                "the parameters have {} h bases, the circuit's domain needs {}",
                points.h().len(),
                m - 1
            )));
        }
        let key = srs_key(&job.srs);
        let device = self.ordinal();
        let mut proofs = Vec::with_capacity(job.assignments.len());
        for mut asg in job.assignments.drain(..) {
            let t0 = Instant::now();
            // CPU side first, outside the device lock.
            let [a, b, c] = asg.take_abc().ok_or(ProveError::AbcReleased)?;
            if [a.len(), b.len(), c.len()] != [n; 3] {
                return Err(backend_error(format!(
                    "a/b/c must hold exactly {n} evaluations (exact layout)"
                )));
            }
            let mut w = asg.into_witness();
            let resident = key.as_ref().and_then(|k| self.lock().get(k).cloned());
            let mode = if resident.is_some() { Mode::Split } else { Mode::Dense };
            let prep = self.threads.install(|| split::prepare(&mut w, &self.pool, mode))?;
            let q = |i: usize| resident.as_deref().map(|r| &r.queries[i]);
            // Events belong to the device current when they are created, and
            // are recorded on this device's streams.
            pinprove_mem::cuda::set_device(self.config.device).map_err(cuda_error)?;
            let events = ProofEvents::new().map_err(cuda_error)?;
            // Recorded after each of a, b and c is uploaded: pool fences.
            let uploaded = fences().map_err(cuda_error)?;

            let t1 = Instant::now();
            let mut queued = self.device.lock().recover();
            // Room on the device: wait for the oldest queued proof to run.
            while queued.len() >= self.config.queue_depth {
                let oldest = queued.pop_front().expect("a queued proof");
                oldest.synchronize().map_err(cuda_error)?;
            }
            let t2 = Instant::now();
            let h_job = HJob::begin(device, [&a, &b, &c], lg_m, &uploaded, &events.marks)?;
            // Back to the pool now; it hands each buffer out again only once
            // its copy has landed.
            for (mut v, e) in [a, b, c].into_iter().zip(uploaded) {
                v.set_use_fence(Box::new(EventFence::from(e)));
            }
            let aux: &[Scalar] = &w.aux;
            let streamed = resident.is_none();
            if streamed {
                // sppark's own driver reads h synchronously.
                h_job.wait()?;
            }
            // With resident bases each call queues its MSM and returns at
            // once; with streamed ones it runs the MSM to completion.
            let mark = |k: usize| (!streamed).then(|| &*events.msms[k]);
            let mut t = [Duration::ZERO; 5];
            let h = timed(&mut t[0], || {
                msm::<G1>(device, points.h(), q(0), MsmScalars::Device(h_job.scalars()), mark(0))
            })?;
            drop(h_job);
            let l = timed(&mut t[1], || {
                msm::<G1>(device, points.l(), q(1), MsmScalars::Query(&prep.l, aux), mark(1))
            })?;
            let a = timed(&mut t[2], || {
                msm::<G1>(device, points.a(), q(2), MsmScalars::Query(&prep.a, aux), mark(2))
            })?;
            let b_g1 = timed(&mut t[3], || {
                msm::<G1>(device, points.b_g1(), q(3), MsmScalars::Query(&prep.b, aux), mark(3))
            })?;
            let b_g2 = timed(&mut t[4], || {
                msm::<G2>(device, points.b_g2(), q(4), MsmScalars::Query(&prep.b, aux), mark(4))
            })?;
            if !streamed {
                queued.push_back(Arc::clone(&events.msms[4]));
            }
            drop(queued);
            let t3 = Instant::now();

            let listed = |p: &QueryScalars| p.list(aux).len();
            let batched = |p: &QueryScalars| p.ones_count + p.small_values.as_ref().map_or(0, |v| v.len());
            let phases = NativePhases {
                preparation: t1 - t0,
                device_wait: t2 - t1,
                queueing: t3 - t2,
                abc_bytes: 3 * n as u64 * 32,
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
            proofs.push(DeviceProof {
                h,
                l,
                a,
                b_g1,
                b_g2,
                events,
                phases,
                _prep: prep,
                _witness: w,
                _resident: resident,
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

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use pinprove_groth16::domain::{Domain, bit_reverse_index};

    fn have_gpu() -> bool {
        let n = pinprove_mem::cuda::device_count().unwrap_or(0);
        if n == 0 {
            eprintln!("no CUDA device: skipped");
        }
        n > 0
    }

    /// h on the CPU, as the CPU backend computes it.
    fn reference_h(abc: [&[Scalar]; 3]) -> Vec<Scalar> {
        let domain = Domain::new(abc[0].len()).unwrap();
        let m = domain.size();
        let mut v = abc.map(|x| {
            let mut x = x.to_vec();
            x.resize(m, Scalar::ZERO);
            domain.evaluations_to_coset(&mut x);
            x
        });
        let z_inv = domain.z_on_coset_inverse();
        let [a, b, c] = &mut v;
        for i in 0..m {
            a[i] = (a[i] * b[i] - c[i]) * z_inv;
        }
        domain.coset_to_coefficients_bit_reversed(a);
        (0..m - 1).map(|i| a[bit_reverse_index(i, domain.log_size())]).collect()
    }

    fn full_density(n: usize, set: bool) -> pinprove_groth16::Density {
        let mut d = pinprove_groth16::Density::new();
        for i in 0..n {
            d.add_element();
            if set {
                d.inc(i);
            }
        }
        d
    }

    #[test]
    fn msms_split_by_value_equal_the_plain_sums() {
        use group::prime::PrimeCurveAffine;
        use rand::{Rng, SeedableRng};
        if !have_gpu() {
            return;
        }
        let pool = PinnedPool::new(
            Arc::new(pinprove_mem::HeapAllocator::default()),
            pinprove_mem::MemoryBudget::new(1 << 30),
            pinprove_mem::PoolConfig::default(),
        );
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let n = 3001;
        // Every class: zeros, ones, small values of all widths, the largest
        // small value, full-width values.
        let values: Vec<Scalar> = (0..n)
            .map(|i| match i % 5 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                2 => Scalar::from(rng.r#gen::<u64>() >> (i % 64)),
                3 => Scalar::from(u64::MAX),
                _ => Scalar::random(&mut rng),
            })
            .collect();
        let g1: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut rng)).collect();
        let g2: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut rng)).collect();
        let g1_affine: Vec<blst_p1_affine> = g1.iter().map(|p| *blstrs::G1Affine::from(p).as_ref()).collect();
        let g2_affine: Vec<blst_p2_affine> = g2.iter().map(|p| *blstrs::G2Affine::from(p).as_ref()).collect();
        let want1: G1Projective = g1.iter().zip(&values).map(|(p, s)| p * s).sum();
        let want2: G2Projective = g2.iter().zip(&values).map(|(p, s)| p * s).sum();
        assert!(!bool::from(blstrs::G1Affine::from(want1).is_identity()));

        let vec_in = |v: &[Scalar]| {
            let mut p = pinprove_mem::PinnedVec::new_in(&pool);
            p.extend_from_slice(v);
            p
        };
        let mut w = Witness {
            inputs: vec_in(&[Scalar::ONE]),
            aux: vec_in(&values),
            a_aux_density: full_density(n, true),
            b_input_density: full_density(1, false),
            b_aux_density: full_density(n, true),
            working_set: None,
        };
        let r1 = resident::<G1>(0, &g1_affine).unwrap();
        let r2 = resident::<G2>(0, &g2_affine).unwrap();
        let split = split::prepare(&mut w, &pool, Mode::Split).unwrap();
        assert!(split.l.ones_count > 0 && split.l.small_bits == 64 && split.l.idx.is_some());
        let aux: &[Scalar] = &w.aux;
        // L pairs every aux value with a G1 base, B with a G2 base.
        let threads = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let sum = |m: Result<Msm<G1>, ProveError>| m.and_then(|mut m| m.sum(&threads));
        let sum2 = |m: Result<Msm<G2>, ProveError>| m.and_then(|mut m| m.sum(&threads));
        // Both queued before either is waited for.
        let mut q1 = msm::<G1>(0, &g1_affine, Some(&r1), MsmScalars::Query(&split.l, aux), None).unwrap();
        let mut q2 = msm::<G2>(0, &g2_affine, Some(&r2), MsmScalars::Query(&split.b, aux), None).unwrap();
        let got2 = q2.sum(&threads).unwrap();
        let got1 = q1.sum(&threads).unwrap();
        assert_eq!(got1, want1);
        assert_eq!(got2, want2);
        // Several Pippenger batches (the last one short), their results
        // summed on the host. (Other tests of this binary that run MSMs at
        // the same time get the same results, only slower.)
        MAX_BATCH.store(512, std::sync::atomic::Ordering::Relaxed);
        let dense = split::prepare(&mut w, &pool, Mode::Dense).unwrap();
        let aux: &[Scalar] = &w.aux;
        let got1 = sum(msm::<G1>(
            0,
            &g1_affine,
            Some(&r1),
            MsmScalars::Query(&dense.l, aux),
            None,
        ));
        let got2 = sum2(msm::<G2>(
            0,
            &g2_affine,
            Some(&r2),
            MsmScalars::Query(&dense.b, aux),
            None,
        ));
        MAX_BATCH.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(got1.unwrap(), want1);
        assert_eq!(got2.unwrap(), want2);
        // Every scalar through Pippenger, bases resident or streamed.
        assert_eq!(
            sum(msm::<G1>(
                0,
                &g1_affine,
                Some(&r1),
                MsmScalars::Query(&dense.l, aux),
                None
            ))
            .unwrap(),
            want1
        );
        assert_eq!(
            sum(msm::<G1>(0, &g1_affine, None, MsmScalars::Query(&dense.l, aux), None)).unwrap(),
            want1
        );
        assert_eq!(
            sum2(msm::<G2>(0, &g2_affine, None, MsmScalars::Query(&dense.b, aux), None)).unwrap(),
            want2
        );
        // Split scalars need bases on the device.
        assert!(msm::<G1>(0, &g1_affine, None, MsmScalars::Query(&split.l, aux), None).is_err());
        let _ = rng.r#gen::<u8>();
    }

    unsafe extern "C" {
        /// See `cuda/lane.cu`.
        fn pinprove_test_fault(device: c_int, kind: c_int) -> c_int;
    }

    /// Synthesizes `c` from `pool` and starts its proof.
    fn start_proof(
        backend: &dyn Backend,
        pool: &Arc<PinnedPool>,
        srs: &Arc<Srs>,
        c: &pinprove_groth16::circuits::BenchCircuit,
    ) -> Result<Box<dyn StartedProof>, ProveError> {
        let hints = pinprove_groth16::CapacityHints::in_memory();
        let layout = backend.capabilities().abc_layout;
        let (asg, _) = pinprove_groth16::synthesize(c.clone(), &c.id(), pool, &hints, layout, None)?;
        backend.start(ProvingJob {
            srs: Arc::clone(srs),
            assignments: vec![asg],
            randomness: vec![(Scalar::from(3u64), Scalar::from(4u64))],
        })
    }

    fn prove_bytes(
        backend: &dyn Backend,
        pool: &Arc<PinnedPool>,
        srs: &Arc<Srs>,
        c: &pinprove_groth16::circuits::BenchCircuit,
    ) -> Result<Vec<u8>, ProveError> {
        Ok(start_proof(backend, pool, srs, c)?
            .finish()?
            .remove(0)
            .to_bytes()
            .to_vec())
    }

    /// Whether `r` failed because the device was lost: at `start` or
    /// `finish`, or before them, when the pool had to pin fresh memory
    /// (pinning goes through the same, now unusable, CUDA context).
    fn lost(r: &Result<Vec<u8>, ProveError>) -> bool {
        match r {
            Err(ProveError::Memory(e)) => e.to_string().contains("cudaHostAlloc"),
            Err(e) => e.device_fault() == Some(pinprove_groth16::DeviceFault::Lost),
            Ok(_) => false,
        }
    }

    // Runs in a process of its own (as every GPU test does in CI's GPU
    // runs and under nextest): the fault it provokes ends the process's use
    // of the device.
    #[test]
    fn a_faulting_kernel_loses_the_device_and_nothing_else() {
        use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
        use pinprove_groth16::{CpuBackend, DeviceFault, Validation};
        use rand::SeedableRng;

        if !have_gpu() {
            return;
        }
        let pool = PinnedPool::new(
            Arc::new(pinprove_mem::cuda::CudaPinnedAllocator::new().unwrap()),
            pinprove_mem::MemoryBudget::new(4 << 30),
            pinprove_mem::PoolConfig::default(),
        );
        let c = BenchCircuit::new(1 << 10, WitnessMix::Random).unwrap();
        let params = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
            c.clone(),
            &mut rand_chacha::ChaCha8Rng::seed_from_u64(9),
        )
        .unwrap();
        let mut bytes = Vec::new();
        params.write(&mut bytes).unwrap();
        let srs = Arc::new(Srs::from_bytes(&bytes, &pool, Validation::OnCurve).unwrap());
        let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
        gpu.prepare_srs(&srs).unwrap();
        let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
        assert_eq!(prove_bytes(&gpu, &pool, &srs, &c).unwrap(), expected);

        // A launch the device refuses: a typed error, and the device goes on.
        // SAFETY: the hook only queues a kernel on device 0's lane.
        let code = unsafe { pinprove_test_fault(0, 0) };
        assert_eq!(crate::fault::classify(code), DeviceFault::Launch, "code {code}");
        eprintln!("launch refused with code {code}: the device goes on");
        assert_eq!(prove_bytes(&gpu, &pool, &srs, &c).unwrap(), expected);
        assert!(gpu.lost().is_none());

        // A second worker proves in a loop while the device is lost under it.
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                for _ in 0..10_000 {
                    let r = prove_bytes(&gpu, &pool, &srs, &c);
                    match &r {
                        Ok(b) => assert_eq!(*b, expected, "a proof before the fault is right"),
                        Err(_) => return r,
                    }
                }
                r_timeout()
            });
            let queued = start_proof(&gpu, &pool, &srs, &c).unwrap();
            // Synthesized now: pinning fresh pool memory may fail once the
            // device is lost.
            let hints = pinprove_groth16::CapacityHints::in_memory();
            let (asg, _) =
                pinprove_groth16::synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
            // SAFETY: as above; the kernel stores through a null pointer.
            let code = unsafe { pinprove_test_fault(0, 1) };
            assert_eq!(crate::fault::classify(code), DeviceFault::Lost, "code {code}");
            // Queued before the fault: right, or failed with it.
            match queued.finish() {
                Ok(p) => assert_eq!(p[0].to_bytes().to_vec(), expected),
                Err(e) => assert_eq!(e.device_fault(), Some(DeviceFault::Lost), "{e}"),
            }
            // The next proof meets the fault.
            let next = gpu
                .start(ProvingJob {
                    srs: Arc::clone(&srs),
                    assignments: vec![asg],
                    randomness: vec![(Scalar::from(3u64), Scalar::from(4u64))],
                })
                .and_then(|p| p.finish())
                .map(|p| p[0].to_bytes().to_vec());
            assert!(
                matches!(&next, Err(e) if e.device_fault() == Some(DeviceFault::Lost)),
                "{next:?}"
            );
            let other = worker.join().unwrap();
            assert!(lost(&other), "the other worker: {other:?}");
        });
        let why = gpu.lost().expect("the backend knows");
        eprintln!("lost: {why}");
        assert!(why.contains("illegal") || why.contains("address"), "{why}");
        // From now on calls fail at once, without the device.
        let err = gpu.prepare_srs(&srs).unwrap_err();
        assert!(err.to_string().contains("failed earlier"), "{err}");
        let err = start_proof(&gpu, &pool, &srs, &c).err().expect("refused");
        assert_eq!(err.device_fault(), Some(DeviceFault::Lost));
        drop(gpu);
        drop(srs);

        // The process goes on: a CPU prover over heap memory proves, and the
        // proof verifies.
        let heap = PinnedPool::new(
            Arc::new(pinprove_mem::HeapAllocator::default()),
            pinprove_mem::MemoryBudget::new(1 << 30),
            pinprove_mem::PoolConfig::default(),
        );
        let srs = Arc::new(Srs::from_bytes(&bytes, &heap, Validation::OnCurve).unwrap());
        let cpu = CpuBackend::new(Arc::clone(&heap));
        let proof = start_proof(&cpu, &heap, &srs, &c).unwrap().finish().unwrap().remove(0);
        let proof = bellperson::groth16::Proof::<blstrs::Bls12>::read(&proof.to_bytes()[..]).unwrap();
        let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
        assert!(bellperson::groth16::verify_proof(&pvk, &proof, &c.public_inputs()).unwrap());
    }

    fn r_timeout() -> Result<Vec<u8>, ProveError> {
        Err(backend_error("the worker never met the fault"))
    }

    #[test]
    fn h_on_the_device_matches_the_cpu_and_survives_running_out_of_memory() {
        if !have_gpu() {
            return;
        }
        let mut rng = rand::thread_rng();
        let n = 1000;
        let abc: [Vec<Scalar>; 3] = std::array::from_fn(|_| (0..n).map(|_| Scalar::random(&mut rng)).collect());
        let abc_ref = [&abc[0][..], &abc[1][..], &abc[2][..]];

        // 2^36 elements of 32 bytes, three times over: no GPU has that.
        let up = fences().unwrap();
        let ev = ProofEvents::new().unwrap();
        let err = HJob::begin(0, abc_ref, 36, &up, &ev.marks)
            .err()
            .expect("6 TB of device memory");
        assert!(err.to_string().contains("memory"), "{err}");

        // The device is still usable, and h is right.
        let job = HJob::begin(0, abc_ref, 10, &up, &ev.marks).unwrap();
        job.wait().unwrap();
        assert_eq!(job.download().unwrap(), reference_h(abc_ref));
        assert!(ev.marks[1].elapsed_since(&ev.marks[0]).unwrap() > Duration::ZERO);
        assert!(ev.marks[3].elapsed_since(&ev.marks[2]).unwrap() > Duration::ZERO);

        // No such device: a typed error, from the backend and from the C side.
        let pool = PinnedPool::new(
            Arc::new(pinprove_mem::HeapAllocator::default()),
            pinprove_mem::MemoryBudget::new(1 << 30),
            pinprove_mem::PoolConfig::default(),
        );
        let config = NativeConfig {
            device: 4096,
            ..NativeConfig::default()
        };
        assert!(NativeBackend::with_config(pool, config).is_err());
        assert!(HJob::begin(4096, abc_ref, 10, &up, &ev.marks).is_err());
    }
}
