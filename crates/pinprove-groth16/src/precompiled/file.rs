//! Recordings on disk.
//!
//! A file is a fixed header, then the body: the circuit id, the
//! coefficient table, and A, B, C each as row offsets, columns and
//! coefficient ids. Every number is little-endian.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic `PINR1CS\n` |
//! | 8 | 4 | format version |
//! | 12 | 4 | CRC-32 of bytes 16..80 |
//! | 16 | 4 | length of the circuit id |
//! | 20 | 4 | CRC-32 of the body |
//! | 24 | 8 | public inputs (ONE included) |
//! | 32 | 8 | aux variables |
//! | 40 | 8 | constraints |
//! | 48 | 24 | non-zero entries of A, B, C |
//! | 72 | 8 | distinct coefficients |
//!
//! The header's own checksum is checked before any of its sizes is used,
//! and the sizes must add up to the file's length before anything is
//! allocated, so a damaged file is an error, never a huge allocation.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ff::Field;

use super::{MAX_COEFFICIENTS, MINUS_ONE_ID, Matrices, Matrix, ONE_ID, Recording};
use crate::{PrecompiledError, Scalar};

/// The version of the file format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

const MAGIC: [u8; 8] = *b"PINR1CS\n";
const HEADER_LEN: usize = 80;
/// Longer circuit ids are a damaged header, not a circuit.
const MAX_ID_LEN: u32 = 4096;
/// Bytes encoded at a time on their way to and from the file.
const CHUNK: usize = 1 << 16;

/// CRC-32 as in zlib, gzip and PNG (reflected polynomial 0xEDB88320), eight
/// bytes per step through eight tables.
#[derive(Clone, Copy)]
pub(crate) struct Crc32(u32);

const CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut j = 1;
        while j < 8 {
            let prev = t[j - 1][i];
            t[j][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            j += 1;
        }
        i += 1;
    }
    t
}

impl Crc32 {
    pub(crate) fn new() -> Self {
        Crc32(!0)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        let t = &CRC_TABLES;
        let mut c = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let lo = c ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            c = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][w[4] as usize]
                ^ t[2][w[5] as usize]
                ^ t[1][w[6] as usize]
                ^ t[0][w[7] as usize];
        }
        for &b in words.remainder() {
            c = (c >> 8) ^ t[0][((c ^ u32::from(b)) & 0xff) as usize];
        }
        self.0 = c;
    }

    pub(crate) fn value(self) -> u32 {
        !self.0
    }
}

fn crc(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.value()
}

/// Body bytes for these sizes, or `None` when they overflow.
fn body_len(id_len: u64, rows: u64, nnz: [u64; 3], coefficients: u64) -> Option<u64> {
    let mut n = id_len.checked_add(coefficients.checked_mul(32)?)?;
    for z in nnz {
        n = n
            .checked_add(rows.checked_add(1)?.checked_mul(8)?)?
            .checked_add(z.checked_mul(6)?)?;
    }
    Some(n)
}

/// Writes encoded values through a CRC.
struct BodyWriter<W: Write> {
    out: W,
    crc: Crc32,
    buf: Vec<u8>,
}

impl<W: Write> BodyWriter<W> {
    fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc.update(b);
        self.out.write_all(b)
    }

    fn values<T: Copy, const N: usize>(&mut self, values: &[T], enc: impl Fn(T) -> [u8; N]) -> io::Result<()> {
        for chunk in values.chunks(CHUNK / N) {
            self.buf.clear();
            for &v in chunk {
                self.buf.extend_from_slice(&enc(v));
            }
            self.crc.update(&self.buf);
            self.out.write_all(&self.buf)?;
        }
        Ok(())
    }
}

/// Reads values through a CRC; the file's length was checked, so an early
/// end means the file shrank while it was read.
struct BodyReader<R: Read> {
    input: R,
    crc: Crc32,
    buf: Vec<u8>,
}

impl<R: Read> BodyReader<R> {
    fn bytes(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut b = vec![0; n];
        self.input.read_exact(&mut b)?;
        self.crc.update(&b);
        Ok(b)
    }

    fn values<T, const N: usize>(&mut self, n: usize, dec: impl Fn([u8; N]) -> T) -> io::Result<Vec<T>> {
        let mut out = Vec::with_capacity(n);
        let per = CHUNK / N;
        while out.len() < n {
            let k = (n - out.len()).min(per);
            self.buf.resize(k * N, 0);
            self.input.read_exact(&mut self.buf)?;
            self.crc.update(&self.buf);
            out.extend(self.buf.chunks_exact(N).map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                dec(a)
            }));
        }
        Ok(out)
    }
}

