//! Filecoin's proofs through pinprove's engine: PoRep C2, SnapDeals,
//! WindowPoSt and WinningPoSt, from the inputs Curio sends, into the bytes
//! filecoin-proofs makes, verified before they are returned.
//!
//! * [`kind`] — proof kinds, Filecoin's registered proof numbers, circuit
//!   ids ("porep-32g"), prover ids.
//! * [`ProofRequest`] — what a client asks for (cuzk.v1's fields).
//! * [`FilecoinProver`] — decodes a request, builds one circuit per
//!   partition with the storage-proofs 19 crates (`CompoundProof::circuit`
//!   with the public parameters filecoin-proofs derives from the registered
//!   proof), submits them as one engine job, and assembles and verifies the
//!   result.
//! * [`params`] — the standard Filecoin parameter cache, read by pinprove's
//!   own reader; parameters of test sector sizes are made on first use.
//! * [`sample`] — sealed sample sectors and their
//!   vanilla proofs, for tests, the demo and benchmarks.
//!
//! The lab, with the `lab` feature (benchmarks and tests; never the daemon):
//!
//! * `reference` — filecoin-proofs' own prover on the same request,
//!   what benchmarks measure pinprove against.
//! * `synthetic` — requests of the real shape for any sector size (their
//!   proofs do not verify), for measurements at production size, proved by
//!   `FilecoinProver::for_synthetic_inputs`.
//! * `shapes` — their circuits' counted shapes, kept across runs.
//!
//! Bad input (undecodable vanilla proofs, a registered proof of another
//! size, wrong commitments or counts, a C1 output of another sector) is
//! refused before anything is queued, with [`FilecoinError::BadInput`];
//! storage-proofs' code asserts on malformed data, and its panics are
//! caught here (at build time) and in the engine (during synthesis).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// Calls `$f::<Tree>(args)` with the Merkle tree shape of `$bytes`-byte
/// sectors, or fails with [`FilecoinError::SectorSize`].
macro_rules! with_tree {
    ($bytes:expr, $f:ident, $($arg:expr),* $(,)?) => {
        match $bytes {
            b if b == 2 << 10 => $f::<filecoin_proofs::SectorShape2KiB>($($arg),*),
            b if b == 8 << 20 => $f::<filecoin_proofs::SectorShape8MiB>($($arg),*),
            b if b == 512 << 20 => $f::<filecoin_proofs::SectorShape512MiB>($($arg),*),
            b if b == 32 << 30 => $f::<filecoin_proofs::SectorShape32GiB>($($arg),*),
            b if b == 64 << 30 => $f::<filecoin_proofs::SectorShape64GiB>($($arg),*),
            other => Err($crate::FilecoinError::SectorSize(other)),
        }
    };
}

mod aggregate;
pub mod direct;
mod error;
pub mod kind;
pub mod limits;
pub mod params;
mod porep;
mod post;
mod prepared;
pub mod production;
mod prover;
#[cfg(any(test, feature = "lab"))]
pub mod reference;
mod request;
pub mod sample;
#[cfg(any(test, feature = "lab"))]
pub mod shapes;
mod snap;
#[cfg(any(test, feature = "lab"))]
pub mod synthetic;

pub use error::FilecoinError;
pub use kind::{PerKind, ProofKind};
pub use params::ParamCache;
pub use porep::registered_proof_of;
pub use prover::{
    FilecoinOptions, FilecoinProver, PreparedProof, Proved, Submission, ensure_parameters, parse_circuit_id,
    write_test_parameters,
};
pub use request::ProofRequest;
