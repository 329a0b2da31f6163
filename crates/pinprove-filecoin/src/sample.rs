//! Sample sectors: a random sector of a test size sealed with
//! filecoin-proofs-api, and everything a request of each kind needs from
//! it — its C1 output, PoSt vanilla proofs, a SnapDeals update — made in
//! seconds, without parameters. For tests, the demo and benchmarks; the
//! proofs they lead to verify (against parameters made by the same
//! cache).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use base64::Engine as _;
use filecoin_proofs_api::seal::{
    SealPreCommitPhase2Output, add_piece, clear_cache, generate_piece_commitment, generate_synth_proofs,
    seal_commit_phase1, seal_pre_commit_phase1, seal_pre_commit_phase2,
};
use filecoin_proofs_api::update::{empty_sector_update_encode_into, generate_partition_proofs};
use filecoin_proofs_api::{
    ApiFeature, PieceInfo, PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{ProofKind, ProofRequest, kind};

/// A sealed sample sector and what proving needs of it.
pub struct SampleSector {
    /// Where its files are (the caller's directory).
    pub dir: PathBuf,
    /// The seal proof.
    pub seal_proof: RegisteredSealProof,
    /// Bytes.
    pub sector_size: u64,
    /// Its number.
    pub sector_number: u64,
    /// The miner that sealed it.
    pub miner_id: u64,
    /// The seal ticket.
    pub ticket: [u8; 32],
    /// The interactive seed.
    pub seed: [u8; 32],
    /// Its replica commitment.
    pub comm_r: [u8; 32],
    /// Its data commitment.
    pub comm_d: [u8; 32],
    /// Its C1 output: filecoin-ffi's serde JSON.
    pub c1: Vec<u8>,
    cache: PathBuf,
    sealed: PathBuf,
    rng: ChaCha8Rng,
}

/// 32 random bytes that are a canonical field element (the top two bits
/// of the last byte cleared, as Lotus does to tickets and randomness).
fn field_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

/// The test seal proof (V1_1) of a sector size.
fn seal_proof_of(sector_size: u64) -> Result<RegisteredSealProof> {
    let n = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_size)
        .context("not a Filecoin sector size")?;
    Ok(kind::seal_proof(5 + n as u64)?)
}

/// Writes `bytes` of data into a staged sector file; returns its piece.
fn stage(rsp: RegisteredSealProof, data: &[u8], piece: &Path, staged: &Path) -> Result<PieceInfo> {
    std::fs::write(piece, data)?;
    let size = UnpaddedBytesAmount(data.len() as u64);
    let info = generate_piece_commitment(rsp, File::open(piece)?, size)?;
    let mut target = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(staged)?;
    let (added, _) = add_piece(rsp, File::open(piece)?, &mut target, size, &[])?;
    ensure!(
        added.commitment == info.commitment,
        "the piece commitment changed while staging"
    );
    Ok(info)
}

impl SampleSector {
    /// Seals a random sector of `sector_size` bytes (a test size; 2 KiB
    /// takes about a second) under `dir`, numbered `sector_number` by miner
    /// `miner_id`; `seed` makes everything reproducible.
    pub fn seal(dir: &Path, sector_size: u64, sector_number: u64, miner_id: u64, seed: u64) -> Result<SampleSector> {
        Self::seal_as(dir, seal_proof_of(sector_size)?, sector_number, miner_id, seed)
    }

