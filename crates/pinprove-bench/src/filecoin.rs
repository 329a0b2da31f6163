//! `pinprove-bench filecoin`: one Filecoin proof kind through pinprove's
//! engine against filecoin-proofs' own prover, on the same inputs (a
//! sealed sample sector) in one run, parameters loaded beforehand for both.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use pinprove_engine::{EngineConfig, Phase};
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache, ProofKind, ProofRequest, reference};
use pinprove_stack::{BackendKind, DeviceSelection, Stack, StackConfig};
use serde::Serialize;

use crate::report::{Host, Output, dur, median};

#[derive(Args, Debug)]
pub struct FilecoinArgs {
    /// porep, snap, wpost or winning.
    #[arg(long)]
    kind: ProofKind,
    /// A test sector size: 2KiB, 8MiB or 512MiB (a sample sector is sealed).
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "2KiB")]
    sector_size: u64,
    /// pinprove's backend.
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// GPUs to prove on: "all" or ordinals such as 0,1 (GPU backends).
    #[arg(long, default_value = "all")]
    devices: DeviceSelection,
    /// Timed proofs per prover after one warm-up each; medians are reported.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Measure pinprove alone.
    #[arg(long)]
    no_compare: bool,
    /// Also measure pinprove with pre-compiled synthesis (witness only,
    /// a/b/c evaluated from the circuit's recorded R1CS) on the same inputs:
    /// its warm-up proof records the circuit, the timed ones use it. With
    /// --synthetic-inputs: the first proof runs classically while the
    /// circuit is recorded, the stream starts once the recording is ready
    /// and synthesizes witnesses only (a/b/c computed on the GPU by the
    /// native backend).
    #[arg(long)]
    precompiled: bool,
    /// Synthetic inputs and parameters of the real shape instead of a
    /// sealed sample sector: any sector size (32GiB above all), proofs that
    /// do not verify; no comparison with filecoin-proofs.
    #[arg(long)]
    synthetic_inputs: bool,
    #[command(flatten)]
    synthetic: super::filecoin_synthetic::SyntheticArgs,
    #[command(flatten)]
    output: Output,
}

#[derive(Serialize)]
struct FilecoinReport {
    benchmark: &'static str,
    host: Host,
    kind: &'static str,
    sector_size: u64,
    circuit: String,
    backend: &'static str,
    partitions: usize,
    constraints_per_partition: usize,
    reps: usize,
    /// Seconds to load the parameters (before timing), pinprove.
    params_load_s: f64,
    /// Median wall time of one proof, verification included.
    pinprove_total_s: f64,
    /// Medians over every partition of every timed proof.
    pinprove_synthesis_per_partition_s: f64,
    pinprove_proving_per_partition_s: f64,
    pinprove_verification_s: f64,
    filecoin_proofs_total_s: Option<f64>,
    /// filecoin-proofs' median over pinprove's.
    speedup: Option<f64>,
    /// With `--precompiled`: the same medians with pre-compiled synthesis,
    /// and how many of its partitions really ran pre-compiled.
    precompiled: Option<PrecompiledRun>,
}

#[derive(Serialize)]
struct PrecompiledRun {
    total_s: f64,
    synthesis_per_partition_s: f64,
    proving_per_partition_s: f64,
    partitions_precompiled: u64,
    partitions_timed: usize,
    recording_bytes: u64,
}

/// Medians of `reps` timed proofs (after one warm-up) with one prover.
struct Timed {
    total: Duration,
    synthesis: Duration,
    proving: Duration,
    verification: Option<Duration>,
    partitions: usize,
    params_load: Duration,
}

fn time_pinprove(
    args: &FilecoinArgs,
    req: &ProofRequest,
    circuit: &str,
    precompiled: bool,
) -> Result<(Timed, FilecoinProver)> {
    let stack = Stack::build(&StackConfig {
        backend: args.backend,
        devices: args.devices.clone(),
        ..StackConfig::default()
    })?;
    let engine = stack.engine(EngineConfig {
        precompiled,
        ..EngineConfig::default()
    })?;
    let prover = FilecoinProver::new(
        std::sync::Arc::new(engine),
        ParamCache::from_env(),
        FilecoinOptions::default(),
    );
    prover.register(circuit)?;
    let (_, params_load) = prover.engine().preload_srs(circuit)?;
    let (mut totals, mut synth, mut proving, mut verify) = (vec![], vec![], vec![], vec![]);
    let mut partitions = 0;
    for rep in 0..=args.reps {
        let t = Instant::now();
        let proved = prover.prove(req)?;
        let wall = t.elapsed();
        partitions = proved.partitions.len();
        if rep == 0 {
            // Warm-up: learns the capacity hint, fills the pool, records
            // the circuit when pre-compiled (in the background).
            ensure!(
                prover.engine().wait_quiet(Duration::from_secs(3600)),
                "the engine did not settle after the warm-up proof"
            );
            continue;
        }
        totals.push(wall);
        for p in &proved.partitions {
            synth.push(p.get(Phase::Synthesis));
            proving.push(p.get(Phase::Start) + p.get(Phase::Finish));
        }
        verify.extend(proved.verification);
    }
    Ok((
        Timed {
            total: median(&mut totals),
            synthesis: median(&mut synth),
            proving: median(&mut proving),
            verification: (!verify.is_empty()).then(|| median(&mut verify)),
            partitions,
            params_load,
        },
        prover,
    ))
}

