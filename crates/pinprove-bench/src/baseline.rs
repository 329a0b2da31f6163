//! A constraint system over plain `Vec`s, recording exactly what
//! pinprove's `ProvingAssignment` records. It exists to be
//! measured against: synthesis into growing heap vectors is what provers do
//! without a pool (bellperson among them).

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};

use pinprove_groth16::{Density, Scalar, evaluate_constraint};

/// Synthesis into heap vectors that grow as needed.
#[derive(Debug, Default)]
pub struct VecAssignment {
    /// A evaluations.
    pub a: Vec<Scalar>,
    /// B evaluations.
    pub b: Vec<Scalar>,
    /// C evaluations.
    pub c: Vec<Scalar>,
    /// Public inputs, ONE first.
    pub inputs: Vec<Scalar>,
    /// Aux assignments.
    pub aux: Vec<Scalar>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    missing: bool,
}

impl VecAssignment {
    /// Runs `circuit` as the prover would (ONE first, input constraints last).
    pub fn synthesize<C: bellpepper_core::Circuit<Scalar>>(circuit: C) -> Result<Self, SynthesisError> {
        let mut cs = VecAssignment::default();
        cs.alloc_input(|| "one", || Ok(<Scalar as ff::Field>::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.inputs.len() {
            cs.enforce(
                || "",
                |lc| lc + Variable::new_unchecked(Index::Input(i)),
                |lc| lc,
                |lc| lc,
            );
        }
        if cs.missing {
            return Err(SynthesisError::AssignmentMissing);
        }
        Ok(cs)
    }
}

impl ConstraintSystem<Scalar> for VecAssignment {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.add_element();
        self.b_aux_density.add_element();
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        self.b_input_density.add_element();
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let (la, lb, lc) = (
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
        match evaluate_constraint(
            (&la, &lb, &lc),
            (&self.inputs, &self.aux),
            &mut self.a_aux_density,
            &mut self.b_input_density,
            &mut self.b_aux_density,
        ) {
            Some((va, vb, vc)) => {
                self.a.push(va);
                self.b.push(vb);
                self.c.push(vc);
            }
            None => self.missing = true,
        }
    }

    pinprove_groth16::flat_namespaces!();
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
    use pinprove_groth16::{AbcLayout, CapacityHints, synthesize};
    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};

    use super::VecAssignment;

    #[test]
    fn the_vec_baseline_records_exactly_what_the_prover_does() {
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        let hints = CapacityHints::in_memory();
        for mix in [WitnessMix::Random, WitnessMix::Bits] {
            let c = BenchCircuit::new(3000, mix).unwrap();
            let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
            let v = VecAssignment::synthesize(c).unwrap();
            assert_eq!(asg.a().unwrap(), &v.a[..]);
            assert_eq!(asg.b().unwrap(), &v.b[..]);
            assert_eq!(asg.c().unwrap(), &v.c[..]);
            assert_eq!(asg.inputs(), &v.inputs[..]);
            assert_eq!(asg.aux(), &v.aux[..]);
        }
    }
}
