//! Synthesis into pool buffers, sized by capacity hints.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellpepper_core::{Circuit, ConstraintSystem, Index, Variable};
use ff::Field;
use pinprove_mem::{MemoryKind, PinnedPool, Reservation};

use crate::assignment::Capacities;
use crate::domain::domain_size;
use crate::{CapacityHint, CapacityHints, ProveError, ProvingAssignment, Scalar};

/// How a/b/c are sized for the backend that will read them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AbcLayout {
    /// Exactly one entry per constraint (a GPU pads on the device).
    #[default]
    Exact,
    /// Room for the whole power-of-two evaluation domain, so that a CPU
    /// backend can run its FFTs in place without reallocating.
    PaddedToDomain,
}

/// The capacities a hint asks for under `layout`, when they are plausible:
/// every vector (and the a/b/c domain) fits in the address space and, all
/// together, in the memory budget of `budget` bytes.
fn capacities(h: &CapacityHint, layout: AbcLayout, budget: u64) -> Option<Capacities> {
    let constraints = match layout {
        AbcLayout::Exact => h.constraints,
        AbcLayout::PaddedToDomain => domain_size(h.constraints).ok()?,
    };
    let elems = constraints.checked_mul(3)?.checked_add(h.inputs)?.checked_add(h.aux)?;
    let bytes = u64::try_from(elems).ok()?.checked_mul(32)?;
    (bytes <= budget).then_some(Capacities {
        constraints,
        inputs: h.inputs,
        aux: h.aux,
    })
}

/// The stored hint of `circuit_id` if it is plausible under `layout` for a
/// budget of `budget` bytes (every vector fits the address space and all of
/// them the budget). An implausible one (a tampered or corrupt hints file)
/// is discarded with a warning, so that the next synthesis relearns it.
pub fn plausible_hint(hints: &CapacityHints, circuit_id: &str, layout: AbcLayout, budget: u64) -> Option<CapacityHint> {
    let h = hints.get(circuit_id)?;
    if capacities(&h, layout, budget).is_some() {
        return Some(h);
    }
    tracing::warn!(circuit = circuit_id, hint = ?h, budget, "implausible capacity hint discarded; it is relearned");
    hints.forget(circuit_id);
    None
}

/// Whether the partial synthesis in `cs` went beyond what `h` foresaw.
fn outgrew(cs: &ProvingAssignment, h: &CapacityHint) -> bool {
    cs.num_constraints() > h.constraints || cs.num_inputs() > h.inputs || cs.num_aux() > h.aux
}

/// What one synthesis did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthesisStats {
    /// Wall time of the synthesis.
    pub elapsed: Duration,
    /// Vectors that outgrew their buffers (zero with a correct hint).
    pub spills: u32,
    /// Bytes those spills copied.
    pub bytes_copied: u64,
    /// Whether a capacity hint sized the vectors.
    pub hinted: bool,
    /// Whether the stored hint was created or corrected.
    pub hint_updated: bool,
    /// What the vectors are made of.
    pub memory_kind: Option<MemoryKind>,
    /// The sizes the circuit synthesized to.
    pub shape: CapacityHint,
}

/// Synthesizes `circuit` (a circuit of type `circuit_id`) into pool buffers.
///
/// Vectors are sized from the hint for `circuit_id` when there is one; the
/// hint is learned or corrected from what the circuit actually produced.
/// With `funds` (the job's working-set reservation) the buffers are paid for
/// out of it, and whatever is left stays with the assignment until it is
/// dropped.
///
/// As bellperson's prover does, the constant ONE is allocated as the first
/// input before the circuit runs, and one `input × 1 = 0` constraint per
/// input is appended after it.
pub fn synthesize<C: Circuit<Scalar>>(
    circuit: C,
    circuit_id: &str,
    pool: &Arc<PinnedPool>,
    hints: &CapacityHints,
    layout: AbcLayout,
    funds: Option<Reservation>,
) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
    SynthesisTarget {
        circuit_id,
        pool,
        hints,
        layout,
        funds,
        fallback: None,
    }
    .synthesize(circuit)
}

