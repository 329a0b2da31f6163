//! What a circuit keeps in device memory and what streams, decided once,
//! before its first proof, from the memory pinprove may use on the GPU.
//!
//! A device allocation that fails is a bug of this plan, not a path the
//! backend takes: every buffer a proof allocates is bounded here, with the
//! witness's worst case (every scalar a full-width one), and the backend
//! admits a proof to the GPU only while the proofs in flight leave room for
//! its peak ([`Plan::proof_bytes`]).
//!
//! In order of what each saves per proof, the plan keeps on the device:
//! 1. the SRS bases (a 32 GiB PoRep's are 44 GiB; streamed, they cross PCIe
//!    once per proof), when they fit beside one proof;
//! 2. the circuit's pre-compiled matrices (a/b/c computed on the GPU from
//!    the witness), when they fit beside the bases and one proof;
//!    otherwise they stream from pinned host memory in row chunks through
//!    two chunk buffers per proof ([`MatrixPlacement::Streamed`]: 7.5 GB of
//!    matrices cross PCIe per 32 GiB PoRep partition instead of 12 GiB of
//!    a/b/c, and the host computes nothing but the witness);
//! 3. otherwise the bases stream through two windows of device memory, one
//!    filled while the other's bases are summed, as large as the memory
//!    left allows (up to [`MAX_WINDOW`] bases).
//!
//! A proof computing a/b/c from its witness holds two domain vectors at
//! once (a·b is formed before c is computed), so a 2^27 domain, its
//! witness and two chunk buffers fit a 16 GB card.
//!
//! Streamed or resident, scalars are split the same way (ones by batched
//! addition, small values by bit planes, the rest by Pippenger): a window
//! is summed as resident bases are.

// Without `cuda` only the tests use this module.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use serde::Serialize;

use crate::base_tables::TablePlan;

/// Bytes of a G1 base (affine, uncompressed as the device reads it).
pub(crate) const G1_BASE: u64 = 96;
/// Bytes of a G2 base.
pub(crate) const G2_BASE: u64 = 192;
/// Bytes of a scalar.
pub(crate) const SCALAR: u64 = 32;
/// The most bases a streamed window holds: larger windows gain nothing
/// (the copy of one already overlaps the sums of the other).
pub(crate) const MAX_WINDOW: usize = 1 << 25;
/// The fewest: below this the per-window overheads dominate; a cap that
/// cannot hold two windows of this size is too small for the circuit.
pub(crate) const MIN_WINDOW: usize = 1 << 16;
/// Windows are whole bitmap blocks (sppark's batched addition reads 1024
/// bits at a time).
const WINDOW_ALIGN: usize = 1024;
/// Most Pippenger points per batch on the device (`MAX_BATCH` in
/// native_msm.cu): its digit arrays are sized by the batch.
const PIPPENGER_BATCH: usize = 1 << 24;
/// Most listed scalars (and most small values) one MSM call takes: an
/// MSM with more is queued as several calls, so that its device memory
/// (gathered points, uploaded scalars, Pippenger scratch) is bounded
/// whatever the witness. Filecoin's witnesses list about 1% of a query's
/// bases (1.5 M of 130 M at 32 GiB): one call.
pub(crate) const MAX_LISTED: usize = PIPPENGER_BATCH;
/// Bounds of a streamed matrix chunk: about a sixteenth of a matrix, so
/// that the copy of one chunk overlaps the rows of the last.
const MIN_CHUNK: u64 = 4 << 10;
const MAX_CHUNK: u64 = 64 << 20;
/// Room left for what the plan does not count: sppark's NTT tables, the
/// CUDA context's own allocations, fragmentation of the stream-ordered
/// pool.
pub const SLACK: u64 = 512 << 20;

/// What a circuit's proofs need, as the plan sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitSizes {
    /// The evaluation domain (a power of two above the constraints).
    pub domain: usize,
    /// Variables (inputs and aux): a pre-compiled proof uploads as many
    /// witness values.
    pub vars: usize,
    /// Bases of each query: h, l, a, b in G1, b in G2.
    pub bases: [usize; 5],
    /// The pre-compiled matrices' device bytes, once recorded.
    pub matrices: Option<u64>,
    /// The recording's distinct coefficients (0 before it is recorded).
    pub coefficients: usize,
}

