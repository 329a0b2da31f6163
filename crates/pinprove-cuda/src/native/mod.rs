//! pinprove's own GPU backend: the whole proof's arithmetic on the GPU
//! (`cuda/native_h.cu` and `cuda/native_msm.cu`, on sppark).
//!
//! `start` prepares the L, A and B scalars on the CPU before taking the
//! device (see [`crate::split`]: one parallel pass over the aux assignment
//! sorts scalars into zeros, ones, small values summed bit plane by bit
//! plane, and the rest), then, under the device lock,
//! queues the proof's device work on the GPU's streams (`cuda/lane.cuh`) and
//! returns without waiting for it: a/b/c's uploads in chunks on the copy
//! stream, with the NTTs of each vector waiting on the device for that
//! vector only; each a/b/c buffer goes back to the pool at once with a
//! CUDA-event fence, so the pool reuses it the moment its copy has landed; h
//! is computed on the device and feeds the h MSM without a round trip
//! through host memory; the L, A and B MSMs — bit-valued terms by batched
//! addition, the rest by Pippenger over gathered bases — leave their bucket
//! sums in pinned host memory. `finish` waits for those and sums them on the
//! host. So the GPU always has the next work queued behind the running one
//! (up to [`NativeConfig::queue_depth`] pieces of it), and no host step —
//! scalar preparation, result sums, the next partition's synthesis — leaves
//! it idle. A background proof queues its work in pieces (h, the h MSM in
//! parts of 2^25 bases, the other MSMs), between which an urgent proof
//! queues all of its own (see `device_queue`): a WinningPoSt waits for the
//! pieces queued before it, not for whole proofs.
//!
//! Device memory is planned, never tried (see [`crate::plan`]): in
//! `prepare_srs` each circuit gets a plan from the memory the backend may
//! use ([`NativeConfig::memory_limit`], or the GPU's free memory) and the
//! circuit's sizes. [`SrsPlacement::Device`] (the default) uploads each
//! query's bases to device memory once when the plan keeps them there;
//! otherwise (or with [`SrsPlacement::Host`]) they stream from the SRS's
//! pinned pool buffers on every MSM through two windows of device memory,
//! one filled while the other's bases are summed. Either way the scalars
//! are split the same way and every MSM is queued as calls of bounded
//! memory; the device queue admits a proof's work only while the proofs
//! queued leave room for its peak.
//!
//! Pre-compiled circuits: an assignment whose a/b/c are pending (see
//! `pinprove_groth16::precompiled::defer`) uploads its witness instead, and
//! the device computes a/b/c from the circuit's matrices, uploaded once per
//! recording and kept in device memory while the engine holds the recording
//! (`cuda/native_spmv.cu`), when the plan leaves room for them; otherwise
//! a/b/c are computed on the host and uploaded as usual.
//!
//! Rooms: [`ffi`] (the C interface and the structs it shares), [`resident`]
//! (bases in device memory), [`table`] (their precomputed copies for
//! pinprove's MSM kernel), [`matrices`] (circuits' matrices in device
//! memory), [`msm`], [`h`], [`proof`] (a started proof and what its device
//! work reads), [`backend`] (configuration, `start` in `backend/start.rs`,
//! what the next proof needs ready in `backend/warm.rs`), [`msm_lab`] (one
//! MSM at a time, for measurement).

mod backend;
mod curve;
mod ffi;
mod h;
mod matrices;
mod msm;
pub mod msm_lab;
mod proof;
mod resident;
mod table;
#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pinprove_groth16::ProveError;

pub use self::backend::NativeBackend;
pub(crate) use self::msm::MARK_DELAY_US;
pub use crate::config::{NativeConfig, SrsPlacement};
use crate::fault::device_error;

const NAME: &str = "native";

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

fn cuda_error(e: crate::runtime::CudaError) -> ProveError {
    device_error(NAME, e.code, e.to_string())
}

/// Where the time of one assignment's `start` went.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct NativePhases {
    /// CPU work in `start` before the device lock: the scalars prepared
    /// (unless they were ahead of it) and a pre-compiled circuit's
    /// matrices looked up.
    pub preparation: Duration,
    /// Scalar preparation done ahead of `start`, on the thread that
    /// synthesized the witness (see `Backend::prepare`); zero when `start`
    /// prepared them.
    pub prepared_ahead: Duration,
    /// Waiting for the device lock (another worker queuing its proof) and
    /// for room in the device queue (the oldest queued proof to run).
    pub device_wait: Duration,
    /// Queuing the proof's device work: for a background proof over
    /// resident bases, until its last piece is queued (each piece waits for
    /// room behind the pieces queued before it); an urgent proof's returns
    /// before its work runs; with streamed bases the MSMs run to completion
    /// here.
    pub queueing: Duration,
    /// Summing the MSMs' results on the host, in `finish` (includes
    /// waiting for the device work to complete).
    pub sums: Duration,
    /// GPU time of the a/b/c uploads, or of the witness's for a
    /// pre-compiled circuit (first copy queued to last landed).
    pub upload: Duration,
    /// Bytes of a/b/c uploaded for h (none for a pre-compiled circuit,
    /// whose a/b/c the device computes).
    pub abc_bytes: u64,
    /// Bytes of witness uploaded for a pre-compiled circuit's a/b/c.
    pub witness_bytes: u64,
    /// GPU time of computing a/b/c from a pre-compiled circuit's matrices
    /// (from the compute stream reaching the proof, witness upload wait
    /// included); part of [`h`](Self::h).
    pub evaluation: Duration,
    /// GPU time from the compute stream reaching the proof to h
    /// computed (seven NTTs and the quotient, and any wait for a/b/c's
    /// uploads).
    pub h: Duration,
    /// The MSMs h, l, a, b (G1), b (G2): GPU time (host time with
    /// streamed bases) and number of bases each. The h MSM's time runs
    /// from h computed to its last part done, so it includes any urgent
    /// proof's work queued between the parts of a background proof.
    pub msm: [(Duration, usize); 5],
    /// Of each MSM's bases, how many went through Pippenger …
    pub pippenger_points: [usize; 5],
    /// … and how many were summed by batched addition: scalar 1, or a
    /// small value added bit plane by bit plane (the rest had scalar 0).
    pub batched_points: [usize; 5],
    /// Whether the bases were resident in device memory.
    pub resident_bases: bool,
    /// How many partitions' l, a and b MSMs read the same streamed bases
    /// (each window filled once for all of them); their times above are
    /// each one's share of the group's. 1 (or 0, not recorded) when the
    /// proof's MSMs were its own.
    pub bases_shared_by: usize,
    /// Whether the GPU times above were read from the device's events;
    /// false where they could not be (then `upload`, `h` and `evaluation`
    /// are unknown and the MSM times are host times). A proof never fails
    /// for its telemetry.
    pub device_timed: bool,
}

impl NativePhases {
    /// Names of the MSMs, in the order of [`NativePhases::msm`].
    pub const MSM_NAMES: [&'static str; 5] = ["h", "l", "a", "b_g1", "b_g2"];

    /// GPU time: h and the MSMs.
    pub fn device(&self) -> Duration {
        self.h + self.msm.iter().map(|(t, _)| *t).sum::<Duration>()
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

/// Runs `f`, noting its time in `slot`.
fn timed<T>(slot: &mut Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    *slot = t.elapsed();
    out
}
