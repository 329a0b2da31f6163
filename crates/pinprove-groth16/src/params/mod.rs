//! Groth16 parameters in bellperson's file format.
//!
//! The file is the verifying key followed by five point sections, each a
//! big-endian u32 count and that many uncompressed points:
//!
//! ```text
//! vk:   alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2  (G1 96 bytes, G2 192 bytes)
//!       u32 n, n × G1 (ic)
//! h:    u32 n, n × G1      l: u32 n, n × G1      a: u32 n, n × G1
//! b_g1: u32 n, n × G1      b_g2: u32 n, n × G2
//! ```
//!
//! Reading checks the whole layout against the file's size before decoding
//! anything (a truncated file is one clear error, never a panic or a short
//! read), then decodes the sections in parallel into pool buffers accounted
//! in the memory budget. Files are read, not mapped (see [`read`]): one that
//! changes while it loads is an error, not a crash.

mod read;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use pinprove_mem::{PinnedPool, PinnedVec, Reservation};

use self::read::{At, Point, Source, check_points, decode_into, write_section};
#[cfg(any(test, feature = "lab"))]
use crate::shape::CircuitShape;
#[cfg(any(test, feature = "lab"))]
use crate::synthetic;

use crate::ParamsError;

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;

/// How thoroughly points are checked when read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Validation {
    /// Every point decodes to a point on the curve (blst's deserialization
    /// checks this) and none of the sections' points is the identity. Catches
    /// corruption; cheap. For files whose origin is trusted (checked by
    /// digest), as bellperson's unchecked reading.
    #[default]
    OnCurve,
    /// Also that every point lies in the prime-order subgroup: for files of
    /// unknown origin. About a scalar multiplication per point.
    Subgroup,
}

/// The verifying key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyingKey {
    /// α in G1.
    pub alpha_g1: G1Affine,
    /// β in G1.
    pub beta_g1: G1Affine,
    /// β in G2.
    pub beta_g2: G2Affine,
    /// γ in G2.
    pub gamma_g2: G2Affine,
    /// δ in G1.
    pub delta_g1: G1Affine,
    /// δ in G2.
    pub delta_g2: G2Affine,
    /// One point per public input (the constant ONE first).
    pub ic: Vec<G1Affine>,
}

impl VerifyingKey {
    /// Reads a verifying key (every point fully checked) from the start of
    /// `bytes`; returns it and the number of bytes it took.
    pub fn read(bytes: &[u8]) -> Result<(VerifyingKey, usize), ParamsError> {
        let src = Source::Bytes(bytes);
        let mut at = At::start(&src);
        let vk = Self::read_at(&mut at)?;
        Ok((vk, at.pos as usize))
    }

    fn read_at(r: &mut At<'_, '_>) -> Result<VerifyingKey, ParamsError> {
        let alpha_g1 = r.g1("vk.alpha_g1")?;
        let beta_g1 = r.g1("vk.beta_g1")?;
        let beta_g2 = r.g2("vk.beta_g2")?;
        let gamma_g2 = r.g2("vk.gamma_g2")?;
        let delta_g1 = r.g1("vk.delta_g1")?;
        let delta_g2 = r.g2("vk.delta_g2")?;
        let n = r.count("vk.ic", G1_BYTES)?;
        let mut ic = Vec::with_capacity(n);
        for index in 0..n {
            let p = r.g1("vk.ic")?;
            if bool::from(p.is_identity()) {
                return Err(ParamsError::PointAtInfinity {
                    section: "vk.ic",
                    index,
                });
            }
            ic.push(p);
        }
        Ok(VerifyingKey {
            alpha_g1,
            beta_g1,
            beta_g2,
            gamma_g2,
            delta_g1,
            delta_g2,
            ic,
        })
    }