impl CircuitSizes {
    /// The sizes an SRS gives, before the circuit is recorded.
    pub fn of_srs(srs: &pinprove_groth16::Srs) -> CircuitSizes {
        let q = srs.lengths();
        CircuitSizes {
            domain: q.h + 1,
            vars: srs.vk().ic.len() + q.l,
            bases: [q.h, q.l, q.a, q.b_g1, q.b_g2],
            matrices: None,
            coefficients: 0,
        }
    }

    /// The sizes of a circuit of `shape` whose recording's matrices take
    /// `matrices` bytes: for planning before the circuit is seen (from a
    /// measured shape).
    pub fn of_shape(shape: &pinprove_groth16::shape::CircuitShape, matrices: Option<u64>) -> CircuitSizes {
        let domain = pinprove_groth16::domain::domain_size(shape.constraints).unwrap_or(usize::MAX / 2);
        let b = shape.b_inputs + shape.b_aux;
        CircuitSizes {
            domain,
            vars: shape.inputs + shape.aux,
            bases: [domain - 1, shape.aux, shape.inputs + shape.a_aux, b, b],
            matrices,
            coefficients: 0,
        }
    }

    /// The sizes a recording gives (its matrices' device bytes included).
    pub fn of_recording(r: &pinprove_groth16::precompiled::Recording) -> CircuitSizes {
        let stats = r.stats();
        let domain = pinprove_groth16::domain::domain_size(stats.constraints).unwrap_or(usize::MAX / 2);
        let b = r.densities().b_bases();
        // As native_spmv.cu lays them out: per matrix, row offsets (8
        // bytes each), columns (4) and coefficient ids (2) per entry; the
        // coefficients once.
        let matrices = 3 * (stats.constraints as u64 + 1) * 8
            + stats.nnz.iter().map(|&n| n as u64 * 6).sum::<u64>()
            + stats.coefficients as u64 * SCALAR;
        CircuitSizes {
            domain,
            vars: stats.inputs + stats.aux,
            bases: [domain - 1, stats.aux, r.densities().a_bases(stats.inputs), b, b],
            matrices: Some(matrices),
            coefficients: stats.coefficients,
        }
    }

    /// Bytes of one of a proof's two chunk buffers when its matrices
    /// stream (0 before the circuit is recorded): about a sixteenth of a
    /// matrix, within [4 KiB, 64 MiB].
    pub fn matrix_chunk(&self) -> u64 {
        self.matrices.map_or(0, |m| (m / 48).clamp(MIN_CHUNK, MAX_CHUNK))
    }

    /// Whether both describe the same circuit's queries.
    pub(crate) fn same_queries(&self, other: &CircuitSizes) -> bool {
        self.domain == other.domain && self.bases == other.bases
    }

    /// The SRS's bases in device memory.
    pub fn bases_bytes(&self) -> u64 {
        self.bases[..4].iter().map(|&n| n as u64 * G1_BASE).sum::<u64>() + self.bases[4] as u64 * G2_BASE
    }

    /// The largest query (every MSM's worst case is one over all its
    /// bases).
    fn largest_query(&self) -> usize {
        self.bases.iter().copied().max().unwrap_or(0)
    }
}

/// Where a pre-compiled circuit's matrices are read from when its proofs
/// compute a/b/c on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MatrixPlacement {
    /// In device memory, uploaded once per recording.
    Device,
    /// In pinned host memory, copied in row chunks through two chunk
    /// buffers of each proof.
    Streamed,
    /// Not on the device: a/b/c are computed on the host and uploaded (as
    /// for a circuit never recorded).
    Host,
}

/// How a circuit's proofs use one GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The memory the plan was made for (the cap, or the device's free
    /// memory when it is lower).
    pub usable: u64,
    /// The SRS bases stay in device memory.
    pub bases_resident: bool,
    /// Where a recording's matrices are read from (before the circuit is
    /// recorded: [`MatrixPlacement::Host`]).
    pub matrices: MatrixPlacement,
    /// Bases per streamed window (0 with resident bases).
    pub window: usize,
    /// Device bytes held across proofs: bases and resident matrices.
    pub held_bytes: u64,
    /// Device bytes one proof takes at its peak, beyond those.
    pub proof_bytes: u64,
    /// Proofs whose peaks fit at once beside what is held.
    pub proofs_at_once: u64,
}

