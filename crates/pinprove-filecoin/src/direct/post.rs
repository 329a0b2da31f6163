//! The witness of a PoSt partition (storage-proofs-post's
//! `FallbackPoStCircuit`, WindowPoSt and WinningPoSt alike), without
//! gadgets: per sector, its commitments and comm_r's check, then every
//! challenge's inclusion in TreeR, through the Poseidon and PoR replicas.
//!
//! The circuit's sectors are independent parts of one shape, so the
//! engine synthesizes them at once on every core
//! ([`synthesize_witness_parts`](pinprove_groth16::precompiled::synthesize_witness_parts)),
//! and records them so too
//! ([`record_parts`](pinprove_groth16::precompiled::record_parts)).

use std::sync::{Arc, OnceLock};

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::{HashFunction, Hasher};
use generic_array::typenum::U2;
use pinprove_engine::SynthesisContext;
use pinprove_groth16::precompiled::{
    PrecompiledError, Recording, WitnessValues, record_parts, synthesize_witness_parts,
};
use pinprove_groth16::{ProveError, ProvingAssignment, SynthesisStats};
use pinprove_mem::{PinnedPool, Reservation};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_post::fallback::{self, FallbackPoStCircuit, PublicSector};

use super::count::{Counter, enforce_n};
use super::partition::{DirectWitness, RealCircuit};
use super::poseidon;
use super::tree::{PoseidonPath, inclusion};
use crate::ProofKind;

/// A PoSt partition's witness: its sectors, each made on its own core.
pub struct PoStWitness {
    /// WindowPoSt or WinningPoSt (they are counted apart).
    kind: ProofKind,
    sectors: Vec<SectorWitness>,
}

impl PoStWitness {
    /// The witness of a `kind` partition made of `sectors`.
    pub fn new(kind: ProofKind, sectors: Vec<SectorWitness>) -> Self {
        Self { kind, sectors }
    }
}

impl DirectWitness for PoStWitness {
    fn witness_values(
        &self,
        recording: &Recording,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<WitnessValues, PrecompiledError> {
        let values = synthesize_witness_parts(&self.sectors, recording, pool, funds)?;
        super::witness_made(self.kind);
        Ok(values)
    }
}

/// The real circuit, synthesized classically sector by sector in parallel
/// groups.
pub struct Sectors<Tree: 'static + MerkleTreeTrait>(pub FallbackPoStCircuit<Tree>);

// By hand: the derived Clone would ask for a Clone tree type.
impl<Tree: 'static + MerkleTreeTrait> Clone for Sectors<Tree> {
    fn clone(&self) -> Self {
        Sectors(self.0.clone())
    }
}

impl<Tree: 'static + MerkleTreeTrait> RealCircuit for Sectors<Tree> {
    fn synthesize(self, ctx: SynthesisContext<'_>) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        ctx.synthesize_parts(&self.0.sectors)
    }

    fn record(self, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        // The sectors on every core: 2349 of them in a 32 GiB WindowPoSt
        // partition took 393.6 s recorded one after the other (H100 host).
        record_parts(&self.0.sectors, circuit_id)
    }

    fn parts(&self) -> usize {
        self.0.sectors.len()
    }
}

/// One sector of a PoSt circuit: what `Sector::circuit` takes from its
/// public sector and its vanilla proof.
#[derive(Clone, Debug)]
pub struct SectorWitness {
    comm_r: Fr,
    pub(crate) comm_c: Fr,
    comm_r_last: Fr,
    /// Each challenge's leaf and its path in TreeR.
    challenges: Vec<(Fr, PoseidonPath)>,
}

/// The sectors of the circuit `FallbackPoStCompound::circuit(pub_in, _,
/// proof, pp, Some(0))` builds: the vanilla proof's sectors in order, each
/// with the public sector at its place among the first `sector_count`
/// public sectors (the last one repeated where fewer). The error says what
/// does not fit.
pub fn sector_witnesses<Tree>(
    public: &[PublicSector<PoseidonDomain>],
    proof: &fallback::Proof<Tree::Proof>,
    sector_count: usize,
) -> Result<Vec<SectorWitness>, String>
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    if proof.sectors.len() != sector_count {
        return Err(format!(
            "{} sector proofs for a circuit of {sector_count} sectors",
            proof.sectors.len()
        ));
    }
    let public = public.chunks(sector_count.max(1)).next().ok_or("no public sectors")?;
    proof
        .sectors
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let sector = public.get(i).or(public.last()).ok_or("no public sectors")?;
            let challenges = p
                .inclusion_proofs
                .iter()
                .enumerate()
                .map(|(c, inclusion)| {
                    let path = PoseidonPath::from_options(inclusion.as_options())
                        .map_err(|e| format!("sector {i}, challenge {c}: {e}"))?;
                    Ok((inclusion.leaf().into(), path))
                })
                .collect::<Result<_, String>>()?;
            Ok(SectorWitness {
                comm_r: sector.comm_r.into(),
                comm_c: p.comm_c.into(),
                comm_r_last: p.comm_r_last.into(),
                challenges,
            })
        })
        .collect()
}

impl Circuit<Fr> for &SectorWitness {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for v in [self.comm_r_last, self.comm_c, self.comm_r] {
            cs.alloc(|| "commitment", || Ok(v))?;
        }
        // comm_r is public (`inputize`: an input and its constraint).
        cs.alloc_input(|| "comm_r", || Ok(self.comm_r))?;
        let mut scratch = Vec::new();
        poseidon::hash::<U2>(&[self.comm_c, self.comm_r_last], &mut scratch);
        for &v in &scratch {
            cs.alloc(|| "H(comm_c, comm_r_last)", || Ok(v))?;
        }
        // The input's constraint, the hash's, and comm_r's equality to it.
        enforce_n(cs, 1 + hash2_constraints()? + 1);
        for (leaf, path) in &self.challenges {
            inclusion(cs, path, *leaf, true, &mut scratch)?;
        }
        Ok(())
    }
}

/// Constraints of `hash2_circuit`, counted on the gadget once.
fn hash2_constraints() -> Result<usize, SynthesisError> {
    static COUNT: OnceLock<Option<usize>> = OnceLock::new();
    let count = COUNT.get_or_init(|| {
        let mut cs = Counter::default();
        let a = AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE)).ok()?;
        let b = AllocatedNum::alloc(&mut cs, || Ok(Fr::ONE)).ok()?;
        let before = cs.constraints;
        <PoseidonHasher as Hasher>::Function::hash2_circuit(&mut cs, &a, &b).ok()?;
        Some(cs.constraints - before)
    });
    count.ok_or(SynthesisError::Unsatisfiable)
}
