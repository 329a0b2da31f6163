//! pinprove's own GPU backend: the whole proof's arithmetic on the GPU
//! (`cuda/native_h.cu` and `cuda/native_msm.cu`, on sppark).
//!
//! `start` compacts the scalars the densities select (on the CPU, before
//! taking the device), then under the device lock computes h = (A·B − C)/Z
//! with NTTs, returns a/b/c to the pool, and runs the five MSMs (h, l, a,
//! b in G1, b in G2). `finish` only assembles the proof, so a second worker
//! prepares its next partition while the first holds the device.
//!
//! SRS placement: [`SrsPlacement::Device`] (the default) uploads each
//! query's bases to device memory once, in `prepare_srs`, and MSMs read them
//! from HBM; when that fails (too little device memory) or with
//! [`SrsPlacement::Host`] the bases stream from the SRS's pinned pool
//! buffers on every MSM.
//!
//! Not yet done (see the project's notes): uploads of a/b/c in chunks that
//! overlap the NTTs, and bit-valued scalars summed by batched addition.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use group::Group;
use pinprove_groth16::{
    AbcLayout, Backend, Capabilities, CapacityHint, Proof, ProveError, ProvingJob, Srs, SrsPoints, StartedProof,
    Witness, assemble, check_job,
};
use pinprove_mem::{PinnedPool, PinnedVec};

const NAME: &str = "native";

unsafe extern "C" {
    // cuda/native_h.cu
    fn pinprove_h_coefficients(
        a: *const Scalar,
        b: *const Scalar,
        c: *const Scalar,
        n: usize,
        lg_m: u32,
        h_out: *mut Scalar,
    ) -> sppark::Error;
    // cuda/native_msm.cu
    fn pinprove_msm_g1(
        out: *mut blst_p1,
        resident: *const c_void,
        bases: *const blst_p1_affine,
        n: usize,
        scalars: *const Scalar,
        mont: bool,
    ) -> sppark::Error;
    fn pinprove_msm_g2(
        out: *mut blst_p2,
        resident: *const c_void,
        bases: *const blst_p2_affine,
        n: usize,
        scalars: *const Scalar,
        mont: bool,
    ) -> sppark::Error;
    fn pinprove_resident_g1(out: *mut *mut c_void, bases: *const blst_p1_affine, n: usize) -> sppark::Error;
    fn pinprove_resident_g2(out: *mut *mut c_void, bases: *const blst_p2_affine, n: usize) -> sppark::Error;
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
        Err(backend_error(format!("{what}: {}", String::from(err))))
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
}

impl Default for NativeConfig {
    fn default() -> Self {
        NativeConfig {
            srs_placement: SrsPlacement::Device,
            workers_per_device: 2,
        }
    }
}

/// One query's bases in device memory (an sppark MSM context over them).
struct Resident {
    handle: *mut c_void,
    g2: bool,
}

// SAFETY: the handle is only dereferenced (by the C side) under the
// backend's device lock, one call at a time, and the context it names is
// not tied to the thread that created it; sharing the handle value itself
// is harmless.
unsafe impl Send for Resident {}
// SAFETY: as for Send: every use of the context is serialized by the
// device lock.
unsafe impl Sync for Resident {}

