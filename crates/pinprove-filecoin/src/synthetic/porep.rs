//! A PoRep C1 output: every partition's challenge proofs, opened at the
//! challenges the seed and replica id give, with the real graph's parents.

use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{
    DefaultPieceHasher, SectorShape2KiB, SectorShape8MiB, SectorShape32GiB, SectorShape64GiB, SectorShape512MiB,
};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use generic_array::typenum::U2;
use rand::RngCore;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_porep::stacked::{
    self, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, TOTAL_PARENTS, Tau, generate_replica_id,
};

use super::{MINER, field_bytes, merkle_proof, randoms};
use crate::error::bad;
use crate::{FilecoinError, ProofKind, ProofRequest, kind};

const KIND: ProofKind = ProofKind::PoRep;
const SECTOR: u64 = 1;

type D = <PoseidonHasher as Hasher>::Domain;
type SealProof<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;
/// An inclusion proof in a tree of `Tree`'s shape.
type TreeProof<Tree> = MerkleProof<
    PoseidonHasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// What every partition shares.
struct Sector {
    cfg: filecoin_proofs::PoRepConfig,
    nodes: usize,
    comm_d: <Sha256Hasher as Hasher>::Domain,
    comm_c: D,
    comm_r_last: D,
    comm_r: D,
    replica_id: D,
    seed: [u8; 32],
    ticket: [u8; 32],
}

pub(super) fn request(sector_size: u64, rng: &mut impl RngCore) -> Result<ProofRequest, FilecoinError> {
    let size = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_size)
        .ok_or(FilecoinError::SectorSize(sector_size))? as u64;
    // StackedDrg…V1_1: 5-9.
    let rsp = kind::seal_proof(5 + size)?;
    let cfg = rsp.as_v1_config();
    let comm_d = <Sha256Hasher as Hasher>::Domain::random(rng);
    let (comm_c, comm_r_last) = (D::random(rng), D::random(rng));
    let ticket = field_bytes(rng);
    let mut seed = field_bytes(rng);
    seed[0] |= 1;
    let replica_id =
        generate_replica_id::<PoseidonHasher, _>(&kind::prover_id(MINER), SECTOR, &ticket, comm_d, &cfg.porep_id);
    let s = Sector {
        nodes: (sector_size / 32) as usize,
        comm_d,
        comm_c,
        comm_r_last,
        comm_r: <PoseidonHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last),
        replica_id,
        seed,
        ticket,
        cfg,
    };
    let vanilla_proofs = match sector_size {
        b if b == 2 << 10 => VanillaSealProof::StackedDrg2KiBV1(partitions::<SectorShape2KiB>(&s, rng)?),
        b if b == 8 << 20 => VanillaSealProof::StackedDrg8MiBV1(partitions::<SectorShape8MiB>(&s, rng)?),
        b if b == 512 << 20 => VanillaSealProof::StackedDrg512MiBV1(partitions::<SectorShape512MiB>(&s, rng)?),
        b if b == 32 << 30 => VanillaSealProof::StackedDrg32GiBV1(partitions::<SectorShape32GiB>(&s, rng)?),
        _ => VanillaSealProof::StackedDrg64GiBV1(partitions::<SectorShape64GiB>(&s, rng)?),
    };
    let c1 = SealCommitPhase1Output {
        registered_proof: rsp,
        vanilla_proofs,
        comm_r: s.comm_r.into_bytes().try_into().expect("32 bytes"),
        comm_d: s.comm_d.into_bytes().try_into().expect("32 bytes"),
        replica_id: s.replica_id,
        seed: s.seed,
        ticket: s.ticket,
    };
    let json = serde_json::to_vec(&c1).map_err(|e| bad(KIND, format!("encoding the synthetic C1 output: {e}")))?;
    Ok(ProofRequest {
        sector_size,
        registered_proof: 5 + size,
        vanilla_proof: json,
        sector_number: SECTOR,
        miner_id: MINER,
        ..ProofRequest::new(KIND)
    })
}

fn partitions<Tree>(s: &Sector, rng: &mut impl RngCore) -> Result<Vec<Vec<SealProof<Tree>>>, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let pp = crate::porep::public_params::<Tree>(&s.cfg)?;
    let pub_in = stacked::PublicInputs {
        replica_id: s.replica_id,
        tau: Some(Tau {
            comm_d: s.comm_d,
            comm_r: s.comm_r,
        }),
        k: None,
        seed: Some(s.seed),
    };
    let layers = pp.num_layers;
    let graph = &pp.graph;
    let base_degree = graph.base_graph().degree();
    let mut out = Vec::with_capacity(usize::from(s.cfg.partitions));
    for k in 0..usize::from(s.cfg.partitions) {
        let mut proofs = Vec::new();
        for challenge in pub_in.challenges(&pp.challenges, graph.size(), Some(k)) {
            let mut base = vec![0u32; base_degree];
            let mut exp = vec![0u32; graph.expansion_degree()];
            graph
                .base_parents(challenge, &mut base)
                .and_then(|_| graph.expanded_parents(challenge, &mut exp))
                .map_err(|e| bad(KIND, format!("the graph's parents of {challenge}: {e:#}")))?;
            let replica_column_proofs = ReplicaColumnProof {
                c_x: column::<Tree>(s, layers, challenge as u32, rng),
                drg_parents: base.iter().map(|&p| column::<Tree>(s, layers, p, rng)).collect(),
                exp_parents: exp.iter().map(|&p| column::<Tree>(s, layers, p, rng)).collect(),
            };
            // Layer 1's labels hash the base parents, the others' the base
            // and expander parents.
            let all = base_degree + exp.len();
            let labeling_proofs = (1..=layers)
                .map(|layer| {
                    let n = if layer == 1 { base_degree } else { all };
                    LabelingProof::new(layer as u32, challenge as u64, parents(n, rng))
                })
                .collect();
            let encoding_proof = EncodingProof::new(layers as u32, challenge as u64, parents(all, rng));
            let comm_d_path = (0..s.nodes.trailing_zeros() as usize)
                .map(|level| (randoms(1, rng), (challenge >> level) & 1))
                .collect();
            proofs.push(SealProof::<Tree> {
                comm_d_proofs: MerkleProof::<Sha256Hasher, U2>::from_parts(
                    <Sha256Hasher as Hasher>::Domain::random(rng),
                    s.comm_d,
                    comm_d_path,
                ),
                comm_r_last_proof: merkle_proof(s.nodes, challenge, D::random(rng), s.comm_r_last, rng),
                replica_column_proofs,
                labeling_proofs,
                encoding_proof,
            });
        }
        out.push(proofs);
    }
    Ok(out)
}

/// A column of tree C (one label per layer) and its inclusion proof.
fn column<Tree>(s: &Sector, layers: usize, node: u32, rng: &mut impl RngCore) -> ColumnProof<TreeProof<Tree>>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let rows = randoms(layers, rng);
    let leaf = D::random(rng);
    ColumnProof::new(node, rows, merkle_proof(s.nodes, node as usize, leaf, s.comm_c, rng))
}

/// `n` parents' labels, repeated to the 37 a label hashes.
fn parents(n: usize, rng: &mut impl RngCore) -> Vec<D> {
    let own: Vec<D> = randoms(n, rng);
    own.iter().cycle().take(TOTAL_PARENTS).copied().collect()
}