    /// Reads a verifying key file (bellperson's `VerifyingKey::write` bytes).
    pub fn read_file(path: impl AsRef<Path>) -> Result<VerifyingKey, ParamsError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| ParamsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let (vk, used) = Self::read(&bytes)?;
        if used != bytes.len() {
            return Err(ParamsError::TrailingBytes {
                extra: (bytes.len() - used) as u64,
            });
        }
        Ok(vk)
    }

    /// Writes the verifying key in bellperson's format.
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.alpha_g1.to_uncompressed())?;
        w.write_all(&self.beta_g1.to_uncompressed())?;
        w.write_all(&self.beta_g2.to_uncompressed())?;
        w.write_all(&self.gamma_g2.to_uncompressed())?;
        w.write_all(&self.delta_g1.to_uncompressed())?;
        w.write_all(&self.delta_g2.to_uncompressed())?;
        w.write_all(&(self.ic.len() as u32).to_be_bytes())?;
        for p in &self.ic {
            w.write_all(&p.to_uncompressed())?;
        }
        Ok(())
    }
}

/// How an SRS was loaded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SrsStats {
    /// The file it came from, if any.
    pub path: Option<PathBuf>,
    /// Size of the encoded parameters.
    pub file_bytes: u64,
    /// Bytes of decoded points held in memory.
    pub memory_bytes: u64,
    /// Time to map, check and decode.
    pub load_time: Duration,
    /// The point checks applied.
    pub validation: Validation,
}

/// Number of points in each query of a parameter file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct QueryLengths {
    /// H: the evaluation domain's size − 1.
    pub h: usize,
    /// L: one per aux variable.
    pub l: usize,
    /// A: one per input, then one per aux variable used by A.
    pub a: usize,
    /// B in G1: inputs used by B, then aux variables used by B.
    pub b_g1: usize,
    /// B in G2, same layout as `b_g1`.
    pub b_g2: usize,
}

/// The decoded query points, in pool buffers, ready for MSMs and uploads.
pub struct SrsPoints {
    h: PinnedVec<blst_p1_affine>,
    l: PinnedVec<blst_p1_affine>,
    a: PinnedVec<blst_p1_affine>,
    b_g1: PinnedVec<blst_p1_affine>,
    b_g2: PinnedVec<blst_p2_affine>,
}

impl SrsPoints {
    /// Bytes of the pool buffers the points occupy.
    fn buffer_bytes(&self) -> u64 {
        [
            self.h.buffer_bytes(),
            self.l.buffer_bytes(),
            self.a.buffer_bytes(),
            self.b_g1.buffer_bytes(),
            self.b_g2.buffer_bytes(),
        ]
        .iter()
        .sum()
    }

    /// H query: one point per coefficient of h (domain size − 1).
    pub fn h(&self) -> &[blst_p1_affine] {
        &self.h
    }

    /// L query: one point per aux variable.
    pub fn l(&self) -> &[blst_p1_affine] {
        &self.l
    }

    /// A query: one point per input, then one per aux variable used by A.
    pub fn a(&self) -> &[blst_p1_affine] {
        &self.a
    }

    /// B query in G1: inputs used by B, then aux variables used by B.
    pub fn b_g1(&self) -> &[blst_p1_affine] {
        &self.b_g1
    }

    /// B query in G2, same layout as [`b_g1`](Self::b_g1).
    pub fn b_g2(&self) -> &[blst_p2_affine] {
        &self.b_g2
    }
}

/// Groth16 parameters: the verifying key, the size of every query, and —
/// unless read header-only for a backend that loads points itself — the
/// decoded query points.
pub struct Srs {
    /// Unique in the process: what an SRS is known by once its points are
    /// gone (see [`Srs::release_points`]).
    id: u64,
    vk: VerifyingKey,
    lengths: QueryLengths,
    points: Option<SrsPoints>,
    stats: SrsStats,
}

impl std::fmt::Debug for Srs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srs")
            .field("ic", &self.vk.ic.len())
            .field("lengths", &self.lengths)
            .field("points", &self.points.is_some())
            .finish()
    }
}

/// Section layout found in a file.
struct Layout {
    /// Byte offset and point count of each section.
    sections: [(u64, usize); 5],
}

const SECTION_NAMES: [&str; 5] = ["h", "l", "a", "b_g1", "b_g2"];

impl Layout {
    fn lengths(&self) -> QueryLengths {
        let n = |i: usize| self.sections[i].1;
        QueryLengths {
            h: n(0),
            l: n(1),
            a: n(2),
            b_g1: n(3),
            b_g2: n(4),
        }
    }
}

