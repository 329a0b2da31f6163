//! `pinprove-bench mem`: PinnedVec against Vec, pool reuse against fresh
//! allocation, budget latency.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use pinprove_mem::{MemoryBudget, PinnedPool, PinnedVec, PoolConfig};
use pinprove_stack::PoolMemory;
use serde::Serialize;

use crate::report::{Host, Output, bytes, dur, gbps, median, quantile_sorted};

#[derive(Args, Debug)]
pub struct MemArgs {
    /// Elements pushed per run (32 bytes each, the size of a scalar).
    #[arg(long, default_value_t = 1 << 24)]
    elements: usize,
    /// Runs per variant; the median is reported.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Buffer size for the pool reuse measurement, in MiB.
    #[arg(long, default_value_t = 256)]
    pool_mib: usize,
    /// Threads contending for the budget.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    #[command(flatten)]
    output: Output,
}

/// A 32-byte element, like a BLS12-381 scalar.
type Elem = [u64; 4];

#[inline(always)]
fn elem(i: u64) -> Elem {
    [i, i ^ 0x9e37_79b9_7f4a_7c15, i.wrapping_mul(3), !i]
}

#[derive(Serialize)]
struct PushRow {
    variant: &'static str,
    median_s: f64,
    melem_per_s: f64,
    gb_per_s: f64,
    spills: u32,
}

#[derive(Serialize)]
struct PoolResult {
    memory_kind: String,
    buffer_bytes: u64,
    fresh_checkout_median_s: f64,
    free_median_s: f64,
    reuse_checkout_median_s: f64,
    speedup: f64,
}

#[derive(Serialize)]
struct BudgetRow {
    scenario: String,
    threads: usize,
    ops: u64,
    ns_per_op_throughput: f64,
    p50_ns: f64,
    p99_ns: f64,
    max_ns: f64,
}

#[derive(Serialize)]
struct MemReport {
    benchmark: &'static str,
    host: Host,
    elements: usize,
    element_bytes: usize,
    reps: usize,
    push: Vec<PushRow>,
    extend: Vec<PushRow>,
    pinned_vs_vec_with_capacity: f64,
    pool: PoolResult,
    budget: Vec<BudgetRow>,
}

pub fn run(args: &MemArgs) -> Result<()> {
    anyhow::ensure!(
        args.reps > 0 && args.elements > 0 && args.threads > 0,
        "sizes and counts must be positive"
    );
    let host = Host::detect();
    // Sizes from the command line: checked, never wrapped.
    let too_big = || anyhow::anyhow!("--elements and --pool-mib are too large for this machine's address space");
    let data_bytes = (args.elements as u64).checked_mul(32).ok_or_else(too_big)?;
    let pool_bytes = (args.pool_mib as u64).checked_mul(4 << 20).ok_or_else(too_big)?;
    let total = data_bytes
        .checked_mul(8)
        .and_then(|b| b.max(1 << 32).checked_add(pool_bytes))
        .ok_or_else(too_big)?;
    anyhow::ensure!(
        args.threads <= pinprove_engine::MAX_THREADS,
        "--threads {} is more than {} threads",
        args.threads,
        pinprove_engine::MAX_THREADS
    );
    let budget = MemoryBudget::new(total);
    let pool = pinprove_stack::pool(&budget, PoolMemory::Auto, Default::default(), PoolConfig::default())?;

    let (push, extend) = push_and_extend(args, &pool)?;
    let with_cap = push
        .iter()
        .find(|r| r.variant == "vec_with_capacity_reused")
        .expect("row exists");
    let pinned = push
        .iter()
        .find(|r| r.variant == "pinned_vec_hinted")
        .expect("row exists");
    let ratio = pinned.median_s / with_cap.median_s;
    let pool_result = pool_reuse(args, &pool)?;
    let budget_rows = budget_latency(args.threads)?;

    let report = MemReport {
        benchmark: "mem",
        host,
        elements: args.elements,
        element_bytes: 32,
        reps: args.reps,
        push,
        extend,
        pinned_vs_vec_with_capacity: ratio,
        pool: pool_result,
        budget: budget_rows,
    };
    args.output.emit(&report, print_summary)
}

fn time_reps(reps: usize, mut f: impl FnMut() -> Result<u32>) -> Result<(Duration, u32)> {
    let mut samples = Vec::with_capacity(reps);
    let mut spills = 0;
    for _ in 0..reps {
        let t = Instant::now();
        spills = f()?;
        samples.push(t.elapsed());
    }
    Ok((median(&mut samples), spills))
}

