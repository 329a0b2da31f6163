//! `pinprove-bench day`: a storage provider's day in minutes, from
//! synthetic inputs and parameters of the real shapes (the proofs do not
//! verify): a PoRep C2 stream, WindowPoSt partitions in bursts as
//! deadlines open (`--wpost-burst`, `--wpost-every`) and WinningPoSts at
//! fixed or random times, all through one engine. It reports
//! each PoSt's latency from submission (parameter loads included), the
//! stream's seconds per proof, how many times each circuit's parameters
//! were loaded, and, when the GPU is read through NVML, its used memory
//! after every proof (which must not creep up over the run).
//!
//! With `--simulate` the same day runs on a virtual clock instead
//! ([`simulate`]): the engine's planner decides, measured costs stand in
//! for the work.

mod costs;
mod simulate;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use pinprove_engine::{EngineConfig, EngineError, JobOutcome};
use pinprove_filecoin::shapes::ShapeCache;
use pinprove_filecoin::{FilecoinProver, ParamCache, ProofKind, ProofRequest, synthetic};
use pinprove_mem::{BudgetConfig, sys};
use pinprove_stack::{BackendKind, DeviceSelection, Stack, StackConfig};
use serde::Serialize;

use crate::report::{Host, Output, bytes};

#[derive(Args, Debug)]
pub struct DayArgs {
    /// How long the day lasts, in minutes (work in flight then finishes).
    #[arg(long, default_value_t = 15.0)]
    minutes: f64,
    /// How long proofs still running when the day ends may take to finish,
    /// in minutes; those still running then are cancelled and counted as
    /// unfinished.
    #[arg(long, default_value_t = 3.0)]
    grace_minutes: f64,
    /// Sector size of every proof.
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "32GiB")]
    sector_size: u64,
    /// PoRep proofs kept in flight (0: no sealing stream).
    #[arg(long, default_value_t = 2)]
    porep_in_flight: usize,
    /// Seconds between WindowPoSt deadlines opening (0: none).
    #[arg(long, default_value_t = 120.0)]
    wpost_every: f64,
    /// WindowPoSt partitions submitted at once when a deadline opens (a
    /// provider's partitions due in one deadline).
    #[arg(long, default_value_t = 1)]
    wpost_burst: usize,
    /// A provider's WindowPoSt partitions per day (24 hours), spread evenly
    /// over the deadlines (`--wpost-every` apart): about 14 for 1 PiB of
    /// 32 GiB sectors, 140 for 10 PiB. Instead of `--wpost-burst`.
    #[arg(long, conflicts_with = "wpost_burst")]
    wpost_per_day: Option<usize>,
    /// Seconds into the day when the first deadline opens.
    #[arg(long, default_value_t = 0.0)]
    wpost_first: f64,
    /// Seconds between WinningPoSts (0: none); with --winning-random, the
    /// mean of random intervals.
    #[arg(long, default_value_t = 30.0)]
    winning_every: f64,
    /// WinningPoSts at random times (a Poisson process of mean interval
    /// --winning-every, from --seed), as elections come.
    #[arg(long)]
    winning_random: bool,
    /// Seed of the random WinningPoSt times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Parameter files of the day's circuits ("porep-32g.params", as
    /// `pinprove-bench circuit-params filecoin` writes them): a kind whose
    /// file is there loads from disk, as on a provider's host, checked as
    /// the daemon checks; the others' synthetic parameters are made in
    /// memory (the report says which).
    #[arg(long)]
    params_dir: Option<std::path::PathBuf>,
    /// The PoRep stream's seconds per proof alone on the same machine
    /// (`pinprove-bench filecoin --stream N`): the report gives the day's
    /// PoRep rate against it.
    #[arg(long)]
    porep_alone_s_per_proof: Option<f64>,
    /// Where capacity hints and circuit recordings persist: a recording
    /// made there before (by another run) is loaded instead of made again.
    #[arg(long)]
    hints_dir: Option<std::path::PathBuf>,
    /// pinprove's backend.
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    backend: BackendKind,
    /// GPUs to prove on: "all" or ordinals.
    #[arg(long, default_value = "all")]
    devices: DeviceSelection,
    /// Memory budget: "auto" or a size such as 95GiB.
    #[arg(long, default_value = "auto")]
    budget: BudgetConfig,
    /// The most memory pinprove takes of each GPU.
    #[arg(long, value_parser = pinprove_mem::parse_bytes)]
    gpu_memory_limit: Option<u64>,
    /// Pieces of proofs queued on one GPU at once.
    #[arg(long, default_value_t = 1)]
    queue_depth: usize,
    /// Parameters loaded before the day starts ("porep,winning"; the rest
    /// load when their first proof comes).
    #[arg(long, value_delimiter = ',', default_value = "winning,porep")]
    preload: Vec<ProofKind>,
    /// Circuits recorded before the day starts, as a daemon that has been
    /// up a while holds them.
    #[arg(long, value_delimiter = ',', default_value = "porep,wpost")]
    record: Vec<ProofKind>,
    /// Record nothing before the day: each circuit is recorded at its first
    /// proof inside it, which that proof then waits for.
    #[arg(long, conflicts_with = "record")]
    no_record: bool,
    /// Write the day's timeline as an SVG chart here (admissions,
    /// parameter loads, syntheses and device work of every proof).
    #[arg(long)]
    timeline: Option<std::path::PathBuf>,
    /// Run the day on a virtual clock: the engine's planner decides, with
    /// the measured 32 GiB costs in place of the work (no GPU, no
    /// parameters, seconds for a day of 24 hours).
    #[arg(long)]
    simulate: bool,
    /// The simulated host's memory (its auto budget follows from it).
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "128GiB", requires = "simulate")]
    host_memory: u64,
    /// The simulated card's memory free to pinprove (device times are those
    /// measured at that much free memory; a 16 GB card: 15 GiB free).
    #[arg(long, value_parser = pinprove_mem::parse_bytes, default_value = "16GB", requires = "simulate")]
    gpu_memory: u64,
    /// Every idea of the planner on: simulated, all of them (otherwise the
    /// engine's rules of this build, and the ideas named by `--ideas`); on
    /// a real backend, those the engine carries out, as the daemon's
    /// `[memory] planner` (a burst window, Critical kinds kept, recordings
    /// evicted after parameters).
    #[arg(long)]
    planned: bool,
    /// Ideas of the planner to turn on in the simulation.
    #[arg(long, value_enum, value_delimiter = ',', requires = "simulate")]
    ideas: Vec<simulate::Idea>,
    /// The simulated loader's speed, in GiB of loaded parameters per
    /// second (measured: 45 GiB of PoRep's in 31.4 s from a cold cache);
    /// for what-ifs.
    #[arg(long, requires = "simulate")]
    load_gib_per_s: Option<f64>,
    /// Simulate a device queue that cuts WindowPoSt partitions into pieces
    /// too, so that a WinningPoSt goes between them (the native backend
    /// cuts background work only).
    #[arg(long, requires = "simulate")]
    urgent_pieces: bool,
    /// Background partitions the simulated planner admits ahead of the
    /// device at once (its policy's own otherwise).
    #[arg(long, requires = "simulate")]
    background_ahead: Option<usize>,
    /// Simulate the day under the engine's rules, each idea alone, every
    /// idea, and every idea but one; print a table.
    #[arg(long, requires = "simulate")]
    each_idea: bool,
    #[command(flatten)]
    output: Output,
}

