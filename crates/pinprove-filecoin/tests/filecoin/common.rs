//! What the Filecoin tests share: an engine on the CPU backend over an
//! independent accountant, and sealed sample sectors.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pinprove_engine::{Engine, EngineConfig};
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache};
use pinprove_mem::BudgetConfig;
use pinprove_stack::{BackendKind, Stack, StackConfig};

/// A prover over a fresh CPU engine, parameters from the standard cache
/// (`FIL_PROOFS_PARAMETER_CACHE`, which `scripts/test` points at a user
/// cache directory: made once per machine).
pub fn prover(budget: u64) -> FilecoinProver {
    prover_with(budget, FilecoinOptions::default())
}

/// [`prover`] with `options`.
pub fn prover_with(budget: u64, options: FilecoinOptions) -> FilecoinProver {
    FilecoinProver::new(engine(budget), ParamCache::from_env(), options)
}

/// A prover of synthetic requests (see `pinprove_filecoin::synthetic`)
/// over a fresh CPU engine.
pub fn synthetic_prover(budget: u64) -> FilecoinProver {
    FilecoinProver::for_synthetic_inputs(engine(budget), ParamCache::from_env(), None)
}

/// A fresh CPU engine over an independent accountant of `budget` bytes.
fn engine(budget: u64) -> Arc<Engine> {
    let stack = Stack::build(&StackConfig {
        backend: BackendKind::Cpu,
        budget: BudgetConfig::Fixed(budget),
        ..StackConfig::default()
    })
    .unwrap();
    let engine = stack
        .engine(EngineConfig {
            synthesis_workers: 2,
            ..EngineConfig::default()
        })
        .unwrap();
    Arc::new(engine)
}

pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-fc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The engine is back at its idle values (see `sample::check_idle`).
pub fn assert_idle(engine: &Engine, what: &str) {
    if let Err(held) = pinprove_filecoin::sample::check_idle(engine, Duration::from_secs(60)) {
        panic!("{what}: {held}");
    }
}
