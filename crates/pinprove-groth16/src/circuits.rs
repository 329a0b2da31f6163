//! Built-in circuits for tests and benchmarks.
//!
//! [`BenchCircuit`] has a realistic shape at any size from a few constraints
//! to 2^26: multiplications, boolean constraints, XOR/AND gates, bit packing
//! into words (long linear combinations), sums, variables that appear only
//! in C, and a few public inputs. Its witness is either mostly random field
//! elements or mostly bits, as in the hash-heavy circuits of Filecoin:
//! provers behave very differently on the two.
//!
//! The circuit is cut into independent blocks whose witnesses are computed
//! in parallel before the constraints are emitted in order.

use std::fmt;

use bellpepper_core::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

use crate::Scalar;

/// Which values the witness holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WitnessMix {
    /// Mostly random field elements (long multiplication chains).
    Random,
    /// Mostly 0 and 1 (boolean, XOR and AND gates packed into words), like
    /// the hash-heavy circuits of Filecoin.
    Bits,
}

impl WitnessMix {
    /// A short name: "random" or "bits".
    pub fn as_str(self) -> &'static str {
        match self {
            WitnessMix::Random => "random",
            WitnessMix::Bits => "bits",
        }
    }
}

impl fmt::Display for WitnessMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for WitnessMix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" | "rand" => Ok(WitnessMix::Random),
            "bits" | "bool" => Ok(WitnessMix::Bits),
            other => Err(format!("unknown witness mix {other:?} (random or bits)")),
        }
    }
}

/// A size or setting the circuit cannot have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid benchmark circuit: {0}")]
pub struct InvalidCircuit(String);

const BLOCK: usize = 256;

/// A synthetic circuit with a chosen number of constraints.
///
/// `constraints` counts everything the prover sees, including the constant
/// ONE's and each public input's constraint, so a circuit of 2^k
/// constraints fills a domain of exactly 2^k.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchCircuit {
    constraints: usize,
    public_inputs: usize,
    mix: WitnessMix,
    seed: u64,
    corrupt: bool,
}

/// One gate: it allocates `new` values (the next ones of the block's
/// witness), then enforces one constraint over the block's values.
#[derive(Clone, Copy, Debug)]
enum Gate {
    /// v[a] · v[b] = v[out]
    Mul { a: u32, b: u32, out: u32 },
    /// v[x] · (1 − v[x]) = 0
    Bool { x: u32 },
    /// 2·v[a] · v[b] = v[a] + v[b] − v[out]
    Xor { a: u32, b: u32, out: u32 },
    /// (Σ v[first..first+count]) · 1 = v[out]
    Sum { first: u32, count: u32, out: u32 },
    /// (Σ 2^k · v[first+k]) · 1 = v[out]
    Pack { first: u32, count: u32, out: u32 },
}

struct Block {
    values: Vec<Scalar>,
    /// Each gate with the number of values it allocates first.
    gates: Vec<(u32, Gate)>,
}

impl BenchCircuit {
    /// A circuit of `constraints` constraints with 4 public inputs.
    pub fn new(constraints: usize, mix: WitnessMix) -> Result<Self, InvalidCircuit> {
        Self::with_inputs(constraints, 4, mix)
    }

    /// A circuit of `constraints` constraints and `public_inputs` public
    /// inputs (besides the constant ONE).
    pub fn with_inputs(constraints: usize, public_inputs: usize, mix: WitnessMix) -> Result<Self, InvalidCircuit> {
        if constraints > 1 << 28 {
            return Err(InvalidCircuit(format!("{constraints} constraints is beyond 2^28")));
        }
        // Sizes come from the command line: an input count near usize::MAX
        // must be an error, not a wrapped product.
        let fixed = public_inputs.checked_mul(2).and_then(|n| n.checked_add(1));
        let c = BenchCircuit {
            constraints,
            public_inputs,
            mix,
            seed: 1,
            corrupt: false,
        };
        match fixed {
            Some(f) if constraints > f => Ok(c),
            _ => Err(InvalidCircuit(format!(
                "{constraints} constraints leave no room for gates beside {public_inputs} public inputs \
                 (need at least {})",
                public_inputs.saturating_mul(2).saturating_add(3)
            ))),
        }
    }

    /// The same shape with another witness (`seed` picks the random values).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The same circuit with one wrong witness value: its proofs must not
    /// verify.
    pub fn corrupted(mut self) -> Self {
        self.corrupt = true;
        self
    }

    /// The circuit type's id, for capacity hints and SRS lookup: circuits of
    /// one id share their shape (not their witness).
    pub fn id(&self) -> String {
        format!("bench-{}-{}c-{}in", self.mix, self.constraints, self.public_inputs)
    }

    /// Constraints, including the input constraints.
    pub fn constraints(&self) -> usize {
        self.constraints
    }

    /// The witness mix.
    pub fn mix(&self) -> WitnessMix {
        self.mix
    }

