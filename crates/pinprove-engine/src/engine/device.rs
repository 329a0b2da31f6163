//! Device workers (the backend's first step), finalizers (the second),
//! and the engine's background threads.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use pinprove_groth16::{Proof, ProofBatch};
use pinprove_mem::ErrorChain;

use super::guard::catch;
use super::inner::Inner;
use super::state::{InFlight, JobCtl, Started, Synthesized};
use crate::Phase;
use crate::job::{JobOutcome, PartitionResult};
use crate::telemetry::GpuTelemetry;

impl Inner {
    /// A worker of device `d`, named `lane` in the timeline; with
    /// `urgent_only`, one that takes High and Critical partitions only.
    pub(super) fn device_worker(&self, d: usize, lane: &str, urgent_only: bool) {
        pinprove_mem::mark_device_lane();
        let dev = &self.devices[d];
        // Since when Critical partitions have been on their way to a device
        // while this worker held back the others.
        let mut holding: Option<Instant> = None;
        loop {
            let held = self.scheduler.hold_background(&mut holding);
            let timeout = Duration::from_millis(if held { 2 } else { 100 });
            let item = match dev.handoff().pop(timeout, held || urgent_only) {
                Some(item) => item,
                None if !self.shutting_down() => continue,
                None => return,
            };
            let group = self.with_partners(d, item);
            let who: Vec<_> = group
                .iter()
                .map(|s| (Arc::clone(&s.flight.job), s.flight.index))
                .collect();
            if let Err(msg) = catch(|| self.start_group(d, lane, group)) {
                for (job, index) in who {
                    self.panicked(
                        &job,
                        format!(
                            "partition {index} on {}: the backend's first step panicked: {msg}",
                            dev.id()
                        ),
                    );
                }
            }
            dev.set_current_job(None);
        }
    }

    /// `item` and the background partitions of its circuit waiting for
    /// device `d` that its backend takes in the same `start` (see
    /// `Backend::partitions_per_start`). It waits briefly only for one a
    /// synthesis worker is bringing in (waiting for the room this pop made);
    /// with none on its way it takes those already waiting.
    fn with_partners(&self, d: usize, item: Synthesized) -> Vec<Synthesized> {
        let dev = &self.devices[d];
        let urgent = item.flight.job.priority.is_urgent();
        let n = if urgent {
            1
        } else {
            dev.backend().partitions_per_start(&item.flight.srs)
        };
        let srs = Arc::clone(&item.flight.srs);
        let mut group = vec![item];
        if n > 1 {
            group.extend(dev.handoff().pop_matching(n - 1, PARTNER_PATIENCE, |s: &Synthesized| {
                !s.flight.job.priority.is_urgent() && Arc::ptr_eq(&s.flight.srs, &srs)
            }));
        }
        group
    }

    /// Runs the backend's first step for `items` (partitions of one SRS) as
    /// one job.
    fn start_group(&self, d: usize, lane: &str, items: Vec<Synthesized>) {
        let dev = &self.devices[d];
        if dev.lost().is_some() {
            for item in items {
                self.reroute(d, item);
            }
            return;
        }
        let mut flights = Vec::with_capacity(items.len());
        let mut assignments = Vec::with_capacity(items.len());
        for Synthesized { mut flight, assignment } in items {
            flight.wait = tracing::Span::none();
            flight.timings.handoff_wait = flight.ready_at.elapsed();
            self.metrics.observe(Phase::HandoffWait, flight.timings.handoff_wait);
            if flight.job.stopped() {
                continue;
            }
            // Its device work is queued now: the GPU's queue need not drain
            // for it any longer.
            flight.critical.take();
            flight.ticket.enter(Phase::Start);
            flights.push(flight);
            assignments.push(assignment);
        }
        let Some(first) = flights.first() else { return };
        if flights.len() > 1 {
            self.metrics
                .partitions_started_together
                .fetch_add(flights.len() as u64, Ordering::Relaxed);
        }
        let urgent = first.job.priority.is_urgent();
        dev.set_current_job(Some(first.job.id));
        let job = ProofBatch::new(
            Arc::clone(&first.srs),
            assignments,
            flights.iter().map(|f| f.randomness).collect(),
        )
        .with_urgent(urgent);
        let span = tracing::info_span!(parent: &first.span, Phase::Start.name(), device = %dev.id(), partitions = flights.len());
        let t = Instant::now();
        let started = span.in_scope(|| dev.backend().start(job));
        let took = t.elapsed();
        dev.note_busy(took);
        for flight in &mut flights {
            flight.timings.start = took;
            self.metrics.observe(Phase::Start, took);
            self.timeline
                .record_between(lane, Phase::Start, t, t + took, flight.label());
        }
        match started {
            Ok(started) => {
                for flight in &mut flights {
                    flight.ready_at = Instant::now();
                    flight.wait = tracing::info_span!(parent: &flight.span, Phase::FinishWait.name());
                    flight.ticket.enter(Phase::FinishWait);
                }
                // The finalizers outlive the workers: a send fails only when
                // the engine is gone, and then the partitions are dropped.
                let _ = self.devices[d].finalize_queue(urgent).0.send(Started {
                    flights,
                    started,
                    device: d,
                });
            }
            Err(e) => {
                self.devices.note_error(d, &e);
                for flight in flights {
                    self.fail(
                        &flight.job,
                        format!("partition {} on {}: {}", flight.index, dev.id(), ErrorChain(&e)),
                    );
                }
            }
        }
    }

