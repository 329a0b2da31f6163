//! The rule that keeps GPU defaults measured: the newest commit that passed
//! `scripts/gpu-check` (its lines in `docs/gpu-checks.md`) ran with the
//! native backend's default settings. A default that changes what runs on
//! the GPU (pairing, queue depth, placement) therefore lands together with
//! a passing check of it, never before.
//!
//! The check runs in parts, one device call each, and writes a line per
//! part: a commit passes on a GPU model when its `tests` and `smokes` parts
//! both passed there (or one line of part `all`, the older single-call
//! check). Every line of the table must parse: a row that cannot be read
//! fails the test instead of being skipped.

use crate::NativeOptions;

/// One line of the table, as read.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    commit: String,
    gpu: String,
    part: Part,
    settings: Option<String>,
    passed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Tests,
    Smokes,
    All,
}

const COLUMNS: [&str; 13] = [
    "date",
    "commit",
    "GPU",
    "driver",
    "part",
    "GPU settings",
    "tests",
    "porep-15 (s/proof)",
    "snap-15 (s/update)",
    "wpost-15 (s/partition)",
    "porep-full (s/proof)",
    "wall",
    "result",
];

/// The names `GPU settings` gives, in their order.
const SETTINGS: [&str; 7] = [
    "srs_placement",
    "queue_depth",
    "prep_threads",
    "workers_per_device",
    "memory_limit",
    "partitions_sharing_bases",
    "msm_kernel",
];

/// Settings added after lines were written, with the value every build ran
/// before the setting existed: a line without one ran that value.
const ADDED_LATER: [(&str, &str); 1] = [("msm_kernel", "sppark")];

/// A line's settings with those added later written out.
fn completed(settings: &str) -> String {
    let mut s = settings.to_string();
    for (name, value) in ADDED_LATER {
        if !s.split(' ').any(|w| w.split('=').next() == Some(name)) {
            s.push_str(&format!(" {name}={value}"));
        }
    }
    s
}

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// Reads every row of the table, or says which line is malformed and why.
fn rows(table: &str) -> Result<Vec<Row>, String> {
    let mut lines = table
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with('|'));
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    if cells(header) != COLUMNS {
        return Err(format!("the header is {:?}, not {COLUMNS:?}", cells(header)));
    }
    let mut rows = Vec::new();
    for (n, line) in lines {
        let bad = |why: String| format!("line {}: {why}: {line}", n + 1);
        let c = cells(line);
        if c.iter().all(|x| x.chars().all(|ch| ch == '-' || ch == ':')) {
            continue; // the separator under the header
        }
        if c.len() != COLUMNS.len() {
            return Err(bad(format!("{} cells, not {}", c.len(), COLUMNS.len())));
        }
        let date = c[0].as_bytes();
        let date_ok = date.len() == 10
            && date.iter().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    *b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        if !date_ok {
            return Err(bad(format!("the date {:?} is not YYYY-MM-DD", c[0])));
        }
        if c[1].is_empty() || c[2].is_empty() || c[3].is_empty() {
            return Err(bad("no commit, GPU or driver".into()));
        }
        let part = match c[4].as_str() {
            "tests" => Part::Tests,
            "smokes" => Part::Smokes,
            "all" => Part::All,
            other => return Err(bad(format!("the part {other:?} is none of tests, smokes, all"))),
        };
        let settings = match c[5].as_str() {
            "-" | "?" => None,
            s => {
                let s = &completed(s);
                let names: Vec<&str> = s.split(' ').map(|w| w.split('=').next().unwrap_or("")).collect();
                let well_formed = s
                    .split(' ')
                    .all(|w| matches!(w.split_once('='), Some((k, v)) if !k.is_empty() && !v.is_empty()));
                if !well_formed || names != SETTINGS {
                    return Err(bad(format!(
                        "the GPU settings {s:?} are not {SETTINGS:?} as name=value words"
                    )));
                }
                Some(s.to_string())
            }
        };
        for (i, figure) in c.iter().enumerate().take(11).skip(7) {
            if figure != "-" && figure.parse::<f64>().is_err() {
                return Err(bad(format!("{} {figure:?} is not a number or -", COLUMNS[i])));
            }
        }
        let result = c[12].as_str();
        let passed = result == "pass";
        if !(passed || result == "partial" || result.starts_with("FAIL: ")) {
            return Err(bad(format!(
                "the result {result:?} is none of pass, partial, FAIL: ..."
            )));
        }
        if passed && part != Part::Tests && settings.is_none() {
            return Err(bad("a passing smokes line without its GPU settings".into()));
        }
        rows.push(Row {
            commit: c[1].clone(),
            gpu: c[2].clone(),
            part,
            settings,
            passed,
        });
    }
    Ok(rows)
}

