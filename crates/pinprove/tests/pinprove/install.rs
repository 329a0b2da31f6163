//! The operator's scripts: `scripts/install-host` into a staging
//! directory, and `scripts/release-bundle` with its checksum.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script(name: &str, args: &[&str]) -> Output {
    Command::new(repo().join("scripts").join(name))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pinprove-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn install_host_puts_the_binary_configuration_and_unit_in_place_and_keeps_a_configuration() {
    let dest = scratch("install");
    let d = dest.to_str().unwrap();
    let args = [
        "--destdir",
        d,
        "--binary",
        env!("CARGO_BIN_EXE_pinprove"),
        "--example",
        "16gb-card-128gib-host",
        "--user",
        "alice",
        "--no-selftest",
    ];
    let o = script("install-host", &args);
    assert!(o.status.success(), "{}", text(&o));
    let bin = dest.join("usr/local/bin/pinprove");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&bin).unwrap().permissions().mode() & 0o777, 0o755);
    let example = std::fs::read_to_string(repo().join("deploy/examples/16gb-card-128gib-host.toml")).unwrap();
    let config = dest.join("etc/pinprove/pinprove.toml");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), example);
    let unit = std::fs::read_to_string(dest.join("etc/systemd/system/pinprove.service")).unwrap();
    assert!(
        unit.contains("\nUser=alice\n") && unit.contains("\nGroup=alice\n"),
        "{unit}"
    );
    assert!(unit.contains("\nExecStart=/usr/local/bin/pinprove serve --config /etc/pinprove/pinprove.toml\n"));
    // Again, over an operator's own configuration: kept, the new default beside it.
    std::fs::write(&config, "listen = \"127.0.0.1:9999\"\n").unwrap();
    let o = script("install-host", &args);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "listen = \"127.0.0.1:9999\"\n"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("etc/pinprove/pinprove.toml.new")).unwrap(),
        example
    );
    assert!(text(&o).contains("kept"), "{}", text(&o));
    // A configuration the daemon cannot read stops the install.
    std::fs::write(&config, "listen = 7\n").unwrap();
    let o = script("install-host", &args);
    assert!(!o.status.success());
    assert!(text(&o).contains("does not read back"), "{}", text(&o));
    // An example that does not exist is named with those that do.
    let o = script(
        "install-host",
        &["--destdir", d, "--example", "8gb-card", "--no-selftest"],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("no example 8gb-card") && text(&o).contains("80gb-card-512gib-host"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&dest).unwrap();
}

#[test]
fn a_release_bundle_holds_what_a_host_needs_and_its_checksum_matches() {
    let out = scratch("bundle");
    // Any executable stands for the GPU build here: the bundle strips and packs it.
    let o = script(
        "release-bundle",
        &["--binary", "/bin/true", "--out", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let tarball = PathBuf::from(String::from_utf8_lossy(&o.stdout).lines().next().unwrap());
    assert!(tarball.starts_with(&out) && tarball.exists(), "{}", text(&o));
    let check = Command::new("sha256sum")
        .arg("-c")
        .arg(format!("{}.sha256", tarball.display()))
        .current_dir(&out)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check));
    let list = Command::new("tar").arg("-tzf").arg(&tarball).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for f in [
        "/pinprove",
        "/README",
        "/scripts/install-host",
        "/deploy/pinprove.service",
        "/deploy/pinprove.toml",
        "/deploy/grafana-dashboard.json",
        "/deploy/examples/16gb-card-128gib-host.toml",
        "/deploy/examples/24gb-card-256gib-host.toml",
        "/deploy/examples/80gb-card-512gib-host.toml",
    ] {
        assert!(list.lines().any(|l| l.ends_with(f)), "{f} missing from {list}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
