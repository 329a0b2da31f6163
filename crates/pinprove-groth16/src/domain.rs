//! Radix-2 FFTs over the scalar field, and the h polynomial of a proof.
//!
//! The h computation chains an inverse FFT, a coset FFT and an inverse coset
//! FFT. Pairing a decimation-in-frequency inverse transform (natural order
//! in, bit-reversed out) with a decimation-in-time forward transform
//! (bit-reversed in, natural out) removes every bit-reversal permutation:
//! the coset shift is applied to the coefficients where they lie, in
//! bit-reversed order, and the final coefficients of h are read through the
//! permutation when they are converted for the MSM.
//!
//! Twiddles come from one table of ω^j (j < n/2); inverse twiddles use
//! ω^-j = -ω^(n/2-j). The first levels of each transform run block by block
//! on cache-sized blocks with compact per-level tables; the levels above
//! them run a few at a time on column blocks (see [`for_each_column_block`]),
//! so a transform of 2^22 scalars passes over memory three times, not
//! eleven.

use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::{ProveError, Scalar};

/// Levels whose butterflies stay inside blocks of 2^LOCAL_LOG elements run
/// per block (128 KiB of scalars: fits in L2).
const LOCAL_LOG: u32 = 12;
/// Elements per parallel task in element-wise passes.
const CHUNK: usize = 1 << 13;
/// Levels above the per-block ones are done this many at a time, in one
/// pass over memory instead of one pass per level.
const PASS_LEVELS: u32 = 5;
/// Columns of one task of such a pass: 2^PASS_LEVELS rows of this many
/// scalars (256 KiB) stay in L2 while their levels are done.
const COLUMNS: usize = 256;

/// The size of the evaluation domain a circuit of `constraints` constraints
/// (Groth16's input constraints included) is proved over: the smallest power
/// of two holding them, at least 1. This is bellperson's domain, and what a
/// parameter file's h query pins down (its length is the size less one).
/// Larger than the scalar field's largest two-adic subgroup is an error.
pub fn domain_size(constraints: usize) -> Result<usize, ProveError> {
    constraints
        .max(1)
        .checked_next_power_of_two()
        .filter(|n| n.trailing_zeros() <= Scalar::S)
        .ok_or(ProveError::DomainTooLarge {
            constraints,
            max_log2: Scalar::S,
        })
}

/// An evaluation domain of size n = 2^k and its precomputed twiddles.
#[derive(Debug)]
pub struct Domain {
    log_n: u32,
    n: usize,
    n_inv: Scalar,
    /// ω^j for j < n/2.
    twiddles: Vec<Scalar>,
    /// Forward twiddles of the levels done per block: level m (a power of
    /// two below the block size) at offset m - 1, m entries ω_2m^j.
    local_fwd: Vec<Scalar>,
    /// Inverse twiddles of those levels, same layout.
    local_inv: Vec<Scalar>,
}

impl Domain {
    /// The smallest domain holding `len` evaluations (at least one).
    pub fn new(len: usize) -> Result<Domain, ProveError> {
        let n = domain_size(len)?;
        let log_n = n.trailing_zeros();
        let omega = (0..Scalar::S - log_n).fold(Scalar::ROOT_OF_UNITY, |w, _| w.square());
        let twiddles = powers(omega, n / 2);
        let local_len = n.min(1 << LOCAL_LOG);
        let (mut local_fwd, mut local_inv) = (Vec::new(), Vec::new());
        let mut m = 1;
        while m < local_len {
            let stride = n / (2 * m);
            for j in 0..m {
                local_fwd.push(twiddles[j * stride]);
                local_inv.push(inverse_twiddle(&twiddles, n, j * stride));
            }
            m *= 2;
        }
        let n_inv = Scalar::from(n as u64).invert().expect("n is non-zero in the field");
        Ok(Domain {
            log_n,
            n,
            n_inv,
            twiddles,
            local_fwd,
            local_inv,
        })
    }

    /// n.
    pub fn size(&self) -> usize {
        self.n
    }

    /// log2(n).
    pub fn log_size(&self) -> u32 {
        self.log_n
    }

    /// The coset shift g (the field's multiplicative generator).
    pub fn coset_generator() -> Scalar {
        Scalar::MULTIPLICATIVE_GENERATOR
    }

    /// Bytes of the twiddle tables.
    pub fn table_bytes(&self) -> usize {
        32 * (self.twiddles.len() + self.local_fwd.len() + self.local_inv.len())
    }

    /// Forward transform, natural order in and out (evaluations at ω^k of
    /// the polynomial with coefficients `a`).
    pub fn fft(&self, a: &mut [Scalar]) {
        self.check(a);
        bit_reverse(a);
        self.dit(a);
    }

