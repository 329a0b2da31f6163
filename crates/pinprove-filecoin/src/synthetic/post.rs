//! A full WindowPoSt partition or a WinningPoSt: one sector proof per
//! sector, opened at the sectors' real challenges.

use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::FallbackPoStSectorProof;
use filecoin_proofs_api::SectorId;
use rand::RngCore;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{self, SectorProof};

use super::{MINER, field_bytes, merkle_proof};
use crate::error::bad;
use crate::{FilecoinError, ProofKind, ProofRequest, kind};

pub(super) fn request(k: ProofKind, sector_size: u64, rng: &mut impl RngCore) -> Result<ProofRequest, FilecoinError> {
    let size = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_size)
        .ok_or(FilecoinError::SectorSize(sector_size))? as u64;
    // Winning 0-4, Window (V1_2) 10-14.
    let number = if k == ProofKind::WinningPoSt { size } else { 10 + size };
    let rpp = kind::post_proof(number)?;
    let randomness = field_bytes(rng);
    let cfg = rpp.as_v1_config();
    // A full partition; sector numbers from 1, ascending.
    let ids: Vec<SectorId> = (1..=cfg.sector_count as u64).map(SectorId::from).collect();
    let challenges =
        filecoin_proofs_api::post::generate_fallback_sector_challenges(rpp, &randomness, &ids, kind::prover_id(MINER))
            .map_err(|e| bad(k, format!("challenges: {e:#}")))?;
    let nodes = (sector_size / 32) as usize;
    let vanilla = ids
        .iter()
        .map(|id| with_tree!(sector_size, sector_proof, k, *id, &challenges[id], nodes, rng))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProofRequest {
        sector_size,
        registered_proof: number,
        vanilla_proofs: vanilla,
        miner_id: MINER,
        randomness: randomness.to_vec(),
        ..ProofRequest::new(k)
    })
}

/// One sector's vanilla proof, bincode as filecoin-proofs-api writes it.
fn sector_proof<Tree>(
    k: ProofKind,
    id: SectorId,
    challenges: &[u64],
    nodes: usize,
    rng: &mut impl RngCore,
) -> Result<Vec<u8>, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    type D = <PoseidonHasher as Hasher>::Domain;
    let comm_c = D::random(rng);
    let comm_r_last = D::random(rng);
    let comm_r = <PoseidonHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
    let inclusion_proofs = challenges
        .iter()
        .map(|&c| {
            merkle_proof::<PoseidonHasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(
                nodes,
                c as usize,
                D::random(rng),
                comm_r_last,
                rng,
            )
        })
        .collect();
    let proof = FallbackPoStSectorProof::<Tree> {
        sector_id: id,
        comm_r,
        vanilla_proof: fallback::Proof {
            sectors: vec![SectorProof {
                inclusion_proofs,
                comm_c,
                comm_r_last,
            }],
        },
    };
    bincode::serialize(&proof).map_err(|e| bad(k, format!("encoding a synthetic sector proof: {e}")))
}
