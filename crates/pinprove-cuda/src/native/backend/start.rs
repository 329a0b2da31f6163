//! `start`: a proof's scalars prepared on the CPU, then its device work
//! queued on the GPU — whole for an urgent proof, in pieces for a
//! background one (h, the h MSM in parts, the other MSMs; see
//! `device_queue`), so that an urgent proof waits for a piece at most.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::{EventFence, PooledEvent};
use blstrs::Scalar;
use pinprove_groth16::domain::domain_size;
use pinprove_groth16::{
    AbcLayout, ProofBatch, ProveError, ProvingAssignment, SrsPoints, StartedProof, Witness, check_job, precompiled,
};
use pinprove_mem::UseFence;
use pinprove_mem::sync::Recover;

use super::super::curve::{G1, G2};
use super::super::h::{HJob, ProofEvents};
use super::super::matrices::MatrixCopy;
use super::super::msm::{Bases, Msm, MsmKernel, MsmScalars, Windows, msm_group};
use super::super::proof::{DeviceProof, DeviceReads, NativeStarted};
use super::super::resident::{ResidentSrs, srs_key};
use super::super::{NativePhases, backend_error, check, cuda_error, timed};
use super::NativeBackend;
use crate::config::MsmKernelKind;
use crate::plan::{CircuitSizes, MatrixPlacement, Plan};

/// A proof's turn on the device (see `device_queue`).
type Turn<'q> = crate::device_queue::Turn<'q, PooledEvent>;
use crate::split::{self, Mode, QueryScalars};

/// A witness's scalars prepared ahead of `start` (see
/// [`Backend::prepare`](pinprove_groth16::Backend::prepare)), kept in its
/// assignment.
struct PreparedAhead {
    prep: split::Prepared,
    took: Duration,
}

impl NativeBackend {
    /// Prepares an urgent proof's scalars now, on the backend's urgent
    /// threads (which background work does not occupy), as `start` would.
    pub(super) fn prepare_ahead(&self, asg: &mut ProvingAssignment) -> Result<(), ProveError> {
        let t = Instant::now();
        let mode = Mode::Split;
        let prep = self.threads_for(true).install(|| {
            let (values, funds) = asg.witness_parts_mut();
            split::prepare(values, funds, &self.pool, mode)
        })?;
        let took = t.elapsed();
        tracing::debug!(ms = took.as_millis() as u64, "scalars prepared ahead of the device");
        asg.set_prepared(Box::new(PreparedAhead { prep, took }));
        Ok(())
    }

    /// `start` on a device not known lost. Each assignment's scalars are
    /// prepared first, then its h and h MSM queued; the other MSMs follow,
    /// each proof's own over resident bases, and over streamed bases all of
    /// the job's assignments together, so that the bases cross PCIe once
    /// for all of them (an engine puts several partitions of a circuit into
    /// one job for that; see `Backend::partitions_per_start`).
    pub(super) fn queue(&self, mut job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
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
        // Made before the first proof (in prepare_srs), and made again when
        // the circuit's recording is placed: taken for each assignment after
        // its matrices are.
        self.plan_for(&job.srs)?;
        let threads = self.threads_for(job.urgent);
        let resident = self.lock().get(&key).cloned();
        if resident.is_none() && points.is_none() {
            return Err(backend_error(
                "the parameters' host points were freed and their bases are not resident on this device",
            ));
        }
        // Over streamed bases the job's assignments are one group; else each
        // is its own.
        let assignments = std::mem::take(&mut job.assignments);
        let mut proofs = Vec::with_capacity(assignments.len());
        let groups: Vec<Vec<ProvingAssignment>> = if resident.is_none() {
            vec![assignments]
        } else {
            assignments.into_iter().map(|a| vec![a]).collect()
        };
        for group in groups {
            // CPU side first, outside the device lock.
            let group = group
                .into_iter()
                .map(|asg| self.prepare_partition(asg, n, &job.srs, threads))
                .collect::<Result<Vec<_>, _>>()?;
            let t1 = Instant::now();
            let mut turn = self.device.enter(job.urgent, wait_for)?;
            let mut heads = Vec::with_capacity(group.len());
            let last = group.len() - 1;
            for (j, p) in group.into_iter().enumerate() {
                let t = Instant::now();
                turn.reserve(p.peak, wait_for)?;
                let device_wait = if j == 0 { t1.elapsed() } else { t.elapsed() };
                let (head, next) =
                    self.queue_head(p, lg_m, device_wait, resident.as_deref(), points, j < last, turn)?;
                heads.push(head);
                turn = next;
            }
            proofs.extend(self.queue_tail(heads, (n, m), resident.as_ref(), points, (&key, &job), turn)?);
        }
        Ok(Box::new(NativeStarted {
            srs: job.srs,
            randomness: job.randomness,
            proofs,
            last_phases: Arc::clone(&self.last_phases),
            lost: self.lost.clone(),
            threads: Arc::clone(threads),
        }))
    }