/// A build the line can name as passing: a commit, not a tree with changes.
fn is_commit(c: &str) -> bool {
    (7..=40).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The GPU settings of the newest commit that passed on some GPU model
/// (both parts, or an `all` line), with that commit and model: newest is
/// the one whose last needed line comes last in the table.
fn newest_passing(rows: &[Row]) -> Option<(String, String, String)> {
    let mut found = None;
    for (i, row) in rows.iter().enumerate() {
        if !row.passed || !is_commit(&row.commit) {
            continue;
        }
        let passed = |part: Part| {
            rows[..=i]
                .iter()
                .rev()
                .find(|r| r.passed && r.part == part && r.commit == row.commit && r.gpu == row.gpu)
        };
        let smokes = match row.part {
            Part::All => Some(row),
            _ => passed(Part::Tests).and(passed(Part::Smokes)),
        };
        if let Some(s) = smokes {
            let settings = s
                .settings
                .clone()
                .expect("a passing smokes line has settings (checked in rows)");
            found = Some((settings, row.commit.clone(), row.gpu.clone()));
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
    let rows = rows(&table).unwrap_or_else(|e| panic!("docs/gpu-checks.md: {e}"));
    assert!(!rows.is_empty(), "docs/gpu-checks.md has no table");
    // The backend's own defaults and the stack's reading of them: one place.
    let backend = pinprove_cuda::NativeConfig::default().settings();
    let stack = NativeOptions::default().settings();
    assert_eq!(backend, stack, "the stack's GPU defaults are not the backend's");
    let Some((settings, commit, gpu)) = newest_passing(&rows) else {
        assert_eq!(
            backend, BEFORE_THE_FIRST_CHECK,
            "docs/gpu-checks.md has no passing commit yet: a GPU default changes only with one"
        );
        return;
    };
    assert_eq!(
        settings, backend,
        "the GPU defaults differ from those of the newest commit that passed scripts/gpu-check \
         ({commit} on {gpu}): a GPU default changes only with passing gpu-check lines that ran it"
    );
}

const HEADER: &str = "\
| date | commit | GPU | driver | part | GPU settings | tests | porep-15 (s/proof) | snap-15 (s/update) | wpost-15 (s/partition) | porep-full (s/proof) | wall | result |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
";

fn line(commit: &str, gpu: &str, part: &str, pairing: u32, result: &str) -> String {
    let settings = if part == "tests" {
        "-".to_string()
    } else {
        format!(
            "srs_placement=device queue_depth=2 prep_threads=0 workers_per_device=2 memory_limit=none partitions_sharing_bases={pairing}"
        )
    };
    format!(
        "| 2026-12-08 | {commit} | {gpu} | 580.1 | {part} | {settings} | 1/1 | 25.8 | - | 13.5 | - | 6.1 min | {result} |\n"
    )
}

#[test]
fn a_commit_passes_when_both_parts_passed_on_one_gpu_model() {
    let table = |lines: &[String]| format!("{HEADER}{}", lines.concat());
    let read = |lines: &[String]| newest_passing(&rows(&table(lines)).unwrap()).map(|(s, c, _)| (s, c));
    let pairing = |s: String| {
        let word = s
            .split(' ')
            .find(|w| w.starts_with("partitions_sharing_bases="))
            .unwrap();
        word.split('=').nth(1).unwrap().to_string()
    };

    // One part alone, or both but on different GPU models: no pass.
    assert_eq!(read(&[line("aaaaaaa", "H100", "smokes", 2, "pass")]), None);
    assert_eq!(
        read(&[
            line("aaaaaaa", "H100", "tests", 2, "pass"),
            line("aaaaaaa", "H200", "smokes", 2, "pass")
        ]),
        None
    );
    // A failed or partial part: no pass; a tree with changes never passes.
    assert_eq!(
        read(&[
            line("aaaaaaa", "H100", "tests", 2, "FAIL: tests"),
            line("aaaaaaa", "H100", "smokes", 2, "pass")
        ]),
        None
    );
    assert_eq!(
        read(&[
            line("aaaaaaa", "H100", "tests", 2, "pass"),
            line("aaaaaaa", "H100", "smokes", 2, "partial")
        ]),
        None
    );
    assert_eq!(
        read(&[
            line("aaaaaaa+changes", "H100", "tests", 2, "pass"),
            line("aaaaaaa+changes", "H100", "smokes", 2, "pass")
        ]),
        None
    );
    // Both parts, in either order, with other lines between.
    let (s, c) = read(&[
        line("bbbbbbb", "H100", "smokes", 2, "pass"),
        line("ccccccc", "H100", "tests", 1, "FAIL: tests"),
        line("bbbbbbb", "H100", "tests", 2, "pass"),
    ])
    .unwrap();
    assert_eq!((pairing(s), c.as_str()), ("2".to_string(), "bbbbbbb"));
    // The newest passing commit wins; an `all` line passes alone.
    let (s, c) = read(&[
        line("bbbbbbb", "H100", "tests", 2, "pass"),
        line("bbbbbbb", "H100", "smokes", 2, "pass"),
        line("ddddddd", "H100", "all", 1, "pass"),
    ])
    .unwrap();
    assert_eq!((pairing(s), c.as_str()), ("1".to_string(), "ddddddd"));
}

#[test]
fn a_line_that_does_not_parse_fails_instead_of_being_skipped() {
    let good = line("aaaaaaa", "H100", "smokes", 2, "pass");
    assert!(rows(&format!("{HEADER}{good}")).is_ok());
    let broken = [
        good.replacen(" | H100 |", " | H100 | extra |", 1),
        good.replace("2026-12-08", "Dec 8"),
        good.replace("| smokes |", "| smoke |"),
        good.replace("partitions_sharing_bases=2", "partitions_sharing_bases"),
        good.replace("queue_depth=2 ", ""),
        good.replace("| 25.8 |", "| fast |"),
        good.replace("| pass |", "| passed |"),
        good.replace(
            "srs_placement=device queue_depth=2 prep_threads=0 workers_per_device=2 memory_limit=none partitions_sharing_bases=2",
            "?",
        ),
    ];
    for b in broken {
        assert!(rows(&format!("{HEADER}{b}")).is_err(), "accepted: {b}");
    }
    assert!(rows("| date | commit |\n|---|---|\n").is_err(), "an old header");
}

#[test]
fn a_line_from_before_a_setting_existed_ran_its_first_value() {
    let old = line("aaaaaaa", "H100", "all", 2, "pass");
    let (settings, ..) = newest_passing(&rows(&format!("{HEADER}{old}")).unwrap()).unwrap();
    assert!(
        settings.ends_with("partitions_sharing_bases=2 msm_kernel=sppark"),
        "{settings}"
    );
    let new = old.replace(
        "partitions_sharing_bases=2 |",
        "partitions_sharing_bases=2 msm_kernel=tables |",
    );
    let (settings, ..) = newest_passing(&rows(&format!("{HEADER}{new}")).unwrap()).unwrap();
    assert!(settings.ends_with("msm_kernel=tables"), "{settings}");
    let misplaced = old.replace("srs_placement=device", "msm_kernel=tables srs_placement=device");
    assert!(
        rows(&format!("{HEADER}{misplaced}")).is_err(),
        "a setting out of its place"
    );
}
