//! A request turned into circuits, between the kinds' builders (`porep`,
//! `snap`, `post`) and the prover that submits them.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pinprove_engine::Partition;
use pinprove_groth16::Scalar;

use crate::aggregate::Aggregation;
use crate::params::CircuitParams;
use crate::{FilecoinError, ProofKind};

/// A request turned into circuits: what the engine proves, and what the
/// proof is verified against.
pub(crate) struct Prepared {
    pub kind: ProofKind,
    pub circuit: CircuitParams,
    pub partitions: Vec<Box<dyn Partition>>,
    /// Each partition's public inputs, as the verifier derives them.
    pub inputs: Vec<Vec<Scalar>>,
    /// The partition proofs are returned aggregated (non-interactive
    /// PoRep), not concatenated.
    pub aggregation: Option<Aggregation>,
}

/// Runs `build`, turning a panic in storage-proofs' code (which asserts on
/// malformed data) into a refusal of the request.
pub(crate) fn guarded<T>(
    kind: ProofKind,
    build: impl FnOnce() -> Result<T, FilecoinError>,
) -> Result<T, FilecoinError> {
    catch_unwind(AssertUnwindSafe(build)).unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(crate::error::bad(kind, format!("malformed input ({why})")))
    })
}

/// What preparing a request checks beyond its form.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checks {
    /// The vanilla proofs verify against the request's public inputs.
    pub vanilla: bool,
}
