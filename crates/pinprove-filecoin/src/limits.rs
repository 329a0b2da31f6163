//! What a request of each kind can legitimately hold, derived from the
//! registered proof: how many vanilla proofs, how many bytes each, how
//! large a C1 output, which partition indices. Everything a client sends is
//! checked against these before it is decoded, so that no request makes
//! the daemon allocate more than a real one of its kind would.
//!
//! A PoSt sector proof and a SnapDeals partition proof have one exact
//! shape per registered proof (a fixed number of inclusion proofs, each
//! with a fixed number of levels of fixed arity), so their bincode length
//! is exact: [`post_sector_proof_bytes`] and [`snap_partition_proof_bytes`]
//! compute it from storage-proofs' own path lengths, and the tests check
//! it against real proofs and synthetic ones of every size.

use filecoin_proofs::SectorUpdateConfig;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use generic_array::typenum::Unsigned;
use storage_proofs_core::merkle::{MerkleTreeTrait, base_path_length};
use storage_proofs_update::constants::{TreeRHasher, apex_leaf_count, challenge_count};

use crate::error::bad;
use crate::{FilecoinError, ProofKind, kind};

/// The most partitions a miner's deadline can hold (the miner actor's
/// `max_partitions_per_deadline`): a WindowPoSt `partition_index` is below
/// it.
pub const MAX_WINDOW_PARTITIONS: u32 = 3000;

/// Legacy WindowPoSt V1 proofs (numbers 5–9, refused on chain since network
/// version 19) place a partition's sectors after placeholders for the
/// partitions before it; their partition index is kept below this so that
/// the placeholders stay small.
pub const MAX_LEGACY_WINDOW_PARTITIONS: u32 = 16;

/// The largest C1 output (`vanilla_proof`) a PoRep request for seal proof
/// `rsp` may carry, in bytes: about twice the largest a real one can be,
/// and never more than [`MAX_C1_BYTES`].
///
/// A C1 output's shape is fixed per sector size and partition count; only
/// the width of its numbers varies. Synthetic C1 outputs of the real shape
/// (one partition below 32 GiB at 2 KiB, ten at 32 and 64 GiB) measured
/// 100 KB (2 KiB sectors) to 266 KB (512 MiB) and 38.7 MB (32 GiB) to
/// 39.2 MB (64 GiB); written with every byte three digits wide and
/// base64-wrapped as Curio sends them, at most 0.4 MB and 58.5 MB (the test
/// `vanilla_proofs_of_every_size_have_the_lengths_the_limits_compute`
/// checks the limits against both). Real 32 GiB ones are reported at about
/// 68 MB wrapped. The allowance is per partition: a non-interactive PoRep
/// proves more (13 at test sizes, 126 at 32 GiB, whose C1 output no
/// cuzk.v1 client can send).
pub fn porep_c1_bytes(rsp: RegisteredSealProof) -> Result<usize, FilecoinError> {
    let sector_bytes = u64::from(rsp.sector_size());
    kind::size_tag(sector_bytes)?;
    // Test sizes below 32 GiB; production sizes from it.
    let per_partition: usize = if sector_bytes < crate::params::GENERATED_BELOW {
        1 << 20
    } else {
        16 << 20
    };
    let partitions = usize::from(rsp.as_v1_config().partitions);
    Ok((per_partition * partitions).min(MAX_C1_BYTES))
}

/// The largest C1 output any PoRep request may carry: twice a real 32 GiB
/// one as Curio wraps it.
pub const MAX_C1_BYTES: usize = 128 << 20;

/// The bincode length of one inclusion proof in a tree of `leaves` leaves
/// with base arity `A`, sub-tree arity `B` and top arity `C` (0: none), as
/// storage-proofs' `MerkleProof` writes it: the variant (4), root and leaf
/// (64), one length (8) per inclusion path, and per level its hashes'
/// length (8), `arity - 1` hashes and the index (8).
fn merkle_proof_bytes<A: Unsigned, B: Unsigned, C: Unsigned>(leaves: usize) -> usize {
    let level = |arity: usize| 8 + 32 * (arity - 1) + 8;
    let (a, b, c) = (A::to_usize(), B::to_usize(), C::to_usize());
    let mut bytes = 4 + 64 + 8 + base_path_length::<A, B, C>(leaves) * level(a);
    for arity in [b, c] {
        if arity > 0 {
            bytes += 8 + level(arity);
        }
    }
    bytes
}

fn tree_proof_bytes<Tree: MerkleTreeTrait>(leaves: usize) -> usize {
    merkle_proof_bytes::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(leaves)
}

/// The exact bincode length of one `FallbackPoStSectorProof` of `rpp`:
/// sector id (8), comm_r (32), one sector (8) holding its inclusion proofs
/// (8 + one per challenge), comm_c and comm_r_last (64).
pub fn post_sector_proof_bytes(rpp: RegisteredPoStProof) -> Result<usize, FilecoinError> {
    let cfg = rpp.as_v1_config();
    let leaves = (u64::from(cfg.sector_size) / 32) as usize;
    fn of<Tree: MerkleTreeTrait>(leaves: usize) -> Result<usize, FilecoinError> {
        Ok(tree_proof_bytes::<Tree>(leaves))
    }
    let inclusion = with_tree!(u64::from(cfg.sector_size), of, leaves)?;
    Ok(8 + 32 + 8 + 8 + cfg.challenge_count * inclusion + 64)
}

