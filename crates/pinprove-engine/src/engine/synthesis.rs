//! Synthesis workers: a partition out of the queue is admitted by the
//! memory budget, gets its parameters, is synthesized into pool buffers and
//! handed to a device.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pinprove_groth16::{AbcLayout, QueryLengths, domain::domain_size};
use pinprove_mem::ErrorChain;

use super::guard::catch;
use super::inner::Inner;
use super::scheduler::Taken;
use super::state::{InFlight, Pending, Synthesized, Ticket};
use super::warm_sets::WarmedAs;
use crate::job::{PartitionTimings, Priority, SynthesisContext};
use crate::srs::Acquired;
use crate::{EngineError, Phase};

impl Inner {
    /// Host bytes one partition of `circuit_id` needs while in flight: its
    /// vectors (as the pool rounds them; no a/b/c where a recording lets the
    /// devices compute them), densities, and what the backends add. From
    /// the capacity hint, or from the parameters' shape before the first
    /// synthesis. A hint that is implausible, or that disagrees with
    /// the parameters (other inputs or aux, more constraints than their
    /// domain), is discarded and relearned: a tampered hints file must not
    /// turn every later submission away. A partition made of `parts` parts
    /// (0: synthesized whole) also has its groups' buffers while it
    /// synthesizes classically (see
    /// [`pinprove_groth16::parts_scratch_bytes`]); from a recording it
    /// computes its witness whole and has none (a partition that falls
    /// back tops its funds up, as for a/b/c).
    /// `urgent`: for a partition of an urgent job (backends may add more
    /// for it).
    pub(super) fn working_set(&self, circuit_id: &str, parts: usize, urgent: bool) -> Result<u64, EngineError> {
        let (shape, n, queries) = self.partition_shape(circuit_id)?;
        let vec = |elems: usize| self.pool.rounded_size(elems.saturating_mul(32)).unwrap_or(usize::MAX) as u64;
        let densities = (shape.inputs.saturating_add(shape.aux.saturating_mul(2)) / 8 + 64) as u64;
        let extra = self
            .devices
            .iter()
            .map(|d| d.backend.extra_working_set(&shape, queries.as_ref(), urgent))
            .max()
            .unwrap_or(0);
        // A partition that falls back to the classic synthesis tops its
        // funds up when it takes a/b/c (urgently: it was admitted).
        let abc = if self.abc_on_host(circuit_id) {
            vec(n).saturating_mul(3)
        } else {
            0
        };
        let scratch = if self.precompiled.ready_recording(circuit_id).is_some() {
            0
        } else {
            pinprove_groth16::parts_scratch_bytes(&self.pool, shape, parts)
        };
        Ok(abc
            .saturating_add(vec(shape.inputs))
            .saturating_add(vec(shape.aux))
            .saturating_add(densities)
            .saturating_add(extra)
            .saturating_add(scratch))
    }

    /// Whether partitions of `circuit_id` synthesize a, b and c into host
    /// memory (all but pre-compiled circuits whose a/b/c the devices
    /// compute).
    pub(super) fn abc_on_host(&self, circuit_id: &str) -> bool {
        !(self.abc_on_device
            && self
                .precompiled
                .ready_recording(circuit_id)
                .is_some_and(|rec| self.devices_evaluate(&rec)))
    }

    /// Whether every device computes the a/b/c of `recording`'s circuit
    /// itself (a device whose memory plan leaves the circuit's matrices on
    /// the host does not: then synthesis computes them, within the
    /// partition's admission).
    pub(super) fn devices_evaluate(&self, recording: &Arc<pinprove_groth16::precompiled::Recording>) -> bool {
        self.abc_on_device && self.devices.iter().all(|d| d.backend.evaluates_recording(recording))
    }

    /// The pool buffers one partition of `circuit_id` synthesizes into, in
    /// bytes: a, b, c (none where the devices compute them), inputs and aux
    /// (what a warm set prepares).
    pub(super) fn partition_buffers(&self, circuit_id: &str) -> Result<[usize; 5], EngineError> {
        let (shape, n, _) = self.partition_shape(circuit_id)?;
        let bytes = |elems: usize| elems.saturating_mul(32);
        let abc = if self.abc_on_host(circuit_id) { bytes(n) } else { 0 };
        Ok([abc, abc, abc, bytes(shape.inputs), bytes(shape.aux)])
    }

