//! WindowPoSt (one partition per request, as Curio sends them) and
//! WinningPoSt: from one bincode `FallbackPoStSectorProof<Tree>` per sector
//! to the FallbackPoSt circuit, as filecoin-proofs'
//! `generate_single_window_post_with_vanilla` and
//! `generate_winning_post_with_vanilla` build it.
//!
//! The circuit is one part per sector, so it synthesizes in parallel, from
//! the gadgets or, pre-compiled, directly ([`direct::post`]). Its public inputs are computed
//! as the verifier computes them for this partition of the whole proof: the
//! challenges of WindowPoSt V1 depend on a sector's position in the whole
//! sector list, so the partition's sectors stand at its position there
//! (after placeholders for the partitions before it).

use bincode::Options;
use filecoin_hashers::Hasher;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_proofs::parameters::{window_post_setup_params, winning_post_setup_params};
use filecoin_proofs::{FallbackPoStSectorProof, PoStConfig, PoStType, as_safe_commitment};
use filecoin_proofs_api::{ApiVersion, RegisteredPoStProof};
use pinprove_groth16::Scalar;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector, SectorProof,
};

use crate::direct;
use crate::direct::post::SectorWitness;
use crate::error::bad;
use crate::limits::{bincode_limited, check_elements};
use crate::params::{BlankCircuit, CircuitParams};
use crate::prepared::{Checks, Prepared, guarded};
use crate::{FilecoinError, ProofKind, ProofRequest, kind};

/// Builds a WindowPoSt or WinningPoSt job from `req`.
pub(crate) fn prepare(req: &ProofRequest, checks: Checks) -> Result<Prepared, FilecoinError> {
    let c = common(req, checks)?;
    let vanilla = &req.vanilla_proofs;
    guarded(c.kind, || with_tree!(u64::from(c.cfg.sector_size), build, &c, vanilla))
}

/// What every PoSt request is checked for before its vanilla proofs are
/// decoded, and what the circuit takes from it besides them.
fn common(req: &ProofRequest, checks: Checks) -> Result<Common, FilecoinError> {
    let k = req.kind;
    let rpp = kind::post_proof(req.registered_proof)?;
    let cfg = rpp.as_v1_config();
    let expected = match k {
        ProofKind::WinningPoSt => PoStType::Winning,
        _ => PoStType::Window,
    };
    if cfg.typ != expected {
        return Err(bad(
            k,
            format!("{rpp:?} (number {}) is not a {k} proof", req.registered_proof),
        ));
    }
    let sector_bytes = u64::from(cfg.sector_size);
    if req.sector_size != 0 && req.sector_size != sector_bytes {
        return Err(bad(
            k,
            format!(
                "the request's sector size is {} bytes, {rpp:?} proves {sector_bytes}-byte sectors",
                req.sector_size
            ),
        ));
    }
    let randomness: [u8; 32] = req
        .randomness
        .as_slice()
        .try_into()
        .map_err(|_| bad(k, format!("randomness is {} bytes, not 32", req.randomness.len())))?;
    if req.vanilla_proofs.is_empty() {
        return Err(bad(k, "no vanilla proofs"));
    }
    // Counts and sizes before anything is decoded.
    let limits = crate::limits::wire_limits(k, req.registered_proof)?;
    if req.vanilla_proofs.len() > limits.vanilla_proofs {
        return Err(bad(
            k,
            format!(
                "{} vanilla proofs; a {rpp:?} {} at most {}",
                req.vanilla_proofs.len(),
                if k == ProofKind::WinningPoSt {
                    "proof proves"
                } else {
                    "partition holds"
                },
                limits.vanilla_proofs
            ),
        ));
    }
    check_elements(k, &req.vanilla_proofs, limits.element, "vanilla proof")?;
    if k == ProofKind::WindowPoSt {
        let most = match cfg.api_version {
            ApiVersion::V1_2_0 => crate::limits::MAX_WINDOW_PARTITIONS,
            _ => crate::limits::MAX_LEGACY_WINDOW_PARTITIONS,
        };
        if req.partition_index >= most {
            return Err(bad(
                k,
                format!(
                    "partition index {} is out of range: a {rpp:?} deadline has fewer than {most} partitions",
                    req.partition_index
                ),
            ));
        }
    }
    Ok(Common {
        kind: k,
        rpp,
        cfg,
        randomness,
        prover_id: kind::prover_id(req.miner_id),
        partition: req.partition_index as usize,
        checks,
    })
}

