//! `pinprove-bench msm`: the MSM kernels alone, in points per second.
//!
//! Every case is one MSM of 2^k bases in G1 or G2, with scalars of one mix,
//! its bases resident in device memory or streamed from pinned host memory,
//! through one kernel. The bases are the generator's multiples
//! (i+1)·G, all distinct, so that every MSM's value is known from scalar
//! arithmetic alone: Σ kᵢ·(i+1)·G. Every run of every case is checked
//! against that value, and at one small size (`--check-log`) the CPU's MSM
//! (blst) is checked against it too. A result that differs fails the
//! command.
//!
//! Scalar mixes:
//! * `random`: full-width scalars, uploaded to the device and summed in
//!   parts of 2^25 as a proof's h MSM is (h is always full-width).
//! * `filecoin`: a PoRep or SnapDeals partition's L, A or B query: 51.3%
//!   zeros, 47.3% ones, 1.4% full-width values (the 32 GiB PoRep witness,
//!   docs/benchmarks-journal.md; no value of any kind falls between 1 and
//!   2^64), split on the host as a proof splits them (zeros dropped, ones
//!   summed by batched addition, the rest by Pippenger over gathered bases).
//! * `wpost`: a WindowPoSt partition's queries, split the same way: 0.6%
//!   zeros, 0.4% ones, 99% full-width.

// Without `cuda` only the tests use the generators and reports.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

#[cfg(feature = "cuda")]
mod gpu;

use anyhow::{Result, ensure};
use blstrs::Scalar;
use clap::{Args, ValueEnum};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::report::Output;

/// The largest MSM the command runs: 2^27 bases (a 32 GiB PoRep's h).
const MAX_LOG: u32 = 27;
/// The smallest.
const MIN_LOG: u32 = 10;

/// A group of the pairing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    G1,
    G2,
}

/// What the scalars look like (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    Random,
    Filecoin,
    Wpost,
}

/// Where the bases are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Uploaded to device memory once.
    Resident,
    /// Streamed from pinned host memory through two windows.
    Streamed,
}

/// The MSM kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// sppark's Pippenger and batched addition, as the native backend
    /// drives them today.
    Sppark,
    /// pinprove's signed-digit bucket kernel, over a table of precomputed
    /// copies of resident bases (as many as the GPU's free memory holds,
    /// or --table-copies), streamed bases without copies.
    Tables,
}

macro_rules! display_as_value {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let v = self.to_possible_value().expect("no variant is skipped");
                f.write_str(v.get_name())
            }
        }
    )*};
}
display_as_value!(Mix, Placement, Kernel);

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Group::G1 => "G1",
            Group::G2 => "G2",
        })
    }
}

#[derive(Args, Debug)]
pub struct MsmArgs {
    /// MSM sizes as powers of two (10 to 27), comma-separated, for every
    /// group [default: G1 20,24,27 and G2 20,24,25, about two minutes on an
    /// H100].
    #[arg(long, value_delimiter = ',')]
    log_sizes: Option<Vec<u32>>,
    /// G2's sizes, instead of --log-sizes.
    #[arg(long, value_delimiter = ',')]
    g2_log_sizes: Option<Vec<u32>>,
    /// Groups, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Group::G1, Group::G2])]
    groups: Vec<Group>,
    /// Scalar mixes, comma-separated: random, filecoin (a PoRep query:
    /// half zeros, half ones, 1.4% full-width), wpost (a WindowPoSt query:
    /// 99% full-width, split as a proof splits it).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Mix::Random, Mix::Filecoin])]
    scalars: Vec<Mix>,
    /// Where the bases are, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Placement::Resident, Placement::Streamed])]
    bases: Vec<Placement>,
    /// Kernels, comma-separated: sppark (today's), tables (pinprove's).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Kernel::Sppark])]
    kernels: Vec<Kernel>,
    /// The tables kernel's window width in bits (4 to 22) [default: 16,
    /// narrower for MSMs below 2^20 bases].
    #[arg(long)]
    window_bits: Option<u32>,
    /// The tables kernel's entries (pairs of a window and a scalar) per
    /// batch, 16 bytes each twice over [default: the kernel's, 2^24; at
    /// most 2^28].
    #[arg(long)]
    batch_entries: Option<usize>,
    /// Most copies of resident bases in the tables kernel's table, the bases
    /// included (1: none) [default: as many as the GPU's free memory holds
    /// beside the case].
    #[arg(long)]
    table_copies: Option<u32>,
    /// Timed runs per case (after a warm-up run); the median is reported.
    #[arg(long, default_value_t = 2)]
    reps: usize,
    /// Skip each case's warm-up run.
    #[arg(long)]
    no_warmup: bool,
    /// Skip the tables kernel's profiled run (one more run per case, after
    /// the timed ones, that times its stages: digits, sort, accumulate,
    /// fixup, reduce).
    #[arg(long)]
    no_profile: bool,
    /// Also run every case at 2^N bases and check its value and the CPU's
    /// MSM (blst) against the known one (0 skips; 8 to 20).
    #[arg(long, default_value_t = 16)]
    check_log: u32,
    /// Bases per streamed window, a multiple of 1024 [default: the
    /// backend's largest, 2^25].
    #[arg(long)]
    window: Option<usize>,
    /// The GPU, by CUDA ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Seed of the scalars.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: Output,
}