    /// The pool buffers a partition of `circuit_id` takes between its
    /// admission and its proof: those it synthesizes into, and for an
    /// `urgent` one also those its backend prepares into (as a proof of
    /// the circuit showed; see
    /// [`BackendHint::host_buffers`](pinprove_groth16::BackendHint)), so
    /// that admission (and a circuit's kept set) holds those too. Not for
    /// background partitions: they would hold their backend's buffers
    /// from admission on, through synthesis and the wait for a device,
    /// while the partitions at the device need them (measured on the H200
    /// at 2^24, with preparation ahead of the device: each of 16 partitions
    /// pinned its own, 80 fresh buffers, the GPU 81.6% busy against 94.5%).
    /// Within the working set `ws`: a hint naming more (stale, or tampered
    /// with) adds only what fits.
    fn admission_buffers(&self, circuit_id: &str, ws: u64, urgent: bool) -> Result<Vec<usize>, EngineError> {
        let mut buffers = self.partition_buffers(circuit_id)?.to_vec();
        if !urgent {
            return Ok(buffers);
        }
        let mut room = ws.saturating_sub(buffers.iter().map(|&b| b as u64).sum());
        let prepared = self
            .devices
            .iter()
            .find_map(|d| self.hints.backend_hint(circuit_id, d.backend.name()))
            .map(|h| h.host_buffers)
            .unwrap_or_default();
        for b in prepared {
            if b > 0 && b <= room {
                room -= b;
                buffers.push(b as usize);
            }
        }
        Ok(buffers)
    }

    /// A partition's shape (see `working_set`), the length of its a, b and
    /// c under the engine's layout, and its parameters' query lengths when
    /// they are registered (one header read gives both).
    fn partition_shape(
        &self,
        circuit_id: &str,
    ) -> Result<(pinprove_groth16::CapacityHint, usize, Option<QueryLengths>), EngineError> {
        let budget = self.pool.budget().total();
        let header = self.srs.shape_and_lengths(circuit_id);
        let queries = header.as_ref().ok().map(|(_, q)| *q);
        let params = header.map(|(shape, _)| shape);
        let hint = pinprove_groth16::plausible_hint(&self.hints, circuit_id, self.layout, budget).filter(|h| {
            let Ok(p) = &params else { return true };
            let agrees = h.inputs == p.inputs && h.aux == p.aux && h.constraints <= p.constraints;
            if !agrees {
                tracing::warn!(circuit = circuit_id, hint = ?h, parameters = ?p, "capacity hint disagrees with the parameters; discarded and relearned");
                self.hints.forget(circuit_id);
            }
            agrees
        });
        let shape = match hint {
            Some(h) => h,
            None => params?,
        };
        let n = match self.layout {
            AbcLayout::Exact => shape.constraints,
            AbcLayout::PaddedToDomain => domain_size(shape.constraints)?,
        };
        Ok((shape, n, queries))
    }

    /// After a proof of `circuit_id`, its warm set is made again when a
    /// different number of partitions fits at once now (its backend showed
    /// its preparation share, the device lanes' kept sets came to be held)
    /// or, for a circuit kept ready, when its backend `learned` what a
    /// proof takes (buffer sizes, see
    /// [`admission_buffers`](Self::admission_buffers), which its kept set
    /// keeps too). Not otherwise: a hint changes with every witness a
    /// little larger, and on the H200 a warm set redone each time was
    /// freed again under pressure (2^26: 30 buffers freed, 16 pinned anew).
    pub(super) fn rewarm_after_proof(&self, circuit_id: &str, learned: bool) {
        let Some(warmed) = self.warm.warmed(circuit_id) else {
            return;
        };
        let kept = learned && self.warm.kept(circuit_id).is_some();
        let fit_changed = matches!(self.warm_partitions(circuit_id), Ok(n) if n != warmed.partitions);
        if (kept || fit_changed)
            && let Err(e) = self.warm(circuit_id)
        {
            tracing::warn!(circuit = %circuit_id, "warming the pool again failed: {}", ErrorChain(&e));
        }
    }