struct Common {
    kind: ProofKind,
    rpp: RegisteredPoStProof,
    cfg: PoStConfig,
    randomness: [u8; 32],
    prover_id: [u8; 32],
    partition: usize,
    checks: Checks,
}

fn build<Tree>(c: &Common, vanilla: &[Vec<u8>]) -> Result<Prepared, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let p = circuit::<Tree>(c, vanilla)?;
    let witness = p
        .witness
        .map_err(|e| tracing::warn!(kind = %c.kind, "no direct PoSt witness ({e}); the gadgets make it"))
        .ok();
    Ok(Prepared {
        kind: c.kind,
        circuit: circuit_of::<Tree>(c.kind, p.params, u64::from(c.cfg.sector_size))?,
        partitions: vec![direct::partition::partition(
            direct::post::Sectors(p.circuit),
            witness.map(|sectors| direct::post::PoStWitness::new(c.kind, sectors)),
            p.public.clone(),
        )],
        inputs: vec![p.public],
        aggregation: None,
    })
}

/// A PoSt request's circuit, its public inputs and parameters, and the
/// direct witness of the same sectors.
struct PoStCircuit<Tree: 'static + MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    witness: Result<Vec<SectorWitness>, String>,
    public: Vec<Scalar>,
    params: fallback::PublicParams,
}

fn circuit<Tree>(c: &Common, vanilla: &[Vec<u8>]) -> Result<PoStCircuit<Tree>, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let k = c.kind;
    let limit = crate::limits::post_sector_proof_bytes(c.rpp)?;
    let leaves = (u64::from(c.cfg.sector_size) / 32) as usize;
    let proofs = vanilla
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let p: FallbackPoStSectorProof<Tree> = bincode_limited(limit).deserialize(b).map_err(|e| {
                bad(
                    k,
                    format!("vanilla proof {i} does not decode as a {:?} sector proof: {e}", c.rpp),
                )
            })?;
            // Only a proof of the registered proof's shape is padded or
            // built into a circuit.
            check_shape::<Tree>(&p, c.cfg.challenge_count, leaves)
                .map_err(|why| bad(k, format!("vanilla proof {i}: {why}")))?;
            Ok::<_, FilecoinError>(p)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let domain = |bytes: &[u8; 32], what: &str| {
        as_safe_commitment::<<Tree::Hasher as Hasher>::Domain, _>(bytes, what).map_err(|e| bad(k, format!("{e:#}")))
    };
    // Lotus and Curio clear the top two bits of the randomness' last byte.
    let randomness = domain(&c.randomness, "randomness")?;
    let prover_id = domain(&c.prover_id, "prover_id")?;
    let sectors: Vec<PublicSector<_>> = proofs
        .iter()
        .map(|p| PublicSector {
            id: p.sector_id,
            comm_r: p.comm_r,
        })
        .collect();
    let pp = public_params::<Tree>(k, &c.cfg)?;
    let per_partition = pp.sector_count;
    let (circuit, public, witness) = match k {
        ProofKind::WinningPoSt => {
            let pub_in = fallback::PublicInputs {
                randomness,
                prover_id,
                sectors: sectors.clone(),
                k: None,
            };
            let proof = winning_partition::<Tree>(&proofs[0], per_partition)
                .ok_or_else(|| bad(k, "the vanilla proof holds no sector proof or no challenge"))?;
            let circuit = FallbackPoStCompound::<Tree>::circuit(&pub_in, Default::default(), &proof, &pp, Some(0))
                .map_err(|e| bad(k, format!("{e:#}")))?;
            // As the verifier sees it: the one sector, once per challenge.
            // Checked so too: with the sector listed once, storage-proofs
            // checks the first challenge's inclusion proof alone.
            let seen = fallback::PublicInputs {
                sectors: sectors.iter().cycle().take(per_partition).cloned().collect(),
                ..pub_in
            };
            if c.checks.vanilla {
                let ok = FallbackPoSt::<Tree>::verify_all_partitions(&pp, &seen, std::slice::from_ref(&proof))
                    .map_err(|e| bad(k, format!("the vanilla proof: {e:#}")))?;
                if !ok {
                    return Err(bad(k, "the vanilla proof does not verify"));
                }
            }
            let public = FallbackPoStCompound::<Tree>::generate_public_inputs(&seen, &pp, Some(0))
                .map_err(|e| bad(k, format!("public inputs: {e:#}")))?;
            let witness = direct::post::sector_witnesses::<Tree>(&pub_in.sectors, &proof, per_partition);
            (circuit, public, witness)
        }
        _ => {
            if !sectors.windows(2).all(|w| u64::from(w[0].id) < u64::from(w[1].id)) {
                return Err(bad(
                    k,
                    "the vanilla proofs' sectors are not in ascending order without repeats",
                ));
            }
            let pub_in = fallback::PublicInputs {
                randomness,
                prover_id,
                sectors: sectors.clone(),
                k: Some(c.partition),
            };
            let proof = window_partition::<Tree>(&proofs, per_partition);
            if c.checks.vanilla {
                let ok = FallbackPoSt::<Tree>::verify(&pp, &pub_in, &proof)
                    .map_err(|e| bad(k, format!("the vanilla proofs: {e:#}")))?;
                if !ok {
                    return Err(bad(k, "the vanilla proofs do not verify"));
                }
            }
            let circuit = FallbackPoStCompound::<Tree>::circuit(&pub_in, Default::default(), &proof, &pp, Some(0))
                .map_err(|e| bad(k, format!("{e:#}")))?;
            let witness = direct::post::sector_witnesses::<Tree>(&pub_in.sectors, &proof, per_partition);
            let public = window_inputs::<Tree>(c, &pp, pub_in)?;
            (circuit, public, witness)
        }
    };
    Ok(PoStCircuit {
        circuit,
        witness,
        public,
        params: pp,
    })
}

