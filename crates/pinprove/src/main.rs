//! `pinprove`: the one binary.

mod demo;
mod params_cmd;
mod progress;
mod prove_cmd;
mod remote;
mod selftest;
mod serve;
mod status_cmd;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use pinprove::logging;

#[derive(Parser)]
#[command(name = "pinprove", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Real 2 KiB Filecoin proofs end to end with nothing configured: seal a
    /// sector, prove a WindowPoSt and a WinningPoSt through a daemon in this
    /// process, verify them (`--all`: PoRep and SnapDeals too).
    Demo(demo::DemoArgs),
    /// Run the daemon Curio points at (the cuzk.v1 gRPC service).
    Serve(serve::ServeArgs),
    /// Prove one Filecoin proof from files, through a daemon or in this
    /// process.
    Prove(Box<prove_cmd::ProveArgs>),
    /// What a daemon is doing: queues, GPUs, parameters, memory.
    Status(status_cmd::StatusArgs),
    /// Checks a new host: its memory, its GPUs (kernels supported, PCIe
    /// link, uploads from pinned and heap memory), and one proof of each
    /// Filecoin kind verified by filecoin-proofs-api.
    Selftest(selftest::SelftestArgs),
    /// Groth16 parameter files: generate them for built-in circuits, check them.
    #[command(subcommand)]
    Params(params_cmd::ParamsCommand),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    // The daemon logs as its configuration says; the other commands print
    // their results and log only what needs saying (parameter generation).
    let quiet = || logging::init("warn,pinprove_filecoin=info", false);
    match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Demo(args) => {
            quiet()?;
            demo::run(&args)
        }
        Command::Prove(args) => {
            quiet()?;
            prove_cmd::run(&args)
        }
        Command::Selftest(args) => {
            quiet()?;
            selftest::run(&args)
        }
        Command::Status(args) => {
            quiet()?;
            status_cmd::run(&args)
        }
        Command::Params(cmd) => {
            logging::init("info", false)?;
            params_cmd::run(cmd)
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
