//! `pinprove demo`: a real proof on embedded defaults.
//!
//! Generates Groth16 parameters for a built-in circuit (bellperson's
//! generator, in memory), then proves it twice with the CPU backend: the
//! first synthesis learns the circuit's sizes, the second is sized by that
//! capacity hint and writes straight into reused pool buffers with no spill
//! and no copy. Each proof is checked with bellperson's verifier and
//! compared byte for byte with bellperson's prover.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, ensure};
use clap::Args;
use ff::Field;
use pinprove_engine::assembly::{BackendKind, Stack, StackConfig};
use pinprove_groth16::{CapacityHints, ProvingJob, Srs, Validation, synthesize};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::builtin::{Builtin, CircuitArgs};
use crate::reference;
use crate::report::{bytes, dur};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Constraints of the demo circuit (accepts 2^k).
    #[arg(long, value_parser = crate::builtin::parse_count, default_value = "2^12")]
    constraints: usize,
    /// The built-in circuit.
    #[arg(long, value_enum, default_value_t = Builtin::BenchBits)]
    circuit: Builtin,
}

pub fn run(args: &DemoArgs) -> Result<()> {
    let circuit = CircuitArgs {
        circuit: args.circuit,
        constraints: args.constraints,
        inputs: 4,
    }
    .build()?;
    let id = circuit.id();
    let stack = Stack::build(&StackConfig {
        backend: BackendKind::Cpu,
        ..StackConfig::default()
    })?;
    let (budget, pool) = (&stack.budget, &stack.pool);
    println!(
        "pinprove demo: {id}; memory budget {}, pool buffers are {} memory",
        bytes(budget.total()),
        pool.kind()
    );

    let t = Instant::now();
    let params = reference::generate(circuit.clone(), 1)?;
    let mut file = Vec::new();
    params.write(&mut file)?;
    let srs = Arc::new(Srs::from_bytes(&file, pool, Validation::Subgroup)?);
    println!(
        "parameters: {} generated and checked in {}",
        bytes(file.len() as u64),
        dur(t.elapsed())
    );

    let backend = stack.devices[0].backend.as_ref();
    let hints = CapacityHints::in_memory();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for round in 1..=2 {
        let (r, s) = (blstrs::Scalar::random(&mut rng), blstrs::Scalar::random(&mut rng));
        let before = pool.stats();
        let t0 = Instant::now();
        let (asg, stats) = synthesize(
            circuit.clone(),
            &id,
            pool,
            &hints,
            backend.capabilities().abc_layout,
            None,
        )?;
        let t1 = Instant::now();
        let proof = backend
            .prove(ProvingJob {
                srs: Arc::clone(&srs),
                assignments: vec![asg],
                randomness: vec![(r, s)],
            })?
            .remove(0)
            .to_bytes();
        let t2 = Instant::now();
        let after = pool.stats();
        let verified = reference::verify(&params.vk, &proof, &circuit.public_inputs())?;
        let identical = reference::prove(circuit.clone(), &params, r, s)? == proof;
        println!(
            "proof {round}: synthesis {} ({}; spills {}, copied {}), proving {}; \
             pool reuse hits {}, fresh buffers {}; verified {verified}, identical to bellperson {identical}",
            dur(t1 - t0),
            if stats.hinted { "hinted" } else { "no hint yet" },
            stats.spills,
            bytes(stats.bytes_copied),
            dur(t2 - t1),
            after.reuse_hits - before.reuse_hits,
            after.fresh_allocations - before.fresh_allocations,
        );
        ensure!(verified && identical, "the demo proof is wrong");
    }
    Ok(())
}
