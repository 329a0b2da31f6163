//! `pinprove params …`

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use clap::{Args, Subcommand, ValueEnum};
use pinprove_groth16::{Srs, Validation};
use pinprove_mem::{BudgetConfig, MemoryBudget, PoolConfig};
use pinprove_stack::PoolMemory;

use pinprove_filecoin::{ParamCache, ProofKind};

use crate::progress::Generation;
use pinprove::units::{bytes, dur};

#[derive(Subcommand, Debug)]
pub enum ParamsCommand {
    /// Generate Filecoin's parameters of a test sector size into the
    /// parameter cache (every kind, or those named), where missing: a
    /// one-party setup with fresh randomness (pinprove's own, in
    /// bellperson's file format). The network's sizes are fetched, never
    /// generated.
    Generate(GenerateArgs),
    /// Read a parameter file, check it, and print its sections.
    Info(InfoArgs),
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// The test sector size (2KiB, 8MiB or 512MiB), made where missing in
    /// the parameter cache (FIL_PROOFS_PARAMETER_CACHE).
    #[arg(long, value_parser = pinprove_mem::parse_bytes)]
    sector_size: u64,
    /// The proof kinds (porep, snap, wpost, winning; default all four).
    #[arg(long, value_delimiter = ',')]
    kind: Vec<ProofKind>,
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
        ParamsCommand::Generate(args) => filecoin(args.sector_size, &args.kind),
        ParamsCommand::Info(args) => info(&args),
    }
}

/// Makes the missing parameters of `kinds` (all when empty) at a test size.
fn filecoin(sector_bytes: u64, kinds: &[ProofKind]) -> Result<()> {
    ensure!(
        sector_bytes < pinprove_filecoin::params::GENERATED_BELOW,
        "parameters of {} sectors are the network's: fetch them (paramfetch), they are never generated",
        bytes(sector_bytes)
    );
    let cache = ParamCache::from_env().with_progress(Arc::new(Generation::default()));
    let kinds = if kinds.is_empty() { &ProofKind::ALL[..] } else { kinds };
    for &kind in kinds {
        let t = Instant::now();
        let (path, made) = pinprove_filecoin::ensure_parameters(&cache, kind, sector_bytes)
            .with_context(|| format!("{} parameters for {} sectors", kind.name(), bytes(sector_bytes)))?;
        println!(
            "{} {}: {} ({}, {})",
            kind.name(),
            bytes(sector_bytes),
            path.display(),
            bytes(std::fs::metadata(&path)?.len()),
            if made {
                format!("made in {}", dur(t.elapsed()))
            } else {
                "there already".to_string()
            }
        );
    }
    Ok(())
}

fn info(args: &InfoArgs) -> Result<()> {
    let validation = match args.check {
        Check::Curve => Validation::OnCurve,
        Check::Subgroup => Validation::Subgroup,
    };
    let budget = MemoryBudget::from_config(&BudgetConfig::default());
    let pool = pinprove_stack::pool(&budget, PoolMemory::Auto, Default::default(), PoolConfig::default())?;
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