/// A fresh [`Srs::id`].
fn next_srs_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Srs {
    /// Reads and decodes the parameter file at `path`.
    pub fn read_file(
        path: impl AsRef<Path>,
        pool: &Arc<PinnedPool>,
        validation: Validation,
    ) -> Result<Srs, ParamsError> {
        Self::read_file_with(path.as_ref(), pool, validation, None)
    }

    /// Like [`read_file`](Self::read_file), with the points' buffers paid
    /// for out of `funds` (an admission reservation made for the load).
    pub fn read_file_funded(
        path: impl AsRef<Path>,
        pool: &Arc<PinnedPool>,
        validation: Validation,
        funds: &mut Reservation,
    ) -> Result<Srs, ParamsError> {
        Self::read_file_with(path.as_ref(), pool, validation, Some(funds))
    }

    fn read_file_with(
        path: &Path,
        pool: &Arc<PinnedPool>,
        validation: Validation,
        funds: Option<&mut Reservation>,
    ) -> Result<Srs, ParamsError> {
        let started = Instant::now();
        let src = Source::open(path)?;
        let mut srs = Self::decode(&src, pool, validation, funds)?;
        srs.stats.path = Some(path.to_path_buf());
        srs.stats.load_time = started.elapsed();
        tracing::info!(
            path = %path.display(),
            bytes = srs.stats.file_bytes,
            ms = srs.stats.load_time.as_millis() as u64,
            ?validation,
            "loaded parameters"
        );
        Ok(srs)
    }

    /// Reads only the verifying key and the query lengths of the file at
    /// `path`, checking the whole layout, for backends that load the points
    /// themselves.
    pub fn read_file_header(path: impl AsRef<Path>) -> Result<Srs, ParamsError> {
        Self::checked_header(path.as_ref(), None)
    }

    /// Checks every point of the file at `path` as [`read_file`](Self::read_file)
    /// would, without keeping them: for backends that load the points
    /// themselves from a file whose content they do not check.
    pub fn check_file(path: impl AsRef<Path>, validation: Validation) -> Result<Srs, ParamsError> {
        Self::checked_header(path.as_ref(), Some(validation))
    }

    /// The file's verifying key and query lengths, its layout checked and,
    /// with `points`, every point checked that way too (not kept).
    fn checked_header(path: &Path, points: Option<Validation>) -> Result<Srs, ParamsError> {
        let started = Instant::now();
        let src = Source::open(path)?;
        let (vk, layout) = Self::layout(&src)?;
        if let Some(validation) = points {
            for (i, &(offset, n)) in layout.sections.iter().enumerate() {
                if i == 4 {
                    check_points::<G2Affine>(&src, offset, n, SECTION_NAMES[i], validation)?;
                } else {
                    check_points::<G1Affine>(&src, offset, n, SECTION_NAMES[i], validation)?;
                }
            }
        }
        Ok(Srs {
            id: next_srs_id(),
            vk,
            lengths: layout.lengths(),
            points: None,
            stats: SrsStats {
                path: Some(path.to_path_buf()),
                file_bytes: src.len(),
                memory_bytes: 0,
                load_time: started.elapsed(),
                validation: points.unwrap_or(Validation::OnCurve),
            },
        })
    }

    /// Decodes parameters from bytes in bellperson's format.
    pub fn from_bytes(bytes: &[u8], pool: &Arc<PinnedPool>, validation: Validation) -> Result<Srs, ParamsError> {
        let started = Instant::now();
        let mut srs = Self::decode(&Source::Bytes(bytes), pool, validation, None)?;
        srs.stats.load_time = started.elapsed();
        Ok(srs)
    }

    fn layout(src: &Source<'_>) -> Result<(VerifyingKey, Layout), ParamsError> {
        let mut r = At::start(src);
        let vk = VerifyingKey::read_at(&mut r)?;
        let mut sections = [(0, 0); 5];
        for (i, name) in SECTION_NAMES.iter().enumerate() {
            let size = if i == 4 { G2_BYTES } else { G1_BYTES };
            let n = r.count(name, size)?;
            sections[i] = (r.pos, n);
            r.skip(n, size);
        }
        if r.pos != src.len() {
            return Err(ParamsError::TrailingBytes {
                extra: src.len() - r.pos,
            });
        }
        Ok((vk, Layout { sections }))
    }

    fn decode(
        src: &Source<'_>,
        pool: &Arc<PinnedPool>,
        validation: Validation,
        funds: Option<&mut Reservation>,
    ) -> Result<Srs, ParamsError> {
        let (vk, layout) = Self::layout(src)?;
        let points = src.with_read_ahead(READ_AHEAD_BYTES, || {
            decode_sections(src, &layout, pool, validation, funds)
        })?;
        let memory_bytes = points.buffer_bytes();
        Ok(Srs {
            id: next_srs_id(),
            vk,
            lengths: layout.lengths(),
            points: Some(points),
            stats: SrsStats {
                path: None,
                file_bytes: src.len(),
                memory_bytes,
                load_time: Duration::ZERO,
                validation,
            },
        })
    }

    /// The verifying key and query lengths of synthetic parameters of
    /// `shape`, without points (what a header read gives for a file).
    #[cfg(any(test, feature = "lab"))]
    pub fn synthetic_header(shape: &CircuitShape) -> Result<Srs, ParamsError> {
        Ok(Srs {
            id: next_srs_id(),
            vk: synthetic::verifying_key(shape.inputs),
            lengths: shape.lengths()?,
            points: None,
            stats: SrsStats {
                path: None,
                file_bytes: shape.file_bytes(),
                memory_bytes: 0,
                load_time: Duration::ZERO,
                validation: Validation::OnCurve,
            },
        })
    }

    /// Synthetic parameters of `shape`, made in memory (no file): valid
    /// points of the right count in every query, the points paid for out
    /// of `funds` when given. Proofs made with them do not verify; see
    /// [`crate::synthetic`].
    #[cfg(any(test, feature = "lab"))]
    pub fn synthetic(
        shape: &CircuitShape,
        pool: &Arc<PinnedPool>,
        mut funds: Option<&mut Reservation>,
    ) -> Result<Srs, ParamsError> {
        let started = Instant::now();
        let mut srs = Srs::synthetic_header(shape)?;
        let lengths = srs.lengths;
        let g1 = synthetic::g1_sections(
            &[lengths.h, lengths.l, lengths.a, lengths.b_g1],
            pool,
            funds.as_deref_mut(),
        )?;
        let [h, l, a, b_g1] = <[_; 4]>::try_from(g1).unwrap_or_else(|_| unreachable!("one section per length"));
        let b_g2 = synthetic::g2_points(lengths.b_g2, pool, funds)?;
        let points = SrsPoints { h, l, a, b_g1, b_g2 };
        srs.stats.memory_bytes = points.buffer_bytes();
        srs.stats.load_time = started.elapsed();
        srs.points = Some(points);
        tracing::info!(
            points = lengths.h + lengths.l + lengths.a + 2 * lengths.b_g1,
            ms = srs.stats.load_time.as_millis() as u64,
            "synthetic parameters made in memory"
        );
        Ok(srs)
    }

    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKey {
        &self.vk
    }

    /// The size of every query.
    pub fn lengths(&self) -> &QueryLengths {
        &self.lengths
    }

    /// Frees the decoded points at once (they are not kept as idle pool
    /// buffers: an evicted SRS is not coming back soon).
    pub fn discard(self) {
        if let Some(p) = self.points {
            p.h.discard();
            p.l.discard();
            p.a.discard();
            p.b_g1.discard();
            p.b_g2.discard();
        }
    }

    /// Frees the decoded points at once and keeps the rest (verifying key,
    /// lengths, statistics): for a backend that holds its own copy of the
    /// bases (in device memory), so that host memory need not keep them.
    pub fn release_points(&mut self) -> u64 {
        let bytes = self.stats.memory_bytes;
        if let Some(p) = self.points.take() {
            p.h.discard();
            p.l.discard();
            p.a.discard();
            p.b_g1.discard();
            p.b_g2.discard();
        }
        self.stats.memory_bytes = 0;
        bytes
    }

    /// Unique in this process: two loads of one file are two SRSs.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The decoded points; `None` when read header-only.
    pub fn points(&self) -> Option<&SrsPoints> {
        self.points.as_ref()
    }

    /// How the SRS was loaded.
    pub fn stats(&self) -> &SrsStats {
        &self.stats
    }

    /// Bytes of memory its points occupy.
    pub fn memory_bytes(&self) -> u64 {
        self.stats.memory_bytes
    }

    /// Writes the parameters in bellperson's format (points needed).
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let p = self
            .points
            .as_ref()
            .ok_or_else(|| io::Error::other("parameters were read header-only"))?;
        self.vk.write(w)?;
        for section in [&p.h, &p.l, &p.a, &p.b_g1] {
            write_section::<G1Affine>(w, section)?;
        }
        write_section::<G2Affine>(w, &p.b_g2)
    }
}

