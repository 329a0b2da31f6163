//! pinprove-filecoin's integration tests, one binary (the storage-proofs
//! stack is linked once): every kind at 2 KiB from real sealed sectors,
//! verified by filecoin-proofs-api; bad and hostile input; synthetic
//! inputs and parameters; pre-compiled circuits.

mod common;

mod bad_input;
mod porep;
mod post;
mod precompiled;
mod snap;
mod synthetic;
mod unverified;
