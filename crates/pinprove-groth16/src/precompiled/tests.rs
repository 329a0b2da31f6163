use std::path::{Path, PathBuf};

use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use ff::Field;

use super::*;
use crate::circuits::{BenchCircuit, WitnessMix};
use crate::{PrecompiledError, Scalar};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("pinprove-precompiled-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bench_recording() -> Recording {
    let c = BenchCircuit::new(1000, WitnessMix::Bits).unwrap();
    record(c.clone(), &c.id()).unwrap()
}

/// x (input), y = x², z = 3y + 5 only in C.
struct Small;

impl Circuit<Scalar> for Small {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc_input(|| "x", || Ok(Scalar::from(3u64)))?;
        let y = cs.alloc(|| "y", || Ok(Scalar::from(9u64)))?;
        let z = cs.alloc(|| "z", || Ok(Scalar::from(32u64)))?;
        cs.enforce(|| "sq", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        cs.enforce(
            || "lin",
            |lc| lc + (Scalar::from(3u64), y) + (Scalar::from(5u64), CS::one()),
            |lc| lc + CS::one(),
            |lc| lc + z,
        );
        Ok(())
    }
}

#[test]
fn records_rows_columns_and_densities_exactly() {
    let r = record(Small, "small").unwrap();
    // ONE and x are inputs 0 and 1; y and z are columns 2 and 3.
    assert_eq!((r.num_inputs(), r.num_aux(), r.num_constraints()), (2, 2, 4));
    let m = r.matrices().unwrap();
    assert_eq!(m.a().row_ptr(), &[0, 1, 3, 4, 5]);
    assert_eq!(
        m.a().cols(),
        &[1, 0, 2, 0, 1],
        "inputs first in a row, then aux; then ONE's and x's rows"
    );
    assert_eq!(m.b().cols(), &[1, 0]);
    assert_eq!(m.c().cols(), &[2, 3]);
    let coeff = |x: &Matrix, k: usize| m.coefficients()[x.coeff_ids()[k] as usize];
    assert_eq!(coeff(m.a(), 1), Scalar::from(5u64));
    assert_eq!(coeff(m.a(), 2), Scalar::from(3u64));
    assert_eq!(m.coefficients().len(), 4, "one, minus one, 5, 3");
    let ones = |d: &crate::Density| d.iter_ones().collect::<Vec<_>>();
    assert_eq!(ones(&r.densities().a_aux), vec![0], "y in A");
    assert_eq!(ones(&r.densities().b_input), vec![0, 1], "ONE and x in B");
    assert!(ones(&r.densities().b_aux).is_empty(), "z only in C");
    let s = r.stats();
    assert_eq!(s.nnz, [5, 2, 2]);
    assert_eq!(s.coefficients, 4);
    assert!(s.bytes >= (3 * 5 * 8 + 9 * 6 + 4 * 32) as u64, "{s:?}");
}

#[test]
fn a_recording_round_trips_through_a_file() {
    let dir = TempDir::new("round-trip");
    let r = bench_recording();
    let path = dir.0.join("bench.r1cs");
    r.save(&path).unwrap();
    let back = Recording::load(&path).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.circuit_id(), r.circuit_id());
    // Saving again replaces the file and leaves no temporary behind.
    let small = record(Small, "small").unwrap();
    small.save(&path).unwrap();
    assert_eq!(Recording::load(&path).unwrap(), small);
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("bench.r1cs")]);
}