/// How far the read-ahead runs past the decoding: about 2.5 s of a fast
/// disk, what pinning the next section's buffer may take.
const READ_AHEAD_BYTES: u64 = 4 << 30;

/// Decodes the five sections of `layout` into pool buffers, each section's
/// buffer pinned (on another thread) while the one before decodes.
fn decode_sections(
    src: &Source<'_>,
    layout: &Layout,
    pool: &Arc<PinnedPool>,
    validation: Validation,
    mut funds: Option<&mut Reservation>,
) -> Result<SrsPoints, ParamsError> {
    let n = |i: usize| layout.sections[i].1;
    let into = |i, out: &mut _| decode_section::<G1Affine>(src, layout, i, validation, out);
    let mut h = section_buffer::<G1Affine>(n(0), pool, funds.as_deref_mut())?;
    let mut l = while_decoding(
        || into(0, &mut h),
        || section_buffer::<G1Affine>(n(1), pool, funds.as_deref_mut()),
    )?;
    let mut a = while_decoding(
        || into(1, &mut l),
        || section_buffer::<G1Affine>(n(2), pool, funds.as_deref_mut()),
    )?;
    let mut b_g1 = while_decoding(
        || into(2, &mut a),
        || section_buffer::<G1Affine>(n(3), pool, funds.as_deref_mut()),
    )?;
    let mut b_g2 = while_decoding(|| into(3, &mut b_g1), || section_buffer::<G2Affine>(n(4), pool, funds))?;
    decode_section::<G2Affine>(src, layout, 4, validation, &mut b_g2)?;
    Ok(SrsPoints { h, l, a, b_g1, b_g2 })
}

