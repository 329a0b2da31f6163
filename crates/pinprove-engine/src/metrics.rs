//! Counters and latency histograms, and the engine's Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pinprove_mem::sync::Recover;

use crate::{EngineStatus, Phase, SynthesisMode};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A latency histogram over the buckets every pinprove histogram shares,
/// written in Prometheus's cumulative form.
#[derive(Clone, Debug, Default)]
pub struct LatencyHistogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl LatencyHistogram {
    /// Counts one observation of `d`.
    pub fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += s;
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Writes the histogram's `_bucket`, `_sum` and `_count` lines for
    /// metric `name`, each with `labels` (`key="value"`, already escaped)
    /// before its own. The `# HELP` and `# TYPE` lines are the caller's.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {}", self.counts[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// Engine counters.
#[derive(Default)]
pub struct Metrics {
    pub(crate) proofs_completed: AtomicU64,
    pub(crate) proofs_failed: AtomicU64,
    pub(crate) jobs_cancelled: AtomicU64,
    pub(crate) partitions_rerouted: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) partitions_started_together: AtomicU64,
    phases: Mutex<BTreeMap<Phase, LatencyHistogram>>,
}

impl Metrics {
    /// Records one partition phase's latency.
    pub fn observe(&self, phase: Phase, d: Duration) {
        self.phases.lock().recover().entry(phase).or_default().observe(d);
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

    /// Panics caught in the engine's threads (each failed its job).
    pub fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }

    /// Partitions started on a device in one start with others of their
    /// circuit (see `Backend::partitions_per_start`).
    pub fn partitions_started_together(&self) -> u64 {
        self.partitions_started_together.load(Ordering::Relaxed)
    }

    /// Observations recorded for a phase.
    pub fn phase_count(&self, phase: Phase) -> u64 {
        let phases = self.phases.lock().recover();
        phases.get(&phase).map_or(0, LatencyHistogram::count)
    }

    fn render_into(&self, out: &mut String) {
        let counters = [
            (
                "pinprove_proofs_completed_total",
                "Partition proofs completed.",
                self.proofs_completed(),
            ),
            (
                "pinprove_proofs_failed_total",
                "Partition proofs failed.",
                self.proofs_failed(),
            ),
            (
                "pinprove_jobs_cancelled_total",
                "Jobs cancelled.",
                self.jobs_cancelled.load(Ordering::Relaxed),
            ),
            (
                "pinprove_partitions_rerouted_total",
                "Synthesized partitions moved off a lost device to another.",
                self.partitions_rerouted(),
            ),
            (
                "pinprove_panics_total",
                "Panics caught in the engine's threads, each turned into its job's failure.",
                self.panics(),
            ),
            (
                "pinprove_partitions_started_together_total",
                "Partitions started on a device together with others of their circuit, reading streamed bases once for all.",
                self.partitions_started_together(),
            ),
        ];
        for (name, help, v) in counters {
            counter(out, name, help, v as f64);
        }
        let phases = self.phases.lock().recover();
        let _ = writeln!(
            out,
            "# HELP pinprove_phase_seconds Time partitions spent in each phase.\n# TYPE pinprove_phase_seconds histogram"
        );
        for (phase, h) in phases.iter() {
            h.render(out, "pinprove_phase_seconds", &format!("phase=\"{phase}\""));
        }
    }
}

