//! Synthetic parameters: valid points in the right shape, fast to make.
//!
//! A real setup for 2^24 constraints takes hours; benchmarks of large
//! circuits only need parameters of the right shape whose points are valid
//! curve points. These are the multiples (i+1)·G of the generators (from
//! 2^24 points on, repeating; see `G1_PERIOD`), written in bellperson's
//! format. Proofs made with them do not verify (the points
//! share no toxic waste); timings are real.

use std::io::{self, Write};
use std::sync::Arc;

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::{Curve, Group, UncompressedEncoding};
use pinprove_mem::{PinnedPool, PinnedVec, Reservation};
use rayon::prelude::*;

use crate::setup::fixed_base::{SetupGroup, normalize};
use crate::shape::CircuitShape;
use crate::{ParamsError, Scalar, VerifyingKey};

const CHUNK: usize = 1 << 14;
const BATCH: usize = 64 * CHUNK;

/// Synthetic points repeat with these periods: point i of a query is
/// ((i mod period) + 1)·G. Computing a point costs microseconds, so a
/// 32 GiB PoRep's 460 M points would take minutes; repeating keeps that to
/// seconds, and the MSMs still see as many points (the bases are data to
/// them; a repeated base only changes results, which do not verify anyway).
const G1_PERIOD: usize = 1 << 24;
const G2_PERIOD: usize = 1 << 22;

/// Bytes of one point's uncompressed encoding.
fn encoded_len<G: Curve>() -> usize
where
    G::AffineRepr: UncompressedEncoding,
{
    <G::AffineRepr as UncompressedEncoding>::Uncompressed::default()
        .as_ref()
        .len()
}

/// The encodings of (first+1)·G … (first+n)·G.
fn multiples<G>(first: usize, n: usize) -> Vec<u8>
where
    G: SetupGroup,
{
    let mut points = vec![G::AffineRepr::default(); n];
    fill::<G, _>(first, &mut points, |a| *a);
    let size = encoded_len::<G>();
    let mut out = vec![0u8; n * size];
    out.par_chunks_mut(size)
        .zip(points.par_iter())
        .for_each(|(dst, a)| dst.copy_from_slice(a.to_uncompressed().as_ref()));
    out
}

/// The encodings of one period of a group's multiples at most, as far as
/// the sections written so far needed them: later sections (and a
/// section's later periods) write them again instead of computing them
/// (2^26 constraints: a sixteenth of the points computed). Up to 1.5 GiB
/// for G1, 768 MiB for G2.
#[derive(Default)]
struct Encoded {
    bytes: Vec<u8>,
}

impl Encoded {
    /// Writes the encodings of points `at..at + n` of a period of
    /// `period` points of `size` bytes (`at + n <= period`), computing with
    /// `make(first, count)` those not encoded yet.
    fn write(
        &mut self,
        w: &mut impl Write,
        at: usize,
        n: usize,
        size: usize,
        make: impl Fn(usize, usize) -> Vec<u8>,
    ) -> io::Result<()> {
        // Sections run through a period from its start, so points up to
        // `at` are encoded already.
        let have = self.bytes.len() / size;
        if have < at + n {
            self.bytes.extend_from_slice(&make(have, at + n - have));
        }
        w.write_all(&self.bytes[at * size..(at + n) * size])
    }
}

/// A section of `n` points repeating with `period`, in batches.
fn section_of(
    w: &mut impl Write,
    n: usize,
    period: usize,
    size: usize,
    encoded: &mut Encoded,
    make: impl Fn(usize, usize) -> Vec<u8>,
) -> io::Result<()> {
    w.write_all(&(n as u32).to_be_bytes())?;
    let mut done = 0;
    while done < n {
        let at = done % period;
        let k = (n - done).min(BATCH).min(period - at);
        encoded.write(w, at, k, size, &make)?;
        done += k;
    }
    Ok(())
}

