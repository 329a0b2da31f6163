//! Speed of the replica against the gadget, release mode:
//! `cargo test --release -p pinprove-filecoin --lib direct -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use bellpepper::util_cs::witness_cs::WitnessCS;
use bellpepper_core::ConstraintSystem;
use bellpepper_core::boolean::Boolean;
use blstrs::Scalar;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::sha256;
use super::tests::{Recorder, boolean, labeling_message};
use super::{AllocSink, Bit, PackedBits};

/// What a witness buffer receives: one scalar per allocation.
struct Scalars(Vec<Scalar>);

impl AllocSink for Scalars {
    fn push_bits(&mut self, bits: u64, count: u32) {
        self.0.extend((0..count.min(64)).map(|i| {
            if (bits >> i) & 1 == 1 {
                Scalar::ONE
            } else {
                Scalar::ZERO
            }
        }));
    }
}

/// Runs `f` until a second has passed; calls per second.
fn rate(mut f: impl FnMut()) -> f64 {
    f();
    let (start, mut n) = (Instant::now(), 0u32);
    while start.elapsed() < Duration::from_secs(1) {
        f();
        n += 1;
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

fn compare(name: &str, msg: &[Bit]) {
    let compressions = (msg.len() + 65).div_ceil(512) as f64;
    let mut cs = Recorder::default();
    let booleans: Vec<Boolean> = msg.iter().map(|&b| boolean(&mut cs, b)).collect();

    let gadget = rate(|| {
        let mut cs = WitnessCS::<Scalar>::new();
        bellpepper::gadgets::sha256::sha256(&mut cs, &booleans).unwrap();
        std::hint::black_box(cs.scalar_aux().len());
    });
    let mut packed = PackedBits::default();
    let direct_bits = rate(|| {
        packed.clear();
        sha256::sha256(msg, &mut packed).unwrap();
        std::hint::black_box(packed.len());
    });
    let mut scalars = Scalars(Vec::new());
    let direct_scalars = rate(|| {
        scalars.0.clear();
        sha256::sha256(msg, &mut scalars).unwrap();
        std::hint::black_box(scalars.0.len());
    });
    let per = packed.len() as f64 / compressions;
    println!(
        "{name}: {compressions} compressions, {per:.0} allocations each; compressions/s: gadget (WitnessCS) {:.0}, \
         direct into packed bits {:.0} ({:.0}x), direct into scalars {:.0} ({:.0}x)",
        gadget * compressions,
        direct_bits * compressions,
        direct_bits / gadget,
        direct_scalars * compressions,
        direct_scalars / gadget,
    );
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn bench_sha256_against_the_gadget() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    compare("labeling (layer 2)", &labeling_message(&mut rng, 2));
    let node_pair: Vec<Bit> = (0..512).map(|i| Bit::Is(i % 3 == 0)).collect();
    compare("two 256-bit nodes", &node_pair);
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn bench_create_label_against_the_circuit() {
    use bellperson::gadgets::uint32::UInt32;
    use ff::PrimeField;
    use storage_proofs_porep::stacked::create_label_circuit;

    use super::label;
    use super::label_tests::Inputs;

    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let inputs = Inputs::random(&mut rng, 3);
    let mut cs = Recorder::default();
    let (replica_id, parents, node) = inputs.gadget_args(&mut cs);
    let gadget = rate(|| {
        let mut cs = WitnessCS::<Scalar>::new();
        let label = create_label_circuit(
            &mut cs,
            &replica_id,
            parents.clone(),
            UInt32::constant(inputs.layer),
            node.clone(),
        );
        std::hint::black_box(label.unwrap().get_value());
    });
    let parent_bytes: Vec<[u8; 32]> = inputs.parents.iter().map(|p| p.to_repr()).collect();
    let direct = rate(|| {
        let mut cs = WitnessCS::<Scalar>::new();
        let words =
            label::porep_label_message(&inputs.replica_id.to_repr(), &parent_bytes, inputs.layer, inputs.node).unwrap();
        std::hint::black_box(label::create_porep_label(&mut cs, &words).unwrap().get_value());
    });
    println!(
        "create_label (20 compressions) into WitnessCS, labels/s: circuit {gadget:.1}, direct {direct:.1} ({:.0}x)",
        direct / gadget
    );
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn bench_poseidon_against_the_gadget() {
    use bellpepper_core::num::AllocatedNum;
    use filecoin_hashers::HashFunction;
    use filecoin_hashers::poseidon::PoseidonFunction;
    use generic_array::typenum::{U2, U8, U11};

    use super::poseidon;

    fn one<A: filecoin_hashers::PoseidonArity>(rng: &mut ChaCha8Rng) {
        let arity = poseidon::allocations(A::PARAMETERS());
        let preimage: Vec<Scalar> = (0..A::PARAMETERS().width() - 1)
            .map(|_| Scalar::random(&mut *rng))
            .collect();
        let mut cs = WitnessCS::<Scalar>::new();
        let leaves: Vec<_> = preimage
            .iter()
            .map(|v| AllocatedNum::alloc(&mut cs, || Ok(*v)).unwrap())
            .collect();
        let gadget = rate(|| {
            let mut cs = WitnessCS::<Scalar>::new();
            let h = PoseidonFunction::hash_multi_leaf_circuit::<A, _>(&mut cs, &leaves, 0).unwrap();
            std::hint::black_box(h.get_value());
        });
        let mut out = Vec::with_capacity(arity);
        let direct = rate(|| {
            out.clear();
            std::hint::black_box(poseidon::hash::<A>(&preimage, &mut out));
        });
        println!(
            "Poseidon arity {} ({arity} allocations): hashes/s into WitnessCS {gadget:.0}, direct into scalars \
             {direct:.0} ({:.1}x)",
            preimage.len(),
            direct / gadget
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    one::<U2>(&mut rng);
    one::<U8>(&mut rng);
    one::<U11>(&mut rng);
}