impl MsmArgs {
    /// The sizes (log) of `group`'s MSMs, ascending, checked.
    fn log_sizes(&self, group: Group) -> Result<Vec<u32>> {
        let given = match group {
            Group::G1 => self.log_sizes.clone(),
            Group::G2 => self.g2_log_sizes.clone().or_else(|| self.log_sizes.clone()),
        };
        let mut sizes = given.unwrap_or_else(|| match group {
            Group::G1 => vec![20, 24, 27],
            Group::G2 => vec![20, 24, 25],
        });
        ensure!(
            sizes.iter().all(|k| (MIN_LOG..=MAX_LOG).contains(k)),
            "MSM sizes must be 2^{MIN_LOG} to 2^{MAX_LOG} (got {sizes:?})"
        );
        sizes.sort_unstable();
        sizes.dedup();
        Ok(sizes)
    }

    fn check(&self) -> Result<()> {
        ensure!(self.reps > 0, "--reps must be positive");
        ensure!(
            self.check_log == 0 || (8..=20).contains(&self.check_log),
            "--check-log must be 0 or 8 to 20"
        );
        ensure!(
            !self.groups.is_empty() && !self.scalars.is_empty() && !self.bases.is_empty() && !self.kernels.is_empty(),
            "at least one group, scalar mix, placement and kernel"
        );
        if let Some(c) = self.window_bits {
            ensure!((4..=22).contains(&c), "--window-bits must be 4 to 22");
        }
        if let Some(c) = self.table_copies {
            ensure!(c >= 1, "--table-copies must be at least 1 (the bases alone)");
        }
        if let Some(n) = self.batch_entries {
            ensure!(
                (1..=1 << 28).contains(&n),
                "--batch-entries must be 1 to 2^28 (the kernel's largest batch)"
            );
        }
        if let Some(w) = self.window {
            ensure!(
                w > 0 && w % 1024 == 0 && w <= 1 << MAX_LOG,
                "--window must be a positive multiple of 1024, at most 2^{MAX_LOG}"
            );
        }
        for g in [Group::G1, Group::G2] {
            self.log_sizes(g)?;
        }
        Ok(())
    }
}

pub fn run(args: &MsmArgs) -> Result<()> {
    args.check()?;
    #[cfg(feature = "cuda")]
    return gpu::run(args);
    #[cfg(not(feature = "cuda"))]
    Err(crate::report::needs_gpu_build("`pinprove-bench msm`"))
}

impl MsmArgs {
    /// The tables kernel's window width for 2^k bases.
    fn window_bits_for(&self, k: u32) -> u32 {
        self.window_bits.unwrap_or_else(|| k.saturating_sub(4).clamp(8, 16))
    }
}

/// Scalars per parallel task of the generators.
const CHUNK: usize = 1 << 16;

impl Mix {
    /// One scalar of the mix.
    fn draw(self, rng: &mut ChaCha8Rng) -> Scalar {
        // Per thousand: (zeros, ones); the rest full-width.
        let (zeros, ones) = match self {
            Mix::Random => return Scalar::random(rng),
            Mix::Filecoin => (513, 473),
            Mix::Wpost => (6, 4),
        };
        let u = rng.gen_range(0..1000u32);
        if u < zeros {
            Scalar::ZERO
        } else if u < zeros + ones {
            Scalar::ONE
        } else {
            Scalar::random(rng)
        }
    }

