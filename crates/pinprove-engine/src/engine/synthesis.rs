//! Synthesis workers: a partition out of the queue is admitted by the
//! memory budget, gets its parameters, is synthesized into pool buffers and
//! handed to a device.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pinprove_mem::ErrorChain;
use pinprove_mem::sync::Recover;

use super::guard::catch;
use super::inner::Inner;
use super::scheduler::Taken;
use super::state::{InFlight, Pending, Synthesized, Ticket};

use crate::Phase;
use crate::job::{PartitionTimings, SynthesisContext};
use crate::srs::Acquired;

impl Inner {
    /// Whether nothing the engine runs holds memory that will come back:
    /// every partition out of the queue waits for its admission, and no
    /// warm-up, recording, recording load or parameter load runs, and no
    /// parameters are kept for a window that will end. An
    /// admission that waits then would wait forever (see
    /// [`PinnedPool::admit_unless_stuck`](pinprove_mem::PinnedPool::admit_unless_stuck)).
    pub(super) fn nothing_in_flight(&self) -> bool {
        self.gauges.only_admissions()
            && !self.warm.busy()
            && !self.precompiled.busy()
            && !self.srs.loading_now()
            && !self.srs.kept_for_a_while()
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
            match catch(|| self.admit_and_synthesize(p, ticket, &mut taken, &lane)) {
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
        let handoff = &self.devices[d].handoff();
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
    fn admit_and_synthesize(
        &self,
        mut p: Pending,
        ticket: Ticket,
        taken: &mut Taken<'_>,
        lane: &str,
    ) -> Option<Synthesized> {
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
                .sizing
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
                    let buffers = self
                        .sizing
                        .admission_buffers(&job.circuit_id, ws, job.priority.is_urgent())?;
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
            // An urgent partition's load decodes on the urgent threads, not
            // behind a stream's witness computations.
            let mut acquire = || self.srs.acquire_funded(&job.circuit_id, &mut srs_funds);
            let acquired = if job.priority.is_urgent() {
                self.urgent_threads.install(acquire)
            } else {
                acquire()
            };
            match acquired {
                // Leftover load funds (resident after all) are released here.
                Ok(Acquired::Ready(srs, load)) => break (funds, srs, load),
                // Evicted since the admission was sized: admit again, larger.
                Ok(Acquired::NeedsFunds) => {
                    // Claimed afresh: another partition may load it first.
                    load_claim = None;
                    srs_part = 0;
                    // Waiting for admission again, as every admission that
                    // waits (and so nothing in flight if nothing else is).
                    ticket.enter(Phase::Admission);
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
        let seen = self.waits_seen.lock().recover().remove(&(job.id, p.index));
        let admission_label = match seen {
            Some(reasons) => format!("{label} (waited for {})", reasons.join(", ")),
            None => label.clone(),
        };
        self.timeline
            .record_between(lane, Phase::Admission, t, loaded_from, admission_label);
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
            layout: self.sizing.layout(),
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
        let prepared = catch(|| self.devices[device].backend().prepare(&srs, &mut assignment, urgent));
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
