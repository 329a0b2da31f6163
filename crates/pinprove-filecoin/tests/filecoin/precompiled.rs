//! Pre-compiled synthesis of Filecoin circuits at 2 KiB: after a circuit
//! type's first proof the engine records its R1CS and synthesizes later
//! partitions witness-only, through the direct witnesses; their proofs
//! must verify with filecoin-proofs and, given the same r and s, be the
//! bytes of the first proof, whose witness the gadgets made.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use pinprove_engine::{EngineConfig, SynthesisMode};
use pinprove_filecoin::direct::witnesses_computed;
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache, ProofKind};
use pinprove_groth16::Scalar;
use pinprove_mem::BudgetConfig;
use pinprove_stack::{BackendKind, Stack, StackConfig};

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

/// Proves `req` with fixed `(r, s)` per partition (from `seed`): the same
/// pairs give the same bytes whichever way the witness was made.
fn prove_fixed(prover: &FilecoinProver, req: &pinprove_filecoin::ProofRequest, seed: u64) -> Vec<u8> {
    let prepared = prover.prepare(req).unwrap();
    let rs = (0..prepared.partitions() as u64)
        .map(|i| (Scalar::from(seed + 2 * i), Scalar::from(seed + 2 * i + 1)))
        .collect();
    let sub = prover.submit_prepared(prepared.with_randomness(rs).unwrap()).unwrap();
    let outcome = prover.engine().wait(sub.job, None).unwrap();
    prover.finish(&sub, outcome).unwrap().proof
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

    // Each kind twice with the same r and s: first classically (the gadgets
    // make the witness while the circuit is recorded), then pre-compiled
    // from the direct witness; both verify and are the same bytes.
    let porep = sector.porep_request();
    let classic = prove_fixed(&prover, &porep, 10);
    assert!(sector.verify_seal(&classic).unwrap());
    assert_eq!(mode(&prover, "porep-2k"), (SynthesisMode::Precompiled, 0));
    let direct_before = witnesses_computed(ProofKind::PoRep);
    // The second time from the bare C1 output (as filecoin-ffi writes it,
    // not wrapped as Curio sends it): the same sector, so the same bytes.
    let mut bare = porep.clone();
    bare.vanilla_proof = sector.c1.clone();
    let precompiled = prove_fixed(&prover, &bare, 10);
    assert_eq!(mode(&prover, "porep-2k"), (SynthesisMode::Precompiled, 1));
    // The one PoRep partition's witness came from the direct generator
    // (and matched the recording: it counts as pre-compiled above).
    assert_eq!(witnesses_computed(ProofKind::PoRep) - direct_before, 1);
    assert_eq!(precompiled, classic, "the direct PoRep witness proves the same bytes");
    assert!(sector.verify_seal(&precompiled).unwrap());

    // PoSt: the direct witness is made every sector at once.
    let randomness = sector.randomness();
    let winning = sector.winning_post_request(randomness).unwrap();
    let classic = prove_fixed(&prover, &winning, 20);
    assert!(sector.verify_winning_post(randomness, &classic).unwrap());
    assert_eq!(mode(&prover, "winning-2k"), (SynthesisMode::Precompiled, 0));
    let direct_before = witnesses_computed(ProofKind::WinningPoSt);
    let precompiled = prove_fixed(&prover, &winning, 20);
    assert_eq!(mode(&prover, "winning-2k"), (SynthesisMode::Precompiled, 1));
    assert_eq!(witnesses_computed(ProofKind::WinningPoSt) - direct_before, 1);
    assert_eq!(
        precompiled, classic,
        "the direct WinningPoSt witness proves the same bytes"
    );
    assert!(sector.verify_winning_post(randomness, &precompiled).unwrap());

    let window = sector.window_post_requests(&[3, 11], randomness).unwrap();
    let classic = prove_fixed(&prover, &window[0], 30);
    assert!(sector.verify_window_post(&[3, 11], randomness, &classic).unwrap());
    let direct_before = witnesses_computed(ProofKind::WindowPoSt);
    let precompiled = prove_fixed(&prover, &window[0], 30);
    assert_eq!(mode(&prover, "wpost-2k"), (SynthesisMode::Precompiled, 1));
    assert_eq!(witnesses_computed(ProofKind::WindowPoSt) - direct_before, 1);
    assert_eq!(
        precompiled, classic,
        "the direct WindowPoSt witness proves the same bytes"
    );
    assert!(sector.verify_window_post(&[3, 11], randomness, &precompiled).unwrap());

    let snap = sector.snap_update(&dir.join("update")).unwrap();
    let classic = prove_fixed(&prover, &snap, 40);
    assert!(SampleSector::verify_update(&snap, &classic).unwrap());
    let direct_before = witnesses_computed(ProofKind::SnapDeals);
    let precompiled = prove_fixed(&prover, &snap, 40);
    assert_eq!(mode(&prover, "snap-2k"), (SynthesisMode::Precompiled, 1));
    // The one update partition's witness came from the direct generator.
    assert_eq!(witnesses_computed(ProofKind::SnapDeals) - direct_before, 1);
    assert_eq!(
        precompiled, classic,
        "the direct SnapDeals witness proves the same bytes"
    );
    assert!(SampleSector::verify_update(&snap, &precompiled).unwrap());

    assert_idle(prover.engine(), "precompiled");
    std::fs::remove_dir_all(&dir).unwrap();
}