/// A section of `n` multiples of `G`'s generator, repeating with `period`.
fn section<G>(w: &mut impl Write, n: usize, period: usize, encoded: &mut Encoded) -> io::Result<()>
where
    G: SetupGroup,
{
    section_of(w, n, period, encoded_len::<G>(), encoded, multiples::<G>)
}

/// The synthetic verifying key: α = 2G₁, β = 3G, γ = 5G₂, δ = 7G, and
/// ic_i = (11 + i)G₁.
pub(crate) fn verifying_key(inputs: usize) -> VerifyingKey {
    let g1 = |k: u64| (G1Projective::generator() * Scalar::from(k)).to_affine();
    let g2 = |k: u64| (G2Projective::generator() * Scalar::from(k)).to_affine();
    VerifyingKey {
        alpha_g1: g1(2),
        beta_g1: g1(3),
        beta_g2: g2(3),
        gamma_g2: g2(5),
        delta_g1: g1(7),
        delta_g2: g2(7),
        ic: (0..inputs as u64).map(|i| g1(11 + i)).collect(),
    }
}

/// Fills `out` with (first+1)·G … (first+n)·G converted by `raw`, in
/// parallel chunks: one scalar multiplication per chunk, then mixed
/// additions of G, made affine with one inversion per few hundred points
/// (the group crate's `batch_normalize` inverts once per point: 2^20 G1
/// points took 1.8 s on two cores with it).
fn fill<G, R>(first: usize, out: &mut [R], raw: impl Fn(&G::AffineRepr) -> R + Sync)
where
    G: SetupGroup,
    R: Send,
{
    let g = G::generator().to_affine();
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, dst)| {
        let mut p = G::generator() * Scalar::from((first + c * CHUNK + 1) as u64);
        let mut proj = Vec::with_capacity(dst.len());
        for _ in 0..dst.len() {
            proj.push(p);
            p += g;
        }
        let mut aff = vec![G::Affine::default(); dst.len()];
        normalize(&proj, &mut aff);
        for (d, a) in dst.iter_mut().zip(&aff) {
            *d = raw(a);
        }
    });
}

/// Fills `out` with the G1 points (first+1)·G … (first+n)·G, all
/// distinct, in parallel: for benchmarks whose bases must not repeat (a
/// sum of a base with itself is a doubling, which batched affine additions
/// treat apart), and whose MSMs then have a reference by scalar arithmetic
/// alone: Σ kᵢ·(first+i+1)·G.
pub fn g1_multiples(first: usize, out: &mut [blst_p1_affine]) {
    fill::<G1Projective, _>(first, out, |a: &G1Affine| *a.as_ref());
}

/// The G2 points (first+1)·G … (first+n)·G (see [`g1_multiples`]).
pub fn g2_multiples(first: usize, out: &mut [blst_p2_affine]) {
    fill::<G2Projective, _>(first, out, |a: &G2Affine| *a.as_ref());
}

/// Copies `v[..period]` over the rest of `v`, again and again.
fn repeat<T: Copy + Send + Sync>(v: &mut [T], period: usize) {
    if period == 0 || v.len() <= period {
        return;
    }
    let (head, tail) = v.split_at_mut(period);
    tail.par_chunks_mut(period)
        .for_each(|c| c.copy_from_slice(&head[..c.len()]));
}