/// The exact bincode length of one SnapDeals `PartitionProof` of `rup`:
/// comm_c (32), the apex leaves (8 + 32 each), and per challenge the old
/// and new TreeR proofs and the binary TreeD proof.
pub fn snap_partition_proof_bytes(rup: RegisteredUpdateProof) -> Result<usize, FilecoinError> {
    let sector_bytes = u64::from(rup.sector_size());
    let nodes = (sector_bytes / 32) as usize;
    fn of<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(nodes: usize) -> Result<usize, FilecoinError> {
        use generic_array::typenum::{U0, U2};
        let r = tree_proof_bytes::<Tree>(nodes);
        let d = merkle_proof_bytes::<U2, U0, U0>(nodes);
        Ok(32 + 8 + 32 * apex_leaf_count(nodes) + 8 + challenge_count(nodes) * (2 * r + d))
    }
    with_tree!(sector_bytes, of, nodes)
}

/// What one request may carry on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireLimits {
    /// Bytes of `vanilla_proof` (PoRep's C1 output; 0 for other kinds).
    pub vanilla_proof: usize,
    /// Entries of `vanilla_proofs`.
    pub vanilla_proofs: usize,
    /// Bytes of each entry of `vanilla_proofs`.
    pub element: usize,
}

impl WireLimits {
    /// The most payload bytes a request within these limits carries.
    pub fn payload(&self) -> usize {
        self.vanilla_proof + self.vanilla_proofs * self.element
    }
}

/// What a request of `kind` for registered proof number `registered_proof`
/// may carry; an error when the number is not one of `kind`'s.
pub fn wire_limits(kind: ProofKind, registered_proof: u64) -> Result<WireLimits, FilecoinError> {
    Ok(match kind {
        ProofKind::PoRep => WireLimits {
            vanilla_proof: porep_c1_bytes(kind::seal_proof(registered_proof)?)?,
            vanilla_proofs: 0,
            element: 0,
        },
        ProofKind::SnapDeals => {
            let rup = kind::update_proof(registered_proof)?;
            let cfg = SectorUpdateConfig::from_porep_config(&rup.as_v1_config());
            WireLimits {
                vanilla_proof: 0,
                vanilla_proofs: usize::from(cfg.update_partitions),
                element: snap_partition_proof_bytes(rup)?,
            }
        }
        ProofKind::WindowPoSt | ProofKind::WinningPoSt => {
            let rpp = kind::post_proof(registered_proof)?;
            let cfg = rpp.as_v1_config();
            let winning = matches!(cfg.typ, filecoin_proofs::PoStType::Winning);
            if winning != (kind == ProofKind::WinningPoSt) {
                return Err(bad(
                    kind,
                    format!("{rpp:?} (number {registered_proof}) is not a {kind} proof"),
                ));
            }
            WireLimits {
                vanilla_proof: 0,
                // A WinningPoSt proves one sector.
                vanilla_proofs: if winning { 1 } else { cfg.sector_count },
                element: post_sector_proof_bytes(rpp)?,
            }
        }
    })
}

/// The largest limits of `kind` over every registered proof: what a
/// message of that kind may carry before its registered proof is known.
pub fn kind_limits(kind: ProofKind) -> WireLimits {
    let numbers: std::ops::Range<u64> = match kind {
        ProofKind::PoRep => 0..20,
        ProofKind::SnapDeals => 0..5,
        ProofKind::WindowPoSt => 5..15,
        ProofKind::WinningPoSt => 0..5,
    };
    numbers.filter_map(|n| wire_limits(kind, n).ok()).fold(
        WireLimits {
            vanilla_proof: 0,
            vanilla_proofs: 0,
            element: 0,
        },
        |a, b| WireLimits {
            vanilla_proof: a.vanilla_proof.max(b.vanilla_proof),
            vanilla_proofs: a.vanilla_proofs.max(b.vanilla_proofs),
            element: a.element.max(b.element),
        },
    )
}

/// The bincode options filecoin-proofs-api encodes vanilla proofs with
/// (`bincode::serialize`: fixed-width integers, trailing bytes allowed),
/// reading at most `limit` bytes.
pub(crate) fn bincode_limited(limit: usize) -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(limit as u64)
}

/// Checks that no `vanilla_proofs` entry is longer than `element` bytes,
/// naming the first that is.
pub(crate) fn check_elements(
    kind: ProofKind,
    vanilla: &[Vec<u8>],
    element: usize,
    what: &str,
) -> Result<(), FilecoinError> {
    match vanilla.iter().position(|v| v.len() > element) {
        None => Ok(()),
        Some(i) => Err(bad(
            kind,
            format!(
                "{what} {i} is {} bytes; one of this registered proof is {element}",
                vanilla[i].len()
            ),
        )),
    }
}
