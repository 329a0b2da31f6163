//! What a circuit needs from its parameters: its shape, read from a
//! synthesized circuit or counted from its blank form (no witness), and the
//! lengths of its parameters' queries. Admission, device planning and the
//! parameters' checks size everything by it.

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;
use rayon::prelude::*;

use crate::density::Density;
use crate::domain::domain_size;
use crate::parts::Sequence;
use crate::{ParamsError, ProvingAssignment, QueryLengths, Scalar};

/// What a circuit needs from its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CircuitShape {
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Constraints, input constraints included.
    pub constraints: usize,
    /// Aux variables used by A.
    pub a_aux: usize,
    /// Inputs used by B.
    pub b_inputs: usize,
    /// Aux variables used by B.
    pub b_aux: usize,
}

impl CircuitShape {
    /// The shape of a synthesized circuit.
    pub fn of(p: &ProvingAssignment) -> Self {
        CircuitShape {
            inputs: p.num_inputs(),
            aux: p.num_aux(),
            constraints: p.num_constraints(),
            a_aux: p.densities().a_aux.total(),
            b_inputs: p.densities().b_input.total(),
            b_aux: p.densities().b_aux.total(),
        }
    }

    /// Bytes of the parameter file.
    pub fn file_bytes(&self) -> u64 {
        let domain = domain_size(self.constraints).unwrap_or(usize::MAX / 2);
        let g1 = (self.inputs + (domain - 1) + self.aux + self.inputs + self.a_aux + self.b_inputs + self.b_aux) as u64;
        864 + 6 * 4 + 96 * g1 + 192 * (self.b_inputs + self.b_aux) as u64
    }
}

/// A constraint system that only counts: what a circuit's parameters must
/// hold, from its blank form (no witness), as bellperson's generator sees it.
struct ShapeCounter {
    inputs: usize,
    aux: usize,
    constraints: usize,
    a_aux: Density,
    b_input: Density,
    b_aux: Density,
}

impl ShapeCounter {
    fn mark(lc: &LinearCombination<Scalar>, input: Option<&mut Density>, aux: &mut Density) {
        if let Some(input) = input {
            for (&i, c) in lc.iter_inputs() {
                if !c.is_zero_vartime() {
                    input.inc(i);
                }
            }
        }
        for (&i, c) in lc.iter_aux() {
            if !c.is_zero_vartime() {
                aux.inc(i);
            }
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeCounter {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        self.a_aux.add_element();
        self.b_aux.add_element();
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        self.b_input.add_element();
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        Self::mark(&a(LinearCombination::zero()), None, &mut self.a_aux);
        Self::mark(&b(LinearCombination::zero()), Some(&mut self.b_input), &mut self.b_aux);
        self.constraints += 1;
    }

    crate::flat_namespaces!();
}

impl ShapeCounter {
    /// `circuit` counted after the constant ONE.
    fn count<C: Circuit<Scalar>>(circuit: C) -> Result<ShapeCounter, SynthesisError> {
        let mut cs = ShapeCounter {
            inputs: 0,
            aux: 0,
            constraints: 0,
            a_aux: Density::new(),
            b_input: Density::new(),
            b_aux: Density::new(),
        };
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        Ok(cs)
    }
}

impl CircuitShape {
    /// The shape of `circuit` from its blank form (values are never asked
    /// for), as bellperson's parameter generator counts it: the constant ONE
    /// and one constraint per input included.
    pub fn of_blank<C: Circuit<Scalar>>(circuit: C) -> Result<Self, SynthesisError> {
        let cs = ShapeCounter::count(circuit)?;
        Ok(CircuitShape {
            inputs: cs.inputs,
            aux: cs.aux,
            constraints: cs.constraints + cs.inputs,
            a_aux: cs.a_aux.total(),
            b_inputs: cs.b_input.total(),
            b_aux: cs.b_aux.total(),
        })
    }

    /// [`of_blank`](Self::of_blank) of a circuit made of independent
    /// `parts` (see [`crate::parts`]), counted on every core: groups of
    /// parts are counted at once, each after a ONE of its own, and added
    /// up. Every variable belongs to one group, ONE aside, which counts
    /// once in B's inputs when any group uses it there. The shape equals
    /// the sequential count's; a 32 GiB WindowPoSt's 2349 sectors took
    /// 334 s counted one after the other on a 16-core host.
    pub fn of_blank_parts<T>(parts: &[T]) -> Result<Self, SynthesisError>
    where
        T: Sync,
        for<'a> &'a T: Circuit<Scalar>,
    {
        let (_, group) = crate::parts::grouping(parts.len());
        let counted: Vec<ShapeCounter> = parts
            .par_chunks(group)
            .map(|g| ShapeCounter::count(Sequence(g)))
            .collect::<Result<_, _>>()?;
        let one_in_b = counted.iter().any(|c| c.b_input.get(0));
        let sum = |f: fn(&ShapeCounter) -> usize| counted.iter().map(f).sum::<usize>();
        // Each group's own ONE is not the circuit's.
        let inputs = 1 + sum(|c| c.inputs - 1);
        Ok(CircuitShape {
            inputs,
            aux: sum(|c| c.aux),
            constraints: sum(|c| c.constraints) + inputs,
            a_aux: sum(|c| c.a_aux.total()),
            b_inputs: usize::from(one_in_b) + sum(|c| c.b_input.total() - usize::from(c.b_input.get(0))),
            b_aux: sum(|c| c.b_aux.total()),
        })
    }
}

impl CircuitShape {
    /// The points in each query of parameters of this shape.
    pub fn lengths(&self) -> Result<QueryLengths, ParamsError> {
        let domain = domain_size(self.constraints).map_err(|e| ParamsError::Shape(e.to_string()))?;
        let b = self.b_inputs + self.b_aux;
        let lengths = QueryLengths {
            h: domain - 1,
            l: self.aux,
            a: self.inputs + self.a_aux,
            b_g1: b,
            b_g2: b,
        };
        let too_big = |n: usize| n > u32::MAX as usize;
        if [self.inputs, lengths.h, lengths.l, lengths.a, b]
            .into_iter()
            .any(too_big)
        {
            return Err(ParamsError::Shape(format!(
                "{self:?} has a query beyond the parameter format's 2^32 points"
            )));
        }
        Ok(lengths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_beyond_the_format_are_errors() {
        let shape = CircuitShape {
            inputs: 1,
            aux: 1 << 33,
            constraints: 1 << 20,
            a_aux: 0,
            b_inputs: 0,
            b_aux: 0,
        };
        assert!(matches!(shape.lengths(), Err(ParamsError::Shape(_))));
        let huge = CircuitShape {
            constraints: usize::MAX,
            ..shape
        };
        assert!(matches!(huge.lengths(), Err(ParamsError::Shape(_))));
    }
}