/// Synthetic sections of `lens` multiples of `G`'s generator (converted by
/// `raw`), repeating with `period`, in pool buffers (paid out of `funds`
/// when given, in order). The period is computed once, into the longest
/// section, and copied into the others and into later periods: every
/// section runs through the same multiples from its start (2^22
/// constraints on the 2-core machine: the parameters took 61.7 s with each
/// G1 section computed anew, 34.9 s with the period computed once).
fn sections<G, R>(
    lens: &[usize],
    period: usize,
    raw: impl Fn(&G::AffineRepr) -> R + Sync,
    pool: &Arc<PinnedPool>,
    mut funds: Option<&mut Reservation>,
) -> Result<Vec<PinnedVec<R>>, ParamsError>
where
    G: SetupGroup,
    R: Copy + Default + Send + Sync,
{
    let mut out = Vec::with_capacity(lens.len());
    for &n in lens {
        let mut v = PinnedVec::with_capacity_charged(n, pool, funds.as_deref_mut())?;
        v.try_resize(n, R::default())?;
        out.push(v);
    }
    let Some(longest) = (0..out.len()).max_by_key(|&i| out[i].len()) else {
        return Ok(out);
    };
    let period = out[longest].len().min(period);
    fill::<G, _>(0, &mut out[longest][..period], raw);
    let (before, rest) = out.split_at_mut(longest);
    if let Some((computed, after)) = rest.split_first_mut() {
        for v in before.iter_mut().chain(after) {
            let k = v.len().min(period);
            v[..k]
                .par_chunks_mut(CHUNK)
                .zip(computed[..k].par_chunks(CHUNK))
                .for_each(|(dst, src)| dst.copy_from_slice(src));
        }
    }
    for v in &mut out {
        repeat(v, period);
    }
    Ok(out)
}

/// Synthetic G1 sections of `lens` points (see [`sections`]).
pub(crate) fn g1_sections(
    lens: &[usize],
    pool: &Arc<PinnedPool>,
    funds: Option<&mut Reservation>,
) -> Result<Vec<PinnedVec<blst_p1_affine>>, ParamsError> {
    sections::<G1Projective, _>(lens, G1_PERIOD, |a: &G1Affine| *a.as_ref(), pool, funds)
}

/// `n` synthetic G2 points in a pool buffer (see [`sections`]).
pub(crate) fn g2_points(
    n: usize,
    pool: &Arc<PinnedPool>,
    funds: Option<&mut Reservation>,
) -> Result<PinnedVec<blst_p2_affine>, ParamsError> {
    let mut one = sections::<G2Projective, _>(&[n], G2_PERIOD, |a: &G2Affine| *a.as_ref(), pool, funds)?;
    Ok(one.pop().unwrap_or_else(|| unreachable!("one section for one length")))
}

