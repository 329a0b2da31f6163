//! storage-proofs-porep's `create_label_circuit` (19.1), witness only: the
//! same values allocated in the same order (the SHA-256 gadget's, then the
//! label packed into one field element), without its constraints.
//!
//! The circuit hashes `replica id | layer index | node | parents`: the
//! replica id padded with constant zeros to 32 bytes, the layer (a
//! `UInt32`) and node (a `UInt64`) most significant bit first, constant
//! zeros to 64 bytes, then each parent padded to a multiple of 32 bytes;
//! 39 times 32 bytes in all. The label is the digest with the bit order
//! of each byte reversed, its first `CAPACITY` bits packed little-endian.

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use ff::PrimeField;

use super::sha256::{digest_bytes, sha256, sha256_words};
use super::{Bit, PackedBits, Word};

/// How many parents a label hashes (storage-proofs' `TOTAL_PARENTS`).
pub const TOTAL_PARENTS: usize = 37;

/// Bits of the message: replica id, layer and node, 37 parents, 32 bytes each.
const MESSAGE_BITS: usize = (2 + TOTAL_PARENTS) * 256;

/// Room for the hash's values: 20 compressions of about 26,100 each.
const HASH_ALLOCATIONS: usize = 20 * 26_300;

/// Inputs `create_label_circuit` would refuse (it asserts on them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelInputError {
    /// The replica id must have 32 to 256 bits.
    #[error("a replica id of {0} bits (32 to 256 expected)")]
    ReplicaId(usize),
    /// There must be [`TOTAL_PARENTS`] parents.
    #[error("{0} parents ({TOTAL_PARENTS} expected)")]
    ParentCount(usize),
    /// The node must have 64 bits.
    #[error("a node of {0} bits (64 expected)")]
    Node(usize),
    /// The padded parents do not add up to 37 times 32 bytes.
    #[error("the message is {0} bits ({MESSAGE_BITS} expected)")]
    MessageLength(usize),
    /// A field element's bytes with bit 255 set.
    #[error("element {0} is not below 2^255")]
    ElementTooLarge(usize),
}

/// The message `create_label_circuit` builds from its arguments, as they
/// come to it: `replica_id` and each parent as given (`Boolean`s), the
/// layer index as its `UInt32`, `node` as `UInt64::to_bits_be` gives it.
pub fn label_message(
    replica_id: &[Bit],
    parents: &[Vec<Bit>],
    layer_index: Word,
    node: &[Bit],
) -> Result<Vec<Bit>, LabelInputError> {
    if !(32..=256).contains(&replica_id.len()) {
        return Err(LabelInputError::ReplicaId(replica_id.len()));
    }
    if parents.len() != TOTAL_PARENTS {
        return Err(LabelInputError::ParentCount(parents.len()));
    }
    if node.len() != 64 {
        return Err(LabelInputError::Node(node.len()));
    }
    let mut msg = Vec::with_capacity(MESSAGE_BITS);
    msg.extend_from_slice(replica_id);
    msg.resize(256, Bit::Constant(false));
    msg.extend(layer_index.to_bits_be());
    msg.extend_from_slice(node);
    msg.resize(512, Bit::Constant(false));
    for parent in parents {
        msg.extend_from_slice(parent);
        msg.resize(msg.len().next_multiple_of(256), Bit::Constant(false));
    }
    if msg.len() != MESSAGE_BITS {
        return Err(LabelInputError::MessageLength(msg.len()));
    }
    Ok(msg)
}

