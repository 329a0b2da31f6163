//! Pre-compiled circuits in the engine (see
//! [`EngineConfig::precompiled`](crate::EngineConfig::precompiled)): which
//! circuit types have a recording of their R1CS, making and loading those
//! recordings in the background, and synthesizing partitions from them.
//!
//! A circuit type moves through these states:
//!
//! * classic — nothing recorded yet; its first partition that can copy its
//!   circuit ([`Partition::fresh_circuit`]) is synthesized classically and
//!   starts a background thread that loads the recording from the hints
//!   directory or records the copy;
//! * recording — that thread runs; partitions are synthesized classically;
//! * precompiled — partitions are synthesized from the recording, witness
//!   only, from a copy of their circuit: the partition itself is left
//!   untouched, so a copy that does not match the recording falls back to
//!   the classic synthesis of the partition and the job never notices;
//! * classic only — the circuit cannot be recorded, or none of its
//!   partitions ever matched the recording (its shape depends on its
//!   witness): classic for the life of the engine. A partition that does
//!   not match (often one built from malformed input) falls back alone;
//!   the recording and its file stay.
//!
//! A recording is paid for out of the memory budget for as long as it is
//! held; when the budget cannot give it, the circuit type stays classic and
//! is tried again a minute later.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pinprove_groth16::precompiled::Recording;
use pinprove_groth16::{Backend, PrecompiledError, QueryLengths};
use pinprove_mem::sync::Recover;
use pinprove_mem::{ErrorChain, Evictor, MemoryBudget, Reservation};
use serde::Serialize;

use super::guard::{Counted, catch};
use crate::Phase;
use crate::job::{FreshCircuit, Partition};
use crate::timeline::Timeline;

/// How long a recording waits for spare budget before it gives up (and is
/// tried again after [`RETRY_AFTER`]).
const RESERVE_PATIENCE: Duration = Duration::from_secs(600);

/// How long a circuit type whose recording the budget could not hold waits
/// before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// How a circuit type's partitions are synthesized now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthesisMode {
    /// Classically: no recording (yet, or the partitions cannot make one).
    Classic,
    /// Classically while a recording is made or loaded in the background.
    Recording,
    /// From the recording, witness only.
    Precompiled,
    /// Classically for the life of the engine: the circuit did not match
    /// its recording, or could not be recorded.
    ClassicOnly,
}

impl SynthesisMode {
    /// Every mode, for metrics that list them all.
    pub const ALL: [SynthesisMode; 4] = [
        SynthesisMode::Classic,
        SynthesisMode::Recording,
        SynthesisMode::Precompiled,
        SynthesisMode::ClassicOnly,
    ];

    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            SynthesisMode::Classic => "classic",
            SynthesisMode::Recording => "recording",
            SynthesisMode::Precompiled => "precompiled",
            SynthesisMode::ClassicOnly => "classic_only",
        }
    }
}

/// How one circuit type is synthesized, for status pages and metrics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CircuitSynthesis {
    /// The circuit type.
    pub circuit_id: String,
    /// Its mode now.
    pub mode: SynthesisMode,
    /// Budget bytes its recording holds (0 without one).
    pub recording_bytes: u64,
    /// Whether its recording's matrices are in host memory (released once
    /// every device holds a copy of its own).
    pub host_matrices: bool,
    /// Partitions synthesized from the recording since start.
    pub precompiled_partitions: u64,
    /// Partitions synthesized classically since start.
    pub classic_partitions: u64,
    /// Whether its pre-compiled partitions' a/b/c are computed on the
    /// devices (from matrices kept there) rather than on the host.
    pub abc_on_device: bool,
}

/// A recording and the budget reservation paying for it.
pub(super) struct Held {
    /// Shared with the partitions whose a/b/c a device computes from it.
    recording: Arc<Recording>,
    funds: Reservation,
}

impl Held {
    pub(super) fn recording(&self) -> &Arc<Recording> {
        &self.recording
    }
}

enum State {
    Classic,
    RetryAfter(Instant),
    Recording,
    Ready(Arc<Held>),
    ClassicOnly,
}

