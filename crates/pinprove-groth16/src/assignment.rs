//! The constraint system synthesis writes into.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;
use pinprove_mem::{MemoryKind, PinnedPool, PinnedVec, Reservation};

use crate::precompiled::Recording;
use crate::{Densities, Density, ProveError, Scalar};

/// A synthesized circuit: the A/B/C evaluations of every constraint, the
/// input and aux assignments, and which variables the A and B queries use.
///
/// Everything large lives in pool buffers. The a/b/c vectors are consumed by
/// the FFT part of a proof; [`release_abc`](Self::release_abc) returns them to
/// the pool as soon as the backend no longer reads them, while the
/// assignments and densities stay for the MSMs.
///
/// It records exactly what bellperson's prover records, including the extra
/// `input × 1 = 0` constraint per public input that Groth16 appends (see
/// [`synthesize`](crate::synthesize)), so it proves exactly like it.
pub struct ProvingAssignment {
    a: Option<PinnedVec<Scalar>>,
    b: Option<PinnedVec<Scalar>>,
    c: Option<PinnedVec<Scalar>>,
    input: PinnedVec<Scalar>,
    aux: PinnedVec<Scalar>,
    densities: Densities,
    /// The first error met where the constraint-system API cannot return one
    /// (`enforce`), or a memory error behind a `SynthesisError`.
    error: Option<ProveError>,
    /// What is left of the job's working-set reservation once the vectors
    /// took theirs: released with the assignment.
    working_set: Option<Reservation>,
    /// Set while a/b/c are still to be computed from a recording's
    /// matrices (a pre-compiled synthesis left for the backend's device).
    pending: Option<Arc<Recording>>,
    /// What a backend prepared from the witness ahead of its `start` (see
    /// [`Backend::prepare`](crate::Backend::prepare)); only that backend
    /// knows its type.
    prepared: Option<Box<dyn Any + Send + Sync>>,
}

/// The part of an assignment the MSMs use, once a/b/c are gone.
pub struct Witness {
    /// Public inputs, the constant ONE first.
    pub inputs: PinnedVec<Scalar>,
    /// Auxiliary assignments.
    pub aux: PinnedVec<Scalar>,
    /// The variables each query uses.
    pub densities: Densities,
    /// What is left of the job's working-set reservation: a backend pays
    /// its scratch vectors out of it; released when the witness is dropped.
    pub working_set: Option<Reservation>,
}

/// A witness's values and densities, borrowed: what a backend prepares its
/// MSM scalars from.
#[derive(Clone, Copy)]
pub struct WitnessRef<'a> {
    /// Public inputs, the constant ONE first.
    pub inputs: &'a [Scalar],
    /// Auxiliary assignments.
    pub aux: &'a [Scalar],
    /// The variables each query uses.
    pub densities: &'a Densities,
}

impl Witness {
    /// The values and densities, beside what is left of the working set
    /// (to pay for what is prepared from them).
    pub fn parts_mut(&mut self) -> (WitnessRef<'_>, Option<&mut Reservation>) {
        let values = WitnessRef {
            inputs: &self.inputs,
            aux: &self.aux,
            densities: &self.densities,
        };
        (values, self.working_set.as_mut())
    }
}

/// Capacities to reserve up front, in elements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Capacities {
    pub constraints: usize,
    pub inputs: usize,
    pub aux: usize,
}

impl ProvingAssignment {
    /// An empty assignment drawing its vectors from `pool`, sized for `caps`,
    /// paid for out of `funds` when given.
    pub(crate) fn with_capacities(
        pool: &Arc<PinnedPool>,
        caps: Capacities,
        mut funds: Option<&mut Reservation>,
    ) -> Result<Self, ProveError> {
        let mut vec = |n: usize| -> Result<PinnedVec<Scalar>, ProveError> {
            Ok(PinnedVec::with_capacity_charged(n, pool, funds.as_deref_mut())?)
        };
        Ok(ProvingAssignment {
            a: Some(vec(caps.constraints)?),
            b: Some(vec(caps.constraints)?),
            c: Some(vec(caps.constraints)?),
            input: vec(caps.inputs)?,
            aux: vec(caps.aux)?,
            densities: Densities::with_capacity(caps.inputs, caps.aux),
            error: None,
            working_set: None,
            pending: None,
            prepared: None,
        })
    }

    /// An assignment whose a/b/c were evaluated elsewhere (from a circuit's
    /// recorded matrices), with the densities recorded with them: what the
    /// classic synthesis of the same witness produces.
    pub(crate) fn from_evaluated(
        abc: [PinnedVec<Scalar>; 3],
        input: PinnedVec<Scalar>,
        aux: PinnedVec<Scalar>,
        densities: Densities,
        working_set: Option<Reservation>,
    ) -> Self {
        let mut asg = Self::from_witness(input, aux, densities, working_set);
        asg.set_evaluated(abc);
        asg
    }

