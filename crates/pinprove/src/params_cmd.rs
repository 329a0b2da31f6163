//! `pinprove params …`

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use pinprove_engine::assembly::{self, PoolMemory};
use pinprove_groth16::{Srs, Validation};
use pinprove_mem::{BudgetConfig, MemoryBudget, PoolConfig};

use crate::builtin::CircuitArgs;
use crate::reference;
use crate::report::{bytes, dur};

#[derive(Subcommand, Debug)]
pub enum ParamsCommand {
    /// Generate real Groth16 parameters for a built-in circuit (bellperson's
    /// generator; the file is in bellperson's format).
    Generate(GenerateArgs),
    /// Write synthetic parameters of the right shape for a built-in circuit:
    /// valid points ((i+1)·G), fast to make, for benchmarks of sizes a real
    /// setup cannot reach. Proofs made with them do not verify.
    Synthetic(GenerateArgs),
    /// Read a parameter file, check it, and print its sections.
    Info(InfoArgs),
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Where to write the parameters.
    #[arg(long)]
    out: PathBuf,
    /// Seed of the setup's toxic waste (tests and benchmarks only).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Check {
    /// Points decode and lie on the curve.
    Curve,
    /// Also in the prime-order subgroup (slow: for files of unknown origin).
    Subgroup,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// The parameter file.
    file: PathBuf,
    /// How thoroughly to check the points.
    #[arg(long, value_enum, default_value_t = Check::Subgroup)]
    check: Check,
}

pub fn run(cmd: ParamsCommand) -> Result<()> {
    match cmd {
        ParamsCommand::Generate(args) => generate(&args),
        ParamsCommand::Synthetic(args) => synthetic(&args),
        ParamsCommand::Info(args) => info(&args),
    }
}

fn generate(args: &GenerateArgs) -> Result<()> {
    let circuit = args.circuit.build()?;
    let t = Instant::now();
    let params = reference::generate(circuit.clone(), args.seed)?;
    let generated = t.elapsed();
    crate::params_cache::write_real(&params, &args.out)?;
    let size = std::fs::metadata(&args.out)?.len();
    println!(
        "wrote {} ({}) for {} in {} (generation)",
        args.out.display(),
        bytes(size),
        circuit.id(),
        dur(generated)
    );
    Ok(())
}

fn synthetic(args: &GenerateArgs) -> Result<()> {
    let circuit = args.circuit.build()?;
    let t = Instant::now();
    let size = crate::params_cache::write_synthetic(&circuit, &args.out)?;
    println!(
        "wrote {} ({}) for {} in {} (synthetic: proofs made with it do not verify)",
        args.out.display(),
        bytes(size),
        circuit.id(),
        dur(t.elapsed())
    );
    Ok(())
}

fn info(args: &InfoArgs) -> Result<()> {
    let validation = match args.check {
        Check::Curve => Validation::OnCurve,
        Check::Subgroup => Validation::Subgroup,
    };
    let budget = MemoryBudget::from_config(&BudgetConfig::default());
    let pool = assembly::pool(&budget, PoolMemory::Auto, Default::default(), PoolConfig::default())?;
    let srs =
        Srs::read_file(&args.file, &pool, validation).with_context(|| format!("checking {}", args.file.display()))?;
    let s = srs.stats();
    println!(
        "{}: valid ({validation:?} checks), {} on disk, {} decoded, read in {}",
        args.file.display(),
        bytes(s.file_bytes),
        bytes(s.memory_bytes),
        dur(s.load_time)
    );
    println!("  public inputs (ic)  {}", srs.vk().ic.len());
    println!(
        "  h                   {}  (domain 2^{})",
        srs.lengths().h,
        (srs.lengths().h + 1).trailing_zeros()
    );
    println!("  l (aux variables)   {}", srs.lengths().l);
    println!("  a                   {}", srs.lengths().a);
    println!("  b_g1 / b_g2         {} / {}", srs.lengths().b_g1, srs.lengths().b_g2);
    Ok(())
}