type PartitionProof<Tree> = fallback::Proof<<Tree as MerkleTreeTrait>::Proof>;

/// A WindowPoSt partition's public inputs as the verifier derives them
/// from the whole sector list. Since WindowPoSt V1_2 a challenge depends on
/// the sector alone, not on its position in that list, so the partition's
/// own sectors give the same inputs as the whole list; legacy V1 proofs
/// place the sectors after placeholders for the partitions before them
/// (their index is bounded by [`MAX_LEGACY_WINDOW_PARTITIONS`](crate::limits::MAX_LEGACY_WINDOW_PARTITIONS)).
fn window_inputs<Tree>(
    c: &Common,
    pp: &fallback::PublicParams,
    pub_in: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
) -> Result<Vec<Scalar>, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let k = c.kind;
    let (seen, partition) = match c.cfg.api_version {
        ApiVersion::V1_2_0 => (pub_in, 0),
        _ => {
            let before = c.partition * pp.sector_count;
            let placed = std::iter::repeat_n(pub_in.sectors[0].clone(), before)
                .chain(pub_in.sectors.iter().cloned())
                .collect();
            (
                fallback::PublicInputs {
                    sectors: placed,
                    ..pub_in
                },
                c.partition,
            )
        }
    };
    FallbackPoStCompound::<Tree>::generate_public_inputs(&seen, pp, Some(partition))
        .map_err(|e| bad(k, format!("public inputs: {e:#}")))
}

/// Whether a sector proof has the shape of the registered proof's: one
/// sector, `challenges` inclusion proofs, each with the tree's path length
/// and every level's arity. A proof of another shape is refused before it
/// is padded, verified or built into a circuit (a path of any length would
/// otherwise be copied once per sector of the partition).
fn check_shape<Tree: MerkleTreeTrait>(
    proof: &FallbackPoStSectorProof<Tree>,
    challenges: usize,
    leaves: usize,
) -> Result<(), String> {
    use generic_array::typenum::Unsigned;
    use storage_proofs_core::merkle::MerkleProofTrait;
    let [sector] = proof.vanilla_proof.sectors.as_slice() else {
        return Err(format!(
            "{} sectors in one sector's proof",
            proof.vanilla_proof.sectors.len()
        ));
    };
    if sector.inclusion_proofs.len() != challenges {
        return Err(format!(
            "{} inclusion proofs, not one per challenge ({challenges})",
            sector.inclusion_proofs.len()
        ));
    }
    let (sub, top) = (Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize());
    for (n, p) in sector.inclusion_proofs.iter().enumerate() {
        let path = p.path();
        let expected = p.expected_len(leaves);
        if path.len() != expected {
            return Err(format!("inclusion proof {n} has {} levels, not {expected}", path.len()));
        }
        let base = expected - usize::from(sub > 0) - usize::from(top > 0);
        let arities = std::iter::repeat_n(Tree::Arity::to_usize(), base)
            .chain((sub > 0).then_some(sub))
            .chain((top > 0).then_some(top));
        for (level, ((hashes, index), arity)) in path.iter().zip(arities).enumerate() {
            if hashes.len() + 1 != arity || *index >= arity {
                return Err(format!(
                    "inclusion proof {n}, level {level}: {} siblings at index {index}, the tree is {arity}-ary there",
                    hashes.len()
                ));
            }
        }
    }
    Ok(())
}