impl Drop for Resident {
    fn drop(&mut self) {
        // SAFETY: the handle came from the matching pinprove_resident_* and
        // is freed exactly once, here.
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

fn resident_g1(bases: &[blst_p1_affine]) -> Result<Resident, ProveError> {
    let mut handle = std::ptr::null_mut();
    // SAFETY: `bases` holds `len` points; the call copies them to the device
    // before returning and writes one handle.
    check(
        unsafe { pinprove_resident_g1(&mut handle, bases.as_ptr(), bases.len()) },
        "uploading G1 bases",
    )?;
    Ok(Resident { handle, g2: false })
}

fn resident_g2(bases: &[blst_p2_affine]) -> Result<Resident, ProveError> {
    let mut handle = std::ptr::null_mut();
    // SAFETY: as in `resident_g1`.
    check(
        unsafe { pinprove_resident_g2(&mut handle, bases.as_ptr(), bases.len()) },
        "uploading G2 bases",
    )?;
    Ok(Resident { handle, g2: true })
}

impl ResidentSrs {
    fn upload(p: &SrsPoints) -> Result<ResidentSrs, ProveError> {
        let bytes = (std::mem::size_of_val(p.h())
            + std::mem::size_of_val(p.l())
            + std::mem::size_of_val(p.a())
            + std::mem::size_of_val(p.b_g1())
            + std::mem::size_of_val(p.b_g2())) as u64;
        Ok(ResidentSrs {
            queries: [
                resident_g1(p.h())?,
                resident_g1(p.l())?,
                resident_g1(p.a())?,
                resident_g1(p.b_g1())?,
                resident_g2(p.b_g2())?,
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
    /// Device work of one proof at a time (sppark's MSM contexts are not
    /// reentrant); CPU work runs outside it.
    device: Mutex<()>,
    last_phases: Mutex<Option<NativePhases>>,
}

/// Where the time of one assignment's `start` went.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct NativePhases {
    /// Scalar compaction and buffers, on the CPU before the device lock.
    pub preparation: Duration,
    /// Waiting for the device lock (another worker's proof).
    pub device_wait: Duration,
    /// a/b/c upload, the NTTs and the quotient, h back to the host.
    pub h: Duration,
    /// Bytes of a/b/c uploaded for h.
    pub abc_bytes: u64,
    /// The MSMs h, l, a, b (G1), b (G2): time and number of points each.
    pub msm: [(Duration, usize); 5],
    /// Whether the bases were resident in device memory.
    pub resident_bases: bool,
}

impl NativePhases {
    /// Names of the MSMs, in the order of [`NativePhases::msm`].
    pub const MSM_NAMES: [&'static str; 5] = ["h", "l", "a", "b_g1", "b_g2"];

    /// Device time: h and the MSMs.
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
        let n = pinprove_mem::cuda::device_count().map_err(|e| backend_error(e.to_string()))?;
        if n == 0 {
            return Err(backend_error("no CUDA device"));
        }
        if config.workers_per_device == 0 {
            return Err(backend_error("workers_per_device must be at least 1"));
        }
        Ok(NativeBackend {
            pool,
            config,
            resident: Mutex::new(HashMap::new()),
            device: Mutex::new(()),
            last_phases: Mutex::new(None),
        })
    }

    /// The configuration.
    pub fn config(&self) -> NativeConfig {
        self.config
    }

    /// The phases of the last assignment proved (for benchmarks).
    pub fn last_phases(&self) -> Option<NativePhases> {
        *self.last_phases.lock().unwrap_or_else(|e| e.into_inner())
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
        self.resident.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The scalars of the A and B queries: inputs, then the aux variables each
/// density selects.
fn gather(out: &mut PinnedVec<Scalar>, w: &Witness, b: bool) -> Result<(), ProveError> {
    if b {
        for i in w.b_input_density.iter_ones() {
            out.try_push(w.inputs[i])?;
        }
    } else {
        out.try_extend_from_slice(&w.inputs)?;
    }
    let density = if b { &w.b_aux_density } else { &w.a_aux_density };
    for i in density.iter_ones() {
        out.try_push(w.aux[i])?;
    }
    Ok(())
}

fn g1_msm(
    resident: Option<&Resident>,
    bases: &[blst_p1_affine],
    scalars: &[Scalar],
) -> Result<G1Projective, ProveError> {
    if bases.len() != scalars.len() {
        return Err(backend_error(format!(
            "{} scalars for {} G1 bases",
            scalars.len(),
            bases.len()
        )));
    }
    let mut out = blst_p1::default();
    let handle = resident.map_or(std::ptr::null(), |r| r.handle.cast_const());
    // SAFETY: `bases` and `scalars` hold `len` elements each (or the
    // resident context holds the bases); the call writes one point into
    // `out` and returns after its device work completed.
    check(
        unsafe { pinprove_msm_g1(&mut out, handle, bases.as_ptr(), bases.len(), scalars.as_ptr(), true) },
        "G1 MSM",
    )?;
    let mut p = G1Projective::identity();
    *p.as_mut() = out;
    Ok(p)
}

fn g2_msm(
    resident: Option<&Resident>,
    bases: &[blst_p2_affine],
    scalars: &[Scalar],
) -> Result<G2Projective, ProveError> {
    if bases.len() != scalars.len() {
        return Err(backend_error(format!(
            "{} scalars for {} G2 bases",
            scalars.len(),
            bases.len()
        )));
    }
    let mut out = blst_p2::default();
    let handle = resident.map_or(std::ptr::null(), |r| r.handle.cast_const());
    // SAFETY: as in `g1_msm`.
    check(
        unsafe { pinprove_msm_g2(&mut out, handle, bases.as_ptr(), bases.len(), scalars.as_ptr(), true) },
        "G2 MSM",
    )?;
    let mut p = G2Projective::identity();
    *p.as_mut() = out;
    Ok(p)
}

/// Runs one MSM, noting its time and point count in `slot`.
fn timed<T>(
    slot: &mut (Duration, usize),
    points: usize,
    msm: impl FnOnce() -> Result<T, ProveError>,
) -> Result<T, ProveError> {
    let t = Instant::now();
    let out = msm()?;
    *slot = (t.elapsed(), points);
    Ok(out)
}

/// MSM results of one assignment.
struct Sums {
    h: G1Projective,
    l: G1Projective,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
}

struct NativeStarted {
    srs: Arc<Srs>,
    randomness: Vec<(Scalar, Scalar)>,
    sums: Vec<Sums>,
}

impl StartedProof for NativeStarted {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        Ok(self
            .sums
            .iter()
            .zip(&self.randomness)
            .map(|(m, &(r, s))| assemble(&self.srs, r, s, m.a, m.b_g1, m.b_g2, m.h, m.l))
            .collect())
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
        }
    }

    fn extra_working_set(&self, shape: &CapacityHint) -> u64 {
        // h's m − 1 scalars and the gathered A and B scalars.
        let m = shape.constraints.max(1).next_power_of_two() as u64;
        32 * m + 2 * 32 * (shape.inputs + shape.aux) as u64
    }

    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
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
            let _device = self.device.lock().unwrap_or_else(|e| e.into_inner());
            ResidentSrs::upload(points)
        };
        match uploaded {
            Ok(r) => {
                tracing::info!(srs = %key.display(), bytes = r.bytes, "SRS bases resident on the device");
                self.lock().insert(key, Arc::new(r));
            }
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

    fn start(&self, mut job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        let n = check_job(&job)?;
        let points = job
            .srs
            .points()
            .ok_or_else(|| backend_error("the parameters were read without their points"))?;
        let m = n.next_power_of_two().max(2);
        let lg_m = m.trailing_zeros();
        let key = srs_key(&job.srs);
        let mut sums = Vec::with_capacity(job.assignments.len());
        for mut asg in job.assignments.drain(..) {
            let t0 = Instant::now();
            // CPU side first, outside the device lock.
            let mut h = PinnedVec::with_capacity_paid(m - 1, &self.pool, asg.working_set_mut())?;
            h.try_resize(m - 1, Scalar::from(0u64))?;
            let [a, b, c] = asg.take_abc().ok_or(ProveError::AbcReleased)?;
            if [a.len(), b.len(), c.len()] != [n; 3] {
                return Err(backend_error(format!(
                    "a/b/c must hold exactly {n} evaluations (exact layout)"
                )));
            }
            let mut w = asg.into_witness();
            let mut a_scalars = PinnedVec::with_capacity_paid(points.a().len(), &self.pool, w.working_set.as_mut())?;
            gather(&mut a_scalars, &w, false)?;
            let mut b_scalars = PinnedVec::with_capacity_paid(points.b_g1().len(), &self.pool, w.working_set.as_mut())?;
            gather(&mut b_scalars, &w, true)?;

            let resident = key.as_ref().and_then(|k| self.lock().get(k).cloned());
            let q = |i: usize| resident.as_deref().map(|r| &r.queries[i]);
            let t1 = Instant::now();
            let device = self.device.lock().unwrap_or_else(|e| e.into_inner());
            let t2 = Instant::now();
            // SAFETY: a, b and c hold n scalars each and h holds m − 1, as
            // the C function reads and writes; all outlive the call, which
            // returns after its stream is synchronized. Scalar is blst's
            // Montgomery-form fr, the layout of sppark's fr_t.
            check(
                unsafe { pinprove_h_coefficients(a.as_ptr(), b.as_ptr(), c.as_ptr(), n, lg_m, h.as_mut_ptr()) },
                "h on the GPU",
            )?;
            // The device has read them: back to the pool.
            drop((a, b, c));
            let t3 = Instant::now();
            let mut msm = [(Duration::ZERO, 0usize); 5];
            let h_sum = timed(&mut msm[0], h.len(), || g1_msm(q(0), points.h(), &h))?;
            let l_sum = timed(&mut msm[1], w.aux.len(), || g1_msm(q(1), points.l(), &w.aux))?;
            let a_sum = timed(&mut msm[2], a_scalars.len(), || g1_msm(q(2), points.a(), &a_scalars))?;
            let b1_sum = timed(&mut msm[3], b_scalars.len(), || g1_msm(q(3), points.b_g1(), &b_scalars))?;
            let b2_sum = timed(&mut msm[4], b_scalars.len(), || g2_msm(q(4), points.b_g2(), &b_scalars))?;
            drop(device);
            let phases = NativePhases {
                preparation: t1 - t0,
                device_wait: t2 - t1,
                h: t3 - t2,
                abc_bytes: 3 * n as u64 * 32,
                msm,
                resident_bases: resident.is_some(),
            };
            tracing::debug!(?phases, "native proof on the device");
            *self.last_phases.lock().unwrap_or_else(|e| e.into_inner()) = Some(phases);
            sums.push(Sums {
                h: h_sum,
                l: l_sum,
                a: a_sum,
                b_g1: b1_sum,
                b_g2: b2_sum,
            });
        }
        Ok(Box::new(NativeStarted {
            srs: job.srs,
            randomness: job.randomness,
            sums,
        }))
    }
}
