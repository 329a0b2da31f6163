//! pinprove-groth16's integration tests, one binary: proofs byte-identical
//! to bellperson's, circuits synthesized in parts, pre-compiled circuits,
//! the prover end to end.

#[path = "../common/mod.rs"]
mod common;

mod bellperson_compat;
mod parts;
mod precompiled;
mod prover;