    /// Hands a synthesized partition that reached a lost device to another
    /// device, or fails its job when none is left.
    fn reroute(&self, from: usize, mut item: Synthesized) {
        let job = Arc::clone(&item.flight.job);
        let index = item.flight.index;
        match self.devices.pick(&item.flight.srs, &self.gauges) {
            Ok(to) => {
                let dev = &self.devices[to];
                tracing::warn!(job = %job.id, partition = index, from = %self.devices[from].id(), to = %dev.id(),
                    "the device was lost; the partition moves");
                item.flight.ticket.route(to);
                self.metrics.partitions_rerouted.fetch_add(1, Ordering::Relaxed);
                dev.handoff().push_now(item);
            }
            Err(e) => {
                drop(item);
                self.fail(&job, format!("partition {index}: {e}"));
            }
        }
    }

    /// Completes the partitions started on device `d`: background ones, or
    /// with `urgent` High and Critical ones (whose finish then waits only
    /// for their own device work, not for background partitions' ahead of
    /// them).
    pub(super) fn finalizer(&self, d: usize, lane: &str, urgent: bool) {
        let from = &self.devices[d].finalize_queue(urgent).1;
        loop {
            let item = match from.recv_timeout(Duration::from_millis(100)) {
                Ok(item) => item,
                Err(RecvTimeoutError::Timeout) if !self.shutting_down() => continue,
                Err(_) => return,
            };
            let device = item.device;
            let who: Vec<_> = item.flights.iter().map(|f| (Arc::clone(&f.job), f.index)).collect();
            if let Err(msg) = catch(|| self.finish_group(lane, item)) {
                let name = &self.devices[device].id();
                for (job, index) in who {
                    self.panicked(
                        &job,
                        format!("partition {index} on {name}: the backend's second step panicked: {msg}"),
                    );
                }
            }
        }
    }

