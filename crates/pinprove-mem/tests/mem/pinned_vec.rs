use std::sync::Arc;

use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PinnedVec, PoolConfig};
use proptest::prelude::*;

fn pool() -> Arc<PinnedPool> {
    PinnedPool::new(
        Arc::new(HeapAllocator::new(false)),
        MemoryBudget::new(1 << 30),
        PoolConfig {
            idle_timeout: None,
            ..PoolConfig::default()
        },
    )
}

/// A 32-byte element, the size of a BLS12-381 scalar.
type Elem = [u64; 4];

#[derive(Clone, Debug)]
enum Op {
    Push(u64),
    Extend(Vec<u64>),
    Resize(usize, u64),
    ResizePar(usize, u64),
    Truncate(usize),
    Pop,
    Clear,
    Reserve(usize),
    Set(usize, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => any::<u64>().prop_map(Op::Push),
        3 => prop::collection::vec(any::<u64>(), 0..3000).prop_map(Op::Extend),
        2 => (0usize..5000, any::<u64>()).prop_map(|(n, v)| Op::Resize(n, v)),
        2 => (0usize..40_000, any::<u64>()).prop_map(|(n, v)| Op::ResizePar(n, v)),
        1 => (0usize..4000).prop_map(Op::Truncate),
        2 => Just(Op::Pop),
        1 => Just(Op::Clear),
        1 => (0usize..10_000).prop_map(Op::Reserve),
        2 => (any::<usize>(), any::<u64>()).prop_map(|(i, v)| Op::Set(i, v)),
    ]
}

fn elem(x: u64) -> Elem {
    [x, !x, x.rotate_left(17), x ^ 0x5555]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]

    /// PinnedVec behaves exactly like Vec under any sequence of operations.
    #[test]
    fn behaves_like_vec(ops in prop::collection::vec(op(), 1..60), initial in 0usize..2000) {
        let pool = pool();
        let mut ours: PinnedVec<Elem> = if initial == 0 {
            PinnedVec::new_in(&pool)
        } else {
            PinnedVec::with_capacity_in(initial, &pool).unwrap()
        };
        let mut model: Vec<Elem> = Vec::new();
        for op in ops {
            match op {
                Op::Push(x) => { ours.push(elem(x)); model.push(elem(x)); }
                Op::Extend(xs) => {
                    let xs: Vec<Elem> = xs.into_iter().map(elem).collect();
                    ours.extend_from_slice(&xs);
                    model.extend_from_slice(&xs);
                }
                Op::Resize(n, v) => { ours.resize(n, elem(v)); model.resize(n, elem(v)); }
                Op::ResizePar(n, v) => { ours.try_resize_par(n, elem(v)).unwrap(); model.resize(n, elem(v)); }
                Op::Truncate(n) => { ours.truncate(n); model.truncate(n); }
                Op::Pop => prop_assert_eq!(ours.pop(), model.pop()),
                Op::Clear => { ours.clear(); model.clear(); }
                Op::Reserve(n) => {
                    ours.reserve(n);
                    prop_assert!(ours.capacity() >= ours.len() + n);
                }
                Op::Set(i, v) => {
                    if !model.is_empty() {
                        let i = i % model.len();
                        ours[i] = elem(v);
                        model[i] = elem(v);
                    }
                }
            }
            prop_assert_eq!(ours.len(), model.len());
            prop_assert!(ours.capacity() >= ours.len());
            prop_assert_eq!(ours.as_slice(), model.as_slice());
        }
        let spills = ours.spills();
        drop(ours);
        let s = pool.stats();
        prop_assert_eq!(s.checked_out_buffers, 0);
        prop_assert_eq!(s.spills, u64::from(spills));
    }
}

