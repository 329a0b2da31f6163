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

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod assignment;
mod backend;
pub mod baseline;
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
mod synth;
pub mod synthetic;

pub use assignment::{ProvingAssignment, Witness, WitnessRef};
pub use backend::{Backend, Capabilities, ProvingJob, ResidentSrs, StartedProof, check_job};
pub use cpu::{CpuBackend, assemble};
pub use density::Density;
pub use error::{DeviceFault, LostDevice, ParamsError, PrecompiledError, ProveError, SetupError};
pub use hints::{BackendHint, CapacityHint, CapacityHints};
pub use params::{QueryLengths, Srs, SrsPoints, SrsStats, Validation, VerifyingKey};
pub use parts::{parts_scratch_bytes, synthesize_parts};
pub use proof::{PROOF_BYTES, Proof};
pub use synth::{AbcLayout, SynthesisStats, plausible_hint, synthesize, synthesize_sized};

/// The scalar field of BLS12-381.
pub use blstrs::Scalar;
