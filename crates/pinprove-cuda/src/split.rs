//! The scalars of the L, A and B queries, prepared for the GPU in one pass
//! over the aux assignment.
//!
//! Each query pairs its bases, in order, with the assignments its density
//! selects (L: every aux variable; A: every input, then the aux variables of
//! `a_aux_density`; B: the inputs of `b_input_density`, then the aux
//! variables of `b_aux_density`). In [`Mode::Split`] every selected scalar
//! is sorted by value: 0 contributes nothing, 1 sets its base's bit in a
//! bitmap (summed on the GPU by batched addition), a value below 2^64 (a
//! packed word, a counter) goes to a list of small values with its base
//! index (summed bit plane by bit plane, also by batched addition: in a
//! Pippenger pass their digits fill only the low windows, whose buckets
//! then become long serial chains), anything else goes to a dense list with
//! its base index (summed by Pippenger over those bases only). Filecoin's
//! circuits are mostly bits, so the Pippenger part shrinks to a small
//! fraction. In [`Mode::Dense`] every selected scalar goes to the list in
//! base order (a reference for tests).
//!
//! The aux vector is read twice in parallel chunks — once to count, once to
//! write each chunk's share at its known offset — and both times all three
//! queries are served by the same read.

// Without `cuda` only the tests use this module.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use std::sync::atomic::{AtomicU32, Ordering};

use blstrs::Scalar;
use pinprove_groth16::{Density, ProveError, Witness, WitnessRef};
use pinprove_mem::{PinnedPool, PinnedVec, Reservation, UseFence};
use rayon::prelude::*;

/// Aux variables per parallel task.
const CHUNK: usize = 1 << 15;

/// Bits of a bitmap block: sppark's batched addition reads whole blocks of
/// 32 words, so bitmaps are padded to them.
const BITMAP_BLOCK: usize = 1024;

/// How scalars are sorted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Ones to a bitmap, zeros dropped, the rest listed with their bases:
    /// how proofs sort them, bases resident or streamed.
    Split,
    /// Every selected scalar listed, in base order: every scalar through
    /// Pippenger, the reference the tests check the split against.
    #[cfg_attr(not(test), allow(dead_code))]
    Dense,
}

/// The scalars of one MSM.
pub(crate) struct QueryScalars {
    /// Number of bases the query has (selected assignments).
    pub bases: usize,
    /// The scalars for Pippenger. `None` only for L when every aux value
    /// goes to Pippenger as it is: then the aux vector itself is the list.
    pub scalars: Option<PinnedVec<Scalar>>,
    /// The base of each listed scalar; `None` when the list pairs with
    /// bases 0, 1, 2, … (nothing was dropped or moved to the bitmap).
    pub idx: Option<PinnedVec<u32>>,
    /// Bases whose scalar is 1, least significant bit first, padded to
    /// whole 1024-bit blocks; `None` when there are none. In the pool like
    /// the lists, so its upload does not block the host either.
    pub ones: Option<PinnedVec<u32>>,
    /// Set bits of `ones`.
    pub ones_count: usize,
    /// Bases whose scalar is a small value (below 2^64, above 1) …
    pub small_idx: Option<PinnedVec<u32>>,
    /// … and those values, canonical (not Montgomery) form.
    pub small_values: Option<PinnedVec<u64>>,
    /// Bits of the largest small value (0 when there are none).
    pub small_bits: u32,
}

impl QueryScalars {
    /// The listed scalars (`aux` stands for the list when it is `None`).
    pub fn list<'a>(&'a self, aux: &'a [Scalar]) -> &'a [Scalar] {
        self.scalars.as_deref().unwrap_or(aux)
    }
}

/// L, A and B (B serves both G1 and G2).
pub(crate) struct Prepared {
    pub l: QueryScalars,
    pub a: QueryScalars,
    pub b: QueryScalars,
    /// How the scalars were sorted: a proof needing the other way
    /// prepares again.
    pub mode: Mode,
}