/// Why no plan fits.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{usable} bytes of GPU memory are too few for this circuit (domain of {domain} elements): \
     a proof needs {needed} with its bases streamed in the smallest windows"
)]
pub struct PlanError {
    /// The memory there was.
    pub usable: u64,
    /// The circuit's domain.
    pub domain: usize,
    /// What the smallest streamed plan needs.
    pub needed: u64,
}

/// Device bytes of one Pippenger pass over up to `n` points of a curve
/// whose bucket takes `bucket` bytes: buckets, digits and sort scratch per
/// batch (native_msm.cu's `pippenger`, window width as `plan` picks it).
fn pippenger_bytes(n: usize, bucket: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let batch = n.min(PIPPENGER_BATCH) as u64;
    let np = (n as u64).div_ceil(32) * 32;
    let lg = 63 - (np + np / 2).leading_zeros();
    let wbits = lg.saturating_sub(8).clamp(10, 18) as u64;
    let nwins = 254 / wbits + 1;
    let row = 1u64 << (wbits - 1);
    // Partial sums of batched addition: generously, for a large GPU.
    let sums = 1 << 14;
    (nwins * row + sums) * bucket + nwins * (batch + row) * 4 + 2 * batch * 8
}

/// Device bytes one MSM call over `bases` bases (of `base` bytes, buckets
/// of `bucket`) takes beyond its bases, in the worst case: as many listed
/// scalars as a call takes (uploaded with their indices, their points
/// gathered, summed by Pippenger), as many small values (indices, values,
/// gathered points, 64 bit planes), and the bitmap of ones.
fn msm_bytes(bases: usize, base: u64, bucket: u64) -> u64 {
    let n = bases.min(MAX_LISTED) as u64;
    let listed = n * (SCALAR + 4 + base);
    let small = n * (4 + 8 + base) + 64 * n.div_ceil(8);
    let ones = (bases as u64).div_ceil(8);
    listed + small + ones + pippenger_bytes(n as usize, bucket)
}

/// Peak device bytes of one proof beyond what is held: the h step (a, b
/// and c uploaded; or two domain vectors, the witness and, for streamed
/// matrices, two chunk buffers and the coefficients), then h while its MSM
/// runs, then the other MSMs; with streamed bases, two windows and the MSM
/// work of two windows at once.
fn proof_bytes(s: &CircuitSizes, matrices: MatrixPlacement, window: Option<usize>) -> u64 {
    let m = s.domain as u64;
    let witness = s.vars as u64 * SCALAR;
    let h_step = match matrices {
        MatrixPlacement::Host => 3 * m * SCALAR,
        MatrixPlacement::Device => 2 * m * SCALAR + witness,
        MatrixPlacement::Streamed => 2 * m * SCALAR + witness + 2 * s.matrix_chunk() + s.coefficients as u64 * SCALAR,
    };
    let msms = match window {
        None => {
            // Resident bases: the h MSM in parts of 2^25 (scalars already
            // on the device), then each query whole.
            let h_part = (s.domain.min(1 << 25), 0);
            // Two calls in flight: one summing while the next is queued.
            let queries = [1, 2, 3]
                .iter()
                .map(|&q| 2 * msm_bytes(s.bases[q], G1_BASE, 2 * G1_BASE))
                .chain(std::iter::once(2 * msm_bytes(s.bases[4], G2_BASE, 2 * G2_BASE)))
                .max()
                .unwrap_or(0);
            (m * SCALAR + pippenger_bytes(h_part.0, 2 * G1_BASE)).max(queries)
        }
        Some(w) => {
            let g1 = 2 * w as u64 * G1_BASE + 2 * msm_bytes(w, G1_BASE, 2 * G1_BASE);
            let g2 = 2 * w as u64 * G2_BASE + 2 * msm_bytes(w, G2_BASE, 2 * G2_BASE);
            // h stays on the device through its own MSM only.
            (m * SCALAR + 2 * w as u64 * G1_BASE + 2 * pippenger_bytes(w, 2 * G1_BASE))
                .max(g1)
                .max(g2)
        }
    };
    h_step.max(msms)
}

impl Plan {
    /// The plan for a circuit of `sizes` on a device with `usable` bytes
    /// pinprove may take: its bases resident when they fit beside one
    /// proof, else streamed ([`Plan::streaming`]).
    pub fn new(sizes: &CircuitSizes, usable: u64) -> Result<Plan, PlanError> {
        for &matrices in placements(sizes) {
            let p = Plan::of(sizes, usable, true, matrices, 0);
            if p.fits() {
                return Ok(p);
            }
        }
        Plan::streaming(sizes, usable)
    }