struct Entry {
    state: State,
    precompiled: u64,
    classic: u64,
    /// Partitions in a row that did not match the recording, none
    /// synthesized from it since it was made or loaded.
    mismatches: u32,
    /// Whether a partition was ever synthesized from its recording.
    matched: bool,
    /// Jobs of the circuit type not ended: while there are any, its
    /// recording is not dropped for memory.
    users: usize,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            state: State::Classic,
            precompiled: 0,
            classic: 0,
            mismatches: 0,
            matched: false,
            users: 0,
        }
    }
}

/// A job's hold on its circuit type's recording (see [`Precompiler::in_use`]).
pub(super) struct InUse {
    precompiler: Arc<Precompiler>,
    circuit_id: String,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if let Some(e) = self.precompiler.circuits.lock().recover().get_mut(&self.circuit_id) {
            e.users -= 1;
        }
    }
}

/// Mismatches in a row, with no partition ever matching, after which a
/// circuit type is taken for one whose shape depends on its witness.
const MISMATCHES_BEFORE_CLASSIC: u32 = 8;

/// What a background load or recording came to.
enum Made {
    Ready(Box<Held>),
    Retry,
    Never,
}

/// The engine's recordings, per circuit type.
pub(super) struct Precompiler {
    enabled: bool,
    dir: Option<PathBuf>,
    budget: Arc<MemoryBudget>,
    /// The devices' backends, which may keep copies of a recording's
    /// matrices of their own (see [`Precompiler::place_on_devices`]).
    backends: Vec<Arc<dyn Backend>>,
    /// Where making or loading a recording is drawn (lane "precompiler").
    timeline: Arc<Timeline>,
    circuits: Mutex<HashMap<String, Entry>>,
    /// Background loads and recordings running (`wait_quiet` waits for
    /// them).
    pub(super) running: Arc<AtomicUsize>,
    made: AtomicU64,
    loaded: AtomicU64,
    fallbacks: AtomicU64,
}

impl Precompiler {
    pub(super) fn new(
        enabled: bool,
        dir: Option<PathBuf>,
        budget: Arc<MemoryBudget>,
        backends: Vec<Arc<dyn Backend>>,
        timeline: Arc<Timeline>,
        recordings_first: bool,
    ) -> Arc<Precompiler> {
        let p = Arc::new(Precompiler {
            timeline,
            enabled,
            dir,
            budget: Arc::clone(&budget),
            backends,
            circuits: Mutex::new(HashMap::new()),
            running: Arc::new(AtomicUsize::new(0)),
            made: AtomicU64::new(0),
            loaded: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        });
        // After idle pool buffers, before parameters: a recording is made
        // again from its file (or the next partition) more cheaply than
        // parameters are loaded, and work waiting for memory comes first.
        // Under a planner that keeps recordings first, after parameters:
        // loaded again, a recording costs more per byte than parameters
        // (9.24 GiB in 16.8 s against 45 GiB in 31.4 s), and without it a
        // partition synthesizes classically (a WindowPoSt's 50 s).
        let order = if recordings_first { 150 } else { 50 };
        budget.register_evictor(Arc::downgrade(&p) as std::sync::Weak<dyn Evictor>, order);
        p
    }

    /// The recording to synthesize a partition of `circuit_id` from, if
    /// there is one; otherwise the partition is synthesized classically,
    /// and a recording is started from it when none was tried yet.
    /// `estimate` gives the bytes reserved while recording, `lengths` the
    /// query lengths of the circuit type's parameters, which a recording
    /// must match.
    pub(super) fn plan(
        self: &Arc<Self>,
        circuit_id: &str,
        partition: &dyn Partition,
        estimate: impl FnOnce() -> u64,
        lengths: impl FnOnce() -> Option<QueryLengths>,
    ) -> Option<Arc<Held>> {
        {
            let mut circuits = self.circuits.lock().recover();
            let entry = circuits.entry(circuit_id.to_string()).or_insert_with(Entry::new);
            if !self.enabled {
                return None;
            }
            match &entry.state {
                State::Ready(held) => return Some(Arc::clone(held)),
                State::Classic => {}
                State::RetryAfter(t) if Instant::now() >= *t => {}
                _ => return None,
            }
            entry.state = State::Recording;
        }
        // Copied outside the lock: a large circuit takes a while to clone.
        match partition.fresh_circuit() {
            Some(fresh) => self.spawn(circuit_id, fresh, estimate(), lengths()),
            None => self.set(circuit_id, State::Classic),
        }
        None
    }

