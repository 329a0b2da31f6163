//! How long a small allocation waits while another thread faults in a
//! large one: populated in one call (holding the process's memory-map lock
//! throughout) against the pool allocator's chunked populate.
//!
//! ```text
//! cargo run --release -p pinprove-mem --example populate_contention [GIB] [ROUNDS]
//! ```
//!
//! Prints, per way and round, the large allocation's time and the small
//! (16 MiB) allocations made meanwhile on another thread: count, median and
//! worst latency, with the machine's kernel and core count.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pinprove_mem::{HeapAllocator, HostAllocator, HostMemory, MIB};

const SMALL: usize = 16 * MIB;

/// A way of making the large allocation.
type Large = Box<dyn FnOnce() + Send>;
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Maps `len` bytes, advised huge, populated in one `madvise` call; unmaps.
fn populate_whole(len: usize) {
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing; only this function uses it, and it unmaps exactly it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap of {len} bytes");
        libc::madvise(p, len, libc::MADV_HUGEPAGE);
        if libc::madvise(p, len, MADV_POPULATE_WRITE) != 0 {
            eprintln!("this kernel has no MADV_POPULATE_WRITE: nothing to compare");
            std::process::exit(1);
        }
        libc::munmap(p, len);
    }
}

/// Runs `large` on a thread while this one allocates small buffers until
/// it ends; returns its time and the small allocations' latencies.
fn measure(large: Large) -> (Duration, Vec<Duration>) {
    let heap: Arc<dyn HostAllocator> = Arc::new(HeapAllocator::default());
    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let big = std::thread::spawn(move || {
        let t = Instant::now();
        large();
        flag.store(true, Ordering::Release);
        t.elapsed()
    });
    std::thread::sleep(Duration::from_millis(20));
    let mut small = Vec::new();
    while !done.load(Ordering::Acquire) {
        let t = Instant::now();
        drop(HostMemory::allocate(&heap, SMALL).expect("a small allocation"));
        small.push(t.elapsed());
    }
    (big.join().expect("the large allocation"), small)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let gib: usize = args.next().map_or(4, |a| a.parse().expect("GIB: a whole number"));
    let rounds: usize = args.next().map_or(3, |a| a.parse().expect("ROUNDS: a whole number"));
    let len = gib << 30;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!(
        "populate contention: {gib} GiB faulted in on one thread, {} MiB allocations on another; Linux {}, {} cores",
        SMALL / MIB,
        kernel.trim(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for round in 1..=rounds {
        let ways: [(&str, Large); 2] = [
            ("one call", Box::new(move || populate_whole(len))),
            (
                "pool allocator (chunked)",
                Box::new(move || {
                    let heap: Arc<dyn HostAllocator> = Arc::new(HeapAllocator::default());
                    drop(HostMemory::allocate(&heap, len).expect("the large allocation"));
                }),
            ),
        ];
        for (way, large) in ways {
            let (took, mut small) = measure(large);
            small.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let median = small.get(small.len() / 2).copied().unwrap_or_default();
            let worst = small.last().copied().unwrap_or_default();
            println!(
                "round {round}, {way:>24}: large {:.3} s; {} small allocations meanwhile, median {:.1} ms, worst {:.1} ms",
                took.as_secs_f64(),
                small.len(),
                ms(median),
                ms(worst),
            );
        }
    }
}
