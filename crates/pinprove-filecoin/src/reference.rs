//! filecoin-proofs' own prover (through filecoin-proofs-api, CPU) on a
//! request: what `pinprove-bench filecoin` measures pinprove against. It
//! loads parameters from the same cache (and keeps them in memory after
//! its first proof of a circuit).

use filecoin_proofs_api::update::generate_empty_sector_update_proof_with_vanilla;
use filecoin_proofs_api::{PartitionProofBytes, SectorId};

use crate::error::bad;
use crate::{FilecoinError, ProofKind, ProofRequest, kind, porep};

fn failed(kind: ProofKind, e: anyhow::Error) -> FilecoinError {
    FilecoinError::Failed {
        kind,
        why: format!("filecoin-proofs: {e:#}"),
    }
}

fn bytes32(kind: ProofKind, v: &[u8], what: &str) -> Result<[u8; 32], FilecoinError> {
    v.try_into()
        .map_err(|_| bad(kind, format!("{what} is {} bytes, not 32", v.len())))
}

/// The proof filecoin-proofs makes for `req` (its bytes as the API returns
/// them: the same layout pinprove returns).
pub fn prove(req: &ProofRequest) -> Result<Vec<u8>, FilecoinError> {
    let k = req.kind;
    let prover_id = kind::prover_id(req.miner_id);
    match k {
        ProofKind::PoRep => {
            let (c1, _) = porep::decode(&req.vanilla_proof)?;
            let out = filecoin_proofs_api::seal::seal_commit_phase2(c1, prover_id, SectorId::from(req.sector_number))
                .map_err(|e| failed(k, e))?;
            Ok(out.proof)
        }
        ProofKind::SnapDeals => {
            let rup = kind::update_proof(req.registered_proof)?;
            let vanilla = req.vanilla_proofs.iter().cloned().map(PartitionProofBytes).collect();
            let proof = generate_empty_sector_update_proof_with_vanilla(
                rup,
                vanilla,
                bytes32(k, &req.comm_r_old, "comm_r_old")?,
                bytes32(k, &req.comm_r_new, "comm_r_new")?,
                bytes32(k, &req.comm_d_new, "comm_d_new")?,
            )
            .map_err(|e| failed(k, e))?;
            Ok(proof.0)
        }
        ProofKind::WindowPoSt => {
            let rpp = kind::post_proof(req.registered_proof)?;
            let randomness = bytes32(k, &req.randomness, "randomness")?;
            let p = filecoin_proofs_api::post::generate_single_window_post_with_vanilla(
                rpp,
                &randomness,
                prover_id,
                &req.vanilla_proofs,
                req.partition_index as usize,
            )
            .map_err(|e| failed(k, e))?;
            Ok(p.0)
        }
        ProofKind::WinningPoSt => {
            let rpp = kind::post_proof(req.registered_proof)?;
            let randomness = bytes32(k, &req.randomness, "randomness")?;
            let proofs = filecoin_proofs_api::post::generate_winning_post_with_vanilla(
                rpp,
                &randomness,
                prover_id,
                &req.vanilla_proofs,
            )
            .map_err(|e| failed(k, e))?;
            Ok(proofs.into_iter().flat_map(|(_, p)| p).collect())
        }
    }
}
