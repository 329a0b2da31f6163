//! SnapDeals: from one bincode `PartitionProof<Tree>` per partition and the
//! three commitments to one update circuit per partition, as
//! filecoin-proofs' `generate_empty_sector_update_proof_with_vanilla`
//! builds them.
//!
//! The API's `RegisteredUpdateProof` helpers for parameter files name the
//! PoRep circuit; the update prover loads the update circuit's own
//! parameters (`empty-sector-update-…`), and so does pinprove: the cache id
//! comes from the update circuit's public parameters.
//!
//! Pre-compiled, the engine records the circuit itself once and makes
//! later partitions' witnesses from the direct replicas
//! ([`direct::snap`](crate::direct::snap)).

use bincode::Options;
use blstrs::Scalar;
use filecoin_hashers::Domain;
use filecoin_proofs::SectorUpdateConfig;
use filecoin_proofs_api::RegisteredUpdateProof;
use pinprove_engine::precompilable_partition_with_inputs;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{TreeDDomain, TreeRDomain, TreeRHasher};
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof, PublicParams,
};

use crate::direct::partition::{Whole, partition};
use crate::direct::snap::SnapWitness;
use crate::error::bad;
use crate::limits::{bincode_limited, check_elements};
use crate::params::{BlankCircuit, CircuitParams};
use crate::prepared::{Checks, Prepared, guarded};
use crate::{FilecoinError, ProofKind, ProofRequest, kind};

const KIND: ProofKind = ProofKind::SnapDeals;

/// Builds a SnapDeals job from `req`.
pub(crate) fn prepare(req: &ProofRequest, checks: Checks) -> Result<Prepared, FilecoinError> {
    let c = common(req)?;
    let vanilla = &req.vanilla_proofs;
    guarded(KIND, || {
        with_tree!(u64::from(c.rup.sector_size()), build, &c, vanilla, checks)
    })
}

/// The update proof and the commitments of `req`.
fn common(req: &ProofRequest) -> Result<Common, FilecoinError> {
    let rup = kind::update_proof(req.registered_proof)?;
    // Proof-share requests leave the sector size at 0: the update proof
    // says it.
    let sector_bytes = u64::from(rup.sector_size());
    if req.sector_size != 0 && req.sector_size != sector_bytes {
        return Err(bad(
            KIND,
            format!(
                "the request's sector size is {} bytes, {rup:?} updates {sector_bytes}-byte sectors",
                req.sector_size
            ),
        ));
    }
    let comm = |bytes: &[u8], what: &str| -> Result<[u8; 32], FilecoinError> {
        bytes
            .try_into()
            .map_err(|_| bad(KIND, format!("{what} is {} bytes, not 32", bytes.len())))
    };
    Ok(Common {
        rup,
        comm_r_old: comm(&req.comm_r_old, "comm_r_old")?,
        comm_r_new: comm(&req.comm_r_new, "comm_r_new")?,
        comm_d_new: comm(&req.comm_d_new, "comm_d_new")?,
    })
}

struct Common {
    rup: RegisteredUpdateProof,
    comm_r_old: [u8; 32],
    comm_r_new: [u8; 32],
    comm_d_new: [u8; 32],
}

fn build<Tree>(c: &Common, vanilla: &[Vec<u8>], checks: Checks) -> Result<Prepared, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    let (pp, circuits) = partition_circuits::<Tree>(c, vanilla, checks)?;
    let sector_bytes = (pp.sector_nodes as u64) << 5;
    let mut parts = Vec::with_capacity(circuits.len());
    let mut inputs = Vec::with_capacity(circuits.len());
    for (k, (circuit, public)) in circuits.into_iter().enumerate() {
        // Witness-only synthesis computes the SHA-256 and Poseidon parts
        // directly; the classic path (and the recording) stay on the
        // circuit itself.
        let part = match SnapWitness::new(&circuit.0) {
            Ok(witness) => partition(Whole(circuit), Some(witness), public.clone()),
            Err(e) => {
                tracing::warn!(partition = k, "no direct SnapDeals witness ({e}); the gadgets make it");
                precompilable_partition_with_inputs(circuit, public.clone())
            }
        };
        parts.push(part);
        inputs.push(public);
    }
    Ok(Prepared {
        kind: KIND,
        circuit: circuit_of::<Tree>(pp, sector_bytes)?,
        partitions: parts,
        inputs,
        aggregation: None,
    })
}

/// Every partition's circuit of `req` and its public inputs, its partition
/// proofs not checked (tests compare witnesses of proofs that need not
/// verify).
#[cfg(test)]
pub(crate) fn circuits<Tree>(req: &ProofRequest) -> Result<Circuits<Tree>, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    let c = common(req)?;
    Ok(partition_circuits::<Tree>(&c, &req.vanilla_proofs, Checks { vanilla: false })?.1)
}

/// Each partition's circuit and its public inputs.
type Circuits<Tree> = Vec<(UpdateCircuit<Tree>, Vec<Scalar>)>;

