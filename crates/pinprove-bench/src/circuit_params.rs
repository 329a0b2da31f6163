//! `pinprove-bench circuit-params`: parameter files for the built-in
//! circuits the benchmarks prove, real or synthetic, written where asked.
//! (The benchmarks make their own on first use, in their cache; this is
//! for a file of one's own.)

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use pinprove_filecoin::ProofKind;

use crate::builtin::CircuitArgs;
use crate::params_cache::{write_atomically, write_real, write_synthetic};
use crate::report::{bytes, dur};

#[derive(Subcommand, Debug)]
pub enum CircuitParamsCommand {
    /// Real Groth16 parameters for a built-in circuit: pinprove's one-party
    /// setup from --seed's toxic waste, the file bellperson's generator
    /// makes from the same seed.
    Generate(GenerateArgs),
    /// Synthetic parameters of the right shape for a built-in circuit:
    /// valid points ((i+1)·G), fast to make, for sizes a real setup cannot
    /// reach. Proofs made with them do not verify.
    Synthetic(SyntheticArgs),
    /// Synthetic parameters at a Filecoin circuit's shape (measured at
    /// 32 GiB, counted before for other sizes), in Filecoin's file format:
    /// what a provider's host reads at start (45 GiB for PoRep, 60 GiB for
    /// WindowPoSt), for timing loads from disk. Proofs made with them do
    /// not verify.
    Filecoin(FilecoinFileArgs),
}

#[derive(Args, Debug)]
pub struct FilecoinFileArgs {
    /// porep, snap, wpost or winning.
    #[arg(long)]
    kind: ProofKind,
    /// The sector size: 32GiB's shapes are built in, other sizes' are read
    /// from the shape cache (counted by an earlier `filecoin` or `day` run).
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "32GiB")]
    sector_size: u64,
    /// Where counted shapes are kept (default: pinprove's cache directory).
    #[arg(long)]
    shape_cache: Option<PathBuf>,
    /// Where to write the parameters.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Where to write the parameters.
    #[arg(long)]
    out: PathBuf,
    /// Seed of the toxic waste (benchmarks and tests only).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args, Debug)]
pub struct SyntheticArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Where to write the parameters.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(cmd: &CircuitParamsCommand) -> Result<()> {
    match cmd {
        CircuitParamsCommand::Generate(args) => {
            let circuit = args.circuit.build()?;
            let t = Instant::now();
            let stats = write_real(&circuit, args.seed, &args.out)?;
            println!(
                "wrote {} ({}) for {} in {} ({} constraints)",
                args.out.display(),
                bytes(stats.bytes),
                circuit.id(),
                dur(t.elapsed()),
                stats.constraints
            );
        }
        CircuitParamsCommand::Synthetic(args) => {
            let circuit = args.circuit.build()?;
            let t = Instant::now();
            let size = write_synthetic(&circuit, &args.out)?;
            println!(
                "wrote {} ({}) for {} in {} (synthetic: proofs made with it do not verify)",
                args.out.display(),
                bytes(size),
                circuit.id(),
                dur(t.elapsed())
            );
        }
        CircuitParamsCommand::Filecoin(args) => {
            let id = pinprove_filecoin::kind::circuit_id(args.kind, args.sector_size)?;
            let cache = pinprove_filecoin::shapes::ShapeCache::new(
                args.shape_cache
                    .clone()
                    .unwrap_or_else(crate::params_cache::pinprove_cache_dir),
            );
            let shape = pinprove_filecoin::production::shape_of(&id)
                .or_else(|| cache.get(&id))
                .with_context(|| {
                    format!("{id}: no shape (32GiB's are built in; count another size's with a `day` or `filecoin` run first)")
                })?;
            let t = Instant::now();
            write_atomically(&args.out, |w| {
                Ok(pinprove_groth16::synthetic::write_synthetic_params(&shape, w)?)
            })?;
            println!(
                "wrote {} ({}) for {id} in {} (synthetic: proofs made with it do not verify)",
                args.out.display(),
                bytes(shape.file_bytes()),
                dur(t.elapsed())
            );
        }
    }
    Ok(())
}
