//! One started proof: its MSMs queued on the device, what their device
//! work reads (owned by a guard that waits for the device before letting
//! go), and the host sums and assembly of `finish`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::runtime::PooledEvent;
use blstrs::{G1Projective, Scalar};
use group::Group;
use pinprove_groth16::{LostDevice, Proof, ProveError, Srs, StartedProof, assemble};
use pinprove_mem::sync::Recover;

use super::NativePhases;
use super::curve::{G1, G2};
use super::h::ProofEvents;
use super::matrices::MatrixCopy;
use super::msm::Msm;
use super::resident::ResidentSrs;

/// What a proof's device work reads outside the pool — the resident bases
/// and the matrices — owned until that work has completed:
/// dropping it first waits for `done`, so no order of fields or drops
/// elsewhere can free memory the device still reads. (Its pool buffers, the
/// prepared scalars and the witness, went back to the pool fenced by
/// `done` when the work was queued.)
pub(super) struct DeviceReads {
    /// Recorded after the proof's last device work; `None` when that work
    /// ran to completion in `start` (streamed bases).
    pub(super) done: Option<Arc<PooledEvent>>,
    /// Held, never read: what the device reads.
    pub(super) _resident: Option<Arc<ResidentSrs>>,
    /// A pre-compiled circuit's matrices (on the device, or pinned host
    /// memory it streams from), when the device computed a/b/c.
    pub(super) _matrices: Option<Arc<MatrixCopy>>,
}

impl Drop for DeviceReads {
    fn drop(&mut self) {
        if let Some(done) = &self.done
            && let Err(e) = done.synchronize()
        {
            // A device error: nothing runs on it any more.
            tracing::error!("waiting for a proof's device work before freeing its inputs: {e}");
        }
    }
}

/// One assignment's proof: its MSMs queued on the device (or done), and
/// what their device work reads.
pub(super) struct DeviceProof {
    /// The h MSM, in the parts it was queued in.
    pub(super) h: Vec<Msm<G1>>,
    /// The marks ending the pieces the proof's work was queued in, kept
    /// (not reused) until it completes.
    pub(super) _pieces: Vec<Arc<PooledEvent>>,
    pub(super) l: Msm<G1>,
    pub(super) a: Msm<G1>,
    pub(super) b_g1: Msm<G1>,
    pub(super) b_g2: Msm<G2>,
    pub(super) events: ProofEvents,
    /// Recorded once the device computed a/b/c (pre-compiled circuits).
    pub(super) evaluated: Option<PooledEvent>,
    /// Recorded before the l, a and b MSMs when the proof shares them with
    /// other partitions (see [`NativePhases::bases_shared_by`]).
    pub(super) tail_start: Option<Arc<PooledEvent>>,
    /// The MSM times come from `events` once the work is done.
    pub(super) phases: NativePhases,
    /// Held until the proof is summed (or dropped): waits for the device.
    pub(super) _reads: DeviceReads,
}

impl DeviceProof {
    /// Every event the proof's GPU times span, in no particular order.
    fn timing_events(&self) -> impl Iterator<Item = &crate::runtime::Event> {
        let marks = self.events.marks.iter().map(|e| &**e);
        let msms = self.events.msms.iter().map(|e| &***e);
        let others = self
            .evaluated
            .iter()
            .map(|e| &**e)
            .chain(self.tail_start.iter().map(|e| &***e));
        marks.chain(msms).chain(others)
    }

    /// GPU times from the proof's events. Each is waited for first: a
    /// partition's marks are recorded after the work of every partition
    /// it shares its MSMs with, so its own results can be summed while a
    /// partner's last windows still run (reading the times then failed
    /// the whole proof with `cudaErrorNotReady`). Times are telemetry: a
    /// failure to read them leaves the phases' host times, marked as not
    /// read from the device, and never fails the proof.
    fn read_device_times(&mut self) {
        match self.device_times() {
            Ok(()) => self.phases.device_timed = true,
            Err(e) => tracing::warn!("a proof's GPU times could not be read (reported as unknown): {e}"),
        }
    }

    fn device_times(&mut self) -> Result<(), crate::runtime::CudaError> {
        for e in self.timing_events() {
            e.synchronize()?;
        }
        let [up0, up1, h0, h1] = &self.events.marks;
        let upload = up1.elapsed_since(up0)?;
        let h = h1.elapsed_since(h0)?;
        let evaluation = match &self.evaluated {
            Some(e) => Some(e.elapsed_since(h0)?),
            None => None,
        };
        let mut msm = [Duration::ZERO; 5];
        let mut prev: &crate::runtime::Event = h1;
        let shared = self.phases.bases_shared_by.max(1) as u32;
        for (k, (slot, e)) in msm.iter_mut().zip(&self.events.msms).enumerate() {
            *slot = match (k, &self.tail_start) {
                (0, _) => e.elapsed_since(prev)?,
                // After the h MSM, the group's other MSMs come after every
                // partition's h: times from the group's start, shared.
                (1, Some(start)) => e.elapsed_since(start)? / shared,
                _ => e.elapsed_since(prev)? / shared,
            };
            prev = e;
        }
        // Only once every read succeeded: no mix of GPU and host times.
        self.phases.upload = upload;
        self.phases.h = h;
        if let Some(e) = evaluation {
            self.phases.evaluation = e;
        }
        for (slot, t) in self.phases.msm.iter_mut().zip(msm) {
            slot.0 = t;
        }
        Ok(())
    }
}

pub(super) struct NativeStarted {
    pub(super) srs: Arc<Srs>,
    pub(super) randomness: Vec<(Scalar, Scalar)>,
    pub(super) proofs: Vec<DeviceProof>,
    pub(super) last_phases: Arc<Mutex<Option<NativePhases>>>,
    pub(super) lost: LostDevice,
    pub(super) threads: Arc<rayon::ThreadPool>,
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
            let mut h = G1Projective::identity();
            for part in &mut p.h {
                h += part.sum(&threads)?;
            }
            let l = p.l.sum(&threads)?;
            let a = p.a.sum(&threads)?;
            let b_g1 = p.b_g1.sum(&threads)?;
            let b_g2 = p.b_g2.sum(&threads)?;
            p.phases.sums = t.elapsed();
            p.read_device_times();
            tracing::debug!(phases = ?p.phases, "native proof");
            *last_phases.lock().recover() = Some(p.phases);
            out.push(assemble(&srs, r, s, a, b_g1, b_g2, h, l));
        }
        Ok(out)
    }
}
