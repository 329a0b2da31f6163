//! Recording a circuit's matrices from one synthesis.

use std::collections::HashMap;

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;

use super::{MAX_COEFFICIENTS, MINUS_ONE_ID, Matrix, ONE_ID, Recording};
use crate::parts::Sequence;
use crate::{PrecompiledError, Scalar};

/// While recording, the number of inputs is not known yet (the circuit may
/// allocate one at any time), so a column is the variable's own index with
/// this bit set for inputs; [`Recorder::finish`] numbers them for good.
const INPUT_TAG: u32 = 1 << 31;

/// A matrix being built row by row, its columns still tagged.
#[derive(Default)]
struct Rows {
    row_ptr: Vec<u64>,
    cols: Vec<u32>,
    coeff_ids: Vec<u16>,
}

impl Rows {
    fn new() -> Self {
        Rows {
            row_ptr: vec![0],
            ..Rows::default()
        }
    }

    fn end_row(&mut self) {
        self.row_ptr.push(self.cols.len() as u64);
    }

    fn finish(self, num_inputs: u32) -> Matrix {
        let mut cols = self.cols;
        for c in &mut cols {
            *c = if *c & INPUT_TAG != 0 {
                *c & !INPUT_TAG
            } else {
                *c + num_inputs
            };
        }
        // Grown by pushes: give back the slack (up to half of each vector),
        // so that what the budget is charged for is what is held.
        let (mut row_ptr, mut coeff_ids) = (self.row_ptr, self.coeff_ids);
        row_ptr.shrink_to_fit();
        cols.shrink_to_fit();
        coeff_ids.shrink_to_fit();
        Matrix {
            row_ptr,
            cols,
            coeff_ids,
        }
    }
}

/// The distinct coefficients met so far.
struct Dictionary {
    ids: HashMap<[u8; 32], u16>,
    table: Vec<Scalar>,
}

impl Dictionary {
    fn new() -> Self {
        let table = vec![Scalar::ONE, -Scalar::ONE];
        let ids = table
            .iter()
            .zip([ONE_ID, MINUS_ONE_ID])
            .map(|(s, id)| (s.to_bytes_le(), id))
            .collect();
        Dictionary { ids, table }
    }

    fn id(&mut self, coeff: &Scalar) -> Result<u16, PrecompiledError> {
        // Most coefficients are ±1: no hashing for them.
        if *coeff == Scalar::ONE {
            return Ok(ONE_ID);
        }
        if *coeff == -Scalar::ONE {
            return Ok(MINUS_ONE_ID);
        }
        let key = coeff.to_bytes_le();
        if let Some(&id) = self.ids.get(&key) {
            return Ok(id);
        }
        let id = u16::try_from(self.table.len()).map_err(|_| PrecompiledError::TooManyCoefficients {
            limit: MAX_COEFFICIENTS,
        })?;
        self.table.push(*coeff);
        self.ids.insert(key, id);
        Ok(id)
    }
}