impl Prepared {
    /// Bytes the preparation asked the pool for, per buffer in a fixed
    /// order (absent buffers are 0): what a proof of the same circuit type
    /// will ask for again. The request, not the buffer that served it: an
    /// idle buffer up to twice as large may have, and a set kept at that
    /// size would share its size class with other work's buffers.
    pub fn asked_bytes(&self) -> Vec<usize> {
        fn bytes<T: Copy>(v: &Option<PinnedVec<T>>) -> usize {
            v.as_ref().map_or(0, |v| v.len() * std::mem::size_of::<T>())
        }
        [&self.l, &self.a, &self.b]
            .iter()
            .flat_map(|q| {
                [
                    bytes(&q.scalars),
                    bytes(&q.idx),
                    bytes(&q.ones),
                    bytes(&q.small_idx),
                    bytes(&q.small_values),
                ]
            })
            .collect()
    }

    /// Hands every buffer back to the pool now, each fenced by `fence()`:
    /// the pool reuses a buffer only once the device work reading it has
    /// completed, whoever still holds the proof.
    pub fn release_after(self, fence: impl Fn() -> Box<dyn UseFence>) {
        fn release<T: Copy>(v: Option<PinnedVec<T>>, fence: &impl Fn() -> Box<dyn UseFence>) {
            if let Some(mut v) = v {
                v.set_use_fence(fence());
            }
        }
        for q in [self.l, self.a, self.b] {
            release(q.scalars, &fence);
            release(q.idx, &fence);
            release(q.ones, &fence);
            release(q.small_idx, &fence);
            release(q.small_values, &fence);
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Tally {
    selected: [usize; 3],
    listed: [usize; 3],
    ones: [usize; 3],
    small: [usize; 3],
    small_max: [u64; 3],
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        for q in 0..3 {
            self.selected[q] += o.selected[q];
            self.listed[q] += o.listed[q];
            self.ones[q] += o.ones[q];
            self.small[q] += o.small[q];
            self.small_max[q] = self.small_max[q].max(o.small_max[q]);
        }
    }
}

impl Tally {
    /// Counts one scalar that query `q` selects, of class `c` (and small
    /// value `v`, when it is one).
    #[inline]
    fn count(&mut self, q: usize, c: u8, v: u64) {
        self.selected[q] += 1;
        match c {
            OTHER => self.listed[q] += 1,
            ONE => self.ones[q] += 1,
            SMALL => {
                self.small[q] += 1;
                self.small_max[q] = self.small_max[q].max(v);
            }
            _ => {}
        }
    }
}

const ZERO: u8 = 0;
const ONE: u8 = 1;
const OTHER: u8 = 2;
const SMALL: u8 = 3;

/// The value of `s` when it is below 2^64.
#[inline]
fn small_value(s: &Scalar) -> Option<u64> {
    let b = s.to_bytes_le();
    b[8..]
        .iter()
        .all(|&x| x == 0)
        .then(|| u64::from_le_bytes(b[..8].try_into().expect("8 bytes")))
}

/// The class of `s`, and its value when that is SMALL (0 otherwise).
fn class(s: &Scalar, mode: Mode, zero: &Scalar, one: &Scalar) -> (u8, u64) {
    match mode {
        Mode::Dense => (OTHER, 0),
        Mode::Split if s == zero => (ZERO, 0),
        Mode::Split if s == one => (ONE, 0),
        Mode::Split => small_value(s).map_or((OTHER, 0), |v| (SMALL, v)),
    }
}

/// Whether query `q` (0 = L, 1 = A, 2 = B) selects aux variable `i`.
fn selects(q: usize, i: usize, a: &Density, b: &Density) -> bool {
    match q {
        0 => true,
        1 => a.get(i),
        _ => b.get(i),
    }
}

/// What one query's outputs look like before they are filled.
struct Outputs<'a> {
    scalars: Option<&'a mut [Scalar]>,
    idx: Option<&'a mut [u32]>,
    ones: Option<&'a [AtomicU32]>,
    small_idx: Option<&'a mut [u32]>,
    small_values: Option<&'a mut [u64]>,
}

impl Outputs<'_> {
    /// Records scalar `s` of class `c` for base `pos`; `k` counts the
    /// listed and the small scalars written so far.
    #[inline]
    fn put(&mut self, k: &mut [usize; 2], pos: usize, s: &Scalar, c: u8) {
        let [k, ks] = k;
        match c {
            OTHER => {
                if let Some(out) = self.scalars.as_deref_mut() {
                    out[*k] = *s;
                }
                if let Some(idx) = self.idx.as_deref_mut() {
                    idx[*k] = pos as u32;
                }
                *k += 1;
            }
            ONE => {
                if let Some(bits) = self.ones {
                    bits[pos / 32].fetch_or(1 << (pos % 32), Ordering::Relaxed);
                }
            }
            SMALL => {
                if let (Some(idx), Some(values)) = (self.small_idx.as_deref_mut(), self.small_values.as_deref_mut()) {
                    idx[*ks] = pos as u32;
                    values[*ks] = small_value(s).expect("classified small");
                }
                *ks += 1;
            }
            _ => {}
        }
    }
}