    /// The partitions a warm set of `circuit_id` is made for: as many as
    /// the budget admits at once beside the kept sets and the loaded SRSs
    /// (at most `synthesis_workers`; with the heap its partitions said they
    /// hold), or `warm_partitions`. Those are left out because the budget
    /// does not evict them for these partitions: counted in, at 2^26 on the
    /// H200 beside four device lanes' preparation sets (37.6 GB), a warm
    /// set would be made for partitions that cannot be admitted, and pinned
    /// in the background only for admissions to free it again.
    fn warm_partitions(&self, circuit_id: &str) -> Result<usize, EngineError> {
        Ok(match self.config.warm_partitions {
            Some(n) => n,
            None => {
                let heap = self.warm.heap(circuit_id);
                let ws = self.working_set(circuit_id, 0, false)?.saturating_add(heap).max(1);
                let room = self
                    .budget
                    .limit_for(Priority::Normal.rank())
                    .saturating_sub(self.pool.kept_bytes())
                    .saturating_sub(self.srs.host_bytes());
                ((room / ws) as usize).min(self.config.synthesis_workers.max(1))
            }
        })
    }

    /// Warms again, without a, b and c, the circuits warmed with them whose
    /// a/b/c the devices compute now (their recording became ready after
    /// the warm-up): those buffers would sit idle, out of the budget.
    pub(super) fn rewarm_without_abc(&self) {
        let stale = self.warm.warmed_with_abc(|id| !self.abc_on_host(id));
        for id in stale {
            tracing::info!(circuit = %id, "a/b/c are computed on the devices now: the circuit's warm set drops them");
            if let Err(e) = self.warm(&id) {
                tracing::warn!(circuit = %id, "warming the pool again failed: {}", ErrorChain(&e));
            }
        }
    }

    /// Prepares, in the background and out of spare budget, the pool
    /// buffers a steady stream of `circuit_id` needs: those of as many
    /// partitions as the budget admits at once (at most `synthesis_workers`),
    /// or `warm_partitions`. They stay ready past the pool's idle timeout
    /// until the engine ends (the budget still evicts them for admitted
    /// work).
    pub(super) fn warm(&self, circuit_id: &str) -> Result<(), EngineError> {
        let buffers = self.partition_buffers(circuit_id)?;
        let partitions = self.warm_partitions(circuit_id)?;
        let warmed = WarmedAs {
            abc: self.abc_on_host(circuit_id),
            partitions,
        };
        self.warm.record(circuit_id, warmed);
        let of = |n: usize, one: &[usize]| -> Vec<usize> {
            (0..n).flat_map(|_| one.iter().copied()).filter(|&b| b > 0).collect()
        };
        let sizes = of(partitions, &buffers);
        // A kept partition also keeps what its backend prepares into: an
        // urgent proof's preparation must not pin either.
        let kept_partitions = self.warm.kept(circuit_id).unwrap_or(0);
        let kept = if kept_partitions > 0 {
            let one = self.admission_buffers(circuit_id, self.working_set(circuit_id, 0, true)?, true)?;
            of(kept_partitions, &one)
        } else {
            Vec::new()
        };
        let (pool, name) = (Arc::clone(&self.pool), circuit_id.to_string());
        let spawned = self.warm.start(move || {
            let started = Instant::now();
            // A circuit kept ready: its kept set, made out of spare memory
            // as the warm set is (either call tops up every set).
            if !kept.is_empty()
                && let Err(e) = pool.keep_reserved(&kept_set_name(&name), &kept)
            {
                tracing::warn!(circuit = %name, "keeping buffers ready failed: {}", ErrorChain(&e));
            }
            match pool.keep_warm(&name, &sizes) {
                Ok(r) => {
                    tracing::info!(circuit = %name, partitions, wanted = r.wanted_bytes, allocated = r.allocated_bytes,
                    missing = r.missing_bytes, ms = started.elapsed().as_millis() as u64, "pool warmed for a circuit")
                }
                Err(e) => tracing::warn!(circuit = %name, "warming the pool failed: {}", ErrorChain(&e)),
            }
        });
        if let Err(e) = spawned {
            tracing::warn!(circuit = circuit_id, "could not start warming the pool: {e}");
        }
        Ok(())
    }

    /// Whether nothing the engine runs holds memory that will come back:
    /// every partition out of the queue waits for its admission, and no
    /// warm-up, recording or recording load runs. An admission that waits
    /// then would wait forever (see
    /// [`PinnedPool::admit_unless_stuck`](pinprove_mem::PinnedPool::admit_unless_stuck)).
    fn nothing_in_flight(&self) -> bool {
        self.gauges.only_admissions() && !self.warm.busy() && !self.precompiled.busy()
    }