#[test]
fn a_right_capacity_means_no_spills_and_no_copies() {
    let pool = pool();
    let n = 100_000;
    let mut v = PinnedVec::<Elem>::with_capacity_in(n, &pool).unwrap();
    for i in 0..n as u64 {
        v.push(elem(i));
    }
    assert_eq!((v.spills(), v.bytes_copied()), (0, 0));
    assert_eq!(pool.stats().spills, 0);
}

#[test]
fn outgrowing_the_buffer_is_a_counted_spill() {
    let pool = pool();
    let mut v = PinnedVec::<Elem>::with_capacity_in(1000, &pool).unwrap();
    let cap = v.capacity();
    for i in 0..=cap as u64 {
        v.push(elem(i));
    }
    assert_eq!(v.spills(), 1);
    assert_eq!(v.bytes_copied(), (cap * 32) as u64);
    assert!(v.capacity() >= 2 * cap);
    assert!(v.iter().enumerate().all(|(i, e)| *e == elem(i as u64)));
    let s = pool.stats();
    assert_eq!((s.spills, s.spill_bytes_copied), (1, (cap * 32) as u64));
    // The outgrown buffer was freed, not kept: a hinted synthesis never
    // asks for it again.
    assert_eq!((s.idle_buffers, s.freed_buffers), (0, 1));
}

#[test]
fn pushes_from_empty_grow_geometrically() {
    let pool = pool();
    let mut v = PinnedVec::<u64>::new_in(&pool);
    assert_eq!(v.capacity(), 0);
    for i in 0..1_000_000u64 {
        v.push(i);
    }
    // Doubling from one page: about log2(8 MB / 4 KiB) = 11 moves.
    assert!(v.spills() <= 12, "spills {}", v.spills());
    assert_eq!(v.iter().sum::<u64>(), 999_999 * 1_000_000 / 2);
}

#[test]
fn growth_failures_are_errors_with_try_methods() {
    let pool = PinnedPool::new(
        Arc::new(HeapAllocator::new(false)),
        MemoryBudget::new(1 << 20),
        PoolConfig::default(),
    );
    let mut v = PinnedVec::<u8>::new_in(&pool);
    v.try_extend_from_slice(&[1; 1000]).unwrap();
    let err = v.try_reserve(2 << 20).unwrap_err();
    assert!(err.to_string().contains("exceeds the whole memory budget"), "{err}");
    assert!(v.try_resize(usize::MAX, 0).is_err());
    assert_eq!(v.len(), 1000, "a failed growth leaves the vector intact");
    assert!(v.iter().all(|&b| b == 1));
}

#[test]
fn clones_and_comparisons() {
    let pool = pool();
    let mut v = PinnedVec::<u32>::new_in(&pool);
    v.extend([1u32, 2, 3].iter());
    let w = v.try_clone().unwrap();
    assert_eq!(v, w);
    assert_eq!(&v[..], &[1, 2, 3]);
    assert_eq!(format!("{v:?}"), "[1, 2, 3]");
    assert!(!v.is_pinned());
}

#[test]
fn map_in_place_converts_without_a_new_buffer() {
    let pool = pool();
    let mut v = PinnedVec::<[u64; 4]>::with_capacity_in(100_000, &pool).unwrap();
    v.extend((0..100_000u64).map(elem));
    let fresh = pool.stats().fresh_allocations;
    let w: PinnedVec<[u8; 32]> = v.map_in_place(|e| {
        let mut out = [0u8; 32];
        for (k, x) in e.iter().enumerate() {
            out[k * 8..k * 8 + 8].copy_from_slice(&x.to_le_bytes());
        }
        out
    });
    assert_eq!(w.len(), 100_000);
    assert_eq!(pool.stats().fresh_allocations, fresh);
    for (i, bytes) in w.iter().enumerate() {
        let e = elem(i as u64);
        assert_eq!(u64::from_le_bytes(bytes[8..16].try_into().unwrap()), e[1]);
    }
    drop(w);
    assert_eq!(pool.stats().checked_out_buffers, 0);
}
