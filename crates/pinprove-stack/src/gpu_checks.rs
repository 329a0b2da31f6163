//! The rule that keeps GPU defaults measured: the newest passing line of
//! `docs/gpu-checks.md` (written by `scripts/gpu-check`) ran with the
//! native backend's default settings. A default that changes what runs on
//! the GPU (pairing, queue depth, placement) therefore lands together with
//! a passing check of it, never before.

use crate::NativeOptions;

/// The GPU settings of the newest line whose result is "pass", and the
/// line itself.
fn newest_passing(table: &str) -> Option<(String, String)> {
    let mut header: Option<Vec<String>> = None;
    let mut found = None;
    for line in table.lines().filter(|l| l.trim_start().starts_with('|')) {
        let cells: Vec<String> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        match &header {
            None => header = Some(cells),
            Some(h) if cells.len() == h.len() => {
                let cell = |name: &str| h.iter().position(|c| c == name).map(|i| cells[i].clone());
                if cell("result").as_deref() == Some("pass") {
                    found = cell("GPU settings").map(|s| (s, line.to_string()));
                }
            }
            Some(_) => {}
        }
    }
    found
}

/// The defaults before the first passing check: those of the builds
/// whose 32 GiB runs passed on a 16 GB card's room (README's figures,
/// 2026-12-06), pairing off (on, it failed every paired partition,
/// 2026-12-07).
const BEFORE_THE_FIRST_CHECK: &str = "srs_placement=device queue_depth=2 prep_threads=0 workers_per_device=2 memory_limit=none partitions_sharing_bases=1";

#[test]
fn the_default_gpu_settings_are_those_of_the_newest_passing_gpu_check() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/gpu-checks.md");
    let table = std::fs::read_to_string(path).unwrap();
    let defaults = NativeOptions::default().settings();
    let Some((settings, line)) = newest_passing(&table) else {
        assert_eq!(
            defaults, BEFORE_THE_FIRST_CHECK,
            "docs/gpu-checks.md has no passing line yet: a GPU default changes only with one"
        );
        return;
    };
    assert_eq!(
        settings, defaults,
        "the GPU defaults differ from those of the newest passing gpu-check line ({line}): \
         a GPU default changes only with a passing scripts/gpu-check line that ran it"
    );
}

#[test]
fn the_newest_passing_line_is_found_and_failures_are_skipped() {
    let table = "\
| date | GPU settings | result |
|---|---|---|
| 2026-01-01 | a=1 | pass |
| 2026-01-02 | a=2 | FAIL: tests |
| 2026-01-03 | a=3 | pass |
| 2026-01-04 | a=4 | partial |
";
    assert_eq!(newest_passing(table).unwrap().0, "a=3");
    assert!(newest_passing("| date | GPU settings | result |\n|---|---|---|\n").is_none());
}