/// The message of a label as the PoRep circuit makes it (storage-proofs'
/// `StackedCircuit`): the replica id and the parents are field elements
/// decomposed into allocated bits (`AllocatedNum::to_bits_le`, bit order
/// reversed in each byte), the layer a constant, the node allocated.
///
/// Elements are given as their 32 little-endian bytes (blstrs'
/// `to_repr`); bit 255, which the decomposition leaves a constant zero,
/// must be clear.
pub fn porep_label_message(
    replica_id: &[u8; 32],
    parents: &[[u8; 32]],
    layer: u32,
    node: u64,
) -> Result<Vec<Word>, LabelInputError> {
    if parents.len() != TOTAL_PARENTS {
        return Err(LabelInputError::ParentCount(parents.len()));
    }
    let mut msg = Vec::with_capacity(MESSAGE_BITS / 32);
    let mut element = |index: usize, bytes: &[u8; 32]| {
        msg.extend(element_words(bytes).ok_or(LabelInputError::ElementTooLarge(index))?);
        Ok(())
    };
    element(0, replica_id)?;
    for (i, parent) in parents.iter().enumerate() {
        element(i + 1, parent)?;
    }
    let mut header = [Word::constant(0); 8];
    header[0] = Word::constant(layer);
    header[1] = Word::allocated((node >> 32) as u32);
    header[2] = Word::allocated(node as u32);
    msg.splice(8..8, header);
    Ok(msg)
}

/// A field element as the SHA-256 based circuits feed it to the hash
/// (`AllocatedNum::to_bits_le`, padded with a constant zero to 256 bits,
/// bit order reversed in each byte): eight allocated words, bit 255 a
/// constant zero. `bytes` are the element's 32 little-endian bytes
/// (blstrs' `to_repr`); `None` when bit 255 is set.
pub fn element_words(bytes: &[u8; 32]) -> Option<[Word; 8]> {
    if bytes[31] & 0x80 != 0 {
        return None;
    }
    // Each byte most significant bit first: the little-endian
    // decomposition with the bits of every byte reversed.
    let mut words = [Word::constant(0); 8];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = Word::allocated(u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
    }
    // Bit 255: the most significant bit of the last byte.
    words[7].allocated &= !0x80;
    Some(words)
}

/// `create_label_circuit` on the message [`label_message`] builds (any
/// message of whole bytes is hashed the same way; one of partial bytes,
/// which `label_message` never builds, is `Unsatisfiable`).
pub fn create_label<Scalar, CS>(cs: CS, message: &[Bit]) -> Result<AllocatedNum<Scalar>, SynthesisError>
where
    Scalar: PrimeField,
    CS: ConstraintSystem<Scalar>,
{
    let mut bits = PackedBits::with_capacity(HASH_ALLOCATIONS);
    let digest = sha256(message, &mut bits).map_err(|_| SynthesisError::Unsatisfiable)?;
    finish(cs, &bits, &digest)
}

/// `create_label_circuit` on the message [`porep_label_message`] builds.
pub fn create_porep_label<Scalar, CS>(cs: CS, message: &[Word]) -> Result<AllocatedNum<Scalar>, SynthesisError>
where
    Scalar: PrimeField,
    CS: ConstraintSystem<Scalar>,
{
    let mut bits = PackedBits::with_capacity(HASH_ALLOCATIONS);
    let digest = sha256_words(message, &mut bits);
    finish(cs, &bits, &digest)
}

/// Allocates the hash's values, then the packed label.
fn finish<Scalar, CS>(mut cs: CS, bits: &PackedBits, digest: &[Word; 8]) -> Result<AllocatedNum<Scalar>, SynthesisError>
where
    Scalar: PrimeField,
    CS: ConstraintSystem<Scalar>,
{
    for bit in bits.iter() {
        cs.alloc(|| "sha256", || Ok(if bit { Scalar::ONE } else { Scalar::ZERO }))?;
    }
    let label = pack_label::<Scalar>(&digest_bytes(digest));
    AllocatedNum::alloc(cs.namespace(|| "result_num"), || Ok(label))
}

/// The digest's bits, each byte least significant bit first, the first
/// `CAPACITY` of them as a little-endian number.
fn pack_label<Scalar: PrimeField>(digest: &[u8; 32]) -> Scalar {
    let capacity = (Scalar::CAPACITY as usize).min(256);
    (0..capacity).rev().fold(Scalar::ZERO, |acc, k| {
        let acc = acc.double();
        if (digest[k / 8] >> (k % 8)) & 1 == 1 {
            acc + Scalar::ONE
        } else {
            acc
        }
    })
}
