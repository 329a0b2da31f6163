//! Counters and latency histograms, rendered as Prometheus text.

use pinprove_mem::sync::Recover;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

#[derive(Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Engine counters.
#[derive(Default)]
pub struct Metrics {
    pub(crate) proofs_completed: AtomicU64,
    pub(crate) proofs_failed: AtomicU64,
    pub(crate) jobs_cancelled: AtomicU64,
    pub(crate) partitions_rerouted: AtomicU64,
    phases: Mutex<BTreeMap<&'static str, Histogram>>,
}

impl Metrics {
    /// Records one partition phase's latency.
    pub fn observe(&self, phase: &'static str, d: Duration) {
        let s = d.as_secs_f64();
        let mut phases = self.phases.lock().recover();
        let h = phases.entry(phase).or_default();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += s;
    }

    /// Proofs completed since start.
    pub fn proofs_completed(&self) -> u64 {
        self.proofs_completed.load(Ordering::Relaxed)
    }

    /// Proofs failed since start.
    pub fn proofs_failed(&self) -> u64 {
        self.proofs_failed.load(Ordering::Relaxed)
    }

    /// Synthesized partitions moved off a lost device to another.
    pub fn partitions_rerouted(&self) -> u64 {
        self.partitions_rerouted.load(Ordering::Relaxed)
    }

    /// Observations recorded for a phase.
    pub fn phase_count(&self, phase: &str) -> u64 {
        let phases = self.phases.lock().recover();
        phases.get(phase).map_or(0, |h| h.count)
    }

    pub(crate) fn render_into(&self, out: &mut String) {
        let c = |name: &str, help: &str, v: u64, out: &mut String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        c(
            "pinprove_proofs_completed_total",
            "Partition proofs completed.",
            self.proofs_completed(),
            out,
        );
        c(
            "pinprove_proofs_failed_total",
            "Partition proofs failed.",
            self.proofs_failed(),
            out,
        );
        c(
            "pinprove_jobs_cancelled_total",
            "Jobs cancelled.",
            self.jobs_cancelled.load(Ordering::Relaxed),
            out,
        );
        c(
            "pinprove_partitions_rerouted_total",
            "Synthesized partitions moved off a lost device to another.",
            self.partitions_rerouted(),
            out,
        );
        let phases = self.phases.lock().recover();
        let _ = writeln!(
            out,
            "# HELP pinprove_phase_seconds Time partitions spent in each phase.\n# TYPE pinprove_phase_seconds histogram"
        );
        for (phase, h) in phases.iter() {
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "pinprove_phase_seconds_bucket{{phase=\"{phase}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "pinprove_phase_seconds_bucket{{phase=\"{phase}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "pinprove_phase_seconds_sum{{phase=\"{phase}\"}} {}", h.sum);
            let _ = writeln!(out, "pinprove_phase_seconds_count{{phase=\"{phase}\"}} {}", h.count);
        }
    }
}

/// Appends a counter (one series, no labels).
pub(crate) fn counter(out: &mut String, name: &str, help: &str, v: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
}

/// Appends a gauge.
pub(crate) fn gauge(out: &mut String, name: &str, help: &str, labels: &str, v: f64) {
    if !out.contains(&format!("# TYPE {name} gauge")) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    }
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {v}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative() {
        let m = Metrics::default();
        m.observe("synthesis", Duration::from_millis(3));
        m.observe("synthesis", Duration::from_millis(700));
        let mut out = String::new();
        m.render_into(&mut out);
        assert!(out.contains("pinprove_phase_seconds_bucket{phase=\"synthesis\",le=\"0.005\"} 1"));
        assert!(out.contains("pinprove_phase_seconds_bucket{phase=\"synthesis\",le=\"1\"} 2"));
        assert!(out.contains("pinprove_phase_seconds_count{phase=\"synthesis\"} 2"));
        assert_eq!(m.phase_count("synthesis"), 2);
    }
}
