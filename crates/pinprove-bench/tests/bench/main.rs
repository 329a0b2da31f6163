//! `pinprove-bench` end to end, as whoever measures runs it: every command
//! on small inputs, its JSON, and clear errors for bad arguments.

use std::path::PathBuf;
use std::process::{Command, Output};

mod gpu_scripts;

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pinprove-bench"));
    c.args(args).env("PINPROVE_LOG", "warn");
    c
}

fn bench(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

/// Runs `args` with pinprove's cache directory (counted shapes) at `cache`.
fn bench_cached(args: &[&str], cache: &std::path::Path) -> Output {
    command(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("the binary runs")
}

/// A few seconds of a 2 KiB day on the CPU without a sealing stream.
const SHORT_DAY: [&str; 9] = [
    "day",
    "--sector-size",
    "2KiB",
    "--minutes",
    "0.05",
    "--backend",
    "cpu",
    "--porep-in-flight",
    "0",
];

fn ok(args: &[&str]) -> String {
    let out = bench(args);
    assert!(
        out.status.success(),
        "pinprove-bench {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

/// Runs `args`, which must fail with exit status `code` (1: an error of the
/// command, 2: a bad command line) and say `text` on stderr, without a panic.
fn fails_with(args: &[&str], code: i32, text: &str) {
    let out = bench(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "pinprove-bench {args:?}:\n{stderr}");
    assert!(
        stderr.contains(text),
        "pinprove-bench {args:?} should say {text:?}:\n{stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "pinprove-bench {args:?} panicked:\n{stderr}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    fails_with(&["prove", "--constraints", "3"], 1, "invalid benchmark circuit");
    fails_with(&["pipeline", "--jobs", "0"], 1, "must be positive");
    fails_with(&["prove", "--constraints", "2^99"], 2, "too large");
    fails_with(
        &["prove", "--constraints", "2^12", "--inputs", "18446744073709551615"],
        1,
        "leave no room",
    );
    fails_with(&["mem", "--elements", "18446744073709551615"], 1, "too large");
    fails_with(&["mem", "--threads", "100000"], 1, "more than 1024 threads");
    fails_with(&["pipeline", "--budget", "12 parsecs"], 2, "unknown size unit");
    fails_with(
        &["pipeline", "--synthesis-workers", "5000"],
        1,
        "synthesis workers asked for",
    );
    fails_with(
        &["pipeline", "--prep-threads", "5000"],
        1,
        "preparation threads asked for",
    );
    fails_with(&["msm", "--log-sizes", "28"], 1, "MSM sizes must be 2^10 to 2^27");
    fails_with(&["msm", "--window", "1000"], 1, "multiple of 1024");
    fails_with(&["msm", "--scalars", "bits"], 2, "invalid value 'bits'");
    if !cfg!(feature = "cuda") {
        fails_with(&["h2d"], 1, "without the `cuda` feature");
        fails_with(&["pipeline", "--backend", "native"], 1, "needs a GPU build");
        fails_with(
            &["msm", "--log-sizes", "16"],
            1,
            "`pinprove-bench msm` needs a GPU build",
        );
    }
}

#[test]
fn bench_prove_compares_with_bellperson() {
    let dir = temp_dir("prove");
    let out = ok(&[
        "prove",
        "--constraints",
        "2^9",
        "--compare",
        "bellperson",
        "--reps",
        "1",
        "--params-dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let r = json(&out);
    assert_eq!(r["verified"], true);
    assert_eq!(r["identical_to_bellperson"], true);
    assert_eq!(r["device"], "cpu");
    assert!(r["ours"]["total_s"].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_pipeline_runs_jobs_through_the_engine_and_draws_the_timeline() {
    let dir = temp_dir("pipeline");
    let svg = dir.join("timeline.svg");
    let trace = dir.join("trace.json");
    let r = json(&ok(&[
        "pipeline",
        "--circuit",
        "bench-bits",
        "--constraints",
        "2^9",
        "--jobs",
        "2",
        "--partitions",
        "3",
        "--params-dir",
        dir.to_str().unwrap(),
        "--timeline",
        svg.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(r["proofs_verified"], 6);
    assert!(r["proofs_per_hour"].as_f64().unwrap() > 0.0);
    let busy = r["device_busy_fraction"].as_f64().unwrap();
    assert!(busy > 0.0 && busy <= 1.0 + 1e-9, "{busy}");
    assert!(r["phases"]["synthesis_s"].as_f64().unwrap() > 0.0);
    let per_device = r["per_device"].as_array().unwrap();
    assert_eq!(per_device.len(), 1, "{per_device:?}");
    assert_eq!(per_device[0]["device"], "cpu");
    assert_eq!(per_device[0]["partitions"], 6, "every partition ran on the one device");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("synth-"),
        "a synthesis lane is drawn"
    );
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(trace["traceEvents"].as_array().unwrap().len() > 6);

    // Synthetic parameters: same run, proofs not checked, and said so.
    let r = json(&ok(&[
        "pipeline",
        "--constraints",
        "2^9",
        "--jobs",
        "1",
        "--partitions",
        "2",
        "--synthetic-params",
        "--params-dir",
        dir.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(r["synthetic_params"], true);
    assert_eq!(r["proofs_verified"], 0);
    // Made in memory: no parameter file written.
    assert_eq!(r["params_in_memory"], true);
    let written: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("synthetic"))
        .collect();
    assert!(written.is_empty(), "{written:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_synth_reports_zero_spills_when_hinted() {
    let r = json(&ok(&[
        "synth",
        "--circuit",
        "bench-bits",
        "--constraints",
        "2^12",
        "--reps",
        "1",
        "--json",
    ]));
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows[0]["variant"], "pool, hinted");
    assert_eq!(rows[0]["spills"], 0);
    assert!(rows[1]["spills"].as_u64().unwrap() > 0, "unhinted synthesis grows");
}

#[test]
fn bench_mem_runs_small() {
    let r = json(&ok(&[
        "mem",
        "--elements",
        "65536",
        "--reps",
        "1",
        "--pool-mib",
        "8",
        "--threads",
        "4",
        "--json",
    ]));
    assert_eq!(r["push"].as_array().unwrap().len(), 5);
    assert!(r["pool"]["speedup"].as_f64().unwrap() > 1.0);
}

#[test]
fn a_label_is_kept_in_the_json() {
    let dir = temp_dir("label");
    let file = dir.join("results.jsonl");
    ok(&[
        "synth",
        "--constraints",
        "2^10",
        "--reps",
        "1",
        "--label",
        "run \"1\" of the day",
        "--json-out",
        file.to_str().unwrap(),
    ]);
    let line = std::fs::read_to_string(&file).unwrap();
    assert_eq!(json(&line)["label"], "run \"1\" of the day");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_filecoin_measures_pinprove_against_filecoin_proofs() {
    let out = ok(&["filecoin", "--kind", "winning", "--reps", "1", "--json"]);
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["circuit"], "winning-2k");
    assert_eq!(r["partitions"], 1);
    assert!(r["constraints_per_partition"].as_u64().unwrap() > 50_000, "{r}");
    assert!(r["pinprove_total_s"].as_f64().unwrap() > 0.0);
    assert!(r["filecoin_proofs_total_s"].as_f64().unwrap() > 0.0);
    assert!(r["speedup"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_simulated_day_reports_the_device_busy_and_what_failed_was_refused_or_unfinished() {
    let dir = temp_dir("sim-day");
    let svg = dir.join("day.svg");
    let out = ok(&[
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
        "--planned",
        "--timeline",
        svg.to_str().unwrap(),
        "--json",
    ]);
    let r = json(&out);
    assert_eq!(r["backend"], "simulated");
    assert!(r["device_busy"].as_f64().unwrap() > 0.5, "{r}");
    for key in ["failed", "refused", "unfinished"] {
        assert_eq!(r[key], 0, "{key}: {r}");
    }
    assert_eq!(r["wpost"].as_array().unwrap().len(), 6, "{r}");
    assert!(r["simulated"]["policy"]["prefetch"].as_bool().unwrap(), "{r}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    // Its ideas one by one, as a table.
    let table = ok(&[
        "day",
        "--simulate",
        "--minutes",
        "6",
        "--wpost-first",
        "60",
        "--each-idea",
    ]);
    assert!(
        table.contains("| the engine's rules |") && table.contains("| every idea |"),
        "{table}"
    );
    // What only the simulation models needs it.
    fails_with(&["day", "--host-memory", "64GiB"], 2, "--simulate");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_day_times_each_post_and_counts_parameter_loads() {
    // No sealing stream: a WindowPoSt partition and a WinningPoSt, at
    // once, for a few seconds.
    let out = ok(&[
        &SHORT_DAY[..],
        &[
            "--wpost-every",
            "60",
            "--winning-every",
            "60",
            "--preload",
            "winning",
            "--json",
        ],
    ]
    .concat());
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["benchmark"], "day");
    assert_eq!(r["porep_proofs"], 0);
    for kind in ["wpost", "winning"] {
        let l = r[kind].as_array().unwrap();
        assert_eq!(l.len(), 1, "{r}");
        assert!(l[0]["took_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let loads = r["srs_loads"].as_array().unwrap();
    let loaded = |id: &str| loads.iter().find(|e| e[0] == id).map(|e| e[1].as_u64().unwrap());
    assert_eq!(loaded("winning-2k"), Some(1), "preloaded once: {r}");
    assert_eq!(loaded("wpost-2k"), Some(1), "loaded for its proof: {r}");
    assert_eq!(loaded("porep-2k"), Some(0), "registered, never needed: {r}");
    // Recorded before the day, as a daemon that has been up holds them.
    let recorded: Vec<&str> = r["recorded_before_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_str().unwrap())
        .collect();
    assert_eq!(recorded, ["porep-2k", "wpost-2k"], "{r}");
}

#[test]
fn bench_day_bursts_window_posts_and_reads_parameters_from_a_directory() {
    let dir = temp_dir("day-params");
    let cache = dir.join("cache");
    let params = dir.join("params");
    std::fs::create_dir_all(&params).unwrap();
    let day = |extra: &[&str]| -> serde_json::Value {
        let mut args = SHORT_DAY.to_vec();
        args.extend_from_slice(&[
            "--wpost-every",
            "60",
            "--wpost-burst",
            "2",
            "--winning-every",
            "0",
            "--preload",
            "winning",
            "--record",
            "wpost",
            "--json",
        ]);
        args.extend_from_slice(extra);
        let out = bench_cached(&args, &cache);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from = |r: &serde_json::Value, id: &str| {
        let l = r["params_from"].as_array().unwrap();
        l.iter().find(|e| e[0] == id).unwrap()[1].as_str().unwrap().to_string()
    };
    // No file: made in memory; the burst's two partitions both proved, the
    // parameters loaded once, inside the day.
    let r = day(&["--params-dir", params.to_str().unwrap()]);
    assert_eq!(r["wpost"].as_array().unwrap().len(), 2, "{r}");
    assert!(from(&r, "wpost-2k").starts_with("made in memory"), "{r}");
    let spans = r["srs_load_spans"].as_array().unwrap();
    assert_eq!(spans.iter().filter(|s| s[0] == "wpost-2k").count(), 1, "{r}");
    // The shape that run counted makes a file; the next day reads it.
    let file = params.join("wpost-2k.params");
    let out = bench_cached(
        &[
            "circuit-params",
            "filecoin",
            "--kind",
            "wpost",
            "--sector-size",
            "2KiB",
            "--out",
            file.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = day(&["--params-dir", params.to_str().unwrap()]);
    assert!(from(&r, "wpost-2k").starts_with("read from"), "{r}");
    assert!(from(&r, "winning-2k").starts_with("made in memory"), "{r}");
    assert_eq!(r["wpost"].as_array().unwrap().len(), 2, "{r}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_shape_counts_a_post_circuit_in_parts() {
    let r = json(&ok(&["shape", "--kind", "wpost", "--sector-size", "2KiB", "--json"]));
    assert_eq!(r["benchmark"], "shape");
    assert_eq!(r["circuit"], "wpost-2k");
    assert!(r["shape"]["constraints"].as_u64().unwrap() > 0, "{r}");
    assert!(r["equals_production"].is_null(), "no measured 2 KiB shape: {r}");
    fails_with(&["shape", "--sector-size", "3KiB"], 1, "sector size");
}

#[test]
fn circuit_parameters_are_read_back_by_bellperson_and_by_us() {
    use pinprove_groth16::{Srs, Validation};
    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};

    let dir = temp_dir("circuit-params");
    let pool = PinnedPool::new(
        std::sync::Arc::new(HeapAllocator::new(false)),
        MemoryBudget::new(1 << 30),
        PoolConfig::default(),
    );
    let real = dir.join("bits.params");
    let r = real.to_str().unwrap();
    ok(&[
        "circuit-params",
        "generate",
        "--circuit",
        "bench-bits",
        "--constraints",
        "600",
        "--out",
        r,
    ]);
    let bytes = std::fs::read(&real).unwrap();
    let theirs = bellperson::groth16::Parameters::<blstrs::Bls12>::read(&bytes[..], true).expect("bellperson reads it");
    assert_eq!(theirs.vk.ic.len(), 5);
    let ours = Srs::read_file(&real, &pool, Validation::Subgroup).unwrap();
    assert_eq!(ours.lengths().h + 1, 1 << 10);

    let synthetic = dir.join("s.params");
    let s = synthetic.to_str().unwrap();
    let out = ok(&[
        "circuit-params",
        "synthetic",
        "--circuit",
        "bench-random",
        "--constraints",
        "2^11",
        "--out",
        s,
    ]);
    assert!(out.contains("do not verify"), "{out}");
    let srs = Srs::read_file(&synthetic, &pool, Validation::OnCurve).unwrap();
    assert_eq!(srs.lengths().h + 1, 1 << 11);
    std::fs::remove_dir_all(&dir).unwrap();
}