fn saved(dir: &TempDir) -> (PathBuf, Vec<u8>) {
    let path = dir.0.join("r.r1cs");
    bench_recording().save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

fn load_bytes(path: &Path, bytes: &[u8]) -> Result<Recording, PrecompiledError> {
    std::fs::write(path, bytes).unwrap();
    Recording::load(path)
}

#[test]
fn damaged_files_are_refused_by_name() {
    let dir = TempDir::new("damaged");
    let (path, good) = saved(&dir);

    let mut v = good.clone();
    v[8..12].copy_from_slice(&7u32.to_le_bytes());
    let e = load_bytes(&path, &v).unwrap_err();
    assert!(
        matches!(
            e,
            PrecompiledError::Version {
                found: 7,
                supported: FORMAT_VERSION,
                ..
            }
        ),
        "{e:?}"
    );

    let mut h = good.clone();
    h[40] ^= 1; // the number of constraints
    let e = load_bytes(&path, &h).unwrap_err();
    assert!(matches!(e, PrecompiledError::Checksum { part: "header", .. }), "{e:?}");

    for at in [good.len() - 1, good.len() / 2, 200] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        let e = load_bytes(&path, &b).unwrap_err();
        assert!(
            matches!(e, PrecompiledError::Checksum { part: "body", .. }),
            "{at}: {e:?}"
        );
    }

    for len in [0, 5, 10, 79, 80, 81, good.len() / 2, good.len() - 1] {
        let e = load_bytes(&path, &good[..len]).unwrap_err();
        assert!(matches!(e, PrecompiledError::Truncated { .. }), "{len}: {e:?}");
    }

    let mut t = good.clone();
    t.extend_from_slice(&[0; 3]);
    let e = load_bytes(&path, &t).unwrap_err();
    assert!(matches!(e, PrecompiledError::TrailingBytes { extra: 3, .. }), "{e:?}");

    let e = load_bytes(&path, b"{\"version\": 1, \"hints\": {}}").unwrap_err();
    assert!(matches!(e, PrecompiledError::NotARecording { .. }), "{e:?}");

    let e = Recording::load(&dir.0.join("missing")).unwrap_err();
    assert!(matches!(e, PrecompiledError::Io { .. }), "{e:?}");
}

/// Rewrites both checksums after a change, as a file that is wrong by
/// construction (not by damage) would have them.
fn reseal(bytes: &mut [u8]) {
    let body = file_crc(&bytes[80..]);
    bytes[20..24].copy_from_slice(&body.to_le_bytes());
    let header = file_crc(&bytes[16..80]);
    bytes[12..16].copy_from_slice(&header.to_le_bytes());
}

fn file_crc(b: &[u8]) -> u32 {
    let mut c = file::Crc32::new();
    c.update(b);
    c.value()
}

#[test]
fn well_sealed_but_invalid_content_is_refused() {
    let dir = TempDir::new("invalid");
    let (path, good) = saved(&dir);
    let r = bench_recording();
    let id_len = r.circuit_id().len();
    let coeffs_at = 80 + id_len;
    let a_rows_at = coeffs_at + 32 * r.stats().coefficients;
    let a_cols_at = a_rows_at + 8 * (r.num_constraints() + 1);
    let a_ids_at = a_cols_at + 4 * r.stats().nnz[0];

    let cases: [(&str, usize, Vec<u8>); 5] = [
        ("column", a_cols_at, u32::MAX.to_le_bytes().to_vec()),
        ("coefficient id", a_ids_at, 60000u16.to_le_bytes().to_vec()),
        ("row offsets", a_rows_at + 8, u64::MAX.to_le_bytes().to_vec()),
        ("coefficient", coeffs_at + 32, [0xff; 32].to_vec()),
        ("one", coeffs_at, Scalar::from(2u64).to_bytes_le().to_vec()),
    ];
    for (what, at, patch) in cases {
        let mut b = good.clone();
        b[at..at + patch.len()].copy_from_slice(&patch);
        reseal(&mut b);
        let e = load_bytes(&path, &b).unwrap_err();
        assert!(matches!(e, PrecompiledError::Invalid { .. }), "{what}: {e:?}");
    }

    // Sizes that overflow or ask for more than the file holds: errors
    // before anything is allocated.
    for (at, value) in [(40, u64::MAX), (48, u64::MAX / 4), (72, 1 << 40)] {
        let mut b = good.clone();
        b[at..at + 8].copy_from_slice(&value.to_le_bytes());
        reseal(&mut b);
        let e = load_bytes(&path, &b).unwrap_err();
        assert!(
            matches!(e, PrecompiledError::Invalid { .. } | PrecompiledError::Truncated { .. }),
            "{at}: {e:?}"
        );
    }
}

/// `n` aux variables summed with `n` distinct coefficients.
struct ManyCoefficients(u64);

impl Circuit<Scalar> for ManyCoefficients {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut lc = bellpepper_core::LinearCombination::zero();
        for k in 0..self.0 {
            let v = cs.alloc(|| "v", || Ok(Scalar::ZERO))?;
            lc = lc + (Scalar::from(k + 2), v);
        }
        cs.enforce(|| "sum", |_| lc, |l| l + CS::one(), |l| l);
        Ok(())
    }
}

