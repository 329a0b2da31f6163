//! The Filecoin commands as a user runs them: `demo` (saving its inputs),
//! `prove` from those files in this process and through `pinprove serve`,
//! `status`, and SIGTERM with a proof in flight.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn pinprove() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pinprove"));
    c.env("PINPROVE_LOG", "warn");
    c
}

fn run(args: &[String]) -> Output {
    pinprove().args(args).output().expect("the binary runs")
}

fn ok(args: &[String]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "pinprove {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `pinprove prove` command lines the demo saved, by proof name.
fn saved_commands(dir: &Path) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(dir.join("commands.txt")).unwrap();
    text.lines()
        .map(|l| {
            let words: Vec<String> = l.split_whitespace().map(String::from).collect();
            assert_eq!(words[..2], ["pinprove", "prove"], "{l}");
            let out = words.iter().position(|w| w == "--out").unwrap();
            let name = Path::new(&words[out + 1])
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, words[1..].to_vec())
        })
        .collect()
}

/// A `pinprove serve` process, killed if the test fails before it ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn demo_inputs_prove_in_process_and_through_a_daemon_that_drains_on_sigterm() {
    let dir = temp_dir("demo");
    let inputs = dir.join("inputs");
    let out = ok(&strings(&["demo", "--save-inputs", inputs.to_str().unwrap()]));
    assert!(
        out.contains("WindowPoSt of sectors [1, 2, 3] in 2 partitions: verified by filecoin-proofs-api"),
        "{out}"
    );
    assert!(out.contains("WinningPoSt: verified by filecoin-proofs-api"), "{out}");
    assert!(out.contains("memory: budget"), "{out}");
    let commands = saved_commands(&inputs);
    let names: Vec<&str> = commands.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["wpost-0", "wpost-1", "winning"]);

    // In this process, as JSON.
    let (_, wpost) = &commands[0];
    let mut args = wpost.clone();
    args.push("--json".into());
    let r: serde_json::Value = serde_json::from_str(ok(&args).trim()).unwrap();
    assert_eq!(r["proof_bytes"], 192);
    assert!(r["synthesis_ms"].as_u64().is_some() && r["total_ms"].as_u64().unwrap() > 0);
    assert_eq!(std::fs::read(inputs.join("wpost-0.proof")).unwrap().len(), 192);

    // A daemon on a unix socket; status while idle.
    let socket = dir.join("run").join("pinprove.sock");
    let daemon = format!("unix://{}", socket.display());
    let config = dir.join("pinprove.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"{daemon}\"\nhttp_listen = \"\"\n[gpu]\nbackend = \"cpu\"\n[hints]\ndir = \"{}\"\n",
            dir.join("hints").display()
        ),
    )
    .unwrap();
    let printed = ok(&strings(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--print-config",
    ]));
    assert!(printed.contains(&format!("listen = \"{daemon}\"")), "{printed}");
    let mut serve = Serve(
        pinprove()
            .args(["serve", "--config", config.to_str().unwrap()])
            .env("PINPROVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for("the socket", Duration::from_secs(60), || socket.exists());
    let status_args = strings(&["status", "--daemon", &daemon]);
    let idle = ok(&status_args);
    assert!(idle.contains("0 proofs completed, 0 failed"), "{idle}");
    assert!(idle.contains("winning 0 waiting, 0 proving"), "{idle}");

    // The WinningPoSt through it; SIGTERM while it is being proved.
    let (_, winning) = &commands[2];
    let mut args = winning.clone();
    args.extend(["--daemon".into(), daemon.clone()]);
    let proving = pinprove()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the proof to be in progress", Duration::from_secs(120), || {
        ok(&status_args).contains("winning 0 waiting, 1 proving")
    });
    let term = Command::new("kill")
        .args(["-TERM", &serve.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let proved = proving.wait_with_output().unwrap();
    assert!(
        proved.status.success(),
        "the proof in flight finishes: {}",
        String::from_utf8_lossy(&proved.stderr)
    );
    assert!(String::from_utf8_lossy(&proved.stdout).contains("192 bytes of proof written"));
    let status = serve.0.wait().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(serve.0.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(status.success(), "the daemon exits cleanly after SIGTERM:\n{log}");
    for said in ["SIGTERM", "shutting down", "proof done", "pinprove daemon stopped"] {
        assert!(log.contains(said), "{said:?} not in the log:\n{log}");
    }
    assert!(!socket.exists(), "the socket is removed at exit");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_prove_and_serve_arguments_are_clear_errors() {
    let dir = temp_dir("bad");
    let fails = |args: &[&str], code: i32, says: &str| {
        let out = run(&strings(args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}:\n{stderr}");
        assert!(stderr.contains(says), "{args:?} should say {says:?}:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
    };
    fails(&["prove", "--kind", "porep"], 1, "porep needs --vanilla-proof");
    fails(
        &["prove", "--kind", "wpost", "--vanilla-proofs", "/nonexistent"],
        1,
        "reading /nonexistent",
    );
    fails(
        &["prove", "--kind", "winning", "--randomness", "00"],
        2,
        "1 bytes, not 32",
    );
    fails(&["prove", "--kind", "sealing"], 2, "unknown proof kind");
    let v = dir.join("v.bin");
    std::fs::write(&v, b"not a vanilla proof").unwrap();
    let v = v.to_str().unwrap();
    fails(
        &["prove", "--kind", "winning", "--vanilla-proofs", v],
        1,
        "winning needs --randomness",
    );
    let r = "11".repeat(32);
    fails(
        &[
            "prove",
            "--kind",
            "winning",
            "--vanilla-proofs",
            v,
            "--randomness",
            &r,
            "--registered-proof",
            "0",
        ],
        1,
        "InvalidArgument",
    );
    fails(
        &["status", "--daemon", "unix:///nonexistent/pinprove.sock"],
        1,
        "connecting to",
    );
    let config = dir.join("c.toml");
    std::fs::write(&config, "listen_on = \"x\"\n").unwrap();
    fails(&["serve", "--config", config.to_str().unwrap()], 1, "listen_on");
    std::fs::remove_dir_all(&dir).unwrap();
}
