//! Capacity hints: the sizes a circuit type synthesizes to, learned once.
//!
//! The first synthesis of a circuit type grows its vectors; its final sizes
//! become the hint for every later synthesis of the same type, which then
//! allocates exactly once, never spills and never copies. Hints persist as
//! one small JSON file so that a restarted prover keeps them. A stale or
//! wrong hint only costs a spill: the vectors grow, the hint is corrected,
//! and a warning is logged.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pinprove_mem::sync::Recover;
use serde::{Deserialize, Serialize};

/// The sizes one synthesis of a circuit type produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityHint {
    /// Constraints, including Groth16's input constraints (the a/b/c length).
    pub constraints: usize,
    /// Public inputs, including the constant ONE.
    pub inputs: usize,
    /// Auxiliary variables.
    pub aux: usize,
}

impl CapacityHint {
    /// Bytes of the a/b/c vectors (32 bytes per scalar).
    pub fn abc_bytes(&self) -> u64 {
        3 * 32 * self.constraints as u64
    }

    /// Bytes of the input and aux assignments.
    pub fn assignment_bytes(&self) -> u64 {
        32 * (self.inputs + self.aux) as u64
    }
}

/// What a backend learned from the proofs of one circuit type that lets a
/// later process prepare for its first proof: the sizes it will ask for.
/// Kept with the capacity hints (see [`Backend::hint`](crate::Backend::hint)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendHint {
    /// The pool buffers one proof's preparation takes, by size (kept warm
    /// ahead of the first proof).
    #[serde(default)]
    pub host_buffers: Vec<u64>,
    /// Host bytes one proof's preparation took at most (what admission
    /// counts for it).
    #[serde(default)]
    pub preparation_bytes: u64,
    /// Device memory the proofs kept in the device's memory pool (reserved
    /// there ahead of the first proof).
    #[serde(default)]
    pub device_pool_bytes: u64,
}

const FILE_NAME: &str = "capacity-hints.json";

#[derive(Serialize, Deserialize, Default)]
struct HintFile {
    version: u32,
    hints: BTreeMap<String, CapacityHint>,
    /// By "circuit id/backend name".
    #[serde(default)]
    backends: BTreeMap<String, BackendHint>,
}

#[derive(Clone, Debug, Default)]
struct Hints {
    capacity: BTreeMap<String, CapacityHint>,
    backends: BTreeMap<String, BackendHint>,
}

/// Hints by circuit id, in memory and optionally in a cache directory.
#[derive(Debug)]
pub struct CapacityHints {
    dir: Option<PathBuf>,
    hints: Mutex<Hints>,
}

impl CapacityHints {
    /// Hints kept in memory only.
    pub fn in_memory() -> Self {
        CapacityHints {
            dir: None,
            hints: Mutex::new(Hints::default()),
        }
    }

