//! Where parameters for the built-in circuits live.
//!
//! One cache directory (`$XDG_CACHE_HOME/pinprove/params`, else
//! `~/.cache/pinprove/params`), one file per circuit id and kind:
//! `<id>.params` for real parameters (pinprove's setup, the file
//! bellperson's generator makes from the same seed: proofs verify) and `<id>.synthetic.params` for
//! synthetic ones (right shape, valid points, written fast; proofs do not
//! verify). A missing file is made on first use, atomically, so an
//! interrupted run never leaves half a file behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pinprove_groth16::circuits::BenchCircuit;
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::synthetic::write_synthetic_params;
use pinprove_groth16::{AbcLayout, CapacityHints, synthesize};
use pinprove_mem::{BudgetConfig, MemoryBudget, PoolConfig};
use pinprove_stack::PoolMemory;

use pinprove_groth16::setup::{self, SetupStats, ToxicWaste};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Writes real parameters for `circuit` from `seed`'s toxic waste,
/// atomically (the file bellperson's generator makes from the same seed).
pub fn write_real(circuit: &BenchCircuit, seed: u64, path: &Path) -> Result<SetupStats> {
    let waste = ToxicWaste::random(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut stats = None;
    write_atomically(path, |w| {
        stats = Some(setup::generate(circuit.clone(), &waste, w, &|_| {})?.1);
        Ok(())
    })?;
    stats.context("the setup wrote nothing")
}

/// Which parameters a benchmark proves with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamsKind {
    /// A real setup: proofs verify.
    Real,
    /// Right-shaped points, written fast; proofs do not verify.
    Synthetic,
}

/// `$XDG_CACHE_HOME/pinprove`, else `~/.cache/pinprove`.
pub fn pinprove_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("pinprove")
}

/// The cache of built-in circuits' parameters.
pub struct ParamsCache {
    dir: PathBuf,
}

impl ParamsCache {
    /// The cache in `dir`, or in [`ParamsCache::default_dir`].
    pub fn new(dir: Option<&Path>) -> ParamsCache {
        ParamsCache {
            dir: dir.map_or_else(Self::default_dir, Path::to_path_buf),
        }
    }

    /// `$XDG_CACHE_HOME/pinprove/params`, else `~/.cache/pinprove/params`.
    pub fn default_dir() -> PathBuf {
        pinprove_cache_dir().join("params")
    }

    /// Where the parameters of `circuit` of `kind` are kept.
    pub fn path(&self, circuit: &BenchCircuit, kind: ParamsKind) -> PathBuf {
        let ext = match kind {
            ParamsKind::Real => "params",
            ParamsKind::Synthetic => "synthetic.params",
        };
        self.dir.join(format!("{}.{ext}", circuit.id()))
    }

    /// The parameters of `circuit`, made first when missing; with the time
    /// making them took, if they were made now.
    pub fn ensure(&self, circuit: &BenchCircuit, kind: ParamsKind) -> Result<(PathBuf, Option<Duration>)> {
        let path = self.path(circuit, kind);
        if path.exists() {
            return Ok((path, None));
        }
        tracing::info!(circuit = %circuit.id(), path = %path.display(), ?kind, "making parameters (once)");
        let t = Instant::now();
        match kind {
            ParamsKind::Real => {
                write_real(circuit, 1, &path)?;
            }
            ParamsKind::Synthetic => {
                write_synthetic(circuit, &path)?;
            }
        }
        let took = t.elapsed();
        tracing::info!(circuit = %circuit.id(), s = took.as_secs_f64(), "parameters made");
        Ok((path, Some(took)))
    }
}

/// `explicit` when given, else the cached file of `circuit` in `dir` (made
/// when missing).
pub fn params_file(
    circuit: &BenchCircuit,
    explicit: Option<&Path>,
    dir: Option<&Path>,
    kind: ParamsKind,
) -> Result<PathBuf> {
    match explicit {
        Some(p) => Ok(p.to_path_buf()),
        None => Ok(ParamsCache::new(dir).ensure(circuit, kind)?.0),
    }
}

/// Writes synthetic parameters of `circuit`'s shape to `out` (atomically);
/// returns the file's size.
pub fn write_synthetic(circuit: &BenchCircuit, out: &Path) -> Result<u64> {
    let shape = shape_of(circuit)?;
    write_atomically(out, |w| Ok(write_synthetic_params(&shape, w)?))?;
    Ok(shape.file_bytes())
}

/// The shape of `circuit`'s parameters, from one synthesis of it into heap
/// memory (freed before this returns).
pub fn shape_of(circuit: &BenchCircuit) -> Result<CircuitShape> {
    let budget = MemoryBudget::from_config(&BudgetConfig::default());
    let pool = pinprove_stack::pool(&budget, PoolMemory::Heap, Default::default(), PoolConfig::default())?;
    let hints = CapacityHints::in_memory();
    let (asg, _) = synthesize(circuit.clone(), &circuit.id(), &pool, &hints, AbcLayout::Exact, None)?;
    Ok(CircuitShape::of(&asg))
}

/// Writes `path` through `write` into a temporary file beside it, renamed
/// into place once complete (parent directories made as needed).
pub fn write_atomically(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let result = (|| {
        let mut w = BufWriter::with_capacity(
            8 << 20,
            File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?,
        );
        write(&mut w).with_context(|| format!("writing {}", tmp.display()))?;
        w.flush().with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
