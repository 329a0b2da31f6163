//! The direct PoSt witness against `FallbackPoStCircuit`'s, value for
//! value, and its inputs against the verifier's.

use bellpepper_core::Circuit;
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_proofs::{SectorShape2KiB, SectorShape8MiB};
use storage_proofs_core::merkle::MerkleTreeTrait;

use super::{circuit, common};
use crate::direct::tests::{Recorder, same};
use crate::prepared::Checks;
use crate::{ProofKind, ProofRequest};

/// Both witnesses of `req`'s circuit; panics naming the first difference.
/// Returns the direct sectors' count and the aux count.
fn compare<Tree>(
    req: &ProofRequest,
    mutate: impl FnOnce(&mut Vec<crate::direct::post::SectorWitness>),
) -> (usize, usize)
where
    Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>,
{
    let c = common(req, Checks { vanilla: false }).unwrap();
    let p = circuit::<Tree>(&c, &req.vanilla_proofs).unwrap();
    let mut witness = p.witness.unwrap();
    mutate(&mut witness);
    let mut gadget = Recorder::default();
    p.circuit.synthesize(&mut gadget).unwrap();
    let mut direct = Recorder::default();
    for sector in &witness {
        sector.synthesize(&mut direct).unwrap();
    }
    same(&gadget, &direct);
    assert_eq!(direct.inputs, p.public, "the inputs are the verifier's");
    (witness.len(), direct.aux.len())
}

fn sealed(name: &str, seed: u64) -> (std::path::PathBuf, crate::sample::SampleSector) {
    let dir = std::env::temp_dir().join(format!("pinprove-direct-post-{name}-{}", std::process::id()));
    let sector = crate::sample::SampleSector::seal(&dir, 2048, 5, 1000, seed).unwrap();
    (dir, sector)
}

#[test]
fn window_and_winning_post_witnesses_match_the_circuit_on_a_sealed_sector() {
    let (dir, mut sector) = sealed("sealed", 11);
    let randomness = sector.randomness();
    // Three sectors of a 2-sector partition: the second request's
    // partition repeats its one sector to fill the circuit.
    let window = sector.window_post_requests(&[1, 5, 9], randomness).unwrap();
    assert_eq!(window.len(), 2);
    for req in &window {
        let (sectors, aux) = compare::<SectorShape2KiB>(req, |_| ());
        assert!(sectors == 2 && aux > 10_000, "{sectors} sectors, {aux} aux");
    }
    let winning = sector.winning_post_request(randomness).unwrap();
    let (sectors, _) = compare::<SectorShape2KiB>(&winning, |_| ());
    assert_eq!(sectors, 66, "one sector per challenge");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn window_post_witnesses_match_the_circuit_at_2kib_and_8mib() {
    for kind in [ProofKind::WindowPoSt, ProofKind::WinningPoSt] {
        let req = crate::synthetic::request(kind, 2 << 10, 3).unwrap();
        compare::<SectorShape2KiB>(&req, |_| ());
        let req = crate::synthetic::request(kind, 8 << 20, 3).unwrap();
        compare::<SectorShape8MiB>(&req, |_| ());
    }
}

#[test]
fn a_changed_commitment_is_caught() {
    let req = crate::synthetic::request(ProofKind::WindowPoSt, 2 << 10, 4).unwrap();
    let caught = std::panic::catch_unwind(|| {
        compare::<SectorShape2KiB>(&req, |w| {
            let mut sector = w[1].clone();
            sector.comm_c += Fr::from(1u64);
            w[1] = sector;
        })
    });
    assert!(caught.is_err(), "a changed comm_c went unnoticed");
}

/// Production shapes from synthetic inputs, run by hand (`--run-ignored
/// only`): WinningPoSt at 32 and 64 GiB, a whole WindowPoSt partition at
/// both (2349 and 2300 sectors: about 8 GB and a few minutes each on the
/// gadgets' one thread).
#[test]
#[ignore]
fn post_witnesses_match_the_circuit_at_32gib_and_64gib() {
    use filecoin_proofs::{SectorShape32GiB, SectorShape64GiB};
    let winning = |size| crate::synthetic::request(ProofKind::WinningPoSt, size, 5).unwrap();
    compare::<SectorShape32GiB>(&winning(32 << 30), |_| ());
    compare::<SectorShape64GiB>(&winning(64 << 30), |_| ());
    let window = |size| crate::synthetic::request(ProofKind::WindowPoSt, size, 5).unwrap();
    let (sectors, aux) = compare::<SectorShape32GiB>(&window(32 << 30), |_| ());
    eprintln!("32 GiB WindowPoSt: {sectors} sectors, {aux} aux values, all equal");
    let (sectors, aux) = compare::<SectorShape64GiB>(&window(64 << 30), |_| ());
    eprintln!("64 GiB WindowPoSt: {sectors} sectors, {aux} aux values, all equal");
}
