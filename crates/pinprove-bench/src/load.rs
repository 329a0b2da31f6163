//! Background RAM traffic, to measure under the memory pressure that
//! concurrent circuit synthesis puts on a machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
    /// into each other in a loop. Returns once every thread has its
    /// buffers; a thread that cannot be started is an error (the others are
    /// stopped).
    pub fn start(threads: usize, buffer_bytes: usize) -> std::io::Result<RamLoad> {
        let stop = Arc::new(AtomicBool::new(false));
        let copied = Arc::new(AtomicU64::new(0));
        let ready = Arc::new(AtomicUsize::new(0));
        // Stops and joins whatever was started if a later start fails.
        let mut load = RamLoad {
            stop: Arc::clone(&stop),
            copied: Arc::clone(&copied),
            started: Instant::now(),
            threads: Vec::with_capacity(threads),
        };
        for t in 0..threads {
            let (stop, copied, ready) = (Arc::clone(&stop), Arc::clone(&copied), Arc::clone(&ready));
            let handle = thread::Builder::new().name(format!("ram-load-{t}")).spawn(move || {
                let mut a = vec![t as u8; buffer_bytes];
                let mut b = vec![!(t as u8); buffer_bytes];
                ready.fetch_add(1, Ordering::Release);
                while !stop.load(Ordering::Relaxed) {
                    b.copy_from_slice(&a);
                    std::mem::swap(&mut a, &mut b);
                    copied.fetch_add(buffer_bytes as u64, Ordering::Relaxed);
                }
                std::hint::black_box((&a, &b));
            })?;
            load.threads.push(handle);
        }
        while ready.load(Ordering::Acquire) < threads {
            thread::sleep(std::time::Duration::from_millis(1));
        }
        copied.store(0, Ordering::Relaxed);
        load.started = Instant::now();
        Ok(load)
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
