use std::io;

/// Errors of the host memory layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request can never be satisfied: it is larger than the whole budget.
    #[error(
        "a request of {requested} bytes exceeds the whole memory budget of {total} bytes; \
         raise the budget or lower the work's size"
    )]
    ExceedsBudget {
        /// Bytes asked for.
        requested: u64,
        /// The budget's total.
        total: u64,
    },

    /// A non-blocking request did not fit right now.
    #[error("{requested} bytes do not fit in the memory budget now ({available} of {total} bytes free)")]
    WouldBlock {
        /// Bytes asked for.
        requested: u64,
        /// Bytes free when the request was made.
        available: u64,
        /// The budget's total.
        total: u64,
    },

    /// The operating system refused memory.
    #[error("allocating {bytes} bytes of host memory failed: {source}")]
    Os {
        /// Bytes asked for.
        bytes: usize,
        /// What the system call said.
        #[source]
        source: io::Error,
    },

    /// The CUDA runtime refused to allocate or register pinned memory.
    #[error("CUDA pinned allocation of {bytes} bytes failed: {message}")]
    CudaAlloc {
        /// Bytes asked for.
        bytes: usize,
        /// The runtime's error name and text.
        message: String,
    },

    /// A size computation overflowed (a vector asked for more elements than
    /// fit in the address space).
    #[error("capacity overflow: {0}")]
    CapacityOverflow(&'static str),

    /// Two reservations of different budgets were combined.
    #[error("reservations belong to different memory budgets")]
    ForeignReservation,
}