/// The engine's Prometheus text: its counters and phase histograms, and
/// the gauges of a status snapshot.
pub(crate) fn render(metrics: &Metrics, s: &EngineStatus) -> String {
    let mut out = String::new();
    metrics.render_into(&mut out);
    let o = &mut out;
    gauge(
        o,
        "pinprove_budget_total_bytes",
        "The memory budget.",
        "",
        s.budget_total as f64,
    );
    gauge(
        o,
        "pinprove_budget_used_bytes",
        "Bytes reserved in the budget.",
        "",
        s.budget_used as f64,
    );
    gauge(
        o,
        "pinprove_pool_idle_bytes",
        "Idle pool buffers.",
        "",
        s.pool_idle as f64,
    );
    gauge(
        o,
        "pinprove_pool_warm_bytes",
        "Pool bytes prepared ahead of demand that the warm sets ask for.",
        "",
        s.pool_warm as f64,
    );
    gauge(
        o,
        "pinprove_pool_warm_ready_bytes",
        "Of the warm sets' bytes, those held now.",
        "",
        s.pool_warm_ready as f64,
    );
    gauge(
        o,
        "pinprove_pool_kept_bytes",
        "Of the warm sets' bytes, those kept under memory pressure too.",
        "",
        s.pool_kept as f64,
    );
    gauge(
        o,
        "pinprove_pool_checked_out_bytes",
        "Pool buffers in use.",
        "",
        s.pool_checked_out as f64,
    );
    counter(
        o,
        "pinprove_pool_fresh_allocations_total",
        "Pool buffers allocated (fresh pinned memory).",
        s.pool_fresh_allocations as f64,
    );
    counter(
        o,
        "pinprove_pool_alloc_seconds_total",
        "Time spent allocating pool buffers.",
        s.pool_alloc_time.as_secs_f64(),
    );
    counter(
        o,
        "pinprove_pool_handed_over_total",
        "Returned pool buffers handed to a partition waiting for memory instead of being freed.",
        s.pool_handed_over as f64,
    );
    let by_circuit = |q: &crate::QueueStatus| label("circuit", &q.circuit_id);
    gauges(
        o,
        "pinprove_queue_pending",
        "Partitions waiting.",
        s.queues.iter().map(|q| (by_circuit(q), q.pending as f64)),
    );
    gauges(
        o,
        "pinprove_queue_in_progress",
        "Partitions in the pipeline.",
        s.queues.iter().map(|q| (by_circuit(q), q.in_progress as f64)),
    );
    for d in &s.devices {
        let l = label("device", &d.id.to_string());
        gauge(
            o,
            "pinprove_device_busy_fraction",
            "Fraction of uptime in the backend's device step.",
            &l,
            d.busy_fraction,
        );
        labelled_counter(
            o,
            "pinprove_device_busy_seconds_total",
            "Time the device's workers spent in the backend's device step, divided by its workers (its rate is the busy share).",
            &l,
            d.busy_seconds,
        );
        gauge(
            o,
            "pinprove_device_lost",
            "1 once the device was lost (it takes no more work), else 0.",
            &l,
            f64::from(u8::from(d.lost.is_some())),
        );
    }
    gauge(
        o,
        "pinprove_partitions_waiting",
        "Partitions queued or waiting for their admission or their parameters: work the devices could take once it is admitted.",
        "",
        s.partitions_waiting() as f64,
    );
    counters(
        o,
        "pinprove_srs_loads_total",
        "Times a circuit type's parameters were loaded since start (more than once: evicted and needed again).",
        s.srs
            .iter()
            .map(|srs| (label("circuit", &srs.circuit_id), srs.loads as f64)),
    );
    gauges(
        o,
        "pinprove_srs_bytes",
        "Host bytes of loaded parameters.",
        s.srs
            .iter()
            .map(|srs| (label("circuit", &srs.circuit_id), srs.bytes as f64)),
    );
    for (name, help, v) in [
        (
            "pinprove_recordings_made_total",
            "Circuit recordings made (pre-compiled synthesis).",
            s.recordings_made,
        ),
        (
            "pinprove_recordings_loaded_total",
            "Circuit recordings loaded from the hints directory.",
            s.recordings_loaded,
        ),
        (
            "pinprove_precompiled_fallbacks_total",
            "Partitions synthesized classically because their recording did not serve.",
            s.precompiled_fallbacks,
        ),
    ] {
        counter(o, name, help, v as f64);
    }
    for c in &s.synthesis {
        let l = label("circuit", &c.circuit_id);
        for mode in SynthesisMode::ALL {
            gauge(
                o,
                "pinprove_synthesis_mode",
                "1 for the way a circuit type is synthesized now (classic, recording, precompiled, classic_only).",
                &format!("{l},{}", label("mode", mode.as_str())),
                f64::from(u8::from(c.mode == mode)),
            );
        }
        gauge(
            o,
            "pinprove_precompiled_abc_on_device",
            "1 when a pre-compiled circuit type's a/b/c are computed on the devices, 0 on the host or classic.",
            &l,
            f64::from(u8::from(c.abc_on_device)),
        );
        gauge(
            o,
            "pinprove_recording_bytes",
            "Budget bytes a circuit type's recording holds.",
            &l,
            c.recording_bytes as f64,
        );
        labelled_counter(
            o,
            "pinprove_precompiled_partitions_total",
            "Partitions synthesized from their circuit's recording.",
            &l,
            c.precompiled_partitions as f64,
        );
        labelled_counter(
            o,
            "pinprove_classic_partitions_total",
            "Partitions synthesized classically.",
            &l,
            c.classic_partitions as f64,
        );
    }
    for (d, g) in s.devices.iter().filter_map(|d| Some((d, d.gpu?))) {
        let l = label("device", &d.id.to_string());
        gauge(
            o,
            "pinprove_gpu_memory_used_bytes",
            "NVML device memory in use (by any process).",
            &l,
            g.memory_used_bytes as f64,
        );
        gauge(
            o,
            "pinprove_gpu_memory_total_bytes",
            "NVML device memory in all.",
            &l,
            g.memory_total_bytes as f64,
        );
        gauge(
            o,
            "pinprove_gpu_utilization_percent",
            "NVML GPU utilization.",
            &l,
            g.utilization_percent,
        );
        gauge(
            o,
            "pinprove_gpu_pcie_rx_bytes_per_second",
            "NVML PCIe host to device.",
            &l,
            g.pcie_rx_bytes_per_s,
        );
        gauge(
            o,
            "pinprove_gpu_pcie_tx_bytes_per_second",
            "NVML PCIe device to host.",
            &l,
            g.pcie_tx_bytes_per_s,
        );
    }
    out
}

