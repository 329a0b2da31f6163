//! The binary end to end, as a user runs it.

use std::path::PathBuf;
use std::process::{Command, Output};

fn pinprove(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pinprove"))
        .args(args)
        .env("PINPROVE_LOG", "warn")
        .output()
        .expect("the binary runs")
}

fn ok(args: &[&str]) -> String {
    let out = pinprove(args);
    assert!(
        out.status.success(),
        "pinprove {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn parameters_are_read_back_by_bellperson_and_checked_by_params_info() {
    use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
    use pinprove_groth16::setup::{self, ToxicWaste};
    use rand_chacha::rand_core::SeedableRng;

    let dir = temp_dir("params");
    let file = dir.join("bits.params");
    let f = file.to_str().unwrap();
    let waste = ToxicWaste::random(&mut rand_chacha::ChaCha8Rng::seed_from_u64(1));
    let circuit = BenchCircuit::new(600, WitnessMix::Bits).unwrap();
    let mut bytes = Vec::new();
    setup::generate(circuit, &waste, &mut bytes, &|_| {}).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let theirs = bellperson::groth16::Parameters::<blstrs::Bls12>::read(&bytes[..], true).expect("bellperson reads it");
    assert_eq!(theirs.vk.ic.len(), 5);
    let info = ok(&["params", "info", f]);
    assert!(info.contains("valid (Subgroup checks)"), "{info}");
    assert!(info.contains("domain 2^10"), "{info}");

    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let bad = pinprove(&["params", "info", f]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("truncated"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn generated_filecoin_parameters_are_read_back_by_us() {
    // WinningPoSt at 2 KiB: made in seconds where the cache lacks it.
    let out = ok(&["params", "generate", "--sector-size", "2KiB", "--kind", "winning"]);
    let path = out
        .split_whitespace()
        .find(|w| w.ends_with(".params"))
        .unwrap_or_else(|| panic!("a parameter file is named: {out}"));
    let info = ok(&["params", "info", path, "--check", "curve"]);
    assert!(info.contains("valid (OnCurve checks)"), "{info}");
    assert!(info.contains("domain 2^17"), "{info}");
}

/// Runs `args`, which must fail with exit status `code` (1: an error of the
/// command, 2: a bad command line) and say `text` on stderr, without a panic.
fn fails_with(args: &[&str], code: i32, text: &str) {
    let out = pinprove(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "pinprove {args:?}:\n{stderr}");
    assert!(
        stderr.contains(text),
        "pinprove {args:?} should say {text:?}:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "pinprove {args:?} panicked:\n{stderr}");
}

#[test]
fn bad_input_is_a_clear_error() {
    fails_with(&["params", "info", "/nonexistent/file"], 1, "/nonexistent/file");
    fails_with(&["serve", "--devices", "0,x", "--print-config"], 2, "not a GPU ordinal");
    // The measurements are another binary's, and so are the parameters
    // of its built-in circuits.
    fails_with(&["bench", "mem"], 2, "unrecognized subcommand");
    fails_with(&["params", "synthetic", "--out", "x"], 2, "unrecognized subcommand");
    fails_with(&["params", "generate", "--sector-size", "32GiB"], 1, "fetch them");
}

#[test]
fn selftest_reports_the_host_and_fails_on_what_cannot_prove() {
    let out = ok(&["selftest", "--no-proofs", "--backend", "cpu"]);
    assert!(out.contains(" cores, ") && out.contains(" usable"), "{out}");
    assert!(out.contains("proofs: skipped"), "{out}");
    assert!(out.trim_end().ends_with("selftest: passed"), "{out}");
    // Advice for each 32 GiB kind, and what this host cannot prove.
    assert!(out.contains("advice for ") && out.contains("  winning "), "{out}");
    assert!(out.contains("set: [memory] budget = \"auto\""), "{out}");
    // The same as one JSON object, and nothing else on stdout.
    let json: serde_json::Value = serde_json::from_str(&ok(&["selftest", "--json", "--backend", "cpu"])).unwrap();
    assert!(json["budget_bytes"].as_u64().unwrap() > 0, "{json}");
    let kinds = json["advice"][0]["kinds"].as_array().unwrap();
    assert_eq!(
        kinds.iter().map(|k| k["kind"].as_str().unwrap()).collect::<Vec<_>>(),
        ["porep", "snap", "wpost", "winning"]
    );
    assert!(json["problems"].as_array().unwrap().is_empty(), "{json}");
    if cfg!(feature = "cuda") {
        return;
    }
    // This build has no GPU support: a GPU backend cannot prove here.
    let out = pinprove(&["selftest", "--no-proofs", "--backend", "native"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("build: without GPU support"), "{stdout}");
    assert!(
        stdout.contains("problem: the native backend needs a build with the `cuda` feature"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("selftest failed: 1 problem"));
}

#[test]
fn serve_takes_its_devices_from_the_command_line_over_the_file() {
    let dir = temp_dir("serve-devices");
    let file = dir.join("pinprove.toml");
    std::fs::write(&file, "[gpu]\ndevices = \"0\"\n").unwrap();
    let printed = ok(&["serve", "--config", file.to_str().unwrap(), "--print-config"]);
    assert!(printed.contains("devices = \"0\""), "{printed}");
    let printed = ok(&[
        "serve",
        "--config",
        file.to_str().unwrap(),
        "--devices",
        "1,0",
        "--print-config",
    ]);
    assert!(printed.contains("devices = \"1,0\""), "{printed}");
    std::fs::remove_dir_all(&dir).unwrap();
}
