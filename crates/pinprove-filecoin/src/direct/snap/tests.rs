//! The direct SnapDeals witness against `EmptySectorUpdateCircuit`'s,
//! value for value, and its inputs against the verifier's.
//!
//! Timings (release, `--ignored --nocapture`):
//! `cargo test --release -p pinprove-filecoin --lib direct::snap -- --ignored --nocapture`.
//! On a 2-core machine a 32 GiB partition (81.0 million aux values and
//! constraints) took 16.2 s through the gadgets and 0.61 s directly
//! (26.7x), each on one core.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_proofs::{SectorShape2KiB, SectorShape8MiB, SectorShape32GiB};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;

use super::{DirectSnapError, SnapWitness};
use crate::direct::tests::{Recorder, same};
use crate::snap::{UpdateCircuit, circuits};
use crate::{ProofKind, ProofRequest};

/// Every partition's circuit of `req`, with its public inputs and its
/// direct witness.
fn partitions<Tree>(req: &ProofRequest) -> Vec<(UpdateCircuit<Tree>, Vec<Fr>, SnapWitness<Tree>)>
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    circuits::<Tree>(req)
        .unwrap()
        .into_iter()
        .map(|(circuit, public)| {
            let witness = SnapWitness::new(&circuit.0).unwrap();
            (circuit, public, witness)
        })
        .collect()
}

/// Synthesizes both ways; panics naming the first value that differs.
/// Returns the aux count.
fn compare<Tree>(circuit: UpdateCircuit<Tree>, public: &[Fr], witness: &SnapWitness<Tree>) -> usize
where
    Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>,
{
    let mut gadget = Recorder::default();
    circuit.synthesize(&mut gadget).unwrap();
    let mut direct = Recorder::default();
    witness.synthesize(&mut direct).unwrap();
    same(&gadget, &direct);
    assert_eq!(direct.inputs, public, "the inputs are the verifier's");
    direct.aux.len()
}

fn synthetic(size: u64, seed: u64) -> ProofRequest {
    crate::synthetic::request(ProofKind::SnapDeals, size, seed).unwrap()
}

