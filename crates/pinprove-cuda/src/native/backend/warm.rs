//! What makes a circuit type's next proof find everything ready: the
//! preparation buffers kept warm in the pool, the device's memory pool
//! grown back to what proofs held, and the hints that carry both (and the
//! admission's preparation share) to a restarted process.

use std::sync::Arc;

use crate::runtime::PooledEvent;
use pinprove_groth16::{BackendHint, ProveError, QueryLengths, Srs};
use pinprove_mem::PinnedPool;
use pinprove_mem::sync::Recover;

use super::super::check;
use super::super::resident::srs_key;
use super::NativeBackend;

/// The preparation buffers kept for proofs with one SRS.
#[derive(Default)]
pub(super) struct KeptPreparation {
    /// The SRS's query lengths (what admission knows it by).
    lengths: QueryLengths,
    /// One proof's buffers, rounded to the pool's classes.
    sizes: Vec<usize>,
    /// Whether the device lanes keep sets of them: once a background proof
    /// (or a hint from an earlier process) asked.
    for_lanes: bool,
}

impl NativeBackend {
    /// Whether the preparation buffers of proofs with an SRS of `lengths`
    /// are kept, every set held by the pool: then a background proof's
    /// preparation takes no memory of its own.
    pub(super) fn preparation_kept(&self, lengths: &QueryLengths) -> bool {
        self.prep_warm
            .lock()
            .recover()
            .iter()
            .filter(|(_, k)| k.lengths == *lengths)
            .any(|(key, _)| self.pool.holds_warm_set(&prep_warm_name(self.config.device, key)))
    }

