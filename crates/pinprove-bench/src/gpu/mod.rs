//! `pinprove-bench gpu`: the upload experiment.
//!
//! One partition end to end (synthesis + GPU proof), and the GPU proof
//! alone, with a/b/c
//! 1. in pageable heap memory grown during synthesis (the stock path),
//! 2. synthesized into heap memory, then copied into pinned pool buffers
//!    before the GPU call (the "staging memcpy" design),
//! 3. synthesized straight into pinned pool buffers (zero copy),
//!
//! each idle and while other partitions are synthesized on other cores.

use anyhow::Result;
use clap::Args;
use pinprove_stack::BackendKind;

use crate::report::Output;

#[derive(Args, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct GpuArgs {
    /// Circuit sizes as powers of two, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![20u32, 22, 24])]
    log_sizes: Vec<u32>,
    /// Witness mixes, comma-separated (random, bits).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["bits".to_string(), "random".to_string()])]
    mixes: Vec<String>,
    /// Timed proofs per case after one warm-up; medians are reported.
    #[arg(long, default_value_t = 2)]
    reps: usize,
    /// Skip the warm-up proof of each case.
    #[arg(long)]
    no_warmup: bool,
    /// Threads synthesizing other partitions during the busy pass (0 skips
    /// the busy pass).
    #[arg(long, default_value_t = 8)]
    busy_threads: usize,
    /// Run the busy pass only up to this log size (busy synthesis of large
    /// circuits needs much memory).
    #[arg(long, default_value_t = 24)]
    busy_max_log: u32,
    /// Run random-witness circuits only up to this log size (supraseal-c2
    /// computes their B-query G2 MSM on the CPU: tens of seconds at 2^24).
    #[arg(long, default_value_t = 24)]
    random_max_log: u32,
    /// Check GPU proofs against the CPU backend and bellperson up to this
    /// log size (above it, every timed proof is still compared with the
    /// case's first one).
    #[arg(long, default_value_t = 20)]
    check_max_log: u32,
    /// Where synthetic parameters are written (created when missing).
    #[arg(long)]
    params_dir: Option<std::path::PathBuf>,
    /// The GPU backend: supraseal (supraseal-c2) or native (pinprove's own).
    #[arg(long, value_enum, default_value_t = BackendKind::Supraseal)]
    backend: BackendKind,
    /// The GPU to measure, by CUDA ordinal (the native backend; supraseal-c2
    /// picks its GPUs itself).
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also prove every case with this backend from pool buffers: its
    /// median GPU proof time, and whether the two backends' proofs are
    /// byte-identical (same r and s).
    #[arg(long, value_enum)]
    compare: Option<BackendKind>,
    /// After each case, prove this many partitions (synthesized beforehand
    /// into pool buffers) back to back on one thread and report proofs per
    /// second and the mean NVML GPU utilization meanwhile: how busy one
    /// worker alone keeps the GPU (0 skips; pick enough for a few seconds).
    #[arg(long, default_value_t = 0)]
    sustained: usize,
    /// Where a/b/c are synthesized, comma-separated: heap, staged, pinned;
    /// or precompiled (witness only, into pinned buffers, from a recording
    /// made once per case; the native backend computes a/b/c on the GPU).
    #[arg(long, value_delimiter = ',', default_values_t = vec!["heap".to_string(), "staged".to_string(), "pinned".to_string()], value_parser = ["heap", "staged", "pinned", "precompiled"])]
    modes: Vec<String>,
    #[command(flatten)]
    output: Output,
}

#[cfg(not(feature = "cuda"))]
pub fn run(_args: &GpuArgs) -> Result<()> {
    Err(crate::report::needs_gpu_build("`pinprove-bench gpu`"))
}

#[cfg(feature = "cuda")]
pub fn run(args: &GpuArgs) -> Result<()> {
    run::run(args)
}

#[cfg(feature = "cuda")]
mod checks;
#[cfg(feature = "cuda")]
mod run;
#[cfg(feature = "cuda")]
mod sustained;