    /// The public inputs (without the constant ONE), as a verifier needs them.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let b0 = self.block(0);
        (0..self.public_inputs)
            .map(|j| b0.values[j % b0.values.len()])
            .collect()
    }

    /// Heap bytes its synthesis holds besides what it synthesizes into:
    /// the whole circuit, generated up front (each block's values and
    /// gates, at the capacities they are made with).
    pub fn heap_bytes(&self) -> u64 {
        let values = match self.mix {
            WitnessMix::Random => 2 * BLOCK + 1,
            WitnessMix::Bits => BLOCK + 3,
        };
        let block = values * size_of::<Scalar>() + BLOCK * size_of::<(u32, Gate)>() + size_of::<Block>();
        (self.blocks() as u64).saturating_mul(block as u64)
    }

    /// Constraint slots left for gates.
    fn gadget_slots(&self) -> usize {
        // ONE's and each input's Groth16 constraint, and one binding per input.
        self.constraints
            .saturating_sub(self.public_inputs.saturating_mul(2).saturating_add(1))
    }

    fn blocks(&self) -> usize {
        self.gadget_slots().div_ceil(BLOCK)
    }

    fn block(&self, index: usize) -> Block {
        let slots = (self.gadget_slots() - index * BLOCK).min(BLOCK);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut b = match self.mix {
            WitnessMix::Random => random_block(slots, &mut rng),
            WitnessMix::Bits => bits_block(slots, &mut rng),
        };
        if self.corrupt && index == 0 {
            let last = b.values.len() - 1;
            b.values[last] += Scalar::ONE;
        }
        b
    }
}

fn random_block(slots: usize, rng: &mut ChaCha8Rng) -> Block {
    let mut v: Vec<Scalar> = Vec::with_capacity(2 * slots + 1);
    let mut gates = Vec::with_capacity(slots);
    let (x, y) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
    v.extend([x, y, x * y]);
    gates.push((3, Gate::Mul { a: 0, b: 1, out: 2 }));
    let mut z = 2u32;
    for s in 1..slots {
        let n = v.len() as u32;
        match s % 16 {
            // A sum of the last eight values.
            15 => {
                let first = n.saturating_sub(8);
                let sum = v[first as usize..].iter().sum::<Scalar>();
                v.push(sum);
                gates.push((
                    1,
                    Gate::Sum {
                        first,
                        count: n - first,
                        out: n,
                    },
                ));
            }
            // A product nothing uses again: its output appears only in C.
            7 => {
                let y = Scalar::random(&mut *rng);
                v.extend([y, v[z as usize] * y]);
                gates.push((2, Gate::Mul { a: z, b: n, out: n + 1 }));
            }
            // An occasional bit.
            11 => {
                v.push(Scalar::from(rng.next_u32() as u64 & 1));
                gates.push((1, Gate::Bool { x: n }));
            }
            _ => {
                let y = Scalar::random(&mut *rng);
                v.extend([y, v[z as usize] * y]);
                gates.push((2, Gate::Mul { a: z, b: n, out: n + 1 }));
                z = n + 1;
            }
        }
    }
    Block { values: v, gates }
}

fn bits_block(slots: usize, rng: &mut ChaCha8Rng) -> Block {
    let mut v: Vec<Scalar> = Vec::with_capacity(slots + 3);
    let mut gates = Vec::with_capacity(slots);
    // One random product per block: the few field elements of a hash circuit.
    let (x, y) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
    v.extend([x, y, x * y]);
    gates.push((3, Gate::Mul { a: 0, b: 1, out: 2 }));
    let mut bits: Vec<u32> = Vec::with_capacity(slots);
    let bit = |v: &Vec<Scalar>, i: u32| v[i as usize] == Scalar::ONE;
    for s in 1..slots {
        let n = v.len() as u32;
        if s % 128 == 127 && bits.len() >= 64 {
            // Pack the last 64 bits into a word: a long linear combination.
            let first = n - 64;
            let word = (0..64)
                .rev()
                .fold(Scalar::ZERO, |acc, k| acc.double() + v[(first + k) as usize]);
            v.push(word);
            gates.push((
                1,
                Gate::Pack {
                    first,
                    count: 64,
                    out: n,
                },
            ));
        } else if s % 3 == 1 || bits.len() < 2 {
            v.push(Scalar::from(rng.next_u32() as u64 & 1));
            gates.push((1, Gate::Bool { x: n }));
            bits.push(n);
        } else {
            let (a, b) = (bits[bits.len() - 1], bits[bits.len() - 2]);
            let (ba, bb) = (bit(&v, a), bit(&v, b));
            if s % 3 == 2 {
                v.push(Scalar::from((ba && bb) as u64));
                gates.push((1, Gate::Mul { a, b, out: n }));
            } else {
                v.push(Scalar::from((ba ^ bb) as u64));
                gates.push((1, Gate::Xor { a, b, out: n }));
            }
            bits.push(n);
        }
    }
    Block { values: v, gates }
}

