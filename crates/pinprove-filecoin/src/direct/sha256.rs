//! bellpepper's SHA-256 gadget (`gadgets::sha256::sha256` and
//! `sha256_compression_function`), witness only.
//!
//! Facts about the gadget this follows (bellpepper 0.2.1):
//! * the initial hash value and all padding bits are constants, so the
//!   first rounds of a message's first block fold constants and allocate
//!   less than later ones;
//! * the additions `e = d + temp1` and `a = temp1 + temp2` are deferred to
//!   the start of the next round, and the last round's into the final
//!   feed-forward, so they are single additions of 6, 7 (and at the end 7
//!   and 8) words, each allocating 35 result bits;
//! * an addition with any allocated operand bit allocates the whole
//!   carry-extended sum (33 bits for 2 words, 34 for 4, 35 for 5 to 8),
//!   and only then truncates it to 32; one of constants only folds.

use super::sink::AllocSink;
use super::word::{Bit, Word, addmany, ch, maj, xor};

/// SHA-256's round constants.
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
];

/// SHA-256's initial hash value, as the gadget's constant words.
pub const IV: [Word; 8] = [
    Word::constant(0x6a09e667),
    Word::constant(0xbb67ae85),
    Word::constant(0x3c6ef372),
    Word::constant(0xa54ff53a),
    Word::constant(0x510e527f),
    Word::constant(0x9b05688c),
    Word::constant(0x1f83d9ab),
    Word::constant(0x5be0cd19),
];

/// A message the gadget would refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Sha256InputError {
    /// The gadget hashes whole bytes only.
    #[error("a message of {0} bits is not whole bytes")]
    NotWholeBytes(usize),
}

/// `sha256_compression_function(cs, block, state)`: emits its allocations
/// into `sink` and returns the new state. `block` holds the 16 message
/// words as `UInt32::from_bits_be` makes them from the block's 512 bits.
pub fn compress<S: AllocSink>(state: &[Word; 8], block: &[Word; 16], sink: &mut S) -> [Word; 8] {
    let mut w = [Word::constant(0); 64];
    w[..16].copy_from_slice(block);
    for i in 16..64 {
        let x = w[i - 15];
        let s0 = xor(xor(x.rotr(7), x.rotr(18), sink), x.shr(3), sink);
        let y = w[i - 2];
        let s1 = xor(xor(y.rotr(17), y.rotr(19), sink), y.shr(10), sink);
        w[i] = addmany(&[w[i - 16], s0, w[i - 7], s1], sink);
    }

    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    // The pending sums for `e` (`temp1 + d`, 6 terms) and `a` (`temp1 +
    // temp2`, 7 terms), with a spare slot for the feed-forward term.
    let mut e_terms = [Word::constant(0); 7];
    let mut a_terms = [Word::constant(0); 8];
    for i in 0..64 {
        if i > 0 {
            e = addmany(&e_terms[..6], sink);
        }
        let s1 = xor(xor(e.rotr(6), e.rotr(11), sink), e.rotr(25), sink);
        let ch = ch(e, f, g, sink);
        if i > 0 {
            a = addmany(&a_terms[..7], sink);
        }
        let s0 = xor(xor(a.rotr(2), a.rotr(13), sink), a.rotr(22), sink);
        let maj = maj(a, b, c, sink);

        let k = Word::constant(K[i]);
        e_terms[..6].copy_from_slice(&[h, s1, ch, k, w[i], d]);
        a_terms[..7].copy_from_slice(&[h, s1, ch, k, w[i], s0, maj]);
        h = g;
        g = f;
        f = e;
        d = c;
        c = b;
        b = a;
    }

    a_terms[7] = state[0];
    e_terms[6] = state[4];
    [
        addmany(&a_terms, sink),
        addmany(&[state[1], b], sink),
        addmany(&[state[2], c], sink),
        addmany(&[state[3], d], sink),
        addmany(&e_terms, sink),
        addmany(&[state[5], f], sink),
        addmany(&[state[6], g], sink),
        addmany(&[state[7], h], sink),
    ]
}

/// Hashes padded blocks from the initial hash value.
fn hash_blocks<S: AllocSink>(blocks: &[[Word; 16]], sink: &mut S) -> [Word; 8] {
    blocks.iter().fold(IV, |state, block| compress(&state, block, sink))
}

/// Blocks for a message of `bit_len` bits holding the gadget's padding (a
/// constant one after the message, constant zeros, the bit length in the
/// last 64 bits); the message's own bits are left constant zeros for the
/// caller to fill, most significant first in each word.
fn padded_blocks(bit_len: usize) -> Vec<[Word; 16]> {
    let blocks = (bit_len + 1 + 64).div_ceil(512);
    let mut out = vec![[Word::constant(0); 16]; blocks];
    out[bit_len / 512][(bit_len % 512) / 32].set_bit(31 - (bit_len % 32) as u32, Bit::Constant(true));
    let len = bit_len as u64;
    if let Some(last) = out.last_mut() {
        last[14] = Word::constant((len >> 32) as u32);
        last[15] = Word::constant(len as u32);
    }
    out
}

/// `sha256(cs, input)`: emits the allocations into `sink` and returns the
/// digest as 8 words; [`digest_bits`] gives the gadget's output bits.
pub fn sha256<S: AllocSink>(input: &[Bit], sink: &mut S) -> Result<[Word; 8], Sha256InputError> {
    if !input.len().is_multiple_of(8) {
        return Err(Sha256InputError::NotWholeBytes(input.len()));
    }
    let mut blocks = padded_blocks(input.len());
    for (p, &bit) in input.iter().enumerate() {
        blocks[p / 512][(p % 512) / 32].set_bit(31 - (p % 32) as u32, bit);
    }
    Ok(hash_blocks(&blocks, sink))
}

/// [`sha256`] of a message of whole words (each as `UInt32::from_bits_be`
/// makes it from 32 message bits), without going through single bits.
pub fn sha256_words<S: AllocSink>(message: &[Word], sink: &mut S) -> [Word; 8] {
    let mut blocks = padded_blocks(message.len() * 32);
    for (i, &w) in message.iter().enumerate() {
        blocks[i / 16][i % 16] = w;
    }
    hash_blocks(&blocks, sink)
}

/// The gadget's output bits: each word most significant bit first.
pub fn digest_bits(digest: &[Word; 8]) -> Vec<Bit> {
    digest.iter().flat_map(|w| w.to_bits_be()).collect()
}

/// The digest's bytes (of the logical values), as `sha2` gives them.
pub fn digest_bytes(digest: &[Word; 8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (chunk, w) in out.chunks_exact_mut(4).zip(digest) {
        chunk.copy_from_slice(&w.value.to_be_bytes());
    }
    out
}