    /// The plan with the bases streamed, through the largest windows that
    /// fit (matrices on the device, else streamed, when they fit too).
    pub(crate) fn streaming(sizes: &CircuitSizes, usable: u64) -> Result<Plan, PlanError> {
        let largest = MAX_WINDOW.min(sizes.largest_query().next_multiple_of(WINDOW_ALIGN));
        for &matrices in placements(sizes) {
            let mut w = largest;
            loop {
                let p = Plan::of(sizes, usable, false, matrices, w);
                if p.fits() {
                    return Ok(p);
                }
                if w <= MIN_WINDOW {
                    break;
                }
                w = (w / 2).next_multiple_of(WINDOW_ALIGN);
            }
        }
        let smallest = Plan::streamed(sizes, usable, MIN_WINDOW);
        Err(PlanError {
            usable,
            domain: sizes.domain,
            needed: smallest.held_bytes + smallest.proof_bytes + SLACK,
        })
    }

    /// The plan with the bases streamed through windows of `window` bases
    /// (at most the largest query), a/b/c from the host, fitting or not.
    pub(crate) fn streamed(sizes: &CircuitSizes, usable: u64, window: usize) -> Plan {
        let w = window
            .min(sizes.largest_query().next_multiple_of(WINDOW_ALIGN))
            .max(WINDOW_ALIGN);
        Plan::of(sizes, usable, false, MatrixPlacement::Host, w)
    }

    fn of(sizes: &CircuitSizes, usable: u64, bases_resident: bool, matrices: MatrixPlacement, window: usize) -> Plan {
        let held = if bases_resident { sizes.bases_bytes() } else { 0 }
            + if matrices == MatrixPlacement::Device {
                sizes.matrices.unwrap_or(0)
            } else {
                0
            };
        let proof = proof_bytes(sizes, matrices, (!bases_resident).then_some(window));
        let room = usable.saturating_sub(SLACK);
        Plan {
            usable,
            bases_resident,
            matrices,
            window: if bases_resident { 0 } else { window },
            held_bytes: held,
            proof_bytes: proof,
            proofs_at_once: room.saturating_sub(held) / proof.max(1),
        }
    }

    fn fits(&self) -> bool {
        self.held_bytes + self.proof_bytes + SLACK <= self.usable
    }
}

impl Plan {
    /// Where a circuit planned so reads the matrices of its recording
    /// (`sizes` with the recording's matrices) in `usable` bytes, the
    /// device memory it has now (what other circuits hold left out, as
    /// for [`Plan::new`]): in device memory when they fit there beside one
    /// proof, else streamed when a proof that streams them fits, else
    /// nowhere (a/b/c from the host). The plan's own `usable` is not used:
    /// it left out what others held when it was made, and leaving that out
    /// again counted it twice.
    pub fn matrix_placement(&self, sizes: &CircuitSizes, usable: u64) -> MatrixPlacement {
        let Some(matrices) = sizes.matrices else {
            return MatrixPlacement::Host;
        };
        let held = self.held_bytes;
        if held + matrices + self.proof_bytes_for(sizes, MatrixPlacement::Device) + SLACK <= usable {
            MatrixPlacement::Device
        } else if held + self.proof_bytes_for(sizes, MatrixPlacement::Streamed) + SLACK <= usable {
            MatrixPlacement::Streamed
        } else {
            MatrixPlacement::Host
        }
    }

    /// This plan, made before the circuit was recorded, with the recording
    /// (`sizes` with its matrices) placed: `matrices` says where they are
    /// read from. Where this plan's streaming windows leave the matrices no
    /// room on the device but smaller windows would (and a proof whose
    /// a/b/c come from the host still fits beside them), the plan made
    /// with the recording instead: the 7.46 GB of a 32 GiB PoRep's
    /// matrices cross PCIe once, not with every proof (measured with
    /// 29 GiB free: 27.6 s per proof streaming them, against 26.4 s with
    /// them resident at 22 GiB).
    /// `usable` as for [`matrix_placement`](Self::matrix_placement).
    pub fn with_recording(&self, sizes: &CircuitSizes, usable: u64) -> Plan {
        let placement = self.matrix_placement(sizes, usable);
        let kept = Plan {
            matrices: placement,
            ..*self
        };
        if placement == MatrixPlacement::Device || self.bases_resident {
            return kept;
        }
        let plain = CircuitSizes {
            matrices: None,
            coefficients: 0,
            ..*sizes
        };
        match Plan::new(sizes, usable) {
            Ok(joint)
                if joint.matrices == MatrixPlacement::Device
                    && joint.held_bytes + joint.proof_bytes_for(&plain, MatrixPlacement::Host) + SLACK
                        <= joint.usable =>
            {
                joint
            }
            _ => kept,
        }
    }