fn row(variant: &'static str, (d, spills): (Duration, u32), n: usize) -> PushRow {
    PushRow {
        variant,
        median_s: d.as_secs_f64(),
        melem_per_s: n as f64 / d.as_secs_f64() / 1e6,
        gb_per_s: gbps((n * 32) as u64, d),
        spills,
    }
}

fn push_and_extend(args: &MemArgs, pool: &Arc<PinnedPool>) -> Result<(Vec<PushRow>, Vec<PushRow>)> {
    let n = args.elements;
    let reps = args.reps;
    // Warm the pool so that hinted runs reuse a buffer, as they do in a
    // prover that has seen the circuit before.
    drop(PinnedVec::<Elem>::with_capacity_in(n, pool)?);

    let mut push = Vec::new();
    push.push(row(
        "vec_new",
        time_reps(reps, || {
            let mut v = Vec::new();
            for i in 0..n as u64 {
                v.push(elem(i));
            }
            black_box(&v);
            Ok(0)
        })?,
        n,
    ));
    push.push(row(
        "vec_with_capacity_fresh",
        time_reps(reps, || {
            let mut v = Vec::with_capacity(n);
            for i in 0..n as u64 {
                v.push(elem(i));
            }
            black_box(&v);
            Ok(0)
        })?,
        n,
    ));
    let mut reused: Vec<Elem> = Vec::with_capacity(n);
    reused.resize(n, [0; 4]);
    push.push(row(
        "vec_with_capacity_reused",
        time_reps(reps, || {
            reused.clear();
            for i in 0..n as u64 {
                reused.push(elem(i));
            }
            black_box(&reused);
            Ok(0)
        })?,
        n,
    ));
    push.push(row(
        "pinned_vec_hinted",
        time_reps(reps, || {
            let mut v = PinnedVec::<Elem>::with_capacity_in(n, pool)?;
            for i in 0..n as u64 {
                v.push(elem(i));
            }
            black_box(&v);
            Ok(v.spills())
        })?,
        n,
    ));
    push.push(row(
        "pinned_vec_unhinted",
        time_reps(reps, || {
            let mut v = PinnedVec::<Elem>::new_in(pool);
            for i in 0..n as u64 {
                v.push(elem(i));
            }
            black_box(&v);
            Ok(v.spills())
        })?,
        n,
    ));

    const CHUNK: usize = 1024;
    let chunk: Vec<Elem> = (0..CHUNK as u64).map(elem).collect();
    let rounds = n / CHUNK;
    let mut extend = Vec::new();
    extend.push(row(
        "vec_with_capacity_reused",
        time_reps(reps, || {
            reused.clear();
            for _ in 0..rounds {
                reused.extend_from_slice(black_box(&chunk));
            }
            black_box(&reused);
            Ok(0)
        })?,
        rounds * CHUNK,
    ));
    extend.push(row(
        "pinned_vec_hinted",
        time_reps(reps, || {
            let mut v = PinnedVec::<Elem>::with_capacity_in(n, pool)?;
            for _ in 0..rounds {
                v.extend_from_slice(black_box(&chunk));
            }
            black_box(&v);
            Ok(v.spills())
        })?,
        rounds * CHUNK,
    ));
    drop(reused);
    pool.clear_idle();
    Ok((push, extend))
}

fn pool_reuse(args: &MemArgs, pool: &Arc<PinnedPool>) -> Result<PoolResult> {
    let size = args.pool_mib << 20;
    let mut fresh = Vec::new();
    let mut frees = Vec::new();
    for _ in 0..args.reps {
        pool.clear_idle();
        let t = Instant::now();
        let b = pool.try_checkout(size).context("fresh checkout")?;
        fresh.push(t.elapsed());
        drop(b);
        let t = Instant::now();
        pool.clear_idle();
        frees.push(t.elapsed());
    }
    drop(pool.try_checkout(size)?);
    let mut reuse = Vec::new();
    for _ in 0..1000 {
        let t = Instant::now();
        let b = pool.try_checkout(size)?;
        reuse.push(t.elapsed());
        drop(black_box(b));
    }
    let fresh_m = median(&mut fresh);
    let reuse_m = median(&mut reuse);
    pool.clear_idle();
    Ok(PoolResult {
        memory_kind: pool.kind().to_string(),
        buffer_bytes: size as u64,
        fresh_checkout_median_s: fresh_m.as_secs_f64(),
        free_median_s: median(&mut frees).as_secs_f64(),
        reuse_checkout_median_s: reuse_m.as_secs_f64(),
        speedup: fresh_m.as_secs_f64() / reuse_m.as_secs_f64(),
    })
}

