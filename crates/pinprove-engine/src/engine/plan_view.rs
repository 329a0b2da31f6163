//! The engine's state as the planner reads it, so that each partition
//! waiting for its admission says why, in the planner's words
//! ([`WaitReason`]): `/status` and the status page show it.
//!
//! The engine holds parameters whole (one section each) and its own
//! admission queue, so the view is the planner's judgment of the engine's
//! state under the engine's policy, not a record of the engine's own
//! decision; what the planner does not place (pool buffers kept or idle,
//! backends' buffers) is taken out of the budget it is given.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::inner::Inner;
use super::precompiler::SynthesisMode;
use crate::job::JobId;
use crate::planner::{self, KindCosts, KindState, PartitionState, Residency, State, WaitReason, Where};
use crate::{Phase, Priority};

impl Inner {
    /// Why each partition out of the queue that waits for its admission
    /// waits, by the planner's rules.
    pub(super) fn admission_waits(&self) -> HashMap<(JobId, usize), WaitReason> {
        let in_flight = self.gauges.partitions();
        if !in_flight.iter().any(|(_, w)| w.phase == Phase::Admission) {
            return HashMap::new();
        }
        let now = self.config.clock.now();
        let srs = self.srs.status();
        let recordings: HashMap<String, u64> = self
            .precompiled
            .status()
            .into_iter()
            .filter(|c| c.mode == SynthesisMode::Precompiled)
            .map(|c| (c.circuit_id, c.recording_bytes))
            .collect();
        let mut costs: BTreeMap<String, KindCosts> = BTreeMap::new();
        let mut partitions = Vec::new();
        let mut keys = Vec::new();
        for (key, w) in &in_flight {
            let Ok(job) = self.jobs.get(key.0) else { continue };
            let at = match w.phase {
                Phase::QueueWait | Phase::Admission => Where::Queued,
                Phase::SrsLoad => Where::Admitted,
                Phase::Synthesis => Where::Synthesizing,
                Phase::HandoffWait => Where::Synthesized,
                _ => Where::Device,
            };
            partitions.push(PartitionState {
                id: keys.len() as u64,
                kind: w.circuit_id.clone(),
                priority: job.priority,
                arrived: now.saturating_sub(job.submitted.elapsed()),
                at,
            });
            keys.push(*key);
            if !costs.contains_key(&w.circuit_id) {
                let c = self.kind_costs(&w.circuit_id, job.priority, &srs, &recordings);
                costs.insert(w.circuit_id.clone(), c);
            }
        }
        let mut kinds = BTreeMap::new();
        let seen: Vec<&crate::SrsInfo> = srs
            .iter()
            .filter(|i| i.loaded || costs.contains_key(&i.circuit_id))
            .collect();
        for info in seen {
            let arrival = self.srs.arrival(&info.circuit_id);
            if !costs.contains_key(&info.circuit_id) {
                let priority = arrival.map_or(Priority::Low, |(r, _)| Priority::of_rank(r));
                let c = self.kind_costs(&info.circuit_id, priority, &srs, &recordings);
                costs.insert(info.circuit_id.clone(), c);
            }
            kinds.insert(
                info.circuit_id.clone(),
                KindState {
                    sections: vec![if info.loaded {
                        Residency::Resident
                    } else {
                        Residency::Absent
                    }],
                    recording: if recordings.contains_key(&info.circuit_id) {
                        Residency::Resident
                    } else {
                        Residency::Absent
                    },
                    last_used: now.saturating_sub(info.idle),
                    last_arrival: arrival.map(|(_, at)| at),
                    released: 0,
                },
            );
        }
        let mut state = State {
            now,
            budget: 0,
            reserve: self
                .budget
                .total()
                .saturating_sub(self.budget.limit_for(Priority::Normal.rank())),
            kinds,
            partitions,
            loads_running: usize::from(self.srs.loading_now()),
        };
        // What the planner does not place is out of its budget.
        let placed = state.used(&costs);
        let other = self.budget.used().saturating_sub(placed);
        state.budget = self.budget.total().saturating_sub(other);
        let policy = planner::Policy {
            // The engine takes partitions by its own rules: those out of
            // the queue are all the planner sees.
            background_ahead: usize::MAX,
            ..self.config.planner.unwrap_or_default()
        };
        planner::plan(&costs, &policy, &state)
            .waits
            .into_iter()
            .filter_map(|(id, reason)| Some((*keys.get(id as usize)?, reason)))
            .collect()
    }

    /// What one circuit type costs, as far as the engine knows it.
    fn kind_costs(
        &self,
        circuit_id: &str,
        priority: Priority,
        srs: &[crate::SrsInfo],
        recordings: &HashMap<String, u64>,
    ) -> KindCosts {
        let info = srs.iter().find(|i| i.circuit_id == circuit_id);
        let bytes = match info {
            Some(i) if i.loaded => i.bytes,
            _ => self.srs.load_estimate(circuit_id).unwrap_or(0),
        };
        KindCosts {
            priority,
            sections: vec![bytes],
            section_load: vec![info.map_or(Duration::ZERO, |i| i.load_time)],
            recording_bytes: recordings.get(circuit_id).copied().unwrap_or(0),
            recording_load: Duration::ZERO,
            partition_bytes: self
                .sizing
                .working_set(circuit_id, 0, priority.is_urgent())
                .unwrap_or(0),
            synthesis: Duration::ZERO,
            classic_synthesis: Duration::ZERO,
            device: Duration::ZERO,
            section_release: Vec::new(),
        }
    }
}
