//! Host memory for pinprove.
//!
//! A Groth16 prover synthesizes a circuit into three vectors (a, b, c) that
//! are then uploaded to the GPU. Uploads from pageable memory are staged by
//! the CUDA driver through a small bounce buffer and run at a sixth of the
//! line rate; uploads from pinned memory run at the line rate, but pinning is
//! expensive (seconds for a few GiB). This crate makes pinned memory cheap to
//! use by allocating it once and reusing it:
//!
//! * [`HostAllocator`] — where memory comes from: page-aligned heap memory
//!   ([`HeapAllocator`]), or pinned memory from an allocator the GPU layer
//!   implements (pinprove-cuda); this crate knows no GPU API, only the
//!   [`UseFence`] a buffer's last GPU use leaves behind.
//! * [`PinnedPool`] — allocate once, check out and return many times.
//! * [`PinnedVec`] — a `Vec`-like container backed by a pool buffer, which is
//!   what synthesis writes into, so there is no copy before the upload.
//! * [`MemoryBudget`] — one byte budget for everything large in the process,
//!   with FIFO admission and eviction of idle memory under pressure.
//!
//! Nothing in this crate knows about cryptography.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod alloc;
mod budget;
mod error;
mod pool;
pub mod sync;
pub mod sys;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
mod vec;

pub use alloc::{HeapAllocator, HostAllocator, HostMemory, MemoryKind, PAGE, PinMethod};
pub use budget::{BudgetConfig, BudgetStats, Evictor, MemoryBudget, Rank, Reservation, parse_bytes};
pub use error::{Error, ErrorChain};
pub use pool::{PinnedPool, PoolBuffer, PoolConfig, PoolStats, UseFence, WarmReport, mark_device_lane};
pub use vec::PinnedVec;

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One kibibyte.
pub const KIB: usize = 1 << 10;
/// One mebibyte.
pub const MIB: usize = 1 << 20;
/// One gibibyte.
pub const GIB: usize = 1 << 30;
