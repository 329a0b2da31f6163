//! What a proving backend offers, and the two steps of a proof.

use std::sync::Arc;

use crate::precompiled::Recording;
use crate::{AbcLayout, BackendHint, CapacityHint, Proof, ProveError, ProvingAssignment, QueryLengths, Scalar, Srs};

/// One or more synthesized circuits sharing one SRS, with the blinding
/// factors (r, s) of each proof.
#[non_exhaustive]
pub struct ProofBatch {
    /// The parameters all circuits are proved with.
    pub srs: Arc<Srs>,
    /// The synthesized circuits, all of the same shape.
    pub assignments: Vec<ProvingAssignment>,
    /// One (r, s) pair per circuit.
    pub randomness: Vec<(Scalar, Scalar)>,
    /// Latency matters more than throughput (a WinningPoSt's partition): a
    /// backend that queues proofs on a device lets this one go ahead of
    /// background proofs waiting there.
    pub urgent: bool,
}

impl ProofBatch {
    /// A job proving `assignments` (all of one circuit's shape) with `srs`,
    /// one (r, s) pair per assignment, not urgent. New fields get defaults
    /// here, so a caller's code keeps compiling as the job grows.
    pub fn new(srs: Arc<Srs>, assignments: Vec<ProvingAssignment>, randomness: Vec<(Scalar, Scalar)>) -> Self {
        ProofBatch {
            srs,
            assignments,
            randomness,
            urgent: false,
        }
    }

    /// The same job, urgent or not (see [`ProofBatch::urgent`]).
    pub fn with_urgent(mut self, urgent: bool) -> Self {
        self.urgent = urgent;
        self
    }
}

/// What a backend can do, so the engine can plan around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Jobs worth keeping in flight per device: one more than the number
    /// whose `start` can overlap another's `finish`.
    pub workers_per_device: usize,
    /// How a/b/c should be laid out by synthesis.
    pub abc_layout: AbcLayout,
    /// Whether pinned host memory speeds the backend up (it uploads).
    pub uses_device: bool,
    /// Whether jobs must carry the SRS's decoded points (a backend that
    /// loads the parameter file itself needs only the header).
    pub needs_srs_points: bool,
    /// Whether the backend computes a pre-compiled assignment's a/b/c
    /// itself, on its device ([`precompiled::defer`]): an engine then
    /// leaves them pending instead of computing them on the host. Every
    /// backend accepts pending assignments; one without this computes them
    /// on the host in `start`.
    ///
    /// [`precompiled::defer`]: crate::precompiled::defer
    pub evaluates_recordings: bool,
}

/// One SRS a backend keeps a copy of, and where.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ResidentSrs {
    /// The SRS's file (or another name for it).
    pub srs: String,
    /// Where the copy lives: "device", "host", or "streamed" (from host
    /// memory through device windows for every proof).
    pub place: &'static str,
    /// Bytes the copy takes there.
    pub bytes: u64,
}

/// A proving backend.
///
/// [`start`](Self::start) consumes the a/b/c vectors (the FFT part of the
/// proof, with the upload on a GPU) and releases them to the pool when it
/// returns; [`StartedProof::finish`] does the remaining MSMs and assembles
/// the proofs. The split lets an engine hand the device its next job while
/// the previous one finishes on another thread.
pub trait Backend: Send + Sync {
    /// A short name for logs and reports.
    fn name(&self) -> &'static str;

    /// What the backend can do.
    fn capabilities(&self) -> Capabilities;

    /// Host bytes a job of this shape needs beyond what synthesis holds
    /// (a/b/c and the assignments), for admission by the memory budget.
    /// `queries`, when known, are the parameters' query lengths: the bases
    /// each MSM runs over, which bound what a backend prepares for them.
    /// `urgent` as in [`ProofBatch`]: a backend whose background proofs
    /// prepare into buffers it keeps for itself (already in the budget)
    /// adds nothing for them.
    fn extra_working_set(&self, shape: &CapacityHint, queries: Option<&QueryLengths>, urgent: bool) -> u64 {
        let _ = (shape, queries, urgent);
        0
    }

