//! Precomputed multiples of an MSM's fixed bases, and the signed window
//! digits that index them: the layout a fixed-base MSM kernel reads, with a
//! CPU reference of the whole computation to check a kernel against.
//!
//! A Groth16 SRS never changes, so for each base P the points
//! 2^(c·g·m)·P (m = 0, 1, ...) can be made once, when the SRS is loaded. An
//! MSM Σ kᵢ·Pᵢ with scalars cut into W windows of c bits (signed digits, so
//! 2^(c−1) buckets instead of 2^c − 1) then needs no doublings between
//! windows: window j = m·g + r of scalar i adds its digit's sign times
//! copy m of Pᵢ into the buckets of group r. With g = 1 (a copy per window)
//! one set of buckets takes every window at once and is reduced once; with
//! g = W (no copies beyond the bases) it is plain Pippenger. A plan picks g
//! from the memory the copies may take (see [`TablePlan::for_memory`]).
//!
//! Scalars are canonical little-endian (below the group order, so below
//! 2^255): W = ⌈256 / c⌉ windows leave no carry out of the top one.

use group::ff::PrimeField;
use group::prime::{PrimeCurve, PrimeCurveAffine};

/// Bits of the scalars' canonical encoding that can be set, plus one for
/// the carry signed digits push upward.
const SCALAR_BITS_WITH_CARRY: u32 = 256;

/// Windows of `window_bits` bits that hold a signed-digit scalar.
pub fn windows(window_bits: u32) -> u32 {
    SCALAR_BITS_WITH_CARRY.div_ceil(window_bits)
}

/// The signed digits of the little-endian scalar `k` (below 2^255) in
/// windows of `c` bits, lowest first: `windows(c)` digits dⱼ with
/// Σ dⱼ·2^(c·j) = k and −2^(c−1) < dⱼ ≤ 2^(c−1), so a digit's magnitude
/// names one of 2^(c−1) buckets and its sign whether the point is added or
/// subtracted.
///
/// # Panics
/// When `c` is not in 1..=30, or `k` has its top bit set.
pub fn signed_digits(k: &[u8; 32], c: u32) -> Vec<i32> {
    assert!((1..=30).contains(&c), "window of {c} bits");
    assert!(k[31] & 0x80 == 0, "a scalar of 256 bits");
    let half = 1i64 << (c - 1);
    let mut carry = 0i64;
    (0..windows(c))
        .map(|j| {
            let w = bits(k, j * c, c) as i64 + carry;
            if w > half {
                carry = 1;
                (w - (1i64 << c)) as i32
            } else {
                carry = 0;
                w as i32
            }
        })
        .collect()
}

/// `len` bits of `k` from bit `at` (zero past the end).
fn bits(k: &[u8; 32], at: u32, len: u32) -> u64 {
    let mut v = 0u64;
    for b in 0..len {
        let i = (at + b) as usize;
        if i < 256 && k[i / 8] >> (i % 8) & 1 == 1 {
            v |= 1 << b;
        }
    }
    v
}

/// How an MSM over fixed bases uses precomputed copies of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TablePlan {
    /// Bits per window, c.
    pub window_bits: u32,
    /// Windows per scalar, W.
    pub windows: u32,
    /// Windows that share one copy of the bases, g: copy m serves windows
    /// m·g .. m·g + g − 1, each in its own set of buckets, and the sets are
    /// combined with c doublings between them.
    pub group: u32,
    /// Copies kept per base, ⌈W / g⌉ (the first is the bases themselves).
    pub copies: u32,
    /// Bytes of all copies, the bases included.
    pub table_bytes: u64,
}

impl TablePlan {
    /// The plan with windows of `window_bits` bits that keeps as many
    /// copies of `points` bases (`point_bytes` each) as `memory` bytes
    /// hold: the smallest group that fits. `None` when not even the bases
    /// themselves fit.
    pub fn for_memory(points: u64, point_bytes: u64, window_bits: u32, memory: u64) -> Option<TablePlan> {
        let w = windows(window_bits);
        (1..=w)
            .map(|group| TablePlan::with_group(points, point_bytes, window_bits, group))
            .find(|p| p.table_bytes <= memory)
    }