    /// Whether a recording is being made or loaded in the background.
    pub(super) fn busy(&self) -> bool {
        self.running.load(Ordering::Acquire) > 0
    }

    /// Whether `circuit_id` has a recording ready or being made.
    pub(super) fn held_or_recording(&self, circuit_id: &str) -> bool {
        self.state_is(circuit_id, |s| matches!(s, State::Ready(_) | State::Recording))
    }

    /// Whether `circuit_id`'s state is one `is` accepts.
    fn state_is(&self, circuit_id: &str, is: impl FnOnce(&State) -> bool) -> bool {
        self.circuits
            .lock()
            .recover()
            .get(circuit_id)
            .is_some_and(|e| is(&e.state))
    }

    /// The recording partitions of `circuit_id` synthesize from now.
    pub(super) fn ready_recording(&self, circuit_id: &str) -> Option<Arc<Recording>> {
        match &self.circuits.lock().recover().get(circuit_id)?.state {
            State::Ready(held) => Some(Arc::clone(&held.recording)),
            _ => None,
        }
    }

    fn set(&self, circuit_id: &str, state: State) {
        if let Some(e) = self.circuits.lock().recover().get_mut(circuit_id) {
            e.state = state;
        }
    }

    fn spawn(
        self: &Arc<Self>,
        circuit_id: &str,
        fresh: Box<dyn FreshCircuit>,
        estimate: u64,
        lengths: Option<QueryLengths>,
    ) {
        let (this, id) = (Arc::clone(self), circuit_id.to_string());
        self.running.fetch_add(1, Ordering::AcqRel);
        let done = Counted(Arc::clone(&self.running));
        let spawned = std::thread::Builder::new().name("precompile".into()).spawn(move || {
            let _done = done;
            let started = Instant::now();
            let made = catch(|| this.load_or_record(&id, fresh, estimate, lengths)).unwrap_or_else(|msg| {
                tracing::warn!(circuit = %id, "recording the circuit panicked: {msg}; it stays classic");
                Made::Never
            });
            this.set(
                &id,
                match made {
                    Made::Ready(mut held) => {
                        this.place_on_devices(&mut held);
                        State::Ready(Arc::from(held))
                    }
                    Made::Retry => State::RetryAfter(Instant::now() + RETRY_AFTER),
                    Made::Never => State::ClassicOnly,
                },
            );
            this.timeline.record("precompiler", Phase::Recording, started, id);
        });
        if let Err(e) = spawned {
            tracing::warn!(circuit = circuit_id, "could not start recording the circuit: {e}");
            self.set(circuit_id, State::RetryAfter(Instant::now() + RETRY_AFTER));
        }
    }

