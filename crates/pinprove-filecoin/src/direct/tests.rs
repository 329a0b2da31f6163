//! The replicas against the gadgets themselves, value for value.

use bellpepper::gadgets::uint32::UInt32;
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::Digest;

use super::sha256::{self, digest_bits, digest_bytes};
use super::{Bit, PackedBits, Word};

/// Keeps every value allocated, in order, and counts the constraints
/// (witness-only synthesis checks that count too); nothing else.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) aux: Vec<Scalar>,
    /// Inputs allocated, without the constant ONE.
    pub(crate) inputs: Vec<Scalar>,
    pub(crate) constraints: usize,
}

impl Recorder {
    /// A recorder with room for `inputs` and `aux` values.
    pub(crate) fn with_capacity(inputs: usize, aux: usize) -> Self {
        Recorder {
            aux: Vec::with_capacity(aux),
            inputs: Vec::with_capacity(inputs),
            constraints: 0,
        }
    }
}

/// Panics naming the first input or aux value that differs between the
/// gadget's allocations and the replica's, or the counts that differ.
pub(crate) fn same(gadget: &Recorder, direct: &Recorder) {
    for (what, g, n) in [
        ("input", &gadget.inputs, &direct.inputs),
        ("aux", &gadget.aux, &direct.aux),
    ] {
        if let Some(i) = (0..g.len().min(n.len())).find(|&i| g[i] != n[i]) {
            panic!("{what} {i} differs: gadget {:?}, direct {:?}", g[i], n[i]);
        }
        assert_eq!(g.len(), n.len(), "{what} counts");
    }
    assert_eq!(gadget.constraints, direct.constraints, "constraint counts");
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len())))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
    }

    pinprove_groth16::flat_namespaces!();
}

/// The recorded values from `from` on, each of which must be 0 or 1.
pub(super) fn recorded_bits(cs: &Recorder, from: usize) -> Vec<bool> {
    cs.aux[from..]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            assert!(
                bool::from(v.is_zero()) || *v == Scalar::ONE,
                "allocation {i} is not a bit"
            );
            *v == Scalar::ONE
        })
        .collect()
}

/// A gadget `Boolean` for `bit`, allocating into `cs` where it is one.
pub(super) fn boolean(cs: &mut Recorder, bit: Bit) -> Boolean {
    match bit {
        Bit::Constant(v) => Boolean::Constant(v),
        Bit::Is(v) => Boolean::Is(AllocatedBit::alloc(&mut *cs, Some(v)).unwrap()),
        Bit::Not(u) => Boolean::Not(AllocatedBit::alloc(&mut *cs, Some(u)).unwrap()),
    }
}

pub(super) fn bit_of(b: &Boolean) -> Bit {
    match b {
        Boolean::Constant(v) => Bit::Constant(*v),
        Boolean::Is(a) => Bit::Is(a.get_value().unwrap()),
        Boolean::Not(a) => Bit::Not(a.get_value().unwrap()),
    }
}

/// What the gadget allocates for `input`, and its output bits.
fn gadget_sha256(input: &[Bit]) -> (Vec<bool>, Vec<Bit>) {
    let mut cs = Recorder::default();
    let booleans: Vec<Boolean> = input.iter().map(|&b| boolean(&mut cs, b)).collect();
    let start = cs.aux.len();
    let out = bellpepper::gadgets::sha256::sha256(&mut cs, &booleans).unwrap();
    (recorded_bits(&cs, start), out.iter().map(bit_of).collect())
}

/// How the message's tags are drawn.
#[derive(Clone, Copy, Debug)]
enum Tags {
    Constant,
    Allocated,
    /// Any of the three, bit by bit.
    Mixed,
    /// Runs of a few bytes of one tag.
    Runs,
}

fn random_message(rng: &mut ChaCha8Rng, bits: usize, tags: Tags) -> Vec<Bit> {
    let mut run_tag = 0;
    (0..bits)
        .map(|i| {
            let v = rng.r#gen::<bool>();
            let tag = match tags {
                Tags::Constant => 0,
                Tags::Allocated => 1,
                Tags::Mixed => rng.gen_range(0..3),
                Tags::Runs => {
                    if i % 8 == 0 && rng.gen_range(0..4) == 0 {
                        run_tag = rng.gen_range(0..3);
                    }
                    run_tag
                }
            };
            match tag {
                0 => Bit::Constant(v),
                1 => Bit::Is(v),
                _ => Bit::Not(v),
            }
        })
        .collect()
}

fn logical_bytes(bits: &[Bit]) -> Vec<u8> {
    bits.chunks(8)
        .map(|byte| byte.iter().fold(0u8, |acc, b| (acc << 1) | u8::from(b.logical())))
        .collect()
}