    /// An assignment whose a/b/c are still to be computed from
    /// `recording` (see [`recording`](Self::recording)).
    pub(crate) fn pending(
        recording: Arc<Recording>,
        input: PinnedVec<Scalar>,
        aux: PinnedVec<Scalar>,
        densities: Densities,
        working_set: Option<Reservation>,
    ) -> Self {
        let mut asg = Self::from_witness(input, aux, densities, working_set);
        asg.pending = Some(recording);
        asg
    }

    /// A witness and its densities, without a/b/c (yet).
    fn from_witness(
        input: PinnedVec<Scalar>,
        aux: PinnedVec<Scalar>,
        densities: Densities,
        working_set: Option<Reservation>,
    ) -> Self {
        ProvingAssignment {
            a: None,
            b: None,
            c: None,
            input,
            aux,
            densities,
            error: None,
            working_set,
            pending: None,
            prepared: None,
        }
    }

    /// Hands over the a/b/c computed for a pending assignment.
    pub(crate) fn set_evaluated(&mut self, [a, b, c]: [PinnedVec<Scalar>; 3]) {
        self.a = Some(a);
        self.b = Some(b);
        self.c = Some(c);
        self.pending = None;
    }

    /// The recording whose matrices give this assignment's a/b/c, while
    /// they are not computed yet: a pre-compiled synthesis
    /// ([`precompiled::defer`](crate::precompiled::defer)) for a backend
    /// that evaluates them on its device. Other backends compute them on
    /// the host with
    /// [`precompiled::evaluate_pending`](crate::precompiled::evaluate_pending).
    pub fn recording(&self) -> Option<&Arc<Recording>> {
        self.pending.as_ref()
    }

    /// The pool the assignment's vectors come from.
    pub(crate) fn pool(&self) -> &Arc<PinnedPool> {
        self.aux.pool()
    }

    pub(crate) fn take_working_set(&mut self) -> Option<Reservation> {
        self.working_set.take()
    }

    pub(crate) fn set_working_set(&mut self, r: Reservation) {
        self.working_set = Some(r);
    }

    /// What is left of the job's working-set reservation, if synthesis was
    /// paid for out of one.
    pub fn working_set_mut(&mut self) -> Option<&mut Reservation> {
        self.working_set.as_mut()
    }

    /// The values and densities, beside what is left of the working set
    /// (see [`Witness::parts_mut`]).
    pub fn witness_parts_mut(&mut self) -> (WitnessRef<'_>, Option<&mut Reservation>) {
        let values = WitnessRef {
            inputs: &self.input,
            aux: &self.aux,
            densities: &self.densities,
        };
        (values, self.working_set.as_mut())
    }

    /// Keeps what a backend prepared from the witness for its `start`.
    pub fn set_prepared(&mut self, prepared: Box<dyn Any + Send + Sync>) {
        self.prepared = Some(prepared);
    }

    /// Takes what a backend prepared (see [`set_prepared`](Self::set_prepared)).
    pub fn take_prepared(&mut self) -> Option<Box<dyn Any + Send + Sync>> {
        self.prepared.take()
    }

    pub(crate) fn take_error(&mut self) -> Option<ProveError> {
        self.error.take()
    }

