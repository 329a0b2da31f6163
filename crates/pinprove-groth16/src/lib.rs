//! Groth16 over BLS12-381, built around zero-copy synthesis.
//!
//! Circuits written against `bellpepper-core` are synthesized by
//! [`synthesize`] into a [`ProvingAssignment`] whose a/b/c evaluations and
//! witness live in [`PinnedVec`](pinprove_mem::PinnedVec)s taken from the
//! process's pool, sized up front from [`CapacityHints`] learned on earlier
//! syntheses of the same circuit, so a GPU can read them without any copy.
//!
//! A [`Backend`] turns assignments into proofs in two steps — [`Backend::start`]
//! does the FFT part and consumes a/b/c, [`StartedProof::finish`] does the
//! remaining multi-scalar multiplications — so that a device can take the
//! next partition while the previous one finishes. [`CpuBackend`] is the
//! reference implementation and the fallback without a GPU.
//!
//! Proofs are byte-identical to `bellperson::groth16::create_proof` for the
//! same circuit, parameters, r and s: the arithmetic is exact, so any correct
//! evaluation gives the same group elements.
//!
//! # Example
//!
//! Parameters, synthesis, a proof, and bellperson's verifier accepting it:
//!
//! ```
//! use std::sync::Arc;
//!
//! use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
//! use pinprove_groth16::setup::{self, ToxicWaste};
//! use pinprove_groth16::{AbcLayout, Backend, CapacityHints, CpuBackend, ProofBatch, Scalar, Srs, Validation, synthesize};
//! use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};
//! use rand_chacha::ChaCha8Rng;
//! use rand_core::SeedableRng;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One budget for everything large; pool buffers come out of it.
//! let pool = PinnedPool::new(Arc::new(HeapAllocator::default()), MemoryBudget::new(1 << 30), PoolConfig::default());
//! let circuit = BenchCircuit::new(1 << 10, WitnessMix::Bits)?;
//!
//! // Parameters from a one-party setup (tests and benchmarks; real ones
//! // come from a ceremony), in bellperson's file format.
//! let mut file = Vec::new();
//! let waste = ToxicWaste::random(&mut ChaCha8Rng::seed_from_u64(1));
//! setup::generate(circuit.clone(), &waste, &mut file, &|_| {})?;
//! let srs = Arc::new(Srs::from_bytes(&file, &pool, Validation::OnCurve)?);
//!
//! // Synthesis into pool buffers, then the proof.
//! let hints = CapacityHints::in_memory();
//! let (assignment, _) = synthesize(circuit.clone(), &circuit.id(), &pool, &hints, AbcLayout::PaddedToDomain, None)?;
//! let job = ProofBatch::new(srs, vec![assignment], vec![(Scalar::from(3u64), Scalar::from(5u64))]);
//! let proof = CpuBackend::new(Arc::clone(&pool)).prove(job)?.remove(0);
//!
//! // Checked by the reference verifier.
//! let vk = bellperson::groth16::VerifyingKey::<blstrs::Bls12>::read(&file[..])?;
//! let theirs = bellperson::groth16::Proof::<blstrs::Bls12>::read(&proof.to_bytes()[..])?;
//! let pvk = bellperson::groth16::prepare_verifying_key(&vk);
//! assert!(bellperson::groth16::verify_proof(&pvk, &theirs, &circuit.public_inputs())?);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// Inside an `impl ConstraintSystem<Scalar>`: the three methods of a
/// system without namespaces (names are never kept, and the system is its
/// own root), which every constraint system of this code base is.
#[macro_export]
macro_rules! flat_namespaces {
    () => {
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
    };
}

mod assignment;
mod backend;
#[cfg(any(test, feature = "lab"))]
pub mod circuits;
mod cpu;
mod density;
pub mod domain;
mod error;
mod hints;
pub mod msm;
mod params;
mod parts;
pub mod precompiled;
mod proof;
pub mod setup;
pub mod shape;
mod synth;
#[cfg(any(test, feature = "lab"))]
pub mod synthetic;

pub use assignment::{ProvingAssignment, Witness, WitnessRef, evaluate_constraint};
pub use backend::{Backend, Capabilities, ProofBatch, ResidentSrs, StartedProof, check_job};
pub use cpu::{CpuBackend, assemble};
pub use density::{Densities, Density};
pub use error::{DeviceFault, LostDevice, ParamsError, PrecompiledError, ProveError, SetupError};
pub use hints::{BackendHint, CapacityHint, CapacityHints};
pub use params::{QueryLengths, Srs, SrsPoints, SrsStats, Validation, VerifyingKey};
pub use parts::parts_scratch_bytes;
pub use proof::{PROOF_BYTES, Proof};
pub use synth::{AbcLayout, SynthesisStats, SynthesisTarget, plausible_hint, synthesize};

/// The scalar field of BLS12-381.
pub use blstrs::Scalar;