    /// `n` scalars of the mix from `seed`, in parallel (the same for any
    /// number of threads).
    pub fn scalars(self, n: usize, seed: u64) -> Vec<Scalar> {
        let mut out = vec![Scalar::ZERO; n];
        let stream_seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self as u64;
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, dst)| {
            let mut rng = ChaCha8Rng::seed_from_u64(stream_seed);
            rng.set_stream(c as u64);
            for s in dst {
                *s = self.draw(&mut rng);
            }
        });
        out
    }
}

/// Σ kᵢ·(i+1): the value of the MSM of `scalars` over the bases
/// (i+1)·G, as a multiple of G.
pub fn generator_multiple(scalars: &[Scalar]) -> Scalar {
    scalars
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, ks)| {
            let mut acc = Scalar::ZERO;
            let mut w = Scalar::from((c * CHUNK + 1) as u64);
            for k in ks {
                if *k == Scalar::ONE {
                    acc += w;
                } else if !bool::from(k.is_zero()) {
                    acc += *k * w;
                }
                w += Scalar::ONE;
            }
            acc
        })
        .reduce(|| Scalar::ZERO, |a, b| a + b)
}

/// How one case's scalars were summed.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Classes {
    /// By Pippenger.
    pub pippenger: usize,
    /// By batched addition (scalar 1).
    pub ones: usize,
    /// By bit planes (small values).
    pub small: usize,
}

/// One case's measurement.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    pub group: Group,
    pub log_size: u32,
    pub points: usize,
    pub scalars: Mix,
    pub bases: Placement,
    pub kernel: Kernel,
    pub classes: Classes,
    /// GPU time of each timed run, seconds.
    pub device_s: Vec<f64>,
    pub device_s_median: f64,
    /// Points per second of GPU time (median run).
    pub points_per_s: f64,
    /// Host time to the summed value (median run), seconds.
    pub wall_s_median: f64,
    /// Whether every run (warm-up included) gave the known value.
    pub matches: bool,
    /// The tables kernel's stages in a profiled run: (stage, GPU ms).
    pub stages_ms: Vec<(&'static str, f64)>,
}

impl CaseReport {
    fn line(&self) -> String {
        format!(
            "{} 2^{:<2} {:<8} {:<8} {:<7} {:>9.4} s  {:>8.1} M points/s  (wall {:.4} s; pippenger {}, ones {}){}",
            self.group,
            self.log_size,
            self.scalars,
            self.bases,
            self.kernel,
            self.device_s_median,
            self.points_per_s / 1e6,
            self.wall_s_median,
            self.classes.pippenger,
            self.classes.ones,
            if self.matches { "" } else { "  MISMATCH" }
        )
    }

    /// The profiled run's stages, when there was one.
    fn stages_line(&self) -> Option<String> {
        if self.stages_ms.is_empty() {
            return None;
        }
        let total: f64 = self.stages_ms.iter().map(|(_, ms)| ms).sum();
        let parts: Vec<String> = self
            .stages_ms
            .iter()
            .map(|(stage, ms)| format!("{stage} {ms:.1} ms ({:.0}%)", 100.0 * ms / total.max(1e-9)))
            .collect();
        Some(format!("    stages (profiled run): {}", parts.join(", ")))
    }
}

/// The checks at `--check-log`.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub group: Group,
    pub log_size: u32,
    pub scalars: Mix,
    /// The CPU's MSM (blst) gave the known value.
    pub cpu_matches: bool,
    /// Every GPU case at this size gave it too.
    pub gpu_cases: usize,
    pub gpu_matches: usize,
}

/// A table of precomputed copies the tables kernel read.
#[derive(Clone, Debug, Serialize)]
pub struct TableReport {
    pub group: Group,
    pub log_size: u32,
    pub window_bits: u32,
    /// Copies, the bases included.
    pub copies: u32,
    /// Device bytes beyond the bases.
    pub bytes: u64,
    /// Seconds to build them on the device.
    pub build_s: f64,
}

/// What the command measured.
#[derive(Clone, Debug, Serialize)]
pub struct MsmReport {
    pub benchmark: &'static str,
    pub host: crate::report::Host,
    pub gpu: String,
    pub driver: Option<String>,
    pub reps: usize,
    pub window: usize,
    /// The tables kernel's entries per batch, where set (else its default).
    pub batch_entries: Option<usize>,
    pub checks: Vec<CheckReport>,
    pub tables: Vec<TableReport>,
    pub cases: Vec<CaseReport>,
    /// Sizes left out, each with why.
    pub skipped: Vec<String>,
    /// Seconds spent making bases and scalars (not measured work).
    pub setup_s: f64,
}