    /// Device bytes one proof of a circuit of `sizes` takes at its peak
    /// under this plan's bases, with a/b/c as `matrices` says.
    pub fn proof_bytes_for(&self, sizes: &CircuitSizes, matrices: MatrixPlacement) -> u64 {
        proof_bytes(sizes, matrices, (!self.bases_resident).then_some(self.window))
    }

    /// How the h query's bases (the largest MSM's) could be precomputed
    /// (see [`base_tables`](crate::base_tables)) in what this plan leaves
    /// free with `proofs` proofs on the device, windows of `window_bits`
    /// bits: the resident bases are the first copy, the free memory holds
    /// the others. `None` with streamed bases (there is no room for one
    /// copy) or when `proofs` do not fit.
    pub fn h_table(&self, sizes: &CircuitSizes, proofs: u64, window_bits: u32) -> Option<TablePlan> {
        if !self.bases_resident || proofs > self.proofs_at_once {
            return None;
        }
        let room = self.usable.saturating_sub(SLACK);
        let free = room.saturating_sub(self.held_bytes + proofs * self.proof_bytes);
        let h = sizes.bases[0] as u64;
        TablePlan::for_memory(h, G1_BASE, window_bits, h * G1_BASE + free)
    }
}

/// The matrix placements a plan may choose for a circuit of `sizes`, best
/// first (only the host's before the circuit is recorded).
fn placements(sizes: &CircuitSizes) -> &'static [MatrixPlacement] {
    use MatrixPlacement::*;
    if sizes.matrices.is_some() {
        &[Device, Streamed, Host]
    } else {
        &[Host]
    }
}