/// The replica against the gadget and `sha2`, both sinks.
fn check_sha256(input: &[Bit]) {
    let (want_allocs, want_out) = gadget_sha256(input);
    let mut got_allocs = Vec::new();
    let digest = sha256::sha256(input, &mut got_allocs).unwrap();
    assert_eq!(
        got_allocs.len(),
        want_allocs.len(),
        "allocation count, {} bits",
        input.len()
    );
    if let Some(i) = got_allocs.iter().zip(&want_allocs).position(|(g, w)| g != w) {
        panic!("allocation {i} of {} differs ({} bits)", want_allocs.len(), input.len());
    }
    assert_eq!(digest_bits(&digest), want_out, "output bits, {} bits", input.len());
    assert_eq!(
        digest_bytes(&digest)[..],
        sha2::Sha256::digest(logical_bytes(input))[..]
    );

    let mut packed = PackedBits::default();
    sha256::sha256(input, &mut packed).unwrap();
    assert_eq!(packed.iter().collect::<Vec<_>>(), want_allocs);
    let mut count = 0usize;
    sha256::sha256(input, &mut count).unwrap();
    assert_eq!(count, want_allocs.len());
}

#[test]
fn sha256_matches_the_gadget_for_many_lengths_and_tags() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5a256);
    // 440 bits is the longest one-block message, 448 the shortest whose
    // padding needs a second block; 512 is one hash of two nodes.
    let mut lengths = vec![0, 8, 16, 248, 256, 432, 440, 448, 504, 512, 520, 960, 1016, 1024];
    lengths.extend((0..6).map(|_| 8 * rng.gen_range(0..200)));
    for &len in &lengths {
        for tags in [Tags::Constant, Tags::Allocated, Tags::Mixed, Tags::Runs] {
            check_sha256(&random_message(&mut rng, len, tags));
        }
    }
}

#[test]
fn constants_only_allocate_nothing() {
    let (allocs, out) = gadget_sha256(&[]);
    assert!(allocs.is_empty());
    assert!(out.iter().all(|b| matches!(b, Bit::Constant(_))));
    check_sha256(&[]);
}

#[test]
fn rejects_partial_bytes() {
    let err = sha256::sha256(&[Bit::Is(true); 12], &mut Vec::new()).unwrap_err();
    assert_eq!(err, sha256::Sha256InputError::NotWholeBytes(12));
}

/// The message `create_label_circuit` hashes, with the tags its caller
/// gives: the replica id and each parent are a field element's 255
/// allocated bits and a constant zero, bit order reversed within each byte;
/// the layer is a constant `UInt32`, the node an allocated `UInt64`, both
/// most significant bit first; constant zeros pad to 64 bytes.
pub(super) fn labeling_message(rng: &mut ChaCha8Rng, layer: u32) -> Vec<Bit> {
    let element = |rng: &mut ChaCha8Rng| -> Vec<Bit> {
        let mut le: Vec<Bit> = (0..255).map(|_| Bit::Is(rng.r#gen())).collect();
        le.push(Bit::Constant(false));
        le.chunks(8)
            .flat_map(|byte| byte.iter().rev().copied().collect::<Vec<_>>())
            .collect()
    };
    let mut msg = element(rng);
    msg.extend((0..32).rev().map(|i| Bit::Constant((layer >> i) & 1 == 1)));
    let node: u64 = rng.gen_range(0..1 << 30);
    msg.extend((0..64).rev().map(|i| Bit::Is((node >> i) & 1 == 1)));
    msg.resize(512, Bit::Constant(false));
    for _ in 0..37 {
        msg.extend(element(rng));
    }
    msg
}

#[test]
fn sha256_matches_the_gadget_on_the_labeling_shape() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for layer in [1, 2, 11] {
        let msg = labeling_message(&mut rng, layer);
        assert_eq!(msg.len(), 39 * 256);
        check_sha256(&msg);
    }
}

#[test]
fn sha256_words_is_sha256_of_the_bits() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for words in [0, 1, 13, 14, 16, 312] {
        let bits = random_message(&mut rng, 32 * words, Tags::Mixed);
        let message: Vec<Word> = bits.chunks(32).map(|c| Word::from_bits_be(c).unwrap()).collect();
        let (mut by_bits, mut by_words) = (PackedBits::default(), PackedBits::default());
        let d1 = sha256::sha256(&bits, &mut by_bits).unwrap();
        let d2 = sha256::sha256_words(&message, &mut by_words);
        assert_eq!(d1, d2);
        assert_eq!(by_bits, by_words);
    }
}