impl MsmReport {
    fn print(&self) {
        println!("pinprove-bench msm on {}", self.host.summary());
        println!("GPU: {}, driver {}", self.gpu, self.driver.as_deref().unwrap_or("?"));
        println!(
            "median of {} timed runs, GPU time; streamed windows of {} bases; setup {:.1} s",
            self.reps, self.window, self.setup_s
        );
        if let Some(n) = self.batch_entries {
            println!("tables kernel: batches of {n} entries");
        }
        for c in &self.checks {
            println!(
                "check {} 2^{} {}: CPU (blst) {}, GPU cases {}/{} equal",
                c.group,
                c.log_size,
                c.scalars,
                if c.cpu_matches { "equal" } else { "DIFFERS" },
                c.gpu_matches,
                c.gpu_cases
            );
        }
        for t in &self.tables {
            println!(
                "table {} 2^{}: windows of {} bits, {} copies ({} beside the bases), built in {:.2} s",
                t.group,
                t.log_size,
                t.window_bits,
                t.copies,
                crate::report::bytes(t.bytes),
                t.build_s
            );
        }
        for c in &self.cases {
            println!("{}", c.line());
            if let Some(stages) = c.stages_line() {
                println!("{stages}");
            }
        }
        for s in &self.skipped {
            println!("skipped: {s}");
        }
    }

    /// The command's verdict: an error naming every result that differs.
    fn verdict(&self) -> Result<()> {
        let mut bad: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.cpu_matches || c.gpu_matches != c.gpu_cases)
            .map(|c| format!("check {} 2^{} {}", c.group, c.log_size, c.scalars))
            .collect();
        bad.extend(
            self.cases
                .iter()
                .filter(|c| !c.matches)
                .map(|c| format!("{} 2^{} {} {} {}", c.group, c.log_size, c.scalars, c.bases, c.kernel)),
        );
        ensure!(
            bad.is_empty(),
            "{} MSM results differ from their known values: {}",
            bad.len(),
            bad.join("; ")
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blst::{blst_p1_affine, blst_p2_affine};
    use blstrs::{G1Projective, G2Projective};
    use clap::Parser;
    use group::Group as _;
    use pinprove_groth16::msm::{g1_msm, g2_msm, to_bytes};
    use pinprove_groth16::synthetic::{g1_multiples, g2_multiples};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: MsmArgs,
    }