/// The partitions' circuits and public inputs, with the circuit's public
/// parameters.
fn partition_circuits<Tree>(
    c: &Common,
    vanilla: &[Vec<u8>],
    checks: Checks,
) -> Result<(PublicParams, Circuits<Tree>), FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    let config = SectorUpdateConfig::from_porep_config(&c.rup.as_v1_config());
    let sector_bytes = u64::from(config.sector_size);
    let partitions = usize::from(config.update_partitions);
    if vanilla.len() != partitions {
        return Err(bad(
            KIND,
            format!(
                "{} partition proofs; a {:?} update has {partitions}",
                vanilla.len(),
                c.rup
            ),
        ));
    }
    let limit = crate::limits::snap_partition_proof_bytes(c.rup)?;
    check_elements(KIND, vanilla, limit, "partition proof")?;
    let proofs = vanilla
        .iter()
        .enumerate()
        .map(|(i, b)| {
            bincode_limited(limit)
                .deserialize::<PartitionProof<Tree>>(b)
                .map_err(|e| {
                    bad(
                        KIND,
                        format!("partition proof {i} does not decode as a {:?} proof: {e}", c.rup),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let r = |bytes: &[u8; 32], what: &str| {
        TreeRDomain::try_from_bytes(bytes).map_err(|e| bad(KIND, format!("{what}: {e:#}")))
    };
    let pub_in = storage_proofs_update::PublicInputs {
        // Each partition's index is given to `circuit` and the inputs below.
        k: partitions,
        comm_r_old: r(&c.comm_r_old, "comm_r_old")?,
        comm_d_new: TreeDDomain::try_from_bytes(&c.comm_d_new).map_err(|e| bad(KIND, format!("comm_d_new: {e:#}")))?,
        comm_r_new: r(&c.comm_r_new, "comm_r_new")?,
        h: config.h,
    };
    let pp = public_params::<Tree>(sector_bytes, partitions)?;
    // The circuit asserts what these proofs claim instead of failing
    // cleanly: check them here, where a lie is the request's fault.
    let valid = !checks.vanilla
        || EmptySectorUpdate::<Tree>::verify_all_partitions(&pp, &pub_in, &proofs)
            .map_err(|e| bad(KIND, format!("the partition proofs: {e:#}")))?;
    if !valid {
        return Err(bad(
            KIND,
            "the partition proofs do not verify against comm_r_old, comm_r_new and comm_d_new",
        ));
    }
    let mut circuits = Vec::with_capacity(partitions);
    for (k, proof) in proofs.iter().enumerate() {
        let circuit = EmptySectorUpdateCompound::<Tree>::circuit(&pub_in, (), proof, &pp, Some(k))
            .map_err(|e| bad(KIND, format!("partition {k}: {e:#}")))?;
        let public = EmptySectorUpdateCompound::<Tree>::generate_public_inputs(&pub_in, &pp, Some(k))
            .map_err(|e| bad(KIND, format!("partition {k}'s public inputs: {e:#}")))?;
        circuits.push((UpdateCircuit(circuit), public));
    }
    Ok((pp, circuits))
}

/// The circuit's public parameters (one partition's).
fn public_params<Tree>(
    sector_bytes: u64,
    partitions: usize,
) -> Result<storage_proofs_update::PublicParams, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::setup(
        &compound_proof::SetupParams {
            vanilla_params: storage_proofs_update::SetupParams { sector_bytes },
            partitions: Some(partitions),
            priority: false,
        },
    )
    .map(|pp| pp.vanilla_params)
    .map_err(|e| bad(KIND, format!("{e:#}")))
}

/// The circuit's parameters: the update circuit's cache id (not the one
/// the API's update-proof helpers give), and how to make them.
fn circuit_of<Tree>(
    vanilla_params: storage_proofs_update::PublicParams,
    sector_bytes: u64,
) -> Result<CircuitParams, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    let cache_id =
        <EmptySectorUpdateCompound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, _>>::cache_identifier(
            &vanilla_params,
        );
    Ok(CircuitParams {
        circuit_id: kind::circuit_id(KIND, sector_bytes)?,
        cache_id,
        sector_bytes,
        blank: BlankCircuit::new(move || {
            <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::blank_circuit(
                &vanilla_params,
            )
        }),
    })
}

/// The SnapDeals circuit of `sector_bytes` sectors.
pub(crate) fn circuit_params(sector_bytes: u64) -> Result<CircuitParams, FilecoinError> {
    let n = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_bytes)
        .ok_or(FilecoinError::SectorSize(sector_bytes))? as u64;
    let rup = kind::update_proof(n)?;
    let partitions = usize::from(SectorUpdateConfig::from_porep_config(&rup.as_v1_config()).update_partitions);
    fn of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        bytes: u64,
        partitions: usize,
    ) -> Result<CircuitParams, FilecoinError> {
        circuit_of::<Tree>(public_params::<Tree>(bytes, partitions)?, bytes)
    }
    with_tree!(sector_bytes, of, sector_bytes, partitions)
}

/// The update circuit, copyable: storage-proofs gives it no `Clone` (its
/// parts have one), and the engine records and synthesizes pre-compiled
/// circuits from copies.
pub(crate) struct UpdateCircuit<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(pub(crate) EmptySectorUpdateCircuit<Tree>);

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Clone for UpdateCircuit<Tree> {
    fn clone(&self) -> Self {
        UpdateCircuit(EmptySectorUpdateCircuit {
            pub_params: self.0.pub_params.clone(),
            pub_inputs: self.0.pub_inputs.clone(),
            // Field by field: the derived Clone asks for a Clone tree type.
            priv_inputs: storage_proofs_update::circuit::PrivateInputs {
                comm_c: self.0.priv_inputs.comm_c,
                root_r_old: self.0.priv_inputs.root_r_old,
                root_r_new: self.0.priv_inputs.root_r_new,
                apex_leafs: self.0.priv_inputs.apex_leafs.clone(),
                challenge_proofs: self.0.priv_inputs.challenge_proofs.clone(),
            },
        })
    }
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> bellperson::Circuit<blstrs::Scalar> for UpdateCircuit<Tree> {
    fn synthesize<CS: bellperson::ConstraintSystem<blstrs::Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        self.0.synthesize(cs)
    }
}
