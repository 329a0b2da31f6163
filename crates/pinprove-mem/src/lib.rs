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
//!   ([`HeapAllocator`], the default everywhere) or CUDA pinned memory
//!   (`CudaPinnedAllocator`, behind the `cuda` feature).
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

#[cfg(feature = "cuda")]
pub mod cuda;

pub use alloc::{HeapAllocator, HostAllocator, HostMemory, MemoryKind, PinMethod};
pub use budget::{BudgetConfig, BudgetStats, Evictor, MemoryBudget, Rank, Reservation, parse_bytes};
pub use error::{Error, ErrorChain};
pub use pool::{PinnedPool, PoolBuffer, PoolConfig, PoolStats, UseFence, WarmReport, mark_device_lane};
pub use vec::PinnedVec;

use std::sync::{Arc, OnceLock};

/// The allocator the process uses for pool buffers.
///
/// With the `cuda` feature this is CUDA pinned memory when a driver and a GPU
/// are usable, and heap memory otherwise (said once in the log). Without the
/// feature it is always heap memory. The choice is made once per process.
pub fn default_allocator() -> Arc<dyn HostAllocator> {
    static CHOSEN: OnceLock<Arc<dyn HostAllocator>> = OnceLock::new();
    Arc::clone(CHOSEN.get_or_init(choose_allocator))
}

#[cfg(feature = "cuda")]
fn choose_allocator() -> Arc<dyn HostAllocator> {
    match cuda::pinned_allocator(PinMethod::default()) {
        Ok(a) => {
            tracing::info!(pinning = %PinMethod::default(), "pool buffers use CUDA pinned host memory");
            a
        }
        Err(e) => {
            tracing::warn!("no usable CUDA device ({e}); pool buffers fall back to pageable heap memory");
            Arc::new(HeapAllocator::default())
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn choose_allocator() -> Arc<dyn HostAllocator> {
    Arc::new(HeapAllocator::default())
}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One kibibyte.
pub const KIB: usize = 1 << 10;
/// One mebibyte.
pub const MIB: usize = 1 << 20;
/// One gibibyte.
pub const GIB: usize = 1 << 30;