    /// The plan with windows of `window_bits` bits and `group` windows per
    /// copy.
    pub fn with_group(points: u64, point_bytes: u64, window_bits: u32, group: u32) -> TablePlan {
        let windows = windows(window_bits);
        let group = group.clamp(1, windows);
        let copies = windows.div_ceil(group);
        TablePlan {
            window_bits,
            windows,
            group,
            copies,
            table_bytes: points.saturating_mul(point_bytes).saturating_mul(u64::from(copies)),
        }
    }

    /// The copy and the bucket set window `j` uses.
    pub fn place(&self, j: u32) -> (u32, u32) {
        (j / self.group, j % self.group)
    }

    /// Doublings from one copy to the next: 2^(c·g).
    pub fn doublings_per_copy(&self) -> u32 {
        self.window_bits * self.group
    }
}

/// The copies a plan keeps of `bases`, made on the CPU: `copies[m][i]` is
/// 2^(c·g·m)·Pᵢ. The reference for a table built on a device.
pub fn build_table<G: PrimeCurve>(bases: &[G::Affine], plan: &TablePlan) -> Vec<Vec<G::Affine>> {
    let mut copies = vec![bases.to_vec()];
    for _ in 1..plan.copies {
        let last = copies.last().expect("the bases are the first copy");
        let next: Vec<G> = last
            .iter()
            .map(|p| (0..plan.doublings_per_copy()).fold(p.to_curve(), |q, _| q.double()))
            .collect();
        let mut affine = vec![G::Affine::identity(); next.len()];
        G::batch_normalize(&next, &mut affine);
        copies.push(affine);
    }
    copies
}

