//! WindowPoSt and WinningPoSt at 2 KiB through the engine, verified by
//! filecoin-proofs-api.

use crate::common::*;
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
    // filecoin-proofs' own prover on the same request (what the benchmark
    // compares with) makes a proof of the same shape that verifies too.
    let theirs = pinprove_filecoin::reference::prove(&req).unwrap();
    assert_eq!(theirs.len(), 192);
    assert!(sector.verify_winning_post(randomness, &theirs).unwrap());
    // Another randomness: the same proof does not verify.
    let other = sector.randomness();
    assert!(!sector.verify_winning_post(other, &proved.proof).unwrap());
    assert_idle(prover.engine(), "winning");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn window_post_partitions_prove_one_by_one_and_merge_into_a_proof_that_verifies() {
    let dir = temp_dir("window");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 7, 1000, 2).unwrap();
    let prover = prover(8 << 30);
    let randomness = sector.randomness();
    // Three sectors: two partitions of two (the 2 KiB partition size).
    let sectors = [3, 7, 11];
    let requests = sector.window_post_requests(&sectors, randomness).unwrap();
    assert_eq!(requests.len(), 2);
    // Curio proves partition by partition; the merged proof is their bytes
    // in partition order.
    let mut merged = Vec::new();
    for req in &requests {
        let proved = prover.prove(req).unwrap();
        assert_eq!(proved.proof.len(), 192);
        merged.extend_from_slice(&proved.proof);
    }
    assert!(
        sector.verify_window_post(&sectors, randomness, &merged).unwrap(),
        "filecoin-proofs-api accepts it"
    );
    // Partitions out of order do not verify.
    let swapped = [&merged[192..], &merged[..192]].concat();
    assert!(!sector.verify_window_post(&sectors, randomness, &swapped).unwrap());
    // A single partition of the whole set verifies alone.
    let one = sector.window_post_requests(&[5, 9], randomness).unwrap();
    assert_eq!(one.len(), 1);
    let proved = prover.prove(&one[0]).unwrap();
    assert!(sector.verify_window_post(&[5, 9], randomness, &proved.proof).unwrap());
    assert_idle(prover.engine(), "window");
    std::fs::remove_dir_all(&dir).unwrap();
}
