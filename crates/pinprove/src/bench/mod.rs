//! `pinprove bench …`

use anyhow::Result;
use clap::Subcommand;

mod h2d;
#[cfg(feature = "cuda")]
mod load;
mod mem;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// PinnedVec against Vec, pool reuse against fresh allocation, budget
    /// acquire/release latency.
    Mem(mem::MemArgs),
    /// Host-to-device upload bandwidth from pageable heap, pool buffers and
    /// cudaHostRegister'ed memory, idle and with RAM under load (needs the
    /// `cuda` feature and a GPU).
    H2d(h2d::H2dArgs),
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Mem(args) => mem::run(&args),
        BenchCommand::H2d(args) => h2d::run(&args),
    }
}