/// Acquire-and-release round trips: uncontended, then `threads` threads at
/// once with room for all (lock contention only), then with room for a
/// quarter of them (requests queue and wait).
fn budget_latency(threads: usize) -> Result<Vec<BudgetRow>> {
    let mut rows = Vec::new();
    const OPS: u64 = 200_000;
    let budget = MemoryBudget::new(1 << 40);
    let mut samples = Vec::with_capacity(OPS as usize);
    let t = Instant::now();
    for _ in 0..OPS {
        let s = Instant::now();
        let r = budget.try_acquire(4096).expect("fits");
        drop(black_box(r));
        samples.push(s.elapsed());
    }
    rows.push(budget_row("uncontended try_acquire", 1, OPS, t.elapsed(), samples));

    let fit_at_once = (threads / 4).max(1) as u64;
    for (scenario, total, per_op) in [
        (format!("{threads} threads, ample budget"), 1u64 << 40, 4096u64),
        (
            format!("{threads} threads, room for {fit_at_once}"),
            fit_at_once << 20,
            1 << 20,
        ),
    ] {
        let per_thread = 20_000u64;
        let budget = MemoryBudget::new(total);
        let go = Arc::new(AtomicBool::new(false));
        // A thread that cannot start ends the measurement with an error,
        // after the ones started have run (they wait for `go`).
        let mut handles = Vec::with_capacity(threads);
        let mut failed = None;
        for i in 0..threads {
            let (budget, go) = (Arc::clone(&budget), Arc::clone(&go));
            let spawned = thread::Builder::new().name(format!("budget-{i}")).spawn(move || {
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let mut samples = Vec::with_capacity(per_thread as usize);
                for _ in 0..per_thread {
                    let s = Instant::now();
                    let r = budget.acquire_blocking(per_op).expect("fits");
                    drop(black_box(r));
                    samples.push(s.elapsed());
                }
                samples
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let t = Instant::now();
        go.store(true, Ordering::Release);
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| anyhow::anyhow!("a budget thread panicked"))?);
        }
        if let Some(e) = failed {
            return Err(anyhow::Error::new(e).context("starting the budget threads"));
        }
        rows.push(budget_row(
            &scenario,
            threads,
            per_thread * threads as u64,
            t.elapsed(),
            all,
        ));
    }
    Ok(rows)
}

fn budget_row(scenario: &str, threads: usize, ops: u64, wall: Duration, mut samples: Vec<Duration>) -> BudgetRow {
    samples.sort();
    BudgetRow {
        scenario: scenario.to_string(),
        threads,
        ops,
        ns_per_op_throughput: wall.as_nanos() as f64 / ops as f64,
        p50_ns: quantile_sorted(&samples, 0.5).as_nanos() as f64,
        p99_ns: quantile_sorted(&samples, 0.99).as_nanos() as f64,
        max_ns: samples.last().copied().unwrap_or_default().as_nanos() as f64,
    }
}

fn print_summary(r: &MemReport) {
    println!("pinprove-bench mem — {}", r.host.summary());
    println!(
        "\npush of {} elements of 32 bytes ({}), median of {} runs:",
        r.elements,
        bytes((r.elements * 32) as u64),
        r.reps
    );
    for row in &r.push {
        println!(
            "  {:<26} {:>11}  {:>8.1} Melem/s  {:>6.2} GB/s  spills {}",
            row.variant,
            dur(Duration::from_secs_f64(row.median_s)),
            row.melem_per_s,
            row.gb_per_s,
            row.spills
        );
    }
    println!("extend_from_slice in chunks of 1024:");
    for row in &r.extend {
        println!(
            "  {:<26} {:>11}  {:>8.1} Melem/s  {:>6.2} GB/s  spills {}",
            row.variant,
            dur(Duration::from_secs_f64(row.median_s)),
            row.melem_per_s,
            row.gb_per_s,
            row.spills
        );
    }
    println!(
        "  hinted PinnedVec / reused Vec with capacity: {:.3} (target ≤ 1.10)",
        r.pinned_vs_vec_with_capacity
    );
    let p = &r.pool;
    println!(
        "\npool checkout of {} ({} memory): fresh {} (free {}), reused {}: {:.0}× faster",
        bytes(p.buffer_bytes),
        p.memory_kind,
        dur(Duration::from_secs_f64(p.fresh_checkout_median_s)),
        dur(Duration::from_secs_f64(p.free_median_s)),
        dur(Duration::from_secs_f64(p.reuse_checkout_median_s)),
        p.speedup
    );
    println!("\nbudget acquire + release:");
    for b in &r.budget {
        println!(
            "  {:<34} {:>8.0} ns/op  p50 {:>7.0} ns  p99 {:>9.0} ns  max {:>11.0} ns",
            b.scenario, b.ns_per_op_throughput, b.p50_ns, b.p99_ns, b.max_ns
        );
    }
}