    /// Loads `circuit_id`'s recording from the hints directory, or records
    /// `fresh` (and saves it there).
    fn load_or_record(
        self: &Arc<Self>,
        circuit_id: &str,
        fresh: Box<dyn FreshCircuit>,
        estimate: u64,
        lengths: Option<QueryLengths>,
    ) -> Made {
        let path = self.dir.as_deref().map(|d| d.join(file_name(circuit_id)));
        if let Some(path) = &path
            && let Ok(meta) = std::fs::metadata(path)
        {
            match self.load(circuit_id, path, meta.len(), lengths.as_ref()) {
                Ok(Some(held)) => return Made::Ready(Box::new(held)),
                Ok(None) => return Made::Retry,
                Err(why) => {
                    tracing::warn!(circuit = circuit_id, path = %path.display(), "{why}; recording the circuit anew");
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        let started = Instant::now();
        let Some(funds) = self.reserve_waiting(circuit_id, estimate) else {
            return Made::Retry;
        };
        let recording = match fresh.record(circuit_id) {
            Ok(r) => match lengths.as_ref().map(|l| fits(&r, l)) {
                Some(Err(why)) => {
                    tracing::warn!(circuit = circuit_id, "the recorded circuit {why}; it stays classic");
                    return Made::Never;
                }
                _ => r,
            },
            Err(e) => {
                tracing::warn!(
                    circuit = circuit_id,
                    "the circuit cannot be recorded: {}; it stays classic",
                    ErrorChain(&e)
                );
                return Made::Never;
            }
        };
        let Some(held) = self.hold(recording, funds) else {
            return Made::Retry;
        };
        self.made.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            circuit = circuit_id,
            bytes = held.funds.bytes(),
            ms = started.elapsed().as_millis() as u64,
            "circuit recorded; its next partitions synthesize from the recording"
        );
        if let Some(path) = &path {
            let saved = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .map_err(|source| PrecompiledError::Io {
                    path: path.clone(),
                    source,
                })
                .and_then(|()| held.recording.save(path));
            if let Err(e) = saved {
                tracing::warn!(
                    circuit = circuit_id,
                    "the recording is kept in memory only: {}",
                    ErrorChain(&e)
                );
            }
        }
        Made::Ready(Box::new(held))
    }

    /// A recording file: `Ok(None)` when the budget cannot hold it now, an
    /// error (to be logged) when the file is unusable.
    fn load(
        &self,
        circuit_id: &str,
        path: &Path,
        file_bytes: u64,
        lengths: Option<&QueryLengths>,
    ) -> Result<Option<Held>, String> {
        let Some(funds) = self.reserve(circuit_id, file_bytes) else {
            return Ok(None);
        };
        let recording = Recording::load(path).map_err(|e| format!("unusable recording: {}", ErrorChain(&e)))?;
        if recording.circuit_id() != circuit_id {
            return Err(format!("the recording is of circuit {:?}", recording.circuit_id()));
        }
        if let Some(l) = lengths {
            fits(&recording, l).map_err(|why| format!("the recording {why}"))?;
        }
        let Some(held) = self.hold(recording, funds) else {
            return Ok(None);
        };
        self.loaded.fetch_add(1, Ordering::Relaxed);
        tracing::info!(circuit = circuit_id, path = %path.display(), bytes = held.funds.bytes(), "circuit recording loaded");
        Ok(Some(held))
    }

    /// Spare budget only: a recording is optional, so it neither evicts
    /// what others use (parameters, warm buffers) nor overtakes anyone
    /// waiting for memory.
    fn reserve(&self, circuit_id: &str, bytes: u64) -> Option<Reservation> {
        let r = self.budget.try_acquire_spare(bytes);
        if r.is_none() {
            tracing::info!(
                circuit = circuit_id,
                bytes,
                "no spare budget for a circuit recording now; classic synthesis"
            );
        }
        r
    }

    /// As `reserve`, waiting up to [`RESERVE_PATIENCE`] for spare budget:
    /// while partitions stream, admissions keep the budget full, and a
    /// recording that only tried once would never be made. Gives up early
    /// when the engine is gone (this thread holds the last reference).
    fn reserve_waiting(self: &Arc<Self>, circuit_id: &str, bytes: u64) -> Option<Reservation> {
        let deadline = Instant::now() + RESERVE_PATIENCE;
        loop {
            if let Some(r) = self.budget.try_acquire_spare(bytes) {
                return Some(r);
            }
            if Instant::now() >= deadline || Arc::strong_count(self) == 1 {
                return self.reserve(circuit_id, bytes);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Has every device's backend take its own copy of the recording's
    /// matrices now, ahead of the first partition that needs them; once
    /// every live one holds a copy, nothing on the host reads the matrices
    /// any more (each device computes a/b/c from its own), so the host copy
    /// is released and its budget returned. The file keeps them for the
    /// next load.
    fn place_on_devices(&self, held: &mut Held) {
        let circuit = held.recording.circuit_id();
        let live: Vec<&Arc<dyn Backend>> = self.backends.iter().filter(|b| b.lost().is_none()).collect();
        if live.is_empty() {
            return;
        }
        // A backend that computes a/b/c from the host matrices holds no
        // copy of its own (`hold_recording` answers false).
        for b in live {
            match b.hold_recording(&held.recording) {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(
                        circuit,
                        "a device could not take the circuit's matrices ({}); they stay in host memory too",
                        ErrorChain(&e)
                    );
                    return;
                }
            }
        }
        let freed = held.recording.release_matrices();
        held.funds.release(freed);
        tracing::info!(
            circuit,
            bytes = freed,
            "every device holds the circuit's matrices; their host copy is released"
        );
    }

    /// The recording with `funds` trimmed or topped up to its size.
    fn hold(&self, recording: Recording, mut funds: Reservation) -> Option<Held> {
        let bytes = recording.stats().bytes;
        if bytes > funds.bytes() {
            let more = self.reserve(recording.circuit_id(), bytes - funds.bytes())?;
            funds.merge(more).ok()?;
        } else {
            funds.release(funds.bytes() - bytes);
        }
        Some(Held {
            recording: Arc::new(recording),
            funds,
        })
    }

    /// A partition of `circuit_id` could not be synthesized from the
    /// recording: that partition falls back to its classic synthesis.
    ///
    /// A partition whose shape differs from the recording's is most often
    /// one built from a request's malformed data, so one never gives up a
    /// recording: the recording and its file stay, and later partitions
    /// are synthesized from it. Only a circuit type none of whose
    /// partitions ever matched, after [`MISMATCHES_BEFORE_CLASSIC`] in a
    /// row, is taken for one whose shape depends on its witness and goes
    /// classic for the life of the engine (its file is kept).
    pub(super) fn failed(&self, circuit_id: &str, e: &PrecompiledError) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        if !e.is_mismatch() {
            tracing::warn!(
                circuit = circuit_id,
                "synthesis from the recording failed ({}); this partition is synthesized classically",
                ErrorChain(e)
            );
            return;
        }
        let give_up = {
            let mut circuits = self.circuits.lock().recover();
            let Some(entry) = circuits.get_mut(circuit_id) else {
                return;
            };
            entry.mismatches += 1;
            let give_up = !entry.matched && entry.mismatches >= MISMATCHES_BEFORE_CLASSIC;
            if give_up {
                entry.state = State::ClassicOnly;
            }
            give_up
        };
        if give_up {
            tracing::warn!(
                circuit = circuit_id,
                "{}; no partition of this circuit matched its recording in {MISMATCHES_BEFORE_CLASSIC} \
                 tries: it is synthesized classically from now on",
                ErrorChain(e)
            );
        } else {
            tracing::warn!(
                circuit = circuit_id,
                "{}; this partition is synthesized classically (the recording stays)",
                ErrorChain(e)
            );
        }
    }

    pub(super) fn count(&self, circuit_id: &str, precompiled: bool) {
        if let Some(e) = self.circuits.lock().recover().get_mut(circuit_id) {
            if precompiled {
                e.precompiled += 1;
                e.matched = true;
                e.mismatches = 0;
            } else {
                e.classic += 1;
            }
        }
    }

    /// Holds `circuit_id`'s recording (made or not yet) for a job until
    /// the guard is dropped.
    pub(super) fn in_use(self: &Arc<Self>, circuit_id: &str) -> InUse {
        self.circuits
            .lock()
            .recover()
            .entry(circuit_id.to_string())
            .or_insert_with(Entry::new)
            .users += 1;
        InUse {
            precompiler: Arc::clone(self),
            circuit_id: circuit_id.to_string(),
        }
    }

    /// Per circuit type, by id.
    pub(super) fn status(&self) -> Vec<CircuitSynthesis> {
        let circuits = self.circuits.lock().recover();
        let mut out: Vec<CircuitSynthesis> = circuits
            .iter()
            .map(|(id, e)| {
                let (mode, recording_bytes, host_matrices) = match &e.state {
                    State::Classic | State::RetryAfter(_) => (SynthesisMode::Classic, 0, false),
                    State::Recording => (SynthesisMode::Recording, 0, false),
                    State::Ready(h) => (
                        SynthesisMode::Precompiled,
                        h.funds.bytes(),
                        h.recording.holds_matrices(),
                    ),
                    State::ClassicOnly => (SynthesisMode::ClassicOnly, 0, false),
                };
                CircuitSynthesis {
                    circuit_id: id.clone(),
                    mode,
                    recording_bytes,
                    host_matrices,
                    precompiled_partitions: e.precompiled,
                    classic_partitions: e.classic,
                    abc_on_device: false,
                }
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }

    /// Recordings made, loaded from files, and partitions that fell back
    /// to the classic synthesis, since start.
    pub(super) fn counters(&self) -> [u64; 3] {
        [&self.made, &self.loaded, &self.fallbacks].map(|c| c.load(Ordering::Relaxed))
    }
}

impl Evictor for Precompiler {
    fn name(&self) -> &str {
        "circuit recordings"
    }

    /// Drops recordings of circuit types no job is using; they are loaded
    /// again (spare memory permitting) a minute later. A recording whose
    /// matrices every device holds stays: on the host it keeps only counts
    /// and densities, so dropping it frees next to nothing and sends its
    /// circuit back to the classic synthesis (beside a PoRep stream at a
    /// 15 GiB cap, a WinningPoSt's 93 KB were dropped and the next ones
    /// took 2.4 s to synthesize instead of 0.3 s).
    fn evict(&self, bytes: u64, _rank: pinprove_mem::Rank) -> u64 {
        let victims: Vec<Arc<Held>> = {
            let mut circuits = self.circuits.lock().recover();
            let mut freed = 0;
            let mut victims = Vec::new();
            for e in circuits.values_mut() {
                if freed >= bytes {
                    break;
                }
                // Not while a job of the circuit type has not ended (its
                // later partitions would fall back to the classic
                // synthesis), nor while a partition synthesizes from it or a
                // device computes a partition's a/b/c from it.
                if e.users > 0
                    || !matches!(&e.state, State::Ready(h) if Arc::strong_count(h) == 1
                        && Arc::strong_count(&h.recording) == 1
                        && h.recording.holds_matrices())
                {
                    continue;
                }
                if let State::Ready(h) =
                    std::mem::replace(&mut e.state, State::RetryAfter(Instant::now() + RETRY_AFTER))
                {
                    freed += h.funds.bytes();
                    victims.push(h);
                }
            }
            victims
        };
        let freed = victims.iter().map(|h| h.funds.bytes()).sum();
        if freed > 0 {
            tracing::info!(bytes = freed, "circuit recordings dropped for memory; reloaded later");
        }
        // Dropped outside the lock: their reservations go back to the budget.
        drop(victims);
        freed
    }
}

/// Whether `recording` is a circuit the parameters with query `lengths`
/// prove: a recording made by another version of the circuit, or of
/// another circuit under the same id, would make every proof fail.
fn fits(recording: &Recording, lengths: &QueryLengths) -> Result<(), String> {
    let domain = pinprove_groth16::domain::domain_size(recording.num_constraints()).map_err(|e| e.to_string())?;
    let found = QueryLengths {
        h: domain - 1,
        l: recording.num_aux(),
        a: recording.densities().a_bases(recording.num_inputs()),
        b_g1: recording.densities().b_bases(),
        b_g2: recording.densities().b_bases(),
    };
    if found == *lengths {
        Ok(())
    } else {
        Err(format!(
            "does not match its parameters (queries {found:?}, parameters {lengths:?})"
        ))
    }
}

/// The recording file of a circuit type: its id made safe for a file name,
/// and a hash of the id so that ids differing only in unsafe characters do
/// not share a file.
fn file_name(circuit_id: &str) -> String {
    let safe: String = circuit_id
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = circuit_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("precompiled-{safe}-{hash:016x}.r1cs")
}

#[cfg(test)]
mod tests {
    use super::file_name;

    #[test]
    fn file_names_are_safe_and_distinct() {
        let a = file_name("porep-32g/../x y");
        assert!(a.starts_with("precompiled-porep-32g_.._x_y-"), "{a}");
        assert!(!a.contains('/'));
        assert_ne!(file_name("a b"), file_name("a_b"));
        assert_eq!(file_name("wpost"), file_name("wpost"));
    }
}
