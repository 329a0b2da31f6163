//! Witness-only replicas of bellpepper gadgets: the same values, in the same
//! order, that the gadgets hand to `ConstraintSystem::alloc`, computed on
//! machine words instead of linear combinations. A witness made by them is
//! a *direct* witness (the word "native" is the GPU backend's alone).
//!
//! A synthesis that only needs the witness (the constraints are fixed by the
//! circuit's shape and known already) spends nearly all of a PoRep
//! partition's time inside bellpepper's SHA-256 gadget, building linear
//! combinations nobody reads. These replicas produce the witness bits
//! directly; the allocation sequence, including the gadget's constant
//! folding, must match the gadget's exactly, or every later variable of the
//! circuit would be shifted.
//!
//! * [`Bit`] and [`Word`] — a gadget `Boolean` and `UInt32`, reduced to the
//!   values and the constant/allocated/negated tags that decide what the
//!   gadget allocates.
//! * [`AllocSink`] — where the allocated values go, in order.
//! * [`sha256`](sha256::sha256), [`compress`](sha256::compress) — the
//!   SHA-256 gadget and its compression function.
//! * [`label`] — storage-proofs' `create_label_circuit`, allocating through
//!   a constraint system.
//! * [`poseidon`] — neptune's Poseidon gadget (every hash of the Poseidon
//!   trees, column hashes and commitments), values in field elements.
//! * [`tree`] — storage-proofs' PoR gadget over a Poseidon tree (TreeR,
//!   TreeC and PoSt inclusions).
//! * [`partition`] — a partition of any kind for the engine: classically
//!   its real circuit, pre-compiled its direct witness.
//! * [`post`] — a WindowPoSt or WinningPoSt partition's witness.
//! * [`porep`] — a whole PoRep partition's witness: these replicas for its
//!   SHA-256 and Poseidon parts, the circuit's own few small gadgets for
//!   the rest.
//! * [`snap`] — a SnapDeals partition's witness.
//! * [`witnesses_computed`] — how many partitions' witnesses they made, per
//!   kind.

mod count;
pub mod label;
mod made;
pub mod partition;
pub mod porep;
pub mod poseidon;
pub mod post;
pub mod sha256;
mod sink;
pub mod snap;
pub mod tree;
mod word;

pub(crate) use made::witness_made;
pub use made::witnesses_computed;
pub use sink::{AllocSink, PackedBits};
pub use word::{Bit, Word};

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod label_tests;

#[cfg(test)]
mod bench;
