//! `pinprove-bench params`: pinprove's setup against bellperson's generator
//! on one Filecoin circuit, in one process, from the same seed.
//!
//! Both files are written to a scratch directory and compared byte for
//! byte (the same toxic waste must make the same file), then removed.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use clap::Args;
use pinprove_filecoin::ProofKind;
use pinprove_filecoin::params::Generator;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::report::{Host, Output, bytes, dur};

#[derive(Args, Debug)]
pub struct ParamsArgs {
    /// The proof kind (porep, snap, wpost, winning).
    #[arg(long, default_value = "porep")]
    kind: ProofKind,
    /// A test sector size: 2KiB, 8MiB or 512MiB.
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "2KiB")]
    sector_size: u64,
    /// Seed of both setups' toxic waste.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time pinprove's setup alone (bellperson's takes minutes per circuit
    /// on a small machine).
    #[arg(long)]
    skip_reference: bool,
    /// Where the files are written while they are compared (default: the
    /// system's temporary directory).
    #[arg(long)]
    scratch: Option<PathBuf>,
    #[command(flatten)]
    output: Output,
}

#[derive(Serialize)]
struct ParamsResult {
    bench: &'static str,
    host: Host,
    kind: String,
    sector_bytes: u64,
    file_bytes: u64,
    pinprove_s: f64,
    bellperson_s: Option<f64>,
    /// bellperson's time over pinprove's.
    speedup: Option<f64>,
    identical: Option<bool>,
}

pub fn run(args: &ParamsArgs) -> Result<()> {
    let host = Host::detect();
    eprintln!(
        "bench params: {} parameters for {} sectors, seed {} ({} cores, {})",
        args.kind.name(),
        bytes(args.sector_size),
        args.seed,
        host.cores,
        host.cpu
    );
    let dir = args.scratch.clone().unwrap_or_else(std::env::temp_dir);
    let ours_path = dir.join(format!("pinprove-bench-params-{}.ours", std::process::id()));
    let theirs_path = dir.join(format!("pinprove-bench-params-{}.bellperson", std::process::id()));
    let result = (|| {
        let ours = timed(args, Generator::Pinprove, &ours_path)?;
        eprintln!("pinprove:   {} in {}", bytes(len(&ours_path)?), dur(ours));
        let theirs = if args.skip_reference {
            None
        } else {
            let t = timed(args, Generator::Bellperson, &theirs_path)?;
            eprintln!("bellperson: {} in {}", bytes(len(&theirs_path)?), dur(t));
            Some(t)
        };
        let identical = theirs.map(|_| same_bytes(&ours_path, &theirs_path)).transpose()?;
        let speedup = theirs.map(|t| t.as_secs_f64() / ours.as_secs_f64());
        let result = ParamsResult {
            bench: "params",
            host,
            kind: args.kind.name().to_string(),
            sector_bytes: args.sector_size,
            file_bytes: len(&ours_path)?,
            pinprove_s: ours.as_secs_f64(),
            bellperson_s: theirs.map(|t| t.as_secs_f64()),
            speedup,
            identical,
        };
        args.output.emit(&result, |r| {
            println!(
                "{} {} parameters ({}) on {} cores: pinprove {:.1} s",
                r.kind,
                bytes(r.sector_bytes),
                bytes(r.file_bytes),
                r.host.cores,
                r.pinprove_s
            );
            if let (Some(b), Some(x), Some(same)) = (r.bellperson_s, r.speedup, r.identical) {
                println!(
                    "bellperson {b:.1} s: pinprove's setup is {x:.1}x faster; the files are {}",
                    if same { "byte-identical" } else { "DIFFERENT" }
                );
            }
        })?;
        ensure!(identical != Some(false), "the same seed made different parameter files");
        Ok(())
    })();
    let _ = std::fs::remove_file(&ours_path);
    let _ = std::fs::remove_file(&theirs_path);
    result
}

fn timed(args: &ParamsArgs, generator: Generator, path: &Path) -> Result<Duration> {
    let mut w = BufWriter::with_capacity(
        8 << 20,
        File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let t = Instant::now();
    pinprove_filecoin::write_test_parameters(args.kind, args.sector_size, generator, &mut rng, &mut w, &|_| {})?;
    std::io::Write::flush(&mut w)?;
    Ok(t.elapsed())
}

fn len(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path)?.len())
}

fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    use std::io::Read;
    if len(a)? != len(b)? {
        return Ok(false);
    }
    let (mut fa, mut fb) = (File::open(a)?, File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 8 << 20], vec![0u8; 8 << 20]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(true);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}