/// The request of `kind` for a sample sector.
fn request(sector: &mut SampleSector, kind: ProofKind, work: &std::path::Path) -> Result<ProofRequest> {
    Ok(match kind {
        ProofKind::PoRep => sector.porep_request(),
        ProofKind::SnapDeals => sector.snap_update(&work.join("update"))?,
        ProofKind::WindowPoSt => {
            // One full partition, as Curio sends it.
            let r = sector.randomness();
            let per_partition = sector.window_post_proof()?.sector_count() as u64;
            let sectors: Vec<u64> = (1..=per_partition).collect();
            sector.window_post_requests(&sectors, r)?.remove(0)
        }
        ProofKind::WinningPoSt => {
            let r = sector.randomness();
            sector.winning_post_request(r)?
        }
    })
}

pub fn run(args: &FilecoinArgs) -> Result<()> {
    if args.synthetic_inputs {
        let report = super::filecoin_synthetic::measure(
            args.kind,
            args.sector_size,
            args.backend,
            &args.devices,
            &args.synthetic,
            args.precompiled,
        )?;
        return args
            .output
            .emit(&report, super::filecoin_synthetic::print)
            .context("reporting");
    }
    ensure!(args.reps > 0, "--reps must be positive");
    ensure!(
        args.sector_size < 32 << 30,
        "bench filecoin seals a sample sector: use a test size (2KiB, 8MiB, 512MiB), or --synthetic-inputs"
    );
    let work = std::env::temp_dir().join(format!("pinprove-bench-filecoin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let result = measure(args, &work);
    let _ = std::fs::remove_dir_all(&work);
    let report = result?;
    args.output.emit(&report, print).context("reporting")
}

fn measure(args: &FilecoinArgs, work: &std::path::Path) -> Result<FilecoinReport> {
    let mut sector = SampleSector::seal(&work.join("sector"), args.sector_size, 1, 1000, 1)?;
    let req = request(&mut sector, args.kind, work)?;
    let circuit = pinprove_filecoin::kind::circuit_id(args.kind, args.sector_size)?;
    let (ours, prover) = time_pinprove(args, &req, &circuit, false)?;
    let backend = prover.engine().status().devices.first().map_or("?", |d| d.backend);
    let partitions = ours.partitions;
    let constraints = prover.engine().hints().get(&circuit).map_or(0, |h| h.constraints);
    // Its parameters and pool go before filecoin-proofs' prover or a second
    // engine takes the machine's memory.
    drop(prover);

    let theirs = if args.no_compare {
        None
    } else {
        let mut times = vec![];
        for rep in 0..=args.reps {
            let t = Instant::now();
            let proof = reference::prove(&req)?;
            let wall = t.elapsed();
            if proof.len() != 192 * partitions {
                bail!("filecoin-proofs made {} bytes, not {partitions} proofs", proof.len());
            }
            if rep > 0 {
                times.push(wall); // the first loads its parameters
            }
        }
        Some(median(&mut times).as_secs_f64())
    };
    let precompiled = if args.precompiled {
        let (t, p) = time_pinprove(args, &req, &circuit, true)?;
        let status = p.engine().status();
        let c = status.synthesis.iter().find(|c| c.circuit_id == circuit);
        Some(PrecompiledRun {
            total_s: t.total.as_secs_f64(),
            synthesis_per_partition_s: t.synthesis.as_secs_f64(),
            proving_per_partition_s: t.proving.as_secs_f64(),
            partitions_precompiled: c.map_or(0, |c| c.precompiled_partitions),
            partitions_timed: t.partitions * args.reps,
            recording_bytes: c.map_or(0, |c| c.recording_bytes),
        })
    } else {
        None
    };
    let params_load = ours.params_load;
    let ours_total = ours.total.as_secs_f64();
    Ok(FilecoinReport {
        benchmark: "filecoin",
        host: Host::detect(),
        kind: args.kind.name(),
        sector_size: args.sector_size,
        circuit,
        backend,
        partitions,
        constraints_per_partition: constraints,
        reps: args.reps,
        params_load_s: params_load.as_secs_f64(),
        pinprove_total_s: ours_total,
        pinprove_synthesis_per_partition_s: ours.synthesis.as_secs_f64(),
        pinprove_proving_per_partition_s: ours.proving.as_secs_f64(),
        pinprove_verification_s: ours.verification.map_or(0.0, |v| v.as_secs_f64()),
        filecoin_proofs_total_s: theirs,
        speedup: theirs.map(|t| t / ours_total),
        precompiled,
    })
}

fn print(r: &FilecoinReport) {
    let d = |s: f64| dur(Duration::from_secs_f64(s));
    println!("pinprove-bench filecoin — {}", r.host.summary());
    println!(
        "{} ({} partitions of {} constraints), parameters loaded beforehand in {}",
        r.circuit,
        r.partitions,
        r.constraints_per_partition,
        d(r.params_load_s)
    );
    println!(
        "  pinprove ({} backend): {} per proof (per partition: synthesis {}, proving {}; verification {}), median of {}",
        r.backend,
        d(r.pinprove_total_s),
        d(r.pinprove_synthesis_per_partition_s),
        d(r.pinprove_proving_per_partition_s),
        d(r.pinprove_verification_s),
        r.reps
    );
    if let (Some(t), Some(x)) = (r.filecoin_proofs_total_s, r.speedup) {
        println!("  filecoin-proofs: {} per proof; pinprove is {x:.2}× as fast", d(t));
    }
    if let Some(p) = &r.precompiled {
        println!(
            "  pinprove pre-compiled: {} per proof (per partition: synthesis {}, {:.2}× the classic one's speed; proving {}); \
             {} of {} timed partitions ran pre-compiled; recording {}",
            d(p.total_s),
            d(p.synthesis_per_partition_s),
            r.pinprove_synthesis_per_partition_s / p.synthesis_per_partition_s,
            d(p.proving_per_partition_s),
            p.partitions_precompiled,
            p.partitions_timed,
            crate::report::bytes(p.recording_bytes)
        );
    }
}
