//! Reading parameter bytes: positioned reads from a file (or a slice), the
//! layout check, and parallel point decoding.
//!
//! Files are read with `pread`, never memory-mapped: a parameter file that
//! is truncated or replaced while it loads then yields an error naming the
//! section, where a mapping would have killed the process with SIGBUS. Each
//! section is read in chunks, the next chunk read while the current one is
//! decoded on all cores; a read-ahead thread keeps the disk busy a window
//! ahead of the decoding (while a section's buffer is pinned, above all), so
//! reading costs about what the disk takes.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use super::{G1_BYTES, G2_BYTES, Validation};
use crate::ParamsError;

/// Bytes read per chunk of a section.
const CHUNK_BYTES: usize = 8 << 20;
/// Points decoded per parallel task.
const PER_TASK: usize = 1024;

/// Where parameter bytes come from.
pub(super) enum Source<'a> {
    /// An open file and its length when the read began.
    File {
        /// The file.
        file: File,
        /// Its length at open.
        len: u64,
        /// Its path, for errors.
        path: &'a Path,
        /// The end of the furthest point read so far: where read-ahead
        /// starts. The layout's reads (the counts, up to the last section)
        /// do not move it; read-ahead started there read only the last
        /// section.
        read_to: AtomicU64,
    },
    /// Bytes already in memory.
    Bytes(&'a [u8]),
}

impl<'a> Source<'a> {
    /// Opens `path` for reading.
    pub(super) fn open(path: &'a Path) -> Result<Source<'a>, ParamsError> {
        let io = |source| ParamsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(Source::File {
            file,
            len,
            path,
            read_to: AtomicU64::new(0),
        })
    }

    /// Length of the bytes, as found when the read began.
    pub(super) fn len(&self) -> u64 {
        match self {
            Source::File { len, .. } => *len,
            Source::Bytes(b) => b.len() as u64,
        }
    }

    /// Fills `buf` with points from `offset`, and moves where read-ahead
    /// starts past them (see [`read_at`](Self::read_at)).
    fn read_points_at(&self, buf: &mut [u8], offset: u64, section: &'static str) -> Result<(), ParamsError> {
        self.read_at(buf, offset, section)?;
        if let Source::File { read_to, .. } = self {
            read_to.fetch_max(offset + buf.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Fills `buf` from `offset`. A file that shrank since it was opened is
    /// a [`ParamsError::Truncated`] naming `section`.
    fn read_at(&self, buf: &mut [u8], offset: u64, section: &'static str) -> Result<(), ParamsError> {
        match self {
            Source::Bytes(b) => {
                let start = usize::try_from(offset).ok().filter(|&s| s <= b.len());
                let end = start.and_then(|s| s.checked_add(buf.len())).filter(|&e| e <= b.len());
                match (start, end) {
                    (Some(s), Some(e)) => {
                        buf.copy_from_slice(&b[s..e]);
                        Ok(())
                    }
                    _ => Err(truncated(section, offset, buf.len(), b.len() as u64)),
                }
            }
            Source::File { file, path, .. } => match file.read_exact_at(buf, offset) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    let now = file.metadata().map(|m| m.len()).unwrap_or(0);
                    Err(truncated(section, offset, buf.len(), now))
                }
                Err(source) => Err(ParamsError::Io {
                    path: path.to_path_buf(),
                    source,
                }),
            },
        }
    }
}

impl Source<'_> {
    /// Reads the file ahead of the decoding, at most `window` bytes past
    /// the furthest read, into a scratch buffer: the pages stay in the page
    /// cache for the decoding's reads, and the disk works while the decoder
    /// waits (for a section's buffer above all). Returns at the end of the
    /// file, at its first error (the decoding's own read reports it) or
    /// when `stop` is set, with the offset it read to. Bytes in memory need
    /// no read-ahead.
    pub(super) fn read_ahead(&self, window: u64, stop: &AtomicBool) -> u64 {
        let Source::File { file, len, read_to, .. } = self else {
            return 0;
        };
        let mut scratch = vec![0u8; CHUNK_BYTES];
        let mut at = 0u64;
        while at < *len && !stop.load(Ordering::Relaxed) {
            let decoded_to = read_to.load(Ordering::Relaxed);
            at = at.max(decoded_to);
            if at >= decoded_to.saturating_add(window) {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            let n = (*len - at).min(CHUNK_BYTES as u64) as usize;
            if file.read_exact_at(&mut scratch[..n], at).is_err() {
                return at;
            }
            at += n as u64;
        }
        at
    }

    /// Runs `work` (the decoding) with a read-ahead thread at most `window`
    /// bytes ahead of it, stopped when `work` returns or panics: a panic
    /// that left it asleep would keep the scope, and the load, from ever
    /// ending.
    pub(super) fn with_read_ahead<T>(&self, window: u64, work: impl FnOnce() -> T) -> T {
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| self.read_ahead(window, &stop));
            let _stop = StopOnDrop(&stop);
            work()
        })
    }

    /// Where read-ahead has nothing left behind: the end of the furthest
    /// read (tests).
    #[cfg(test)]
    pub(super) fn read_to(&self) -> u64 {
        match self {
            Source::File { read_to, .. } => read_to.load(Ordering::Relaxed),
            Source::Bytes(_) => 0,
        }
    }
}

