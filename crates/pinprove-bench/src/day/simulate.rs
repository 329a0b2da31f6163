//! `pinprove-bench day --simulate`: the same day on a virtual clock, the
//! engine's planner deciding, measured costs in place of the work
//! ([`pinprove_engine::simulate`]). It prints the day's report and draws
//! its timeline; `--each-idea` measures the planner's ideas one by one.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use pinprove_engine::Priority;
use pinprove_engine::planner::Policy;
use pinprove_engine::simulate::{self, Arrival, Outcome, Setup, Stream};
use pinprove_engine::timeline::Timeline;
use pinprove_filecoin::ProofKind;
use serde::Serialize;

use super::{DayArgs, DayReport, Latency, costs};
use crate::budget_watch::BudgetSample;
use crate::report::{Host, bytes};

/// One of the planner's ideas, as `--ideas` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Idea {
    /// Loads side by side, in priority order.
    ParallelLoads,
    /// Evict only the sections that make room.
    EvictSections,
    /// Load a kind's sections as memory frees.
    LoadAhead,
    /// Synthesize from the recording while parameters load.
    SynthesizeWhileLoading,
    /// Keep recordings ahead of parameters.
    RecordingsFirst,
    /// Keep WinningPoSt's small set resident.
    KeepWinning,
    /// Switch once per burst.
    SwitchOncePerBurst,
    /// Let idle parameters go at once (the burst window keeps a burst's).
    NoIdleKeep,
    /// Fill spare memory with what the next burst loads.
    Prefetch,
    /// Let sections go as the last partition's device work passes them.
    ReleaseSectionsEarly,
}

impl Idea {
    pub const ALL: [Idea; 10] = [
        Idea::ParallelLoads,
        Idea::EvictSections,
        Idea::LoadAhead,
        Idea::SynthesizeWhileLoading,
        Idea::RecordingsFirst,
        Idea::KeepWinning,
        Idea::SwitchOncePerBurst,
        Idea::NoIdleKeep,
        Idea::Prefetch,
        Idea::ReleaseSectionsEarly,
    ];

    fn set(self, p: &mut Policy, on: bool) {
        match self {
            Idea::ParallelLoads => p.parallel_loads = on,
            Idea::EvictSections => p.evict_sections = on,
            Idea::LoadAhead => p.load_ahead = on,
            Idea::SynthesizeWhileLoading => p.synthesize_while_loading = on,
            Idea::RecordingsFirst => p.recordings_first = on,
            Idea::KeepWinning => p.keep_critical_resident = on,
            Idea::SwitchOncePerBurst => {
                p.burst_window = if on {
                    Policy::planned().burst_window
                } else {
                    Duration::ZERO
                }
            }
            Idea::NoIdleKeep => p.keep_idle_parameters = !on,
            Idea::Prefetch => p.prefetch = on,
            Idea::ReleaseSectionsEarly => p.release_sections_early = on,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Idea::ParallelLoads => "parallel loads",
            Idea::EvictSections => "evict sections",
            Idea::LoadAhead => "load ahead",
            Idea::SynthesizeWhileLoading => "synthesize while loading",
            Idea::RecordingsFirst => "recordings first",
            Idea::KeepWinning => "keep WinningPoSt",
            Idea::SwitchOncePerBurst => "switch once per burst",
            Idea::NoIdleKeep => "idle parameters go at once",
            Idea::Prefetch => "prefetch into spare memory",
            Idea::ReleaseSectionsEarly => "sections go as the last partition passes them",
        }
    }
}

/// What only the simulated day reports.
#[derive(Debug, Serialize)]
pub struct Simulated {
    /// The planner's policy.
    pub policy: Policy,
    /// The host's memory, the card's memory free to pinprove, and the
    /// bytes the planner placed (the budget less the backends' buffers).
    pub host_memory: u64,
    pub gpu_memory: u64,
    pub planned_bytes: u64,
    /// Partition-seconds waited, by reason.
    pub waited_s: Vec<(String, f64)>,
    /// When the device stood idle a second or more within the day, and
    /// for how long (seconds).
    pub device_idle_s: Vec<(f64, f64)>,
    /// The budget at its fullest, by holder, as the planner counted it.
    pub fullest: simulate::Fullest,
}

