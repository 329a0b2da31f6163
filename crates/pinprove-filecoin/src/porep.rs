//! PoRep C2: from a sector's C1 output (filecoin-ffi's serde JSON of the
//! API's `SealCommitPhase1Output`, bare or in Curio's wrapper) to one
//! circuit per partition, as filecoin-proofs' `seal_commit_phase2` builds
//! them.

use std::borrow::Cow;

use base64::Engine as _;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::{
    DefaultPieceHasher, PoRepConfig, SectorShape2KiB, SectorShape8MiB, SectorShape32GiB, SectorShape64GiB,
    SectorShape512MiB, as_safe_commitment,
};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::{ApiFeature, RegisteredSealProof};
use pinprove_engine::precompilable_partition_with_inputs;
use serde::Deserialize;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg, Tau, generate_replica_id};

use crate::aggregate::Aggregation;
use crate::direct::partition::{Whole, partition};
use crate::direct::porep::PoRepWitness;
use crate::error::bad;
use crate::params::{BlankCircuit, CircuitParams};
use crate::prepared::{Checks, Prepared, guarded};
use crate::{FilecoinError, ProofKind, ProofRequest, kind};

const KIND: ProofKind = ProofKind::PoRep;

/// Curio's wrapper of a C1 output (Go's JSON: `[]byte` is base64).
#[derive(Deserialize)]
struct CurioC1 {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// The C1 output in `vanilla_proof`, and the sector number and size
/// Curio's wrapper names (when it is wrapped).
pub(crate) fn decode(vanilla_proof: &[u8]) -> Result<(SealCommitPhase1Output, Option<(u64, u64)>), FilecoinError> {
    if vanilla_proof.is_empty() {
        return Err(bad(KIND, "no C1 output (vanilla_proof is empty)"));
    }
    check_json(vanilla_proof, "vanilla_proof")?;
    let (c1, wrapper): (Cow<'_, [u8]>, _) = match serde_json::from_slice::<CurioC1>(vanilla_proof) {
        Ok(w) => {
            // Go's encoding/json writes `[]byte` as standard base64.
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(w.phase1_out.trim())
                .map_err(|e| bad(KIND, format!("Phase1Out is not base64: {e}")))?;
            check_json(&bytes, "Phase1Out")?;
            (Cow::Owned(bytes), Some((w.sector_num, w.sector_size)))
        }
        Err(_) => (Cow::Borrowed(vanilla_proof), None),
    };
    let out = serde_json::from_slice::<SealCommitPhase1Output>(&c1)
        .map_err(|e| bad(KIND, format!("the C1 output does not decode: {e}")))?;
    Ok((out, wrapper))
}

/// The least JSON bytes per array or object a C1 output may average: every
/// container decodes to a vector (24 bytes and up) or a struct, and in real
/// C1 outputs a container spans far more (a 32-byte hash is an array of 32
/// numbers, 70 bytes or more); nested empty arrays (`[[],[],…]`, 3 bytes
/// each) would grow eightfold when decoded.
const JSON_BYTES_PER_CONTAINER: usize = 16;
/// The deepest nesting of a C1 output is well below this.
const JSON_MAX_DEPTH: usize = 32;

/// Refuses JSON that would decode into far more memory than it takes on
/// the wire: too many arrays and objects for its length, or nested too
/// deep. One pass over the bytes, allocating nothing.
fn check_json(json: &[u8], what: &str) -> Result<(), FilecoinError> {
    let (mut containers, mut depth, mut deepest) = (0usize, 0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                containers += 1;
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > JSON_MAX_DEPTH {
        return Err(bad(
            KIND,
            format!("{what} nests {deepest} levels deep; a C1 output nests fewer than {JSON_MAX_DEPTH}"),
        ));
    }
    if containers > json.len() / JSON_BYTES_PER_CONTAINER + 16 {
        return Err(bad(
            KIND,
            format!(
                "{what} holds {containers} arrays and objects in {} bytes, more than a C1 output can",
                json.len()
            ),
        ));
    }
    Ok(())
}

/// The Filecoin number of the seal proof a C1 output (plain, or wrapped as
/// Curio sends it) names: what a request for it should carry.
pub fn registered_proof_of(vanilla_proof: &[u8]) -> Result<u64, FilecoinError> {
    Ok(kind::seal_number(decode(vanilla_proof)?.0.registered_proof))
}

/// Builds a PoRep job from `req`.
pub(crate) fn prepare(req: &ProofRequest, checks: Checks) -> Result<Prepared, FilecoinError> {
    let asked = kind::seal_proof(req.registered_proof)?;
    let most = crate::limits::porep_c1_bytes(asked)?;
    if req.vanilla_proof.len() > most {
        return Err(bad(
            KIND,
            format!(
                "the C1 output is {} bytes; one of a {asked:?} sector is at most {most}",
                req.vanilla_proof.len()
            ),
        ));
    }
    let (c1, wrapper) = decode(&req.vanilla_proof)?;
    // The C1 output says which proof it is; the request may only agree.
    let rsp = c1.registered_proof;
    let sector_bytes = u64::from(rsp.sector_size());
    if asked.sector_size() != rsp.sector_size() {
        return Err(bad(
            KIND,
            format!("the request says {asked:?}, but the C1 output is of a {rsp:?} sector"),
        ));
    }
    for (what, size) in [
        ("the request's sector size", req.sector_size),
        ("the wrapper's SectorSize", wrapper.map_or(0, |w| w.1)),
    ] {
        if size != 0 && size != sector_bytes {
            return Err(bad(
                KIND,
                format!("{what} is {size} bytes, but the C1 output is of a {sector_bytes}-byte sector"),
            ));
        }
    }
    if let Some((num, _)) = wrapper
        && num != req.sector_number
    {
        return Err(bad(
            KIND,
            format!(
                "the wrapper names sector {num}, the request sector {}",
                req.sector_number
            ),
        ));
    }
    let SealCommitPhase1Output {
        vanilla_proofs,
        comm_r,
        comm_d,
        replica_id,
        seed,
        ticket,
        ..
    } = c1;
    let c = Common {
        rsp,
        comm_r,
        comm_d,
        replica_id,
        seed,
        ticket,
        prover_id: kind::prover_id(req.miner_id),
        sector_number: req.sector_number,
        checks,
    };
    let size_mismatch = || {
        bad(
            KIND,
            format!("the C1 output's vanilla proofs are not of a {rsp:?} sector"),
        )
    };
    match (vanilla_proofs, sector_bytes) {
        (VanillaSealProof::StackedDrg2KiBV1(v), b) if b == 2 << 10 => guarded(KIND, || build::<SectorShape2KiB>(&c, v)),
        (VanillaSealProof::StackedDrg8MiBV1(v), b) if b == 8 << 20 => guarded(KIND, || build::<SectorShape8MiB>(&c, v)),
        (VanillaSealProof::StackedDrg512MiBV1(v), b) if b == 512 << 20 => {
            guarded(KIND, || build::<SectorShape512MiB>(&c, v))
        }
        (VanillaSealProof::StackedDrg32GiBV1(v), b) if b == 32 << 30 => {
            guarded(KIND, || build::<SectorShape32GiB>(&c, v))
        }
        (VanillaSealProof::StackedDrg64GiBV1(v), b) if b == 64 << 30 => {
            guarded(KIND, || build::<SectorShape64GiB>(&c, v))
        }
        _ => Err(size_mismatch()),
    }
}

/// What every sector size's build needs from the C1 output and request.
struct Common {
    rsp: RegisteredSealProof,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    replica_id: <PoseidonHasher as Hasher>::Domain,
    seed: [u8; 32],
    ticket: [u8; 32],
    prover_id: [u8; 32],
    sector_number: u64,
    checks: Checks,
}

type SealProof<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;

fn build<Tree>(c: &Common, vanilla: Vec<Vec<SealProof<Tree>>>) -> Result<Prepared, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let cfg = c.rsp.as_v1_config();
    let sector_bytes = u64::from(cfg.sector_size);
    let partitions = usize::from(cfg.partitions);
    if c.comm_d == [0; 32] || c.comm_r == [0; 32] {
        return Err(bad(KIND, "the C1 output's comm_d or comm_r is zero"));
    }
    if c.seed == [0; 32] {
        return Err(bad(KIND, "the C1 output's seed is zero"));
    }
    if vanilla.len() != partitions {
        return Err(bad(
            KIND,
            format!(
                "{} partitions of vanilla proofs, a {:?} proof has {partitions}",
                vanilla.len(),
                c.rsp
            ),
        ));
    }
    let comm_r = as_safe_commitment::<<Tree::Hasher as Hasher>::Domain, _>(&c.comm_r, "comm_r")
        .map_err(|e| bad(KIND, format!("{e:#}")))?;
    let comm_d =
        <Sha256Hasher as Hasher>::Domain::try_from_bytes(&c.comm_d).map_err(|e| bad(KIND, format!("comm_d: {e:#}")))?;
    // The C1 output must be this sector's, sealed by this miner.
    let expected =
        generate_replica_id::<Tree::Hasher, _>(&c.prover_id, c.sector_number, &c.ticket, comm_d, &cfg.porep_id);
    if expected != c.replica_id {
        return Err(bad(
            KIND,
            format!(
                "the C1 output is not of sector {} of this miner (its replica id differs from the one its ticket, \
                 comm_d, the miner and the sector number give)",
                c.sector_number
            ),
        ));
    }
    let pp = public_params::<Tree>(&cfg)?;
    let per_partition = pp.challenges.num_challenges_per_partition();
    let pub_in = stacked::PublicInputs {
        replica_id: c.replica_id,
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c.seed),
    };
    if let Some((k, proofs)) = vanilla.iter().enumerate().find(|(_, p)| p.len() != per_partition) {
        return Err(bad(
            KIND,
            format!(
                "partition {k} has {} challenge proofs, not {per_partition}",
                proofs.len()
            ),
        ));
    }
    // What filecoin-proofs checks when it makes the C1 output: a challenge
    // proof of another shape would build a circuit its recording and
    // parameters do not fit, and a false one a proof that cannot verify.
    if c.checks.vanilla
        && !StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(&pp, &pub_in, &vanilla)
            .map_err(|e| bad(KIND, format!("the vanilla proofs: {e:#}")))?
    {
        return Err(bad(KIND, "the C1 output's vanilla proofs do not verify"));
    }
    let mut parts = Vec::with_capacity(partitions);
    let mut inputs = Vec::with_capacity(partitions);
    for (k, proofs) in vanilla.iter().enumerate() {
        let circuit = StackedCompound::<Tree, DefaultPieceHasher>::circuit(&pub_in, (), proofs, &pp, Some(k))
            .map_err(|e| bad(KIND, format!("partition {k}: {e:#}")))?;
        let public = StackedCompound::<Tree, DefaultPieceHasher>::generate_public_inputs(&pub_in, &pp, Some(k))
            .map_err(|e| bad(KIND, format!("partition {k}'s public inputs: {e:#}")))?;
        // Witness-only synthesis computes SHA-256 directly; the classic
        // path (and the recording) stay on the circuit itself.
        let part = match PoRepWitness::new(&pub_in, proofs) {
            Ok(witness) => partition(Whole(circuit), Some(witness), public.clone()),
            Err(e) => {
                tracing::warn!(partition = k, "no direct PoRep witness ({e}); the gadgets make it");
                precompilable_partition_with_inputs(circuit, public.clone())
            }
        };
        parts.push(part);
        inputs.push(public);
    }
    // Non-interactive PoRep proves the same circuit over more partitions
    // (13 at test sizes, 126 at 32 GiB) and returns their SnarkPack
    // aggregate.
    let aggregation = cfg
        .feature_enabled(ApiFeature::NonInteractivePoRep)
        .then_some(Aggregation {
            comm_r: c.comm_r,
            sector_bytes,
        });
    Ok(Prepared {
        kind: KIND,
        circuit: circuit_of::<Tree>(pp, sector_bytes)?,
        partitions: parts,
        inputs,
        aggregation,
    })
}

