//! a = A·w, b = B·w, c = C·w on the CPU, into pool buffers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellpepper_core::Circuit;
use ff::Field;
use pinprove_mem::{PinnedPool, PinnedVec, Reservation};
use rayon::prelude::*;

use super::{MINUS_ONE_ID, Matrix, ONE_ID, Recording, WitnessValues, synthesize_witness};
use crate::domain::domain_size;
use crate::{AbcLayout, PrecompiledError, ProvingAssignment, Scalar};

/// What one pre-compiled synthesis took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrecompiledStats {
    /// The witness-only synthesis.
    pub witness: Duration,
    /// The evaluation of a, b and c.
    pub evaluation: Duration,
}

/// Row `r` of `m` applied to the witness (inputs, then aux).
#[inline]
fn dot(m: &Matrix, r: usize, coefficients: &[Scalar], inputs: &[Scalar], aux: &[Scalar]) -> Scalar {
    let (cols, ids) = m.row(r);
    let n = inputs.len();
    let mut acc = Scalar::ZERO;
    for (&col, &id) in cols.iter().zip(ids) {
        let col = col as usize;
        let v = if col < n { &inputs[col] } else { &aux[col - n] };
        match id {
            ONE_ID => acc += v,
            MINUS_ONE_ID => acc -= v,
            _ => acc += *v * coefficients[id as usize],
        }
    }
    acc
}

/// Evaluates `recording`'s matrices on `witness` into an assignment laid
/// out for `layout` (a/b/c of one entry per constraint, with room for the
/// whole domain under [`AbcLayout::PaddedToDomain`]), with the recorded
/// densities: the assignment the classic synthesis of the same witness
/// produces. The buffers are paid for out of `funds` when given; on success
/// what is left of it moves to the assignment, on failure it stays with the
/// caller (who may still synthesize the partition classically with it).
pub fn evaluate(
    recording: &Recording,
    witness: WitnessValues,
    pool: &Arc<PinnedPool>,
    layout: AbcLayout,
    funds: &mut Option<Reservation>,
) -> Result<ProvingAssignment, PrecompiledError> {
    let WitnessValues { inputs, aux } = witness;
    for (what, recorded, found) in [
        ("public inputs", recording.num_inputs(), inputs.len()),
        ("aux variables", recording.num_aux(), aux.len()),
    ] {
        if recorded != found {
            return Err(PrecompiledError::ShapeMismatch { what, recorded, found });
        }
    }
    let rows = recording.num_constraints();
    let room = match layout {
        AbcLayout::Exact => rows,
        AbcLayout::PaddedToDomain => domain_size(rows)?,
    };
    let mut vec = || -> Result<PinnedVec<Scalar>, PrecompiledError> {
        let mut v = PinnedVec::with_capacity_charged(room, pool, funds.as_mut())?;
        // Overwritten below; the parallel fill also spreads the first touch
        // of fresh pages over all threads.
        v.try_resize_par(rows, Scalar::ZERO)?;
        Ok(v)
    };
    let (mut a, mut b, mut c) = (vec()?, vec()?, vec()?);
    let coefficients = recording.coefficients();
    let (ma, mb, mc) = (recording.a(), recording.b(), recording.c());
    a.par_iter_mut()
        .zip(b.par_iter_mut())
        .zip(c.par_iter_mut())
        .enumerate()
        .with_min_len(1024)
        .for_each(|(r, ((x, y), z))| {
            *x = dot(ma, r, coefficients, &inputs, &aux);
            *y = dot(mb, r, coefficients, &inputs, &aux);
            *z = dot(mc, r, coefficients, &inputs, &aux);
        });
    let densities = [
        recording.a_aux_density().clone(),
        recording.b_input_density().clone(),
        recording.b_aux_density().clone(),
    ];
    Ok(ProvingAssignment::from_evaluated(
        [a, b, c],
        inputs,
        aux,
        densities,
        funds.take(),
    ))
}

/// Synthesizes `circuit` from its `recording`: the witness only, then a/b/c
/// from the recorded matrices (see the [module documentation](super)).
///
/// On [`PrecompiledError::ShapeMismatch`] the circuit does not match its
/// recording; the caller proves it with the classic
/// [`synthesize`](crate::synthesize) instead (a warning is logged here).
pub fn synthesize_precompiled<C: Circuit<Scalar>>(
    circuit: C,
    recording: &Recording,
    pool: &Arc<PinnedPool>,
    layout: AbcLayout,
    mut funds: Option<Reservation>,
) -> Result<(ProvingAssignment, PrecompiledStats), PrecompiledError> {
    let started = Instant::now();
    let witness = synthesize_witness(circuit, recording, pool, funds.as_mut()).inspect_err(|e| {
        if e.is_mismatch() {
            tracing::warn!(
                circuit = recording.circuit_id(),
                "{e}; this circuit needs the classic synthesis"
            );
        }
    })?;
    let witness_time = started.elapsed();
    let evaluated = Instant::now();
    let asg = evaluate(recording, witness, pool, layout, &mut funds)?;
    let stats = PrecompiledStats {
        witness: witness_time,
        evaluation: evaluated.elapsed(),
    };
    tracing::debug!(
        circuit = recording.circuit_id(),
        constraints = recording.num_constraints(),
        witness_ms = stats.witness.as_millis() as u64,
        evaluation_ms = stats.evaluation.as_millis() as u64,
        "synthesized from the recording"
    );
    Ok((asg, stats))
}
