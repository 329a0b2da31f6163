//! The PoR replica against `PoRCircuit` itself, value for value, for every
//! tree shape Filecoin uses (and arity 4, which `insert` also serves).

use bellpepper_core::ConstraintSystem;
use bellpepper_core::num::AllocatedNum;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::PoseidonArity;
use filecoin_hashers::poseidon::PoseidonHasher;
use generic_array::typenum::{U0, U2, U4, U8};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::{DiskTree, MerkleTreeTrait};

use super::*;
use crate::direct::tests::Recorder;

type Options = Vec<(Vec<Option<Fr>>, Option<usize>)>;

/// A random path: `base` levels of `U`, then one of `V` and one of `W`
/// where those are not 0. Indices carry stray high bits the gadget drops.
fn random_path<U: PoseidonArity, V: PoseidonArity, W: PoseidonArity>(rng: &mut ChaCha8Rng, base: usize) -> Options {
    let level = |rng: &mut ChaCha8Rng, arity: usize| {
        let hashes = (0..arity - 1).map(|_| Some(Fr::random(&mut *rng))).collect();
        (hashes, Some(rng.gen_range(0..arity) + arity * rng.gen_range(0..3)))
    };
    let mut path: Options = (0..base).map(|_| level(rng, U::to_usize())).collect();
    for arity in [V::to_usize(), W::to_usize()] {
        if arity > 0 {
            path.push(level(rng, arity));
        }
    }
    path
}

/// What the gadget and the replica allocate for `options`, the leaf
/// allocated by the gadget (`Root::Val`) or given (`Root::Var`).
fn both<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    options: &Options,
    leaf: Fr,
    allocate_leaf: bool,
) -> (Recorder, Recorder, Fr) {
    let start = |cs: &mut Recorder| {
        let root = AllocatedNum::alloc(cs.namespace(|| "root"), || Ok(Fr::from(9u64))).unwrap();
        let leaf = (!allocate_leaf).then(|| AllocatedNum::alloc(cs.namespace(|| "leaf"), || Ok(leaf)).unwrap());
        (root, leaf)
    };
    let mut gadget = Recorder::default();
    let (root, leaf_var) = start(&mut gadget);
    let value = match leaf_var {
        Some(v) => Root::Var(v),
        None => Root::Val(Some(leaf)),
    };
    let path: AuthPath<PoseidonHasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> = options.clone().into();
    PoRCircuit::<Tree>::synthesize(gadget.namespace(|| "por"), value, path, Root::Var(root), true).unwrap();

    let mut direct = Recorder::default();
    start(&mut direct);
    let path = PoseidonPath::from_options(options.clone()).unwrap();
    let root = inclusion(&mut direct, &path, leaf, allocate_leaf, &mut Vec::new()).unwrap();
    (gadget, direct, root)
}

fn check<U, V, W>(rng: &mut ChaCha8Rng, base: usize)
where
    U: 'static + PoseidonArity,
    V: 'static + PoseidonArity,
    W: 'static + PoseidonArity,
{
    let shape = format!("{}/{}/{} x{base}", U::to_usize(), V::to_usize(), W::to_usize());
    for allocate_leaf in [true, false] {
        let options = random_path::<U, V, W>(rng, base);
        let leaf = Fr::random(&mut *rng);
        let (gadget, direct, root) = both::<DiskTree<PoseidonHasher, U, V, W>>(&options, leaf, allocate_leaf);
        assert_eq!(direct.aux.len(), gadget.aux.len(), "{shape}: allocations");
        assert_eq!(direct.aux, gadget.aux, "{shape}: every value in order");
        assert_eq!(direct.inputs, gadget.inputs, "{shape}: the packed position bits");
        assert_eq!(direct.constraints, gadget.constraints, "{shape}: constraints");
        assert_eq!(Some(&root), gadget.aux.last(), "{shape}: the root is the last hash");
    }
}

#[test]
fn every_value_the_por_gadget_allocates_for_every_tree_shape() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    // 2 KiB and 8 MiB .. 512 MiB sectors; 4 KiB; 16 KiB and 32 GiB; 32 KiB
    // and 64 GiB; binary and 4-ary trees.
    check::<U8, U0, U0>(&mut rng, 3);
    check::<U8, U2, U0>(&mut rng, 2);
    check::<U8, U8, U0>(&mut rng, 3);
    check::<U8, U8, U2>(&mut rng, 3);
    check::<U2, U0, U0>(&mut rng, 5);
    check::<U4, U0, U0>(&mut rng, 4);
}

#[test]
fn a_path_longer_than_one_packed_input_packs_into_two() {
    // 90 levels of 8: 270 position bits, past one input's 254.
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    check::<U8, U0, U0>(&mut rng, 90);
}

#[test]
fn a_flipped_position_bit_or_a_wrong_arity_is_caught() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let options = random_path::<U8, U8, U0>(&mut rng, 3);
    let leaf = Fr::random(&mut rng);
    let (gadget, ..) = both::<DiskTree<PoseidonHasher, U8, U8, U0>>(&options, leaf, true);

    let mut flipped = options.clone();
    flipped[1].1 = flipped[1].1.map(|i| i ^ 2);
    let mut direct = Recorder::default();
    direct.alloc(|| "root", || Ok(Fr::from(9u64))).unwrap();
    let path = PoseidonPath::from_options(flipped).unwrap();
    inclusion(&mut direct, &path, leaf, true, &mut Vec::new()).unwrap();
    assert_ne!(direct.aux, gadget.aux, "a flipped position bit went unnoticed");

    // The top level read as arity 4 instead of 8.
    let mut narrowed = options;
    narrowed[3].0.truncate(3);
    let mut direct = Recorder::default();
    direct.alloc(|| "root", || Ok(Fr::from(9u64))).unwrap();
    let path = PoseidonPath::from_options(narrowed).unwrap();
    inclusion(&mut direct, &path, leaf, true, &mut Vec::new()).unwrap();
    assert_ne!(direct.aux, gadget.aux, "a wrong arity went unnoticed");
    assert_ne!(direct.constraints, gadget.constraints);
}

#[test]
fn paths_that_cannot_be_a_tree_are_refused() {
    let one = Some(Fr::ONE);
    assert!(
        PoseidonPath::from_options(vec![(vec![one; 2], Some(0))]).is_err(),
        "arity 3"
    );
    assert!(
        PoseidonPath::from_options(vec![(vec![one, None, one], Some(0))]).is_err(),
        "a missing sibling"
    );
    assert!(
        PoseidonPath::from_options(vec![(vec![one], None)]).is_err(),
        "a missing index"
    );
    assert!(
        PoseidonPath::from_options(vec![(vec![one; 15], Some(0))]).is_err(),
        "arity 16"
    );
}
