//! The direct PoRep witness against `StackedCircuit`'s, value for value,
//! on synthetic C1 outputs (they do not verify, but both witnesses are
//! computed from the same vanilla proofs, so they must agree).
//!
//! Timings (release, `--ignored --nocapture`):
//! `cargo test --release -p pinprove-filecoin --lib direct::porep -- --ignored --nocapture`.
//! On a 2-core machine a 32 GiB partition took 35-39 s through the gadgets
//! and 4.3-5.5 s directly (6.0 s for the first in a process, which counts
//! the gadgets' constraints); about half of the direct time is then the
//! Poseidon gadgets (column hashes, tree C and R inclusions), which build
//! linear combinations nobody reads.

use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::Domain;
use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::sha256::{Sha256Domain, Sha256Hasher};
use filecoin_proofs::{SectorShape2KiB, SectorShape8MiB, SectorShape32GiB, SectorShape64GiB};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, Tau};

use super::PoRepWitness;
use crate::ProofKind;
use crate::direct::tests::{Recorder, same};

/// Partition `k` of a synthetic C1 output: the circuit and the direct
/// witness generator, both from the same vanilla proofs.
#[allow(clippy::ptr_arg)] // StackedCompound::circuit takes a &Vec
pub(super) fn partition<Tree>(
    c1: &SealCommitPhase1Output,
    proofs: &Vec<stacked::Proof<Tree, Sha256Hasher>>,
    k: usize,
) -> (StackedCircuit<Tree, Sha256Hasher>, PoRepWitness<Tree>)
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let pub_in = stacked::PublicInputs {
        replica_id: c1.replica_id,
        tau: Some(Tau {
            comm_d: Sha256Domain::try_from_bytes(&c1.comm_d).unwrap(),
            comm_r: PoseidonDomain::try_from_bytes(&c1.comm_r).unwrap(),
        }),
        k: None,
        seed: Some(c1.seed),
    };
    let pp = crate::porep::public_params::<Tree>(&c1.registered_proof.as_v1_config()).unwrap();
    let circuit = StackedCompound::<Tree, Sha256Hasher>::circuit(&pub_in, (), proofs, &pp, Some(k)).unwrap();
    (circuit, PoRepWitness::new(&pub_in, proofs).unwrap())
}

pub(super) fn c1_output(sector_size: u64) -> SealCommitPhase1Output {
    let req = crate::synthetic::request(ProofKind::PoRep, sector_size, 7).unwrap();
    crate::porep::decode(&req.vanilla_proof).unwrap().0
}

/// Synthesizes both ways; panics naming the first value that differs.
/// Returns the seconds each took (into buffers already faulted in, as the
/// engine's pool buffers are: first touches of fresh memory took two
/// thirds of a 32 GiB direct run here) and the counts.
fn compare<Tree>(circuit: StackedCircuit<Tree, Sha256Hasher>, witness: &PoRepWitness<Tree>) -> (f64, f64, usize, usize)
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let mut gadget = Recorder::with_capacity(0, 0);
    circuit.clone().synthesize(&mut gadget).unwrap();
    let (inputs, aux) = (gadget.inputs.len(), gadget.aux.len());

    let mut direct = Recorder::with_capacity(inputs, aux);
    direct.aux.resize(aux, Fr::ZERO);
    direct.aux.clear();
    // The first run in a process also counts the gadgets' constraints per
    // shape (once); the second is what every later partition takes.
    let start = Instant::now();
    witness.synthesize(&mut direct).unwrap();
    let first_s = start.elapsed().as_secs_f64();
    same(&gadget, &direct);
    direct.inputs.clear();
    direct.aux.clear();
    direct.constraints = 0;
    let start = Instant::now();
    witness.synthesize(&mut direct).unwrap();
    let direct_s = start.elapsed().as_secs_f64();
    same(&gadget, &direct);
    println!("direct witness: first run {first_s:.3} s, then {direct_s:.3} s");

    gadget.inputs.clear();
    gadget.aux.clear();
    gadget.constraints = 0;
    let start = Instant::now();
    circuit.synthesize(&mut gadget).unwrap();
    let gadget_s = start.elapsed().as_secs_f64();
    same(&gadget, &direct);
    (gadget_s, direct_s, inputs, aux)
}

