//! The reference GPU backend: Supranational's supraseal-c2 (the CUDA
//! Groth16 prover Filecoin uses), fed from pinprove's pool buffers.
//!
//! supraseal-c2 reads the bellperson parameter file itself into pinned host
//! memory, so the job's [`Srs`](pinprove_groth16::Srs) is best read
//! header-only; the file is found by the SRS's path. Its proving call runs
//! the whole proof (CPU parts included: the B-query G2 MSM is computed on the
//! CPU) under one process-wide lock, so there is no split to exploit: `start`
//! does everything and one worker per device is all that helps.
//!
//! The crate's Rust wrapper panics on errors; this backend calls the C entry
//! point itself to get the error back as a value.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Affine, G2Affine, Scalar};
use group::prime::PrimeCurveAffine;
use pinprove_groth16::{
    AbcLayout, Backend, Capabilities, Proof, ProofBatch, ProveError, ProvingAssignment, Srs, StartedProof, Validation,
    check_job, precompiled,
};
use pinprove_mem::ErrorChain;
use pinprove_mem::sync::Recover;
use supraseal_c2::{Assignment, SRS};

const NAME: &str = "supraseal-c2";

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawProof {
    a: blst_p1_affine,
    b: blst_p2_affine,
    c: blst_p1_affine,
}

unsafe extern "C" {
    // supraseal-c2's C entry point (its Rust wrapper turns errors into panics).
    fn generate_groth16_proofs_c(
        provers: *const Assignment<Scalar>,
        num_circuits: usize,
        r_s: *const Scalar,
        s_s: *const Scalar,
        proofs: *mut RawProof,
        srs: &SRS,
    ) -> sppark::Error;
}

fn backend_error(message: impl Into<String>) -> ProveError {
    ProveError::Backend {
        backend: NAME,
        message: message.into(),
    }
}

/// A loaded SRS and what loading it took.
struct Loaded {
    srs: SRS,
    load_time: Duration,
    /// About what it holds in pinned memory: the file's size.
    bytes: u64,
}

/// The supraseal-c2 backend. Keeps every SRS it loaded until evicted.
#[derive(Default)]
pub struct SuprasealBackend {
    loaded: Mutex<HashMap<PathBuf, Arc<Loaded>>>,
}

