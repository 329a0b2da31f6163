//! Pre-compiled circuits: a circuit's R1CS matrices recorded once, so that
//! later proofs of the same circuit synthesize only the witness.
//!
//! A circuit has the same constraints for every witness, yet the classic
//! synthesis ([`synthesize`](crate::synthesize)) builds every constraint's
//! linear combinations again for each proof, only to evaluate them once
//! and drop them. Here
//! [`record`] runs one synthesis that keeps the matrices A, B and C (in
//! compressed sparse rows, with 32-bit columns and 16-bit ids into a table
//! of distinct coefficients) and the query densities; later proofs run
//! [`synthesize_witness`], whose `enforce` never calls its closures (no
//! linear combination is built), and [`evaluate`] computes a = A·w, b = B·w,
//! c = C·w in parallel into pool buffers. [`synthesize_precompiled`] does
//! both and returns the [`ProvingAssignment`](crate::ProvingAssignment)
//! the classic synthesis would have produced, field by field, so every
//! backend proves from it unchanged.
//!
//! The evaluation is a sparse matrix-vector product over a witness that a
//! GPU holds anyway. [`defer`] leaves it to the backend: the assignment
//! holds the witness and the recording, and a backend that
//! [evaluates recordings](crate::Capabilities::evaluates_recordings) (the
//! native GPU backend) computes a/b/c on its device from matrices kept
//! there, so they never exist in host memory; every other backend computes
//! them on the host first ([`evaluate_pending`]). The CPU evaluation here is
//! the reference for the device's and the path without a GPU.
//!
//! The recording's rows and columns are exactly the classic assignment's:
//! rows in `enforce` order, then one `input × 1 = 0` row per public input
//! (ONE first) as the prover appends them; columns are the inputs (ONE is
//! input 0) then the aux variables, however the circuit interleaved its
//! `alloc_input` and `alloc` calls. A term whose coefficient sums to zero is
//! left out, as the classic evaluation skips it (it neither adds to a/b/c
//! nor marks a density).
//!
//! Measured on the 2-core development machine (test profile, so only
//! indicative) for a 2^18 `BenchCircuit` (the lab's, `circuits`),
//! best of five, warm pool: classic synthesis 59 ms (random mix) and 56 ms
//! (bits); from the recording 24 ms witness + 7 ms evaluation (random) and
//! 12 ms + 8 ms (bits). The recordings take 11–12 MiB (about 1 M non-zero
//! entries; 2 and 65 distinct coefficients), as files too, and 73 ms to
//! record (`measure_precompiled_against_classic_synthesis`, an ignored
//! test, prints these). The bench circuit computes its witness up front in
//! parallel; Filecoin's circuits compute theirs inside `alloc`, one value
//! at a time, and were not measured here.
//!
//! A circuit whose constraints depend on its witness cannot be pre-compiled:
//! the witness-only synthesis compares its counts of constraints, inputs
//! and aux variables with the recording and fails with
//! [`PrecompiledError::ShapeMismatch`], on which a caller falls back to the
//! classic synthesis. (A witness-dependent coefficient with unchanged counts
//! is not detected; such a circuit is not a fixed R1CS to begin with.)

mod eval;
mod file;
mod record;
mod witness;

use std::fmt;
use std::sync::{Arc, Mutex};

use pinprove_mem::sync::Recover;

use crate::{Densities, Density, Scalar};

pub use crate::error::PrecompiledError;
pub use eval::{PrecompiledStats, defer, evaluate, evaluate_pending, evaluate_pending_from, synthesize_precompiled};
pub use file::FORMAT_VERSION;
pub use record::{record, record_parts};
pub use witness::{WitnessValues, synthesize_witness, synthesize_witness_parts};

/// The most distinct coefficients a recording holds (16-bit ids).
pub const MAX_COEFFICIENTS: usize = 1 << 16;

/// Coefficient id of one, always present (most coefficients are one).
const ONE_ID: u16 = 0;
/// Coefficient id of minus one, always present (`lc - var`).
const MINUS_ONE_ID: u16 = 1;

/// One of the matrices A, B, C in compressed sparse rows: row `r`'s entries
/// are `row_ptr[r]..row_ptr[r + 1]` of `cols` and `coeff_ids`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matrix {
    row_ptr: Vec<u64>,
    cols: Vec<u32>,
    coeff_ids: Vec<u16>,
}

