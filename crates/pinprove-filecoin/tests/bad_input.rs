//! Corrupted inputs of every kind fail their job with a message saying
//! what is wrong; the engine gives back everything and keeps serving.

mod common;

use common::*;
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinError, ProofRequest};

/// `req` is refused as the caller's fault, with a message saying `says`.
fn refused(prover: &pinprove_filecoin::FilecoinProver, what: &str, req: &ProofRequest, says: &str) {
    let err: FilecoinError = prover.prove(req).expect_err(what);
    let text = pinprove_mem::ErrorChain(&err).to_string();
    assert!(err.is_bad_input(), "{what}: not the request's fault? {text}");
    assert!(text.contains(says), "{what}: {text:?} does not say {says:?}");
}

#[test]
fn corrupted_inputs_of_every_kind_are_clear_failures_and_the_engine_keeps_serving() {
    let dir = temp_dir("bad");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 7, 1000, 3).unwrap();
    let prover = prover(8 << 30);

    // PoRep.
    let good = sector.porep_request();
    let mut r = good.clone();
    r.vanilla_proof.truncate(r.vanilla_proof.len() / 2);
    refused(&prover, "porep: truncated C1", &r, "the C1 output does not decode");
    let mut r = good.clone();
    r.sector_number = 8;
    refused(
        &prover,
        "porep: another sector number",
        &r,
        "the wrapper names sector 7, the request sector 8",
    );
    let mut r = good.clone();
    r.miner_id = 1001;
    refused(&prover, "porep: another miner", &r, "is not of sector 7 of this miner");
    let mut r = good.clone();
    r.registered_proof = 8;
    refused(
        &prover,
        "porep: a 32 GiB seal proof",
        &r,
        "the request says StackedDrg32GiBV1_1, but the C1 output is of a StackedDrg2KiBV1_1 sector",
    );
    // A C1 output that claims non-interactive PoRep over an interactive
    // one's vanilla proofs (1 partition, not 13).
    let c1 = String::from_utf8(sector.c1.clone()).unwrap();
    assert!(
        c1.contains("\"StackedDrg2KiBV1_1\""),
        "the C1 output names its seal proof"
    );
    let mut r = good.clone();
    r.vanilla_proof = c1
        .replace(
            "\"StackedDrg2KiBV1_1\"",
            "\"StackedDrg2KiBV1_2_Feat_NonInteractivePoRep\"",
        )
        .into_bytes();
    r.registered_proof = 15;
    refused(
        &prover,
        "porep: non-interactive",
        &r,
        "1 partitions of vanilla proofs, a StackedDrg2KiBV1_2_Feat_NonInteractivePoRep proof has 13",
    );
    let mut r = good.clone();
    r.sector_size = 8 << 20;
    refused(
        &prover,
        "porep: another sector size",
        &r,
        "the request's sector size is 8388608 bytes",
    );

    // WindowPoSt.
    let randomness = sector.randomness();
    let good = sector.window_post_requests(&[7, 9], randomness).unwrap().remove(0);
    let mut r = good.clone();
    let mid = r.vanilla_proofs[0].len() / 2;
    r.vanilla_proofs[0][mid] ^= 0xff;
    refused(&prover, "wpost: a flipped byte", &r, "the vanilla proofs do not verify");
    let mut r = good.clone();
    r.randomness = sector.randomness().to_vec();
    refused(
        &prover,
        "wpost: other randomness",
        &r,
        "the vanilla proofs do not verify",
    );
    let mut r = good.clone();
    r.vanilla_proofs.clear();
    refused(&prover, "wpost: no vanilla proofs", &r, "no vanilla proofs");
    let mut r = good.clone();
    r.vanilla_proofs.push(r.vanilla_proofs[0].clone());
    r.vanilla_proofs.push(r.vanilla_proofs[0].clone());
    refused(
        &prover,
        "wpost: more sectors than a partition holds",
        &r,
        "4 sectors in one partition; a StackedDrgWindow2KiBV1_2 partition holds at most 2",
    );
    let mut r = good.clone();
    r.registered_proof = 13;
    refused(
        &prover,
        "wpost: a 32 GiB window proof",
        &r,
        "StackedDrgWindow32GiBV1_2 proves 34359738368-byte sectors",
    );

    // WinningPoSt.
    let randomness = sector.randomness();
    let good = sector.winning_post_request(randomness).unwrap();
    let mut r = good.clone();
    r.vanilla_proofs.push(r.vanilla_proofs[0].clone());
    refused(
        &prover,
        "winning: two vanilla proofs",
        &r,
        "2 vanilla proofs; a WinningPoSt proves 1 sector",
    );
    let mut r = good.clone();
    r.randomness = sector.randomness().to_vec();
    refused(
        &prover,
        "winning: other randomness",
        &r,
        "the vanilla proof does not verify",
    );
    let mut r = good.clone();
    r.vanilla_proofs[0].truncate(100);
    refused(&prover, "winning: truncated", &r, "vanilla proof 0 does not decode");

    // SnapDeals.
    let good = sector.snap_update(&dir.join("update")).unwrap();
    let mut r = good.clone();
    r.comm_r_new = sector.random_bytes().to_vec();
    refused(
        &prover,
        "snap: another comm_r_new",
        &r,
        "the partition proofs do not verify against comm_r_old, comm_r_new and comm_d_new",
    );
    let mut r = good.clone();
    r.comm_d_new.pop();
    refused(
        &prover,
        "snap: a short comm_d_new",
        &r,
        "comm_d_new is 31 bytes, not 32",
    );
    let mut r = good.clone();
    r.vanilla_proofs.pop();
    refused(
        &prover,
        "snap: a partition missing",
        &r,
        "0 partition proofs; a StackedDrg2KiBV1 update has 1",
    );
    let mut r = good.clone();
    r.registered_proof = 5;
    refused(
        &prover,
        "snap: no such update proof",
        &r,
        "there is no update proof number 5",
    );

    // Parameters a test size does not make.
    let err = prover.register("winning-32g").unwrap_err();
    assert!(matches!(err, FilecoinError::MissingParameters { .. }), "{err}");
    assert!(
        err.to_string().contains("the parameters of winning-32g are missing"),
        "{err}"
    );

    assert_idle(prover.engine(), "after the failures");
    // Still serving.
    let proved = prover.prove(&good).unwrap();
    assert!(SampleSector::verify_update(&good, &proved.proof).unwrap());
    assert_idle(prover.engine(), "after a good proof");
    std::fs::remove_dir_all(&dir).unwrap();
}