/// The day's setup from its arguments, under `policy`.
fn setup(args: &DayArgs, policy: Policy) -> Result<(Setup, u64)> {
    let gpu_free_gib = args.gpu_memory as f64 / f64::from(1u32 << 30);
    if gpu_free_gib < 14.5 {
        bail!("--gpu-memory: device times are measured with 15 GiB free and more, not below");
    }
    let load = args.load_gib_per_s.unwrap_or(costs::LOAD_POOL_GIB_PER_S);
    if load <= 0.0 {
        bail!("--load-gib-per-s must be positive");
    }
    let costs = costs::day(gpu_free_gib, load, args.sector_size)?;
    let id = |k: ProofKind| pinprove_filecoin::kind::circuit_id(k, args.sector_size);
    let (porep, wpost, winning) = (
        id(ProofKind::PoRep)?,
        id(ProofKind::WindowPoSt)?,
        id(ProofKind::WinningPoSt)?,
    );
    let budget = match &args.budget {
        pinprove_mem::BudgetConfig::Fixed(n) => *n,
        // The auto budget of a host of this much memory, as the daemon
        // resolves it (the 128 GiB H100 host reports 125.85 GiB).
        pinprove_mem::BudgetConfig::Auto {
            margin_fraction,
            margin_min,
        } => {
            let memory = args.host_memory.saturating_sub(REPORTED_LESS);
            let margin = (*margin_min).max((memory as f64 * margin_fraction) as u64);
            memory.saturating_sub(margin).max(memory / 2)
        }
    };
    let planned = budget.saturating_sub(costs::UNPLANNED_BYTES);
    let minutes_s = args.minutes * 60.0;
    let mut arrivals: Vec<Arrival> = Vec::new();
    for (at, n) in super::wpost_bursts(args, minutes_s) {
        for _ in 0..n {
            arrivals.push(Arrival {
                at: Duration::from_secs_f64(at),
                kind: wpost.clone(),
                partitions: 1,
            });
        }
    }
    for at in super::winning_times(args, minutes_s) {
        arrivals.push(Arrival {
            at: Duration::from_secs_f64(at),
            kind: winning.clone(),
            partitions: 1,
        });
    }
    arrivals.sort_by_key(|a| a.at);
    let kinds = |ks: &[ProofKind]| ks.iter().map(|k| id(*k)).collect::<Result<Vec<_>, _>>();
    let recorded = if args.no_record {
        Vec::new()
    } else {
        kinds(&args.record)?
    };
    Ok((
        Setup {
            costs,
            policy,
            budget: planned,
            // The engine's default: the smaller of 2 GiB and a sixteenth.
            reserve: (2u64 << 30).min(budget / 16),
            // The engine's workers on the 16-core host (EngineConfig's
            // default), and the two kept for urgent work.
            synthesis_slots: 16,
            urgent_synthesis_slots: 2,
            // A background partition's pieces (h, the h MSM's parts, the
            // other MSMs): WinningPoSts beside the stream took 0.1-0.4 s.
            device_piece: Duration::from_millis(500),
            pieces_up_to: if args.urgent_pieces {
                Priority::High
            } else {
                Priority::Normal
            },
            preloaded: kinds(&args.preload)?,
            recorded,
            day: Duration::from_secs_f64(minutes_s),
            grace: Duration::from_secs_f64(args.grace_minutes * 60.0),
            arrivals,
            streams: if args.porep_in_flight > 0 {
                vec![Stream {
                    kind: porep,
                    in_flight: args.porep_in_flight,
                    partitions: 10,
                }]
            } else {
                Vec::new()
            },
        },
        budget,
    ))
}

/// What the H100 host reports of its 128 GiB (125.85 GiB).
const REPORTED_LESS: u64 = (2.15 * (1u64 << 30) as f64) as u64;

/// The policy the arguments ask for.
fn policy(args: &DayArgs) -> Policy {
    let mut p = if args.planned {
        Policy::planned()
    } else {
        Policy::default()
    };
    for idea in &args.ideas {
        idea.set(&mut p, true);
    }
    if let Some(n) = args.background_ahead {
        p.background_ahead = n;
    }
    p
}

pub fn run(args: &DayArgs) -> Result<()> {
    if args.each_idea {
        return each_idea(args);
    }
    let policy = policy(args);
    let (setup, budget) = setup(args, policy)?;
    let timeline = Timeline::new(2_000_000);
    let out = simulate::run(&setup, args.timeline.as_ref().map(|_| &timeline));
    if let Some(p) = &args.timeline {
        std::fs::write(p, timeline.svg()).with_context(|| format!("writing {}", p.display()))?;
    }
    let report = report(args, &setup, budget, &out)?;
    args.output.emit(&report, super::print)
}

