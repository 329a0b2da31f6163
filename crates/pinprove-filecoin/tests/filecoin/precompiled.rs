//! Pre-compiled synthesis of Filecoin circuits at 2 KiB: after a circuit
//! type's first proof the engine records its R1CS and synthesizes later
//! partitions witness-only (PoRep's and PoSt's through the native
//! witnesses); their proofs must verify with filecoin-proofs.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use pinprove_engine::assembly::{BackendKind, Stack, StackConfig};
use pinprove_engine::{EngineConfig, SynthesisMode};
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache};
use pinprove_mem::BudgetConfig;

fn precompiling_prover() -> FilecoinProver {
    let stack = Stack::build(&StackConfig {
        backend: BackendKind::Cpu,
        budget: BudgetConfig::Fixed(16 << 30),
        ..StackConfig::default()
    })
    .unwrap();
    let engine = stack
        .engine(EngineConfig {
            synthesis_workers: 2,
            precompiled: true,
            ..EngineConfig::default()
        })
        .unwrap();
    FilecoinProver::new(Arc::new(engine), ParamCache::from_env(), FilecoinOptions::default())
}

/// The circuit type's mode and its partitions synthesized pre-compiled.
fn mode(prover: &FilecoinProver, circuit: &str) -> (SynthesisMode, u64) {
    assert!(
        prover.engine().wait_quiet(Duration::from_secs(120)),
        "recording did not finish"
    );
    let status = prover.engine().status();
    let c = status
        .synthesis
        .iter()
        .find(|c| c.circuit_id == circuit)
        .unwrap_or_else(|| panic!("{circuit} not in {:?}", status.synthesis));
    (c.mode, c.precompiled_partitions)
}

#[test]
fn every_kind_proves_precompiled_and_verifies() {
    let dir = temp_dir("precompiled");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 11, 1000, 5).unwrap();
    let prover = precompiling_prover();

    let porep = sector.porep_request();
    let classic = prover.prove(&porep).unwrap();
    assert!(sector.verify_seal(&classic.proof).unwrap());
    assert_eq!(mode(&prover, "porep-2k"), (SynthesisMode::Precompiled, 0));
    let native_before = pinprove_filecoin::native::porep::native_witnesses();
    let precompiled = prover.prove(&porep).unwrap();
    assert_eq!(mode(&prover, "porep-2k"), (SynthesisMode::Precompiled, 1));
    // The one PoRep partition's witness came from the native generator
    // (and matched the recording: it counts as pre-compiled above).
    assert_eq!(pinprove_filecoin::native::porep::native_witnesses() - native_before, 1);
    assert!(
        sector.verify_seal(&precompiled.proof).unwrap(),
        "verify_seal accepts the pre-compiled PoRep"
    );

    // PoSt: the second proof's witness is the native one, every sector at
    // once.
    let randomness = sector.randomness();
    let winning = sector.winning_post_request(randomness).unwrap();
    let first = prover.prove(&winning).unwrap();
    assert!(sector.verify_winning_post(randomness, &first.proof).unwrap());
    assert_eq!(mode(&prover, "winning-2k"), (SynthesisMode::Precompiled, 0));
    let native_before = pinprove_filecoin::native::post::native_witnesses();
    let again = prover.prove(&winning).unwrap();
    assert_eq!(mode(&prover, "winning-2k"), (SynthesisMode::Precompiled, 1));
    assert_eq!(pinprove_filecoin::native::post::native_witnesses() - native_before, 1);
    assert!(
        sector.verify_winning_post(randomness, &again.proof).unwrap(),
        "filecoin-proofs accepts the pre-compiled WinningPoSt"
    );
    let window = sector.window_post_requests(&[3, 11], randomness).unwrap();
    let first = prover.prove(&window[0]).unwrap();
    assert!(sector.verify_window_post(&[3, 11], randomness, &first.proof).unwrap());
    let again = prover.prove(&window[0]).unwrap();
    assert_eq!(mode(&prover, "wpost-2k"), (SynthesisMode::Precompiled, 1));
    assert!(
        sector.verify_window_post(&[3, 11], randomness, &again.proof).unwrap(),
        "filecoin-proofs accepts the pre-compiled WindowPoSt"
    );

    let snap = sector.snap_update(&dir.join("update")).unwrap();
    let first = prover.prove(&snap).unwrap();
    assert!(SampleSector::verify_update(&snap, &first.proof).unwrap());
    let native_before = pinprove_filecoin::native::snap::native_witnesses();
    let again = prover.prove(&snap).unwrap();
    assert_eq!(mode(&prover, "snap-2k"), (SynthesisMode::Precompiled, 1));
    // The one update partition's witness came from the native generator.
    assert_eq!(pinprove_filecoin::native::snap::native_witnesses() - native_before, 1);
    assert!(
        SampleSector::verify_update(&snap, &again.proof).unwrap(),
        "filecoin-proofs accepts the pre-compiled SnapDeals update"
    );

    assert_idle(prover.engine(), "precompiled");
    std::fs::remove_dir_all(&dir).unwrap();
}