impl Matrix {
    /// Number of rows (constraints).
    pub fn rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }

    /// Number of non-zero entries.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    /// Row offsets into [`cols`](Self::cols): `rows + 1` of them, from 0.
    pub fn row_ptr(&self) -> &[u64] {
        &self.row_ptr
    }

    /// Column of every entry: an input's index, or the number of inputs
    /// plus an aux variable's index.
    pub fn cols(&self) -> &[u32] {
        &self.cols
    }

    /// Coefficient of every entry, as an index into
    /// [`Recording::coefficients`].
    pub fn coeff_ids(&self) -> &[u16] {
        &self.coeff_ids
    }

    /// Columns and coefficient ids of row `r`.
    pub fn row(&self, r: usize) -> (&[u32], &[u16]) {
        let (start, end) = (self.row_ptr[r] as usize, self.row_ptr[r + 1] as usize);
        (&self.cols[start..end], &self.coeff_ids[start..end])
    }

    /// Bytes the matrix occupies in memory.
    pub fn bytes(&self) -> u64 {
        (self.row_ptr.len() * 8 + self.cols.len() * 4 + self.coeff_ids.len() * 2) as u64
    }

    /// Checks the structure: offsets from 0, non-decreasing, ending at the
    /// number of entries; columns below `vars`; ids below `coeffs`.
    fn check(&self, vars: usize, coeffs: usize) -> Result<(), String> {
        if self.row_ptr.first() != Some(&0) {
            return Err("a row offset table does not start at 0".into());
        }
        if self.row_ptr.windows(2).any(|w| w[0] > w[1]) {
            return Err("row offsets decrease".into());
        }
        if self.row_ptr.last().copied() != Some(self.cols.len() as u64) || self.cols.len() != self.coeff_ids.len() {
            return Err("row offsets do not end at the number of entries".into());
        }
        if let Some(c) = self.cols.iter().find(|&&c| c as usize >= vars) {
            return Err(format!("column {c} is beyond the {vars} variables"));
        }
        if let Some(id) = self.coeff_ids.iter().find(|&&id| id as usize >= coeffs) {
            return Err(format!("coefficient id {id} is beyond the {coeffs} coefficients"));
        }
        Ok(())
    }
}

/// A recording's matrices A, B, C and their coefficient table: what the
/// evaluation of a/b/c reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrices {
    a: Matrix,
    b: Matrix,
    c: Matrix,
    coefficients: Vec<Scalar>,
}

impl Matrices {
    /// The matrix A.
    pub fn a(&self) -> &Matrix {
        &self.a
    }

    /// The matrix B.
    pub fn b(&self) -> &Matrix {
        &self.b
    }

    /// The matrix C.
    pub fn c(&self) -> &Matrix {
        &self.c
    }

    /// The distinct coefficients, indexed by the matrices' coefficient ids
    /// (one is id 0, minus one id 1).
    pub fn coefficients(&self) -> &[Scalar] {
        &self.coefficients
    }

    /// Bytes they occupy in memory.
    pub fn bytes(&self) -> u64 {
        self.a.bytes() + self.b.bytes() + self.c.bytes() + self.coefficients.len() as u64 * 32
    }
}

/// A circuit's R1CS as the prover sees it, recorded by [`record`].
///
/// Its matrices can be released from host memory once every device that
/// proves the circuit holds a copy of its own
/// ([`release_matrices`](Self::release_matrices)); the counts and densities
/// that witness-only synthesis needs stay.
pub struct Recording {
    circuit_id: String,
    num_inputs: usize,
    num_aux: usize,
    num_constraints: usize,
    nnz: [usize; 3],
    num_coefficients: usize,
    matrix_bytes: u64,
    matrices: Mutex<Option<Arc<Matrices>>>,
    densities: Densities,
}

/// Sizes of a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordingStats {
    /// Constraints, the input constraints included.
    pub constraints: usize,
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Non-zero entries of A, B and C.
    pub nnz: [usize; 3],
    /// Distinct coefficients.
    pub coefficients: usize,
    /// Bytes the recording occupies in memory with its matrices (matrices,
    /// coefficients, densities).
    pub bytes: u64,
    /// Of those, the matrices' and coefficients' bytes.
    pub matrix_bytes: u64,
}

