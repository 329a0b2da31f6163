//! Multiples of one fixed base, by table lookup.
//!
//! A setup multiplies one base point by millions of scalars. With the
//! multiples `j·2^(w·k)·P` (j ≤ 2^(w−1)) of every w-bit window k computed
//! once, a product is one mixed addition per window of the scalar's signed
//! digits, with no doubling at all: 16 additions for w = 16, where a
//! double-and-add costs about 255 doublings and 255/(w+1) additions.

use blst::{blst_p1, blst_p2, p1_affines, p2_affines};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group, UncompressedEncoding};
use rayon::prelude::*;

use crate::Scalar;

/// Bits of a scalar (the field's modulus is below 2^255).
const SCALAR_BITS: usize = 255;
/// The largest window: its G2 table alone takes 16 × 2^17 × 192 B = 384 MiB.
const MAX_WINDOW: usize = 18;
/// Points made affine with one field inversion; below blst's threshold for
/// spreading a conversion over its own threads (each batch already runs on
/// a core of its own).
const NORMALIZE_BATCH: usize = 512;

/// A curve group the setup works in: G1 or G2 of BLS12-381, with the affine
/// form it writes.
pub(crate) trait SetupGroup: Curve<AffineRepr = Self::Affine> + Group<Scalar = Scalar> + Send + Sync {
    /// The affine form.
    type Affine: PrimeCurveAffine + UncompressedEncoding + Copy + Default + Send + Sync;
    /// `points` in affine form, with one inversion for all of them (the
    /// group crate's default inverts once per point).
    fn normalize(points: &[Self], out: &mut [Self::Affine]);
}

impl SetupGroup for G1Projective {
    type Affine = G1Affine;
    fn normalize(points: &[Self], out: &mut [G1Affine]) {
        assert_eq!(points.len(), out.len(), "one affine point per projective point");
        if points.is_empty() {
            return;
        }
        let raw: Vec<blst_p1> = points.iter().map(|p| *p.as_ref()).collect();
        for (o, a) in out.iter_mut().zip(p1_affines::from(&raw).as_slice()) {
            *o.as_mut() = *a;
        }
    }
}

impl SetupGroup for G2Projective {
    type Affine = G2Affine;
    fn normalize(points: &[Self], out: &mut [G2Affine]) {
        assert_eq!(points.len(), out.len(), "one affine point per projective point");
        if points.is_empty() {
            return;
        }
        let raw: Vec<blst_p2> = points.iter().map(|p| *p.as_ref()).collect();
        for (o, a) in out.iter_mut().zip(p2_affines::from(&raw).as_slice()) {
            *o.as_mut() = *a;
        }
    }
}

/// Converts `points` to affine in batches of one inversion each.
pub(crate) fn normalize<G: SetupGroup>(points: &[G], out: &mut [G::Affine]) {
    for (p, o) in points.chunks(NORMALIZE_BATCH).zip(out.chunks_mut(NORMALIZE_BATCH)) {
        G::normalize(p, o);
    }
}

/// The window that minimizes the additions for `n` products: building the
/// table (2^(w−1) per window) plus one addition per window and product.
pub(crate) fn window_for(n: usize) -> usize {
    (2..=MAX_WINDOW)
        .min_by_key(|&w| windows(w) as u128 * ((1u128 << (w - 1)) + n as u128))
        .unwrap_or(MAX_WINDOW)
}

/// Windows of `w` bits a scalar's signed digits take. A carry out of the
/// top window needs one more only when the top window is full.
fn windows(w: usize) -> usize {
    SCALAR_BITS.div_ceil(w) + usize::from(SCALAR_BITS.is_multiple_of(w))
}

/// The signed w-bit digits of `s`, least significant first: each in
/// [−2^(w−1), 2^(w−1)], Σ dₖ·2^(w·k) = s.
fn signed_digits(s: &Scalar, w: usize, out: &mut [i32]) {
    let bytes = s.to_bytes_le();
    let limbs: [u64; 4] = std::array::from_fn(|i| {
        u64::from_le_bytes(
            bytes[8 * i..8 * i + 8]
                .try_into()
                .unwrap_or_else(|_| unreachable!("8 bytes")),
        )
    });
    let bits = |at: usize| -> u64 {
        // w ≤ 18 bits starting at `at`, across at most two limbs.
        let (limb, shift) = (at / 64, at % 64);
        let mut v = limbs.get(limb).copied().unwrap_or(0) >> shift;
        if shift + w > 64 {
            v |= limbs.get(limb + 1).copied().unwrap_or(0) << (64 - shift);
        }
        v & ((1 << w) - 1)
    };
    let half = 1i64 << (w - 1);
    let mut carry = 0i64;
    for (k, d) in out.iter_mut().enumerate() {
        let mut v = bits(k * w) as i64 + carry;
        carry = 0;
        if v > half {
            v -= 1 << w;
            carry = 1;
        }
        *d = v as i32;
    }
    debug_assert_eq!(carry, 0, "the windows hold every scalar");
}