/// Σ kᵢ·Pᵢ through the plan's table (`table` from [`build_table`]), bucket
/// by bucket as a kernel would: the reference a device's result must equal.
pub fn msm_with_table<G: PrimeCurve>(table: &[Vec<G::Affine>], scalars: &[G::Scalar], plan: &TablePlan) -> G {
    assert_eq!(table.len(), plan.copies as usize, "a copy per plan copy");
    let c = plan.window_bits;
    let digits: Vec<Vec<i32>> = scalars
        .iter()
        .map(|k| {
            let repr = k.to_repr();
            let mut le = [0u8; 32];
            le.copy_from_slice(repr.as_ref());
            signed_digits(&le, c)
        })
        .collect();
    let buckets_per_set = 1usize << (c - 1);
    let mut sets = vec![vec![G::identity(); buckets_per_set]; plan.group as usize];
    for (i, d) in digits.iter().enumerate() {
        for (j, &digit) in d.iter().enumerate() {
            if digit == 0 {
                continue;
            }
            let (copy, set) = plan.place(j as u32);
            let p = table[copy as usize][i].to_curve();
            let bucket = &mut sets[set as usize][digit.unsigned_abs() as usize - 1];
            if digit > 0 {
                *bucket += p;
            } else {
                *bucket -= p;
            }
        }
    }
    // Each set: Σ b·bucket_b by running sums; then the sets from the top,
    // c doublings apart.
    sets.iter().rev().fold(G::identity(), |acc, set| {
        let (mut running, mut sum) = (G::identity(), G::identity());
        for b in set.iter().rev() {
            running += b;
            sum += running;
        }
        (0..c).fold(acc, |q, _| q.double()) + sum
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
    use ff::Field;
    use group::{Curve, Group};
    use rand_chacha::ChaCha8Rng;
    use rand_chacha::rand_core::SeedableRng;

    fn le(k: &Scalar) -> [u8; 32] {
        k.to_bytes_le()
    }

    /// Σ dⱼ·2^(c·j) in the field.
    fn recompose(d: &[i32], c: u32) -> Scalar {
        let base = Scalar::from(2u64).pow_vartime([u64::from(c)]);
        d.iter().rev().fold(Scalar::ZERO, |acc, &x| {
            let digit = Scalar::from(u64::from(x.unsigned_abs()));
            acc * base + if x < 0 { -digit } else { digit }
        })
    }

    #[test]
    fn digits_recompose_the_scalar_and_stay_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut scalars: Vec<Scalar> = (0..50).map(|_| Scalar::random(&mut rng)).collect();
        scalars.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(u64::MAX)]);
        // All-ones windows: every digit carries.
        scalars.push(Scalar::from(2u64).pow_vartime([254]) - Scalar::ONE);
        for c in [1, 2, 5, 8, 13, 16, 20, 23] {
            let half = 1i32 << (c - 1);
            for k in &scalars {
                let d = signed_digits(&le(k), c);
                assert_eq!(d.len() as u32, windows(c));
                assert!(d.iter().all(|&x| -half < x && x <= half), "c = {c}: {d:?}");
                assert_eq!(recompose(&d, c), *k, "c = {c}");
            }
        }
        assert_eq!(signed_digits(&le(&Scalar::from(7u64)), 2), {
            // 7 = 3 + 1·4: 3 > 2, so -1 and a carry; then 1 + 1 = 2.
            let mut v = vec![-1, 2];
            v.resize(windows(2) as usize, 0);
            v
        });
    }

    #[test]
    fn a_plan_keeps_the_most_copies_the_memory_holds() {
        let (n, g1) = (1u64 << 27, 96);
        let one = n * g1;
        let p = TablePlan::for_memory(n, g1, 16, one).unwrap();
        assert_eq!((p.windows, p.group, p.copies, p.table_bytes), (16, 16, 1, one));
        let p = TablePlan::for_memory(n, g1, 16, 4 * one).unwrap();
        assert_eq!((p.group, p.copies), (4, 4));
        let p = TablePlan::for_memory(n, g1, 16, 5 * one - 1).unwrap();
        assert_eq!((p.group, p.copies), (4, 4), "5 copies take 4 groups anyway");
        let p = TablePlan::for_memory(n, g1, 16, u64::MAX).unwrap();
        assert_eq!((p.group, p.copies), (1, 16));
        assert_eq!(TablePlan::for_memory(n, g1, 16, one - 1), None);
        // Windows of 13 bits: 20 windows; 3 per copy leaves 7 copies.
        let p = TablePlan::with_group(n, g1, 13, 3);
        assert_eq!(
            (p.windows, p.copies, p.place(19), p.doublings_per_copy()),
            (20, 7, (6, 1), 39)
        );
    }

    fn check<G: PrimeCurve>(bases: &[G::Affine], scalars: &[G::Scalar], expected: G, what: &str) {
        for c in [3, 7] {
            for group in [1, 2, windows(c)] {
                let plan = TablePlan::with_group(bases.len() as u64, 96, c, group);
                let table = build_table::<G>(bases, &plan);
                assert_eq!(
                    msm_with_table::<G>(&table, scalars, &plan),
                    expected,
                    "{what}: c = {c}, group = {group}"
                );
            }
        }
    }

    #[test]
    fn the_table_gives_the_msm_of_every_scalar_mix() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let n = 60;
        let bases: Vec<G1Affine> = (0..n).map(|_| G1Projective::random(&mut rng).to_affine()).collect();
        let random: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        // Filecoin-like: mostly bits, some small values, a few full width.
        let filecoin: Vec<Scalar> = (0..n as u64)
            .map(|i| match i % 5 {
                0 | 1 => Scalar::from(i % 2),
                2 => Scalar::ONE,
                3 => Scalar::from(i * 1_000_003),
                _ => Scalar::random(&mut rng),
            })
            .collect();
        for (what, scalars) in [("random", &random), ("filecoin-like", &filecoin)] {
            let expected: G1Projective = bases.iter().zip(scalars).map(|(p, k)| G1Projective::from(p) * k).sum();
            check::<G1Projective>(&bases, scalars, expected, what);
        }
        let bases: Vec<G2Affine> = (0..12).map(|_| G2Projective::random(&mut rng).to_affine()).collect();
        let scalars: Vec<Scalar> = (0..12).map(|_| Scalar::random(&mut rng)).collect();
        let expected: G2Projective = bases.iter().zip(&scalars).map(|(p, k)| G2Projective::from(p) * k).sum();
        check::<G2Projective>(&bases, &scalars, expected, "G2");
    }
}