    /// The next partition the scheduler lets this worker take, counted in
    /// flight from here on; `None` once the engine shuts down.
    fn take_pending(&self) -> Option<(Pending, Ticket, Taken<'_>)> {
        self.scheduler.take(|p| self.gauges.ticket(&p.job, p.index))
    }

    pub(super) fn synthesis_worker(&self, w: usize) {
        let lane = format!("synth-{w}");
        while let Some((p, ticket, mut taken)) = self.take_pending() {
            let (job, index) = (Arc::clone(&p.job), p.index);
            match catch(|| self.prepare(p, ticket, &mut taken, &lane)) {
                Ok(Some(item)) => self.hand_off(item),
                Ok(None) => {}
                Err(msg) => self.panicked(&job, format!("partition {index}: panicked while being prepared: {msg}")),
            }
            drop(taken);
        }
    }

    /// Passes a synthesized partition to its device's workers; dropped (its
    /// ticket and memory given back) if the engine shuts down meanwhile.
    fn hand_off(&self, mut item: Synthesized) {
        let d = item.flight.ticket.device().expect("routed");
        let handoff = &self.devices[d].handoff;
        loop {
            match handoff.push(item, Duration::from_millis(100)) {
                None => return,
                Some(_) if self.shutting_down() => return,
                Some(back) => item = back,
            }
        }
    }