/// The circuit's public parameters (those of one partition).
pub(crate) fn public_params<Tree>(cfg: &PoRepConfig) -> Result<stacked::PublicParams<Tree>, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(cfg).map_err(|e| bad(KIND, format!("{e:#}")))?,
        partitions: Some(usize::from(cfg.partitions)),
        priority: false,
    };
    <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<StackedDrg<Tree, DefaultPieceHasher>, _>>::setup(&setup)
        .map(|pp| pp.vanilla_params)
        .map_err(|e| bad(KIND, format!("{e:#}")))
}

/// The circuit's parameters: Filecoin's cache id, and how to make them.
fn circuit_of<Tree>(
    vanilla_params: stacked::PublicParams<Tree>,
    sector_bytes: u64,
) -> Result<CircuitParams, FilecoinError>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let cache_id = <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        StackedCircuit<Tree, DefaultPieceHasher>,
        _,
    >>::cache_identifier(&vanilla_params);
    Ok(CircuitParams {
        circuit_id: kind::circuit_id(KIND, sector_bytes)?,
        cache_id,
        sector_bytes,
        blank: BlankCircuit::new(move || {
            <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<StackedDrg<Tree, DefaultPieceHasher>, _>>::blank_circuit(&vanilla_params)
        }),
    })
}

/// The PoRep circuit of `sector_bytes` sectors: one for every seal proof
/// version of a size (their public parameters' identifier leaves the
/// version out).
pub(crate) fn circuit_params(sector_bytes: u64) -> Result<CircuitParams, FilecoinError> {
    // V1_1, numbers 5 to 9, in size order.
    let n = kind::SECTOR_SIZES
        .iter()
        .position(|&b| b == sector_bytes)
        .ok_or(FilecoinError::SectorSize(sector_bytes))?;
    let cfg = kind::seal_proof(5 + n as u64)?.as_v1_config();
    fn of<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
        cfg: &PoRepConfig,
        bytes: u64,
    ) -> Result<CircuitParams, FilecoinError> {
        circuit_of::<Tree>(public_params::<Tree>(cfg)?, bytes)
    }
    with_tree!(sector_bytes, of, &cfg, sector_bytes)
}
