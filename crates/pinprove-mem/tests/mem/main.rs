//! pinprove-mem's integration tests, one binary: admission, the budget,
//! `PinnedVec`, the pool.

#[path = "../common/mod.rs"]
mod common;

mod admission;
mod budget;
mod pinned_vec;
mod pool;