/// A constraint system that keeps the constraints and never asks for
/// values (so a blank circuit records as well as one with a witness).
struct Recorder {
    inputs: u32,
    aux: u32,
    matrices: [Rows; 3],
    dictionary: Dictionary,
    /// The first error met where the constraint-system API cannot return
    /// one (`enforce`).
    error: Option<PrecompiledError>,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            inputs: 0,
            aux: 0,
            matrices: [Rows::new(), Rows::new(), Rows::new()],
            dictionary: Dictionary::new(),
            error: None,
        }
    }

    fn fail(&mut self, e: PrecompiledError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn rows(&self) -> usize {
        self.matrices[0].row_ptr.len() - 1
    }

    fn new_variable(&mut self, input: bool) -> Result<Variable, SynthesisError> {
        let count = if input { &mut self.inputs } else { &mut self.aux };
        if *count >= INPUT_TAG - 1 {
            let what = if input { "public inputs" } else { "aux variables" };
            self.fail(PrecompiledError::TooLarge {
                what,
                limit: u64::from(INPUT_TAG - 1),
            });
            return Err(SynthesisError::Unsatisfiable);
        }
        let i = *count as usize;
        *count += 1;
        Ok(Variable::new_unchecked(if input {
            Index::Input(i)
        } else {
            Index::Aux(i)
        }))
    }

    /// Appends `lc`'s non-zero terms to the current row of matrix `m`.
    fn push_terms(&mut self, m: usize, lc: &LinearCombination<Scalar>) -> Result<(), PrecompiledError> {
        let constraint = self.rows();
        let unknown = || PrecompiledError::UnknownVariable { constraint };
        // The classic evaluation skips zero coefficients before it looks the
        // variable up, so an unallocated variable with a zero coefficient is
        // no error there either.
        for (&i, coeff) in lc.iter_inputs() {
            if coeff.is_zero_vartime() {
                continue;
            }
            let col = u32::try_from(i).ok().filter(|&i| i < self.inputs).ok_or_else(unknown)?;
            let id = self.dictionary.id(coeff)?;
            self.matrices[m].cols.push(col | INPUT_TAG);
            self.matrices[m].coeff_ids.push(id);
        }
        for (&i, coeff) in lc.iter_aux() {
            if coeff.is_zero_vartime() {
                continue;
            }
            let col = u32::try_from(i).ok().filter(|&i| i < self.aux).ok_or_else(unknown)?;
            let id = self.dictionary.id(coeff)?;
            self.matrices[m].cols.push(col);
            self.matrices[m].coeff_ids.push(id);
        }
        Ok(())
    }

    /// Appends the rows of `part`, recorded on its own with its own ONE as
    /// input 0, as if its circuit had run here after everything recorded so
    /// far: its other inputs and its aux variables follow this recorder's,
    /// its coefficients get this recorder's ids.
    fn append(&mut self, part: Recorder) -> Result<(), PrecompiledError> {
        let ids = part
            .dictionary
            .table
            .iter()
            .map(|c| self.dictionary.id(c))
            .collect::<Result<Vec<u16>, _>>()?;
        // Inputs past the part's ONE, tagged; aux indices, untagged.
        let (input_base, aux_base) = (self.inputs - 1, self.aux);
        let inputs = self.inputs as u64 + part.inputs as u64 - 1;
        let aux = self.aux as u64 + part.aux as u64;
        let limit = u64::from(INPUT_TAG - 1);
        if inputs > limit || aux > limit {
            let what = if inputs > limit {
                "public inputs"
            } else {
                "aux variables"
            };
            return Err(PrecompiledError::TooLarge { what, limit });
        }
        for (to, from) in self.matrices.iter_mut().zip(part.matrices) {
            let base = to.cols.len() as u64;
            to.row_ptr.extend(from.row_ptr[1..].iter().map(|&e| e + base));
            to.cols.extend(from.cols.iter().map(|&c| match c {
                INPUT_TAG => INPUT_TAG,
                c if c & INPUT_TAG != 0 => c + input_base,
                c => c + aux_base,
            }));
            to.coeff_ids.extend(from.coeff_ids.iter().map(|&id| ids[id as usize]));
        }
        self.inputs = inputs as u32;
        self.aux = aux as u32;
        Ok(())
    }

    fn finish(self, circuit_id: &str) -> Result<Recording, PrecompiledError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let vars = u64::from(self.inputs) + u64::from(self.aux);
        if vars > u64::from(u32::MAX) {
            return Err(PrecompiledError::TooLarge {
                what: "variables",
                limit: u64::from(u32::MAX),
            });
        }
        let [a, b, c] = self.matrices;
        let n = self.inputs;
        Ok(Recording::new(
            circuit_id.to_owned(),
            (self.inputs as usize, self.aux as usize),
            [a.finish(n), b.finish(n), c.finish(n)],
            self.dictionary.table,
        ))
    }
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.new_variable(false)
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.new_variable(true)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        let pushed = lcs.iter().enumerate().try_for_each(|(m, lc)| self.push_terms(m, lc));
        if let Err(e) = pushed {
            self.fail(e);
        }
        // The row ends even after an error, so that the three matrices keep
        // the same number of rows; the recording is discarded anyway.
        for m in &mut self.matrices {
            m.end_row();
        }
    }

    crate::flat_namespaces!();
}

/// Records the matrices of `circuit` (a circuit of type `circuit_id`) from
/// one synthesis, with or without a witness: values are never asked for.
///
/// As the prover does, ONE is allocated as the first input before the
/// circuit runs and one `input × 1 = 0` constraint per input is appended
/// after it, so the rows are exactly the classic assignment's.
pub fn record<C: Circuit<Scalar>>(circuit: C, circuit_id: &str) -> Result<Recording, PrecompiledError> {
    let started = std::time::Instant::now();
    finish(recorded(circuit)?, circuit_id, started)
}

/// A recorder that ran `circuit` after allocating ONE, as the prover does.
fn recorded<C: Circuit<Scalar>>(circuit: C) -> Result<Recorder, PrecompiledError> {
    let mut cs = Recorder::new();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    let synthesized = circuit.synthesize(&mut cs);
    if let Some(e) = cs.error.take() {
        return Err(e);
    }
    synthesized?;
    Ok(cs)
}

/// Records a circuit made of independent `parts` (see [`crate::parts`]:
/// each allocates its own inputs and aux and refers to nothing outside
/// itself but ONE) on every core: groups of parts are recorded at once,
/// each into a recorder of its own, then appended in order with their
/// variables renumbered and their coefficients looked up again. The
/// recording is exactly [`record`]'s of the parts synthesized one after
/// the other. Groups run in waves, so what exists beside the recording
/// being built is about an eighth of it.
pub fn record_parts<T>(parts: &[T], circuit_id: &str) -> Result<Recording, PrecompiledError>
where
    T: Sync,
    for<'a> &'a T: Circuit<Scalar>,
{
    use rayon::prelude::*;
    let started = std::time::Instant::now();
    let mut all = recorded(Sequence::<T>(&[]))?;
    let (threads, group) = crate::parts::grouping(parts.len());
    let groups: Vec<&[T]> = parts.chunks(group).collect();
    for wave in groups.chunks(threads) {
        let done: Vec<Result<Recorder, PrecompiledError>> = wave.par_iter().map(|g| recorded(Sequence(g))).collect();
        for r in done {
            all.append(r?)?;
        }
    }
    finish(all, circuit_id, started)
}

/// Appends the input constraints to a recorder whose circuit has run, and
/// makes the recording.
fn finish(mut cs: Recorder, circuit_id: &str, started: std::time::Instant) -> Result<Recording, PrecompiledError> {
    for i in 0..cs.inputs as usize {
        cs.enforce(
            || "input constraint",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    let recording = cs.finish(circuit_id)?;
    let stats = recording.stats();
    tracing::debug!(
        circuit = circuit_id,
        constraints = stats.constraints,
        nnz = ?stats.nnz,
        coefficients = stats.coefficients,
        bytes = stats.bytes,
        ms = started.elapsed().as_millis() as u64,
        "circuit recorded"
    );
    Ok(recording)
}