    fn fail(&mut self, e: ProveError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Number of constraints, including the input constraints (the
    /// recording's while a/b/c are pending). Zero once a/b/c were released.
    pub fn num_constraints(&self) -> usize {
        match (&self.a, &self.pending) {
            (Some(a), _) => a.len(),
            (None, Some(r)) => r.num_constraints(),
            (None, None) => 0,
        }
    }

    /// Number of public inputs, including the constant ONE.
    pub fn num_inputs(&self) -> usize {
        self.input.len()
    }

    /// Number of auxiliary (private) variables.
    pub fn num_aux(&self) -> usize {
        self.aux.len()
    }

    /// Room in each of the a/b/c vectors, in elements (zero once released):
    /// what synthesis sized them for.
    pub fn abc_capacity(&self) -> usize {
        self.a.as_ref().map_or(0, |a| a.capacity())
    }

    /// The A evaluations, unless released.
    pub fn a(&self) -> Option<&[Scalar]> {
        self.a.as_deref()
    }

    /// The B evaluations, unless released.
    pub fn b(&self) -> Option<&[Scalar]> {
        self.b.as_deref()
    }

    /// The C evaluations, unless released.
    pub fn c(&self) -> Option<&[Scalar]> {
        self.c.as_deref()
    }

    /// Takes the a/b/c vectors out (for a backend that consumes them in
    /// place); `None` if already taken.
    pub fn take_abc(&mut self) -> Option<[PinnedVec<Scalar>; 3]> {
        match (self.a.take(), self.b.take(), self.c.take()) {
            (Some(a), Some(b), Some(c)) => Some([a, b, c]),
            _ => None,
        }
    }

    /// A copy of the assignment in buffers of `pool`: the "staging copy"
    /// design (synthesize into ordinary memory, copy into pinned memory
    /// before the upload), kept to be measured against synthesizing into the
    /// pinned buffers directly.
    pub fn copy_into(&self, pool: &Arc<PinnedPool>) -> Result<ProvingAssignment, ProveError> {
        let copy = |v: &[Scalar]| -> Result<PinnedVec<Scalar>, ProveError> {
            let mut out = PinnedVec::with_capacity_in(v.len(), pool)?;
            out.try_extend_from_slice(v)?;
            Ok(out)
        };
        let abc = |v: Option<&[Scalar]>| v.map(copy).transpose();
        Ok(ProvingAssignment {
            a: abc(self.a())?,
            b: abc(self.b())?,
            c: abc(self.c())?,
            input: copy(&self.input)?,
            aux: copy(&self.aux)?,
            densities: self.densities.clone(),
            error: None,
            working_set: None,
            pending: self.pending.clone(),
            prepared: None,
        })
    }

    /// Consumes the assignment into what the MSMs need (a/b/c, if still
    /// held, go back to the pool).
    pub fn into_witness(self) -> Witness {
        Witness {
            inputs: self.input,
            aux: self.aux,
            densities: self.densities,
            working_set: self.working_set,
        }
    }

    /// Returns a/b/c to the pool. Call it as soon as the backend no longer
    /// reads them (after the upload on a GPU, after the FFTs on the CPU).
    ///
    /// The bytes they occupied were taken out of the job's reservation when
    /// the buffers were checked out, so from here on they count as the
    /// pool's idle memory, which the budget can evict for other work.
    pub fn release_abc(&mut self) {
        self.a = None;
        self.b = None;
        self.c = None;
    }

    /// Whether a/b/c were released (not merely pending).
    pub fn abc_released(&self) -> bool {
        self.a.is_none() && self.pending.is_none()
    }

    /// Public inputs, the constant ONE first.
    pub fn inputs(&self) -> &[Scalar] {
        &self.input
    }

    /// Auxiliary assignments.
    pub fn aux(&self) -> &[Scalar] {
        &self.aux
    }

    /// The variables each query uses.
    pub fn densities(&self) -> &Densities {
        &self.densities
    }

    /// Times a vector outgrew its buffer during synthesis (zero with a
    /// correct capacity hint).
    pub fn spills(&self) -> u32 {
        self.vecs().map(PinnedVec::spills).sum()
    }

    /// Bytes copied by those spills.
    pub fn bytes_copied(&self) -> u64 {
        self.vecs().map(PinnedVec::bytes_copied).sum()
    }

    /// What the vectors are made of (`None` before anything was written).
    pub fn memory_kind(&self) -> Option<MemoryKind> {
        self.vecs().find_map(PinnedVec::memory_kind)
    }

    fn vecs(&self) -> impl Iterator<Item = &PinnedVec<Scalar>> {
        [
            self.a.as_ref(),
            self.b.as_ref(),
            self.c.as_ref(),
            Some(&self.input),
            Some(&self.aux),
        ]
        .into_iter()
        .flatten()
    }

    /// Bytes of pool memory the assignment holds now.
    pub fn held_bytes(&self) -> u64 {
        self.vecs().map(|v| (v.capacity() * 32) as u64).sum()
    }

    fn push_abc(&mut self, a: Scalar, b: Scalar, c: Scalar) {
        let (Some(va), Some(vb), Some(vc)) = (self.a.as_mut(), self.b.as_mut(), self.c.as_mut()) else {
            self.fail(ProveError::AbcReleased);
            return;
        };
        let pushed = va.try_push(a).and_then(|_| vb.try_push(b)).and_then(|_| vc.try_push(c));
        if let Err(e) = pushed {
            self.fail(e.into());
        }
    }

    fn alloc_value(&mut self, value: Scalar, input: bool) -> Result<Variable, SynthesisError> {
        let (vec, index) = if input {
            let i = self.input.len();
            (&mut self.input, Index::Input(i))
        } else {
            let i = self.aux.len();
            (&mut self.aux, Index::Aux(i))
        };
        if let Err(e) = vec.try_push(value) {
            let message = e.to_string();
            self.fail(e.into());
            return Err(SynthesisError::IoError(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                message,
            )));
        }
        if input {
            self.densities.b_input.add_element();
        } else {
            self.densities.a_aux.add_element();
            self.densities.b_aux.add_element();
        }
        Ok(Variable::new_unchecked(index))
    }
}

/// Evaluates `lc` on the assignments, marking the variables it uses with a
/// non-zero coefficient. `None` if it names a variable that does not exist.
fn eval(
    lc: &LinearCombination<Scalar>,
    mut input_density: Option<&mut Density>,
    mut aux_density: Option<&mut Density>,
    input: &[Scalar],
    aux: &[Scalar],
) -> Option<Scalar> {
    let mut acc = Scalar::ZERO;
    for (&i, coeff) in lc.iter_inputs() {
        if coeff.is_zero_vartime() {
            continue;
        }
        acc += term(input.get(i)?, coeff);
        if let Some(d) = input_density.as_deref_mut() {
            d.inc(i);
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if coeff.is_zero_vartime() {
            continue;
        }
        acc += term(aux.get(i)?, coeff);
        if let Some(d) = aux_density.as_deref_mut() {
            d.inc(i);
        }
    }
    Some(acc)
}

/// The A, B and C evaluations of one constraint. Marks the aux variables the
/// A query uses (A's input column is always fully used: every input has its
/// own constraint) and the inputs and aux variables the B query uses.
/// `None` when a variable it reads has no value. Every constraint system
/// that records what the prover needs evaluates through this one function.
pub fn evaluate_constraint(
    (a, b, c): (
        &LinearCombination<Scalar>,
        &LinearCombination<Scalar>,
        &LinearCombination<Scalar>,
    ),
    (input, aux): (&[Scalar], &[Scalar]),
    a_aux: &mut Density,
    b_input: &mut Density,
    b_aux: &mut Density,
) -> Option<(Scalar, Scalar, Scalar)> {
    Some((
        eval(a, None, Some(a_aux), input, aux)?,
        eval(b, Some(b_input), Some(b_aux), input, aux)?,
        eval(c, None, None, input, aux)?,
    ))
}

#[inline]
fn term(value: &Scalar, coeff: &Scalar) -> Scalar {
    // Most coefficients in real circuits are one.
    if *coeff == Scalar::ONE { *value } else { *value * coeff }
}

impl ConstraintSystem<Scalar> for ProvingAssignment {
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

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        match evaluate_constraint(
            (&a, &b, &c),
            (&self.input, &self.aux),
            &mut self.densities.a_aux,
            &mut self.densities.b_input,
            &mut self.densities.b_aux,
        ) {
            Some((va, vb, vc)) => self.push_abc(va, vb, vc),
            // A variable the circuit never allocated: bellperson would panic.
            None => self.fail(ProveError::Synthesis(SynthesisError::AssignmentMissing)),
        }
    }

    crate::flat_namespaces!();

    /// No: an extensible system must make empty copies of itself
    /// (`ConstraintSystem::new`), and an assignment's memory comes from a
    /// pool and a job's budget that a bare `new()` cannot know. Circuits
    /// made of parts synthesize in parallel through
    /// [`synthesize_parts`](crate::synthesize_parts), which calls
    /// [`extend`](Self::extend) itself.
    fn is_extensible() -> bool {
        false
    }

    /// Appends a separately synthesized part (whose first input is its own
    /// copy of ONE), as bellperson's prover does.
    fn extend(&mut self, other: &Self) {
        let (Some(oa), Some(ob), Some(oc)) = (other.a(), other.b(), other.c()) else {
            self.fail(ProveError::AbcReleased);
            return;
        };
        let (Some(a), Some(b), Some(c)) = (self.a.as_mut(), self.b.as_mut(), self.c.as_mut()) else {
            self.fail(ProveError::AbcReleased);
            return;
        };
        let extended = a
            .try_extend_from_slice(oa)
            .and_then(|_| b.try_extend_from_slice(ob))
            .and_then(|_| c.try_extend_from_slice(oc))
            .and_then(|_| self.input.try_extend_from_slice(other.input.get(1..).unwrap_or(&[])))
            .and_then(|_| self.aux.try_extend_from_slice(&other.aux));
        if let Err(e) = extended {
            self.fail(e.into());
            return;
        }
        self.densities.a_aux.extend(&other.densities.a_aux, false);
        self.densities.b_input.extend(&other.densities.b_input, true);
        self.densities.b_aux.extend(&other.densities.b_aux, false);
    }
}

impl fmt::Debug for ProvingAssignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProvingAssignment")
            .field("constraints", &self.num_constraints())
            .field("inputs", &self.num_inputs())
            .field("aux", &self.num_aux())
            .field("abc_released", &self.abc_released())
            .field("abc_pending", &self.pending.is_some())
            .finish()
    }
}