/// One PoSt: when it was submitted (seconds into the day) and how long it
/// took to its result.
#[derive(Clone, Copy, Debug, Serialize)]
struct Latency {
    at_s: f64,
    took_s: f64,
}

#[derive(Serialize)]
struct DayReport {
    benchmark: &'static str,
    host: Host,
    backend: &'static str,
    sector_size: u64,
    minutes: f64,
    /// Circuits recorded before the day, and the seconds each took.
    recorded_before_s: Vec<(String, f64)>,
    /// PoRep proofs completed, and wall seconds per proof over the day.
    porep_proofs: usize,
    porep_s_per_proof: Option<f64>,
    /// PoRep proofs per hour over the day, and that over the stream's
    /// alone (`--porep-alone-s-per-proof`).
    porep_per_hour: f64,
    porep_of_alone: Option<f64>,
    /// Per circuit: where its parameters came from.
    params_from: Vec<(String, String)>,
    /// Every parameter load in the day: when it started (seconds into the
    /// day) and how long it took, waiting for memory included.
    srs_load_spans: Vec<(String, Latency)>,
    wpost: Vec<Latency>,
    winning: Vec<Latency>,
    /// Proofs cancelled unfinished when the grace after the day ran out.
    unfinished: usize,
    /// Per circuit: times its parameters were loaded.
    srs_loads: Vec<(String, u64)>,
    /// NVML's used memory of the first GPU after each proof, in order.
    gpu_used_after_proofs: Vec<u64>,
    peak_rss_bytes: Option<u64>,
    budget_bytes: u64,
    /// The budget when it was fullest over the day, by holder.
    budget_fullest: crate::budget_watch::BudgetSample,
    /// The share of the day the devices worked: on a real backend, the
    /// time their workers spent in the backend's device step (as
    /// `pinprove_device_busy_seconds_total` counts it) over the day's.
    device_busy: Option<f64>,
    /// Proofs that failed, and those refused (they could never fit).
    failed: usize,
    refused: usize,
    /// What only the simulated day reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    simulated: Option<simulate::Simulated>,
}

