//! `pinprove-bench prove`: our prover against bellperson's on the same
//! circuit, parameters, r and s.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::Bls12;
use clap::{Args, ValueEnum};
use ff::Field;
use pinprove_groth16::circuits::BenchCircuit;
use pinprove_groth16::{Backend, CapacityHints, ProofBatch, Srs, Validation, synthesize};
use pinprove_mem::PinnedPool;
use pinprove_stack::{BackendKind, DeviceSelection, Stack, StackConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::builtin::CircuitArgs;
use crate::params_cache::{ParamsKind, params_file};
use crate::reference;
use crate::report::{Host, Output, dur, median};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Reference {
    /// bellperson 0.27's CPU prover.
    Bellperson,
}

#[derive(Args, Debug)]
pub struct ProveArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Which prover to measure (GPU backends need a GPU build).
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    backend: BackendKind,
    /// GPUs to measure, one after another: "all" or ordinals such as 0,1
    /// (GPU backends; one report each).
    #[arg(long, default_value = "0")]
    devices: DeviceSelection,
    /// Also run this prover on the same inputs and compare.
    #[arg(long, value_enum)]
    compare: Option<Reference>,
    /// Timed proofs per prover (after one warm-up); medians are reported.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Parameter file; generated (and cached in --params-dir) when absent.
    #[arg(long)]
    params: Option<PathBuf>,
    /// Where generated parameters are cached.
    #[arg(long)]
    params_dir: Option<PathBuf>,
    #[command(flatten)]
    output: Output,
}

#[derive(Serialize, Default)]
struct Medians {
    total_s: f64,
    synthesis_s: f64,
    fft_s: f64,
    msm_s: f64,
}

#[derive(Serialize)]
struct ProveReport {
    benchmark: &'static str,
    host: Host,
    backend: &'static str,
    device: String,
    circuit: String,
    constraints: usize,
    params: String,
    params_load_s: f64,
    reps: usize,
    ours: Medians,
    bellperson_total_s: Option<f64>,
    speedup_vs_bellperson: Option<f64>,
    verified: bool,
    identical_to_bellperson: Option<bool>,
}

pub fn run(args: &ProveArgs) -> Result<()> {
    anyhow::ensure!(args.reps > 0, "--reps must be positive");
    let circuit = args.circuit.build()?;
    let path = params_file(
        &circuit,
        args.params.as_deref(),
        args.params_dir.as_deref(),
        ParamsKind::Real,
    )?;

    let stack = Stack::build(&StackConfig {
        backend: args.backend,
        devices: args.devices.clone(),
        ..StackConfig::default()
    })?;
    let pool = Arc::clone(&stack.pool);
    let t = Instant::now();
    let srs = Arc::new(Srs::read_file(&path, &pool, Validation::OnCurve)?);
    let read = t.elapsed();
    let vk = reference::read_vk(&path)?;
    let theirs_params = match args.compare {
        Some(Reference::Bellperson) => Some(reference::read(&path)?),
        None => None,
    };
    for device in &stack.devices {
        let backend = device.backend.as_ref();
        let t = Instant::now();
        backend.prepare_srs(&srs)?;
        let params_load = read + t.elapsed();
        let report = measure(args, &circuit, &pool, &srs, (&vk, theirs_params.as_ref()), backend)?;
        let report = ProveReport {
            device: device.id.to_string(),
            params: crate::report::file_name(&path),
            params_load_s: params_load.as_secs_f64(),
            ..report
        };
        args.output.emit(&report, print).context("reporting")?;
    }
    Ok(())
}

/// Times `args.reps` proofs of `circuit` on `backend` (after a warm-up),
/// each verified with `keys.0` and, given bellperson's parameters in
/// `keys.1`, compared with bellperson's proof on the same r and s.
fn measure(
    args: &ProveArgs,
    circuit: &BenchCircuit,
    pool: &Arc<PinnedPool>,
    srs: &Arc<Srs>,
    keys: (&VerifyingKey<Bls12>, Option<&Parameters<Bls12>>),
    backend: &dyn Backend,
) -> Result<ProveReport> {
    let (vk, theirs_params) = keys;
    let id = circuit.id();
    let hints = CapacityHints::in_memory();
    let layout = backend.capabilities().abc_layout;
    let inputs = circuit.public_inputs();
    let mut rng = ChaCha8Rng::seed_from_u64(42);

    let (mut total, mut synth, mut fft, mut msm, mut theirs_t) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut verified, mut identical) = (true, true);
    for rep in 0..=args.reps {
        let (r, s) = (blstrs::Scalar::random(&mut rng), blstrs::Scalar::random(&mut rng));
        let t0 = Instant::now();
        let (asg, _) = synthesize(circuit.clone(), &id, pool, &hints, layout, None)?;
        let t1 = Instant::now();
        let started = backend.start(ProofBatch::new(Arc::clone(srs), vec![asg], vec![(r, s)]))?;
        let t2 = Instant::now();
        let proof = started.finish()?.remove(0).to_bytes();
        let t3 = Instant::now();
        verified &= reference::verify(vk, &proof, &inputs)?;
        let theirs = match theirs_params {
            Some(p) => {
                let t = Instant::now();
                let bytes = reference::prove(circuit.clone(), p, r, s)?;
                let e = t.elapsed();
                identical &= bytes == proof;
                Some(e)
            }
            None => None,
        };
        if rep == 0 {
            continue; // warm-up: learns the capacity hint, fills the pool
        }
        total.push(t3 - t0);
        synth.push(t1 - t0);
        fft.push(t2 - t1);
        msm.push(t3 - t2);
        theirs_t.extend(theirs);
    }
    if !verified {
        bail!("a proof did not verify");
    }
    let ours = Medians {
        total_s: median(&mut total).as_secs_f64(),
        synthesis_s: median(&mut synth).as_secs_f64(),
        fft_s: median(&mut fft).as_secs_f64(),
        msm_s: median(&mut msm).as_secs_f64(),
    };
    let theirs_total = (!theirs_t.is_empty()).then(|| median(&mut theirs_t).as_secs_f64());
    Ok(ProveReport {
        benchmark: "prove",
        host: Host::detect(),
        backend: backend.name(),
        device: String::new(),
        circuit: id,
        constraints: circuit.constraints(),
        params: String::new(),
        params_load_s: 0.0,
        reps: args.reps,
        speedup_vs_bellperson: theirs_total.map(|t| t / ours.total_s),
        ours,
        bellperson_total_s: theirs_total,
        verified,
        identical_to_bellperson: theirs_params.map(|_| identical),
    })
}

fn print(r: &ProveReport) {
    let d = |s: f64| dur(Duration::from_secs_f64(s));
    println!("pinprove-bench prove — {}", r.host.summary());
    println!(
        "{} ({} constraints), params {} (loaded in {})",
        r.circuit,
        r.constraints,
        r.params,
        d(r.params_load_s)
    );
    println!(
        "  {} backend on {}: {} per proof (synthesis {}, FFT part {}, MSM part {}), median of {}",
        r.backend,
        r.device,
        d(r.ours.total_s),
        d(r.ours.synthesis_s),
        d(r.ours.fft_s),
        d(r.ours.msm_s),
        r.reps
    );
    if let Some(t) = r.bellperson_total_s {
        println!(
            "  bellperson: {} per proof (synthesis included); pinprove is {:.2}× as fast",
            d(t),
            r.speedup_vs_bellperson.unwrap_or(0.0)
        );
    }
    println!("  verified: {}", r.verified);
    if let Some(i) = r.identical_to_bellperson {
        println!("  identical to bellperson (same r, s): {i}");
    }
}
