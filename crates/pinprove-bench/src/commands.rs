//! The measurements `pinprove-bench` makes.

use anyhow::Result;
use clap::Subcommand;

use crate::{circuit_params, day, filecoin, gpu, h2d, mem, msm, params, pipeline, prove, shape, synth};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// PinnedVec against Vec, pool reuse against fresh allocation, budget
    /// acquire/release latency.
    Mem(mem::MemArgs),
    /// Host-to-device upload bandwidth from pageable heap, pool buffers and
    /// cudaHostRegister'ed memory, idle and with RAM under load (needs the
    /// `cuda` feature and a GPU).
    H2d(h2d::H2dArgs),
    /// The upload experiment: one partition end to end and the GPU proof
    /// alone, with a/b/c in heap memory, staged into pinned memory, or
    /// synthesized into pinned memory; idle and with synthesis running
    /// beside it (needs the `cuda` feature and a GPU).
    Gpu(gpu::GpuArgs),
    /// The MSM kernels alone: G1 and G2 at 2^20 to 2^27, random and
    /// Filecoin-like scalars, resident and streamed bases, in points per
    /// second; every result checked against its known value (needs the
    /// `cuda` feature and a GPU).
    Msm(msm::MsmArgs),
    /// Synthesis into pool buffers, with and without a capacity hint, against
    /// plain growing Vecs: wall time, spills, bytes copied, peak RSS.
    Synth(synth::SynthArgs),
    /// Jobs of partitions through the whole engine: proofs per hour, how busy
    /// the backend stays, per-phase medians, peak RSS against the budget.
    Pipeline(Box<pipeline::PipelineArgs>),
    /// A whole proof with a backend, optionally against bellperson's prover
    /// on the same circuit, parameters, r and s.
    Prove(prove::ProveArgs),
    /// A Filecoin proof kind through the engine against filecoin-proofs'
    /// own prover on the same inputs (a sealed sample sector).
    Filecoin(filecoin::FilecoinArgs),
    /// A storage provider's day in minutes, from synthetic inputs: a PoRep
    /// stream, a WindowPoSt partition every few minutes and a WinningPoSt
    /// every half minute through one engine; each PoSt's latency, the
    /// stream's rate, parameter loads, GPU memory after every proof.
    Day(day::DayArgs),
    /// pinprove's Groth16 setup against bellperson's generator on a Filecoin
    /// circuit of a test size, from the same seed: both times, their ratio,
    /// and whether the files are byte-identical.
    Params(params::ParamsArgs),
    /// A Filecoin circuit's shape counted from its blank form (a PoSt's
    /// sectors on every core): the time, and whether it equals the measured
    /// production shape.
    Shape(shape::ShapeArgs),
    /// Not a measurement: parameter files for the built-in circuits, real
    /// or synthetic, written where asked.
    #[command(subcommand)]
    CircuitParams(circuit_params::CircuitParamsCommand),
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Mem(args) => mem::run(&args),
        BenchCommand::H2d(args) => h2d::run(&args),
        BenchCommand::Msm(args) => msm::run(&args),
        BenchCommand::Synth(args) => synth::run(&args),
        BenchCommand::Gpu(args) => gpu::run(&args),
        BenchCommand::Prove(args) => prove::run(&args),
        BenchCommand::Pipeline(args) => pipeline::run(&args),
        BenchCommand::Filecoin(args) => filecoin::run(&args),
        BenchCommand::Params(args) => params::run(&args),
        BenchCommand::Day(args) => day::run(&args),
        BenchCommand::Shape(args) => shape::run(&args),
        BenchCommand::CircuitParams(cmd) => circuit_params::run(&cmd),
    }
}
