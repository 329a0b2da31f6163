//! Background RAM traffic, to measure under the memory pressure that
//! concurrent circuit synthesis puts on a machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Instant;

/// Threads that copy buffers back and forth until dropped.
pub struct RamLoad {
    stop: Arc<AtomicBool>,
    copied: Arc<AtomicU64>,
    started: Instant,
    threads: Vec<JoinHandle<()>>,
}

impl RamLoad {
    /// Starts `threads` threads, each copying two `buffer_bytes` buffers
    /// into each other in a loop. Returns once every thread has its buffers.
    pub fn start(threads: usize, buffer_bytes: usize) -> RamLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let copied = Arc::new(AtomicU64::new(0));
        let ready = Arc::new(std::sync::Barrier::new(threads + 1));
        let handles = (0..threads)
            .map(|t| {
                let (stop, copied, ready) = (Arc::clone(&stop), Arc::clone(&copied), Arc::clone(&ready));
                thread::Builder::new()
                    .name(format!("ram-load-{t}"))
                    .spawn(move || {
                        let mut a = vec![t as u8; buffer_bytes];
                        let mut b = vec![!(t as u8); buffer_bytes];
                        ready.wait();
                        while !stop.load(Ordering::Relaxed) {
                            b.copy_from_slice(&a);
                            std::mem::swap(&mut a, &mut b);
                            copied.fetch_add(buffer_bytes as u64, Ordering::Relaxed);
                        }
                        std::hint::black_box((&a, &b));
                    })
                    .expect("spawn load thread")
            })
            .collect();
        ready.wait();
        RamLoad {
            stop,
            copied,
            started: Instant::now(),
            threads: handles,
        }
    }

    /// Bytes copied per second so far (each copy reads and writes them).
    pub fn copy_rate_gbps(&self) -> f64 {
        self.copied.load(Ordering::Relaxed) as f64 / self.started.elapsed().as_secs_f64() / 1e9
    }
}

impl Drop for RamLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