    /// [`seal`](Self::seal) with the seal proof `rsp` (of a test size), for
    /// the synthetic-PoRep and non-interactive variants.
    pub fn seal_as(
        dir: &Path,
        rsp: RegisteredSealProof,
        sector_number: u64,
        miner_id: u64,
        seed: u64,
    ) -> Result<SampleSector> {
        let sector_size = u64::from(rsp.sector_size());
        ensure!(sector_size < 32 << 30, "sample sectors are of test sizes");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        std::fs::create_dir_all(dir)?;
        let cache = dir.join("cache");
        std::fs::create_dir_all(&cache)?;
        let (piece, staged, sealed) = (dir.join("piece"), dir.join("staged"), dir.join("sealed"));
        let unpadded = sector_size / 128 * 127;
        let mut data = vec![0u8; unpadded as usize];
        rng.fill_bytes(&mut data);
        let info = stage(rsp, &data, &piece, &staged)?;
        File::create(&sealed)?;
        let prover_id = kind::prover_id(miner_id);
        let sector_id = SectorId::from(sector_number);
        let ticket = field_bytes(&mut rng);
        let p1 = seal_pre_commit_phase1(
            rsp,
            &cache,
            &staged,
            &sealed,
            prover_id,
            sector_id,
            ticket,
            std::slice::from_ref(&info),
        )
        .context("sealing: pre-commit phase 1")?;
        let p2: SealPreCommitPhase2Output =
            seal_pre_commit_phase2(p1, &cache, &sealed).context("sealing: pre-commit phase 2")?;
        let mut seed_bytes = field_bytes(&mut rng);
        seed_bytes[0] |= 1; // never zero
        let (comm_r, comm_d) = (p2.comm_r, p2.comm_d);
        if rsp.as_v1_config().api_features.contains(&ApiFeature::SyntheticPoRep) {
            // Synthetic PoRep proves challenges drawn ahead, from proofs
            // made once here; commit phase 1 picks its share of them.
            generate_synth_proofs(
                &cache,
                &sealed,
                prover_id,
                sector_id,
                ticket,
                p2.clone(),
                std::slice::from_ref(&info),
            )
            .context("sealing: synthetic proofs")?;
        }
        let c1 = seal_commit_phase1(&cache, &sealed, prover_id, sector_id, ticket, seed_bytes, p2, &[info])
            .context("sealing: commit phase 1")?;
        // Layers and other intermediates are not needed for PoSt or updates.
        clear_cache(&cache)?;
        Ok(SampleSector {
            dir: dir.to_path_buf(),
            seal_proof: rsp,
            sector_size,
            sector_number,
            miner_id,
            ticket,
            seed: seed_bytes,
            comm_r,
            comm_d,
            c1: serde_json::to_vec(&c1)?,
            cache,
            sealed,
            rng,
        })
    }