    /// An assignment's CPU side: its matrices where the device reads them
    /// (or a/b/c computed on the host), its scalars prepared, and the device
    /// bytes its proof takes at its peak.
    fn prepare_partition(
        &self,
        mut asg: ProvingAssignment,
        n: usize,
        srs: &Arc<pinprove_groth16::Srs>,
        threads: &rayon::ThreadPool,
    ) -> Result<Partition, ProveError> {
        let t0 = Instant::now();
        let asg_recording = asg.recording().cloned();
        let matrices = self.matrices_for(&mut asg, threads)?;
        let planned = self.plan_for(srs)?;
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
        let ahead = asg.take_prepared().and_then(|p| p.downcast::<PreparedAhead>().ok());
        let mut w = asg.into_witness();
        let mode = Mode::Split;
        // Prepared another way (tests): its buffers go back before new
        // ones are taken.
        let ahead = ahead.filter(|a| a.prep.mode == mode);
        let (prep, prepared_ahead) = match ahead {
            Some(a) => {
                let PreparedAhead { prep, took } = *a;
                (prep, took)
            }
            None => (
                threads.install(|| split::prepare_witness(&mut w, &self.pool, mode))?,
                Duration::ZERO,
            ),
        };
        // As the pool will size them (its classes round up).
        let prep_bytes: Vec<usize> = prep
            .asked_bytes()
            .into_iter()
            .map(|b| {
                if b == 0 {
                    0
                } else {
                    self.pool.rounded_size(b).unwrap_or(b)
                }
            })
            .collect();
        self.prep_shares
            .learn(*srs.lengths(), prep_bytes.iter().map(|&b| b as u64).sum());
        // The proof's device memory at its peak, given back once its last
        // piece has run: a/b/c from the host, or from the witness with the
        // matrices where this device reads them.
        let peak = match (&matrices, asg_recording) {
            (Some(copy), Some(rec)) => planned
                .plan
                .proof_bytes_for(&CircuitSizes::of_recording(&rec), copy.placement()),
            _ => planned.plan.proof_bytes_for(&planned.sizes, MatrixPlacement::Host),
        };
        Ok(Partition {
            prep,
            prep_bytes,
            w,
            matrices,
            abc,
            peak,
            window: match WINDOW_BASES.load(std::sync::atomic::Ordering::Relaxed) {
                0 => planned.plan.window,
                w => w,
            },
            preparation: t0.elapsed(),
            prepared_ahead,
        })
    }