impl Circuit<Scalar> for BenchCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let blocks: Vec<Block> = (0..self.blocks()).into_par_iter().map(|i| self.block(i)).collect();
        let one = CS::one();
        let mut first_vars: Vec<(Variable, Scalar)> = Vec::new();
        for (bi, block) in blocks.iter().enumerate() {
            let mut vars: Vec<Variable> = Vec::with_capacity(block.values.len());
            // Annotations are closures: provers never call them, so unique
            // names cost nothing outside test constraint systems.
            for (gi, &(new, gate)) in block.gates.iter().enumerate() {
                for _ in 0..new {
                    let value = block.values[vars.len()];
                    let k = vars.len();
                    vars.push(cs.alloc(|| format!("b{bi} v{k}"), || Ok(value))?);
                }
                let var = |i: u32| vars[i as usize];
                let name = || format!("b{bi} g{gi}");
                match gate {
                    Gate::Mul { a, b, out } => cs.enforce(name, |lc| lc + var(a), |lc| lc + var(b), |lc| lc + var(out)),
                    Gate::Bool { x } => cs.enforce(name, |lc| lc + var(x), |lc| lc + one - var(x), |lc| lc),
                    Gate::Xor { a, b, out } => cs.enforce(
                        name,
                        |lc| lc + var(a) + var(a),
                        |lc| lc + var(b),
                        |lc| lc + var(a) + var(b) - var(out),
                    ),
                    Gate::Sum { first, count, out } => cs.enforce(
                        name,
                        |lc| (first..first + count).fold(lc, |lc, i| lc + var(i)),
                        |lc| lc + one,
                        |lc| lc + var(out),
                    ),
                    Gate::Pack { first, count, out } => {
                        let mut coeff = Scalar::ONE;
                        let mut packed = LinearCombination::zero();
                        for i in first..first + count {
                            packed = packed + (coeff, var(i));
                            coeff = coeff.double();
                        }
                        cs.enforce(name, |_| packed, |lc| lc + one, |lc| lc + var(out))
                    }
                }
            }
            if bi == 0 {
                first_vars = vars.iter().copied().zip(block.values.iter().copied()).collect();
            }
        }
        // Public inputs equal values of the first block.
        for j in 0..self.public_inputs {
            let (aux, value) = first_vars[j % first_vars.len()];
            let input = cs.alloc_input(|| format!("input {j}"), || Ok(value))?;
            cs.enforce(
                || format!("bind input {j}"),
                |lc| lc + input,
                |lc| lc + one,
                |lc| lc + aux,
            );
        }
        Ok(())
    }
}

/// Fraction of values of a witness that are 0 or 1 (reported by benchmarks).
pub fn bit_fraction(values: &[Scalar]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let bits = values
        .par_iter()
        .filter(|v| bool::from(v.is_zero()) || **v == Scalar::ONE)
        .count();
    bits as f64 / values.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::test_cs::TestConstraintSystem;

    #[test]
    fn circuits_are_satisfied_and_sized_exactly() {
        for mix in [WitnessMix::Random, WitnessMix::Bits] {
            for n in [11usize, 300, 1 << 10, 3000] {
                let c = BenchCircuit::new(n, mix).unwrap();
                let mut cs = TestConstraintSystem::<Scalar>::new();
                c.clone().synthesize(&mut cs).unwrap();
                assert!(cs.is_satisfied(), "{mix} {n}: {:?}", cs.which_is_unsatisfied());
                // The test system counts ONE as an input but adds no input
                // constraints: the prover adds 1 + inputs.
                assert_eq!(cs.num_constraints() + 1 + 4, n, "{mix} {n}");
                assert_eq!(cs.num_inputs(), 5);
                let inputs = c.public_inputs();
                assert!(cs.verify(&inputs), "{mix} {n}");
            }
        }
    }

    #[test]
    fn corrupted_circuits_are_unsatisfied() {
        let c = BenchCircuit::new(500, WitnessMix::Random).unwrap().corrupted();
        let mut cs = TestConstraintSystem::<Scalar>::new();
        c.synthesize(&mut cs).unwrap();
        assert!(!cs.is_satisfied());
    }

    #[test]
    fn sizes_are_checked() {
        assert!(BenchCircuit::new(5, WitnessMix::Bits).is_err());
        assert!(BenchCircuit::with_inputs(3, 0, WitnessMix::Bits).is_ok());
        assert!(BenchCircuit::new(1 << 29, WitnessMix::Bits).is_err());
        // Input counts whose doubled value overflows: an error, not a wrap.
        for inputs in [usize::MAX, usize::MAX / 2 + 1, usize::MAX / 2] {
            let err = BenchCircuit::with_inputs(1000, inputs, WitnessMix::Bits).unwrap_err();
            assert!(err.to_string().contains("leave no room"), "{err}");
        }
    }

    #[test]
    fn mixes_differ_in_their_values() {
        let values = |mix| BenchCircuit::new(1 << 12, mix).unwrap().block(0).values;
        assert!(bit_fraction(&values(WitnessMix::Bits)) > 0.95);
        assert!(bit_fraction(&values(WitnessMix::Random)) < 0.15);
    }
}
