//! Every partition proof of a SnapDeals update, opened at the real
//! challenges, with new labels that satisfy the encoding the circuit checks
//! as it synthesizes (`leaf_r_new = leaf_r_old + leaf_d_new · rho`).

use blstrs::Scalar as Fr;
use filecoin_hashers::Domain;
use filecoin_proofs::SectorUpdateConfig;
use generic_array::typenum::U2;
use rand::RngCore;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_update::constants::{TreeDDomain, TreeDHasher, TreeRDomain, TreeRHasher};
use storage_proofs_update::vanilla::{phi, rho};
use storage_proofs_update::{ChallengeProof, Challenges, PartitionProof, PublicParams};

use super::{MINER, merkle_proof, randoms};
use crate::error::bad;
use crate::{FilecoinError, ProofKind, ProofRequest, kind};

const KIND: ProofKind = ProofKind::SnapDeals;

pub(super) fn request(sector_size: u64, rng: &mut impl RngCore) -> Result<ProofRequest, FilecoinError> {
    let number = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_size)
        .ok_or(FilecoinError::SectorSize(sector_size))? as u64;
    with_tree!(sector_size, partitions, number, sector_size, rng)
}

fn partitions<Tree>(number: u64, sector_size: u64, rng: &mut impl RngCore) -> Result<ProofRequest, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    let rup = kind::update_proof(number)?;
    let config = SectorUpdateConfig::from_porep_config(&rup.as_v1_config());
    let pp = PublicParams::from_sector_size(sector_size);
    let nodes = pp.sector_nodes;
    let (comm_r_old, comm_r_new) = (TreeRDomain::random(rng), TreeRDomain::random(rng));
    let comm_d_new = TreeDDomain::random(rng);
    let (root_r_old, root_r_new) = (TreeRDomain::random(rng), TreeRDomain::random(rng));
    let phi = phi(&comm_d_new, &comm_r_old);
    let shift = pp.challenge_bit_len - config.h;
    let comm_c = TreeRDomain::random(rng);
    let mut vanilla = Vec::with_capacity(pp.partition_count);
    for k in 0..pp.partition_count {
        // TreeD's top rows, above the partition's apex, are the same for
        // every challenge of the partition (the circuit asserts it).
        let shared: Vec<TreeDDomain> = randoms(pp.partition_bit_len, rng);
        let challenge_proofs = Challenges::new(nodes, comm_r_new, k)
            .map(|c| {
                let c = c as usize;
                let leaf_r_old = TreeRDomain::random(rng);
                let leaf_d_new = TreeDDomain::random(rng);
                let leaf_r_new: TreeRDomain =
                    (Fr::from(leaf_r_old) + Fr::from(leaf_d_new) * rho(&phi, (c >> shift) as u32)).into();
                let path_d = (0..pp.challenge_bit_len)
                    .map(|level| {
                        let sibling = match level.checked_sub(pp.challenge_bit_len - pp.partition_bit_len) {
                            Some(top) => shared[top],
                            None => TreeDDomain::random(rng),
                        };
                        (vec![sibling], (c >> level) & 1)
                    })
                    .collect();
                ChallengeProof::<Tree> {
                    proof_r_old: merkle_proof(nodes, c, leaf_r_old, root_r_old, rng),
                    proof_d_new: MerkleProof::<TreeDHasher, U2>::from_parts(leaf_d_new, comm_d_new, path_d),
                    proof_r_new: merkle_proof(nodes, c, leaf_r_new, root_r_new, rng),
                }
            })
            .collect();
        let proof = PartitionProof::<Tree> {
            comm_c,
            apex_leafs: randoms(pp.apex_leaf_count, rng),
            challenge_proofs,
        };
        vanilla.push(bincode::serialize(&proof).map_err(|e| bad(KIND, format!("encoding a partition proof: {e}")))?);
    }
    Ok(ProofRequest {
        sector_size,
        registered_proof: number,
        vanilla_proofs: vanilla,
        sector_number: 1,
        miner_id: MINER,
        comm_r_old: comm_r_old.into_bytes(),
        comm_r_new: comm_r_new.into_bytes(),
        comm_d_new: comm_d_new.into_bytes(),
        ..ProofRequest::new(KIND)
    })
}