    fn parse(args: &[&str]) -> MsmArgs {
        Cli::try_parse_from(std::iter::once("msm").chain(args.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn sizes_default_to_the_quick_set_and_are_checked() {
        let a = parse(&[]);
        a.check().unwrap();
        assert_eq!(a.log_sizes(Group::G1).unwrap(), [20, 24, 27]);
        assert_eq!(a.log_sizes(Group::G2).unwrap(), [20, 24, 25]);
        assert_eq!((a.groups.len(), a.scalars.len(), a.bases.len()), (2, 2, 2));
        let a = parse(&["--log-sizes", "24,20,24", "--scalars", "wpost", "--bases", "streamed"]);
        assert_eq!(a.log_sizes(Group::G1).unwrap(), [20, 24]);
        assert_eq!(a.log_sizes(Group::G2).unwrap(), [20, 24]);
        assert_eq!((a.scalars[0], a.bases[0]), (Mix::Wpost, Placement::Streamed));
        let a = parse(&["--log-sizes", "16", "--g2-log-sizes", "12"]);
        assert_eq!(a.log_sizes(Group::G2).unwrap(), [12]);
        for bad in [
            &["--log-sizes", "28"][..],
            &["--log-sizes", "9"],
            &["--g2-log-sizes", "30"],
            &["--reps", "0"],
            &["--check-log", "21"],
            &["--window", "1000"],
            &["--window-bits", "23"],
            &["--table-copies", "0"],
            &["--batch-entries", "0"],
            &["--batch-entries", "268435457"],
        ] {
            assert!(parse(bad).check().is_err(), "{bad:?} accepted");
        }
        assert!(Cli::try_parse_from(["msm", "--scalars", "bits"]).is_err());
        assert_eq!(Mix::Filecoin.to_string(), "filecoin");
        let a = parse(&["--kernels", "sppark,tables"]);
        assert_eq!(a.kernels, [Kernel::Sppark, Kernel::Tables]);
        assert_eq!(
            (a.window_bits_for(27), a.window_bits_for(16), a.window_bits_for(10)),
            (16, 12, 8)
        );
        assert_eq!(parse(&["--window-bits", "20"]).window_bits_for(10), 20);
        assert!(parse(&["--batch-entries", "268435456"]).check().is_ok());
    }

    #[test]
    fn mixes_have_their_shares_and_do_not_depend_on_threads() {
        let n = 200_000;
        let s = Mix::Filecoin.scalars(n, 3);
        let zeros = s.iter().filter(|k| bool::from(k.is_zero())).count() as f64 / n as f64;
        let ones = s.iter().filter(|k| **k == Scalar::ONE).count() as f64 / n as f64;
        assert!(
            (zeros - 0.513).abs() < 0.01 && (ones - 0.473).abs() < 0.01,
            "{zeros} {ones}"
        );
        let full = s
            .iter()
            .filter(|k| k.to_bytes_le()[8..].iter().any(|&b| b != 0))
            .count();
        assert_eq!(
            full,
            n - s
                .iter()
                .filter(|k| bool::from(k.is_zero()) || **k == Scalar::ONE)
                .count()
        );
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        assert!(one_thread.install(|| Mix::Filecoin.scalars(n, 3)) == s);
        assert!(Mix::Filecoin.scalars(n, 4) != s);
        let r = Mix::Random.scalars(1000, 3);
        assert!(r.iter().all(|k| k.to_bytes_le()[16..].iter().any(|&b| b != 0)));
        let w = Mix::Wpost.scalars(n, 3);
        let trivial = w
            .iter()
            .filter(|k| bool::from(k.is_zero()) || **k == Scalar::ONE)
            .count();
        assert!((trivial as f64 / n as f64 - 0.01).abs() < 0.003);
    }

    /// The known value equals blst's MSM over the generated bases: what
    /// every GPU result is checked against is right.
    #[test]
    fn the_known_value_is_the_cpu_msm() {
        let n = 3000;
        let mut g1 = vec![blst_p1_affine::default(); n];
        g1_multiples(0, &mut g1);
        let mut g2 = vec![blst_p2_affine::default(); 200];
        g2_multiples(0, &mut g2);
        for mix in [Mix::Random, Mix::Filecoin, Mix::Wpost] {
            let mut k = mix.scalars(n, 9);
            // Edge values too.
            k[0] = -Scalar::ONE;
            k[1] = Scalar::ZERO;
            let bytes = to_bytes(&k);
            let m = generator_multiple(&k);
            assert_eq!(g1_msm(&g1, &bytes).0, G1Projective::generator() * m, "{mix}");
            let m2 = generator_multiple(&k[..200]);
            assert_eq!(g2_msm(&g2, &bytes[..200]).0, G2Projective::generator() * m2, "{mix}");
        }
    }

    #[test]
    fn a_mismatch_fails_the_verdict() {
        let case = CaseReport {
            group: Group::G1,
            log_size: 20,
            points: 1 << 20,
            scalars: Mix::Random,
            bases: Placement::Resident,
            kernel: Kernel::Sppark,
            classes: Classes::default(),
            device_s: vec![0.01],
            device_s_median: 0.01,
            points_per_s: 1e8,
            wall_s_median: 0.02,
            matches: true,
            stages_ms: Vec::new(),
        };
        let mut report = MsmReport {
            benchmark: "msm",
            host: crate::report::Host::detect(),
            gpu: "test".into(),
            driver: None,
            reps: 1,
            window: 1024,
            batch_entries: Some(1 << 26),
            checks: Vec::new(),
            tables: Vec::new(),
            cases: vec![case.clone()],
            skipped: Vec::new(),
            setup_s: 0.0,
        };
        report.verdict().unwrap();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["batch_entries"], 1 << 26);
        report.cases.push(CaseReport {
            matches: false,
            bases: Placement::Streamed,
            ..case
        });
        let e = report.verdict().unwrap_err().to_string();
        assert!(
            e.contains("1 MSM results differ") && e.contains("G1 2^20 random streamed sppark"),
            "{e}"
        );
        assert!(report.cases[1].line().ends_with("MISMATCH"));
        assert!(report.cases[0].stages_line().is_none());
        report.cases[0].stages_ms = vec![("digits", 1.0), ("sort", 3.0)];
        assert_eq!(
            report.cases[0].stages_line().unwrap(),
            "    stages (profiled run): digits 1.0 ms (25%), sort 3.0 ms (75%)"
        );
    }
}
