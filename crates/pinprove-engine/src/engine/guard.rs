//! Guards of the engine's threads: a panic turned into a failed partition
//! instead of a dead thread, a loop that outlives its own bugs, and a count
//! that goes down however a background task ends.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::metrics::Metrics;

/// Runs `f`, turning a panic into its message.
pub(super) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    // Unwind safety: what `f` touches is either dropped by the unwinding
    // (the partition and everything it holds) or shared state kept
    // consistent between statements behind locks taken with `recover`.
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}

/// Runs a worker's loop until it returns. A panic that escapes the loop's
/// own per-partition guard (a bug in the engine itself) is logged and the
/// loop starts again: the thread is replaced by itself, and keeps serving.
pub(super) fn supervise(name: &str, metrics: &Metrics, mut body: impl FnMut()) {
    loop {
        match catch(&mut body) {
            Ok(()) => return,
            Err(msg) => {
                metrics.panics.fetch_add(1, Ordering::Relaxed);
                tracing::error!(thread = name, "engine thread panicked ({msg}); it starts again");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Counts one down when dropped (a background task that ended, however).
pub(super) struct Counted(pub(super) Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