/// Splits `s` into consecutive pieces of the given lengths.
fn pieces<T>(mut s: &mut [T], lens: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    lens.map(|n| {
        let (head, tail) = std::mem::take(&mut s).split_at_mut(n);
        s = tail;
        head
    })
    .collect()
}

/// [`prepare`] for a witness, paid out of its working set.
pub(crate) fn prepare_witness(
    w: &mut Witness,
    pool: &std::sync::Arc<PinnedPool>,
    mode: Mode,
) -> Result<Prepared, ProveError> {
    let (values, funds) = w.parts_mut();
    prepare(values, funds, pool, mode)
}

/// Prepares the L, A and B scalars of `w`, paying their buffers out of
/// `funds` (the witness's working set).
pub(crate) fn prepare(
    w: WitnessRef<'_>,
    mut funds: Option<&mut Reservation>,
    pool: &std::sync::Arc<PinnedPool>,
    mode: Mode,
) -> Result<Prepared, ProveError> {
    let zero = Scalar::from(0u64);
    let one = Scalar::from(1u64);
    let aux: &[Scalar] = w.aux;
    let inputs: &[Scalar] = w.inputs;
    let (ad, bd) = (&w.densities.a_aux, &w.densities.b_aux);
    if ad.len() != aux.len() || bd.len() != aux.len() || w.densities.b_input.len() != inputs.len() {
        return Err(ProveError::Backend {
            backend: "native",
            message: "densities do not match the assignment".into(),
        });
    }

    // Inputs (a handful): A takes all, B those its density selects.
    let input_sel: [Vec<usize>; 3] = [
        Vec::new(),
        (0..inputs.len()).collect(),
        w.densities.b_input.iter_ones().collect(),
    ];
    let mut head = Tally::default();
    for (q, sel) in input_sel.iter().enumerate() {
        for &j in sel {
            let (c, v) = class(&inputs[j], mode, &zero, &one);
            head.count(q, c, v);
        }
    }

    // Pass 1: count per chunk, keeping each value's class.
    let mut classes = vec![ZERO; aux.len()];
    let tallies: Vec<Tally> = aux
        .par_chunks(CHUNK)
        .zip(classes.par_chunks_mut(CHUNK))
        .enumerate()
        .map(|(c, (vals, cls))| {
            let mut t = Tally::default();
            for (k, (v, cl)) in vals.iter().zip(cls.iter_mut()).enumerate() {
                let i = c * CHUNK + k;
                let (kind, value) = class(v, mode, &zero, &one);
                *cl = kind;
                for q in 0..3 {
                    if selects(q, i, ad, bd) {
                        t.count(q, kind, value);
                    }
                }
            }
            t
        })
        .collect();
    let mut total = head;
    for t in &tallies {
        total += *t;
    }

    // Buffers, sized exactly.
    let mut scalars: [Option<PinnedVec<Scalar>>; 3] = [None, None, None];
    let mut idx: [Option<PinnedVec<u32>>; 3] = [None, None, None];
    let mut ones: [Option<Vec<AtomicU32>>; 3] = [None, None, None];
    let mut small_idx: [Option<PinnedVec<u32>>; 3] = [None, None, None];
    let mut small_values: [Option<PinnedVec<u64>>; 3] = [None, None, None];
    for q in 0..3 {
        let dense = total.listed[q] == total.selected[q];
        if !(q == 0 && dense) {
            let mut v = PinnedVec::with_capacity_charged(total.listed[q], pool, funds.as_deref_mut())?;
            v.try_resize_par(total.listed[q], zero)?;
            scalars[q] = Some(v);
        }
        if !dense {
            if total.selected[q] > u32::MAX as usize {
                return Err(ProveError::Backend {
                    backend: "native",
                    message: format!("{} bases in one query: more than 32-bit indices", total.selected[q]),
                });
            }
            let mut v = PinnedVec::with_capacity_charged(total.listed[q], pool, funds.as_deref_mut())?;
            v.try_resize_par(total.listed[q], 0u32)?;
            idx[q] = Some(v);
        }
        if total.ones[q] > 0 {
            let words = total.selected[q].div_ceil(BITMAP_BLOCK) * (BITMAP_BLOCK / 32);
            ones[q] = Some((0..words).map(|_| AtomicU32::new(0)).collect());
        }
        if total.small[q] > 0 {
            let mut v = PinnedVec::with_capacity_charged(total.small[q], pool, funds.as_deref_mut())?;
            v.try_resize_par(total.small[q], 0u32)?;
            small_idx[q] = Some(v);
            let mut v = PinnedVec::with_capacity_charged(total.small[q], pool, funds.as_deref_mut())?;
            v.try_resize_par(total.small[q], 0u64)?;
            small_values[q] = Some(v);
        }
    }

    // Pass 2: every chunk writes its share at offsets known from pass 1.
    {
        let mut outs: Vec<Vec<Outputs<'_>>> = Vec::with_capacity(3);
        let parts = scalars
            .iter_mut()
            .zip(idx.iter_mut())
            .zip(small_idx.iter_mut().zip(small_values.iter_mut()));
        for (q, ((s, x), (si, sv))) in parts.enumerate() {
            let lens = || std::iter::once(head.listed[q]).chain(tallies.iter().map(|t| t.listed[q]));
            let small_lens = || std::iter::once(head.small[q]).chain(tallies.iter().map(|t| t.small[q]));
            let mut s_pieces = s.as_deref_mut().map(|s| pieces(s, lens()).into_iter());
            let mut x_pieces = x.as_deref_mut().map(|x| pieces(x, lens()).into_iter());
            let mut si_pieces = si.as_deref_mut().map(|v| pieces(v, small_lens()).into_iter());
            let mut sv_pieces = sv.as_deref_mut().map(|v| pieces(v, small_lens()).into_iter());
            outs.push(
                (0..=tallies.len())
                    .map(|_| Outputs {
                        scalars: s_pieces.as_mut().and_then(Iterator::next),
                        idx: x_pieces.as_mut().and_then(Iterator::next),
                        ones: ones[q].as_deref(),
                        small_idx: si_pieces.as_mut().and_then(Iterator::next),
                        small_values: sv_pieces.as_mut().and_then(Iterator::next),
                    })
                    .collect(),
            );
        }
        // Transpose: per chunk, the three queries' outputs.
        let mut per_chunk: Vec<[Outputs<'_>; 3]> = Vec::with_capacity(tallies.len() + 1);
        let [l, a, b] = <[Vec<Outputs<'_>>; 3]>::try_from(outs).unwrap_or_else(|_| unreachable!());
        for ((l, a), b) in l.into_iter().zip(a).zip(b) {
            per_chunk.push([l, a, b]);
        }
        let mut per_chunk = per_chunk.into_iter();
        let mut inputs_out = per_chunk.next().expect("one entry per chunk plus the inputs");
        for q in 1..3 {
            let mut k = [0; 2];
            for (pos, &j) in input_sel[q].iter().enumerate() {
                let v = &inputs[j];
                inputs_out[q].put(&mut k, pos, v, class(v, mode, &zero, &one).0);
            }
        }
        // Where each chunk's positions start.
        let mut starts = Vec::with_capacity(tallies.len());
        let mut at = [0, head.selected[1], head.selected[2]];
        for t in &tallies {
            starts.push(at);
            for (a, s) in at.iter_mut().zip(t.selected) {
                *a += s;
            }
        }
        per_chunk
            .collect::<Vec<_>>()
            .into_par_iter()
            .zip(aux.par_chunks(CHUNK))
            .zip(classes.par_chunks(CHUNK))
            .zip(starts)
            .enumerate()
            .for_each(|(c, (((mut out, vals), cls), mut pos))| {
                let mut k = [[0usize; 2]; 3];
                for (off, (v, &cl)) in vals.iter().zip(cls).enumerate() {
                    let i = c * CHUNK + off;
                    for q in 0..3 {
                        if selects(q, i, ad, bd) {
                            out[q].put(&mut k[q], pos[q], v, cl);
                            pos[q] += 1;
                        }
                    }
                }
            });
    }

    let mut bitmaps: [Option<PinnedVec<u32>>; 3] = [None, None, None];
    for (q, bits) in ones.into_iter().enumerate() {
        if let Some(bits) = bits {
            // Within the working set: a base in the bitmap has no scalar
            // and index in the list.
            let mut v = PinnedVec::with_capacity_charged(bits.len(), pool, funds.as_deref_mut())?;
            v.extend(bits.into_iter().map(AtomicU32::into_inner));
            bitmaps[q] = Some(v);
        }
    }
    let mut done = scalars
        .into_iter()
        .zip(idx)
        .zip(bitmaps)
        .zip(small_idx.into_iter().zip(small_values))
        .enumerate()
        .map(
            |(q, (((scalars, idx), ones), (small_idx, small_values)))| QueryScalars {
                bases: total.selected[q],
                scalars,
                idx,
                ones,
                ones_count: total.ones[q],
                small_idx,
                small_values,
                small_bits: 64 - total.small_max[q].leading_zeros(),
            },
        );
    let (l, a, b) = (
        done.next().expect("three queries"),
        done.next().expect("three queries"),
        done.next().expect("three queries"),
    );
    Ok(Prepared { l, a, b, mode })
}

/// Host bytes [`prepare`] takes at most for queries L, A and B over
/// `bases` bases each, as `pool` rounds its buffers: a scalar and an index
/// per base (a small value and its index take less; a zero or one takes
/// neither), and a bitmap of ones.
pub(crate) fn working_set(pool: &PinnedPool, bases: [usize; 3]) -> u64 {
    let rounded = |bytes: usize| pool.rounded_size(bytes).unwrap_or(usize::MAX) as u64;
    bases
        .iter()
        .map(|&n| {
            let bitmap = n.div_ceil(BITMAP_BLOCK) * (BITMAP_BLOCK / 8);
            rounded(n.saturating_mul(32))
                .saturating_add(rounded(n.saturating_mul(4)))
                .saturating_add(rounded(bitmap))
        })
        .fold(0u64, u64::saturating_add)
}

/// What preparation took for each circuit (by its parameters' query
/// lengths), learned from its proofs: admission counts that, with a margin,
/// instead of the worst case [`working_set`] gives (every aux value listed),
/// which for Filecoin's mostly-bit witnesses is tens of times too much
/// (10.2 GiB counted against about 0.25 GiB used per 32 GiB PoRep
/// partition) and keeps partitions from synthesizing at once. A witness
/// that needs more than was learned gets the rest as urgent memory of
/// admitted work; the budget stays exact either way.
#[derive(Default)]
pub(crate) struct LearnedShares {
    most: std::sync::Mutex<std::collections::HashMap<pinprove_groth16::QueryLengths, u64>>,
}

impl LearnedShares {
    /// Notes that a proof of the circuit with `lengths` prepared into
    /// buffers of `bytes` in all.
    pub(crate) fn learn(&self, lengths: pinprove_groth16::QueryLengths, bytes: u64) {
        use pinprove_mem::sync::Recover;
        let mut most = self.most.lock().recover();
        let m = most.entry(lengths).or_default();
        *m = (*m).max(bytes);
    }

    /// The most a proof of the circuit with `lengths` prepared, once one
    /// was seen.
    pub(crate) fn most(&self, lengths: &pinprove_groth16::QueryLengths) -> Option<u64> {
        use pinprove_mem::sync::Recover;
        self.most.lock().recover().get(lengths).copied()
    }

    /// What to admit for preparing a proof of the circuit with `lengths`:
    /// the most seen plus a quarter, never above `worst`; `worst` until a
    /// proof was seen.
    pub(crate) fn share(&self, lengths: &pinprove_groth16::QueryLengths, worst: u64) -> u64 {
        use pinprove_mem::sync::Recover;
        match self.most.lock().recover().get(lengths) {
            Some(&m) => m.saturating_add(m / 4).min(worst),
            None => worst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinprove_mem::{HeapAllocator, MemoryBudget, PoolConfig};
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    fn pool() -> Arc<PinnedPool> {
        PinnedPool::new(
            Arc::new(HeapAllocator::default()),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        )
    }

    fn density(bits: &[bool]) -> Density {
        let mut d = Density::new();
        for (i, &b) in bits.iter().enumerate() {
            d.add_element();
            if b {
                d.inc(i);
            }
        }
        d
    }

    fn vec_in(pool: &Arc<PinnedPool>, v: &[Scalar]) -> PinnedVec<Scalar> {
        let mut p = PinnedVec::new_in(pool);
        p.extend_from_slice(v);
        p
    }

    /// The query's (base, scalar) pairs as the CPU backend sees them.
    fn reference(w: &Witness, q: usize) -> Vec<Scalar> {
        let mut out = Vec::new();
        match q {
            0 => out.extend_from_slice(&w.aux),
            1 => {
                out.extend_from_slice(&w.inputs);
                out.extend(w.densities.a_aux.iter_ones().map(|i| w.aux[i]));
            }
            _ => {
                out.extend(w.densities.b_input.iter_ones().map(|i| w.inputs[i]));
                out.extend(w.densities.b_aux.iter_ones().map(|i| w.aux[i]));
            }
        }
        out
    }

    /// Rebuilds the per-base scalars from a prepared query.
    fn expand(p: &QueryScalars, aux: &[Scalar]) -> Vec<Scalar> {
        let mut out = vec![Scalar::from(0u64); p.bases];
        let list = p.list(aux);
        match &p.idx {
            Some(idx) => {
                for (s, &i) in list.iter().zip(idx.iter()) {
                    assert_eq!(out[i as usize], Scalar::from(0u64), "base {i} listed twice");
                    out[i as usize] = *s;
                }
            }
            None => {
                assert_eq!(list.len(), p.bases);
                out.copy_from_slice(list);
            }
        }
        if let (Some(idx), Some(values)) = (&p.small_idx, &p.small_values) {
            assert_eq!(idx.len(), values.len());
            for (&i, &v) in idx.iter().zip(values.iter()) {
                assert_eq!(out[i as usize], Scalar::from(0u64), "base {i} listed twice");
                assert!(v > 1 && 64 - v.leading_zeros() <= p.small_bits);
                out[i as usize] = Scalar::from(v);
            }
        }
        let mut ones = 0;
        if let Some(bits) = &p.ones {
            assert_eq!(bits.len() % 32, 0);
            for i in 0..bits.len() * 32 {
                if bits[i / 32] >> (i % 32) & 1 == 1 {
                    assert!(i < p.bases, "bit {i} past the {} bases", p.bases);
                    assert_eq!(out[i], Scalar::from(0u64), "base {i} both listed and a one");
                    out[i] = Scalar::from(1u64);
                    ones += 1;
                }
            }
        }
        assert_eq!(ones, p.ones_count);
        out
    }

    fn witness(pool: &Arc<PinnedPool>, seed: u64, n_aux: usize, bit_share: f64, small_share: f64) -> Witness {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let value = |rng: &mut rand_chacha::ChaCha8Rng| {
            if rng.gen_bool(bit_share) {
                Scalar::from(rng.gen_range(0..2u64))
            } else if rng.gen_bool(small_share) {
                // A packed word.
                Scalar::from(rng.r#gen::<u64>() >> rng.gen_range(0..60))
            } else {
                Scalar::from(rng.r#gen::<u64>()) * Scalar::from(rng.r#gen::<u64>())
            }
        };
        let inputs: Vec<Scalar> = (0..5)
            .map(|j| if j == 0 { Scalar::from(1u64) } else { value(&mut rng) })
            .collect();
        let aux: Vec<Scalar> = (0..n_aux).map(|_| value(&mut rng)).collect();
        let a: Vec<bool> = (0..n_aux).map(|_| rng.gen_bool(0.7)).collect();
        let b: Vec<bool> = (0..n_aux).map(|_| rng.gen_bool(0.4)).collect();
        let bi: Vec<bool> = (0..5).map(|j| j == 0 || rng.gen_bool(0.5)).collect();
        Witness {
            inputs: vec_in(pool, &inputs),
            aux: vec_in(pool, &aux),
            densities: pinprove_groth16::Densities {
                a_aux: density(&a),
                b_input: density(&bi),
                b_aux: density(&b),
            },
            working_set: None,
        }
    }

    #[test]
    fn split_and_dense_rebuild_every_query() {
        let pool = pool();
        // Sizes around the chunk size; bit shares from none to all.
        for (seed, n, share) in [
            (1, 0, 0.5),
            (2, 100, 0.9),
            (3, CHUNK * 2 + 77, 0.95),
            (4, CHUNK + 1, 0.0),
            (5, 3000, 1.0),
        ] {
            let mut w = witness(&pool, seed, n, share, 0.3);
            for mode in [Mode::Split, Mode::Dense] {
                let p = prepare_witness(&mut w, &pool, mode).unwrap();
                for (q, qs) in [&p.l, &p.a, &p.b].into_iter().enumerate() {
                    let want = reference(&w, q);
                    assert_eq!(qs.bases, want.len(), "seed {seed} query {q}");
                    assert_eq!(expand(qs, &w.aux), want, "seed {seed} query {q} {mode:?}");
                    if mode == Mode::Dense {
                        assert!(qs.idx.is_none() && qs.ones.is_none());
                    }
                    if let Some(idx) = &qs.idx {
                        assert!(idx.windows(2).all(|w| w[0] < w[1]), "indices ascend");
                    }
                }
            }
        }
    }

    #[test]
    fn mostly_bits_leave_a_short_list() {
        let pool = pool();
        let mut w = witness(&pool, 9, 20_000, 0.98, 0.3);
        let p = prepare_witness(&mut w, &pool, Mode::Split).unwrap();
        assert!(p.l.list(&w.aux).len() < 1_000, "{} listed", p.l.list(&w.aux).len());
        assert!(p.l.ones_count > 9_000);
        let small = p.l.small_values.as_ref().map_or(0, |v| v.len());
        assert!(small > 50 && p.l.small_bits <= 64, "{small} small values");
        // Random values only: nothing to split, L lists the aux vector itself.
        let mut w = witness(&pool, 10, 5_000, 0.0, 0.0);
        let p = prepare_witness(&mut w, &pool, Mode::Split).unwrap();
        assert!(p.l.scalars.is_none() && p.l.idx.is_none() && p.l.ones.is_none());
    }

    #[test]
    fn the_working_set_bounds_what_preparation_takes() {
        // What the engine admits for the native backend (from the queries'
        // lengths) covers the pool buffers `prepare` checks out, whatever
        // the witness: all listed, all bits, mixed, with small values.
        let pool = pool();
        for (seed, share, small) in [(20, 0.0, 0.0), (21, 1.0, 0.0), (22, 0.5, 0.3), (23, 0.02, 0.9)] {
            let mut w = witness(&pool, seed, CHUNK * 3 + 5, share, small);
            let before = pool.stats().checked_out_bytes;
            let p = prepare_witness(&mut w, &pool, Mode::Split).unwrap();
            let taken = pool.stats().checked_out_bytes - before;
            let bound = working_set(&pool, [p.l.bases, p.a.bases, p.b.bases]);
            assert!(taken <= bound, "seed {seed}: {taken} bytes taken, {bound} admitted");
        }
    }

    #[test]
    fn asked_bytes_are_the_requests_whatever_buffers_served_them() {
        // Learned sizes become a kept set: they must be what the next proof
        // asks for, not the larger idle buffers this one happened to get.
        let n = 200_000;
        let fresh = {
            let pool = pool();
            let mut w = witness(&pool, 30, n, 0.5, 0.3);
            prepare_witness(&mut w, &pool, Mode::Split).unwrap().asked_bytes()
        };
        assert!(fresh.iter().filter(|&&b| b > 0).count() >= 6, "{fresh:?}");
        let pool = pool();
        let mut w = witness(&pool, 30, n, 0.5, 0.3);
        // Idle buffers 1.9 times each request: the pool serves from them.
        let big: Vec<_> = fresh
            .iter()
            .filter(|&&b| b > 0)
            .map(|&b| pool.try_checkout(b * 19 / 10).unwrap())
            .collect();
        drop(big);
        let p = prepare_witness(&mut w, &pool, Mode::Split).unwrap();
        let held: u64 = [&p.l, &p.a, &p.b]
            .iter()
            .map(|q| {
                q.scalars.as_ref().map_or(0, |v| v.buffer_bytes())
                    + q.idx.as_ref().map_or(0, |v| v.buffer_bytes())
                    + q.ones.as_ref().map_or(0, |v| v.buffer_bytes())
                    + q.small_idx.as_ref().map_or(0, |v| v.buffer_bytes())
                    + q.small_values.as_ref().map_or(0, |v| v.buffer_bytes())
            })
            .sum();
        let rounded: u64 = fresh
            .iter()
            .filter(|&&b| b > 0)
            .map(|&b| pool.rounded_size(b).unwrap() as u64)
            .sum();
        assert!(
            held > rounded,
            "served from larger buffers: {held} held, {rounded} asked"
        );
        assert_eq!(p.asked_bytes(), fresh);
    }

    #[test]
    fn mismatched_densities_are_an_error() {
        let pool = pool();
        let mut w = witness(&pool, 11, 100, 0.5, 0.3);
        w.densities.b_aux.add_element();
        assert!(prepare_witness(&mut w, &pool, Mode::Split).is_err());
    }

    #[test]
    fn learned_shares_replace_the_worst_case_once_a_proof_was_seen() {
        let shares = LearnedShares::default();
        let q = pinprove_groth16::QueryLengths {
            h: 1023,
            l: 900,
            a: 1000,
            b_g1: 400,
            b_g2: 400,
        };
        assert_eq!(
            shares.share(&q, 10_000),
            10_000,
            "the worst case until a proof was seen"
        );
        shares.learn(q, 800);
        shares.learn(q, 600);
        assert_eq!(shares.share(&q, 10_000), 1000, "the most seen, plus a quarter");
        assert_eq!(shares.share(&q, 900), 900, "never above the worst case");
        let other = pinprove_groth16::QueryLengths { l: 901, ..q };
        assert_eq!(shares.share(&other, 10_000), 10_000, "per circuit");
    }
}
