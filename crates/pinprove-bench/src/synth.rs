//! `pinprove-bench synth`: synthesis into pool buffers (with and without a
//! capacity hint) against synthesis into plain growing `Vec`s.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::baseline::VecAssignment;
use anyhow::Result;
use clap::Args;
use pinprove_groth16::{AbcLayout, CapacityHints, synthesize};
use pinprove_mem::{BudgetConfig, MemoryBudget, PoolConfig, sys};
use pinprove_stack::PoolMemory;
use serde::Serialize;

use crate::builtin::CircuitArgs;
use crate::report::{Host, Output, bytes, dur, median};

#[derive(Args, Debug)]
pub struct SynthArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Rounds of timed runs (each round runs every variant once); medians
    /// are reported.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    #[command(flatten)]
    output: Output,
}

#[derive(Serialize)]
struct Row {
    variant: &'static str,
    median_s: f64,
    spills: u32,
    bytes_copied: u64,
    /// Peak resident memory during one run, above what was resident before
    /// it (a warmed pool's idle buffers included in the base).
    peak_rss_growth_bytes: Option<u64>,
}

#[derive(Serialize)]
struct SynthReport {
    benchmark: &'static str,
    host: Host,
    circuit: String,
    constraints: usize,
    memory_kind: String,
    reps: usize,
    rows: Vec<Row>,
    hinted_pool_vs_vec: f64,
}

pub fn run(args: &SynthArgs) -> Result<()> {
    anyhow::ensure!(args.reps > 0, "--reps must be positive");
    let circuit = args.circuit.build()?;
    let id = circuit.id();
    let budget = MemoryBudget::from_config(&BudgetConfig::default());
    let pool = pinprove_stack::pool(&budget, PoolMemory::Auto, Default::default(), PoolConfig::default())?;
    let hints = CapacityHints::in_memory();
    type Run<'a> = Box<dyn Fn() -> Result<(u32, u64)> + 'a>;
    let variants: Vec<(&'static str, Run)> = vec![
        (
            "pool, hinted",
            Box::new(|| {
                let (asg, stats) = synthesize(circuit.clone(), &id, &pool, &hints, AbcLayout::Exact, None)?;
                black_box(&asg);
                Ok((stats.spills, stats.bytes_copied))
            }),
        ),
        (
            "pool, no hint",
            Box::new(|| {
                // A new hint store each time: the first synthesis of a circuit type.
                let fresh = CapacityHints::in_memory();
                let (asg, stats) = synthesize(circuit.clone(), &id, &pool, &fresh, AbcLayout::Exact, None)?;
                black_box(&asg);
                Ok((stats.spills, stats.bytes_copied))
            }),
        ),
        (
            "vec (growing heap vectors)",
            Box::new(|| {
                let cs = VecAssignment::synthesize(circuit.clone())?;
                black_box(&cs);
                Ok((0, 0))
            }),
        ),
    ];

    // Memory: one run of each variant alone, after a warm-up (which also
    // teaches the hint), peak measured above the resident set before it.
    let mut rows = Vec::new();
    for (name, run) in &variants {
        pool.clear_idle();
        run()?;
        let growth = sys::PeakGrowth::start();
        let (spills, bytes_copied) = run()?;
        rows.push(Row {
            variant: name,
            median_s: 0.0,
            spills,
            bytes_copied,
            peak_rss_growth_bytes: growth.bytes(),
        });
    }
    // Time: rounds that run every variant once, in rotating order, so that a
    // machine whose speed drifts slows all variants alike.
    let mut times = vec![Vec::new(); variants.len()];
    for round in 0..args.reps {
        for k in 0..variants.len() {
            let v = (round + k) % variants.len();
            let t = Instant::now();
            variants[v].1()?;
            times[v].push(t.elapsed());
        }
    }
    for (row, t) in rows.iter_mut().zip(&mut times) {
        row.median_s = median(t).as_secs_f64();
    }

    let hinted = rows[0].median_s;
    let vec = rows[2].median_s;
    let report = SynthReport {
        benchmark: "synth",
        host: Host::detect(),
        circuit: id.clone(),
        constraints: circuit.constraints(),
        memory_kind: pool.kind().to_string(),
        reps: args.reps,
        rows,
        hinted_pool_vs_vec: hinted / vec,
    };
    args.output.emit(&report, |r| {
        println!("pinprove-bench synth — {}", r.host.summary());
        println!(
            "{} ({} constraints), pool memory {}, median of {} interleaved rounds:",
            r.circuit, r.constraints, r.memory_kind, r.reps
        );
        for row in &r.rows {
            println!(
                "  {:<28} {:>11}  spills {:>3}  copied {:>10}  peak RSS growth {}",
                row.variant,
                dur(Duration::from_secs_f64(row.median_s)),
                row.spills,
                bytes(row.bytes_copied),
                row.peak_rss_growth_bytes.map(bytes).unwrap_or_else(|| "?".into())
            );
        }
        println!("  hinted pool / vec: {:.3} (target ≤ 1.0)", r.hinted_pool_vs_vec);
    })
}