    /// Inverse transform, natural order in and out.
    pub fn ifft(&self, a: &mut [Scalar]) {
        self.check(a);
        self.dif_inverse(a);
        let n_inv = self.n_inv;
        a.par_iter_mut().with_min_len(CHUNK).for_each(|x| *x *= n_inv);
        bit_reverse(a);
    }

    /// Evaluations on the coset g·ω^k of the polynomial interpolating the
    /// evaluations `a` on ω^k, in natural order: an inverse FFT followed by
    /// a coset FFT, with no permutation in between.
    pub fn evaluations_to_coset(&self, a: &mut [Scalar]) {
        self.check(a);
        self.dif_inverse(a);
        self.scale_bit_reversed(a, Scalar::MULTIPLICATIVE_GENERATOR);
        self.dit(a);
    }

    /// Coefficients, in bit-reversed order, of the polynomial whose
    /// evaluations on the coset g·ω^k are `a` (natural order): the inverse
    /// coset FFT without its final permutation. Read coefficient i at
    /// `bit_reverse_index(i, log_size)`.
    pub fn coset_to_coefficients_bit_reversed(&self, a: &mut [Scalar]) {
        self.check(a);
        self.dif_inverse(a);
        let g_inv = Scalar::MULTIPLICATIVE_GENERATOR
            .invert()
            .expect("generator is non-zero");
        self.scale_bit_reversed(a, g_inv);
    }

    /// 1 / Z(g) where Z(x) = x^n - 1 vanishes on the domain: dividing by Z on
    /// the coset is a multiplication by this constant.
    pub fn z_on_coset_inverse(&self) -> Scalar {
        let gn = Scalar::MULTIPLICATIVE_GENERATOR.pow_vartime([self.n as u64]);
        (gn - Scalar::ONE)
            .invert()
            .expect("g^n != 1 for a non-residue generator")
    }

    /// The levels above the per-block ones, lowest first, as (log2 of the
    /// lowest level's half-size, number of levels) of each pass.
    fn passes(&self) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut a_log = LOCAL_LOG.min(self.log_n);
        while a_log < self.log_n {
            let k = PASS_LEVELS.min(self.log_n - a_log);
            out.push((a_log, k));
            a_log += k;
        }
        out
    }

    fn check(&self, a: &[Scalar]) {
        assert_eq!(a.len(), self.n, "vector length differs from the domain size");
    }

    /// Multiplies the coefficient at bit-reversed position p (coefficient
    /// index rev(p)) by n⁻¹·shift^rev(p).
    ///
    /// With p = hi·L + lo, rev(p) = rev(lo)·(n/L) + rev(hi), so the factor is
    /// a per-block constant times an entry of an L-element table.
    fn scale_bit_reversed(&self, a: &mut [Scalar], shift: Scalar) {
        let block = self.n.min(1 << LOCAL_LOG);
        let k = block.trailing_zeros();
        let hi_bits = self.log_n - k;
        let step = shift.pow_vartime([(self.n / block) as u64]);
        let lo_powers = powers(step, block);
        let n_inv = self.n_inv;
        a.par_chunks_mut(block).enumerate().for_each(|(hi, chunk)| {
            let block_factor = shift.pow_vartime([reverse_bits(hi, hi_bits) as u64]) * n_inv;
            for (lo, x) in chunk.iter_mut().enumerate() {
                *x *= lo_powers[reverse_bits(lo, k)] * block_factor;
            }
        });
    }

    /// Decimation in time: bit-reversed input, natural output, forward twiddles.
    fn dit(&self, a: &mut [Scalar]) {
        let n = self.n;
        let block = n.min(1 << LOCAL_LOG);
        let local = &self.local_fwd;
        a.par_chunks_mut(block).for_each(|blk| {
            let mut m = 1;
            while m < block {
                let tw = &local[m - 1..2 * m - 1];
                for pair in blk.chunks_mut(2 * m) {
                    let (lo, hi) = pair.split_at_mut(m);
                    for ((x, y), w) in lo.iter_mut().zip(hi.iter_mut()).zip(tw) {
                        let t = *y * w;
                        *y = *x - t;
                        *x += t;
                    }
                }
                m *= 2;
            }
        });
        let tw = &self.twiddles;
        for (a_log, k) in self.passes() {
            for_each_column_block(a, a_log, k, |c0, rows| {
                for l in 0..k {
                    let stride = n >> (a_log + l + 1);
                    for_each_row_pair(rows, a_log, l, c0, |j0, xs, ys| {
                        for (c, (x, y)) in xs.iter_mut().zip(ys.iter_mut()).enumerate() {
                            let p = *y * tw[(j0 + c) * stride];
                            *y = *x - p;
                            *x += p;
                        }
                    });
                }
            });
        }
    }

    /// Decimation in frequency with inverse twiddles: natural input,
    /// bit-reversed output, not scaled by 1/n.
    fn dif_inverse(&self, a: &mut [Scalar]) {
        let n = self.n;
        let block = n.min(1 << LOCAL_LOG);
        let tw = &self.twiddles;
        for (a_log, k) in self.passes().into_iter().rev() {
            for_each_column_block(a, a_log, k, |c0, rows| {
                for l in (0..k).rev() {
                    let stride = n >> (a_log + l + 1);
                    for_each_row_pair(rows, a_log, l, c0, |j0, xs, ys| {
                        for (c, (x, y)) in xs.iter_mut().zip(ys.iter_mut()).enumerate() {
                            let (u, v) = (*x, *y);
                            *x = u + v;
                            let idx = (j0 + c) * stride;
                            // ω^-idx = -ω^(n/2 - idx), so (u - v)·ω^-idx = (v - u)·ω^(n/2-idx).
                            *y = if idx == 0 { u - v } else { (v - u) * tw[n / 2 - idx] };
                        }
                    });
                }
            });
        }
        let local = &self.local_inv;
        a.par_chunks_mut(block).for_each(|blk| {
            let mut m = block / 2;
            while m >= 1 {
                let tw = &local[m - 1..2 * m - 1];
                for pair in blk.chunks_mut(2 * m) {
                    let (lo, hi) = pair.split_at_mut(m);
                    for ((x, y), w) in lo.iter_mut().zip(hi.iter_mut()).zip(tw) {
                        let (u, v) = (*x, *y);
                        *x = u + v;
                        *y = (u - v) * w;
                    }
                }
                m /= 2;
            }
        });
    }
}