fn truncated(section: &'static str, offset: u64, needed: usize, len: u64) -> ParamsError {
    ParamsError::Truncated {
        section,
        offset,
        needed: needed as u64,
        available: len.saturating_sub(offset),
    }
}

/// A read position in a source, checking every length against what the
/// source holds before reading.
pub(super) struct At<'s, 'a> {
    src: &'s Source<'a>,
    /// Offset of the next byte.
    pub(super) pos: u64,
}

impl<'s, 'a> At<'s, 'a> {
    pub(super) fn start(src: &'s Source<'a>) -> Self {
        At { src, pos: 0 }
    }

    fn left(&self) -> u64 {
        self.src.len().saturating_sub(self.pos)
    }

    fn take(&mut self, section: &'static str, n: usize) -> Result<Vec<u8>, ParamsError> {
        if n as u64 > self.left() {
            return Err(truncated(section, self.pos, n, self.src.len()));
        }
        let mut v = vec![0u8; n];
        self.src.read_at(&mut v, self.pos, section)?;
        self.pos += n as u64;
        Ok(v)
    }

    /// A section's u32 count, checked against what is left of the source.
    pub(super) fn count(&mut self, section: &'static str, point_bytes: usize) -> Result<usize, ParamsError> {
        let raw = self.take(section, 4)?;
        let n = u32::from_be_bytes(raw.try_into().expect("4 bytes")) as usize;
        let needed = n as u64 * point_bytes as u64;
        if needed > self.left() {
            return Err(ParamsError::Truncated {
                section,
                offset: self.pos,
                needed,
                available: self.left(),
            });
        }
        Ok(n)
    }

    /// Moves past `n` points of `point_bytes` (checked by [`count`](Self::count)).
    pub(super) fn skip(&mut self, n: usize, point_bytes: usize) {
        self.pos += n as u64 * point_bytes as u64;
    }

    /// One G1 point, fully checked (subgroup included).
    pub(super) fn g1(&mut self, section: &'static str) -> Result<G1Affine, ParamsError> {
        let raw: [u8; G1_BYTES] = self.take(section, G1_BYTES)?.try_into().expect("sized");
        Option::from(G1Affine::from_uncompressed(&raw)).ok_or(ParamsError::InvalidPoint {
            section,
            index: 0,
            group: "G1",
            why: "not a point of the subgroup",
        })
    }

    /// One G2 point, fully checked.
    pub(super) fn g2(&mut self, section: &'static str) -> Result<G2Affine, ParamsError> {
        let raw: [u8; G2_BYTES] = self.take(section, G2_BYTES)?.try_into().expect("sized");
        Option::from(G2Affine::from_uncompressed(&raw)).ok_or(ParamsError::InvalidPoint {
            section,
            index: 0,
            group: "G2",
            why: "not a point of the subgroup",
        })
    }
}

