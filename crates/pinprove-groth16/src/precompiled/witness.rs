//! Witness-only synthesis: the circuit's values, none of its constraints.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;
use pinprove_mem::{PinnedPool, PinnedVec, Reservation};

use super::Recording;
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
/// built.
///
/// The vectors are sized from the recording and never grow: a circuit that
/// allocates more than recorded is counted on (for the mismatch error) but
/// its extra values are dropped, so it cannot take memory nobody admitted.
struct WitnessOnly {
    inputs: PinnedVec<Scalar>,
    aux: PinnedVec<Scalar>,
    /// Variables allocated (inputs, aux), including those beyond the
    /// recording.
    allocated: [usize; 2],
    /// The recorded numbers of inputs and aux variables.
    recorded: [usize; 2],
    /// `enforce` calls of the circuit.
    constraints: usize,
    /// A memory error behind a `SynthesisError`.
    error: Option<ProveError>,
}

impl WitnessOnly {
    fn alloc_value(&mut self, value: Scalar, input: bool) -> Result<Variable, SynthesisError> {
        let k = usize::from(!input);
        let vec = if input { &mut self.inputs } else { &mut self.aux };
        let i = self.allocated[k];
        self.allocated[k] += 1;
        if i < self.recorded[k]
            && let Err(e) = vec.try_push(value)
        {
            let message = e.to_string();
            self.error.get_or_insert(e.into());
            return Err(SynthesisError::IoError(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                message,
            )));
        }
        Ok(Variable::new_unchecked(if input {
            Index::Input(i)
        } else {
            Index::Aux(i)
        }))
    }
}

impl ConstraintSystem<Scalar> for WitnessOnly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        self.alloc_value(value, false)
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        self.alloc_value(value, true)
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

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    // Not a "witness generator" in bellpepper's sense: gadgets then take
    // other code paths (bulk `extend_aux`) than in the classic synthesis
    // the recording was made from, and the allocation order must be the
    // same in both.
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
    let mut cs = WitnessOnly {
        inputs: vec(recording.num_inputs())?,
        aux: vec(recording.num_aux())?,
        allocated: [0, 0],
        recorded: [recording.num_inputs(), recording.num_aux()],
        constraints: 0,
        error: None,
    };
    let run = |cs: &mut WitnessOnly| -> Result<(), SynthesisError> {
        cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(cs)
    };
    let result = run(&mut cs);
    if let Some(e) = cs.error.take() {
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
    Ok(WitnessValues {
        inputs: cs.inputs,
        aux: cs.aux,
    })
}