fn report(args: &DayArgs, setup: &Setup, budget: u64, out: &Outcome) -> Result<DayReport> {
    let id = |k: ProofKind| pinprove_filecoin::kind::circuit_id(k, args.sector_size);
    let latencies = |kind: &str| -> Vec<Latency> {
        out.latencies(kind)
            .into_iter()
            .map(|(at, took)| Latency {
                at_s: at.as_secs_f64(),
                took_s: took.as_secs_f64(),
            })
            .collect()
    };
    let porep = id(ProofKind::PoRep)?;
    let porep_proofs = out
        .jobs
        .iter()
        .filter(|j| j.kind == porep && j.ended.is_some_and(|e| e <= setup.day))
        .count();
    let day_s = setup.day.as_secs_f64();
    let porep_per_hour = porep_proofs as f64 * 3600.0 / day_s;
    let alone = args.porep_alone_s_per_proof.unwrap_or(costs::POREP_ALONE_S_PER_PROOF);
    Ok(DayReport {
        benchmark: "day",
        host: Host {
            cpu: "simulated".into(),
            cores: 16,
            memory_bytes: args.host_memory,
            kernel: String::new(),
            hostname: String::new(),
        },
        backend: "simulated",
        sector_size: args.sector_size,
        minutes: args.minutes,
        recorded_before_s: Vec::new(),
        porep_proofs,
        porep_s_per_proof: (porep_proofs > 0).then(|| day_s / porep_proofs as f64),
        porep_per_hour,
        porep_of_alone: Some(porep_per_hour / (3600.0 / alone)),
        params_from: setup
            .costs
            .keys()
            .map(|k| (k.clone(), "simulated: measured load times".to_string()))
            .collect(),
        srs_load_spans: out
            .load_spans
            .iter()
            .map(|(k, at, took)| {
                (
                    k.clone(),
                    Latency {
                        at_s: at.as_secs_f64(),
                        took_s: took.as_secs_f64(),
                    },
                )
            })
            .collect(),
        wpost: latencies(&id(ProofKind::WindowPoSt)?),
        winning: latencies(&id(ProofKind::WinningPoSt)?),
        unfinished: out.unfinished(),
        srs_loads: setup
            .costs
            .keys()
            .map(|k| {
                let preloaded = u64::from(setup.preloaded.contains(k));
                (k.clone(), preloaded + out.params_loads.get(k).copied().unwrap_or(0))
            })
            .collect(),
        gpu_used_after_proofs: Vec::new(),
        peak_rss_bytes: None,
        budget_bytes: budget,
        budget_fullest: BudgetSample {
            used: out.fullest.used + costs::UNPLANNED_BYTES,
            total: budget,
            srs: out.fullest.params,
            recordings: out.fullest.recordings,
            other: costs::UNPLANNED_BYTES,
            ..BudgetSample::default()
        },
        device_busy: Some(out.device_busy.as_secs_f64() / day_s),
        failed: 0,
        refused: out.refused(),
        simulated: Some(Simulated {
            policy: setup.policy,
            host_memory: args.host_memory,
            gpu_memory: args.gpu_memory,
            planned_bytes: setup.budget,
            waited_s: out.waited.iter().map(|(k, d)| (k.clone(), d.as_secs_f64())).collect(),
            device_idle_s: out
                .device_idle
                .iter()
                .map(|(at, d)| (at.as_secs_f64(), d.as_secs_f64()))
                .collect(),
            fullest: out.fullest.clone(),
        }),
    })
}

/// One row of `--each-idea`.
struct Row {
    name: String,
    busy: f64,
    porep_of_alone: f64,
    wpost_worst: f64,
    winning_worst: f64,
    loads: u64,
    refused: usize,
    unfinished: usize,
}

fn row(args: &DayArgs, name: String, mut policy: Policy) -> Result<Row> {
    if let Some(n) = args.background_ahead {
        policy.background_ahead = n;
    }
    let (setup, budget) = setup(args, policy)?;
    let out = simulate::run(&setup, None);
    let r = report(args, &setup, budget, &out)?;
    let worst = |l: &[Latency]| l.iter().map(|x| x.took_s).fold(0.0, f64::max);
    Ok(Row {
        name,
        busy: r.device_busy.unwrap_or(0.0),
        porep_of_alone: r.porep_of_alone.unwrap_or(0.0),
        wpost_worst: worst(&r.wpost),
        winning_worst: worst(&r.winning),
        loads: out.params_loads.values().sum(),
        refused: r.refused,
        unfinished: r.unfinished,
    })
}