/// Where and how a circuit is synthesized (see [`synthesize`]): its type,
/// whose capacity hint sizes the vectors; the pool they come from; the
/// layout of a/b/c; what pays for them; and the sizes to use while no hint
/// is known yet — such as the shape the circuit's parameters imply (their
/// domain bounds the constraints; their queries give the inputs and aux
/// variables exactly). Sized vectors never grow outside the memory that was
/// admitted for them.
pub struct SynthesisTarget<'a> {
    /// The circuit type (capacity hints are kept per type).
    pub circuit_id: &'a str,
    /// Where the vectors come from.
    pub pool: &'a Arc<PinnedPool>,
    /// Capacity hints.
    pub hints: &'a CapacityHints,
    /// Layout the backend wants.
    pub layout: AbcLayout,
    /// What pays for the vectors (an admitted working set).
    pub funds: Option<Reservation>,
    /// Sizes to use when no capacity hint is known yet.
    pub fallback: Option<CapacityHint>,
}

impl SynthesisTarget<'_> {
    /// Synthesizes `circuit` (see [`synthesize`]).
    pub fn synthesize<C: Circuit<Scalar>>(self, circuit: C) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        self.synthesize_with(|cs, _, _| circuit.synthesize(cs).map_err(ProveError::from))
    }

    /// The synthesis both ways share: sizing from hints, ONE, `body` (the
    /// circuit; it gets the capacities the assignment was sized for), the
    /// input constraints, and learning the hint.
    pub(crate) fn synthesize_with(
        self,
        body: impl FnOnce(&mut ProvingAssignment, Capacities, Option<&mut Reservation>) -> Result<(), ProveError>,
    ) -> Result<(ProvingAssignment, SynthesisStats), ProveError> {
        let SynthesisTarget {
            circuit_id,
            pool,
            hints,
            layout,
            mut funds,
            fallback,
        } = self;
        let started = Instant::now();
        let budget = pool.budget().total();
        let learned = plausible_hint(hints, circuit_id, layout, budget);
        let caps = learned
            .or(fallback)
            .and_then(|h| capacities(&h, layout, budget))
            .unwrap_or_default();
        let mut cs = ProvingAssignment::with_capacities(pool, caps, funds.as_mut())?;

        let run = |cs: &mut ProvingAssignment| -> Result<(), ProveError> {
            cs.alloc_input(|| "one", || Ok(Scalar::ONE))?;
            body(cs, caps, funds.as_mut())?;
            for i in 0..cs.num_inputs() {
                cs.enforce(
                    || "input constraint",
                    |lc| lc + Variable::new_unchecked(Index::Input(i)),
                    |lc| lc,
                    |lc| lc,
                );
            }
            Ok(())
        };
        let result = run(&mut cs);
        // A typed error recorded by the assignment (memory, unknown variable)
        // explains a failure better than what the circuit passed on.
        let failed = match (cs.take_error(), result) {
            (Some(e), _) => Some(e),
            (None, Err(e)) => Some(e),
            (None, Ok(())) => None,
        };
        if let Some(e) = failed {
            // A hint that was too small sized the admitted memory too small, and
            // growing past it can fail: forget it, so the next synthesis is
            // sized from the parameters' shape and learns the hint anew.
            if let Some(h) = learned
                && (matches!(e, ProveError::Memory(_)) || outgrew(&cs, &h))
            {
                tracing::warn!(circuit = circuit_id, hint = ?h, "synthesis failed past its capacity hint; the hint is relearned");
                hints.forget(circuit_id);
            }
            return Err(e);
        }

        let shape = CapacityHint {
            constraints: cs.num_constraints(),
            inputs: cs.num_inputs(),
            aux: cs.num_aux(),
        };
        let hint_updated = hints.record(circuit_id, shape);
        if let Some(f) = funds {
            cs.set_working_set(f);
        }
        let stats = SynthesisStats {
            elapsed: started.elapsed(),
            spills: cs.spills(),
            bytes_copied: cs.bytes_copied(),
            hinted: learned.is_some(),
            hint_updated,
            memory_kind: cs.memory_kind(),
            shape,
        };
        tracing::debug!(
            circuit = circuit_id,
            constraints = shape.constraints,
            ms = stats.elapsed.as_millis() as u64,
            spills = stats.spills,
            "synthesized"
        );
        Ok((cs, stats))
    }
}
