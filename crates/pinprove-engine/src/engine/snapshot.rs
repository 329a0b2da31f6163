//! The engine's state read into an [`EngineStatus`].

use std::collections::HashMap;

use pinprove_mem::sync::Recover;

use super::inner::Inner;
use super::precompiler::{CircuitSynthesis, SynthesisMode};
use super::status::{DeviceStatus, EngineStatus, PartitionStatus, QueueStatus};

impl Inner {
    pub(super) fn status(&self) -> EngineStatus {
        let mut by_circuit: HashMap<String, QueueStatus> = HashMap::new();
        for circuit in self.scheduler.queued_circuits() {
            queue(&mut by_circuit, &circuit).pending += 1;
        }
        for (k, n) in self.gauges.in_progress() {
            queue(&mut by_circuit, &k).in_progress += n;
        }
        let mut queues: Vec<QueueStatus> = by_circuit.into_values().collect();
        queues.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        let uptime = self.started_at.elapsed();
        let devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| DeviceStatus {
                id: d.id(),
                backend: d.backend().name(),
                workers: d.workers(),
                in_flight: self.gauges.device_load(i),
                busy_fraction: d.busy_fraction(uptime),
                busy_seconds: d.busy_seconds(),
                current_job: d.current_job(),
                resident_srs: d.backend().resident_srs(),
                lost: d.lost(),
                gpu: d.reading(),
            })
            .collect();
        let mut waits = self.admission_waits();
        let in_flight = self.gauges.partitions();
        {
            let mut seen = self.waits_seen.lock().recover();
            seen.retain(|key, _| in_flight.iter().any(|(k, _)| k == key));
            for (key, reason) in &waits {
                let names = seen.entry(*key).or_default();
                if !names.contains(&reason.name()) {
                    names.push(reason.name());
                }
            }
        }
        let partitions = in_flight
            .into_iter()
            .map(|((job, index), w)| PartitionStatus {
                job,
                index,
                circuit_id: w.circuit_id,
                waiting_for: (w.phase == crate::Phase::Admission)
                    .then(|| waits.remove(&(job, index)))
                    .flatten(),
                phase: w.phase,
                device: w.device.map(|d| self.devices[d].id()),
                in_phase: w.since.elapsed(),
            })
            .collect();
        let pool = self.pool.stats();
        let [recordings_made, recordings_loaded, precompiled_fallbacks] = self.precompiled.counters();
        EngineStatus {
            queues,
            devices,
            partitions,
            srs: self.srs.status(),
            synthesis: self
                .precompiled
                .status()
                .into_iter()
                .map(|c| CircuitSynthesis {
                    abc_on_device: c.mode == SynthesisMode::Precompiled && !self.sizing.abc_on_host(&c.circuit_id),
                    ..c
                })
                .collect(),
            recordings_made,
            recordings_loaded,
            precompiled_fallbacks,
            budget_total: self.budget.total(),
            budget_used: self.budget.used(),
            pool_idle: pool.idle_bytes,
            pool_warm: pool.warm_bytes,
            pool_warm_ready: pool.warm_ready_bytes,
            pool_kept: pool.kept_bytes,
            pool_checked_out: pool.checked_out_bytes,
            pool_fresh_allocations: pool.fresh_allocations,
            pool_alloc_time: pool.alloc_time,
            pool_handed_over: pool.handed_over,
            proofs_completed: self.metrics.proofs_completed(),
            proofs_failed: self.metrics.proofs_failed(),
            uptime,
        }
    }
}

fn queue<'a>(queues: &'a mut HashMap<String, QueueStatus>, id: &str) -> &'a mut QueueStatus {
    queues.entry(id.to_string()).or_insert_with(|| QueueStatus {
        circuit_id: id.to_string(),
        ..Default::default()
    })
}
