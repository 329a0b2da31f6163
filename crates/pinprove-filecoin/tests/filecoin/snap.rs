//! SnapDeals at 2 KiB through the engine, verified by filecoin-proofs-api.

use crate::common::*;
use pinprove_filecoin::sample::SampleSector;

#[test]
fn snap_deals_update_proves_and_verifies() {
    let dir = temp_dir("snap");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 9, 1000, 4).unwrap();
    let mut req = sector.snap_update(&dir.join("update")).unwrap();
    // Proof-share requests leave the sector size at 0.
    req.sector_size = 0;
    let prover = prover(16 << 30);
    let proved = prover.prove(&req).unwrap();
    assert_eq!(proved.proof.len(), 192, "one partition at 2 KiB");
    assert!(
        SampleSector::verify_update(&req, &proved.proof).unwrap(),
        "filecoin-proofs-api accepts it"
    );
    assert_idle(prover.engine(), "snap");
    std::fs::remove_dir_all(&dir).unwrap();
}