/// Writes synthetic parameters for `shape` in bellperson's format (the
/// points [`Srs::synthetic`](crate::Srs::synthetic) makes in memory).
pub fn write_synthetic_params(shape: &CircuitShape, w: &mut impl Write) -> io::Result<()> {
    let lengths = shape.lengths().map_err(io::Error::other)?;
    verifying_key(shape.inputs).write(w)?;
    let mut g1 = Encoded::default();
    for n in [lengths.h, lengths.l, lengths.a, lengths.b_g1] {
        section::<G1Projective>(w, n, G1_PERIOD, &mut g1)?;
    }
    drop(g1);
    section::<G2Projective>(w, lengths.b_g2, G2_PERIOD, &mut Encoded::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::{BenchCircuit, WitnessMix};
    use crate::{AbcLayout, Backend, CapacityHints, Srs, Validation, synthesize};
    use blstrs::G1Affine;
    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};
    use std::sync::Arc;

    #[test]
    fn synthetic_parameters_fit_their_circuit() {
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        let c = BenchCircuit::new(5000, WitnessMix::Bits).unwrap();
        let (asg, _) = synthesize(
            c.clone(),
            &c.id(),
            &pool,
            &CapacityHints::in_memory(),
            AbcLayout::PaddedToDomain,
            None,
        )
        .unwrap();
        let shape = CircuitShape::of(&asg);
        let mut bytes = Vec::new();
        write_synthetic_params(&shape, &mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, shape.file_bytes());
        let srs = Arc::new(Srs::from_bytes(&bytes, &pool, Validation::Subgroup).unwrap());
        // The point at index i of a section is (i+1)·G.
        let p = srs.points().unwrap();
        let mut g = G1Affine::default();
        *g.as_mut() = p.l()[41];
        assert_eq!(g, (G1Projective::generator() * Scalar::from(42u64)).to_affine());
        // The CPU backend accepts them (the proof itself does not verify).
        let proofs = crate::CpuBackend::new(Arc::clone(&pool))
            .prove(crate::ProofBatch::new(
                srs,
                vec![asg],
                vec![(Scalar::from(1u64), Scalar::from(2u64))],
            ))
            .unwrap();
        assert_eq!(proofs.len(), 1);
    }

    #[test]
    fn the_blank_shape_is_the_synthesized_shape_and_memory_points_match_the_file() {
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        for (n, mix) in [(3000, WitnessMix::Bits), (4100, WitnessMix::Random)] {
            let c = BenchCircuit::with_inputs(n, 3, mix).unwrap();
            let (asg, _) = synthesize(
                c.clone(),
                &c.id(),
                &pool,
                &CapacityHints::in_memory(),
                AbcLayout::PaddedToDomain,
                None,
            )
            .unwrap();
            let shape = CircuitShape::of_blank(c).unwrap();
            assert_eq!(shape, CircuitShape::of(&asg), "{mix:?}");
            let mut bytes = Vec::new();
            write_synthetic_params(&shape, &mut bytes).unwrap();
            let file = Srs::from_bytes(&bytes, &pool, Validation::Subgroup).unwrap();
            let memory = Srs::synthetic(&shape, &pool, None).unwrap();
            assert_eq!(memory.vk(), file.vk());
            assert_eq!(memory.lengths(), file.lengths());
            assert_eq!(Srs::synthetic_header(&shape).unwrap().lengths(), file.lengths());
            let (m, f) = (memory.points().unwrap(), file.points().unwrap());
            let same_g1 =
                |x: &[blst_p1_affine], y: &[blst_p1_affine]| x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a == b);
            assert!(same_g1(m.h(), f.h()) && same_g1(m.l(), f.l()) && same_g1(m.a(), f.a()));
            assert!(same_g1(m.b_g1(), f.b_g1()));
            assert!(m.b_g2().len() == f.b_g2().len() && m.b_g2().iter().zip(f.b_g2()).all(|(a, b)| a == b));
        }
    }

    #[test]
    fn sections_write_their_periods_again_as_computed_once() {
        let size = encoded_len::<G1Projective>();
        let made = std::sync::atomic::AtomicUsize::new(0);
        let make = |first: usize, n: usize| {
            made.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            multiples::<G1Projective>(first, n)
        };
        let (period, mut encoded, mut out) = (3, Encoded::default(), Vec::new());
        for n in [2, 7, 5] {
            section_of(&mut out, n, period, size, &mut encoded, make).unwrap();
        }
        let mut expected = Vec::new();
        for n in [2u32, 7, 5] {
            expected.extend_from_slice(&n.to_be_bytes());
            for i in 0..n as usize {
                expected.extend_from_slice(&multiples::<G1Projective>(i % period, 1));
            }
        }
        assert!(out == expected, "the sections differ from points computed one by one");
        assert_eq!(made.into_inner(), period, "each point of the period computed once");
    }

    #[test]
    fn multiples_are_the_generators_multiples_across_chunks() {
        // Past one chunk, so the second chunk's start is checked too.
        let (first, n) = (5, CHUNK + 3);
        let mut g1 = vec![blst_p1_affine::default(); n];
        g1_multiples(first, &mut g1);
        let mut g2 = vec![blst_p2_affine::default(); 3];
        g2_multiples(first, &mut g2);
        for i in [0, 1, CHUNK - 1, CHUNK, n - 1] {
            let want = (G1Projective::generator() * Scalar::from((first + i + 1) as u64)).to_affine();
            assert!(*want.as_ref() == g1[i], "point {i}");
        }
        for (i, p) in g2.iter().enumerate() {
            let want = (G2Projective::generator() * Scalar::from((first + i + 1) as u64)).to_affine();
            assert!(want.as_ref() == p, "G2 point {i}");
        }
    }
}
