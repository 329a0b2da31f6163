//! PoRep C2 at 2 KiB through the engine, verified by filecoin-proofs-api.

mod common;

use common::*;
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
    // The bare C1 output (as filecoin-ffi writes it) works as well.
    let mut bare = req.clone();
    bare.vanilla_proof = sector.c1.clone();
    let again = prover.prove(&bare).unwrap();
    assert!(sector.verify_seal(&again.proof).unwrap());
    assert_idle(prover.engine(), "porep");
    std::fs::remove_dir_all(&dir).unwrap();
}