    /// Has the pool keep, in the background, the preparation buffers of as
    /// many proofs as can be in flight on this device (partitions started
    /// together counted each), at the sizes `sizes`
    /// (a proof's [`Prepared::asked_bytes`](split::Prepared::asked_bytes),
    /// rounded to the pool's classes), unless buffers at least that large
    /// are kept already. Their sizes depend on the witness, so they are
    /// learned from the circuit type's first proof; later proofs then find
    /// them idle instead of pinning fresh memory while the device waits.
    /// Once the pool holds every set, a background proof is admitted
    /// without its preparation memory (see `extra_working_set`).
    /// The set is kept under pressure too, for as long as the SRS is
    /// resident, and for device lanes only: as a warm set, admissions
    /// waiting for memory had it freed, and the next `start` pinned it again
    /// on a device lane (2^26 on the H200: 26 pinnings, 3.8 s the device
    /// waited). With `after`, the pinning waits for that mark (the device
    /// work of the proof they were learned from): measured on the H200, a
    /// 2^24 proof's device work took 5.1 s instead of 0.3 s while 4 GiB of
    /// its warm set were pinned beside it.
    pub(super) fn keep_preparation_warm(
        &self,
        key: &std::path::Path,
        lengths: QueryLengths,
        sizes: Vec<usize>,
        background: bool,
        after: Option<Arc<PooledEvent>>,
    ) {
        let wanted = {
            let mut warm = self.prep_warm.lock().recover();
            let kept = warm.entry(key.to_path_buf()).or_default();
            kept.lengths = lengths;
            let grew = if kept.sizes.len() == sizes.len() {
                let grew = kept.sizes.iter().zip(&sizes).any(|(k, s)| s > k);
                // Never shrink what is kept: sizes vary a little between
                // witnesses.
                for (k, s) in kept.sizes.iter_mut().zip(&sizes) {
                    *k = (*k).max(*s);
                }
                grew
            } else {
                kept.sizes = sizes;
                true
            };
            // An urgent proof prepares ahead, into buffers its admission
            // holds, never on a lane: it only teaches the sizes (which its
            // circuit's kept set and admission use). Lane sets made for a
            // WindowPoSt stream, three of 4.8 GB each, held memory its next
            // partition's admission then waited for (H100 at 15 GiB free,
            // 2026-12-07).
            let newly = background && !kept.for_lanes;
            kept.for_lanes |= background;
            if !(kept.for_lanes && (grew || newly)) {
                return;
            }
            kept.sizes.clone()
        };
        // Each worker's start prepares every partition it takes before the
        // device runs them.
        let sets = self.config.queue_depth + self.config.workers_per_device * self.partitions_per_start_of(key);
        let all: Vec<usize> = (0..sets)
            .flat_map(|_| wanted.iter().copied().filter(|&b| b > 0))
            .collect();
        let pool = Arc::clone(&self.pool);
        let name = prep_warm_name(self.config.device, key);
        let spawned = std::thread::Builder::new()
            .name("native-prep-warm".into())
            .spawn(move || {
                if let Some(mark) = after
                    && let Err(e) = mark.synchronize()
                {
                    // The proof itself reports the device's error.
                    tracing::debug!(set = %name, "not keeping preparation buffers warm: {e}");
                    return;
                }
                keep(&pool, &name, &all)
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start a thread to keep preparation buffers warm: {e}");
        }
    }

    /// Bytes the device's stream-ordered pool holds now.
    pub(in crate::native) fn pool_reserved(&self) -> Result<u64, ProveError> {
        let mut bytes = 0u64;
        // SAFETY: writes one integer; the device number is checked on the C
        // side.
        check(
            unsafe { super::super::ffi::pinprove_pool_reserved(self.ordinal(), &mut bytes) },
            "reading the device's memory pool",
        )?;
        Ok(bytes)
    }

    /// Grows the device's pool back to what proofs held (see
    /// [`pool_seen`](Self::pool_seen)), so that the next proof does not
    /// grow it on its way. Failing (too little device memory now) costs
    /// only that growth later.
    pub(super) fn refill_pool(&self) {
        let seen = self.pool_seen.lock().recover().values().copied().max().unwrap_or(0);
        // Never past what the plans leave proofs (a hint learned on a
        // larger card, another process's memory taken since).
        // (The room as last reckoned: this runs inside an upload of
        // matrices, whose list must not be read again here.)
        let target = seen.min(self.proof_room.load(std::sync::atomic::Ordering::Relaxed));
        if target == 0 || self.lost.reason().is_some() {
            return;
        }
        // SAFETY: plain call; the device number is checked on the C side.
        let r = check(
            unsafe { super::super::ffi::pinprove_pool_reserve(self.ordinal(), target) },
            "reserving device memory for proofs",
        );
        match self.lost.note(r) {
            Ok(()) => tracing::debug!(
                device = self.config.device,
                bytes = target,
                "device memory pool reserved"
            ),
            Err(e) => tracing::warn!(
                device = self.config.device,
                bytes = target,
                "cannot reserve the device's memory pool: {e}"
            ),
        }
    }

    /// What this backend's proofs with `srs` showed (see
    /// [`Backend::hint`]): the preparation buffers, the most preparation
    /// memory, and what the device's pool held after them.
    pub(super) fn learned(&self, srs: &Srs) -> Option<BackendHint> {
        let key = srs_key(srs);
        let host_buffers = self
            .prep_warm
            .lock()
            .recover()
            .get(&key)?
            .sizes
            .iter()
            .map(|&b| b as u64)
            .collect();
        let preparation_bytes = self.prep_shares.most(srs.lengths())?;
        // The pool only grows between trims: what it holds now is what the
        // proofs so far needed at once.
        let now = self.pool_reserved().unwrap_or(0);
        let device_pool_bytes = self.note_pool(key, now);
        Some(BackendHint {
            host_buffers,
            preparation_bytes,
            device_pool_bytes,
        })
    }

    /// Prepares for the first proof with `srs` what an earlier process
    /// learned (see [`Backend::apply_hint`]).
    pub(super) fn prepare_from(&self, srs: &Srs, hint: &BackendHint) {
        if self.lost.reason().is_some() {
            return;
        }
        let key = srs_key(srs);
        if hint.preparation_bytes > 0 {
            self.prep_shares.learn(*srs.lengths(), hint.preparation_bytes);
        }
        if !hint.host_buffers.is_empty() {
            let sizes = hint.host_buffers.iter().map(|&b| b as usize).collect();
            // As a background proof would: the hint does not say which kind
            // of work its proofs were, and lane sets give way to urgent work.
            self.keep_preparation_warm(&key, *srs.lengths(), sizes, true, None);
        }
        if hint.device_pool_bytes > 0 {
            self.note_pool(key, hint.device_pool_bytes);
            self.refill_pool();
        }
    }

    /// Notes that the device's pool held `bytes` for proofs with the SRS
    /// `key`; returns the most noted for it.
    fn note_pool(&self, key: std::path::PathBuf, bytes: u64) -> u64 {
        let mut seen = self.pool_seen.lock().recover();
        let s = seen.entry(key).or_default();
        *s = (*s).max(bytes);
        *s
    }
}

/// Has `pool` keep the buffers `sizes` as `name`, under pressure too, and
/// logs how it went.
fn keep(pool: &Arc<PinnedPool>, name: &str, sizes: &[usize]) {
    match pool.keep_for_lanes(name, sizes) {
        Ok(r) => tracing::debug!(
            set = %name,
            wanted = r.wanted_bytes,
            allocated = r.allocated_bytes,
            missing = r.missing_bytes,
            "preparation buffers kept"
        ),
        Err(e) => tracing::warn!(set = %name, "keeping preparation buffers warm failed: {e}"),
    }
}

/// The pool's name for the preparation buffers kept warm for an SRS.
pub(super) fn prep_warm_name(device: usize, key: &std::path::Path) -> String {
    format!("native-prep:gpu{device}:{}", key.display())
}