/// The engine's rules, each idea alone on top of them, every idea, and
/// every idea but one.
fn each_idea(args: &DayArgs) -> Result<()> {
    let mut rows = vec![row(args, "the engine's rules".into(), Policy::default())?];
    for idea in Idea::ALL {
        let mut p = Policy::default();
        idea.set(&mut p, true);
        rows.push(row(args, format!("+ {}", idea.name()), p)?);
    }
    rows.push(row(args, "every idea".into(), Policy::planned())?);
    for idea in Idea::ALL {
        let mut p = Policy::planned();
        idea.set(&mut p, false);
        rows.push(row(args, format!("every idea but {}", idea.name()), p)?);
    }
    println!(
        "simulated day: {:.0} minutes, {} host, {} card",
        args.minutes,
        bytes(args.host_memory),
        bytes(args.gpu_memory)
    );
    println!(
        "| policy | device busy | PoRep of alone | slowest WindowPoSt | slowest WinningPoSt | parameter loads | refused | unfinished |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0}% | {:.0}% | {:.1} s | {:.2} s | {} | {} | {} |",
            r.name,
            100.0 * r.busy,
            100.0 * r.porep_of_alone,
            r.wpost_worst,
            r.winning_worst,
            r.loads,
            r.refused,
            r.unfinished
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Day {
        #[command(flatten)]
        day: DayArgs,
    }

    /// Issue 60's day (a burst of 3 WindowPoSt partitions at minutes 1
    /// and 4, a WinningPoSt at random every 45 s on average, 2 PoRep in
    /// flight) at 15 GiB free and 128 GiB, simulated, with `extra`
    /// arguments.
    fn six_minutes(extra: &[&str]) -> (DayReport, Outcome) {
        let mut argv = vec![
            "day",
            "--simulate",
            "--minutes",
            "6",
            "--wpost-first",
            "60",
            "--wpost-every",
            "180",
            "--wpost-burst",
            "3",
            "--winning-random",
            "--winning-every",
            "45",
        ];
        argv.extend_from_slice(extra);
        let args = Day::parse_from(argv).day;
        let (setup, budget) = setup(&args, policy(&args)).unwrap();
        let out = simulate::run(&setup, None);
        (report(&args, &setup, budget, &out).unwrap(), out)
    }

    fn slowest(l: &[Latency]) -> f64 {
        l.iter().map(|x| x.took_s).fold(0.0, f64::max)
    }

    /// The planner's ideas on issue 60's day, at the measured load speed
    /// and costs: every PoSt in time, nothing refused or left unfinished,
    /// the device and the stream far busier than under the engine's rules
    /// (which keep neither the recordings nor the WindowPoSt's sections
    /// between bursts). The figures are the simulation's, not a GPU's.
    #[test]
    fn the_planner_keeps_issue_60s_day_in_time_where_the_engines_rules_do_not() {
        let (before, _) = six_minutes(&[]);
        let (after, out) = six_minutes(&["--planned", "--preload", "winning,porep,wpost", "--urgent-pieces"]);
        for r in [&before, &after] {
            assert_eq!(r.wpost.len(), 6);
            assert_eq!(r.winning.len(), 10);
            assert_eq!((r.refused, r.failed, r.unfinished), (0, 0, 0));
        }
        assert!(slowest(&before.wpost) > 100.0, "{:?}", before.wpost);
        assert!(slowest(&after.wpost) <= 60.0, "{:?}", after.wpost);
        assert!(slowest(&after.winning) <= 2.0, "{:?}", after.winning);
        let busy = |r: &DayReport| r.device_busy.unwrap();
        assert!(
            busy(&before) < 0.55 && busy(&after) >= 0.70,
            "{} {}",
            busy(&before),
            busy(&after)
        );
        assert!(after.porep_of_alone.unwrap() > before.porep_of_alone.unwrap());
        assert!(out.fullest.used <= after.simulated.as_ref().unwrap().planned_bytes);
    }

    /// A day's WindowPoSt partitions spread over its 48 deadlines: 14 of
    /// them for 1 PiB, 140 (2 or 3 a deadline) for 10 PiB.
    #[test]
    fn partitions_per_day_are_spread_over_the_deadlines() {
        let bursts = |per_day: &str, minutes: &str| {
            let args = Day::parse_from([
                "day",
                "--minutes",
                minutes,
                "--wpost-every",
                "1800",
                "--wpost-per-day",
                per_day,
            ])
            .day;
            super::super::wpost_bursts(&args, args.minutes * 60.0)
        };
        let day = bursts("14", "1440");
        assert_eq!(day.len(), 14);
        assert_eq!(day.iter().map(|b| b.1).sum::<usize>(), 14);
        let day = bursts("140", "1440");
        assert_eq!(day.len(), 48);
        assert_eq!(day.iter().map(|b| b.1).sum::<usize>(), 140);
        assert!(day.iter().all(|b| (2..=3).contains(&b.1)));
    }
}