/// A sector really sealed and updated (its partition proofs verify).
#[test]
fn matches_the_circuit_on_a_sealed_2kib_update() {
    let dir = std::env::temp_dir().join(format!("pinprove-direct-snap-{}", std::process::id()));
    let mut sector = crate::sample::SampleSector::seal(&dir.join("sector"), 2048, 4, 1000, 13).unwrap();
    let req = sector.snap_update(&dir.join("update")).unwrap();
    let parts = partitions::<SectorShape2KiB>(&req);
    assert_eq!(parts.len(), 1);
    for (circuit, public, witness) in parts {
        let aux = compare(circuit, &public, &witness);
        assert!(aux > 100_000, "{aux} aux");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every partition at 2 KiB (one, no partition path) and 8 MiB (four,
/// each with its own apex leafs, partition path and challenges).
#[test]
fn matches_the_circuit_at_2kib_and_8mib() {
    let parts = partitions::<SectorShape2KiB>(&synthetic(2 << 10, 5));
    assert_eq!(parts.len(), 1);
    for (circuit, public, witness) in parts {
        compare(circuit, &public, &witness);
    }
    let parts = partitions::<SectorShape8MiB>(&synthetic(8 << 20, 6));
    assert_eq!(parts.len(), 4);
    for (circuit, public, witness) in parts {
        compare(circuit, &public, &witness);
    }
}

/// A wrong value in any part of the witness must show: the comparison is
/// not vacuous.
#[test]
fn a_changed_value_is_caught() {
    type Change = fn(&mut SnapWitness<SectorShape8MiB>);
    let changes: [(&str, Change); 4] = [
        ("TreeD sibling", |w| w.challenges[2].path_d[1] += Fr::ONE),
        ("TreeR sibling", |w| w.challenges[7].path_r_new[1][4] += Fr::ONE),
        ("apex leaf", |w| w.apex_leafs[100] += Fr::ONE),
        ("partition path sibling", |w| w.partition_path[1] += Fr::ONE),
    ];
    let req = synthetic(8 << 20, 7);
    for (what, change) in changes {
        let (circuit, public, mut witness) = partitions::<SectorShape8MiB>(&req).swap_remove(1);
        change(&mut witness);
        let caught = catch_unwind(AssertUnwindSafe(|| compare(circuit, &public, &witness)));
        assert!(caught.is_err(), "a changed {what} went unnoticed");
    }
}

/// What the circuit would refuse (most of it by panicking) is an error.
#[test]
fn a_circuit_the_gadgets_refuse_is_an_error() {
    let req = synthetic(2 << 10, 8);
    let (circuit, ..) = partitions::<SectorShape2KiB>(&req).swap_remove(0);
    let changed = |change: fn(&mut UpdateCircuit<SectorShape2KiB>)| {
        let mut c = circuit.clone();
        change(&mut c);
        SnapWitness::new(&c.0).err()
    };
    assert_eq!(
        changed(|c| c.0.priv_inputs.apex_leafs[3] = None),
        Some(DirectSnapError::Missing("apex leaf 3".into()))
    );
    assert!(matches!(
        changed(|c| {
            c.0.priv_inputs.challenge_proofs[4].path_r_old.pop();
        }),
        Some(DirectSnapError::Challenge { challenge: 4, .. })
    ));
    assert!(matches!(
        changed(|c| c.0.priv_inputs.challenge_proofs[1].path_d_new[2].clear()),
        Some(DirectSnapError::Challenge { challenge: 1, .. })
    ));
    // No h selected, then a bit above the h bits set.
    for k_and_h_select in [0u64, 0b100_0001] {
        let mut c = circuit.clone();
        c.0.pub_inputs.k_and_h_select = Some(Fr::from(k_and_h_select));
        assert!(matches!(SnapWitness::new(&c.0), Err(DirectSnapError::Shape(_))));
    }
    assert!(matches!(
        changed(|c| {
            c.0.priv_inputs.challenge_proofs.pop();
        }),
        Some(DirectSnapError::Shape(_))
    ));

    // A new label the encoding does not give: the circuit asserts, the
    // direct synthesis fails.
    let mut c = circuit.clone();
    let label = c.0.priv_inputs.challenge_proofs[6].leaf_r_new.as_mut().unwrap();
    *label += Fr::ONE;
    let witness = SnapWitness::new(&c.0).unwrap();
    assert!(witness.synthesize(&mut Recorder::default()).is_err());
}

/// 32 GiB (16 partitions of 86 challenges; TreeD paths of 19 levels to
/// the apex leaf, 128 apex leafs; TreeR with a sub-tree level), one
/// partition, timed: buffers faulted in first, as the engine's pool
/// buffers are; the direct witness's first run counts the Poseidon gadgets'
/// constraints as well. About 2 × 3 GB of memory.
#[test]
#[ignore]
fn matches_the_circuit_at_32gib_timed() {
    let req = synthetic(32 << 30, 9);
    let (circuit, public, witness) = partitions::<SectorShape32GiB>(&req).swap_remove(0);
    let mut gadget = Recorder::default();
    circuit.clone().synthesize(&mut gadget).unwrap();
    let (inputs, aux) = (gadget.inputs.len(), gadget.aux.len());
    let clear = |r: &mut Recorder| {
        r.inputs.clear();
        r.aux.clear();
        r.constraints = 0;
    };

    let mut direct = Recorder::with_capacity(inputs, aux);
    direct.aux.resize(aux, Fr::ZERO);
    clear(&mut direct);
    let start = Instant::now();
    witness.synthesize(&mut direct).unwrap();
    let first_s = start.elapsed().as_secs_f64();
    same(&gadget, &direct);
    clear(&mut direct);
    let start = Instant::now();
    witness.synthesize(&mut direct).unwrap();
    let direct_s = start.elapsed().as_secs_f64();
    same(&gadget, &direct);
    assert_eq!(direct.inputs, public, "the inputs are the verifier's");

    clear(&mut gadget);
    let start = Instant::now();
    circuit.synthesize(&mut gadget).unwrap();
    let gadget_s = start.elapsed().as_secs_f64();
    same(&gadget, &direct);
    println!(
        "32 GiB SnapDeals partition: {inputs} inputs, {aux} aux, {} constraints; witness synthesis: gadget \
         {gadget_s:.3} s, direct {direct_s:.3} s (first run {first_s:.3} s), {:.1}x",
        direct.constraints,
        gadget_s / direct_s
    );
}

/// 64 GiB (TreeR with sub- and top-tree levels), the last partition, value
/// for value; run by hand with the other production shapes.
#[test]
#[ignore]
fn matches_the_circuit_at_64gib() {
    let req = synthetic(64 << 30, 10);
    let (circuit, public, witness) = partitions::<filecoin_proofs::SectorShape64GiB>(&req).pop().unwrap();
    let aux = compare(circuit, &public, &witness);
    eprintln!("64 GiB SnapDeals partition: {aux} aux values, all equal");
}
