//! The engine's warm sets (the pool buffers a circuit's stream will ask
//! for, prepared in the background out of spare budget), its kept sets
//! (those of circuits whose proofs are due at once, which the budget does
//! not evict), the heap each circuit's partitions said they hold, and the
//! policy over them: for how many partitions a circuit is warmed, and when
//! it is warmed again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pinprove_mem::sync::Recover;
use pinprove_mem::{ErrorChain, PinnedPool};

use super::guard::Counted;
use super::sizing::Sizing;
use crate::EngineError;
use crate::job::Priority;
use crate::srs::SrsRegistry;

/// How a circuit's warm set was made last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WarmedAs {
    /// Whether it holds a/b/c.
    pub(super) abc: bool,
    /// For how many partitions at once.
    pub(super) partitions: usize,
}

pub(super) struct WarmSets {
    sizing: Arc<Sizing>,
    pool: Arc<PinnedPool>,
    srs: Arc<SrsRegistry>,
    /// Partitions per warm set when set (see
    /// [`EngineConfig::warm_partitions`](crate::EngineConfig::warm_partitions)).
    partitions: Option<usize>,
    synthesis_workers: usize,
    /// Warm-ups running in the background.
    running: Arc<AtomicUsize>,
    /// The circuits warmed, and how.
    warmed: Mutex<HashMap<String, WarmedAs>>,
    /// Per circuit, the most heap a partition said it holds while it
    /// synthesizes (see [`Partition::heap_bytes`](crate::Partition::heap_bytes)).
    heaps: Mutex<HashMap<String, u64>>,
    /// Partitions whose buffers the pool keeps under pressure, per circuit
    /// (see [`Engine::keep_ready`](super::Engine::keep_ready)).
    kept: Mutex<HashMap<String, usize>>,
}

impl WarmSets {
    pub(super) fn new(
        sizing: Arc<Sizing>,
        pool: Arc<PinnedPool>,
        srs: Arc<SrsRegistry>,
        partitions: Option<usize>,
        synthesis_workers: usize,
    ) -> WarmSets {
        WarmSets {
            sizing,
            pool,
            srs,
            partitions,
            synthesis_workers,
            running: Default::default(),
            warmed: Default::default(),
            heaps: Default::default(),
            kept: Default::default(),
        }
    }

    /// Notes that a partition of `circuit_id` holds `bytes` of heap while
    /// it synthesizes (the most seen is kept).
    pub(super) fn note_heap(&self, circuit_id: &str, bytes: u64) {
        let mut heaps = self.heaps.lock().recover();
        let most = heaps.entry(circuit_id.to_string()).or_default();
        *most = (*most).max(bytes);
    }

    /// The most heap a partition of `circuit_id` said it holds (0: none).
    pub(super) fn heap(&self, circuit_id: &str) -> u64 {
        self.heaps.lock().recover().get(circuit_id).copied().unwrap_or(0)
    }

    /// Keeps the buffers of `partitions` partitions of `circuit_id`.
    pub(super) fn keep(&self, circuit_id: &str, partitions: usize) {
        self.kept.lock().recover().insert(circuit_id.to_string(), partitions);
    }

    /// Whether `circuit_id` was asked to be kept ready, and for how many
    /// partitions.
    pub(super) fn kept(&self, circuit_id: &str) -> Option<usize> {
        self.kept.lock().recover().get(circuit_id).copied()
    }

    /// How the warm set of `circuit_id` was made last, if it was.
    pub(super) fn warmed(&self, circuit_id: &str) -> Option<WarmedAs> {
        self.warmed.lock().recover().get(circuit_id).copied()
    }

    /// Notes the warm set of `circuit_id` made (again) as `how`.
    fn record(&self, circuit_id: &str, how: WarmedAs) {
        self.warmed.lock().recover().insert(circuit_id.to_string(), how);
    }

    /// Those of `circuits` not warmed yet.
    pub(super) fn not_warmed(&self, circuits: impl IntoIterator<Item = String>) -> Vec<String> {
        let warmed = self.warmed.lock().recover();
        circuits.into_iter().filter(|id| !warmed.contains_key(id)).collect()
    }

