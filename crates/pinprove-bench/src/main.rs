//! `pinprove-bench`: the measurements behind docs/benchmarks.md, apart from
//! the product binary. Each command prints what it measured and on what
//! machine (`--json` for one JSON object, `--json-out` to keep it).

mod baseline;
mod budget_watch;
mod builtin;
mod circuit_params;
mod commands;
mod day;
mod filecoin;
mod filecoin_synthetic;
mod gpu;
mod h2d;
#[cfg(feature = "cuda")]
mod load;
mod mem;
mod msm;
mod params;
mod params_cache;
mod pipeline;
mod prove;
mod reference;
mod report;
mod shape;
mod synth;
mod utilization;

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(name = "pinprove-bench", version, long_about = None)]
/// Measure pieces of the prover and print what was measured, on what.
struct Cli {
    #[command(subcommand)]
    command: commands::BenchCommand,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let run = || {
        pinprove::logging::init("info", false)?;
        commands::run(cli.command)
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