#[derive(Clone, Copy)]
enum Bad {
    Invalid(&'static str),
    Infinity,
}

/// What reading and writing the file needs of a group's affine points.
pub(super) trait Point: Sized {
    const BYTES: usize;
    const GROUP: &'static str;
    /// blst's form, kept in memory.
    type Raw: Copy + Default + Send + Sync;
    fn decode_unchecked(bytes: &[u8]) -> Option<Self>;
    fn is_infinity(&self) -> bool;
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
    // blst's deserialization checks that the coordinates are below the
    // modulus and that the point lies on the curve: checked again here, the
    // curve equation took a third of a load's CPU time.
    let p = P::decode_unchecked(bytes).ok_or(Bad::Invalid("does not decode to a point on the curve"))?;
    if p.is_infinity() {
        return Err(Bad::Infinity);
    }
    if validation == Validation::Subgroup && !p.in_subgroup() {
        return Err(Bad::Invalid("not in the prime-order subgroup"));
    }
    Ok(p.raw())
}

pub(super) fn write_section<P: Point>(w: &mut impl Write, points: &[P::Raw]) -> io::Result<()> {
    w.write_all(&(points.len() as u32).to_be_bytes())?;
    for p in points {
        w.write_all(&P::from_raw(*p).encode())?;
    }
    Ok(())
}

/// Decodes the `out.len()` points of `section` that start at byte `offset`
/// of `src` into `out`; `first` is the index of `out[0]` in the section (for
/// errors). Reads the next chunk while the current one is decoded.
pub(super) fn decode_into<P: Point>(
    src: &Source<'_>,
    offset: u64,
    (section, first): (&'static str, usize),
    validation: Validation,
    out: &mut [P::Raw],
) -> Result<(), ParamsError> {
    let per_chunk = (CHUNK_BYTES / P::BYTES).max(1);
    let chunk_len = out.len().min(per_chunk) * P::BYTES;
    let (mut cur, mut next) = (vec![0u8; chunk_len], vec![0u8; chunk_len]);
    let n = out.len();
    let at = |i: usize| offset + (i * P::BYTES) as u64;
    src.read_points_at(&mut cur[..out.len().min(per_chunk) * P::BYTES], at(0), section)?;
    for (k, dst) in out.chunks_mut(per_chunk).enumerate() {
        let (done, len) = (k * per_chunk, dst.len());
        let following = (n - done - len).min(per_chunk);
        let this = &cur[..len * P::BYTES];
        let (decoded, read) = rayon::join(
            || decode_chunk::<P>(this, dst, (section, first + done), validation),
            || match following {
                0 => Ok(()),
                m => src.read_points_at(&mut next[..m * P::BYTES], at(done + len), section),
            },
        );
        decoded?;
        read?;
        std::mem::swap(&mut cur, &mut next);
    }
    Ok(())
}

fn decode_chunk<P: Point>(
    bytes: &[u8],
    out: &mut [P::Raw],
    (section, first): (&'static str, usize),
    validation: Validation,
) -> Result<(), ParamsError> {
    out.par_chunks_mut(PER_TASK)
        .zip(bytes.par_chunks(PER_TASK * P::BYTES))
        .enumerate()
        .try_for_each(|(task, (dst, src))| {
            for (k, (d, raw)) in dst.iter_mut().zip(src.chunks_exact(P::BYTES)).enumerate() {
                let index = first + task * PER_TASK + k;
                *d = decode::<P>(raw, validation).map_err(|bad| match bad {
                    Bad::Infinity => ParamsError::PointAtInfinity { section, index },
                    Bad::Invalid(why) => ParamsError::InvalidPoint {
                        section,
                        index,
                        group: P::GROUP,
                        why,
                    },
                })?;
            }
            Ok::<(), ParamsError>(())
        })
}

/// Checks the `n` points of `section` at `offset` without keeping them:
/// windows of points decoded into one scratch buffer.
pub(super) fn check_points<P: Point>(
    src: &Source<'_>,
    offset: u64,
    n: usize,
    section: &'static str,
    validation: Validation,
) -> Result<(), ParamsError> {
    const WINDOW: usize = 1 << 20;
    let mut scratch = vec![P::Raw::default(); n.min(WINDOW)];
    let mut done = 0;
    while done < n {
        let m = (n - done).min(WINDOW);
        let at = offset + (done * P::BYTES) as u64;
        decode_into::<P>(src, at, (section, done), validation, &mut scratch[..m])?;
        done += m;
    }
    Ok(())
}
