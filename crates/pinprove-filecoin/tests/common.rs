//! What the Filecoin tests share: an engine on the CPU backend over an
//! independent accountant, and sealed sample sectors.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pinprove_engine::assembly::{BackendKind, Stack, StackConfig};
use pinprove_engine::{Engine, EngineConfig};
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache};
use pinprove_mem::BudgetConfig;

/// A prover over a fresh CPU engine, parameters from the standard cache
/// (`FIL_PROOFS_PARAMETER_CACHE`, which `scripts/test` points at a user
/// cache directory: made once per machine).
pub fn prover(budget: u64) -> FilecoinProver {
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
    FilecoinProver::new(Arc::new(engine), ParamCache::from_env(), FilecoinOptions::default())
}

pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-fc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The engine is back at its idle values: nothing in flight, no pool buffer
/// out, the budget holding only idle pool buffers and loaded parameters.
pub fn assert_idle(engine: &Engine, what: &str) {
    assert!(
        engine.wait_quiet(Duration::from_secs(60)),
        "{what}: the pipeline did not drain"
    );
    let status = engine.status();
    assert!(status.partitions.is_empty(), "{what}: {:?}", status.partitions);
    let pool = engine.pool().stats();
    let srs: u64 = status.srs.iter().map(|s| s.bytes).sum();
    // Decoded parameters live in pool buffers: checked out, and nothing else.
    assert_eq!(
        pool.checked_out_bytes, srs,
        "{what}: buffers still out beside the parameters"
    );
    assert_eq!(
        engine.pool().budget().used(),
        pool.allocated_bytes,
        "{what}: reservations still held beside the pool's"
    );
}
