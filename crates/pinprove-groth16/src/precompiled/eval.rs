//! a = A·w, b = B·w, c = C·w on the CPU, into pool buffers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellpepper_core::Circuit;
use ff::Field;
use pinprove_mem::{PinnedPool, PinnedVec, Reservation};
use rayon::prelude::*;

use super::{MINUS_ONE_ID, Matrices, Matrix, ONE_ID, Recording, WitnessValues, synthesize_witness};
use crate::domain::domain_size;
use crate::{AbcLayout, PrecompiledError, ProveError, ProvingAssignment, Scalar};

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

/// The recording's counts against the witness's.
fn check_shape(recording: &Recording, witness: &WitnessValues) -> Result<(), PrecompiledError> {
    for (what, recorded, found) in [
        ("public inputs", recording.num_inputs(), witness.inputs.len()),
        ("aux variables", recording.num_aux(), witness.aux.len()),
    ] {
        if recorded != found {
            return Err(PrecompiledError::ShapeMismatch { what, recorded, found });
        }
    }
    Ok(())
}

/// a/b/c of `matrices` on the witness (inputs, aux), in buffers of `pool`
/// paid for out of `funds` when given.
fn evaluate_abc(
    matrices: &Matrices,
    (inputs, aux): (&[Scalar], &[Scalar]),
    pool: &Arc<PinnedPool>,
    layout: AbcLayout,
    mut funds: Option<&mut Reservation>,
) -> Result<[PinnedVec<Scalar>; 3], ProveError> {
    let rows = matrices.a().rows();
    let room = match layout {
        AbcLayout::Exact => rows,
        AbcLayout::PaddedToDomain => domain_size(rows)?,
    };
    let mut vec = || -> Result<PinnedVec<Scalar>, ProveError> {
        let mut v = PinnedVec::with_capacity_charged(room, pool, funds.as_deref_mut())?;
        // Overwritten below; the parallel fill also spreads the first touch
        // of fresh pages over all threads.
        v.try_resize_par(rows, Scalar::ZERO)?;
        Ok(v)
    };
    let (mut a, mut b, mut c) = (vec()?, vec()?, vec()?);
    let coefficients = matrices.coefficients();
    let (ma, mb, mc) = (matrices.a(), matrices.b(), matrices.c());
    a.par_iter_mut()
        .zip(b.par_iter_mut())
        .zip(c.par_iter_mut())
        .enumerate()
        .with_min_len(1024)
        .for_each(|(r, ((x, y), z))| {
            *x = dot(ma, r, coefficients, inputs, aux);
            *y = dot(mb, r, coefficients, inputs, aux);
            *z = dot(mc, r, coefficients, inputs, aux);
        });
    Ok([a, b, c])
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
    check_shape(recording, &witness)?;
    let matrices = recording.matrices()?;
    let abc = evaluate_abc(&matrices, (&witness.inputs, &witness.aux), pool, layout, funds.as_mut())?;
    Ok(ProvingAssignment::from_evaluated(
        abc,
        witness.inputs,
        witness.aux,
        recording.densities().clone(),
        funds.take(),
    ))
}

/// An assignment whose a/b/c are left to the backend: computed from the
/// recording's matrices where the witness goes anyway, on the device of a
/// backend that can (its [`Capabilities::evaluates_recordings`]), so they
/// never exist in host memory; any other backend computes them with
/// [`evaluate_pending`] first. What is left of `funds` moves to the
/// assignment on success and stays with the caller on failure.
///
/// [`Capabilities::evaluates_recordings`]: crate::Capabilities::evaluates_recordings
pub fn defer(
    recording: Arc<Recording>,
    witness: WitnessValues,
    funds: &mut Option<Reservation>,
) -> Result<ProvingAssignment, PrecompiledError> {
    check_shape(&recording, &witness)?;
    let densities = recording.densities().clone();
    Ok(ProvingAssignment::pending(
        recording,
        witness.inputs,
        witness.aux,
        densities,
        funds.take(),
    ))
}

/// Computes on the host the a/b/c of an assignment left pending by
/// [`defer`] (nothing to do for any other), in buffers of its own pool
/// paid for out of its working set.
pub fn evaluate_pending(asg: &mut ProvingAssignment, layout: AbcLayout) -> Result<(), ProveError> {
    let Some(recording) = asg.recording().cloned() else {
        return Ok(());
    };
    evaluate_pending_from(asg, &*recording.matrices()?, layout)
}

/// As [`evaluate_pending`], from `matrices`: the assignment's recording's,
/// from a copy the caller keeps (as a backend holding its own copy does
/// once the recording's host copy is released).
pub fn evaluate_pending_from(
    asg: &mut ProvingAssignment,
    matrices: &Matrices,
    layout: AbcLayout,
) -> Result<(), ProveError> {
    if asg.recording().is_none() {
        return Ok(());
    }
    let pool = Arc::clone(asg.pool());
    // Out of the assignment for the call, which reads its witness.
    let mut funds = asg.take_working_set();
    let abc = evaluate_abc(matrices, (asg.inputs(), asg.aux()), &pool, layout, funds.as_mut());
    if let Some(f) = funds {
        asg.set_working_set(f);
    }
    asg.set_evaluated(abc?);
    Ok(())
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
