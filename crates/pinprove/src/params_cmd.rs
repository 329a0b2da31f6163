//! `pinprove params …`

use std::path::PathBuf;
use std::time::Instant;

use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use clap::{Args, Subcommand, ValueEnum};
use pinprove_groth16::{Srs, Validation};
use pinprove_mem::{BudgetConfig, MemoryBudget, PoolConfig};
use pinprove_stack::PoolMemory;

use pinprove_filecoin::{ParamCache, ProofKind};

use crate::progress::Generation;
use pinprove::builtin::CircuitArgs;
use pinprove::units::{bytes, dur};

#[derive(Subcommand, Debug)]
pub enum ParamsCommand {
    /// Generate real Groth16 parameters: with --sector-size, Filecoin's
    /// parameters of a test sector size into the parameter cache (every
    /// kind, or those named); else a built-in circuit's into --out. A
    /// one-party setup with fresh randomness (pinprove's own, in
    /// bellperson's file format).
    Generate(GenerateArgs),
    /// Write synthetic parameters of the right shape for a built-in circuit:
    /// valid points ((i+1)·G), fast to make, for benchmarks of sizes a real
    /// setup cannot reach. Proofs made with them do not verify.
    Synthetic(SyntheticArgs),
    /// Read a parameter file, check it, and print its sections.
    Info(InfoArgs),
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Filecoin parameters of this test sector size (2KiB, 8MiB or
    /// 512MiB), made where missing in the parameter cache
    /// (FIL_PROOFS_PARAMETER_CACHE).
    #[arg(long, value_parser = pinprove_mem::parse_bytes, conflicts_with = "out")]
    sector_size: Option<u64>,
    /// With --sector-size: the proof kinds (porep, snap, wpost, winning;
    /// default all four).
    #[arg(long, value_delimiter = ',', requires = "sector_size")]
    kind: Vec<ProofKind>,
    #[command(flatten)]
    circuit: CircuitArgs,
    /// A built-in circuit's parameters: where to write them.
    #[arg(long, required_unless_present = "sector_size")]
    out: Option<PathBuf>,
    /// Seed of a built-in circuit's toxic waste (tests and benchmarks only:
    /// Filecoin parameters always take fresh randomness).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Arguments of `synthetic`: a built-in circuit and where its file goes.
#[derive(Args, Debug)]
pub struct SyntheticArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Where to write the parameters.
    #[arg(long)]
    out: PathBuf,
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
    if let Some(sector_bytes) = args.sector_size {
        return filecoin(sector_bytes, &args.kind);
    }
    let out = args.out.as_deref().context("--out names the file")?;
    let circuit = args.circuit.build()?;
    let t = Instant::now();
    let stats = pinprove::params_cache::write_real(&circuit, args.seed, out)?;
    println!(
        "wrote {} ({}) for {} in {} ({} constraints)",
        out.display(),
        bytes(stats.bytes),
        circuit.id(),
        dur(t.elapsed()),
        stats.constraints
    );
    Ok(())
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

fn synthetic(args: &SyntheticArgs) -> Result<()> {
    let circuit = args.circuit.build()?;
    let t = Instant::now();
    let size = pinprove::params_cache::write_synthetic(&circuit, &args.out)?;
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
