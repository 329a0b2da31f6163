//! How many partitions' witnesses the replicas made, per proof kind: the
//! engine cannot tell a direct witness from one the gadgets made (both
//! come out of `FreshCircuit::synthesize_witness`), so reports and tests
//! read these counts.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ProofKind;

static MADE: [AtomicU64; ProofKind::COUNT] = [const { AtomicU64::new(0) }; ProofKind::COUNT];

/// Partitions of `kind` whose witness the replicas made since the process
/// started (each one matched its circuit's recording).
pub fn witnesses_computed(kind: ProofKind) -> u64 {
    MADE[kind.index()].load(Ordering::Relaxed)
}

/// Counts one witness of `kind` made.
pub(crate) fn witness_made(kind: ProofKind) {
    MADE[kind.index()].fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};

    use super::*;
    use crate::prepared::Checks;

    /// Each kind's partitions, recorded from their real circuits, then made
    /// directly through the engine's interface: only that kind's count
    /// moves, by one per partition. (No other test of this crate's library
    /// makes a witness for the engine, so the counts hold still meanwhile.)
    #[test]
    fn each_kind_counts_its_own_direct_witnesses() {
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::default()),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        let checks = Checks { vanilla: false };
        for kind in ProofKind::ALL {
            let req = crate::synthetic::request(kind, 2 << 10, 21).unwrap();
            let prepared = match kind {
                ProofKind::PoRep => crate::porep::prepare(&req, checks),
                ProofKind::SnapDeals => crate::snap::prepare(&req, checks),
                ProofKind::WindowPoSt | ProofKind::WinningPoSt => crate::post::prepare(&req, checks),
            }
            .unwrap();
            let before = ProofKind::ALL.map(witnesses_computed);
            for p in &prepared.partitions {
                let fresh = || p.fresh_circuit().expect("a direct witness for every 2 KiB partition");
                let recording = fresh().record("made-test").unwrap();
                fresh().synthesize_witness(&recording, &pool, None).unwrap();
            }
            let moved = ProofKind::ALL.map(|k| witnesses_computed(k) - before[k.index()]);
            let expected = ProofKind::ALL.map(|k| if k == kind { prepared.partitions.len() as u64 } else { 0 });
            assert_eq!(moved, expected, "{kind}: the counts per kind ({:?})", ProofKind::ALL);
        }
    }
}