    /// Queues a partition's h and h MSM in its turn (which has reserved
    /// `p.peak`). With `more`, another partition of the group follows
    /// before the group's other MSMs: everything this one reserved comes
    /// back once its h MSM is done.
    #[allow(clippy::too_many_arguments)]
    fn queue_head<'q>(
        &'q self,
        mut p: Partition,
        lg_m: u32,
        device_wait: Duration,
        resident: Option<&ResidentSrs>,
        points: Option<&SrsPoints>,
        more: bool,
        mut turn: Turn<'q>,
    ) -> Result<(Head, Turn<'q>), ProveError> {
        let device = self.ordinal();
        let m = 1usize << lg_m;
        // Events belong to the device current when they are created, and
        // are recorded on this device's streams.
        crate::runtime::set_device(self.config.device).map_err(cuda_error)?;
        let events = self.events.proof().map_err(cuda_error)?;
        // Recorded after each of a, b and c is uploaded: pool fences.
        let uploaded = self.events.fences().map_err(cuda_error)?;
        // A background proof queues its work in pieces (see
        // `device_queue`): h, then the h MSM in parts, then the other
        // MSMs, each piece ending with one of these marks.
        let part_bases = H_MSM_PART_BASES.load(std::sync::atomic::Ordering::Relaxed).max(1);
        let h_parts = (m - 1).div_ceil(part_bases);
        let piece_marks: Vec<Arc<PooledEvent>> = (0..h_parts)
            .map(|_| self.events.timing().map(Arc::new))
            .collect::<Result<_, _>>()
            .map_err(cuda_error)?;
        let t2 = Instant::now();
        let (h_job, evaluated) = match (&p.matrices, p.abc.take()) {
            (Some(mats), _) => {
                let done = self.events.timing().map_err(cuda_error)?;
                let job = HJob::begin_precompiled(device, mats, (&p.w.inputs, &p.w.aux), lg_m, &events.marks, &done)?;
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
        self.mark_compute(&piece_marks[0])?;
        turn = turn.piece(Arc::clone(&piece_marks[0]), 0, wait_for)?;
        // Streamed bases pass through two windows of device memory, made
        // for this h MSM and freed after it (the next partition's h needs
        // the room).
        let mut windows = match resident {
            Some(_) => None,
            None => Some(Windows::<G1>::new(device, p.window)?),
        };
        let parts = h_job.scalars().split(h_parts);
        let last = parts.len() - 1;
        let mut h = Vec::with_capacity(parts.len());
        let started_h = Instant::now();
        for (k, part) in parts.into_iter().enumerate() {
            let part_mark = if k == last {
                &events.msms[0]
            } else {
                &piece_marks[k + 1]
            };
            h.extend(msm_group::<G1>(
                device,
                g1_bases(resident, windows.as_mut(), points, 0)?,
                vec![MsmScalars::Device(part)],
                &[Some(part_mark)],
                self.kernel_for(resident, 0),
            )?);
            // The last part gives back what this partition reserved when
            // another one's h follows before the other MSMs.
            let release = if k == last && more { u64::MAX } else { 0 };
            turn = turn.piece(Arc::clone(part_mark), release, wait_for)?;
        }
        let h_msm = started_h.elapsed();
        drop(windows);
        drop(h_job);
        Ok((
            Head {
                p,
                h,
                piece_marks,
                events,
                evaluated,
                h_msm,
                device_wait,
                queueing_from: t2,
            },
            turn,
        ))
    }

    /// Queues the l, a and b MSMs of a group's partitions whose h MSMs are
    /// queued (together over streamed bases: each window is filled once for
    /// all of them), ending the group's turn.
    fn queue_tail(
        &self,
        heads: Vec<Head>,
        (n, m): (usize, usize),
        resident_srs: Option<&Arc<ResidentSrs>>,
        points: Option<&SrsPoints>,
        (key, job): (&std::path::Path, &ProofBatch),
        turn: Turn<'_>,
    ) -> Result<Vec<DeviceProof>, ProveError> {
        let resident = resident_srs.map(|r| &**r);
        let device = self.ordinal();
        let shared_by = heads.len();
        let window = heads[0].p.window;
        // With several partitions, their MSM times are measured from here
        // (after the last one's h MSM) and shared among them.
        let tail_start = if shared_by > 1 {
            let e = Arc::new(self.events.timing().map_err(cuda_error)?);
            self.mark_compute(&e)?;
            Some(e)
        } else {
            None
        };
        let mut t = [Duration::ZERO; 5];
        let queries = |f: fn(&split::Prepared) -> &QueryScalars| -> Vec<MsmScalars<'_>> {
            heads
                .iter()
                .map(|h| MsmScalars::Query(f(&h.p.prep), &h.p.w.aux[..]))
                .collect()
        };
        let marks = |k: usize| -> Vec<Option<&crate::runtime::Event>> {
            heads.iter().map(|h| Some(&**h.events.msms[k])).collect()
        };
        let mut g1_windows = match resident {
            Some(_) => None,
            None => Some(Windows::<G1>::new(device, window)?),
        };
        let mut g1 = |k: usize, f: fn(&split::Prepared) -> &QueryScalars, t: &mut Duration| {
            timed(t, || {
                msm_group::<G1>(
                    device,
                    g1_bases(resident, g1_windows.as_mut(), points, k)?,
                    queries(f),
                    &marks(k),
                    self.kernel_for(resident, k),
                )
            })
        };
        let mut l = g1(1, |p| &p.l, &mut t[1])?;
        let mut a = g1(2, |p| &p.a, &mut t[2])?;
        let mut b_g1 = g1(3, |p| &p.b, &mut t[3])?;
        drop(g1_windows);
        let mut g2_windows = match resident {
            Some(_) => None,
            None => Some(Windows::<G2>::new(device, window)?),
        };
        let mut b_g2 = timed(&mut t[4], || {
            let bases = match (resident, g2_windows.as_mut(), points) {
                (Some(r), _, _) => Bases::Resident(&r.queries[4]),
                (None, Some(windows), Some(p)) => Bases::Streamed {
                    host: p.b_g2(),
                    windows,
                },
                _ => return Err(backend_error("bases neither resident nor in host memory")),
            };
            msm_group::<G2>(
                device,
                bases,
                queries(|p| &p.b),
                &marks(4),
                self.kernel_for(resident, 4),
            )
        })?;
        drop(g2_windows);
        // The last partition's last mark follows all of the group's work.
        turn.queued(Arc::clone(&heads[shared_by - 1].events.msms[4]));
        let queued_at = Instant::now();
        let mut proofs = Vec::with_capacity(shared_by);
        for head in heads.into_iter().rev() {
            let Head {
                p:
                    Partition {
                        prep,
                        prep_bytes,
                        w,
                        matrices,
                        preparation,
                        prepared_ahead,
                        ..
                    },
                h,
                piece_marks,
                events,
                evaluated,
                h_msm,
                device_wait,
                queueing_from,
            } = head;
            let aux: &[Scalar] = &w.aux;
            let listed = |p: &QueryScalars| p.list(aux).len();
            let batched = |p: &QueryScalars| p.ones_count + p.small_values.as_ref().map_or(0, |v| v.len());
            let each = |d: Duration| d / shared_by as u32;
            let phases = NativePhases {
                preparation,
                prepared_ahead,
                device_wait,
                queueing: queued_at - queueing_from,
                abc_bytes: if matrices.is_some() { 0 } else { 3 * n as u64 * 32 },
                witness_bytes: if matrices.is_some() {
                    ((w.inputs.len() + w.aux.len()) * 32) as u64
                } else {
                    0
                },
                // Host times; `finish` replaces them by GPU times.
                msm: [
                    (h_msm, m - 1),
                    (each(t[1]), prep.l.bases),
                    (each(t[2]), prep.a.bases),
                    (each(t[3]), prep.b.bases),
                    (each(t[4]), prep.b.bases),
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
                bases_shared_by: shared_by,
                ..NativePhases::default()
            };
            // All five MSMs are queued: the last one's mark follows all of
            // the proof's device work.
            let done = Some(Arc::clone(&events.msms[4]));
            // Once this proof's device work is done: pinning now would hold
            // up the very proof whose sizes it learned from.
            self.keep_preparation_warm(key, *job.srs.lengths(), prep_bytes, !job.urgent, done.clone());
            release_after_device(prep, w, done.as_ref());
            let reads = DeviceReads {
                done,
                _resident: resident_srs.cloned(),
                _matrices: matrices,
            };
            proofs.push(DeviceProof {
                h,
                _pieces: piece_marks,
                l: l.pop().expect("an MSM per partition"),
                a: a.pop().expect("an MSM per partition"),
                b_g1: b_g1.pop().expect("an MSM per partition"),
                b_g2: b_g2.pop().expect("an MSM per partition"),
                events,
                evaluated,
                tail_start: tail_start.clone(),
                phases,
                _reads: reads,
            });
        }
        proofs.reverse();
        Ok(proofs)
    }
}

/// An assignment prepared on the CPU, waiting for its turn on the device.
struct Partition {
    prep: split::Prepared,
    prep_bytes: Vec<usize>,
    w: Witness,
    matrices: Option<Arc<MatrixCopy>>,
    /// a/b/c from the host (none where the device computes them), until
    /// they are uploaded.
    abc: Option<[pinprove_mem::PinnedVec<Scalar>; 3]>,
    /// Device bytes its proof takes at its peak.
    peak: u64,
    /// Bases per window when they are streamed.
    window: usize,
    preparation: Duration,
    prepared_ahead: Duration,
}

/// A partition whose h MSM is queued, waiting for its other MSMs.
struct Head {
    p: Partition,
    h: Vec<Msm<G1>>,
    piece_marks: Vec<Arc<PooledEvent>>,
    events: ProofEvents,
    evaluated: Option<PooledEvent>,
    /// Host time of queueing the h MSM.
    h_msm: Duration,
    device_wait: Duration,
    queueing_from: Instant,
}

/// Waits for a device queue's mark (see `device_queue`).
fn wait_for(e: &PooledEvent) -> Result<(), ProveError> {
    e.synchronize().map_err(cuda_error)
}

impl NativeBackend {
    /// Records `event` on the device's compute stream, behind the work
    /// queued there so far.
    fn mark_compute(&self, event: &PooledEvent) -> Result<(), ProveError> {
        // SAFETY: the event is live (borrowed) and belongs to this device
        // (taken from this backend's pools with its device current).
        check(
            unsafe { super::super::ffi::pinprove_lane_mark(self.ordinal(), event.as_raw()) },
            "marking the device's queue",
        )
    }

    /// For an assignment whose a/b/c are pending, its circuit's matrices
    /// where this device reads them (made on first use); when the device
    /// reads them nowhere, a/b/c are computed on the host instead (the
    /// witness is kept either way).
    fn matrices_for(
        &self,
        asg: &mut ProvingAssignment,
        threads: &rayon::ThreadPool,
    ) -> Result<Option<Arc<MatrixCopy>>, ProveError> {
        let Some(recording) = asg.recording().cloned() else {
            return Ok(None);
        };
        let copy = self.matrix_copy(&recording)?;
        if copy.is_none() {
            threads.install(|| precompiled::evaluate_pending(asg, AbcLayout::Exact))?;
        }
        Ok(copy)
    }

    /// Where `recording`'s circuit reads its matrices on this device,
    /// decided once per circuit type from its plan: in device memory when
    /// they fit there beside a proof, else streamed from pinned host memory
    /// when a proof that streams them fits, else nowhere (a/b/c from the
    /// host).
    pub(super) fn matrix_placement(&self, recording: &Arc<precompiled::Recording>) -> MatrixPlacement {
        let id = recording.circuit_id();
        if let Some(p) = self.matrix_placements.lock().recover().get(id) {
            return *p;
        }
        let sizes = CircuitSizes::of_recording(recording);
        let planned = self
            .plans
            .lock()
            .recover()
            .iter()
            .find(|(_, p)| p.sizes.same_queries(&sizes))
            .map(|(k, p)| (k.clone(), *p));
        let placement = match planned {
            Some((key, p)) => {
                let usable = self.usable.saturating_sub(self.held_elsewhere(Some(&key)));
                let plan = p.plan.with_recording(&sizes, usable);
                if plan.window != p.plan.window {
                    tracing::info!(
                        circuit = id,
                        window = plan.window,
                        was = p.plan.window,
                        proof_bytes = plan.proof_bytes,
                        "device memory planned again with the circuit's recording: smaller windows keep its matrices"
                    );
                }
                if let Some(e) = self.plans.lock().recover().get_mut(&key) {
                    e.plan = plan;
                }
                plan.matrices
            }
            // No SRS planned for it (tests that hand in recordings alone):
            // as if it were the device's only circuit.
            None => Plan::new(&sizes, self.usable).map_or(MatrixPlacement::Host, |p| p.matrices),
        };
        tracing::info!(
            circuit = id,
            bytes = sizes.matrices.unwrap_or(0),
            ?placement,
            "where the device reads the circuit's matrices (host: a/b/c are computed there)"
        );
        *self
            .matrix_placements
            .lock()
            .recover()
            .entry(id.to_string())
            .or_insert(placement)
    }

    /// `recording`'s matrices where this device reads them, made on first
    /// use; `None` when it reads them nowhere (or, with a warning, they
    /// could be put neither on the device nor in pinned memory after all),
    /// an error only when the device is lost. Matrices that do not fit the
    /// device after all (another process took its memory) stream instead.
    pub(super) fn matrix_copy(
        &self,
        recording: &Arc<precompiled::Recording>,
    ) -> Result<Option<Arc<MatrixCopy>>, ProveError> {
        let mut placement = self.matrix_placement(recording);
        let chunk = CircuitSizes::of_recording(recording).matrix_chunk();
        while placement != MatrixPlacement::Host {
            // An upload hands the pool's cached memory back: grow it again.
            let got = self.lost.note(self.matrices.get(
                recording,
                placement,
                self.ordinal(),
                (chunk, &self.pool),
                || self.refill_pool(),
            ));
            self.update_room();
            match got {
                Ok(m) => return Ok(Some(m)),
                Err(e) if e.loses_device() => return Err(e),
                Err(e) => {
                    let next = match placement {
                        MatrixPlacement::Device => MatrixPlacement::Streamed,
                        _ => MatrixPlacement::Host,
                    };
                    tracing::warn!(
                        circuit = recording.circuit_id(),
                        error = %e,
                        ?placement,
                        ?next,
                        "a circuit's matrices could not be placed as planned"
                    );
                    self.matrix_placements
                        .lock()
                        .recover()
                        .insert(recording.circuit_id().to_string(), next);
                    placement = next;
                }
            }
        }
        Ok(None)
    }
}

/// Bases per part of the h MSM, which a background proof queues part by
/// part (one piece of its device work each, see `device_queue`): at 2^25
/// an H200 takes about 0.27 s a part (123 M bases/s measured at 2^27), so
/// an urgent proof waits about that long for the part running, not for the
/// whole h MSM (1.09 s at 2^27). Tests set a small value to run proofs in
/// many pieces on small circuits.
pub(crate) static H_MSM_PART_BASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1 << 25);

