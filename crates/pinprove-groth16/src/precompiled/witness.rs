//! Witness-only synthesis: the circuit's values, none of its constraints.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;
use pinprove_mem::{PinnedPool, PinnedVec, Reservation};
use rayon::prelude::*;

use super::Recording;
use crate::parts::Sequence;
use crate::{PrecompiledError, ProveError, Scalar};

/// A circuit's witness, in pool buffers sized exactly for its recording.
pub struct WitnessValues {
    /// Public inputs, ONE first.
    pub inputs: PinnedVec<Scalar>,
    /// Aux assignments.
    pub aux: PinnedVec<Scalar>,
}

/// A constraint system that computes values and only counts constraints:
/// `enforce` drops its closures uncalled, so no linear combination is ever
/// built. The values go to `S`.
struct WitnessOnly<S> {
    slots: S,
    /// Variables allocated (inputs, aux), including any beyond the slots.
    allocated: [usize; 2],
    /// `enforce` calls of the circuit.
    constraints: usize,
}

/// Where a witness-only synthesis puts its values.
trait Slots: Send {
    /// Stores input (`k` = 0) or aux (`k` = 1) value number `i`.
    fn put(&mut self, k: usize, i: usize, value: Scalar) -> Result<(), SynthesisError>;
}

impl<S> WitnessOnly<S> {
    fn new(slots: S) -> Self {
        WitnessOnly {
            slots,
            allocated: [0, 0],
            constraints: 0,
        }
    }
}