    /// The PoRep C2 request Curio sends: the C1 output in its wrapper.
    pub fn porep_request(&self) -> ProofRequest {
        let wrapped = serde_json::json!({
            "SectorNum": self.sector_number,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&self.c1),
            "SectorSize": self.sector_size,
        });
        ProofRequest {
            sector_size: self.sector_size,
            registered_proof: kind::seal_number(self.seal_proof),
            vanilla_proof: wrapped.to_string().into_bytes(),
            sector_number: self.sector_number,
            miner_id: self.miner_id,
            ..ProofRequest::new(ProofKind::PoRep)
        }
    }

    /// Fresh PoSt randomness (canonical, as the chain's is after Lotus
    /// clears its top bits).
    pub fn randomness(&mut self) -> [u8; 32] {
        field_bytes(&mut self.rng)
    }

    /// The WindowPoSt proof (V1_2, the chain's "V1_1") of this size.
    pub fn window_post_proof(&self) -> Result<RegisteredPoStProof> {
        let n = kind::SECTOR_SIZES
            .iter()
            .position(|&b| b == self.sector_size)
            .expect("checked when sealed");
        Ok(kind::post_proof(10 + n as u64)?)
    }

    /// The WinningPoSt proof of this size.
    pub fn winning_post_proof(&self) -> Result<RegisteredPoStProof> {
        let n = kind::SECTOR_SIZES
            .iter()
            .position(|&b| b == self.sector_size)
            .expect("checked when sealed");
        Ok(kind::post_proof(n as u64)?)
    }

    fn replica(&self, rpp: RegisteredPoStProof) -> PrivateReplicaInfo {
        PrivateReplicaInfo::new(rpp, self.comm_r, self.cache.clone(), self.sealed.clone())
    }

    /// The WindowPoSt requests of a deadline in which this replica stands
    /// for every sector of `sectors` (ascending; one replica may stand for
    /// several: PoSt ties a sector to its comm_r only through the
    /// challenges): one request per partition, as Curio sends them.
    pub fn window_post_requests(&self, sectors: &[u64], randomness: [u8; 32]) -> Result<Vec<ProofRequest>> {
        let rpp = self.window_post_proof()?;
        let ids: Vec<SectorId> = sectors.iter().copied().map(SectorId::from).collect();
        let prover_id = kind::prover_id(self.miner_id);
        let challenges =
            filecoin_proofs_api::post::generate_fallback_sector_challenges(rpp, &randomness, &ids, prover_id)?;
        let replica = self.replica(rpp);
        let per_partition = rpp.sector_count();
        ids.chunks(per_partition)
            .enumerate()
            .map(|(p, chunk)| {
                let vanilla = chunk
                    .iter()
                    .map(|id| {
                        filecoin_proofs_api::post::generate_single_vanilla_proof(rpp, *id, &replica, &challenges[id])
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(ProofRequest {
                    sector_size: self.sector_size,
                    registered_proof: kind::post_number(rpp),
                    vanilla_proofs: vanilla,
                    miner_id: self.miner_id,
                    randomness: randomness.to_vec(),
                    partition_index: p as u32,
                    ..ProofRequest::new(ProofKind::WindowPoSt)
                })
            })
            .collect()
    }

    /// The WinningPoSt request for this sector.
    pub fn winning_post_request(&self, randomness: [u8; 32]) -> Result<ProofRequest> {
        let rpp = self.winning_post_proof()?;
        let id = SectorId::from(self.sector_number);
        let prover_id = kind::prover_id(self.miner_id);
        let challenges =
            filecoin_proofs_api::post::generate_fallback_sector_challenges(rpp, &randomness, &[id], prover_id)?;
        let vanilla =
            filecoin_proofs_api::post::generate_single_vanilla_proof(rpp, id, &self.replica(rpp), &challenges[&id])?;
        Ok(ProofRequest {
            sector_size: self.sector_size,
            registered_proof: kind::post_number(rpp),
            vanilla_proofs: vec![vanilla],
            miner_id: self.miner_id,
            randomness: randomness.to_vec(),
            ..ProofRequest::new(ProofKind::WinningPoSt)
        })
    }

    /// Updates the sector with new random data (a SnapDeals update, under
    /// `dir`); returns the request to prove it.
    pub fn snap_update(&mut self, dir: &Path) -> Result<ProofRequest> {
        let rup = update_proof_of(self.sector_size)?;
        std::fs::create_dir_all(dir)?;
        let new_cache = dir.join("cache");
        std::fs::create_dir_all(&new_cache)?;
        let (piece, staged, replica) = (dir.join("piece"), dir.join("staged"), dir.join("replica"));
        let mut data = vec![0u8; (self.sector_size / 128 * 127) as usize];
        self.rng.fill_bytes(&mut data);
        let info = stage(self.seal_proof, &data, &piece, &staged)?;
        // The encoder writes into a replica of the sector's size.
        let mut f = File::create(&replica)?;
        f.seek(SeekFrom::Start(self.sector_size - 1))?;
        f.write_all(&[0])?;
        drop(f);
        let enc =
            empty_sector_update_encode_into(rup, &replica, &new_cache, &self.sealed, &self.cache, &staged, &[info])
                .context("encoding the update")?;
        let vanilla = generate_partition_proofs(
            rup,
            self.comm_r,
            enc.comm_r_new,
            enc.comm_d_new,
            &self.sealed,
            &self.cache,
            &replica,
            &new_cache,
        )
        .context("the update's partition proofs")?;
        Ok(ProofRequest {
            sector_size: self.sector_size,
            registered_proof: kind::update_number(rup),
            vanilla_proofs: vanilla.into_iter().map(|p| p.0).collect(),
            sector_number: self.sector_number,
            miner_id: self.miner_id,
            comm_r_old: self.comm_r.to_vec(),
            comm_r_new: enc.comm_r_new.to_vec(),
            comm_d_new: enc.comm_d_new.to_vec(),
            ..ProofRequest::new(ProofKind::SnapDeals)
        })
    }

    /// Whether filecoin-proofs-api's `verify_seal` accepts `proof` for this
    /// sector (its parameter cache is `FIL_PROOFS_PARAMETER_CACHE`).
    pub fn verify_seal(&self, proof: &[u8]) -> Result<bool> {
        filecoin_proofs_api::seal::verify_seal(
            self.seal_proof,
            self.comm_r,
            self.comm_d,
            kind::prover_id(self.miner_id),
            SectorId::from(self.sector_number),
            self.ticket,
            self.seed,
            proof,
        )
    }

    /// Whether `verify_window_post` accepts `proof` (the partitions' proofs
    /// merged) for this replica standing for `sectors`.
    pub fn verify_window_post(&self, sectors: &[u64], randomness: [u8; 32], proof: &[u8]) -> Result<bool> {
        let rpp = self.window_post_proof()?;
        let replicas: BTreeMap<SectorId, PublicReplicaInfo> = sectors
            .iter()
            .map(|&s| (SectorId::from(s), PublicReplicaInfo::new(rpp, self.comm_r)))
            .collect();
        filecoin_proofs_api::post::verify_window_post(
            &randomness,
            &[(rpp, proof)],
            &replicas,
            kind::prover_id(self.miner_id),
        )
    }

    /// Whether `verify_winning_post` accepts `proof` for this sector.
    pub fn verify_winning_post(&self, randomness: [u8; 32], proof: &[u8]) -> Result<bool> {
        let rpp = self.winning_post_proof()?;
        let replicas = BTreeMap::from([(
            SectorId::from(self.sector_number),
            PublicReplicaInfo::new(rpp, self.comm_r),
        )]);
        filecoin_proofs_api::post::verify_winning_post(&randomness, proof, &replicas, kind::prover_id(self.miner_id))
    }

    /// Whether `verify_empty_sector_update_proof` accepts `proof` for the
    /// update `req` describes.
    pub fn verify_update(req: &ProofRequest, proof: &[u8]) -> Result<bool> {
        let comm = |v: &[u8]| -> Result<[u8; 32]> { Ok(v.try_into()?) };
        filecoin_proofs_api::update::verify_empty_sector_update_proof(
            kind::update_proof(req.registered_proof)?,
            proof,
            comm(&req.comm_r_old)?,
            comm(&req.comm_r_new)?,
            comm(&req.comm_d_new)?,
        )
    }

    /// A random 32-byte value (for corrupting inputs in tests).
    pub fn random_bytes(&mut self) -> [u8; 32] {
        self.rng.r#gen()
    }
}

fn update_proof_of(sector_size: u64) -> Result<RegisteredUpdateProof> {
    let n = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_size)
        .context("not a Filecoin sector size")?;
    Ok(kind::update_proof(n as u64)?)
}

