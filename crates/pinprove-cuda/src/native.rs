//! pinprove's own GPU backend, first stage: h = (A·B − C)/Z on the GPU
//! (`cuda/native_h.cu`, on sppark's NTTs), the MSMs still on the CPU.
//!
//! `start` uploads a/b/c from their pool buffers, runs the NTTs and the
//! quotient on the device under the device lock, returns a/b/c to the pool
//! and hands h to the CPU backend's MSM step, which `finish` runs. Moving
//! the MSMs (and streamed, chunked uploads, and a device-resident SRS) onto
//! the GPU is the next stage; until then this backend is not faster than
//! supraseal-c2 and exists to prove the device half correct.

use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use pinprove_groth16::{
    AbcLayout, Backend, Capabilities, CapacityHint, CpuBackend, ProveError, ProvingJob, StartedProof, check_job,
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
}

fn backend_error(message: impl Into<String>) -> ProveError {
    ProveError::Backend {
        backend: NAME,
        message: message.into(),
    }
}

/// The native backend (first stage: h on the GPU, MSMs on the CPU).
pub struct NativeBackend {
    pool: Arc<PinnedPool>,
    cpu: CpuBackend,
    /// Device work of one proof at a time; CPU work runs outside it.
    device: Mutex<()>,
}

impl std::fmt::Debug for NativeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeBackend").finish_non_exhaustive()
    }
}

impl NativeBackend {
    /// A backend on the first CUDA device, drawing its host buffers from
    /// `pool`; fails when no CUDA device is usable.
    pub fn new(pool: Arc<PinnedPool>) -> Result<Self, ProveError> {
        let n = pinprove_mem::cuda::device_count().map_err(|e| backend_error(e.to_string()))?;
        if n == 0 {
            return Err(backend_error("no CUDA device"));
        }
        Ok(NativeBackend {
            cpu: CpuBackend::new(Arc::clone(&pool)),
            pool,
            device: Mutex::new(()),
        })
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // One worker's CPU MSMs overlap the other's device step.
            workers_per_device: 2,
            abc_layout: AbcLayout::Exact,
            uses_device: true,
            needs_srs_points: true,
        }
    }

    fn extra_working_set(&self, shape: &CapacityHint) -> u64 {
        // h's m − 1 scalars, and the CPU MSM step's gathered scalars.
        let m = shape.constraints.max(1).next_power_of_two() as u64;
        32 * m + 2 * 32 * (shape.inputs + shape.aux) as u64
    }

    fn start(&self, mut job: ProvingJob) -> Result<Box<dyn StartedProof>, ProveError> {
        let n = check_job(&job)?;
        let m = n.next_power_of_two().max(2);
        let lg_m = m.trailing_zeros();
        let mut hs = Vec::with_capacity(job.assignments.len());
        for asg in &mut job.assignments {
            let mut h: PinnedVec<Scalar> = match asg.working_set_mut() {
                Some(f) => PinnedVec::with_capacity_funded(m - 1, &self.pool, f)?,
                None => PinnedVec::with_capacity_in(m - 1, &self.pool)?,
            };
            h.try_resize(m - 1, Scalar::from(0u64))?;
            let [a, b, c] = asg.take_abc().ok_or(ProveError::AbcReleased)?;
            if [a.len(), b.len(), c.len()] != [n; 3] {
                return Err(backend_error(format!(
                    "a/b/c must hold exactly {n} evaluations (exact layout)"
                )));
            }
            let err = {
                let _device = self.device.lock().unwrap_or_else(|e| e.into_inner());
                // SAFETY: a, b and c hold n scalars each and h holds m − 1,
                // as the C function reads and writes; all outlive the call,
                // which copies synchronously (it returns after its stream
                // is synchronized). Scalar is blst's Montgomery-form fr,
                // the layout of sppark's fr_t.
                unsafe { pinprove_h_coefficients(a.as_ptr(), b.as_ptr(), c.as_ptr(), n, lg_m, h.as_mut_ptr()) }
            };
            // Back to the pool now: the device read them synchronously.
            drop((a, b, c));
            if err.code != 0 {
                return Err(backend_error(format!("h on the GPU: {}", String::from(err))));
            }
            hs.push(h);
        }
        self.cpu.started_with_h(job, hs)
    }
}