/// Runs `f(c0, rows)` over the column blocks of one pass of `k` levels whose
/// lowest has half-size 2^a_log.
///
/// Those levels mix only the elements h·2^(a+k) + t·2^a + r for t < 2^k, with
/// h and r fixed: viewed as 2^k rows of 2^a scalars per span of 2^(a+k), they
/// act on each column alone. A task gets `COLUMNS` adjacent columns (r from
/// `c0`) of one span as its 2^k row pieces, small enough to stay in cache
/// while all k levels are done, and tasks run in parallel.
fn for_each_column_block(a: &mut [Scalar], a_log: u32, k: u32, f: impl Fn(usize, &mut [&mut [Scalar]]) + Sync) {
    let row_len = 1usize << a_log;
    let cols = row_len.min(COLUMNS);
    let mut tasks: Vec<(usize, Vec<&mut [Scalar]>)> = Vec::with_capacity((a.len() / cols) >> k);
    for span in a.chunks_mut(row_len << k) {
        let mut blocks: Vec<Vec<&mut [Scalar]>> = (0..row_len / cols).map(|_| Vec::with_capacity(1 << k)).collect();
        for row in span.chunks_mut(row_len) {
            for (block, piece) in blocks.iter_mut().zip(row.chunks_mut(cols)) {
                block.push(piece);
            }
        }
        tasks.extend(blocks.into_iter().enumerate().map(|(b, rows)| (b * cols, rows)));
    }
    tasks.into_par_iter().for_each(|(c0, mut rows)| f(c0, &mut rows));
}

/// Runs `f(j0, xs, ys)` over the butterfly pairs of rows of level l in a
/// column block (see [`for_each_column_block`]): rows t and t + 2^l with bit
/// l of t clear. Column c of row t sits at j0 + c = (t mod 2^l)·2^a + c0 + c
/// within its butterfly block of level 2^(a+l).
fn for_each_row_pair(
    rows: &mut [&mut [Scalar]],
    a_log: u32,
    l: u32,
    c0: usize,
    mut f: impl FnMut(usize, &mut [Scalar], &mut [Scalar]),
) {
    let half = 1usize << l;
    for t in (0..rows.len()).filter(|t| t & half == 0) {
        let (lo, hi) = rows.split_at_mut(t + half);
        f(((t & (half - 1)) << a_log) + c0, &mut *lo[t], &mut *hi[0]);
    }
}

fn inverse_twiddle(tw: &[Scalar], n: usize, idx: usize) -> Scalar {
    if idx == 0 { Scalar::ONE } else { -tw[n / 2 - idx] }
}

/// `[1, x, x², …]`, `len` entries, computed in parallel chunks.
fn powers(x: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; len];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let mut acc = x.pow_vartime([(c * CHUNK) as u64]);
        for v in chunk {
            *v = acc;
            acc *= x;
        }
    });
    out
}