    /// Admits, loads parameters for, and synthesizes one partition, then
    /// routes it to a device. `None` when the job stopped or this failed it.
    fn prepare(&self, mut p: Pending, ticket: Ticket, taken: &mut Taken<'_>, lane: &str) -> Option<Synthesized> {
        p.wait = tracing::Span::none();
        let span = p.span.clone();
        let job = Arc::clone(&p.job);
        let label = format!("{}/{}", job.id, p.index);
        if job.stopped() {
            return None;
        }
        job.lock().started = true;
        let mut timings = PartitionTimings {
            queue_wait: p.enqueued.elapsed(),
            ..Default::default()
        };
        self.metrics.observe(Phase::QueueWait, timings.queue_wait);

        // One admission covers the partition's working set and, when its
        // parameters are not resident, their load: a worker never waits for
        // memory while holding part of what it needs.
        let t = Instant::now();
        let admission = tracing::info_span!(parent: &span, Phase::Admission.name()).entered();
        let slot = self.scheduler.synthesis_slot(job.priority);
        let mut srs_part = 0;
        let mut load_claim = None;
        let parts = p.partition.parts();
        let heap = p.partition.heap_bytes();
        if heap > 0 {
            self.warm.note_heap(&job.circuit_id, heap);
        }
        let (mut funds, srs, load) = loop {
            let admitted = self
                .working_set(&job.circuit_id, parts, job.priority.is_urgent())
                .and_then(|ws| {
                    if srs_part == 0 && load_claim.is_none() {
                        load_claim = self.srs.claim_load(&job.circuit_id, || job.stopped());
                        if load_claim.is_some() {
                            srs_part = self.srs.load_estimate(&job.circuit_id)?;
                        }
                    }
                    // Through the pool: the buffers it will synthesize into are
                    // set aside or handed over, never freed and pinned again.
                    let buffers = self.admission_buffers(&job.circuit_id, ws, job.priority.is_urgent())?;
                    let total = ws.saturating_add(heap).saturating_add(srs_part);
                    Ok(self
                        .pool
                        .admit_unless_stuck(&buffers, total, job.priority.rank(), || self.nothing_in_flight())?)
                });
            let mut funds = match admitted {
                Ok(f) => f,
                Err(e) => {
                    self.fail(&job, format!("partition {}: admission: {}", p.index, ErrorChain(&e)));
                    return None;
                }
            };
            if job.stopped() {
                return None;
            }
            let mut srs_funds = funds.split(srs_part);
            ticket.enter(Phase::SrsLoad);
            match self.srs.acquire_funded(&job.circuit_id, &mut srs_funds) {
                // Leftover load funds (resident after all) are released here.
                Ok(Acquired::Ready(srs, load)) => break (funds, srs, load),
                // Evicted since the admission was sized: admit again, larger.
                Ok(Acquired::NeedsFunds) => {
                    // Claimed afresh: another partition may load it first.
                    load_claim = None;
                    srs_part = 0;
                }
                Err(e) => {
                    self.fail(&job, format!("parameters of {}: {}", job.circuit_id, ErrorChain(&e)));
                    return None;
                }
            }
        };
        // Loaded (or resident): partitions waiting for the claim look again.
        drop(load_claim);
        drop(admission);
        taken.admitted();
        timings.budget_wait = t.elapsed().saturating_sub(load);
        timings.srs_load = load;
        self.metrics.observe(Phase::Admission, timings.budget_wait);
        // The load ran last, after the budget admitted the partition.
        let now = Instant::now();
        let loaded_from = now.checked_sub(load).unwrap_or(t).max(t);
        self.timeline
            .record_between(lane, Phase::Admission, t, loaded_from, label.clone());
        if !load.is_zero() {
            self.timeline
                .record_between(lane, Phase::SrsLoad, loaded_from, now, job.circuit_id.clone());
        }

        let t = Instant::now();
        ticket.enter(Phase::Synthesis);
        // What the partition's own heap needs, until synthesis ends.
        let heap_funds = funds.split(heap);
        let inputs = p.partition.public_inputs();
        let ctx = SynthesisContext {
            circuit_id: &job.circuit_id,
            pool: &self.pool,
            hints: &self.hints,
            layout: self.layout,
            funds: std::mem::replace(&mut funds, pinprove_mem::Reservation::empty(&self.budget)),
            shape: self.srs.shape(&job.circuit_id).ok(),
        };
        let partition = p.partition;
        let synthesize = || {
            tracing::info_span!(parent: &span, Phase::Synthesis.name())
                .in_scope(|| catch(move || self.synthesize_partition(partition, ctx)))
        };
        let synthesized = if job.priority.is_urgent() {
            self.urgent_threads.install(synthesize)
        } else {
            synthesize()
        };
        drop((slot, heap_funds));
        // The phase ends after the backend's preparation below, or here.
        let end_synthesis = |timings: &mut PartitionTimings| {
            timings.synthesis = t.elapsed();
            self.metrics.observe(Phase::Synthesis, timings.synthesis);
            self.timeline.record(lane, Phase::Synthesis, t, label.clone());
        };
        let mut assignment = match synthesized {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                end_synthesis(&mut timings);
                self.fail(&job, format!("partition {} synthesis: {}", p.index, ErrorChain(&e)));
                return None;
            }
            Err(msg) => {
                end_synthesis(&mut timings);
                self.panicked(&job, format!("partition {} synthesis panicked: {msg}", p.index));
                return None;
            }
        };
        if job.stopped() {
            end_synthesis(&mut timings);
            return None;
        }
        let mut ticket = ticket;
        let device = match self.devices.pick(&srs, &self.gauges) {
            Ok(d) => {
                ticket.route(d);
                d
            }
            Err(e) => {
                end_synthesis(&mut timings);
                self.fail(&job, format!("partition {}: {e}", p.index));
                return None;
            }
        };
        // The backend's host work on the witness, here rather than on the
        // thread that feeds the device: part of synthesis.
        let urgent = job.priority.is_urgent();
        let prepared = catch(|| self.devices[device].backend.prepare(&srs, &mut assignment, urgent));
        end_synthesis(&mut timings);
        match prepared {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.devices.note_error(device, &e);
                self.fail(&job, format!("partition {} preparation: {}", p.index, ErrorChain(&e)));
                return None;
            }
            Err(msg) => {
                self.panicked(&job, format!("partition {} preparation panicked: {msg}", p.index));
                return None;
            }
        }
        if job.stopped() {
            return None;
        }
        ticket.enter(Phase::HandoffWait);
        Some(Synthesized {
            flight: InFlight {
                job,
                index: p.index,
                srs,
                randomness: p.randomness,
                inputs,
                timings,
                ready_at: Instant::now(),
                wait: tracing::info_span!(parent: &span, Phase::HandoffWait.name()),
                span,
                ticket,
                critical: p.critical.take(),
            },
            assignment,
        })
    }
}

/// The pool's name for the buffers it keeps under pressure for a circuit
/// (see [`Engine::keep_ready`](super::Engine::keep_ready)).
fn kept_set_name(circuit_id: &str) -> String {
    format!("{circuit_id} (kept)")
}