    /// The circuits whose warm set was made with a/b/c and for which
    /// `stale` says that was wrong.
    pub(super) fn warmed_with_abc(&self, stale: impl Fn(&str) -> bool) -> Vec<String> {
        self.warmed
            .lock()
            .recover()
            .iter()
            .filter(|&(id, how)| how.abc && stale(id))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Runs `work` on a background thread, counted as a warm-up until it
    /// returns.
    pub(super) fn start(&self, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let running = Arc::clone(&self.running);
        running.fetch_add(1, Ordering::AcqRel);
        let counted = Counted(Arc::clone(&running));
        // When no thread starts, the closure is dropped, and the count with it.
        std::thread::Builder::new()
            .name("pool-warm".into())
            .spawn(move || {
                let _done = counted;
                work();
            })
            .map(|_| ())
    }

    /// Whether a warm-up is running.
    pub(super) fn busy(&self) -> bool {
        self.running.load(Ordering::Acquire) > 0
    }

    /// After a proof of `circuit_id`, its warm set is made again when a
    /// different number of partitions fits at once now (its backend showed
    /// its preparation share, the device lanes' kept sets came to be held)
    /// or, for a circuit kept ready, when its backend `learned` what a
    /// proof takes (buffer sizes, see
    /// [`Sizing::admission_buffers`], which its kept set
    /// keeps too). Not otherwise: a hint changes with every witness a
    /// little larger, and on the H200 a warm set redone each time was
    /// freed again under pressure (2^26: 30 buffers freed, 16 pinned anew).
    pub(super) fn rewarm_after_proof(&self, circuit_id: &str, learned: bool) {
        let Some(warmed) = self.warmed(circuit_id) else {
            return;
        };
        let kept = learned && self.kept(circuit_id).is_some();
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
    pub(super) fn warm_partitions(&self, circuit_id: &str) -> Result<usize, EngineError> {
        Ok(match self.partitions {
            Some(n) => n,
            None => {
                let heap = self.heap(circuit_id);
                let ws = self
                    .sizing
                    .working_set(circuit_id, 0, false)?
                    .saturating_add(heap)
                    .max(1);
                let room = self
                    .pool
                    .budget()
                    .limit_for(Priority::Normal.rank())
                    .saturating_sub(self.pool.kept_bytes())
                    .saturating_sub(self.srs.host_bytes());
                ((room / ws) as usize).min(self.synthesis_workers.max(1))
            }
        })
    }

    /// Warms again, without a, b and c, the circuits warmed with them whose
    /// a/b/c the devices compute now (their recording became ready after
    /// the warm-up): those buffers would sit idle, out of the budget.
    pub(super) fn rewarm_without_abc(&self) {
        let stale = self.warmed_with_abc(|id| !self.sizing.abc_on_host(id));
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
        let buffers = self.sizing.partition_buffers(circuit_id)?;
        let partitions = self.warm_partitions(circuit_id)?;
        let warmed = WarmedAs {
            abc: self.sizing.abc_on_host(circuit_id),
            partitions,
        };
        self.record(circuit_id, warmed);
        let of = |n: usize, one: &[usize]| -> Vec<usize> {
            (0..n).flat_map(|_| one.iter().copied()).filter(|&b| b > 0).collect()
        };
        let sizes = of(partitions, &buffers);
        // A kept partition also keeps what its backend prepares into: an
        // urgent proof's preparation must not pin either.
        let kept_partitions = self.kept(circuit_id).unwrap_or(0);
        let kept = if kept_partitions > 0 {
            let one = self
                .sizing
                .admission_buffers(circuit_id, self.sizing.working_set(circuit_id, 0, true)?, true)?;
            of(kept_partitions, &one)
        } else {
            Vec::new()
        };
        let (pool, name) = (Arc::clone(&self.pool), circuit_id.to_string());
        let spawned = self.start(move || {
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
}

/// The pool's name for the buffers it keeps under pressure for a circuit
/// (see [`Engine::keep_ready`](super::Engine::keep_ready)).
fn kept_set_name(circuit_id: &str) -> String {
    format!("{circuit_id} (kept)")
}