#[test]
fn matches_the_circuit_at_2kib() {
    let c1 = c1_output(2 << 10);
    let VanillaSealProof::StackedDrg2KiBV1(parts) = &c1.vanilla_proofs else {
        panic!("not a 2 KiB C1 output");
    };
    for (k, proofs) in parts.iter().enumerate() {
        let (circuit, witness) = partition::<SectorShape2KiB>(&c1, proofs, k);
        let (_, _, inputs, aux) = compare(circuit, &witness);
        assert!(inputs > 10 && aux > 100_000, "{inputs} inputs, {aux} aux");
    }
}

/// A sector really sealed (its proofs verify): the same witness too.
#[test]
fn matches_the_circuit_on_a_sealed_2kib_sector() {
    let dir = std::env::temp_dir().join(format!("pinprove-direct-porep-{}", std::process::id()));
    let sector = crate::sample::SampleSector::seal(&dir, 2048, 3, 1000, 9).unwrap();
    let c1 = crate::porep::decode(&sector.porep_request().vanilla_proof).unwrap().0;
    let VanillaSealProof::StackedDrg2KiBV1(parts) = &c1.vanilla_proofs else {
        panic!("not a 2 KiB C1 output");
    };
    let (circuit, witness) = partition::<SectorShape2KiB>(&c1, &parts[0], 0);
    compare(circuit, &witness);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// 8 MiB: a comm_d path of 18 levels and trees C and R of 6 (2 KiB: 6 and 2).
#[test]
fn matches_the_circuit_at_8mib() {
    let c1 = c1_output(8 << 20);
    let VanillaSealProof::StackedDrg8MiBV1(parts) = &c1.vanilla_proofs else {
        panic!("not an 8 MiB C1 output");
    };
    let (circuit, witness) = partition::<SectorShape8MiB>(&c1, &parts[0], 0);
    compare(circuit, &witness);
}

/// A wrong input must show: the comparison is not vacuous.
#[test]
fn a_changed_value_is_caught() {
    let c1 = c1_output(2 << 10);
    let VanillaSealProof::StackedDrg2KiBV1(parts) = &c1.vanilla_proofs else {
        panic!("not a 2 KiB C1 output");
    };
    let (circuit, mut witness) = partition::<SectorShape2KiB>(&c1, &parts[0], 0);
    witness.challenges[0].drg_parents[0].rows[1] += Fr::from(1u64);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compare(circuit, &witness)));
    assert!(caught.is_err(), "a changed parent row went unnoticed");
}

/// 32 GiB (trees C and R with a sub-tree level, 11 layers, 30 comm_d
/// levels) and 64 GiB (a top-tree level too), timed: about 2 × 4.2 GB of
/// memory and a minute on one core per size.
#[test]
#[ignore]
fn matches_the_circuit_at_32gib_timed() {
    for size in [2u64 << 10, 32 << 30, 64 << 30] {
        let c1 = c1_output(size);
        let (gadget, direct, inputs, aux) = match &c1.vanilla_proofs {
            VanillaSealProof::StackedDrg2KiBV1(parts) => {
                let (c, w) = partition::<SectorShape2KiB>(&c1, &parts[0], 0);
                compare(c, &w)
            }
            VanillaSealProof::StackedDrg32GiBV1(parts) => {
                let (c, w) = partition::<SectorShape32GiB>(&c1, &parts[0], 0);
                compare(c, &w)
            }
            VanillaSealProof::StackedDrg64GiBV1(parts) => {
                let (c, w) = partition::<SectorShape64GiB>(&c1, &parts[0], 0);
                compare(c, &w)
            }
            _ => unreachable!(),
        };
        println!(
            "{size} bytes: {inputs} inputs, {aux} aux; witness synthesis: gadget {gadget:.3} s, direct {direct:.3} s \
             ({:.1}x)",
            gadget / direct
        );
    }
}
