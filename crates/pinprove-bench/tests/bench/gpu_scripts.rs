//! The GPU machine's scripts, run here with stand-ins for the GPU:
//! `scripts/gpu-capped` leaves the card as it found it however it ends, and
//! `scripts/gpu-check` refuses to measure on a card something else holds
//! and writes one line per part into its table.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A memory holder that holds nothing: it writes its pid, says "holding"
/// and sleeps; with FAKE_HOLDER_FAILS it fails as the real one does when
/// the card is already held.
fn fake_holder(dir: &Path) -> PathBuf {
    let path = dir.join("holder");
    executable(
        &path,
        &format!(
            "#!/usr/bin/env bash\n\
             echo $$ > {pid}\n\
             if [[ -n \"${{FAKE_HOLDER_FAILS:-}}\" ]]; then\n\
             echo \"cannot leave $1 GiB free: 64.00 GiB of the card is in use\" >&2; exit 1; fi\n\
             echo \"holding 0.00 GiB of GPU 0; free $1 GiB\"\n\
             exec sleep 600\n",
            pid = dir.join("holder.pid").display()
        ),
    );
    path
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().and_then(|s| s.split_whitespace().next()) == Some("Z"),
    }
}

fn holder_pid(dir: &Path) -> u32 {
    let file = dir.join("holder.pid");
    let t = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(&file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "the holder never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_ends(pid: u32, what: &str) {
    let t = Instant::now();
    while !ended(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: the memory holder ({pid}) is still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn capped(dir: &Path, cmd: &[&str]) -> Command {
    let mut c = Command::new(root().join("scripts/gpu-capped"));
    c.arg("15").args(cmd).env("GPU_CAPPED_HOLDER", fake_holder(dir));
    c
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-gpu-scripts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn gpu_capped_releases_the_card_however_it_ends() {
    let dir = temp("capped");
    // A command that ends: its status comes back, the holder goes.
    let out = capped(&dir, &["bash", "-c", "exit 3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("holding"));
    assert_ends(holder_pid(&dir), "after the command ended");

    // Stopped by a signal to the script alone (as `timeout` stops it).
    for sig in ["-TERM", "-INT", "-HUP", "-KILL"] {
        std::fs::remove_file(dir.join("holder.pid")).unwrap();
        let mut child = capped(&dir, &["sleep", "600"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let holder = holder_pid(&dir);
        std::thread::sleep(Duration::from_millis(300));
        signal(&child, sig);
        let status = child.wait().unwrap();
        assert!(!status.success(), "{sig}: {status:?}");
        assert_ends(holder, &format!("after {sig}"));
    }
}

#[test]
fn gpu_capped_says_why_when_the_card_is_already_held_and_runs_nothing() {
    let dir = temp("held");
    let marker = dir.join("ran");
    let out = capped(&dir, &["touch", marker.to_str().unwrap()])
        .env("FAKE_HOLDER_FAILS", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("64.00 GiB of the card is in use"), "{err}");
    assert!(err.contains("could not leave 15 GiB free"), "{err}");
    assert!(!marker.exists(), "the command ran on a card held by something else");
}

/// A machine for `scripts/gpu-check`: an `nvidia-smi` that reports
/// `used_mib` of the card in use, a `pinprove-bench` that writes a smoke's
/// JSON at once, a holder that holds nothing and a table of its own.
struct FakeGpu {
    dir: PathBuf,
    table: PathBuf,
}

impl FakeGpu {
    fn new(name: &str, used_mib: u32, table_rows: &str) -> FakeGpu {
        let dir = temp(name);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        executable(
            &bin.join("nvidia-smi"),
            &format!(
                "#!/usr/bin/env bash\n\
                 case \"$*\" in\n\
                 *name,driver_version*) echo 'Fake H100, 580.1' ;;\n\
                 *memory.used,memory.total*) echo '{used_mib}, 81559' ;;\n\
                 *utilization.gpu*) echo 0 ;;\n\
                 *query-compute-apps*) [ {used_mib} -gt 2048 ] && echo '4242, python3, {used_mib} MiB' ;;\n\
                 esac\n\
                 exit 0\n"
            ),
        );
        // seconds_per_proof by kind; the settings the bench prints.
        executable(
            &bin.join("pinprove-bench"),
            "#!/usr/bin/env python3\n\
             import json, sys\n\
             a = sys.argv[1:]\n\
             kind = a[a.index('--kind') + 1]\n\
             s = {'porep': 25.0, 'snap': 35.0, 'wpost': 12.0}[kind]\n\
             if '--partitions-sharing-bases' in a: p = a[a.index('--partitions-sharing-bases') + 1]\n\
             else: p = '1'\n\
             r = {'gpu_settings': 'srs_placement=device queue_depth=2 prep_threads=0 workers_per_device=2 '\n\
                  'memory_limit=none partitions_sharing_bases=' + p,\n\
                  'proving': {'seconds_per_proof': s, 'first_proof_s': s + 1}}\n\
             open(a[a.index('--json-out') + 1], 'a').write(json.dumps(r) + '\\n')\n\
             print('proved', kind)\n",
        );
        let table = dir.join("gpu-checks.md");
        std::fs::write(
            &table,
            format!(
                "# GPU checks\n\n\
                 | date | commit | GPU | driver | part | GPU settings | tests | porep-15 (s/proof) | snap-15 (s/update) | wpost-15 (s/partition) | porep-full (s/proof) | wall | result |\n\
                 |---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
                 {table_rows}\nNotes below the table.\n"
            ),
        )
        .unwrap();
        FakeGpu { dir, table }
    }

    fn check(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new(root().join("scripts/gpu-check"))
            .args(args)
            .env("PATH", path)
            .env("GPU_CHECK_BIN", self.dir.join("bin"))
            .env("GPU_CHECK_TABLE", &self.table)
            .env("GPU_CHECK_HINTS", self.dir.join("hints"))
            .env("GPU_CHECK_COMMIT", "abcdef1")
            .env("GPU_CAPPED_HOLDER", fake_holder(&self.dir))
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    fn rows(&self) -> Vec<String> {
        std::fs::read_to_string(&self.table)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("| 20"))
            .map(str::to_string)
            .collect()
    }
}

#[test]
fn gpu_check_smokes_write_their_line_inside_the_table() {
    let gpu = FakeGpu::new("smokes", 400, "");
    let out = gpu.check(
        &["smokes", gpu.dir.join("results").to_str().unwrap()],
        &[("GPU_CHECK_ARGS", "--partitions-sharing-bases 2")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("PoRep at 15 GiB free: 1.000x the whole card's"), "{text}");
    let rows = gpu.rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let cells: Vec<&str> = rows[0].trim_matches('|').split('|').map(str::trim).collect();
    assert_eq!(cells[1], "abcdef1");
    assert_eq!(cells[2], "Fake H100");
    assert_eq!(cells[4], "smokes");
    assert!(cells[5].ends_with("partitions_sharing_bases=2"), "{cells:?}");
    assert_eq!(&cells[7..11], ["25.0", "36.0", "12.0", "25.0"]);
    assert_eq!(cells[12], "pass");
    // The line went under the table, above its notes.
    let table = std::fs::read_to_string(&gpu.table).unwrap();
    assert!(table.find(&rows[0]).unwrap() < table.find("Notes below").unwrap());
}

#[test]
fn gpu_check_fails_a_run_on_a_card_something_else_holds_and_a_slower_figure() {
    // 40 GiB of the card in use before the run: the step fails with the
    // numbers, and its figure is never taken.
    let gpu = FakeGpu::new("busy", 40960, "");
    let out = gpu.check(&["smokes"], &[("GPU_CHECK_ONLY", "porep-full")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("something else holds GPU 0: 40.00 GiB of 79.65 GiB in use"),
        "{text}"
    );
    assert!(text.contains("4242, python3"), "{text}");
    assert!(gpu.rows()[0].ends_with("| FAIL: porep-full |"), "{:?}", gpu.rows());

    // A figure more than 1.25x the last passing smokes line's fails it.
    let before = "| 2026-12-01 | 1234567 | Fake H100 | 580.1 | smokes | srs_placement=device queue_depth=2 \
                  prep_threads=0 workers_per_device=2 memory_limit=none partitions_sharing_bases=1 | - | \
                  19.0 | 36.0 | 12.0 | 19.0 | 6.0 min | pass |";
    let gpu = FakeGpu::new("slower", 400, before);
    let out = gpu.check(&["smokes"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("porep-15: 25.0 s/proof") && text.contains("1.32x the last passing line's 19.0"),
        "{text}"
    );
    assert!(
        gpu.rows()[1].ends_with("| FAIL: porep-15, porep-full |"),
        "{:?}",
        gpu.rows()
    );
}

#[test]
fn gpu_check_names_its_parts() {
    let gpu = FakeGpu::new("usage", 400, "");
    for bad in [&[][..], &["--record"][..], &["all"][..]] {
        let out = gpu.check(bad, &[]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: gpu-check {record|tests|smokes}"));
    }
    let out = gpu.check(&["smokes"], &[("GPU_CHECK_ONLY", "porep-99")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(gpu.rows().is_empty());
}