/// Whether `engine` settles back at its idle values within `timeout`:
/// nothing queued or in flight, no pool buffer out beside the decoded
/// parameters (which live in pool buffers), and the budget holding nothing
/// beside the pool's buffers. For tests of what runs on top of an engine
/// (every byte a job held must come back); says what is still held.
pub fn check_idle(engine: &pinprove_engine::Engine, timeout: std::time::Duration) -> Result<(), String> {
    if !engine.wait_quiet(timeout) {
        return Err("the pipeline did not drain".into());
    }
    let status = engine.status();
    if !status.partitions.is_empty() {
        return Err(format!("partitions still in flight: {:?}", status.partitions));
    }
    let pool = engine.pool().stats();
    let srs: u64 = status.srs.iter().map(|s| s.bytes).sum();
    if pool.checked_out_bytes != srs {
        return Err(format!(
            "{} bytes of pool buffers out beside {srs} bytes of parameters",
            pool.checked_out_bytes
        ));
    }
    // Circuit recordings (pre-compiled mode) are paid for as long as the
    // engine keeps them.
    let recordings: u64 = status.synthesis.iter().map(|c| c.recording_bytes).sum();
    let used = engine.pool().budget().used();
    if used != pool.allocated_bytes + recordings {
        return Err(format!(
            "the budget holds {used} bytes, the pool's buffers {} and circuit recordings {recordings}",
            pool.allocated_bytes
        ));
    }
    Ok(())
}