impl<S: Slots> ConstraintSystem<Scalar> for WitnessOnly<S> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.allocated[1];
        self.allocated[1] += 1;
        self.slots.put(1, i, f()?)?;
        Ok(Variable::new_unchecked(Index::Aux(i)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let i = self.allocated[0];
        self.allocated[0] += 1;
        self.slots.put(0, i, f()?)?;
        Ok(Variable::new_unchecked(Index::Input(i)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
    }

    crate::flat_namespaces!();

    // Not a "witness generator" in bellpepper's sense: gadgets then take
    // other code paths (bulk `extend_aux`) than in the classic synthesis
    // the recording was made from, and the allocation order must be the
    // same in both.
}

/// Pool vectors sized from the recording that never grow: a circuit that
/// allocates more than recorded is counted on (for the mismatch error) but
/// its extra values are dropped, so it cannot take memory nobody admitted.
struct Pinned {
    vecs: [PinnedVec<Scalar>; 2],
    recorded: [usize; 2],
    /// A memory error behind a `SynthesisError`.
    error: Option<ProveError>,
}

impl Slots for Pinned {
    fn put(&mut self, k: usize, i: usize, value: Scalar) -> Result<(), SynthesisError> {
        if i < self.recorded[k]
            && let Err(e) = self.vecs[k].try_push(value)
        {
            let message = e.to_string();
            self.error.get_or_insert(e.into());
            return Err(SynthesisError::IoError(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                message,
            )));
        }
        Ok(())
    }
}

/// One part's shares of the inputs and aux values, written in place; what
/// it allocates beyond them is counted only.
impl Slots for [&mut [Scalar]; 2] {
    fn put(&mut self, k: usize, i: usize, value: Scalar) -> Result<(), SynthesisError> {
        if let Some(slot) = self[k].get_mut(i) {
            *slot = value;
        }
        Ok(())
    }
}

/// Synthesizes `circuit`'s witness only, into pool buffers sized from
/// `recording` (paid for out of `funds` when given), and checks that the
/// circuit has the recorded shape.
///
/// As the prover does, ONE is allocated as the first input; the input
/// constraints it appends are counted from the inputs.
pub fn synthesize_witness<C: Circuit<Scalar>>(
    circuit: C,
    recording: &Recording,
    pool: &Arc<PinnedPool>,
    mut funds: Option<&mut Reservation>,
) -> Result<WitnessValues, PrecompiledError> {
    let mut vec = |n: usize| PinnedVec::with_capacity_charged(n, pool, funds.as_deref_mut());
    let (inputs, aux) = (vec(recording.num_inputs())?, vec(recording.num_aux())?);
    witness_into(circuit, recording, inputs, aux)
}

/// [`synthesize_witness`] into `inputs` and `aux`, empty vectors with room
/// for the recording's counts.
fn witness_into<C: Circuit<Scalar>>(
    circuit: C,
    recording: &Recording,
    inputs: PinnedVec<Scalar>,
    aux: PinnedVec<Scalar>,
) -> Result<WitnessValues, PrecompiledError> {
    let mut cs = WitnessOnly::new(Pinned {
        vecs: [inputs, aux],
        recorded: [recording.num_inputs(), recording.num_aux()],
        error: None,
    });
    let run = |cs: &mut WitnessOnly<Pinned>| -> Result<(), SynthesisError> {
        cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(cs)
    };
    let result = run(&mut cs);
    if let Some(e) = cs.slots.error.take() {
        return Err(e.into());
    }
    result?;
    let [inputs, aux] = cs.allocated;
    let checks = [
        ("public inputs", recording.num_inputs(), inputs),
        ("aux variables", recording.num_aux(), aux),
        (
            "constraints",
            recording.num_constraints(),
            cs.constraints.saturating_add(inputs),
        ),
    ];
    for (what, recorded, found) in checks {
        if recorded != found {
            return Err(PrecompiledError::ShapeMismatch { what, recorded, found });
        }
    }
    let [inputs, aux] = cs.slots.vecs;
    Ok(WitnessValues { inputs, aux })
}

/// Witness-only synthesis of a circuit made of `parts`, synthesized one
/// after the other as `synthesize_parts` (and so the recording) has them:
/// part `i`'s inputs and aux values follow those of the parts before it.
///
/// Where the recording splits evenly into parts of one shape (the sectors
/// of a PoSt partition), every part is synthesized at once on its own core,
/// straight into its share of the pool buffers; a part that allocates
/// other than its share sends the whole circuit through the sequential
/// synthesis, which checks the shape as [`synthesize_witness`] does.
pub fn synthesize_witness_parts<T>(
    parts: &[T],
    recording: &Recording,
    pool: &Arc<PinnedPool>,
    mut funds: Option<&mut Reservation>,
) -> Result<WitnessValues, PrecompiledError>
where
    T: Sync,
    for<'a> &'a T: Circuit<Scalar>,
{
    let n = parts.len();
    // ONE is the first input, outside every part.
    let (inputs, aux) = (recording.num_inputs().saturating_sub(1), recording.num_aux());
    if n < 2 || inputs % n != 0 || aux % n != 0 {
        return synthesize_witness(Sequence(parts), recording, pool, funds);
    }
    let share = [inputs / n, aux / n];
    let mut vec = |len: usize| -> Result<PinnedVec<Scalar>, PrecompiledError> {
        let mut v = PinnedVec::with_capacity_charged(len, pool, funds.as_deref_mut())?;
        v.try_resize_par(len, Scalar::ZERO)?;
        Ok(v)
    };
    let (mut input_values, mut aux_values) = (vec(inputs + 1)?, vec(aux)?);
    input_values.as_mut_slice()[0] = Scalar::ONE;
    let input_shares = split(&mut input_values.as_mut_slice()[1..], share[0]);
    let aux_shares = split(aux_values.as_mut_slice(), share[1]);
    let counts = parts
        .par_iter()
        .zip(input_shares)
        .zip(aux_shares)
        .map(|((part, inputs), aux)| {
            let mut cs = WitnessOnly::new([inputs, aux]);
            part.synthesize(&mut cs)?;
            Ok((cs.allocated, cs.constraints))
        })
        .collect::<Result<Vec<_>, SynthesisError>>()?;
    if counts.iter().any(|(allocated, _)| *allocated != share) {
        input_values.clear();
        aux_values.clear();
        return witness_into(Sequence(parts), recording, input_values, aux_values);
    }
    let constraints: usize = counts.iter().map(|(_, c)| c).sum();
    let found = constraints.saturating_add(inputs + 1);
    if found != recording.num_constraints() {
        return Err(PrecompiledError::ShapeMismatch {
            what: "constraints",
            recorded: recording.num_constraints(),
            found,
        });
    }
    Ok(WitnessValues {
        inputs: input_values,
        aux: aux_values,
    })
}

/// `slice` cut into pieces of `len` (as many as fit).
fn split(mut slice: &mut [Scalar], len: usize) -> Vec<&mut [Scalar]> {
    let mut pieces = Vec::with_capacity(slice.len().checked_div(len).unwrap_or(0));
    while len > 0 && slice.len() >= len {
        let (head, tail) = std::mem::take(&mut slice).split_at_mut(len);
        pieces.push(head);
        slice = tail;
    }
    pieces
}
