//! Constraint counting for the replicas: witness-only synthesis checks the
//! constraint count against the recording, so a replica enforces as many
//! (empty) constraints as the gadget it replaces, a count taken from the
//! gadget itself on a [`Counter`].

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;

/// Counts constraints; computes nothing.
#[derive(Default)]
pub(crate) struct Counter {
    vars: usize,
    pub(crate) constraints: usize,
}

impl ConstraintSystem<Fr> for Counter {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.vars += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.vars - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.vars += 1;
        Ok(Variable::new_unchecked(Index::Input(self.vars - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        self.constraints += 1;
    }

    fn push_namespace<NR: Into<String>, N: FnOnce() -> NR>(&mut self, _: N) {}

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// Enforces `n` constraints that the witness-only synthesis only counts.
pub(crate) fn enforce_n<CS: ConstraintSystem<Fr>>(cs: &mut CS, n: usize) {
    for _ in 0..n {
        cs.enforce(|| "direct", |lc| lc, |lc| lc, |lc| lc);
    }
}