/// The windows a streamed MSM over `bases` bases passes through, as base
/// ranges of at most `window` bases (the last may be shorter).
pub(crate) fn windows(bases: usize, window: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let window = window.max(1);
    (0..bases.div_ceil(window)).map(move |k| k * window..((k + 1) * window).min(bases))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// A 32 GiB PoRep partition, as measured (docs/benchmarks.md).
    fn porep_32g(matrices: Option<u64>) -> CircuitSizes {
        CircuitSizes {
            domain: 1 << 27,
            vars: 130_170_221,
            bases: [(1 << 27) - 1, 130_169_893, 129_753_620, 33_112_282, 33_112_282],
            matrices,
            coefficients: if matrices.is_some() { 9 } else { 0 },
        }
    }

    #[test]
    fn the_memory_a_plan_leaves_free_holds_copies_of_the_h_bases() {
        let s = porep_32g(Some(7_461_105_138));
        let h_copy = s.bases[0] as u64 * G1_BASE;
        // An H200's memory: the bases, the matrices and two proofs leave
        // room for more copies; each extra copy is 12.9 GB.
        let p = Plan::new(&s, 139 * GIB).unwrap();
        let t = p.h_table(&s, 2, 16).unwrap();
        let free = (139 * GIB - SLACK) - p.held_bytes - 2 * p.proof_bytes;
        // The most copies that fit: one window fewer per copy would not.
        assert!(u64::from(t.copies - 1) <= free / h_copy, "{t:?} with {free} bytes free");
        let more = TablePlan::with_group(s.bases[0] as u64, G1_BASE, 16, t.group - 1);
        assert!(more.table_bytes > h_copy + free, "{more:?} would fit too");
        assert!(t.copies > 1 && t.copies < t.windows, "{t:?}");
        assert_eq!(t.table_bytes, u64::from(t.copies) * h_copy);
        // More proofs at once leave fewer copies; streamed bases none.
        assert!(p.h_table(&s, p.proofs_at_once, 16).unwrap().copies <= t.copies);
        assert_eq!(p.h_table(&s, p.proofs_at_once + 1, 16), None);
        let streamed = Plan::new(&s, 15 * GIB).unwrap();
        assert_eq!(streamed.h_table(&s, 1, 16), None);
    }

    #[test]
    fn a_large_gpu_keeps_bases_and_matrices() {
        let s = porep_32g(Some(7_461_105_138));
        assert_eq!(s.bases_bytes(), 47_373_896_256, "the bytes the upload logged");
        let p = Plan::new(&s, 139 * GIB).unwrap();
        assert!(p.bases_resident && p.matrices == MatrixPlacement::Device, "{p:?}");
        assert!(p.proofs_at_once >= 1);
        // Not recorded yet: bases resident, matrices decided later.
        let before = Plan::new(&porep_32g(None), 139 * GIB).unwrap();
        assert!(
            before.bases_resident && before.matrices == MatrixPlacement::Host,
            "{before:?}"
        );
        assert_eq!(before.matrix_placement(&s, 139 * GIB), MatrixPlacement::Device);
    }

    #[test]
    fn cards_storage_providers_own_stream_their_bases_and_every_plan_fits() {
        for (cap, matrices) in [
            (29, MatrixPlacement::Device),
            (22, MatrixPlacement::Device),
            (15, MatrixPlacement::Streamed),
        ] {
            let s = porep_32g(Some(7_461_105_138));
            let p = Plan::new(&s, cap * GIB).unwrap_or_else(|e| panic!("{cap} GiB: {e}"));
            assert!(!p.bases_resident, "{cap} GiB: {p:?}");
            assert_eq!(p.matrices, matrices, "{cap} GiB: {p:?}");
            assert!(
                p.window >= MIN_WINDOW && p.window.is_multiple_of(WINDOW_ALIGN),
                "{cap} GiB: {p:?}"
            );
            assert!(p.held_bytes + p.proof_bytes + SLACK <= cap * GIB, "{cap} GiB: {p:?}");
            assert!(p.proofs_at_once >= 1, "{cap} GiB: {p:?}");
        }
        // An 80 GB card keeps both (the H100 run in docs/benchmarks.md).
        let p = Plan::new(&porep_32g(Some(7_461_105_138)), 78 * GIB).unwrap();
        assert!(p.bases_resident && p.matrices == MatrixPlacement::Device, "{p:?}");
    }

    /// What pinprove planned from on the H100 with all but 15 GiB held by
    /// another process (docs/benchmarks.md): 15,555,231,744 bytes free.
    const SIXTEEN_GB_CARD: u64 = 15_555_231_744;

    #[test]
    fn a_16_gb_card_computes_a_b_c_from_streamed_matrices_in_two_domain_vectors() {
        let s = porep_32g(Some(7_461_105_138));
        let p = Plan::new(&s, SIXTEEN_GB_CARD).unwrap();
        assert_eq!(p.matrices, MatrixPlacement::Streamed, "{p:?}");
        assert_eq!(p.held_bytes, 0, "nothing stays on the device: {p:?}");
        let m = s.domain as u64 * SCALAR;
        let h_step = 2 * m + s.vars as u64 * SCALAR + 2 * s.matrix_chunk() + s.coefficients as u64 * SCALAR;
        assert!(p.proof_bytes >= h_step, "{p:?}");
        assert!(p.proof_bytes + SLACK <= SIXTEEN_GB_CARD, "{p:?}");
        // Planned before the recording (a/b/c from the host), the
        // recording then streams.
        let before = Plan::new(&porep_32g(None), SIXTEEN_GB_CARD).unwrap();
        assert_eq!(before.matrices, MatrixPlacement::Host);
        assert_eq!(before.matrix_placement(&s, SIXTEEN_GB_CARD), MatrixPlacement::Streamed);
        assert!(before.proof_bytes_for(&s, MatrixPlacement::Streamed) + SLACK <= SIXTEEN_GB_CARD);
        // With other circuits' memory taking the room a proof needs, a/b/c
        // come from the host again.
        assert_eq!(
            before.matrix_placement(&s, SIXTEEN_GB_CARD - 4 * GIB),
            MatrixPlacement::Host
        );
    }

    #[test]
    fn a_measured_shape_gives_the_sizes_its_recording_does() {
        let shape = pinprove_groth16::shape::CircuitShape {
            inputs: 328,
            aux: 130_169_893,
            constraints: 130_278_869,
            a_aux: 129_753_292,
            b_inputs: 1,
            b_aux: 33_112_281,
        };
        let s = CircuitSizes::of_shape(&shape, Some(7_461_105_138));
        let want = porep_32g(Some(7_461_105_138));
        assert_eq!(
            (s.domain, s.vars, s.bases, s.matrices),
            (want.domain, want.vars, want.bases, want.matrices)
        );
    }

    #[test]
    fn what_other_circuits_hold_is_left_out_of_the_matrices_room_once() {
        // An 80 GB card where another circuit holds 40 GiB: the PoRep
        // circuit planned in the 38 GiB left keeps its matrices there, as a
        // plan made with them in that room does.
        let left = 38 * GIB;
        let recorded = porep_32g(Some(7_461_105_138));
        let joint = Plan::new(&recorded, left).unwrap();
        assert_eq!(joint.matrices, MatrixPlacement::Device, "{joint:?}");
        let before = Plan::new(&porep_32g(None), left).unwrap();
        assert_eq!(before.matrix_placement(&recorded, left), MatrixPlacement::Device);
        assert_eq!(before.with_recording(&recorded, left).matrices, MatrixPlacement::Device);
    }

    #[test]
    fn a_plan_remade_with_the_recording_keeps_the_matrices_its_first_windows_had_no_room_for() {
        // 29 GiB free, as measured: planned before the recording, the
        // windows took the room the matrices need.
        let usable = 30_587_617_280;
        let recorded = porep_32g(Some(7_461_105_138));
        let before = Plan::new(&porep_32g(None), usable).unwrap();
        assert_eq!(before.matrix_placement(&recorded, usable), MatrixPlacement::Streamed);
        let after = before.with_recording(&recorded, usable);
        assert_eq!(after.matrices, MatrixPlacement::Device, "{after:?}");
        assert!(after.window < before.window, "{before:?} -> {after:?}");
        assert!(after.held_bytes >= 7_461_105_138);
        // A proof of each path fits beside what it holds.
        for path in [MatrixPlacement::Device, MatrixPlacement::Host] {
            assert!(after.held_bytes + after.proof_bytes_for(&porep_32g(None), path) + SLACK <= usable);
        }
        // Where the matrices fit already, or cannot be kept at all, the
        // plan stays and only says where they are read from.
        let big = Plan::new(&porep_32g(None), 139 * GIB).unwrap();
        assert_eq!(
            big.with_recording(&recorded, 139 * GIB),
            Plan {
                matrices: MatrixPlacement::Device,
                ..big
            }
        );
        let small = Plan::new(&porep_32g(None), SIXTEEN_GB_CARD).unwrap();
        assert_eq!(
            small.with_recording(&recorded, SIXTEEN_GB_CARD),
            Plan {
                matrices: MatrixPlacement::Streamed,
                ..small
            }
        );
    }

    #[test]
    fn a_matrix_chunk_is_a_sixteenth_of_a_matrix_within_bounds() {
        let mut s = porep_32g(None);
        assert_eq!(s.matrix_chunk(), 0, "nothing to stream before a recording");
        s.matrices = Some(7_461_105_138);
        assert_eq!(s.matrix_chunk(), MAX_CHUNK);
        s.matrices = Some(48 << 8);
        assert_eq!(s.matrix_chunk(), MIN_CHUNK);
        s.matrices = Some(480 << 20);
        assert_eq!(s.matrix_chunk(), 10 << 20);
    }

    #[test]
    fn a_cap_below_any_plan_says_what_the_circuit_needs() {
        let e = Plan::new(&porep_32g(None), 8 * GIB).unwrap_err();
        assert_eq!(e.usable, 8 * GIB);
        assert!(e.needed > 12 * GIB, "a, b and c alone take 12 GiB: {e}");
        assert!(e.to_string().contains("too few"), "{e}");
    }

    #[test]
    fn every_cap_from_15_gib_up_has_a_plan_that_fits() {
        for matrices in [None, Some(7_461_105_138)] {
            let s = porep_32g(matrices);
            for cap in 15..=140 {
                let p = Plan::new(&s, cap * GIB).unwrap_or_else(|e| panic!("{cap} GiB: {e}"));
                assert!(p.held_bytes + p.proof_bytes + SLACK <= cap * GIB, "{cap} GiB: {p:?}");
            }
        }
    }

    #[test]
    fn windows_cover_the_bases_in_order() {
        let w: Vec<_> = windows(10_000, 4096).collect();
        assert_eq!(w, vec![0..4096, 4096..8192, 8192..10_000]);
        assert_eq!(windows(0, 4096).count(), 0);
        assert_eq!(windows(4096, 4096).collect::<Vec<_>>(), vec![0..4096]);
    }
}
