//! Counted circuit shapes, persisted: counting the shape of a 32 GiB
//! circuit from its blank form takes a minute or more (66–76 s for a PoRep
//! partition on the H200 host, 187 s for a WindowPoSt one on two cores), and
//! synthetic parameters need nothing else from the circuit. A benchmark at
//! production size then pays the count once per machine, not once per run.
//!
//! Only synthetic parameters are made from these shapes; real proofs use the
//! parameter files, which carry their own shape. A shape counted by another
//! version of this crate (whose storage-proofs circuits may differ) is not
//! used.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use pinprove_groth16::shape::CircuitShape;
use serde::{Deserialize, Serialize};

const FILE_NAME: &str = "synthetic-shapes.json";
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct ShapeFile {
    format: u32,
    /// The version of this crate that counted the shapes.
    counted_by: String,
    shapes: BTreeMap<String, CircuitShape>,
}

/// Shapes by circuit id in one small JSON file of a cache directory.
#[derive(Debug, Clone)]
pub struct ShapeCache {
    path: PathBuf,
}

impl ShapeCache {
    /// The cache in `dir` (created when a shape is first stored).
    pub fn new(dir: impl AsRef<Path>) -> ShapeCache {
        ShapeCache {
            path: dir.as_ref().join(FILE_NAME),
        }
    }

    /// The file shapes persist in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> BTreeMap<String, CircuitShape> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return BTreeMap::new(),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot read counted shapes: {e}");
                return BTreeMap::new();
            }
        };
        match serde_json::from_slice::<ShapeFile>(&bytes) {
            Ok(f) if f.format == FORMAT && f.counted_by == env!("CARGO_PKG_VERSION") => f.shapes,
            Ok(f) => {
                tracing::info!(
                    path = %self.path.display(),
                    counted_by = %f.counted_by,
                    "counted shapes are from another version: counting again"
                );
                BTreeMap::new()
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "ignoring unreadable counted shapes: {e}");
                BTreeMap::new()
            }
        }
    }

    /// The stored shape of `circuit_id`.
    pub fn get(&self, circuit_id: &str) -> Option<CircuitShape> {
        self.read().get(circuit_id).copied()
    }

    /// Stores the shape of `circuit_id`. Failing to persist is logged: a
    /// cache that cannot be written only costs the next count.
    pub fn record(&self, circuit_id: &str, shape: CircuitShape) {
        let mut shapes = self.read();
        shapes.insert(circuit_id.to_string(), shape);
        let file = ShapeFile {
            format: FORMAT,
            counted_by: env!("CARGO_PKG_VERSION").to_string(),
            shapes,
        };
        if let Err(e) = self.write(&file) {
            tracing::warn!(path = %self.path.display(), "cannot store a counted shape: {e}");
        }
    }

    fn write(&self, file: &ShapeFile) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(file).map_err(io::Error::other)?)?;
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(n: usize) -> CircuitShape {
        CircuitShape {
            inputs: 2,
            aux: n,
            constraints: n + 1,
            a_aux: n,
            b_inputs: 1,
            b_aux: n / 2,
        }
    }

    #[test]
    fn shapes_persist_per_circuit_and_other_versions_are_ignored() {
        let dir = std::env::temp_dir().join(format!("pinprove-shapes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = ShapeCache::new(&dir);
        assert_eq!(cache.get("porep-2k"), None);
        cache.record("porep-2k", shape(10));
        cache.record("wpost-2k", shape(20));
        let again = ShapeCache::new(&dir);
        assert_eq!(again.get("porep-2k"), Some(shape(10)));
        assert_eq!(again.get("wpost-2k"), Some(shape(20)));

        // Counted by another version: not trusted.
        let text = std::fs::read_to_string(cache.path()).unwrap();
        let other = text.replace(env!("CARGO_PKG_VERSION"), "0.0.0-other");
        assert_ne!(text, other);
        std::fs::write(cache.path(), other).unwrap();
        assert_eq!(cache.get("porep-2k"), None);

        // Garbage: ignored, and overwritten by the next record.
        std::fs::write(cache.path(), b"{not json").unwrap();
        assert_eq!(cache.get("porep-2k"), None);
        cache.record("porep-2k", shape(30));
        assert_eq!(cache.get("porep-2k"), Some(shape(30)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
