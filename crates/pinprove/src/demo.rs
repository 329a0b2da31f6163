//! `pinprove demo`: the memory layer at work on embedded defaults.
//!
//! Three rounds of "synthesis" write a/b/c vectors the way the prover will:
//! the first round knows no sizes and grows its vectors (spills), later
//! rounds use the sizes learned from the first as capacity hints and reuse
//! the pool's buffers, with no spill, no copy and no allocation.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use pinprove_mem::{BudgetConfig, MemoryBudget, PinnedPool, PinnedVec, PoolConfig, default_allocator};

use crate::report::{bytes, dur};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Constraints per round (each writes three 32-byte evaluations).
    #[arg(long, default_value_t = 1 << 21)]
    constraints: usize,
    /// Rounds to run.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

type Scalar = [u64; 4];

pub fn run(args: &DemoArgs) -> Result<()> {
    anyhow::ensure!(
        args.rounds > 0 && args.constraints > 0,
        "rounds and constraints must be positive"
    );
    let budget = MemoryBudget::from_config(&BudgetConfig::default());
    let pool = PinnedPool::new(default_allocator(), Arc::clone(&budget), PoolConfig::default());
    println!(
        "memory budget {} (auto: usable memory less a safety margin); pool buffers are {} memory",
        bytes(budget.total()),
        pool.kind()
    );

    let mut hint: Option<usize> = None;
    for round in 1..=args.rounds {
        let before = pool.stats();
        let t = Instant::now();
        let make = || -> Result<PinnedVec<Scalar>> {
            Ok(match hint {
                Some(n) => PinnedVec::with_capacity_in(n, &pool)?,
                None => PinnedVec::new_in(&pool),
            })
        };
        let (mut a, mut b, mut c) = (make()?, make()?, make()?);
        for i in 0..args.constraints as u64 {
            a.try_push([i, 1, 0, 0])?;
            b.try_push([i ^ 0xff, 2, 0, 0])?;
            c.try_push([i.wrapping_mul(i ^ 0xff), 3, 0, 0])?;
        }
        let elapsed = t.elapsed();
        let spills = a.spills() + b.spills() + c.spills();
        let copied = a.bytes_copied() + b.bytes_copied() + c.bytes_copied();
        hint = Some(a.len());
        let held = budget.used();
        drop((a, b, c));
        let after = pool.stats();
        println!(
            "round {round}: {} constraints in {} ({}), spills {spills}, copied {}, \
             pool reuse hits {}, fresh buffers {}, budget used while held {}",
            args.constraints,
            dur(elapsed),
            if round == 1 { "no hint" } else { "hinted" },
            bytes(copied),
            after.reuse_hits - before.reuse_hits,
            after.fresh_allocations - before.fresh_allocations,
            bytes(held)
        );
    }
    let s = pool.stats();
    println!(
        "pool now: {} idle in {} buffers, {} checked out; {} spent allocating",
        bytes(s.idle_bytes),
        s.idle_buffers,
        bytes(s.checked_out_bytes),
        dur(s.alloc_time)
    );
    Ok(())
}