#[test]
fn too_many_coefficients_is_an_error() {
    // One and minus one are always in the table.
    let fits = record(ManyCoefficients(MAX_COEFFICIENTS as u64 - 3), "fits").unwrap();
    assert_eq!(fits.stats().coefficients, MAX_COEFFICIENTS - 1);
    let e = record(ManyCoefficients(MAX_COEFFICIENTS as u64), "many").unwrap_err();
    assert!(
        matches!(
            e,
            PrecompiledError::TooManyCoefficients {
                limit: MAX_COEFFICIENTS
            }
        ),
        "{e:?}"
    );
}

/// Uses an aux variable before allocating it.
struct Forward;

impl Circuit<Scalar> for Forward {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let later = Variable::new_unchecked(Index::Aux(0));
        cs.enforce(|| "zero", |lc| lc + later - later, |lc| lc, |lc| lc);
        cs.enforce(|| "early", |lc| lc + later, |lc| lc, |lc| lc);
        cs.alloc(|| "x", || Ok(Scalar::ONE))?;
        Ok(())
    }
}

#[test]
fn a_variable_used_before_it_exists_is_an_error() {
    // The first constraint's term cancels to zero: skipped, as the classic
    // evaluation skips it; the second is the error.
    let e = record(Forward, "forward").unwrap_err();
    assert!(
        matches!(e, PrecompiledError::UnknownVariable { constraint: 1 }),
        "{e:?}"
    );
}

/// One part of a circuit made of parts (a PoSt sector's shape): inputs of
/// its own, aux chained from them, constraints that use ONE, coefficients
/// shared by every part (3) and one of the part's own (its seed).
struct Part(u64);

impl Circuit<Scalar> for &Part {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let seed = Scalar::from(self.0 + 7);
        let x = cs.alloc_input(|| "x", || Ok(seed))?;
        let mut prev = cs.alloc(|| "a", || Ok(seed.square()))?;
        cs.enforce(|| "sq", |lc| lc + x, |lc| lc + x, |lc| lc + prev);
        for i in 0..(self.0 % 5 + 1) {
            let next = cs.alloc(|| "next", || Ok(Scalar::from(i)))?;
            cs.enforce(
                || "step",
                |lc| lc + (Scalar::from(3u64), prev) + (seed, CS::one()),
                |lc| lc + CS::one() - x,
                |lc| lc + next,
            );
            prev = next;
        }
        if self.0.is_multiple_of(3) {
            let y = cs.alloc_input(|| "y", || Ok(seed))?;
            cs.enforce(|| "in", |lc| lc + y, |lc| lc + CS::one(), |lc| lc + prev);
        }
        Ok(())
    }
}

/// Parts synthesized one after the other.
struct InOrder<'a>(&'a [Part]);

impl Circuit<Scalar> for InOrder<'_> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.iter().try_for_each(|p| p.synthesize(cs))
    }
}

#[test]
fn parts_recorded_on_every_core_are_the_sequential_recording() {
    // Enough parts for several waves of groups on any machine's pool.
    for n in [1, 2, 7, 500] {
        let parts: Vec<Part> = (0..n).map(Part).collect();
        let whole = record(InOrder(&parts), "parts").unwrap();
        let in_parts = record_parts(&parts, "parts").unwrap();
        assert_eq!(in_parts.stats(), whole.stats(), "{n} parts");
        assert_eq!(*in_parts.matrices().unwrap(), *whole.matrices().unwrap(), "{n} parts");
        assert_eq!(in_parts.densities().a_aux, whole.densities().a_aux, "{n} parts");
        assert_eq!(in_parts.densities().b_input, whole.densities().b_input, "{n} parts");
        assert_eq!(in_parts.densities().b_aux, whole.densities().b_aux, "{n} parts");
    }
    // In a pool of four threads, so that groups really run at once here too.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    let parts: Vec<Part> = (0..333).map(Part).collect();
    let whole = record(InOrder(&parts), "parts").unwrap();
    let in_parts = pool.install(|| record_parts(&parts, "parts")).unwrap();
    assert_eq!(*in_parts.matrices().unwrap(), *whole.matrices().unwrap());
}
