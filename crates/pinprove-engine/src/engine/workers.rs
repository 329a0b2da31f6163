//! The worker loops of the pipeline: synthesis workers (admission, SRS,
//! synthesis), device workers (the backend's first step), finalizers (the
//! second step), and housekeeping.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pinprove_groth16::ProvingJob;

use super::*;
use crate::job::SynthesisContext;
use crate::srs::Acquired;

impl Inner {
    pub(super) fn queue_lock(&self) -> MutexGuard<'_, BinaryHeap<Pending>> {
        self.queue.lock().recover()
    }

    pub(super) fn jobs_lock(&self) -> MutexGuard<'_, HashMap<JobId, Arc<JobCtl>>> {
        self.jobs.lock().recover()
    }

    pub(super) fn job(&self, id: JobId) -> Result<Arc<JobCtl>, EngineError> {
        self.jobs_lock().get(&id).cloned().ok_or(EngineError::UnknownJob(id))
    }

    pub(super) fn remember_finished(&self, id: JobId) {
        let mut f = self.finished.lock().recover();
        f.push_back(id);
        while f.len() > self.config.finished_jobs_kept {
            if let Some(old) = f.pop_front() {
                self.jobs_lock().remove(&old);
            }
        }
    }

    pub(super) fn drop_queued(&self, id: JobId) {
        let mut q = self.queue_lock();
        let kept: Vec<Pending> = std::mem::take(&mut *q).into_iter().filter(|p| p.job.id != id).collect();
        *q = kept.into_iter().collect();
    }

    /// Host bytes one partition of `circuit_id` needs while in flight: its
    /// vectors (as the pool rounds them), densities, and what the backends
    /// add. From the capacity hint, or from the parameters' shape before the
    /// first synthesis.
    pub(super) fn working_set(&self, circuit_id: &str) -> Result<u64, EngineError> {
        let shape = match self.hints.get(circuit_id) {
            Some(h) => h,
            None => self.srs.shape(circuit_id)?,
        };
        let n = match self.layout {
            AbcLayout::Exact => shape.constraints,
            AbcLayout::PaddedToDomain => shape.constraints.max(1).next_power_of_two(),
        };
        let vec = |elems: usize| self.pool.rounded_size(elems.saturating_mul(32)).unwrap_or(usize::MAX) as u64;
        let densities = (shape.inputs + 2 * shape.aux) as u64 / 8 + 64;
        let extra = self
            .devices
            .iter()
            .map(|d| d.backend.extra_working_set(&shape))
            .max()
            .unwrap_or(0);
        Ok(3 * vec(n) + vec(shape.inputs) + vec(shape.aux) + densities + extra)
    }

    pub(super) fn take_pending(&self) -> Option<Pending> {
        let mut q = self.queue_lock();
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                return None;
            }
            if let Some(p) = q.pop() {
                *self
                    .in_progress
                    .lock()
                    .recover()
                    .entry(p.job.circuit_id.clone())
                    .or_insert(0) += 1;
                return Some(p);
            }
            q = self.queue_cv.wait(q).recover();
        }
    }

    /// A partition left the pipeline (done, failed or abandoned).
    pub(super) fn partition_gone(&self, job: &JobCtl) {
        let mut g = self.in_progress.lock().recover();
        if let Some(n) = g.get_mut(&job.circuit_id) {
            *n = n.saturating_sub(1);
        }
        self.quiet.notify_all();
    }

    pub(super) fn fail(&self, job: &JobCtl, what: String) {
        tracing::warn!(job = %job.id, "{what}");
        self.metrics.proofs_failed.fetch_add(1, Ordering::Relaxed);
        if job.finish(JobOutcome::Failed(what)) {
            self.drop_queued(job.id);
            self.remember_finished(job.id);
        }
    }

    pub(super) fn synthesis_slot(&self) -> Option<SynthSlot<'_>> {
        let cap = self.config.max_concurrent_syntheses?;
        let mut n = self.synth_running.lock().recover();
        while *n >= cap.max(1) && !self.shutdown.load(Ordering::Acquire) {
            n = self.synth_cv.wait(n).recover();
        }
        *n += 1;
        Some(SynthSlot(self))
    }

    pub(super) fn synthesis_worker(&self, w: usize) {
        let lane = format!("synth-{w}");
        while let Some(p) = self.take_pending() {
            self.synthesize_one(p, &lane);
        }
    }

    pub(super) fn synthesize_one(&self, p: Pending, lane: &str) {
        let job = Arc::clone(&p.job);
        let dropped = match self.prepare(p, lane) {
            Some(item) => {
                let dev = &self.devices[item.device];
                match dev.handoff.0.send(item.synthesized) {
                    Ok(()) => return,
                    Err(_) => {
                        dev.in_flight.fetch_sub(1, Ordering::Relaxed);
                        true
                    }
                }
            }
            None => true,
        };
        // Everything the partition held was dropped with `prepare`'s locals.
        if dropped {
            self.partition_gone(&job);
        }
    }

    /// Admits, loads parameters for, and synthesizes one partition, then
    /// picks its device. `None` when the job stopped or this failed it.
    pub(super) fn prepare(&self, mut p: Pending, lane: &str) -> Option<Routed> {
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
        self.metrics.observe("queue-wait", timings.queue_wait);

        // One admission covers the partition's working set and, when its
        // parameters are not resident, their load: a worker never waits for
        // memory while holding part of what it needs.
        let t = Instant::now();
        let admission = tracing::info_span!(parent: &span, "admission").entered();
        let slot = self.synthesis_slot();
        let mut srs_part = 0;
        let (mut funds, srs, load) = loop {
            let admitted = self.working_set(&job.circuit_id).and_then(|ws| {
                if srs_part == 0 && !self.srs.is_loaded(&job.circuit_id) {
                    srs_part = self.srs.load_estimate(&job.circuit_id)?;
                }
                Ok(self.budget.acquire_blocking(ws + srs_part)?)
            });
            let mut funds = match admitted {
                Ok(f) => f,
                Err(e) => {
                    self.fail(&job, format!("admission: {e}"));
                    return None;
                }
            };
            if job.stopped() {
                return None;
            }
            let mut srs_funds = funds.split(srs_part);
            match self.srs.acquire_funded(&job.circuit_id, &mut srs_funds) {
                // Leftover load funds (resident after all) are released here.
                Ok(Acquired::Ready(srs, load)) => break (funds, srs, load),
                // Evicted since the admission was sized: admit again, larger.
                Ok(Acquired::NeedsFunds(n)) => srs_part = n,
                Err(e) => {
                    self.fail(&job, format!("parameters of {}: {e}", job.circuit_id));
                    return None;
                }
            }
        };
        drop(admission);
        timings.budget_wait = t.elapsed().saturating_sub(load);
        timings.srs_load = load;
        self.metrics.observe("budget-wait", timings.budget_wait);
        self.timeline.record(lane, "admission", t, label.clone());

        let t = Instant::now();
        let inputs = p.partition.public_inputs();
        let ctx = SynthesisContext {
            circuit_id: &job.circuit_id,
            pool: &self.pool,
            hints: &self.hints,
            layout: self.layout,
            funds: std::mem::replace(&mut funds, pinprove_mem::Reservation::empty(&self.budget)),
            shape: self.srs.shape(&job.circuit_id).ok(),
        };
        let synthesized = tracing::info_span!(parent: &span, "synthesis").in_scope(|| p.partition.synthesize(ctx));
        drop(slot);
        timings.synthesis = t.elapsed();
        self.metrics.observe("synthesis", timings.synthesis);
        self.timeline.record(lane, "synthesis", t, label);
        let (assignment, _stats) = match synthesized {
            Ok(x) => x,
            Err(e) => {
                self.fail(&job, format!("partition {} synthesis: {e}", p.index));
                return None;
            }
        };
        if job.stopped() {
            return None;
        }
        let device = match self.pick_device(&srs) {
            Ok(d) => d,
            Err(e) => {
                self.fail(&job, format!("partition {}: {e}", p.index));
                return None;
            }
        };
        self.devices[device].in_flight.fetch_add(1, Ordering::Relaxed);
        Some(Routed {
            device,
            synthesized: Synthesized {
                flight: InFlight {
                    job,
                    index: p.index,
                    srs,
                    randomness: p.randomness,
                    inputs,
                    timings,
                    ready_at: Instant::now(),
                    wait: tracing::info_span!(parent: &span, "handoff_wait"),
                    span,
                },
                assignment,
            },
        })
    }

    /// Among the devices not lost: one with a free worker that already
    /// holds the SRS; else one with a free worker; else the least loaded
    /// holder. Moving an SRS to a device costs more than waiting a little
    /// for one that has it.
    fn pick_device(&self, srs: &Srs) -> Result<usize, EngineError> {
        (0..self.devices.len())
            .filter(|&i| self.devices[i].lost().is_none())
            .min_by_key(|&i| {
                let d = &self.devices[i];
                let load = d.in_flight.load(Ordering::Relaxed);
                (load >= d.workers, !d.backend.holds_srs(srs), load)
            })
            .ok_or_else(|| self.devices_lost())
    }

    /// Ok while some device can take work.
    pub(super) fn usable_device(&self) -> Result<(), EngineError> {
        if self.devices.iter().any(|d| d.lost().is_none()) {
            Ok(())
        } else {
            Err(self.devices_lost())
        }
    }

    fn devices_lost(&self) -> EngineError {
        let why: Vec<String> = self
            .devices
            .iter()
            .map(|d| format!("{}: {}", d.name, d.lost().unwrap_or_default()))
            .collect();
        EngineError::DevicesLost(why.join("; "))
    }

    /// Notes a device lost by `err` (the engine stops routing work to it).
    fn note_device_error(&self, d: usize, err: &pinprove_groth16::ProveError) {
        let dev = &self.devices[d];
        if dev.lost.record(err) {
            tracing::error!(device = %dev.name, "device lost, no more work goes to it: {err}");
        }
    }

    /// Hands a synthesized partition that reached a lost device to another
    /// device, or fails its job when none is left.
    fn reroute(&self, from: usize, item: Synthesized) {
        let job = Arc::clone(&item.flight.job);
        self.devices[from].in_flight.fetch_sub(1, Ordering::Relaxed);
        let index = item.flight.index;
        match self.pick_device(&item.flight.srs) {
            Ok(to) => {
                let dev = &self.devices[to];
                tracing::warn!(job = %job.id, partition = index, from = %self.devices[from].name, to = %dev.name,
                    "the device was lost; the partition moves");
                dev.in_flight.fetch_add(1, Ordering::Relaxed);
                self.metrics.partitions_rerouted.fetch_add(1, Ordering::Relaxed);
                if dev.handoff.0.send(item).is_err() {
                    dev.in_flight.fetch_sub(1, Ordering::Relaxed);
                    self.partition_gone(&job);
                }
            }
            Err(e) => {
                drop(item);
                self.fail(&job, format!("partition {index}: {e}"));
                self.partition_gone(&job);
            }
        }
    }

    pub(super) fn device_worker(&self, d: usize, w: usize) {
        let dev = &self.devices[d];
        let lane = format!("{}-worker-{w}", dev.name);
        loop {
            let item = match dev.handoff.1.recv_timeout(Duration::from_millis(100)) {
                Ok(item) => item,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) if !self.shutdown.load(Ordering::Acquire) => continue,
                Err(_) => return,
            };
            if dev.lost().is_some() {
                self.reroute(d, item);
                continue;
            }
            let Synthesized { mut flight, assignment } = item;
            let job = Arc::clone(&flight.job);
            flight.wait = tracing::Span::none();
            flight.timings.handoff_wait = flight.ready_at.elapsed();
            self.metrics.observe("handoff-wait", flight.timings.handoff_wait);
            if job.stopped() {
                drop(assignment);
                dev.in_flight.fetch_sub(1, Ordering::Relaxed);
                self.partition_gone(&job);
                continue;
            }
            *dev.current_job.lock().recover() = Some(job.id);
            let t = Instant::now();
            let started = tracing::info_span!(parent: &flight.span, "start", device = %dev.name).in_scope(|| {
                dev.backend.start(ProvingJob {
                    srs: Arc::clone(&flight.srs),
                    assignments: vec![assignment],
                    randomness: vec![flight.randomness],
                })
            });
            let took = t.elapsed();
            dev.busy_nanos.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
            *dev.current_job.lock().recover() = None;
            flight.timings.start = took;
            self.metrics.observe("start", took);
            self.timeline
                .record(&lane, "start", t, format!("{}/{}", job.id, flight.index));
            match started {
                Ok(started) => {
                    flight.ready_at = Instant::now();
                    flight.wait = tracing::info_span!(parent: &flight.span, "finish_wait");
                    let _ = self.finalize.0.send(Started {
                        flight,
                        started,
                        device: d,
                    });
                }
                Err(e) => {
                    self.note_device_error(d, &e);
                    self.fail(&job, format!("partition {} on {}: {e}", flight.index, dev.name));
                    dev.in_flight.fetch_sub(1, Ordering::Relaxed);
                    self.partition_gone(&job);
                }
            }
        }
    }

    /// Memory becomes evictable by time passing alone (an SRS turning idle),
    /// which no release announces: look again now and then while requests
    /// wait.
    pub(super) fn housekeeping(&self) {
        let tick = (self.config.srs_idle_timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut g = self.queue_lock();
        while !self.shutdown.load(Ordering::Acquire) {
            g = self.queue_cv.wait_timeout(g, tick).recover().0;
            if self.budget.has_waiters() {
                drop(g);
                self.budget.reclaim();
                g = self.queue_lock();
            }
        }
    }

    /// Samples every GPU's utilization and PCIe traffic about every 100 ms
    /// into the timeline (as counters) and the latest values for metrics:
    /// the view that shows whether uploads keep the GPU fed.
    #[cfg(feature = "cuda")]
    pub(super) fn sample_gpus(&self, nvml: pinprove_cuda::Nvml) {
        let n = nvml.device_count().unwrap_or(0);
        let handles: Vec<_> = (0..n).filter_map(|i| nvml.device(i).ok().map(|d| (i, d))).collect();
        let mut g = self.queue_lock();
        while !self.shutdown.load(Ordering::Acquire) {
            g = self.queue_cv.wait_timeout(g, Duration::from_millis(100)).recover().0;
            for (i, d) in &handles {
                if let Ok(s) = nvml.sample(*d) {
                    self.timeline
                        .sample(&format!("gpu{i} util %"), f64::from(s.gpu_percent));
                    self.timeline
                        .sample(&format!("gpu{i} PCIe RX GB/s"), s.pcie_rx_bytes_per_s as f64 / 1e9);
                    self.timeline
                        .sample(&format!("gpu{i} PCIe TX GB/s"), s.pcie_tx_bytes_per_s as f64 / 1e9);
                    self.gpu_samples.lock().recover().insert(*i, s);
                }
            }
        }
    }

    pub(super) fn finalizer(&self, d: usize) {
        let lane = format!("{}-finalizer", self.devices[d].name);
        loop {
            let item = match self.finalize.1.recv_timeout(Duration::from_millis(100)) {
                Ok(item) => item,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) if !self.shutdown.load(Ordering::Acquire) => continue,
                Err(_) => return,
            };
            let Started {
                mut flight,
                started,
                device,
            } = item;
            let job = Arc::clone(&flight.job);
            let dev = &self.devices[device];
            flight.wait = tracing::Span::none();
            flight.timings.finish_wait = flight.ready_at.elapsed();
            if job.stopped() {
                drop(started);
                dev.in_flight.fetch_sub(1, Ordering::Relaxed);
                self.partition_gone(&job);
                continue;
            }
            let t = Instant::now();
            let proofs = tracing::info_span!(parent: &flight.span, "finish").in_scope(|| started.finish());
            flight.timings.finish = t.elapsed();
            self.metrics.observe("finish", flight.timings.finish);
            self.timeline
                .record(&lane, "finish", t, format!("{}/{}", job.id, flight.index));
            dev.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.srs.release(&job.circuit_id);
            match proofs.map(|mut p| p.pop()) {
                Ok(Some(proof)) => {
                    self.metrics.proofs_completed.fetch_add(1, Ordering::Relaxed);
                    self.metrics.observe("total", flight.timings.total());
                    self.complete(&job, flight, proof, device);
                }
                Ok(None) => self.fail(
                    &job,
                    format!("partition {}: the backend returned no proof", flight.index),
                ),
                Err(e) => {
                    self.note_device_error(device, &e);
                    self.fail(&job, format!("partition {} on {}: {e}", flight.index, dev.name));
                }
            }
            self.partition_gone(&job);
        }
    }

    pub(super) fn complete(&self, job: &JobCtl, flight: InFlight, proof: pinprove_groth16::Proof, device: usize) {
        // Let go of the SRS before the job is seen complete: a waiter may
        // evict it at once.
        let InFlight {
            index,
            inputs,
            timings,
            srs,
            ..
        } = flight;
        drop(srs);
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
            (g.proved == job.total).then(|| {
                g.results
                    .iter()
                    .map(|r| r.clone().expect("all proved"))
                    .collect::<Vec<_>>()
            })
        };
        if let Some(results) = done
            && job.finish(JobOutcome::Completed(results))
        {
            self.remember_finished(job.id);
            tracing::debug!(job = %job.id, ms = job.submitted.elapsed().as_millis() as u64, "job completed");
        }
    }
}

/// A slot of the synthesis cap, given back on drop.
pub(super) struct SynthSlot<'a>(&'a Inner);

impl Drop for SynthSlot<'_> {
    fn drop(&mut self) {
        let mut n = self.0.synth_running.lock().recover();
        *n = n.saturating_sub(1);
        self.0.synth_cv.notify_one();
    }
}