    /// Hints persisted in `dir` (created if missing). An unreadable or
    /// corrupt file is logged and ignored: hints are an optimization.
    pub fn persistent(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let path = dir.join(FILE_NAME);
        let hints = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<HintFile>(&bytes) {
                Ok(f) => Hints {
                    capacity: f.hints,
                    backends: f.backends,
                },
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unreadable capacity hints: {e}");
                    Hints::default()
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Hints::default(),
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read capacity hints: {e}");
                Hints::default()
            }
        };
        CapacityHints {
            dir: Some(dir),
            hints: Mutex::new(hints),
        }
    }

    /// The file hints persist in, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(FILE_NAME))
    }

    /// The hint for `circuit_id`.
    pub fn get(&self, circuit_id: &str) -> Option<CapacityHint> {
        self.lock().capacity.get(circuit_id).copied()
    }

    /// All hints.
    pub fn all(&self) -> BTreeMap<String, CapacityHint> {
        self.lock().capacity.clone()
    }

    /// What backend `backend` learned from proofs of `circuit_id`.
    pub fn backend_hint(&self, circuit_id: &str, backend: &str) -> Option<BackendHint> {
        self.lock().backends.get(&backend_key(circuit_id, backend)).cloned()
    }

    /// Keeps what backend `backend` learned from proofs of `circuit_id`.
    /// Returns whether the stored hint changed; failures to persist are
    /// logged, as for [`record`](Self::record).
    pub fn record_backend_hint(&self, circuit_id: &str, backend: &str, hint: BackendHint) -> bool {
        let snapshot = {
            let mut hints = self.lock();
            let key = backend_key(circuit_id, backend);
            if hints.backends.get(&key) == Some(&hint) {
                return false;
            }
            tracing::debug!(circuit = circuit_id, backend, ?hint, "learned a backend hint");
            hints.backends.insert(key, hint);
            hints.clone()
        };
        self.persist(snapshot);
        true
    }

    /// Records what a synthesis of `circuit_id` produced. Returns whether the
    /// stored hint changed. Persisting failures are logged, not returned: a
    /// proof must not fail because a cache directory is read-only.
    pub fn record(&self, circuit_id: &str, actual: CapacityHint) -> bool {
        let snapshot = {
            let mut hints = self.lock();
            match hints.capacity.insert(circuit_id.to_string(), actual) {
                Some(old) if old == actual => return false,
                Some(old) => tracing::warn!(
                    circuit = circuit_id,
                    ?old,
                    new = ?actual,
                    "capacity hint was stale; corrected"
                ),
                None => tracing::debug!(circuit = circuit_id, hint = ?actual, "learned capacity hint"),
            }
            hints.clone()
        };
        self.persist(snapshot);
        true
    }

    fn persist(&self, snapshot: Hints) {
        if let Some(dir) = &self.dir
            && let Err(e) = save(dir, snapshot)
        {
            tracing::warn!(dir = %dir.display(), "cannot persist capacity hints: {e}");
        }
    }

    /// Drops the hint for `circuit_id` (an implausible or harmful one): the
    /// next synthesis learns it anew.
    pub fn forget(&self, circuit_id: &str) {
        let snapshot = {
            let mut hints = self.lock();
            if hints.capacity.remove(circuit_id).is_none() {
                return;
            }
            hints.clone()
        };
        self.persist(snapshot);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Hints> {
        self.hints.lock().recover()
    }
}

fn backend_key(circuit_id: &str, backend: &str) -> String {
    format!("{circuit_id}/{backend}")
}

/// Writes atomically: a reader never sees a half-written file.
fn save(dir: &Path, hints: Hints) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = HintFile {
        version: 1,
        hints: hints.capacity,
        backends: hints.backends,
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
    let tmp = dir.join(format!("{FILE_NAME}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(FILE_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pinprove-hints-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn hints_persist_across_restarts() {
        let dir = temp_dir("persist");
        let h = CapacityHints::persistent(&dir);
        let hint = CapacityHint {
            constraints: 1000,
            inputs: 3,
            aux: 900,
        };
        assert!(h.record("porep-32g", hint));
        assert!(!h.record("porep-32g", hint), "unchanged hint is not rewritten");
        let again = CapacityHints::persistent(&dir);
        assert_eq!(again.get("porep-32g"), Some(hint));
        assert_eq!(again.get("other"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn backend_hints_persist_beside_the_capacity_hints() {
        let dir = temp_dir("backend");
        let h = CapacityHints::persistent(&dir);
        let hint = BackendHint {
            host_buffers: vec![4096, 1 << 20],
            preparation_bytes: 1 << 21,
            device_pool_bytes: 1 << 30,
        };
        assert!(h.record("porep-32g", CapacityHint::default()));
        assert!(h.record_backend_hint("porep-32g", "native", hint.clone()));
        assert!(!h.record_backend_hint("porep-32g", "native", hint.clone()), "unchanged");
        let again = CapacityHints::persistent(&dir);
        assert_eq!(again.backend_hint("porep-32g", "native"), Some(hint));
        assert_eq!(again.backend_hint("porep-32g", "cpu"), None, "per backend");
        assert_eq!(
            again.get("porep-32g"),
            Some(CapacityHint::default()),
            "capacity hints stay"
        );
        // A file of an earlier build, without backend hints, still reads.
        std::fs::write(
            dir.join(FILE_NAME),
            br#"{"version":1,"hints":{"x":{"constraints":1,"inputs":1,"aux":1}}}"#,
        )
        .unwrap();
        let old = CapacityHints::persistent(&dir);
        assert_eq!(old.get("x").map(|h| h.aux), Some(1));
        assert_eq!(old.backend_hint("porep-32g", "native"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_ignored() {
        let dir = temp_dir("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE_NAME), b"{not json").unwrap();
        let h = CapacityHints::persistent(&dir);
        assert!(h.all().is_empty());
        h.record("x", CapacityHint::default());
        assert_eq!(CapacityHints::persistent(&dir).get("x"), Some(CapacityHint::default()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
