//! Helpers shared by the pool's integration tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use pinprove_mem::{PinnedPool, UseFence};

/// A use fence the test completes by setting the flag, as a GPU would by
/// finishing the copy that reads a buffer.
pub struct Flag(pub Arc<AtomicBool>);

impl UseFence for Flag {
    fn is_complete(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    fn wait(&self) {
        while !self.is_complete() {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Runs `f` on a thread marked as a device lane (see
/// [`pinprove_mem::mark_device_lane`]), as a GPU backend's thread would.
pub fn spawn_on_device_lane<T: Send + 'static>(
    pool: &Arc<PinnedPool>,
    f: impl FnOnce(&Arc<PinnedPool>) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let pool = Arc::clone(pool);
    thread::spawn(move || {
        pinprove_mem::mark_device_lane();
        f(&pool)
    })
}