impl Recording {
    /// Writes the recording to `path` atomically: a temporary file in the
    /// same directory, renamed over `path` once complete and synced, so a
    /// reader never sees a partial recording.
    pub fn save(&self, path: &Path) -> Result<(), PrecompiledError> {
        let matrices = self.matrices()?;
        let tmp = temp_path(path);
        let written = self
            .write_to(&matrices, &tmp)
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(source) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(PrecompiledError::Io {
                path: path.to_owned(),
                source,
            });
        }
        let stats = self.stats();
        tracing::debug!(path = %path.display(), circuit = self.circuit_id(), bytes = stats.bytes, "recording saved");
        Ok(())
    }

    fn write_to(&self, matrices: &Matrices, path: &Path) -> io::Result<()> {
        let mut file = BufWriter::with_capacity(CHUNK, File::create(path)?);
        // The header's checksums cover the body: written once the body is.
        file.write_all(&[0; HEADER_LEN])?;
        let mut body = BodyWriter {
            out: &mut file,
            crc: Crc32::new(),
            buf: Vec::with_capacity(CHUNK),
        };
        body.bytes(self.circuit_id().as_bytes())?;
        body.values(matrices.coefficients(), |s| s.to_bytes_le())?;
        for m in [matrices.a(), matrices.b(), matrices.c()] {
            body.values(m.row_ptr(), u64::to_le_bytes)?;
            body.values(m.cols(), u32::to_le_bytes)?;
            body.values(m.coeff_ids(), u16::to_le_bytes)?;
        }
        let body_crc = body.crc.value();
        let header = self.header(body_crc)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header)?;
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    }

    fn header(&self, body_crc: u32) -> io::Result<[u8; HEADER_LEN]> {
        let id_len = u32::try_from(self.circuit_id().len())
            .ok()
            .filter(|&n| n <= MAX_ID_LEN)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "circuit id longer than 4096 bytes"))?;
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[16..20].copy_from_slice(&id_len.to_le_bytes());
        h[20..24].copy_from_slice(&body_crc.to_le_bytes());
        let stats = self.stats();
        let counts = [
            stats.inputs,
            stats.aux,
            stats.constraints,
            stats.nnz[0],
            stats.nnz[1],
            stats.nnz[2],
            stats.coefficients,
        ];
        for (k, n) in counts.into_iter().enumerate() {
            h[24 + 8 * k..32 + 8 * k].copy_from_slice(&(n as u64).to_le_bytes());
        }
        let header_crc = crc(&h[16..]);
        h[12..16].copy_from_slice(&header_crc.to_le_bytes());
        Ok(h)
    }

    /// Reads a recording written by [`save`](Self::save), checking its
    /// version, checksums, length and structure.
    pub fn load(path: &Path) -> Result<Recording, PrecompiledError> {
        let io_err = |source| PrecompiledError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let available = file.metadata().map_err(io_err)?.len();
        let truncated = |needed| PrecompiledError::Truncated {
            path: path.to_owned(),
            needed,
            available,
        };
        let invalid = |why: String| PrecompiledError::Invalid {
            path: path.to_owned(),
            why,
        };
        let mut input = BufReader::with_capacity(CHUNK, file);
        let mut h = [0u8; HEADER_LEN];
        let head = (available as usize).min(HEADER_LEN);
        input.read_exact(&mut h[..head]).map_err(io_err)?;
        if head < MAGIC.len() || h[..8] != MAGIC {
            return Err(if head < MAGIC.len() && h[..head] == MAGIC[..head] {
                truncated(HEADER_LEN as u64)
            } else {
                PrecompiledError::NotARecording { path: path.to_owned() }
            });
        }
        if head < 12 {
            return Err(truncated(HEADER_LEN as u64));
        }
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(PrecompiledError::Version {
                path: path.to_owned(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if head < HEADER_LEN {
            return Err(truncated(HEADER_LEN as u64));
        }
        let (stored, computed) = (u32_at(12), crc(&h[16..]));
        if stored != computed {
            return Err(PrecompiledError::Checksum {
                path: path.to_owned(),
                part: "header",
                stored,
                computed,
            });
        }
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let id_len = u32_at(16);
        let body_crc = u32_at(20);
        let [inputs, aux, rows, nnz_a, nnz_b, nnz_c, coefficients] = std::array::from_fn(|k| u64_at(24 + 8 * k));
        if id_len > MAX_ID_LEN {
            return Err(invalid(format!("a circuit id of {id_len} bytes")));
        }
        let needed = body_len(u64::from(id_len), rows, [nnz_a, nnz_b, nnz_c], coefficients)
            .and_then(|n| n.checked_add(HEADER_LEN as u64))
            .ok_or_else(|| invalid("its sizes overflow".into()))?;
        if needed > available {
            return Err(truncated(needed));
        }
        if needed < available {
            return Err(PrecompiledError::TrailingBytes {
                path: path.to_owned(),
                extra: available - needed,
            });
        }
        // The variable counts are not sizes of the body: bound them by it
        // (one row per input; an aux variable appears in some row, with
        // slack for unused ones), so that a crafted header cannot make the
        // densities below huge.
        let nnz = nnz_a.saturating_add(nnz_b).saturating_add(nnz_c);
        if inputs == 0 || inputs > rows || aux > rows.saturating_add(nnz) {
            return Err(invalid(format!(
                "{inputs} inputs and {aux} aux variables for {rows} rows and {nnz} entries"
            )));
        }
        // Each size is at most the file's length, which fits in memory's
        // address space if the file could be written.
        let size = |n: u64| usize::try_from(n).map_err(|_| invalid(format!("{n} elements do not fit this machine")));
        let (rows, coefficients) = (size(rows)?, size(coefficients)?);
        let (inputs, aux) = (size(inputs)?, size(aux)?);

        let mut body = BodyReader {
            input,
            crc: Crc32::new(),
            buf: Vec::with_capacity(CHUNK),
        };
        let read_err = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => truncated(needed),
            _ => io_err(e),
        };
        let id = body.bytes(id_len as usize).map_err(read_err)?;
        let coeff_bytes: Vec<[u8; 32]> = body.values(coefficients, |b| b).map_err(read_err)?;
        let mut matrix = |nnz: u64| -> Result<Matrix, PrecompiledError> {
            let nnz = size(nnz)?;
            Ok(Matrix {
                row_ptr: body.values(rows + 1, u64::from_le_bytes).map_err(read_err)?,
                cols: body.values(nnz, u32::from_le_bytes).map_err(read_err)?,
                coeff_ids: body.values(nnz, u16::from_le_bytes).map_err(read_err)?,
            })
        };
        let matrices = [matrix(nnz_a)?, matrix(nnz_b)?, matrix(nnz_c)?];
        let computed = body.crc.value();
        if computed != body_crc {
            return Err(PrecompiledError::Checksum {
                path: path.to_owned(),
                part: "body",
                stored: body_crc,
                computed,
            });
        }

        let id = String::from_utf8(id).map_err(|_| invalid("the circuit id is not UTF-8".into()))?;
        let coefficients = decode_coefficients(&coeff_bytes).map_err(invalid)?;
        let vars = inputs
            .checked_add(aux)
            .filter(|&v| v as u64 <= u64::from(u32::MAX))
            .ok_or_else(|| {
                invalid(format!(
                    "{inputs} inputs and {aux} aux variables are beyond 32-bit columns"
                ))
            })?;
        if inputs == 0 || rows < inputs {
            return Err(invalid(format!(
                "{inputs} inputs and {rows} constraints (ONE and one constraint per input are always there)"
            )));
        }
        for m in &matrices {
            m.check(vars, coefficients.len()).map_err(invalid)?;
        }
        Ok(Recording::new(id, (inputs, aux), matrices, coefficients))
    }
}

/// The coefficient table: canonical, non-zero, one and minus one first
/// (the evaluation relies on their ids).
fn decode_coefficients(bytes: &[[u8; 32]]) -> Result<Vec<Scalar>, String> {
    if bytes.len() < 2 || bytes.len() > MAX_COEFFICIENTS {
        return Err(format!("{} coefficients (2 to {MAX_COEFFICIENTS})", bytes.len()));
    }
    let mut table = Vec::with_capacity(bytes.len());
    for (i, b) in bytes.iter().enumerate() {
        let s = Option::<Scalar>::from(Scalar::from_bytes_le(b))
            .ok_or_else(|| format!("coefficient {i} is not a canonical field element"))?;
        if s.is_zero_vartime() {
            return Err(format!("coefficient {i} is zero"));
        }
        table.push(s);
    }
    if table[ONE_ID as usize] != Scalar::ONE || table[MINUS_ONE_ID as usize] != -Scalar::ONE {
        return Err("the coefficient table does not start with one and minus one".into());
    }
    Ok(table)
}

/// A temporary name next to `path`, unique to this process and call.
fn temp_path(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc(b""), 0);
        // Split updates give the whole's checksum.
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut c = Crc32::new();
        c.update(&data[..13]);
        c.update(&data[13..500]);
        c.update(&data[500..]);
        assert_eq!(c.value(), crc(&data));
        // Against the bitwise definition.
        let mut bitwise = !0u32;
        for &b in &data {
            bitwise ^= u32::from(b);
            for _ in 0..8 {
                bitwise = if bitwise & 1 != 0 {
                    0xEDB8_8320 ^ (bitwise >> 1)
                } else {
                    bitwise >> 1
                };
            }
        }
        assert_eq!(!bitwise, crc(&data));
    }
}