impl Recording {
    /// Assembles a recording whose matrices were checked (or built right),
    /// computing the densities from the matrices' columns.
    fn new(
        circuit_id: String,
        (num_inputs, num_aux): (usize, usize),
        [a, b, c]: [Matrix; 3],
        coefficients: Vec<Scalar>,
    ) -> Self {
        // The densities are the columns each query uses: every stored
        // coefficient is non-zero, exactly the terms the classic evaluation
        // marks.
        let densities = Densities {
            a_aux: column_density(&a, num_inputs, num_aux),
            b_input: column_density(&b, 0, num_inputs),
            b_aux: column_density(&b, num_inputs, num_aux),
        };
        let matrices = Matrices { a, b, c, coefficients };
        Recording {
            circuit_id,
            num_inputs,
            num_aux,
            num_constraints: matrices.a.rows(),
            nnz: [matrices.a.nnz(), matrices.b.nnz(), matrices.c.nnz()],
            num_coefficients: matrices.coefficients.len(),
            matrix_bytes: matrices.bytes(),
            matrices: Mutex::new(Some(Arc::new(matrices))),
            densities,
        }
    }

    /// The circuit type's id the recording was made for.
    pub fn circuit_id(&self) -> &str {
        &self.circuit_id
    }

    /// Constraints, the input constraints included.
    pub fn num_constraints(&self) -> usize {
        self.num_constraints
    }

    /// Public inputs, ONE included.
    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    /// Aux variables.
    pub fn num_aux(&self) -> usize {
        self.num_aux
    }

    /// The matrices and coefficients, unless they were released.
    pub fn matrices(&self) -> Result<Arc<Matrices>, crate::ProveError> {
        self.lock().clone().ok_or_else(|| crate::ProveError::MatricesReleased {
            circuit: self.circuit_id.clone(),
        })
    }

    /// Whether the matrices are still in host memory.
    pub fn holds_matrices(&self) -> bool {
        self.lock().is_some()
    }

    /// Drops the matrices from host memory, for a caller that made sure
    /// nothing on the host needs them any more (every device holds its own
    /// copy); returns the bytes that go with them (0 when they were gone
    /// already). Users holding them from [`matrices`](Self::matrices) keep
    /// them until they let go.
    pub fn release_matrices(&self) -> u64 {
        match self.lock().take() {
            Some(_) => self.matrix_bytes,
            None => 0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Matrices>>> {
        self.matrices.lock().recover()
    }

    /// The variables each query uses.
    pub fn densities(&self) -> &Densities {
        &self.densities
    }

    /// Sizes and memory of the recording.
    pub fn stats(&self) -> RecordingStats {
        let d = &self.densities;
        let density_bytes = [&d.a_aux, &d.b_input, &d.b_aux]
            .iter()
            .map(|d| d.words().len() as u64 * 8)
            .sum::<u64>();
        RecordingStats {
            constraints: self.num_constraints,
            inputs: self.num_inputs,
            aux: self.num_aux,
            nnz: self.nnz,
            coefficients: self.num_coefficients,
            bytes: self.matrix_bytes + density_bytes,
            matrix_bytes: self.matrix_bytes,
        }
    }
}

impl Clone for Recording {
    fn clone(&self) -> Self {
        Recording {
            circuit_id: self.circuit_id.clone(),
            matrices: Mutex::new(self.lock().clone()),
            densities: self.densities.clone(),
            ..*self
        }
    }
}

impl PartialEq for Recording {
    fn eq(&self, other: &Self) -> bool {
        let matrices = |r: &Recording| r.lock().clone();
        self.circuit_id == other.circuit_id
            && (self.num_inputs, self.num_aux) == (other.num_inputs, other.num_aux)
            && matrices(self) == matrices(other)
            && self.densities == other.densities
    }
}

impl fmt::Debug for Recording {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recording")
            .field("circuit_id", &self.circuit_id)
            .field("stats", &self.stats())
            .field("holds_matrices", &self.holds_matrices())
            .finish()
    }
}

/// Which of the `len` variables starting at column `first` appear in `m`.
fn column_density(m: &Matrix, first: usize, len: usize) -> Density {
    let mut d = Density::with_capacity(len);
    for _ in 0..len {
        d.add_element();
    }
    for &c in m.cols() {
        let c = c as usize;
        if c >= first {
            d.inc(c - first);
        }
    }
    d
}

#[cfg(test)]
mod tests;
