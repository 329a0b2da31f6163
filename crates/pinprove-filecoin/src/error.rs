//! Why a Filecoin proof could not be made.

use std::path::PathBuf;

use pinprove_engine::EngineError;

use crate::ProofKind;

/// Why a Filecoin proof could not be made. `BadInput` and its relatives
/// are the caller's (a request to refuse); the others are the prover's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilecoinError {
    /// The request does not hold what its kind needs, or holds it wrongly
    /// (undecodable vanilla proofs, wrong counts, mismatched commitments).
    #[error("{kind} request: {what}")]
    BadInput {
        /// The kind requested.
        kind: ProofKind,
        /// What is wrong, in the caller's terms.
        what: String,
    },
    /// A registered proof number Filecoin does not have.
    #[error("there is no {kind} proof number {number}")]
    RegisteredProof {
        /// Seal, PoSt or update.
        kind: &'static str,
        /// The number given.
        number: u64,
    },
    /// A circuit id that names no Filecoin circuit.
    #[error("unknown circuit {0:?} (porep, snap, wpost or winning, then 2k, 8m, 512m, 32g or 64g: \"porep-32g\")")]
    UnknownCircuit(String),
    /// A sector size no proof supports.
    #[error("{0} bytes is not a sector size Filecoin proves (2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB)")]
    SectorSize(u64),
    /// The parameters of a circuit are not in the cache (and are not made
    /// for sectors of this size, or generation is off).
    #[error(
        "the parameters of {circuit_id} are missing: {} (fetch them into the parameter cache, \
         as `lotus fetch-params <sector size>` does{})",
        path.display(),
        if *generation_off { "; or switch `filecoin.generate_parameters` on to make \
         test parameters" } else { "" }
    )]
    MissingParameters {
        /// The circuit.
        circuit_id: String,
        /// The file looked for.
        path: PathBuf,
        /// A test size whose parameters would be made with generation on.
        generation_off: bool,
    },
    /// Making or reading parameters failed.
    #[error("the parameters of {circuit_id}")]
    Parameters {
        /// The circuit.
        circuit_id: String,
        /// Why.
        #[source]
        source: anyhow::Error,
    },
    /// The engine refused or failed the job.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A partition failed in the engine.
    #[error("the {kind} proof failed: {why}")]
    Failed {
        /// The kind.
        kind: ProofKind,
        /// The engine's reason.
        why: String,
    },
    /// The job was cancelled.
    #[error("the {0} proof was cancelled")]
    Cancelled(ProofKind),
    /// The proof was made but does not verify: never returned as a result.
    #[error("the {kind} proof does not verify against the request's public inputs (partition {partition})")]
    NotVerified {
        /// The kind.
        kind: ProofKind,
        /// The first partition that failed.
        partition: usize,
    },
    /// The partition proofs were made and verify, but aggregating them
    /// (non-interactive PoRep) failed.
    #[error("aggregating the {kind} proof")]
    Aggregation {
        /// The kind.
        kind: ProofKind,
        /// Why.
        #[source]
        source: anyhow::Error,
    },
    /// The aggregate of verified partition proofs does not verify: never
    /// returned as a result.
    #[error("the {0} aggregate does not verify against the request's public inputs")]
    AggregateNotVerified(ProofKind),
    /// Verification itself could not run.
    #[error("verifying the {kind} proof")]
    Verification {
        /// The kind.
        kind: ProofKind,
        /// Why.
        #[source]
        source: anyhow::Error,
    },
}

impl FilecoinError {
    /// Whether the caller's request is at fault (to be refused as an invalid
    /// argument), rather than the prover.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            FilecoinError::BadInput { .. }
                | FilecoinError::RegisteredProof { .. }
                | FilecoinError::SectorSize(_)
                | FilecoinError::UnknownCircuit(_)
        )
    }
}

/// A `BadInput` of `kind` saying `what`.
pub(crate) fn bad(kind: ProofKind, what: impl Into<String>) -> FilecoinError {
    FilecoinError::BadInput {
        kind,
        what: what.into(),
    }
}