/// `i` with its lowest `bits` bits reversed.
#[inline]
pub fn reverse_bits(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Position of coefficient `i` after a transform that leaves bit-reversed
/// output, for a domain of size 2^log_n.
#[inline]
pub fn bit_reverse_index(i: usize, log_n: u32) -> usize {
    reverse_bits(i, log_n)
}

/// Permutes `a` (length a power of two) into bit-reversed order.
fn bit_reverse(a: &mut [Scalar]) {
    let log_n = a.len().trailing_zeros();
    for i in 0..a.len() {
        let r = reverse_bits(i, log_n);
        if i < r {
            a.swap(i, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::SeedableRng;

    fn random_vec(n: usize, seed: u64) -> Vec<Scalar> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut rng)).collect()
    }

    fn naive_dft(a: &[Scalar], omega: Scalar) -> Vec<Scalar> {
        let n = a.len();
        (0..n)
            .map(|k| {
                let wk = omega.pow_vartime([k as u64]);
                let mut acc = Scalar::ZERO;
                let mut w = Scalar::ONE;
                for x in a {
                    acc += *x * w;
                    w *= wk;
                }
                acc
            })
            .collect()
    }

    fn omega_for(n: usize) -> Scalar {
        let log_n = n.trailing_zeros();
        (0..Scalar::S - log_n).fold(Scalar::ROOT_OF_UNITY, |w, _| w.square())
    }

    #[test]
    fn fft_matches_the_definition() {
        // Sizes below, at and above the per-block threshold.
        for log_n in [0u32, 1, 2, 3, 5, 8, 13] {
            let n = 1usize << log_n;
            let a = random_vec(n, log_n as u64);
            let d = Domain::new(n).unwrap();
            let mut got = a.clone();
            d.fft(&mut got);
            if n <= 256 {
                assert_eq!(got, naive_dft(&a, omega_for(n)), "n = {n}");
            }
            d.ifft(&mut got);
            assert_eq!(got, a, "round trip, n = {n}");
        }
    }

    #[test]
    fn fft_of_large_sizes_round_trips_and_evaluates() {
        // 2^14: one pass of two levels above the blocks; 2^18: a full pass
        // of PASS_LEVELS and a pass of one.
        for log_n in [14u32, 18] {
            let n = 1 << log_n;
            let a = random_vec(n, 99);
            let d = Domain::new(n).unwrap();
            let mut e = a.clone();
            d.fft(&mut e);
            // Check a few evaluations by Horner's rule.
            let omega = omega_for(n);
            for k in [0usize, 1, 7, 4097, n / 2 + 3, n - 1] {
                let x = omega.pow_vartime([k as u64]);
                let horner = a.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
                assert_eq!(e[k], horner, "k = {k}, n = {n}");
            }
            d.ifft(&mut e);
            assert_eq!(e, a, "round trip, n = {n}");
        }
    }

    #[test]
    fn coset_paths_match_the_plain_transforms() {
        for log_n in [0u32, 3, 12, 14, 18] {
            let n = 1usize << log_n;
            let d = Domain::new(n).unwrap();
            let evals = random_vec(n, 7 + log_n as u64);
            let g = Scalar::MULTIPLICATIVE_GENERATOR;

            // Reference: ifft, multiply coefficient i by g^i, fft.
            let mut expect = evals.clone();
            d.ifft(&mut expect);
            let mut gi = Scalar::ONE;
            for c in expect.iter_mut() {
                *c *= gi;
                gi *= g;
            }
            d.fft(&mut expect);

            let mut got = evals.clone();
            d.evaluations_to_coset(&mut got);
            assert_eq!(got, expect, "coset evaluations, n = {n}");

            // And back: coefficients of the original polynomial, bit-reversed.
            d.coset_to_coefficients_bit_reversed(&mut got);
            let mut coeffs = evals.clone();
            d.ifft(&mut coeffs);
            for (i, c) in coeffs.iter().enumerate() {
                assert_eq!(got[bit_reverse_index(i, log_n)], *c, "coefficient {i}, n = {n}");
            }
        }
    }

    #[test]
    fn z_on_coset() {
        let d = Domain::new(1 << 5).unwrap();
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        assert_eq!(
            d.z_on_coset_inverse() * (g.pow_vartime([32u64]) - Scalar::ONE),
            Scalar::ONE
        );
    }

    #[test]
    fn sizes_round_up_and_are_bounded() {
        assert_eq!(Domain::new(0).unwrap().size(), 1);
        assert_eq!(Domain::new(5).unwrap().size(), 8);
        assert_eq!(Domain::new(1 << 10).unwrap().size(), 1 << 10);
        assert!(matches!(
            Domain::new(usize::MAX),
            Err(ProveError::DomainTooLarge { .. })
        ));
        assert!(matches!(
            Domain::new((1 << 32) + 1),
            Err(ProveError::DomainTooLarge { .. })
        ));
    }
}
