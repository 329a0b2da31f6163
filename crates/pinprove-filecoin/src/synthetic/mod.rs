//! Synthetic inputs of the real shape, for sizes no test can seal: a C1
//! output with every partition's challenge proofs, a full WindowPoSt
//! partition (2349 sectors at 32 GiB), a WinningPoSt's 66 challenges, every
//! SnapDeals partition proof — made in seconds from a seed. Merkle paths
//! have the depth and arity of the real trees and are opened at the real
//! challenges; siblings, leaves and labels are random. storage-proofs'
//! circuits run their real witness computation on them at full size, so
//! constraint counts, densities and timings are those of production
//! proofs; the proofs themselves do not verify (nothing ties the values
//! together), and a prover given them must be made for them
//! ([`FilecoinProver::for_synthetic_inputs`](crate::FilecoinProver::for_synthetic_inputs)).

mod porep;
mod post;
mod snap;

use filecoin_hashers::{Domain, Hasher, PoseidonArity};
use pinprove_groth16::shape::CircuitShape;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use storage_proofs_core::merkle::MerkleProof;

use crate::{FilecoinError, ProofKind, ProofRequest};

/// The miner every synthetic request is of.
pub const MINER: u64 = 1000;

/// A synthetic request of `kind` for a sector of `sector_size` bytes (any
/// Filecoin size), reproducible from `seed`.
pub fn request(kind: ProofKind, sector_size: u64, seed: u64) -> Result<ProofRequest, FilecoinError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match kind {
        ProofKind::PoRep => porep::request(sector_size, &mut rng),
        ProofKind::SnapDeals => snap::request(sector_size, &mut rng),
        ProofKind::WindowPoSt | ProofKind::WinningPoSt => post::request(kind, sector_size, &mut rng),
    }
}

/// The shape of `kind`'s circuit for `sector_size`-byte sectors, counted
/// from one synthesis of its blank form: what its parameters hold (a
/// PoRep or SnapDeals shape is one partition's).
pub fn circuit_shape(kind: ProofKind, sector_size: u64) -> Result<CircuitShape, FilecoinError> {
    let circuit = crate::prover::circuit_params(kind, sector_size)?;
    let id = circuit.circuit_id.clone();
    circuit
        .blank
        .shape()
        .map_err(|source| FilecoinError::Parameters { circuit_id: id, source })
}

/// 32 random bytes that are a canonical field element.
fn field_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

fn randoms<D: Domain>(n: usize, rng: &mut impl RngCore) -> Vec<D> {
    (0..n).map(|_| D::random(rng)).collect()
}

/// An inclusion proof of `node` in a tree of `nodes` leaves whose base
/// arity is `A`, with `B`-ary sub-trees and a `C`-ary top (0: none), as
/// storage-proofs lays it out: the base levels' digits first, then the
/// sub-tree's, then the top's.
fn merkle_proof<H, A, B, C>(
    nodes: usize,
    node: usize,
    leaf: H::Domain,
    root: H::Domain,
    rng: &mut impl RngCore,
) -> MerkleProof<H, A, B, C>
where
    H: Hasher,
    A: PoseidonArity,
    B: PoseidonArity,
    C: PoseidonArity,
{
    let (a, b, c) = (A::to_usize(), B::to_usize(), C::to_usize());
    let base_leaves = nodes / b.max(1) / c.max(1);
    let mut path = Vec::new();
    let mut idx = node;
    let mut span = 1;
    while span < base_leaves {
        path.push((randoms(a - 1, rng), idx % a));
        idx /= a;
        span *= a;
    }
    for arity in [b, c] {
        if arity > 0 {
            path.push((randoms(arity - 1, rng), idx % arity));
            idx /= arity;
        }
    }
    MerkleProof::from_parts(leaf, root, path)
}
