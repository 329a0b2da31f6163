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
//! Reading maps the file, checks the whole layout against the file's size
//! before decoding anything (a truncated file is one clear error, never a
//! panic or a short read), then decodes the sections in parallel into pool
//! buffers accounted in the memory budget.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use pinprove_mem::{MappedFile, PinnedPool, PinnedVec, Reservation};
use rayon::prelude::*;

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
        let mut r = Cursor { bytes, pos: 0 };
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
        Ok((
            VerifyingKey {
                alpha_g1,
                beta_g1,
                beta_g2,
                gamma_g2,
                delta_g1,
                delta_g2,
                ic,
            },
            r.pos,
        ))
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

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, section: &'static str, n: usize) -> Result<&[u8], ParamsError> {
        let available = self.bytes.len() - self.pos;
        if n > available {
            return Err(ParamsError::Truncated {
                section,
                offset: self.pos as u64,
                needed: n as u64,
                available: available as u64,
            });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A section's u32 count, checked against what is left of the file.
    fn count(&mut self, section: &'static str, point_bytes: usize) -> Result<usize, ParamsError> {
        let raw = self.take(section, 4)?;
        let n = u32::from_be_bytes(raw.try_into().expect("4 bytes")) as usize;
        let needed = n * point_bytes;
        let available = self.bytes.len() - self.pos;
        if needed > available {
            return Err(ParamsError::Truncated {
                section,
                offset: self.pos as u64,
                needed: needed as u64,
                available: available as u64,
            });
        }
        Ok(n)
    }

    fn g1(&mut self, section: &'static str) -> Result<G1Affine, ParamsError> {
        let raw: &[u8; G1_BYTES] = self.take(section, G1_BYTES)?.try_into().expect("sized");
        Option::from(G1Affine::from_uncompressed(raw)).ok_or(ParamsError::InvalidPoint {
            section,
            index: 0,
            group: "G1",
            why: "not a point of the subgroup",
        })
    }

    fn g2(&mut self, section: &'static str) -> Result<G2Affine, ParamsError> {
        let raw: &[u8; G2_BYTES] = self.take(section, G2_BYTES)?.try_into().expect("sized");
        Option::from(G2Affine::from_uncompressed(raw)).ok_or(ParamsError::InvalidPoint {
            section,
            index: 0,
            group: "G2",
            why: "not a point of the subgroup",
        })
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    sections: [(usize, usize); 5],
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

impl Srs {
    /// Maps and decodes the parameter file at `path`.
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
        let map = MappedFile::open(path).map_err(|source| ParamsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut srs = Self::decode(&map, pool, validation, funds)?;
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
        let path = path.as_ref();
        let started = Instant::now();
        let map = MappedFile::open(path).map_err(|source| ParamsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let (vk, layout) = Self::layout(&map)?;
        Ok(Srs {
            vk,
            lengths: layout.lengths(),
            points: None,
            stats: SrsStats {
                path: Some(path.to_path_buf()),
                file_bytes: map.len() as u64,
                memory_bytes: 0,
                load_time: started.elapsed(),
                validation: Validation::OnCurve,
            },
        })
    }

    /// Decodes parameters from bytes in bellperson's format.
    pub fn from_bytes(bytes: &[u8], pool: &Arc<PinnedPool>, validation: Validation) -> Result<Srs, ParamsError> {
        let started = Instant::now();
        let mut srs = Self::decode(bytes, pool, validation, None)?;
        srs.stats.load_time = started.elapsed();
        Ok(srs)
    }

    fn layout(bytes: &[u8]) -> Result<(VerifyingKey, Layout), ParamsError> {
        let (vk, vk_end) = VerifyingKey::read(bytes)?;
        let mut r = Cursor { bytes, pos: vk_end };
        let mut sections = [(0, 0); 5];
        for (i, name) in SECTION_NAMES.iter().enumerate() {
            let size = if i == 4 { G2_BYTES } else { G1_BYTES };
            let n = r.count(name, size)?;
            sections[i] = (r.pos, n);
            r.pos += n * size;
        }
        if r.pos != bytes.len() {
            return Err(ParamsError::TrailingBytes {
                extra: (bytes.len() - r.pos) as u64,
            });
        }
        Ok((vk, Layout { sections }))
    }

    fn decode(
        bytes: &[u8],
        pool: &Arc<PinnedPool>,
        validation: Validation,
        mut funds: Option<&mut Reservation>,
    ) -> Result<Srs, ParamsError> {
        let (vk, layout) = Self::layout(bytes)?;
        let g1 = |i: usize, funds: Option<&mut Reservation>| -> Result<PinnedVec<blst_p1_affine>, ParamsError> {
            let (off, n) = layout.sections[i];
            decode_points::<G1Affine>(
                &bytes[off..off + n * G1_BYTES],
                SECTION_NAMES[i],
                pool,
                validation,
                funds,
            )
        };
        let h = g1(0, funds.as_deref_mut())?;
        let l = g1(1, funds.as_deref_mut())?;
        let a = g1(2, funds.as_deref_mut())?;
        let b_g1 = g1(3, funds.as_deref_mut())?;
        let (off, n) = layout.sections[4];
        let b_g2 = decode_points::<G2Affine>(&bytes[off..off + n * G2_BYTES], "b_g2", pool, validation, funds)?;
        let memory_bytes = [
            h.buffer_bytes(),
            l.buffer_bytes(),
            a.buffer_bytes(),
            b_g1.buffer_bytes(),
            b_g2.buffer_bytes(),
        ]
        .iter()
        .sum();
        Ok(Srs {
            vk,
            lengths: layout.lengths(),
            points: Some(SrsPoints { h, l, a, b_g1, b_g2 }),
            stats: SrsStats {
                path: None,
                file_bytes: bytes.len() as u64,
                memory_bytes,
                load_time: Duration::ZERO,
                validation,
            },
        })
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

#[derive(Clone, Copy)]
enum Bad {
    Invalid(&'static str),
    Infinity,
}

/// What reading and writing the file needs of a group's affine points.
trait Point: Sized {
    const BYTES: usize;
    const GROUP: &'static str;
    /// blst's form, kept in memory.
    type Raw: Copy + Default + Send + Sync;
    fn decode_unchecked(bytes: &[u8]) -> Option<Self>;
    fn is_infinity(&self) -> bool;
    fn on_curve(&self) -> bool;
    fn in_subgroup(&self) -> bool;
    fn raw(&self) -> Self::Raw;
    fn from_raw(raw: Self::Raw) -> Self;
    fn encode(&self) -> Vec<u8>;
}

macro_rules! point {
    ($affine:ty, $raw:ty, $bytes:expr, $group:literal) => {
        impl Point for $affine {
            const BYTES: usize = $bytes;
            const GROUP: &'static str = $group;
            type Raw = $raw;
            fn decode_unchecked(bytes: &[u8]) -> Option<Self> {
                Option::from(<$affine>::from_uncompressed_unchecked(bytes.try_into().ok()?))
            }
            fn is_infinity(&self) -> bool {
                bool::from(self.is_identity())
            }
            fn on_curve(&self) -> bool {
                bool::from(self.is_on_curve())
            }
            fn in_subgroup(&self) -> bool {
                bool::from(self.is_torsion_free())
            }
            fn raw(&self) -> $raw {
                *self.as_ref()
            }
            fn from_raw(raw: $raw) -> Self {
                let mut p = <$affine>::identity();
                *p.as_mut() = raw;
                p
            }
            fn encode(&self) -> Vec<u8> {
                self.to_uncompressed().to_vec()
            }
        }
    };
}

point!(G1Affine, blst_p1_affine, G1_BYTES, "G1");
point!(G2Affine, blst_p2_affine, G2_BYTES, "G2");

fn decode<P: Point>(bytes: &[u8], validation: Validation) -> Result<P::Raw, Bad> {
    let p = P::decode_unchecked(bytes).ok_or(Bad::Invalid("does not decode"))?;
    if p.is_infinity() {
        return Err(Bad::Infinity);
    }
    if !p.on_curve() {
        return Err(Bad::Invalid("not on the curve"));
    }
    if validation == Validation::Subgroup && !p.in_subgroup() {
        return Err(Bad::Invalid("not in the prime-order subgroup"));
    }
    Ok(p.raw())
}

fn write_section<P: Point>(w: &mut impl Write, points: &[P::Raw]) -> io::Result<()> {
    w.write_all(&(points.len() as u32).to_be_bytes())?;
    for p in points {
        w.write_all(&P::from_raw(*p).encode())?;
    }
    Ok(())
}

fn decode_points<P: Point>(
    bytes: &[u8],
    section: &'static str,
    pool: &Arc<PinnedPool>,
    validation: Validation,
    funds: Option<&mut Reservation>,
) -> Result<PinnedVec<P::Raw>, ParamsError> {
    let (point_bytes, group) = (P::BYTES, P::GROUP);
    let n = bytes.len() / point_bytes;
    let mut out = PinnedVec::with_capacity_paid(n, pool, funds)?;
    out.try_resize(n, P::Raw::default())?;
    const PER_TASK: usize = 1024;
    out.par_chunks_mut(PER_TASK)
        .zip(bytes.par_chunks(PER_TASK * point_bytes))
        .enumerate()
        .try_for_each(|(task, (dst, src))| {
            for (k, (d, raw)) in dst.iter_mut().zip(src.chunks_exact(point_bytes)).enumerate() {
                let index = task * PER_TASK + k;
                *d = decode::<P>(raw, validation).map_err(|bad| match bad {
                    Bad::Infinity => ParamsError::PointAtInfinity { section, index },
                    Bad::Invalid(why) => ParamsError::InvalidPoint {
                        section,
                        index,
                        group,
                        why,
                    },
                })?;
            }
            Ok::<(), ParamsError>(())
        })?;
    Ok(out)
}
