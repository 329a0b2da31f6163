//! Corrupted inputs of every kind fail their job with a message saying
//! what is wrong; the engine gives back everything and keeps serving.

use crate::common::*;
use filecoin_hashers::poseidon::PoseidonDomain;
use filecoin_proofs::{FallbackPoStSectorProof, SectorShape2KiB};
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinError, FilecoinOptions, FilecoinProver, ParamCache, ProofRequest};
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};

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
        "4 vanilla proofs; a StackedDrgWindow2KiBV1_2 partition holds at most 2",
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
        "2 vanilla proofs; a StackedDrgWinning2KiBV1 proof proves at most 1",
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

/// A WinningPoSt request whose one sector proof was rebuilt by `change`,
/// which gets every inclusion proof's path (siblings and index per level).
fn with_paths(good: &ProofRequest, change: impl Fn(usize, &mut Vec<(Vec<PoseidonDomain>, usize)>)) -> ProofRequest {
    let mut p: FallbackPoStSectorProof<SectorShape2KiB> = bincode::deserialize(&good.vanilla_proofs[0]).unwrap();
    let sector = &mut p.vanilla_proof.sectors[0];
    sector.inclusion_proofs = sector
        .inclusion_proofs
        .iter()
        .enumerate()
        .map(|(i, proof)| {
            let mut path = proof.path();
            change(i, &mut path);
            MerkleProof::from_parts(proof.leaf(), proof.root(), path)
        })
        .collect();
    let mut r = good.clone();
    r.vanilla_proofs[0] = bincode::serialize(&p).unwrap();
    r
}