/// `name="value"`, the value escaped as Prometheus requires: circuit ids
/// and device names are opaque strings.
fn label(name: &str, value: &str) -> String {
    let mut v = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => v.push_str("\\\\"),
            '"' => v.push_str("\\\""),
            '\n' => v.push_str("\\n"),
            c => v.push(c),
        }
    }
    format!("{name}=\"{v}\"")
}

/// Appends a counter (one series, no labels).
fn counter(out: &mut String, name: &str, help: &str, v: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
}

/// Appends one series of a counter with labels.
fn labelled_counter(out: &mut String, name: &str, help: &str, labels: &str, v: f64) {
    if !out.contains(&format!("# TYPE {name} counter")) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    }
    let _ = writeln!(out, "{name}{{{labels}}} {v}");
}

/// Appends a gauge family, one series per labels, and its header even
/// when there is none, so that a dashboard's query finds it before any
/// work has come.
fn gauges(out: &mut String, name: &str, help: &str, series: impl IntoIterator<Item = (String, f64)>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, v) in series {
        gauge(out, name, help, &labels, v);
    }
}

/// Appends a counter family, one series per labels, and its header even
/// when there is none (as [`gauges`]).
fn counters(out: &mut String, name: &str, help: &str, series: impl IntoIterator<Item = (String, f64)>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (labels, v) in series {
        labelled_counter(out, name, help, &labels, v);
    }
}

/// Appends a gauge.
fn gauge(out: &mut String, name: &str, help: &str, labels: &str, v: f64) {
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
        m.observe(Phase::Synthesis, Duration::from_millis(3));
        m.observe(Phase::Synthesis, Duration::from_millis(700));
        let mut out = String::new();
        m.render_into(&mut out);
        assert!(out.contains("pinprove_phase_seconds_bucket{phase=\"synthesis\",le=\"0.005\"} 1"));
        assert!(out.contains("pinprove_phase_seconds_bucket{phase=\"synthesis\",le=\"1\"} 2"));
        assert!(out.contains("pinprove_phase_seconds_count{phase=\"synthesis\"} 2"));
        assert_eq!(m.phase_count(Phase::Synthesis), 2);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(
            label("circuit", r#"wdpost-1-[0 "1"] \x"#),
            r#"circuit="wdpost-1-[0 \"1\"] \\x""#
        );
        assert_eq!(label("c", "a\nb"), "c=\"a\\nb\"");
    }
}