    fn finish_group(&self, lane: &str, item: Started) {
        let Started {
            mut flights,
            started,
            device,
        } = item;
        let dev = &self.devices[device];
        for flight in &mut flights {
            flight.wait = tracing::Span::none();
            flight.timings.finish_wait = flight.ready_at.elapsed();
        }
        if flights.iter().all(|f| f.job.stopped()) {
            return;
        }
        for flight in &mut flights {
            flight.ticket.enter(Phase::Finish);
        }
        let t = Instant::now();
        let proofs = tracing::info_span!(parent: &flights[0].span, Phase::Finish.name(), partitions = flights.len())
            .in_scope(|| started.finish());
        let took = t.elapsed();
        for flight in &mut flights {
            flight.timings.finish = took;
            self.metrics.observe(Phase::Finish, took);
            self.timeline
                .record_between(lane, Phase::Finish, t, t + took, flight.label());
            self.srs.release(&flight.job.circuit_id);
        }
        let partitions = flights.len();
        let proofs = match proofs {
            Ok(p) if p.len() == partitions => p,
            Ok(p) => {
                for flight in flights {
                    self.fail(
                        &flight.job,
                        format!(
                            "partition {}: the backend returned {} proofs for {partitions} partitions",
                            flight.index,
                            p.len(),
                        ),
                    );
                }
                return;
            }
            Err(e) => {
                self.devices.note_error(device, &e);
                for flight in flights {
                    self.fail(
                        &flight.job,
                        format!("partition {} on {}: {}", flight.index, dev.id(), ErrorChain(&e)),
                    );
                }
                return;
            }
        };
        // Every proof the backend returned counts, also one whose job was
        // stopped meanwhile (`complete` then drops it).
        for (flight, proof) in flights.into_iter().zip(proofs) {
            let job = Arc::clone(&flight.job);
            // Kept for a later process's first proof of the circuit.
            let learned = dev.backend().hint(&flight.srs).is_some_and(|hint| {
                self.hints
                    .record_backend_hint(&job.circuit_id, dev.backend().name(), hint)
            });
            self.warm.rewarm_after_proof(&job.circuit_id, learned);
            self.metrics.proofs_completed.fetch_add(1, Ordering::Relaxed);
            self.metrics.observe(Phase::Total, flight.timings.total());
            self.complete(&job, flight, proof, device);
        }
    }

    fn complete(&self, job: &JobCtl, flight: InFlight, proof: Proof, device: usize) {
        // Let go of the SRS and the counts before the job is seen complete:
        // a waiter may evict it, or look at the counts, at once.
        let InFlight {
            index,
            inputs,
            timings,
            srs,
            ticket,
            ..
        } = flight;
        drop((srs, ticket));
        let done = {
            let mut g = job.lock();
            if g.outcome.is_some() {
                return;
            }
            g.results[index] = Some(PartitionResult {
                index,
                proof,
                public_inputs: inputs,
                timings,
                device,
            });
            g.proved += 1;
            (g.proved == job.total).then(|| g.results.iter_mut().filter_map(Option::take).collect::<Vec<_>>())
        };
        if let Some(results) = done
            && job.finish(JobOutcome::Completed(results))
        {
            self.jobs.ended(job.id);
            tracing::debug!(job = %job.id, ms = job.submitted.elapsed().as_millis() as u64, "job completed");
        }
    }

    /// Memory becomes evictable by time passing alone (an SRS turning idle),
    /// which no release announces: look again now and then while requests
    /// wait.
    pub(super) fn housekeeping(&self) {
        let tick = (self.config.srs_idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        while !self.shutting_down() {
            self.scheduler.wait(tick);
            if self.budget.has_waiters() {
                self.budget.reclaim();
            }
            if self.sizing.abc_on_device() {
                self.warm.rewarm_without_abc();
            }
        }
    }

    /// Samples the utilization, memory and PCIe traffic of each device's
    /// GPU about every 100 ms into the timeline (as counters named after
    /// the device, "gpu0 util %") and the device's latest reading for
    /// status and metrics. Devices without a GPU of their own are not
    /// sampled.
    pub(super) fn sample_gpus(&self, telemetry: &dyn GpuTelemetry) {
        let gpus: Vec<(usize, usize)> = self
            .devices
            .iter()
            .enumerate()
            .filter_map(|(d, dev)| Some((d, dev.backend().gpu()?)))
            .collect();
        while !self.shutting_down() {
            self.scheduler.wait(Duration::from_millis(100));
            for &(d, gpu) in &gpus {
                let Some(reading) = telemetry.read(gpu) else { continue };
                let dev = &self.devices[d];
                let name = &dev.id();
                self.timeline.sample(
                    &format!("{name}{}", crate::timeline::GPU_UTILIZATION),
                    reading.utilization_percent,
                );
                self.timeline
                    .sample(&format!("{name} PCIe RX GB/s"), reading.pcie_rx_bytes_per_s / 1e9);
                self.timeline
                    .sample(&format!("{name} PCIe TX GB/s"), reading.pcie_tx_bytes_per_s / 1e9);
                dev.note_reading(reading);
            }
        }
    }
}

/// How long a device worker waits for the partners of a partition it took
/// (see `Inner::with_partners`): long enough for a synthesized partition
/// that waited for room in the hand-off to arrive, short beside any
/// partition's device work.
const PARTNER_PATIENCE: Duration = Duration::from_millis(20);