#[test]
fn hostile_shapes_and_sizes_are_refused_before_anything_is_built_from_them() {
    let dir = temp_dir("hostile");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 7, 1000, 5).unwrap();
    let prover = prover(8 << 30);

    // WindowPoSt: a partition index no deadline has (which once made the
    // daemon allocate 343 GB for placeholders, and abort).
    let randomness = sector.randomness();
    let window = sector.window_post_requests(&[7], randomness).unwrap().remove(0);
    let mut r = window.clone();
    r.partition_index = u32::MAX;
    refused(
        &prover,
        "wpost: partition u32::MAX",
        &r,
        "partition index 4294967295 is out of range",
    );
    let mut r = window.clone();
    r.partition_index = pinprove_filecoin::limits::MAX_WINDOW_PARTITIONS;
    refused(&prover, "wpost: partition 3000", &r, "fewer than 3000 partitions");
    // An entry longer than a sector proof of this registered proof.
    let mut r = window.clone();
    r.vanilla_proofs[0].resize(645_000, 0);
    refused(
        &prover,
        "wpost: a 645 KB sector proof",
        &r,
        "vanilla proof 0 is 645000 bytes; one of this registered proof is",
    );

    // WinningPoSt: sector proofs of the right encoding but not the
    // registered proof's shape, refused before they are padded (the one
    // sector is copied once per challenge).
    let randomness = sector.randomness();
    let good = sector.winning_post_request(randomness).unwrap();
    let r = with_paths(&good, |_, path| {
        path.pop();
    });
    refused(&prover, "winning: a level short", &r, "has 1 levels, not 2");
    // As many bytes as a real proof, one sibling moved a level down.
    let r = with_paths(&good, |i, path| {
        if i == 3 {
            let moved = path[1].0.pop().unwrap();
            path[0].0.push(moved);
        }
    });
    refused(
        &prover,
        "winning: eight siblings",
        &r,
        "inclusion proof 3, level 0: 8 siblings at index",
    );
    // Randomness that challenges the same leaf first and others after:
    // every one of the 66 inclusion proofs is checked, not the first alone.
    let rpp = sector.winning_post_proof().unwrap();
    let challenges = |r: &[u8; 32]| {
        let id = filecoin_proofs_api::SectorId::from(7);
        let prover_id = pinprove_filecoin::kind::prover_id(1000);
        filecoin_proofs_api::post::generate_fallback_sector_challenges(rpp, r, &[id], prover_id).unwrap()[&id].clone()
    };
    let ours = challenges(&randomness);
    let other = (0..10_000)
        .map(|_| sector.randomness())
        .find(|r| {
            let theirs = challenges(r);
            theirs[0] == ours[0] && theirs != ours
        })
        .expect("one in 64 agrees on the first challenge");
    let mut r = good.clone();
    r.randomness = other.to_vec();
    refused(
        &prover,
        "winning: the first challenge alone agrees",
        &r,
        "the vanilla proof does not verify",
    );
    let mut p: FallbackPoStSectorProof<SectorShape2KiB> = bincode::deserialize(&good.vanilla_proofs[0]).unwrap();
    p.vanilla_proof.sectors[0].inclusion_proofs.truncate(10);
    let mut r = good.clone();
    r.vanilla_proofs[0] = bincode::serialize(&p).unwrap();
    refused(
        &prover,
        "winning: 10 challenges",
        &r,
        "10 inclusion proofs, not one per challenge (66)",
    );

    // PoRep: a C1 output larger than one of its sector size can be, JSON
    // that would grow eightfold when decoded, and vanilla proofs that do
    // not verify.
    let porep = sector.porep_request();
    let mut r = porep.clone();
    r.vanilla_proof = vec![b' '; 2_000_000];
    refused(
        &prover,
        "porep: 2 MB for 2 KiB",
        &r,
        "the C1 output is 2000000 bytes; one of a StackedDrg2KiBV1_1 sector is at most",
    );
    let mut bomb = b"[".to_vec();
    for _ in 0..200_000 {
        bomb.extend_from_slice(b"[],");
    }
    bomb.extend_from_slice(b"[]]");
    let mut r = porep.clone();
    r.vanilla_proof = bomb;
    refused(&prover, "porep: nested empty arrays", &r, "arrays and objects in");
    let mut r = porep.clone();
    r.vanilla_proof = "[".repeat(100).into_bytes();
    refused(&prover, "porep: deep nesting", &r, "nests 100 levels deep");
    let mut c1: serde_json::Value = serde_json::from_slice(&sector.c1).unwrap();
    let seed = &mut c1["seed"][0];
    *seed = serde_json::json!((seed.as_u64().unwrap() + 1) % 256);
    let mut r = porep.clone();
    r.vanilla_proof = serde_json::to_vec(&c1).unwrap();
    refused(
        &prover,
        "porep: another seed",
        &r,
        "the C1 output's vanilla proofs do not verify",
    );

    assert_idle(prover.engine(), "after the refusals");
    let proved = prover.prove(&good).unwrap();
    assert!(sector.verify_winning_post(randomness, &proved.proof).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parameters_are_made_only_when_generation_is_on_and_never_through_a_link() {
    use std::os::unix::fs::symlink;
    let dir = temp_dir("params-off");
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let engine = prover(1 << 30).engine().clone();
    let off = FilecoinProver::new(
        engine.clone(),
        ParamCache::new(&cache).with_generation(false),
        FilecoinOptions::default(),
    );
    let err = off.register("winning-2k").unwrap_err();
    assert!(matches!(err, FilecoinError::MissingParameters { .. }), "{err}");
    assert!(err.to_string().contains("filecoin.generate_parameters"), "{err}");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0, "nothing was made");

    // A link planted where the lock file goes is not followed: the file it
    // points at is neither created nor truncated.
    let FilecoinError::MissingParameters { path, .. } = err else {
        unreachable!()
    };
    let victim = dir.join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    symlink(&victim, path.with_extension("params.lock")).unwrap();
    let on = FilecoinProver::new(engine, ParamCache::new(&cache), FilecoinOptions::default());
    let err = on.register("winning-2k").unwrap_err();
    assert!(
        pinprove_mem::ErrorChain(&err).to_string().contains("winning-2k"),
        "{err}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_production_parameter_file_that_is_not_filecoins_is_refused() {
    let dir = temp_dir("params-tampered");
    let prover = FilecoinProver::new(
        prover(1 << 30).engine().clone(),
        ParamCache::new(&dir),
        FilecoinOptions::default(),
    );
    let FilecoinError::MissingParameters { path, .. } = prover.register("winning-32g").unwrap_err() else {
        panic!("a missing file first");
    };
    // A file of the right name whose bytes are not the published ones.
    std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
    let err = prover.register("winning-32g").unwrap_err();
    let text = pinprove_mem::ErrorChain(&err).to_string();
    assert!(
        text.contains("does not match the digest storage-proofs carries"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
