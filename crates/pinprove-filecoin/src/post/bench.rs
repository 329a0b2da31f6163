//! Speed of the direct WindowPoSt witness at 32 GiB, release mode, by hand:
//! `cargo test --release -p pinprove-filecoin --lib post::bench -- --ignored --nocapture`.
//!
//! A whole partition (2349 sectors, 125 M constraints) does not fit a small
//! machine's memory once recorded, so the first `PINPROVE_BENCH_SECTORS`
//! sectors (default 48) of the synthetic 32 GiB partition are timed: on
//! one core into a buffer already faulted in (the time per sector and per
//! value, comparable with the PoRep witness's: `bench_..._one_core`), and
//! through the engine's own path (`synthesize_witness_parts` into pool
//! buffers, from a recording of the same sectors: `bench_..._engine`) on
//! one thread and on all of rayon's.

use std::sync::Arc;
use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_proofs::SectorShape32GiB;
use pinprove_groth16::precompiled::{record_parts, synthesize_witness_parts};
use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};
use storage_proofs_post::fallback::Sector;

use super::{circuit, common};
use crate::direct::post::SectorWitness;
use crate::direct::tests::Recorder;
use crate::prepared::Checks;
use crate::{ProofKind, synthetic};

/// CPU seconds this process has used (user and system; Linux, in clock
/// ticks of 10 ms), to tell a slow run from one that lacked cores on a
/// busy machine.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 12th and 13th of them.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

/// The first `PINPROVE_BENCH_SECTORS` (default `default`) sectors of the
/// synthetic 32 GiB WindowPoSt partition: their direct witnesses and real
/// circuits, and the partition's sector count.
fn sectors_of_32gib_partition(default: usize) -> (Vec<SectorWitness>, Vec<Sector<SectorShape32GiB>>, usize) {
    let sectors: usize = std::env::var("PINPROVE_BENCH_SECTORS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let req = synthetic::request(ProofKind::WindowPoSt, 32 << 30, 5).unwrap();
    let c = common(&req, Checks { vanilla: false }).unwrap();
    let p = circuit::<SectorShape32GiB>(&c, &req.vanilla_proofs).unwrap();
    let mut witness = p.witness.unwrap();
    let mut real = p.circuit.sectors;
    let total = witness.len();
    let sectors = sectors.clamp(1, total);
    witness.truncate(sectors);
    real.truncate(sectors);
    (witness, real, total)
}

/// The witness of one sector (`PINPROVE_BENCH_SECTORS` sectors) once, for
/// instruction counts:
/// `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*one_pass*' <test binary>
/// post::bench::instructions --ignored --exact`.
#[test]
#[ignore = "for callgrind: run by hand"]
fn instructions() {
    let (witness, _, _) = sectors_of_32gib_partition(1);
    // Poseidon's constants and the gadgets' constraint counts are made on
    // first use, outside the pass counted.
    let mut cs = Recorder::default();
    witness[0].synthesize(&mut cs).unwrap();
    cs = Recorder::default();
    one_pass(&witness, &mut cs);
    println!("{} sectors, {} aux values", witness.len(), cs.aux.len());
}

#[inline(never)]
fn one_pass(witness: &[SectorWitness], cs: &mut Recorder) {
    for s in witness {
        s.synthesize(&mut *cs).unwrap();
    }
}

/// The median and the fastest of `runs` timings of `f`, in seconds (on a
/// busy machine the fastest is the one least disturbed).
fn timed(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0])
}

/// One core, into a buffer faulted in already (as pool buffers are).
#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn bench_window_post_witness_one_core() {
    let (witness, _, total) = sectors_of_32gib_partition(48);
    let sectors = witness.len();
    let mut cs = Recorder::default();
    one_pass(&witness, &mut cs);
    let aux = cs.aux.len();
    let (median, fastest) = timed(5, || {
        cs.inputs.clear();
        cs.aux.clear();
        cs.constraints = 0;
        one_pass(&witness, &mut cs);
    });
    println!(
        "32 GiB WindowPoSt, {sectors} of {total} sectors: {aux} aux values, {} constraints; one core: median \
         {median:.3} s, fastest {fastest:.3} s: {:.2} ms per sector, {:.1} ns per aux value; a whole partition \
         {:.1} s of one core",
        cs.constraints,
        fastest / sectors as f64 * 1e3,
        fastest / aux as f64 * 1e9,
        fastest / sectors as f64 * total as f64,
    );
}

/// The engine's path: `synthesize_witness_parts` into pool buffers sized
/// by a recording of the same sectors, every sector a part, on one thread
/// and on all of rayon's.
#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn bench_window_post_witness_engine() {
    let (witness, real, total) = sectors_of_32gib_partition(48);
    let sectors = witness.len();
    let t = Instant::now();
    let recording = record_parts(&real, "bench-wpost-32g-prefix").unwrap();
    println!("recorded {sectors} sectors in {:.1} s", t.elapsed().as_secs_f64());
    let aux = recording.num_aux();
    let pool = PinnedPool::new(
        Arc::new(HeapAllocator::default()),
        MemoryBudget::new(4 * (aux as u64 + 1024) * 32),
        PoolConfig::default(),
    );
    let threads = rayon::current_num_threads();
    let engine = |pool_threads: usize| {
        let run = || {
            let values = synthesize_witness_parts(&witness, &recording, &pool, None).unwrap();
            assert_eq!(values.aux.len(), aux);
            assert_ne!(values.aux[aux - 1], Fr::ZERO);
        };
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(pool_threads)
            .build()
            .unwrap();
        // The first run allocates the pool's buffers.
        threads.install(run);
        let (cpu, wall) = (cpu_s(), Instant::now());
        let (median, _) = threads.install(|| timed(5, run));
        (median, (cpu_s() - cpu) / wall.elapsed().as_secs_f64())
    };
    let (one, _) = engine(1);
    let (all, busy) = engine(threads);
    println!(
        "synthesize_witness_parts: 1 thread {one:.3} s ({:.2} ms per sector), {threads} threads {all:.3} s \
         ({:.2}x, {busy:.2} cores busy on average); a whole partition on {threads} threads {:.2} s",
        one / sectors as f64 * 1e3,
        one / all,
        all / sectors as f64 * total as f64,
    );
}