/// A WindowPoSt partition's vanilla proof as the circuit takes it: the
/// sectors' proofs in order, the last repeated to fill the partition (as
/// filecoin-proofs shapes it).
fn window_partition<Tree: 'static + MerkleTreeTrait>(
    proofs: &[FallbackPoStSectorProof<Tree>],
    per_partition: usize,
) -> PartitionProof<Tree> {
    let mut sectors: Vec<_> = proofs
        .iter()
        .flat_map(|p| p.vanilla_proof.sectors.iter().cloned())
        .collect();
    while let Some(last) = sectors.last().filter(|_| sectors.len() < per_partition).cloned() {
        sectors.push(last);
    }
    fallback::Proof { sectors }
}

/// A WinningPoSt's vanilla proof as the circuit takes it: the one sector's
/// inclusion proofs, each as a sector proof of its own (the circuit sees one
/// sector per challenge), the last repeated to fill the partition.
fn winning_partition<Tree: 'static + MerkleTreeTrait>(
    proof: &FallbackPoStSectorProof<Tree>,
    per_partition: usize,
) -> Option<PartitionProof<Tree>> {
    let [sector] = proof.vanilla_proof.sectors.as_slice() else {
        return None;
    };
    let mut sectors: Vec<_> = sector
        .inclusion_proofs
        .iter()
        .map(|p| SectorProof {
            inclusion_proofs: vec![p.clone()],
            comm_c: sector.comm_c,
            comm_r_last: sector.comm_r_last,
        })
        .collect();
    let last = sectors.last()?.clone();
    sectors.resize(per_partition.max(sectors.len()), last);
    Some(fallback::Proof { sectors })
}

/// The circuit's public parameters (one partition's).
fn public_params<Tree>(k: ProofKind, cfg: &PoStConfig) -> Result<fallback::PublicParams, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let vanilla_params = match k {
        ProofKind::WinningPoSt => winning_post_setup_params(cfg).map_err(|e| bad(k, format!("{e:#}")))?,
        _ => window_post_setup_params(cfg),
    };
    <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::setup(&compound_proof::SetupParams {
        vanilla_params,
        partitions: None,
        priority: cfg.priority,
    })
    .map(|pp| pp.vanilla_params)
    .map_err(|e| bad(k, format!("{e:#}")))
}

/// The circuit's parameters: Filecoin's cache id, and how to make them.
fn circuit_of<Tree>(
    k: ProofKind,
    vanilla_params: fallback::PublicParams,
    sector_bytes: u64,
) -> Result<CircuitParams, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let cache_id = <FallbackPoStCompound<Tree> as CacheableParameters<FallbackPoStCircuit<Tree>, _>>::cache_identifier(
        &vanilla_params,
    );
    let blank = |p: &fallback::PublicParams| {
        <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::blank_circuit(p)
    };
    #[cfg(any(test, feature = "lab"))]
    let counted = vanilla_params.clone();
    let circuit = BlankCircuit::new(move || blank(&vanilla_params));
    // Its sectors are independent parts: counted on every core.
    #[cfg(any(test, feature = "lab"))]
    let circuit = circuit.counted_by(move || {
        Ok(pinprove_groth16::shape::CircuitShape::of_blank_parts(
            &blank(&counted).sectors,
        )?)
    });
    Ok(CircuitParams {
        circuit_id: kind::circuit_id(k, sector_bytes)?,
        cache_id,
        sector_bytes,
        blank: circuit,
    })
}

/// The WindowPoSt or WinningPoSt circuit of `sector_bytes` sectors (one
/// for both WindowPoSt versions).
pub(crate) fn circuit_params(k: ProofKind, sector_bytes: u64) -> Result<CircuitParams, FilecoinError> {
    let n = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_bytes)
        .ok_or(FilecoinError::SectorSize(sector_bytes))? as u64;
    // Winning 0..4, Window V1_2 10..14, in size order.
    let rpp = kind::post_proof(if k == ProofKind::WinningPoSt { n } else { 10 + n })?;
    fn of<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
        k: ProofKind,
        cfg: &PoStConfig,
        bytes: u64,
    ) -> Result<CircuitParams, FilecoinError> {
        circuit_of::<Tree>(k, public_params::<Tree>(k, cfg)?, bytes)
    }
    with_tree!(sector_bytes, of, k, &rpp.as_v1_config(), sector_bytes)
}

#[cfg(test)]
mod bench;

#[cfg(test)]
mod tests;
