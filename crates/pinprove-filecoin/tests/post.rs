//! WindowPoSt and WinningPoSt at 2 KiB through the engine, verified by
//! filecoin-proofs-api.

mod common;

use common::*;
use pinprove_filecoin::sample::SampleSector;

#[test]
fn winning_post_proves_and_verifies() {
    let dir = temp_dir("winning");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 7, 1000, 1).unwrap();
    let prover = prover(8 << 30);
    let randomness = sector.randomness();
    let req = sector.winning_post_request(randomness).unwrap();
    let proved = prover.prove(&req).unwrap();
    assert_eq!(proved.proof.len(), 192);
    assert!(proved.verification.is_some());
    assert!(
        sector.verify_winning_post(randomness, &proved.proof).unwrap(),
        "filecoin-proofs-api accepts it"
    );
    // Another randomness: the same proof does not verify.
    let other = sector.randomness();
    assert!(!sector.verify_winning_post(other, &proved.proof).unwrap());
    assert_idle(prover.engine(), "winning");
    std::fs::remove_dir_all(&dir).unwrap();
}