impl std::fmt::Debug for SuprasealBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuprasealBackend")
            .field("srs", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SuprasealBackend {
    /// A backend; fails when no CUDA device is usable.
    pub fn new() -> Result<Self, ProveError> {
        let n = crate::runtime::device_count().map_err(|e| backend_error(e.to_string()))?;
        if n == 0 {
            return Err(backend_error("no CUDA device"));
        }
        Ok(Self::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<Loaded>>> {
        self.loaded.lock().recover()
    }

    /// Loads the parameter file at `path` into supraseal's pinned memory
    /// (once); returns how long the load took.
    pub fn load_srs(&self, path: &Path) -> Result<Duration, ProveError> {
        Ok(self.srs(path)?.load_time)
    }

    /// Drops a loaded SRS; proofs in flight keep theirs until done.
    pub fn evict_srs_file(&self, path: &Path) -> bool {
        self.lock().remove(path).is_some()
    }

    fn srs(&self, path: &Path) -> Result<Arc<Loaded>, ProveError> {
        if let Some(l) = self.lock().get(path) {
            return Ok(Arc::clone(l));
        }
        let started = Instant::now();
        // supraseal-c2 parses the points itself after checking only the
        // layout: check every point first, as the native path's reader does
        // (and as a truncated file's error says where). What this cannot
        // guard: supraseal-c2 then maps the file itself, so a file truncated
        // between this check and its own read still ends the process with
        // SIGBUS. Guarding that mapping would mean changing supraseal-c2's
        // loader (it takes a path, not bytes); the native backend, the
        // default, reads with positioned reads and has no such window.
        Srs::check_file(path, Validation::OnCurve)
            .map_err(|e| backend_error(format!("the parameters at {}: {}", path.display(), ErrorChain(&e))))?;
        let srs = SRS::try_new(path.to_path_buf(), false)
            .map_err(|e| backend_error(format!("loading {}: {}", path.display(), String::from(e))))?;
        let loaded = Arc::new(Loaded {
            srs,
            load_time: started.elapsed(),
            bytes: std::fs::metadata(path).map_or(0, |m| m.len()),
        });
        tracing::info!(path = %path.display(), ms = loaded.load_time.as_millis() as u64, "supraseal-c2 loaded SRS");
        Ok(Arc::clone(self.lock().entry(path.to_path_buf()).or_insert(loaded)))
    }
}

fn assignment(p: &ProvingAssignment) -> Result<Assignment<Scalar>, ProveError> {
    let (a, b, c) = match (p.a(), p.b(), p.c()) {
        (Some(a), Some(b), Some(c)) => (a, b, c),
        _ => return Err(ProveError::AbcReleased),
    };
    let d = p.densities();
    let (ad, bi, bd) = (&d.a_aux, &d.b_input, &d.b_aux);
    Ok(Assignment {
        a_aux_density: ad.words().as_ptr().cast(),
        a_aux_bit_len: ad.len(),
        a_aux_popcount: ad.total(),
        b_inp_density: bi.words().as_ptr().cast(),
        b_inp_bit_len: bi.len(),
        b_inp_popcount: bi.total(),
        b_aux_density: bd.words().as_ptr().cast(),
        b_aux_bit_len: bd.len(),
        b_aux_popcount: bd.total(),
        a: a.as_ptr(),
        b: b.as_ptr(),
        c: c.as_ptr(),
        abc_size: a.len(),
        inp_assignment_data: p.inputs().as_ptr(),
        inp_assignment_size: p.inputs().len(),
        aux_assignment_data: p.aux().as_ptr(),
        aux_assignment_size: p.aux().len(),
    })
}

fn to_proof(raw: &RawProof) -> Proof {
    let (mut a, mut b, mut c) = (G1Affine::identity(), G2Affine::identity(), G1Affine::identity());
    *a.as_mut() = raw.a;
    *b.as_mut() = raw.b;
    *c.as_mut() = raw.c;
    Proof { a, b, c }
}

impl Backend for SuprasealBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Its proving call holds a process-wide lock for the whole proof.
            workers_per_device: 1,
            abc_layout: AbcLayout::Exact,
            uses_device: true,
            needs_srs_points: false,
            evaluates_recordings: false,
        }
    }

    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        let path = srs
            .stats()
            .path
            .clone()
            .ok_or_else(|| backend_error("needs parameters read from a file (it loads the points itself)"))?;
        self.srs(&path)?;
        // It holds the points in pinned host memory, about the file's size.
        Ok(srs.stats().file_bytes)
    }

    fn evict_srs(&self, srs: &Srs) {
        if let Some(path) = &srs.stats().path {
            self.evict_srs_file(path);
        }
    }

    fn resident_srs(&self) -> Vec<pinprove_groth16::ResidentSrs> {
        self.lock()
            .iter()
            .map(|(path, l)| pinprove_groth16::ResidentSrs {
                srs: path.display().to_string(),
                place: "host (pinned, supraseal-c2's own copy)",
                bytes: l.bytes,
            })
            .collect()
    }

    fn start(&self, mut job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        check_job(&job)?;
        let path = job
            .srs
            .stats()
            .path
            .clone()
            .ok_or_else(|| backend_error("needs parameters read from a file (it loads the points itself)"))?;
        let loaded = self.srs(&path)?;
        for asg in &mut job.assignments {
            precompiled::evaluate_pending(asg, AbcLayout::Exact)?;
        }
        let provers = job.assignments.iter().map(assignment).collect::<Result<Vec<_>, _>>()?;
        let (r_s, s_s): (Vec<Scalar>, Vec<Scalar>) = job.randomness.iter().copied().unzip();
        let mut raw = vec![RawProof::default(); provers.len()];
        // SAFETY: every pointer in `provers` points into vectors owned by
        // `job`, alive and unmodified until the call returns; `check_job`
        // established the shapes supraseal asserts (sizes of every query
        // against the SRS, equal shapes across the batch); `r_s`, `s_s` and
        // `raw` hold one element per circuit; `Scalar` is blst's Montgomery
        // `blst_fr`, the layout of supraseal's `fr_t`.
        let err = unsafe {
            generate_groth16_proofs_c(
                provers.as_ptr(),
                provers.len(),
                r_s.as_ptr(),
                s_s.as_ptr(),
                raw.as_mut_ptr(),
                &loaded.srs,
            )
        };
        if err.code != 0 {
            let code = err.code;
            return Err(crate::fault::device_error(NAME, code, String::from(err)));
        }
        // The call has returned: the device no longer reads a/b/c.
        for a in &mut job.assignments {
            a.release_abc();
        }
        Ok(Box::new(Done(raw.iter().map(to_proof).collect())))
    }
}

struct Done(Vec<Proof>);

impl StartedProof for Done {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        Ok(self.0)
    }
}