/// The compression function alone, from states of any tags (the IV is
/// all constants; these reach the cases it cannot).
#[test]
fn compress_matches_the_gadget_from_any_state() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for round in 0..24 {
        let tags = [Tags::Constant, Tags::Allocated, Tags::Mixed, Tags::Runs][round % 4];
        let state_bits = random_message(&mut rng, 256, tags);
        let block_bits = random_message(&mut rng, 512, [Tags::Mixed, Tags::Runs][round % 2]);

        let mut cs = Recorder::default();
        let state: Vec<UInt32> = state_bits
            .chunks(32)
            .map(|c| UInt32::from_bits_be(&c.iter().map(|&b| boolean(&mut cs, b)).collect::<Vec<_>>()))
            .collect();
        let block: Vec<Boolean> = block_bits.iter().map(|&b| boolean(&mut cs, b)).collect();
        let start = cs.aux.len();
        let out = bellpepper::gadgets::sha256::sha256_compression_function(&mut cs, &block, &state).unwrap();
        let want_allocs = recorded_bits(&cs, start);
        let want_out: Vec<Bit> = out
            .into_iter()
            .flat_map(|w| w.into_bits_be())
            .map(|b| bit_of(&b))
            .collect();

        let words = |bits: &[Bit]| -> Vec<Word> { bits.chunks(32).map(|c| Word::from_bits_be(c).unwrap()).collect() };
        let direct_state: [Word; 8] = words(&state_bits).try_into().unwrap();
        let direct_block: [Word; 16] = words(&block_bits).try_into().unwrap();
        let mut got_allocs = Vec::new();
        let got = sha256::compress(&direct_state, &direct_block, &mut got_allocs);
        assert_eq!(got_allocs, want_allocs, "round {round} ({tags:?})");
        assert_eq!(digest_bits(&got), want_out, "round {round}");
    }
}

/// storage-proofs calls bellperson's copy of the gadget, not bellpepper's.
#[test]
fn bellpersons_copy_allocates_the_same() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let msg = labeling_message(&mut rng, 4);
    let mut cs = Recorder::default();
    let booleans: Vec<Boolean> = msg.iter().map(|&b| boolean(&mut cs, b)).collect();
    let start = cs.aux.len();
    let out = bellperson::gadgets::sha256::sha256(&mut cs, &booleans).unwrap();
    let mut got = Vec::new();
    let digest = sha256::sha256(&msg, &mut got).unwrap();
    assert_eq!(got, recorded_bits(&cs, start));
    assert_eq!(digest_bits(&digest), out.iter().map(bit_of).collect::<Vec<_>>());
}

/// The gadget's cost, as a check on the arithmetic below: with every input
/// bit allocated, the message schedule allocates 48 × (32 + 29 + 32 + 22 +
/// 34), the rounds 64 × (64 + 32 + 64 + 64) plus 63 × (35 + 35) for the
/// deferred sums, the feed-forward 2 × 35 + 6 × 33.
#[test]
fn an_allocated_compression_allocates_26166_values() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let state: [Word; 8] = std::array::from_fn(|_| Word::allocated(rng.r#gen()));
    let block: [Word; 16] = std::array::from_fn(|_| Word::allocated(rng.r#gen()));
    let mut count = 0usize;
    sha256::compress(&state, &block, &mut count);
    assert_eq!(
        count,
        48 * (32 + 29 + 32 + 22 + 34) + 64 * (64 + 32 + 64 + 64) + 63 * 70 + 2 * 35 + 6 * 33
    );
    assert_eq!(count, 26_166);

    // Per block of the labeling message (the gadget's counts: the labeling
    // test compares every value): the first folds the constant IV, the last
    // hashes constant padding.
    let msg = labeling_message(&mut rng, 2);
    let mut blocks = Vec::new();
    let mut state = sha256::IV;
    let words: Vec<Word> = msg.chunks(32).map(|c| Word::from_bits_be(c).unwrap()).collect();
    let mut padded = words.clone();
    padded.push(Word::constant(0x8000_0000));
    padded.resize(20 * 16 - 2, Word::constant(0));
    padded.extend([Word::constant(0), Word::constant(msg.len() as u32)]);
    for block in padded.chunks(16) {
        let mut n = 0usize;
        state = sha256::compress(&state, block.try_into().unwrap(), &mut n);
        blocks.push(n);
    }
    let mut total = 0usize;
    let digest = sha256::sha256_words(&words, &mut total);
    assert_eq!(digest, state);
    assert_eq!(blocks.iter().sum::<usize>(), total);
    // The constant bit 255 of a middle block's two elements saves 8
    // allocations in the message schedule's XORs.
    assert_eq!(blocks[0], 25_337);
    assert!(blocks[1..19].iter().all(|&n| n == 26_158));
    assert_eq!(blocks[19], 25_567);
}