    /// Host work on a synthesized assignment that needs no device (a GPU
    /// backend's MSM scalars sorted and listed), for an engine to run on
    /// the thread that synthesized it, so that the thread feeding the
    /// device neither spends its time on it nor waits for pool memory.
    /// Paid for out of the assignment's working set and kept in it for
    /// [`start`](Self::start), which does the work itself for an
    /// assignment not prepared (or prepared for other circumstances, such
    /// as parameters no longer resident). `urgent` as in [`ProofBatch`].
    fn prepare(&self, srs: &Srs, assignment: &mut ProvingAssignment, urgent: bool) -> Result<(), ProveError> {
        let _ = (srs, assignment, urgent);
        Ok(())
    }

    /// Prepares the backend's own copy of an SRS, if it keeps one (loaded
    /// from `srs`'s file); returns the host bytes it holds for it.
    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        let _ = srs;
        Ok(0)
    }

    /// Drops the backend's own copy of an SRS, if any.
    fn evict_srs(&self, srs: &Srs) {
        let _ = srs;
    }

    /// Whether this backend computes the a/b/c of `recording`'s circuit on
    /// its device: what [`Capabilities::evaluates_recordings`] says, for
    /// every circuit, unless the backend's memory plan leaves a circuit's
    /// matrices on the host. For those the engine computes a/b/c at
    /// synthesis, inside each partition's admission by the memory budget
    /// (a backend that computed them in `start` would take host memory
    /// nobody admitted, and could wait for it forever).
    fn evaluates_recording(&self, recording: &Arc<crate::precompiled::Recording>) -> bool {
        let _ = recording;
        self.capabilities().evaluates_recordings
    }

    /// SRS copies the backend holds outside the host SRS (for example in
    /// device memory), for status reports.
    fn resident_srs(&self) -> Vec<ResidentSrs> {
        Vec::new()
    }

    /// Whether a proof with `srs` can start here without first moving the
    /// SRS (for example into device memory). Schedulers prefer devices that
    /// answer yes. Backends that read the host copy answer yes.
    fn holds_srs(&self, srs: &Srs) -> bool {
        let _ = srs;
        true
    }

    /// Whether proofs here still read `srs`'s host points after
    /// [`prepare_srs`](Self::prepare_srs) (a backend that keeps every base
    /// in device memory does not). When no backend does, the engine frees
    /// them and keeps only the header.
    fn needs_host_points(&self, srs: &Srs) -> bool {
        let _ = srs;
        self.capabilities().needs_srs_points
    }

    /// Why the backend's device can no longer be used, once it cannot (a
    /// [`DeviceFault::Lost`](crate::DeviceFault::Lost) was seen). Schedulers
    /// stop routing work to it; its calls fail at once from then on.
    fn lost(&self) -> Option<String> {
        None
    }

    /// What the backend learned from its proofs with `srs` that would let
    /// a later process prepare for its first proof (buffer sizes), for the
    /// engine to keep with the capacity hints; `None` when nothing.
    fn hint(&self, srs: &Srs) -> Option<BackendHint> {
        let _ = srs;
        None
    }

    /// Prepares, after [`prepare_srs`](Self::prepare_srs), what an earlier
    /// process learned from proofs with `srs` (see [`hint`](Self::hint)):
    /// buffers made ahead of the first proof, admission sized as seen.
    fn apply_hint(&self, srs: &Srs, hint: &BackendHint) {
        let _ = (srs, hint);
    }

    /// Puts the backend's own copy of a pre-compiled circuit's matrices
    /// where its proofs read them (device memory) now, ahead of the first
    /// proof that needs them; returns whether it holds one, after which its
    /// proofs of that recording never read the host matrices (the engine
    /// then releases them). A backend that computes a/b/c from the host
    /// matrices answers `false`.
    fn hold_recording(&self, recording: &Arc<Recording>) -> Result<bool, ProveError> {
        let _ = recording;
        Ok(false)
    }

    /// How many background partitions of `srs`'s circuit one
    /// [`start`](Self::start) should take together when that many are
    /// waiting: more than one where the backend shares device work among a
    /// job's assignments (a GPU streaming the bases from host memory reads
    /// each window of them once for all). 1 by default.
    fn partitions_per_start(&self, srs: &Srs) -> usize {
        let _ = srs;
        1
    }

    /// The CUDA ordinal of the one GPU this backend proves on, if it has
    /// one of its own (for per-device readings, and the device that pins
    /// host memory); `None` for the CPU and for backends that drive the
    /// GPUs themselves.
    fn gpu(&self) -> Option<usize> {
        None
    }

    /// First step: checks the job against its parameters, runs the FFT part
    /// and releases a/b/c.
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError>;

    /// Both steps at once.
    fn prove(&self, job: ProofBatch) -> Result<Vec<Proof>, ProveError> {
        self.start(job)?.finish()
    }
}

