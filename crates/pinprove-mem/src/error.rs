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

    /// A request waited while nothing else held memory that would come
    /// back: no work in flight, every idle buffer freed (kept ones too),
    /// and still it did not fit. Waiting longer would be waiting forever.
    #[error(
        "a request of {requested} bytes cannot be granted and nothing in flight will free memory: \
         {used} of the budget's {total} bytes are held ({pool_checked_out} in pool buffers in use, \
         {pool_idle} in idle pool buffers, the rest outside the pool: parameters, recordings); \
         raise the budget or lower the work's size"
    )]
    NeverGranted {
        /// Bytes asked for (what was still missing of them when refused).
        requested: u64,
        /// The budget's total.
        total: u64,
        /// Bytes held when the request was refused.
        used: u64,
        /// Of those, in pool buffers checked out.
        pool_checked_out: u64,
        /// Of those, in idle pool buffers.
        pool_idle: u64,
    },

    /// The operating system refused memory.
    #[error("allocating {bytes} bytes of host memory failed")]
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

/// Shows an error followed by its chain of causes (`what: why: root
/// cause`), for text that must stand on its own: a failed job's reason, a
/// log line. Errors in pinprove expose their cause as
/// [`source`](std::error::Error::source) instead of repeating it in their
/// message, so `{e}` alone says only the outermost part.
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_names_each_cause_once() {
        let e = Error::Os {
            bytes: 4096,
            source: io::Error::from(io::ErrorKind::OutOfMemory),
        };
        let text = ErrorChain(&e).to_string();
        assert_eq!(
            text,
            format!(
                "allocating 4096 bytes of host memory failed: {}",
                io::Error::from(io::ErrorKind::OutOfMemory)
            )
        );
    }
}