/// The table of one base: `tables[k][j − 1] = j·2^(w·k)·P` for 1 ≤ j ≤ 2^(w−1).
pub(crate) struct FixedBase<G: SetupGroup> {
    window: usize,
    tables: Vec<Vec<G::Affine>>,
}

impl<G: SetupGroup> FixedBase<G> {
    /// The table of `base`, its window sized for about `n` products.
    pub(crate) fn new(base: G, n: usize) -> Self {
        let window = window_for(n);
        let entries = 1usize << (window - 1);
        // The windows' first multiples, one doubling run; then each window's
        // table on its own core.
        let mut firsts = Vec::with_capacity(windows(window));
        let mut p = base;
        for _ in 0..windows(window) {
            firsts.push(p);
            for _ in 0..window {
                p = p.double();
            }
        }
        let tables = firsts
            .into_par_iter()
            .map(|first| {
                let mut proj = Vec::with_capacity(entries);
                let mut acc = first;
                for _ in 0..entries {
                    proj.push(acc);
                    acc += first;
                }
                let mut table = vec![G::Affine::default(); entries];
                normalize::<G>(&proj, &mut table);
                table
            })
            .collect();
        FixedBase { window, tables }
    }

    /// Bytes of the table.
    pub(crate) fn bytes(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum::<usize>() * std::mem::size_of::<G::Affine>()
    }

    /// `s·P`.
    pub(crate) fn mul(&self, s: &Scalar, digits: &mut [i32]) -> G {
        signed_digits(s, self.window, digits);
        let mut acc = G::identity();
        for (table, &d) in self.tables.iter().zip(digits.iter()) {
            match d {
                0 => {}
                d if d > 0 => acc += &table[d as usize - 1],
                d => acc -= &table[(-d) as usize - 1],
            }
        }
        acc
    }

    /// `s·P` for every scalar, in affine form, on every core.
    pub(crate) fn mul_all(&self, scalars: &[Scalar], out: &mut [G::Affine]) {
        assert_eq!(scalars.len(), out.len(), "one point per scalar");
        scalars
            .par_chunks(NORMALIZE_BATCH)
            .zip(out.par_chunks_mut(NORMALIZE_BATCH))
            .for_each(|(s, o)| {
                let mut digits = vec![0i32; self.tables.len()];
                let proj: Vec<G> = s.iter().map(|s| self.mul(s, &mut digits)).collect();
                normalize::<G>(&proj, o);
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn check<G: SetupGroup + std::fmt::Debug>(n: usize) {
        let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
        let base = G::random(&mut rng);
        let table = FixedBase::<G>::new(base, n);
        let mut scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        // The edges of the digit recoding: zero, small, the largest scalar,
        // every window at its half and at its top.
        scalars.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(1u64 << 17)]);
        let w = table.window;
        scalars.push(Scalar::from(1u64 << (w - 1)));
        scalars.push(Scalar::from((1u64 << w) - 1));
        scalars.push(-Scalar::from(1u64 << (w - 1)));
        let mut out = vec![G::Affine::default(); scalars.len()];
        table.mul_all(&scalars, &mut out);
        for (s, got) in scalars.iter().zip(&out) {
            assert_eq!(*got, (base * s).to_affine(), "{}: {s:?}", std::any::type_name::<G>());
        }
    }

    #[test]
    fn table_products_equal_scalar_multiplication_in_both_groups() {
        for n in [1, 50, 3000] {
            check::<G1Projective>(n);
        }
        check::<G2Projective>(200);
    }

    #[test]
    fn signed_digits_sum_back_to_the_scalar_for_every_window() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for w in 2..=MAX_WINDOW {
            let mut digits = vec![0i32; windows(w)];
            for s in [
                Scalar::ZERO,
                -Scalar::ONE,
                Scalar::random(&mut rng),
                Scalar::random(&mut rng),
            ] {
                signed_digits(&s, w, &mut digits);
                let half = 1i32 << (w - 1);
                assert!(digits.iter().all(|d| (-half..=half).contains(d)), "w = {w}: {digits:?}");
                let radix = Scalar::from(1u64 << w);
                let back = digits.iter().rev().fold(Scalar::ZERO, |acc, &d| {
                    let d = if d < 0 {
                        -Scalar::from((-d) as u64)
                    } else {
                        Scalar::from(d as u64)
                    };
                    acc * radix + d
                });
                assert_eq!(back, s, "w = {w}");
            }
        }
    }

    #[test]
    fn normalization_matches_the_group_crate_and_keeps_the_identity() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut points: Vec<G1Projective> = (0..20).map(|_| G1Projective::random(&mut rng)).collect();
        points[5] = G1Projective::identity();
        let mut out = vec![G1Affine::default(); points.len()];
        normalize::<G1Projective>(&points, &mut out);
        for (p, a) in points.iter().zip(&out) {
            assert_eq!(*a, p.to_affine());
        }
    }

    #[test]
    fn larger_batches_get_larger_windows() {
        assert!(window_for(10) < window_for(10_000));
        assert!(window_for(10_000) < window_for(10_000_000));
        assert!(window_for(usize::MAX / 4) <= MAX_WINDOW);
    }
}