/// Submits `req` and waits for its job until `deadline`; seconds it took,
/// or `None` when the deadline came first (the job is then cancelled).
fn prove(prover: &FilecoinProver, req: &ProofRequest, deadline: Instant) -> Result<Option<f64>> {
    let t = Instant::now();
    let sub = prover.submit_prepared(prover.prepare(req)?)?;
    let engine = prover.engine();
    match engine.wait(sub.job, Some(deadline.saturating_duration_since(t))) {
        Ok(JobOutcome::Completed(_)) => Ok(Some(t.elapsed().as_secs_f64())),
        Ok(other) => bail!("{} job {} ended {other:?}", sub.kind, sub.job),
        Err(EngineError::Timeout) => {
            engine.cancel(sub.job)?;
            eprintln!(
                "{} job {} unfinished at the end of the grace: cancelled",
                sub.kind, sub.job
            );
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

pub fn run(args: &DayArgs) -> Result<()> {
    if args.simulate {
        return simulate::run(args);
    }
    let stack = Stack::build(&StackConfig {
        backend: args.backend,
        devices: args.devices.clone(),
        budget: args.budget.clone(),
        native: pinprove_stack::NativeOptions {
            queue_depth: args.queue_depth,
            memory_limit: args.gpu_memory_limit,
            ..Default::default()
        },
        ..StackConfig::default()
    })?;
    let backend = stack.devices[0].backend.name();
    let engine = stack.engine(EngineConfig {
        precompiled: true,
        hints_dir: args.hints_dir.clone(),
        planner: args.planned.then(pinprove_engine::planner::Policy::planned),
        ..EngineConfig::default()
    })?;
    let prover = FilecoinProver::for_synthetic_inputs(
        Arc::new(engine),
        ParamCache::from_env(),
        Some(ShapeCache::new(crate::params_cache::pinprove_cache_dir())),
    );
    let kinds = [ProofKind::PoRep, ProofKind::WindowPoSt, ProofKind::WinningPoSt];
    let mut requests = Vec::new();
    let mut params_from = Vec::new();
    for (seed, kind) in kinds.into_iter().enumerate() {
        let id = pinprove_filecoin::kind::circuit_id(kind, args.sector_size)?;
        prover.register(&id)?;
        let file = args
            .params_dir
            .as_ref()
            .map(|d| d.join(format!("{id}.params")))
            .filter(|f| f.is_file());
        let from = match file {
            Some(f) => {
                prover.engine().register_srs(&id, &f);
                format!("read from {}", f.display())
            }
            None => "made in memory (synthetic, no file)".to_string(),
        };
        eprintln!("{id}: parameters {from}");
        params_from.push((id, from));
        requests.push(synthetic::request(kind, args.sector_size, seed as u64 + 1)?);
    }
    for kind in &args.preload {
        let id = pinprove_filecoin::kind::circuit_id(*kind, args.sector_size)?;
        let (_, took) = prover.engine().preload_srs(&id)?;
        eprintln!("{id}: parameters loaded in {:.1} s", took.as_secs_f64());
    }
    let mut recorded_s = Vec::new();
    let to_record = if args.no_record { &[][..] } else { &args.record[..] };
    for &kind in to_record {
        let Some(at) = kinds.iter().position(|k| *k == kind) else {
            bail!("--record {kind}: the day proves no {kind}");
        };
        let id = pinprove_filecoin::kind::circuit_id(kind, args.sector_size)?;
        let s = crate::filecoin_synthetic::waits::record_ahead(&prover, &requests[at], &id)?;
        eprintln!("{id}: recorded before the day in {s:.1} s");
        recorded_s.push((id, s));
    }
    let [porep, wpost, winning] = [&requests[0], &requests[1], &requests[2]];
    let day = Duration::from_secs_f64(args.minutes * 60.0);
    let watch = crate::budget_watch::BudgetWatch::start(Arc::clone(prover.engine()), Duration::from_millis(250));
    // The devices' busy time so far (recordings made before the day).
    let busy_seconds = || -> f64 { prover.engine().status().devices.iter().map(|d| d.busy_seconds).sum() };
    let busy_before = busy_seconds();
    let start = Instant::now();
    let deadline = start + day + Duration::from_secs_f64(args.grace_minutes * 60.0);
    let unfinished = std::sync::atomic::AtomicUsize::new(0);
    let over = AtomicBool::new(false);
    let gpu_used = Mutex::new(Vec::new());
    // After each proof: the first GPU's used memory, when it is read.
    let note = |what: &str, took: f64| {
        let used = prover
            .engine()
            .status()
            .devices
            .iter()
            .find_map(|d| d.gpu)
            .map(|g| g.memory_used_bytes);
        eprintln!(
            "{:7.1} s: {what} in {took:.2} s{}",
            start.elapsed().as_secs_f64(),
            used.map_or(String::new(), |u| format!("; GPU memory used {}", bytes(u)))
        );
        if let Some(u) = used {
            gpu_used.lock().unwrap().push(u);
        }
    };
    // Proves `req` once, noting its latency (or that it did not finish).
    let one = |req: &ProofRequest, name: &str| -> Result<Option<Latency>> {
        let at_s = start.elapsed().as_secs_f64();
        Ok(match prove(&prover, req, deadline)? {
            Some(took_s) => {
                note(name, took_s);
                Some(Latency { at_s, took_s })
            }
            None => {
                unfinished.fetch_add(1, Ordering::Relaxed);
                None
            }
        })
    };
    // Proofs of a kind submitted at once, so many at each time (seconds
    // into the day) until the day is over; the next burst comes once the
    // last is done and its time has come.
    let arrivals = |req: &ProofRequest, bursts: &[(f64, usize)], name: &str| {
        let mut out = Vec::new();
        for &(at, burst) in bursts {
            while !over.load(Ordering::Relaxed) && start.elapsed().as_secs_f64() < at {
                std::thread::sleep(Duration::from_millis(100));
            }
            if over.load(Ordering::Relaxed) {
                break;
            }
            let done: Vec<Result<Option<Latency>>> = std::thread::scope(|s| {
                let each: Vec<_> = (0..burst).map(|_| s.spawn(|| one(req, name))).collect();
                each.into_iter().map(joined).collect()
            });
            for r in done {
                out.extend(r?);
            }
        }
        Ok::<_, anyhow::Error>(out)
    };
    let minutes_s = args.minutes * 60.0;
    let wpost_bursts = wpost_bursts(args, minutes_s);
    let winning_bursts: Vec<(f64, usize)> = winning_times(args, minutes_s).into_iter().map(|t| (t, 1)).collect();
    let (porep_proofs, wpost_latencies, winning_latencies) = std::thread::scope(|s| -> Result<_> {
        let sealers: Vec<_> = (0..args.porep_in_flight)
            .map(|_| {
                s.spawn(|| -> Result<usize> {
                    let mut n = 0;
                    while !over.load(Ordering::Relaxed) {
                        match prove(&prover, porep, deadline)? {
                            Some(took) => {
                                note("a PoRep C2", took);
                                n += 1;
                            }
                            None => {
                                unfinished.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Ok(n)
                })
            })
            .collect();
        let w = s.spawn(|| arrivals(wpost, &wpost_bursts, "a WindowPoSt partition"));
        let n = s.spawn(|| arrivals(winning, &winning_bursts, "a WinningPoSt"));
        while start.elapsed() < day {
            std::thread::sleep(Duration::from_millis(200));
        }
        over.store(true, Ordering::Relaxed);
        let mut porep_proofs = 0;
        for h in sealers {
            porep_proofs += joined(h)?;
        }
        Ok((porep_proofs, joined(w)?, joined(n)?))
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    let (budget_fullest, _) = watch.stop();
    if let Some(p) = &args.timeline {
        std::fs::write(p, prover.engine().timeline().svg()).with_context(|| format!("writing {}", p.display()))?;
    }
    // The timeline counts from the engine's start, the day from its own.
    let day_from = start.saturating_duration_since(prover.engine().timeline().origin());
    let srs_load_spans = prover
        .engine()
        .timeline()
        .spans()
        .into_iter()
        .filter(|s| s.name == pinprove_engine::Phase::SrsLoad && s.start >= day_from)
        .map(|s| {
            let at_s = (s.start - day_from).as_secs_f64();
            (
                s.label,
                Latency {
                    at_s,
                    took_s: s.duration.as_secs_f64(),
                },
            )
        })
        .collect();
    let porep_per_hour = porep_proofs as f64 * 3600.0 / elapsed;
    let report = DayReport {
        benchmark: "day",
        host: Host::detect(),
        backend,
        sector_size: args.sector_size,
        minutes: args.minutes,
        recorded_before_s: recorded_s,
        porep_proofs,
        porep_s_per_proof: (porep_proofs > 0).then(|| elapsed / porep_proofs as f64),
        porep_per_hour,
        porep_of_alone: args
            .porep_alone_s_per_proof
            .filter(|s| *s > 0.0)
            .map(|s| porep_per_hour / (3600.0 / s)),
        params_from,
        srs_load_spans,
        wpost: wpost_latencies,
        winning: winning_latencies,
        unfinished: unfinished.into_inner(),
        srs_loads: prover
            .engine()
            .status()
            .srs
            .iter()
            .map(|s| (s.circuit_id.clone(), s.loads))
            .collect(),
        gpu_used_after_proofs: gpu_used.into_inner().unwrap(),
        peak_rss_bytes: sys::peak_rss_bytes(),
        budget_bytes: stack.budget.total(),
        budget_fullest,
        device_busy: Some((busy_seconds() - busy_before) / elapsed / stack.devices.len().max(1) as f64),
        failed: 0,
        refused: 0,
        simulated: None,
    };
    args.output.emit(&report, print)
}

/// The day's WindowPoSt deadlines that have partitions, and how many:
/// `--wpost-burst` at each, or `--wpost-per-day` spread evenly over the
/// deadlines of a day.
fn wpost_bursts(args: &DayArgs, end: f64) -> Vec<(f64, usize)> {
    let times = post_times(args.wpost_first, args.wpost_every, end);
    match args.wpost_per_day {
        None => times.into_iter().map(|t| (t, args.wpost_burst.max(1))).collect(),
        Some(per_day) => {
            let deadlines = (86_400.0 / args.wpost_every).round().max(1.0) as usize;
            times
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    let d = i % deadlines;
                    (t, ((d + 1) * per_day) / deadlines - (d * per_day) / deadlines)
                })
                .filter(|(_, n)| *n > 0)
                .collect()
        }
    }
}

/// The day's WinningPoSt times.
fn winning_times(args: &DayArgs, end: f64) -> Vec<f64> {
    if args.winning_random {
        random_times(args.winning_every, end, args.seed)
    } else {
        post_times(0.0, args.winning_every, end)
    }
}

/// `first`, `first + every`, ... before `end` seconds (none when `every`
/// is not positive).
fn post_times(first: f64, every: f64, end: f64) -> Vec<f64> {
    (0..)
        .map(|i| first + f64::from(i) * every)
        .take_while(|t| every > 0.0 && *t < end)
        .collect()
}

/// Times before `end` seconds of a Poisson process of mean interval
/// `mean` seconds, from `seed` (none when `mean` is not positive).
fn random_times(mean: f64, end: f64, seed: u64) -> Vec<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    if mean <= 0.0 {
        return out;
    }
    let mut t = 0.0;
    loop {
        // An exponential interval: -mean · ln(U), U in (0, 1].
        let u: f64 = 1.0 - rng.r#gen::<f64>();
        t += -mean * u.ln();
        if t >= end {
            return out;
        }
        out.push(t);
    }
}

/// A scoped thread's result, its panic an error.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    h.join().map_err(|_| anyhow::anyhow!("a thread of the day panicked"))?
}

fn print(r: &DayReport) {
    println!(
        "pinprove-bench day ({} backend; synthetic inputs and parameters: the proofs do not verify) — {}",
        r.backend,
        r.host.summary()
    );
    for (circuit, s) in &r.recorded_before_s {
        println!("  {circuit}: recorded before the day in {s:.1} s");
    }
    println!(
        "  {:.1} minutes at {}: {} PoRep C2 proofs{}",
        r.minutes,
        bytes(r.sector_size),
        r.porep_proofs,
        r.porep_s_per_proof
            .map_or(String::new(), |s| format!(", {s:.1} s per proof"))
    );
    println!(
        "  PoRep {:.1} proofs per hour{}",
        r.porep_per_hour,
        r.porep_of_alone
            .map_or(String::new(), |f| format!(", {:.0}% of its stream alone", 100.0 * f))
    );
    for (circuit, from) in &r.params_from {
        println!("  {circuit}: parameters {from}");
    }
    for (circuit, l) in &r.srs_load_spans {
        println!("  {circuit}: parameters loaded at {:.1} s in {:.1} s", l.at_s, l.took_s);
    }
    for (name, l) in [("WindowPoSt partitions", &r.wpost), ("WinningPoSts", &r.winning)] {
        let worst = l.iter().map(|x| x.took_s).fold(0.0, f64::max);
        let each: Vec<String> = l.iter().map(|x| format!("{:.1}", x.took_s)).collect();
        println!(
            "  {name}: {} proved, the slowest {worst:.2} s ({} s)",
            l.len(),
            each.join(", ")
        );
    }
    if r.unfinished > 0 {
        println!(
            "  {} proof(s) unfinished when the grace after the day ran out (cancelled)",
            r.unfinished
        );
    }
    for (circuit, loads) in &r.srs_loads {
        println!("  {circuit}: parameters loaded {loads} time(s)");
    }
    if let (Some(first), Some(last)) = (r.gpu_used_after_proofs.first(), r.gpu_used_after_proofs.last()) {
        let max = r.gpu_used_after_proofs.iter().max().copied().unwrap_or(0);
        println!(
            "  GPU memory used after {} proofs: {} after the first, {} after the last ({:+.1} MiB), at most {}",
            r.gpu_used_after_proofs.len(),
            bytes(*first),
            bytes(*last),
            (*last as f64 - *first as f64) / f64::from(1 << 20),
            bytes(max)
        );
    }
    if let Some(busy) = r.device_busy {
        println!("  device busy {:.0}% of the day", 100.0 * busy);
    }
    if r.failed + r.refused > 0 {
        println!("  {} proof(s) failed, {} refused", r.failed, r.refused);
    }
    if let Some(sim) = &r.simulated {
        let waited: Vec<String> = sim.waited_s.iter().map(|(k, s)| format!("{k} {s:.0} s")).collect();
        println!(
            "  simulated: {} host, {} free on the card, {} placed by the planner; partitions waited: {}",
            bytes(sim.host_memory),
            bytes(sim.gpu_memory),
            bytes(sim.planned_bytes),
            waited.join(", ")
        );
        let idle: Vec<String> = sim
            .device_idle_s
            .iter()
            .map(|(at, s)| format!("{s:.1} s at {at:.0} s"))
            .collect();
        println!(
            "  the device stood idle {}",
            if idle.is_empty() {
                "never a second".into()
            } else {
                idle.join(", ")
            }
        );
    }
    println!(
        "  peak RSS {} of a {} budget; {}",
        r.peak_rss_bytes.map_or("unknown".into(), bytes),
        bytes(r.budget_bytes),
        r.budget_fullest.describe()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_open_from_the_first_until_the_day_ends() {
        assert_eq!(post_times(60.0, 180.0, 360.0), vec![60.0, 240.0]);
        assert!(post_times(0.0, 0.0, 360.0).is_empty());
        assert!(post_times(400.0, 60.0, 360.0).is_empty());
    }

    #[test]
    fn random_winning_posts_have_their_mean_and_the_same_seed_gives_the_same_day() {
        let day = 45.0 * 2000.0;
        let t = random_times(45.0, day, 7);
        assert_eq!(t, random_times(45.0, day, 7));
        assert_ne!(t, random_times(45.0, day, 8));
        assert!(t.windows(2).all(|w| w[0] < w[1]) && t.iter().all(|x| *x < day));
        // 2000 expected; a Poisson count's standard deviation is about 45.
        assert!((1800..2200).contains(&t.len()), "{} arrivals", t.len());
        assert!(random_times(0.0, day, 7).is_empty());
    }
}
