//! PoRep C2 at 2 KiB through the engine, verified by filecoin-proofs-api.

use crate::common::*;
use filecoin_proofs_api::RegisteredSealProof;
use pinprove_filecoin::sample::SampleSector;

#[test]
fn porep_c2_proves_and_verifies_with_verify_seal() {
    let dir = temp_dir("porep");
    let sector = SampleSector::seal(&dir.join("sector"), 2048, 42, 1000, 3).unwrap();
    let prover = prover(16 << 30);
    let req = sector.porep_request();
    // The seal proof a C1 output names (what `pinprove prove` sends when
    // none is given), wrapped or bare.
    assert_eq!(
        pinprove_filecoin::registered_proof_of(&req.vanilla_proof).unwrap(),
        req.registered_proof
    );
    assert_eq!(
        pinprove_filecoin::registered_proof_of(&sector.c1).unwrap(),
        req.registered_proof
    );
    assert!(
        pinprove_filecoin::registered_proof_of(b"{}")
            .unwrap_err()
            .is_bad_input()
    );
    let proved = prover.prove(&req).unwrap();
    assert_eq!(proved.proof.len(), 192, "one partition at 2 KiB");
    assert!(
        sector.verify_seal(&proved.proof).unwrap(),
        "filecoin-proofs-api's verify_seal accepts it"
    );
    // The bare C1 output (as filecoin-ffi writes it) is proved in the
    // pre-compiled test, to the same bytes as the wrapped one.
    assert_idle(prover.engine(), "porep");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A sample sector sealed with `rsp` (numbered `number`, which also seeds
/// it), a prover, and the sector's C2 request, which names `rsp`.
fn sealed_as(
    name: &str,
    rsp: RegisteredSealProof,
    number: u64,
) -> (
    std::path::PathBuf,
    SampleSector,
    pinprove_filecoin::FilecoinProver,
    pinprove_filecoin::ProofRequest,
) {
    let dir = temp_dir(name);
    let sector = SampleSector::seal_as(&dir.join("sector"), rsp, number, 1000, number).unwrap();
    let req = sector.porep_request();
    assert_eq!(req.registered_proof, pinprove_filecoin::kind::seal_number(rsp));
    (dir, sector, prover(16 << 30), req)
}

/// Non-interactive PoRep: 13 partitions at 2 KiB, returned as their
/// SnarkPack aggregate, which filecoin-proofs-api's `verify_seal` checks
/// against the inner-product SRS of the same parameter cache (made for test
/// sectors when missing).
#[test]
fn non_interactive_porep_proves_an_aggregate_that_verify_seal_accepts() {
    let (dir, sector, prover, req) = sealed_as(
        "ni-porep",
        RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        43,
    );
    let t = std::time::Instant::now();
    let proved = prover.prove(&req).unwrap();
    let proving = t.elapsed();
    assert!(proved.aggregation.is_some(), "aggregated");
    assert!(proved.verification.is_some(), "verified before it was returned");
    let t = std::time::Instant::now();
    assert!(
        sector.verify_seal(&proved.proof).unwrap(),
        "filecoin-proofs-api's verify_seal accepts the aggregate"
    );
    eprintln!(
        "NI-PoRep 2 KiB: proved in {proving:?} (synthesis {:?} summed over partitions), aggregated in {:?}, \
         verified by pinprove in {:?}, by verify_seal in {:?}; aggregate {} bytes",
        proved
            .partitions
            .iter()
            .map(|p| p.synthesis)
            .sum::<std::time::Duration>(),
        proved.aggregation.unwrap(),
        proved.verification.unwrap(),
        t.elapsed(),
        proved.proof.len()
    );
    // A changed byte is refused.
    let mut other = proved.proof.clone();
    let at = other.len() / 2;
    other[at] ^= 1;
    assert!(
        !sector.verify_seal(&other).unwrap_or(false),
        "a changed byte is refused"
    );
    assert_eq!(proved.partitions.len(), 13);
    assert_idle(prover.engine(), "ni-porep");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Synthetic PoRep (challenges drawn ahead from proofs made at sealing):
/// the same circuit and proof shape as V1_1, from its own C1 output.
#[test]
fn synthetic_porep_proves_and_verifies_with_verify_seal() {
    let (dir, sector, prover, req) = sealed_as(
        "synth-porep",
        RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        44,
    );
    let proved = prover.prove(&req).unwrap();
    assert_eq!(proved.proof.len(), 192, "one partition at 2 KiB");
    assert!(proved.aggregation.is_none());
    assert!(sector.verify_seal(&proved.proof).unwrap(), "verify_seal accepts it");
    assert_idle(prover.engine(), "synthetic porep");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A request's own priority decides whether its circuit's buffers are kept
/// ready, not its kind's: a PoRep sent as Critical gets what a WinningPoSt
/// gets (a kept set the budget does not evict). Decided when it is
/// submitted: the job is cancelled there, nothing is proved.
#[test]
fn a_porep_sent_as_critical_has_its_buffers_kept_ready() {
    let dir = temp_dir("porep-critical");
    let sector = SampleSector::seal(&dir.join("sector"), 2048, 43, 1000, 8).unwrap();
    let prover = prover(16 << 30);
    let engine = prover.engine();
    let mut req = sector.porep_request();
    let circuit = pinprove_filecoin::kind::circuit_id(req.kind, 2048).unwrap();
    prover.register(&circuit).unwrap();
    engine.preload_srs(&circuit).unwrap();
    assert!(engine.wait_quiet(std::time::Duration::from_secs(60)));
    let normal = prover.submit(&req).unwrap();
    engine.cancel(normal.job).unwrap();
    assert!(engine.wait_quiet(std::time::Duration::from_secs(60)));
    assert_eq!(
        engine.status().pool_kept,
        0,
        "a PoRep's buffers are not kept by default"
    );
    req.priority = Some(pinprove_engine::Priority::Critical);
    let critical = prover.submit(&req).unwrap();
    engine.cancel(critical.job).unwrap();
    assert!(engine.wait_quiet(std::time::Duration::from_secs(60)));
    assert!(engine.status().pool_kept > 0, "kept for its Critical requests");
    std::fs::remove_dir_all(&dir).unwrap();
}
