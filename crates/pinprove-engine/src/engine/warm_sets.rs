//! What the engine knows of its warm sets (the pool buffers a circuit's
//! stream will ask for, prepared in the background out of spare budget),
//! its kept sets (those of circuits whose proofs are due at once, which the
//! budget does not evict), and the heap each circuit's partitions said they
//! hold. The policy (how many partitions, when to warm again) is the
//! synthesis side's; this owns the state behind it and the background
//! warm-ups.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pinprove_mem::sync::Recover;

use super::guard::Counted;

/// How a circuit's warm set was made last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WarmedAs {
    /// Whether it holds a/b/c.
    pub(super) abc: bool,
    /// For how many partitions at once.
    pub(super) partitions: usize,
}

#[derive(Default)]
pub(super) struct WarmSets {
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
    pub(super) fn record(&self, circuit_id: &str, how: WarmedAs) {
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
}
