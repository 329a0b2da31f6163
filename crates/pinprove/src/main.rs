//! `pinprove`: the one binary.

mod bench;
mod builtin;
mod demo;
mod params_cache;
mod params_cmd;
mod reference;
mod report;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(name = "pinprove", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the main job on embedded defaults: for now a demonstration of the
    /// memory layer (pool reuse, zero-spill vectors, the budget).
    Demo(demo::DemoArgs),
    /// Measure pieces of the prover and print what was measured, on what.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Groth16 parameter files: generate them for built-in circuits, check them.
    #[command(subcommand)]
    Params(params_cmd::ParamsCommand),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("PINPROVE_LOG").unwrap_or_else(|_| EnvFilter::new("info,bellperson=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Params(cmd) => params_cmd::run(cmd),
    }
}