/// Bases per window of streamed bases instead of the plan's, when not 0
/// (a multiple of 1024). Tests set a small value to pass a small circuit's
/// bases through several windows.
pub(crate) static WINDOW_BASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Hands the pool buffers a proof's device work reads (its prepared scalars
/// and witness) back now, each fenced by `done`, rather than when `finish`
/// drops the proof: held through the finalizer's wait and the host's sums,
/// a finished proof's preparation set can still be out when a later proof
/// prepares, which then pins one more set on a device lane (the likely
/// cause of the one lane pinning, 4.2 s, while partitions waited at 2^26 on
/// the H200). Without `done` the device work has completed already
/// (streamed bases) and they are simply dropped.
fn release_after_device(prep: split::Prepared, w: Witness, done: Option<&Arc<PooledEvent>>) {
    let Some(done) = done else {
        return;
    };
    let fence = || -> Box<dyn UseFence> { Box::new(EventFence::from(Arc::clone(done))) };
    prep.release_after(fence);
    let Witness {
        mut inputs, mut aux, ..
    } = w;
    inputs.set_use_fence(fence());
    aux.set_use_fence(fence());
}

impl NativeBackend {
    /// The kernel for query `query`'s full-width scalars (h, l, a, b in G1,
    /// b in G2), over its table when its bases are resident and have one.
    fn kernel_for<'a>(&self, resident: Option<&'a ResidentSrs>, query: usize) -> MsmKernel<'a> {
        match self.config.msm_kernel {
            MsmKernelKind::Sppark => MsmKernel::Sppark,
            MsmKernelKind::Tables => MsmKernel::Tables {
                table: resident.and_then(|r| r.tables[query].as_ref()),
                window_bits: 0,
                batch_entries: 0,
            },
        }
    }
}

/// G1 query `query`'s bases (h, l, a, b): resident, or streamed from the
/// host through `windows`.
fn g1_bases<'a>(
    resident: Option<&'a ResidentSrs>,
    windows: Option<&'a mut Windows<G1>>,
    points: Option<&'a SrsPoints>,
    query: usize,
) -> Result<Bases<'a, G1>, ProveError> {
    match (resident, windows, points) {
        (Some(r), _, _) => Ok(Bases::Resident(&r.queries[query])),
        (None, Some(windows), Some(p)) => {
            let host = match query {
                0 => p.h(),
                1 => p.l(),
                2 => p.a(),
                _ => p.b_g1(),
            };
            Ok(Bases::Streamed { host, windows })
        }
        _ => Err(backend_error("bases neither resident nor in host memory")),
    }
}
