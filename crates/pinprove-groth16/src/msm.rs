//! Multi-scalar multiplication on the CPU, through blst's Pippenger.
//!
//! Scalars are passed as canonical little-endian bytes. Witnesses of
//! hash-heavy circuits are mostly 0 and 1: zeros contribute nothing, and the
//! bases of ones are summed by blst's batched affine addition, which is far
//! cheaper than a Pippenger pass over 255-bit scalars. The split pays off
//! only when such scalars are common, so it is taken above a threshold.

use blst::{MultiPoint, blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Projective, G2Projective};
use group::Group;
use rayon::prelude::*;

use crate::{Density, Scalar};

/// A scalar in canonical little-endian form.
pub type ScalarBytes = [u8; 32];

const SCALAR_BITS: usize = 255;
/// Split off zeros and ones when at least this fraction of scalars are.
const TRIVIAL_SPLIT_THRESHOLD: f64 = 0.25;

/// What a scalar contributes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Zero,
    One,
    Other,
}

#[inline]
fn kind(s: &ScalarBytes) -> Kind {
    let rest_zero = s[1..].iter().all(|&b| b == 0);
    match (s[0], rest_zero) {
        (0, true) => Kind::Zero,
        (1, true) => Kind::One,
        _ => Kind::Other,
    }
}

/// Canonical bytes of `scalars`, in parallel.
pub fn to_bytes(scalars: &[Scalar]) -> Vec<ScalarBytes> {
    scalars.par_iter().with_min_len(4096).map(Scalar::to_bytes_le).collect()
}

/// The entries of `scalars` whose bit in `density` is set, in order.
pub fn select(scalars: &[ScalarBytes], density: &Density) -> Vec<ScalarBytes> {
    let mut out = Vec::with_capacity(density.total());
    out.extend(density.iter_ones().filter_map(|i| scalars.get(i)).copied());
    out
}

/// How a multi-scalar multiplication went, for instrumentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsmShape {
    /// Points in the MSM.
    pub points: usize,
    /// Scalars equal to zero.
    pub zeros: usize,
    /// Scalars equal to one.
    pub ones: usize,
    /// Whether zeros and ones were split off the Pippenger pass.
    pub split: bool,
}

macro_rules! msm_impl {
    ($name:ident, $affine:ty, $proj_raw:ty, $proj:ty) => {
        /// Σ scalars[i]·bases[i]. Both slices must have the same length.
        pub fn $name(bases: &[$affine], scalars: &[ScalarBytes]) -> ($proj, MsmShape) {
            assert_eq!(
                bases.len(),
                scalars.len(),
                "MSM bases and scalars differ in length"
            );
            let kinds: (usize, usize) = scalars
                .par_iter()
                .with_min_len(4096)
                .map(|s| match kind(s) {
                    Kind::Zero => (1, 0),
                    Kind::One => (0, 1),
                    Kind::Other => (0, 0),
                })
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            let mut shape = MsmShape {
                points: bases.len(),
                zeros: kinds.0,
                ones: kinds.1,
                split: false,
            };
            let trivial = (kinds.0 + kinds.1) as f64;
            let raw: $proj_raw = if bases.is_empty() {
                <$proj_raw>::default()
            } else if trivial < TRIVIAL_SPLIT_THRESHOLD * bases.len() as f64 {
                bases.mult(scalars.as_flattened(), SCALAR_BITS)
            } else {
                shape.split = true;
                let mut ones: Vec<$affine> = Vec::with_capacity(kinds.1);
                let mut other_bases: Vec<$affine> = Vec::new();
                let mut other_scalars: Vec<ScalarBytes> = Vec::new();
                for (b, s) in bases.iter().zip(scalars) {
                    match kind(s) {
                        Kind::Zero => {}
                        Kind::One => ones.push(*b),
                        Kind::Other => {
                            other_bases.push(*b);
                            other_scalars.push(*s);
                        }
                    }
                }
                let mut acc = <$proj>::identity();
                if !ones.is_empty() {
                    acc += from_raw::<$proj, $proj_raw>(ones.as_slice().add());
                }
                if !other_bases.is_empty() {
                    acc += from_raw::<$proj, $proj_raw>(
                        other_bases
                            .as_slice()
                            .mult(other_scalars.as_flattened(), SCALAR_BITS),
                    );
                }
                return (acc, shape);
            };
            (from_raw::<$proj, $proj_raw>(raw), shape)
        }
    };
}

msm_impl!(g1_msm, blst_p1_affine, blst_p1, G1Projective);
msm_impl!(g2_msm, blst_p2_affine, blst_p2, G2Projective);

/// Wraps a raw blst point into the blstrs type (which is a transparent
/// wrapper exposing `AsMut` to its raw point).
fn from_raw<P: Group + AsMut<R>, R>(raw: R) -> P {
    let mut p = P::identity();
    *p.as_mut() = raw;
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Affine, G2Affine};
    use ff::Field;
    use group::Curve;
    use rand_chacha::ChaCha8Rng;
    use rand_core::SeedableRng;

    fn naive_g1(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        bases.iter().zip(scalars).map(|(b, s)| G1Projective::from(b) * s).sum()
    }

    fn case(n: usize, bitty: bool, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pts: Vec<G1Affine> = (0..n).map(|_| G1Projective::random(&mut rng).to_affine()).collect();
        let pts2: Vec<G2Affine> = (0..n).map(|_| G2Projective::random(&mut rng).to_affine()).collect();
        let scalars: Vec<Scalar> = (0..n)
            .map(|i| {
                if bitty && i % 10 != 0 {
                    Scalar::from((i % 3 == 0) as u64)
                } else {
                    Scalar::random(&mut rng)
                }
            })
            .collect();
        let bytes = to_bytes(&scalars);
        let raw: Vec<blst_p1_affine> = pts.iter().map(|p| *p.as_ref()).collect();
        let (got, shape) = g1_msm(&raw, &bytes);
        assert_eq!(got, naive_g1(&pts, &scalars), "G1 n={n} bitty={bitty}");
        assert_eq!(shape.split, bitty && n > 0);
        let raw2: Vec<blst_p2_affine> = pts2.iter().map(|p| *p.as_ref()).collect();
        let (got2, _) = g2_msm(&raw2, &bytes);
        let want2: G2Projective = pts2.iter().zip(&scalars).map(|(b, s)| G2Projective::from(b) * s).sum();
        assert_eq!(got2, want2, "G2 n={n} bitty={bitty}");
    }

    #[test]
    fn msm_matches_naive_sums() {
        for (n, bitty) in [
            (0, false),
            (1, false),
            (2, true),
            (31, false),
            (33, true),
            (300, false),
            (300, true),
        ] {
            case(n, bitty, n as u64);
        }
    }

    #[test]
    fn selection_follows_density() {
        let s: Vec<ScalarBytes> = (0..10u8).map(|i| [i; 32]).collect();
        let mut d = Density::new();
        for _ in 0..10 {
            d.add_element();
        }
        d.inc(1);
        d.inc(7);
        assert_eq!(select(&s, &d), vec![[1; 32], [7; 32]]);
    }
}
