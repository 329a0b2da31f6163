//! `pinprove-bench shape`: counting a Filecoin circuit's shape from its
//! blank form (what synthetic parameters of a size without a measured shape
//! are made from), timed, and checked against the measured production shape
//! where there is one. A PoSt circuit counts its sectors on every core.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use pinprove_filecoin::{ProofKind, kind, production, synthetic};
use pinprove_groth16::shape::CircuitShape;
use serde::Serialize;

use crate::report::{Host, Output};

#[derive(Args, Debug)]
pub struct ShapeArgs {
    /// The proof kind (porep, snap, wpost, winning).
    #[arg(long, default_value = "wpost")]
    kind: ProofKind,
    /// The sector size.
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "2KiB")]
    sector_size: u64,
    #[command(flatten)]
    output: Output,
}

#[derive(Serialize)]
struct ShapeReport {
    benchmark: &'static str,
    host: Host,
    circuit: String,
    threads: usize,
    counted_s: f64,
    shape: CircuitShape,
    /// Whether the count equals the measured production shape (`None`: no
    /// measured shape for this circuit).
    equals_production: Option<bool>,
}

pub fn run(args: &ShapeArgs) -> Result<()> {
    let circuit = kind::circuit_id(args.kind, args.sector_size)?;
    let t = Instant::now();
    let shape = synthetic::circuit_shape(args.kind, args.sector_size)?;
    let report = ShapeReport {
        benchmark: "shape",
        host: Host::detect(),
        threads: rayon::current_num_threads(),
        counted_s: t.elapsed().as_secs_f64(),
        equals_production: production::shape_of(&circuit).map(|p| p == shape),
        circuit,
        shape,
    };
    args.output.emit(&report, |r| {
        println!("pinprove-bench shape — {}", r.host.summary());
        println!(
            "  {}: counted in {:.1} s on {} threads: {:?}",
            r.circuit, r.counted_s, r.threads, r.shape
        );
        match r.equals_production {
            Some(true) => println!("  equal to the measured production shape"),
            Some(false) => println!("  DIFFERENT from the measured production shape"),
            None => println!("  (no measured production shape to compare with)"),
        }
    })
}