/// A job whose FFT part is done.
pub trait StartedProof: Send {
    /// Second step: the MSMs and the proofs, in the order of the job's
    /// assignments.
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError>;
}

/// Checks what every backend must check before doing any work (backends call
/// it first in `start`): a non-empty
/// batch, one (r, s) per circuit, equal shapes, and parameters whose every
/// query has exactly the size the circuit needs. Returns the number of
/// constraints.
pub fn check_job(job: &ProofBatch) -> Result<usize, ProveError> {
    let first = job.assignments.first().ok_or(ProveError::EmptyBatch)?;
    if job.randomness.len() != job.assignments.len() {
        return Err(ProveError::RandomnessCount {
            pairs: job.randomness.len(),
            circuits: job.assignments.len(),
        });
    }
    let n = first.num_constraints();
    if first.abc_released() {
        return Err(ProveError::AbcReleased);
    }
    for (index, other) in job.assignments.iter().enumerate().skip(1) {
        let same = |what, x: usize, y: usize| {
            if x == y {
                Ok(())
            } else {
                Err(ProveError::BatchShapeMismatch { index, what })
            }
        };
        if other.abc_released() {
            return Err(ProveError::AbcReleased);
        }
        same("constraints", other.num_constraints(), n)?;
        same("inputs", other.num_inputs(), first.num_inputs())?;
        same("aux variables", other.num_aux(), first.num_aux())?;
        same(
            "A density",
            other.densities().a_aux.total(),
            first.densities().a_aux.total(),
        )?;
        same(
            "B input density",
            other.densities().b_input.total(),
            first.densities().b_input.total(),
        )?;
        same(
            "B aux density",
            other.densities().b_aux.total(),
            first.densities().b_aux.total(),
        )?;
    }
    let srs = &job.srs;
    let domain = crate::domain::domain_size(n)?;
    let expect = |what, expected: usize, found: usize| {
        if expected == found {
            Ok(())
        } else {
            Err(ProveError::ParamsMismatch { what, expected, found })
        }
    };
    expect("vk.ic (public inputs)", first.num_inputs(), srs.vk().ic.len())?;
    let len = srs.lengths();
    expect("h (domain size - 1)", domain - 1, len.h)?;
    expect("l (aux variables)", first.num_aux(), len.l)?;
    expect(
        "a (inputs + aux used by A)",
        first.densities().a_bases(first.num_inputs()),
        len.a,
    )?;
    let b = first.densities().b_bases();
    expect("b_g1 (variables used by B)", b, len.b_g1)?;
    expect("b_g2 (variables used by B)", b, len.b_g2)?;
    if bool::from(group::prime::PrimeCurveAffine::is_identity(&srs.vk().delta_g1))
        || bool::from(group::prime::PrimeCurveAffine::is_identity(&srs.vk().delta_g2))
    {
        return Err(ProveError::UnexpectedIdentity);
    }
    Ok(n)
}