/// Runs `decode` here while `next` (the next section's buffer) is made on
/// another thread: the next buffer once both succeeded. A failed decode
/// waits for `next` and drops what it made.
fn while_decoding<T: Send>(
    decode: impl FnOnce() -> Result<(), ParamsError>,
    next: impl FnOnce() -> Result<T, ParamsError> + Send,
) -> Result<T, ParamsError> {
    std::thread::scope(|s| {
        let next = s.spawn(next);
        decode()?;
        next.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Decodes section `i` of `layout` into `out`, a buffer of its length.
fn decode_section<P: Point>(
    src: &Source<'_>,
    layout: &Layout,
    i: usize,
    validation: Validation,
    out: &mut [P::Raw],
) -> Result<(), ParamsError> {
    decode_into::<P>(src, layout.sections[i].0, (SECTION_NAMES[i], 0), validation, out)
}

/// A pool buffer of `n` points, charged to `funds` when given.
fn section_buffer<P: Point>(
    n: usize,
    pool: &Arc<PinnedPool>,
    funds: Option<&mut Reservation>,
) -> Result<PinnedVec<P::Raw>, ParamsError> {
    let mut out = PinnedVec::with_capacity_charged(n, pool, funds)?;
    // All cores write it: a serial fill of a 12 GiB section took seconds.
    out.try_resize_par(n, P::Raw::default())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};

    use super::read::Source;
    use super::*;
    use crate::shape::CircuitShape;
    use crate::synthetic::write_synthetic_params;

    fn shape(n: usize) -> CircuitShape {
        CircuitShape {
            inputs: 2,
            aux: n,
            constraints: n,
            a_aux: n,
            b_inputs: 2,
            b_aux: n / 2,
        }
    }

    #[test]
    fn a_budget_smaller_than_a_section_is_an_error_and_nothing_stays_checked_out() {
        let mut bytes = Vec::new();
        write_synthetic_params(&shape(1 << 14), &mut bytes).unwrap();
        // Less than the h section alone (a budget that has room for it but
        // not for the rest waits for memory instead, as every pool user).
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 20),
            PoolConfig::default(),
        );
        let err = Srs::from_bytes(&bytes, &pool, Validation::OnCurve).unwrap_err();
        assert!(matches!(err, ParamsError::Memory(_)), "{err}");
        assert_eq!(pool.stats().checked_out_bytes, 0);
        // With room, the same bytes load.
        let roomy = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        Srs::from_bytes(&bytes, &roomy, Validation::OnCurve).unwrap();
    }

    #[test]
    fn read_ahead_keeps_within_its_window_and_ends_at_the_end_of_the_file_or_when_stopped() {
        let dir = std::env::temp_dir().join(format!("pinprove-read-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.params");
        let mut bytes = Vec::new();
        write_synthetic_params(&shape(1 << 16), &mut bytes).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let src = Source::open(&path).unwrap();
        // A window past the end: reads the whole file and returns by itself.
        assert_eq!(src.read_ahead(u64::MAX, &AtomicBool::new(false)), bytes.len() as u64);
        // Read-ahead is not reading: it moves nothing the decoding reads.
        assert_eq!(src.read_to(), 0);
        // A window the decoding never moves: it waits, until stopped.
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| src.read_ahead(1 << 20, &stop));
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!reader.is_finished(), "it waits for the decoding to move on");
            stop.store(true, Ordering::Relaxed);
        });
        // The layout's reads (the counts, up to the last section) do not
        // move where read-ahead starts: it reads the first section first,
        // where the decoding begins. On bcf8eca it started at the last
        // section, and the other four were never read ahead.
        let (_, layout) = Srs::layout(&src).unwrap();
        assert_eq!(src.read_to(), 0);
        let window = 1 << 20;
        assert!(layout.sections[1].0 > window, "the first section spans the window");
        let stop = AtomicBool::new(false);
        let reached = std::thread::scope(|s| {
            let reader = s.spawn(|| src.read_ahead(window, &stop));
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop.store(true, Ordering::Relaxed);
            reader.join().unwrap()
        });
        assert!(reached <= window + (8 << 20), "read ahead to {reached}");
        // The decoding's reads of points move it.
        let mut h = vec![Default::default(); 100];
        read::decode_into::<G1Affine>(&src, layout.sections[0].0, ("h", 0), Validation::OnCurve, &mut h).unwrap();
        assert_eq!(src.read_to(), layout.sections[0].0 + 100 * G1_BYTES as u64);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_panic_in_the_decoding_stops_the_read_ahead_and_ends_the_load() {
        let dir = std::env::temp_dir().join(format!("pinprove-read-ahead-panic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.params");
        let mut bytes = Vec::new();
        write_synthetic_params(&shape(1 << 16), &mut bytes).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        // A window the decoding never moves: the read-ahead waits for it
        // until told to stop. On bcf8eca a panic never told it, and the
        // load (holding every load's lock) never ended.
        let done = Arc::new(AtomicBool::new(false));
        let loader = {
            let (path, done) = (path.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let src = Source::open(&path).unwrap();
                let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    src.with_read_ahead(1 << 20, || panic!("a section's decode panicked"))
                }));
                done.store(true, Ordering::Relaxed);
                panicked.is_err()
            })
        };
        let t = std::time::Instant::now();
        while !done.load(Ordering::Relaxed) {
            assert!(t.elapsed() < std::time::Duration::from_secs(10), "the load never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(loader.join().unwrap(), "the panic reached the caller");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_truncated_after_its_layout_was_read_is_an_error_not_a_crash() {
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        let dir = std::env::temp_dir().join(format!("pinprove-truncate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.params");
        let mut bytes = Vec::new();
        // Big enough that every section takes several read chunks.
        write_synthetic_params(&shape(1 << 16), &mut bytes).unwrap();
        for keep in [bytes.len() / 5, bytes.len() / 2, bytes.len() - 100] {
            std::fs::write(&path, &bytes).unwrap();
            let src = Source::open(&path).unwrap();
            Srs::layout(&src).unwrap();
            // Another process shortens the file while it loads.
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(keep as u64)
                .unwrap();
            let err = Srs::decode(&src, &pool, Validation::OnCurve, None).unwrap_err();
            match err {
                ParamsError::Truncated { section, .. } => {
                    assert!(SECTION_NAMES.contains(&section), "{section}");
                }
                other => panic!("kept {keep}: {other}"),
            }
        }
        assert_eq!(pool.stats().checked_out_bytes, 0, "the partial sections went back");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
