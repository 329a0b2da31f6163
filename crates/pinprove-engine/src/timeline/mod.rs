//! A timeline of what every worker did, exported as Chrome trace-event JSON
//! (opens in Perfetto) or drawn as an SVG chart, one lane per worker
//! ([`export`]). The benchmarks read it back (how busy the device was,
//! what the GPU did while work waited for it).

mod export;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;
use serde::Serialize;

use crate::Phase;

/// The counter name suffix of NVML's GPU utilization samples on a
/// device's lane (`"GPU 0 util %"`).
pub const GPU_UTILIZATION: &str = " util %";

/// One span of work on one lane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Span {
    /// The worker, such as "synth-0" or "gpu0-worker-1".
    pub lane: String,
    /// The phase.
    pub name: Phase,
    /// Start, from the timeline's origin.
    pub start: Duration,
    /// Length.
    pub duration: Duration,
    /// What it worked on, such as "job-3/2".
    pub label: String,
}

/// A sampled value (GPU utilization, PCIe throughput) on a counter lane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterSample {
    /// The counter's name.
    pub name: String,
    /// When, from the origin.
    pub at: Duration,
    /// The value.
    pub value: f64,
}

/// Recorded spans, bounded in number (oldest dropped first).
pub struct Timeline {
    origin: Instant,
    cap: usize,
    inner: Mutex<(VecDeque<Span>, VecDeque<CounterSample>)>,
}

impl Timeline {
    /// An empty timeline keeping at most `cap` spans and `cap` samples.
    pub fn new(cap: usize) -> Self {
        Timeline {
            origin: Instant::now(),
            cap,
            inner: Mutex::new((VecDeque::new(), VecDeque::new())),
        }
    }

    /// The instant times are measured from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Records a span that started at `start` and ends now.
    pub fn record(&self, lane: &str, name: Phase, start: Instant, label: String) {
        self.record_between(lane, name, start, Instant::now(), label);
    }

    /// Records a span from `start` to `end`.
    pub fn record_between(&self, lane: &str, name: Phase, start: Instant, end: Instant, label: String) {
        self.record_at(
            lane,
            name,
            start.saturating_duration_since(self.origin),
            end.saturating_duration_since(start),
            label,
        );
    }

    /// Records a span by its times from the origin (a simulation's
    /// virtual clock).
    pub fn record_at(&self, lane: &str, name: Phase, start: Duration, duration: Duration, label: String) {
        let span = Span {
            lane: lane.to_string(),
            name,
            start,
            duration,
            label,
        };
        let mut g = self.inner.lock().recover();
        if g.0.len() >= self.cap {
            g.0.pop_front();
        }
        g.0.push_back(span);
    }

    /// Records a counter sample taken now.
    pub fn sample(&self, name: &str, value: f64) {
        let s = CounterSample {
            name: name.to_string(),
            at: self.origin.elapsed(),
            value,
        };
        let mut g = self.inner.lock().recover();
        if g.1.len() >= self.cap {
            g.1.pop_front();
        }
        g.1.push_back(s);
    }

    /// The spans recorded so far.
    pub fn spans(&self) -> Vec<Span> {
        self.inner.lock().recover().0.iter().cloned().collect()
    }

    /// The counter samples recorded so far.
    pub fn samples(&self) -> Vec<CounterSample> {
        self.inner.lock().recover().1.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_spans_and_samples() {
        let t = Timeline::new(10);
        let start = Instant::now();
        t.record("synth-0", Phase::Synthesis, start, "job-1/0".into());
        t.record("gpu0-worker-0", Phase::Start, start, "job-1/0".into());
        t.sample("gpu0 util %", 87.0);
        let json: serde_json::Value = serde_json::from_str(&t.chrome_trace()).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 2);
        assert_eq!(events.iter().filter(|e| e["ph"] == "C").count(), 1);
        assert_eq!(events.iter().filter(|e| e["ph"] == "M").count(), 2);
        let svg = t.svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("synth-0") && svg.contains("gpu0 util %"));
    }

    #[test]
    fn the_last_minutes_hold_only_what_ended_in_them() {
        let t = Timeline::new(10);
        let t0 = Instant::now();
        t.record("old-lane", Phase::Synthesis, t0, "job-1/0".into());
        std::thread::sleep(Duration::from_millis(200));
        let t1 = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        t.record("new-lane", Phase::Start, t1, "job-2/0".into());
        t.sample("gpu0 util %", 87.0);
        let recent = t.svg_of_last(Duration::from_millis(100));
        assert!(
            recent.contains("new-lane") && recent.contains("gpu0 util %"),
            "{recent}"
        );
        assert!(!recent.contains("old-lane"), "{recent}");
        assert!(t.svg().contains("old-lane"));
    }

    #[test]
    fn lanes_are_devices_first_then_workers_in_numeric_order() {
        let spans: Vec<Span> = [
            "synth-10",
            "synth-2",
            "gpu1-worker-0",
            "gpu0-finalizer",
            "gpu0-worker-1",
        ]
        .iter()
        .map(|l| Span {
            lane: l.to_string(),
            name: Phase::Synthesis,
            start: Duration::ZERO,
            duration: Duration::ZERO,
            label: String::new(),
        })
        .collect();
        assert_eq!(
            export::lane_order(&spans),
            [
                "gpu0-finalizer",
                "gpu0-worker-1",
                "gpu1-worker-0",
                "synth-2",
                "synth-10"
            ]
        );
    }

    #[test]
    fn the_chart_has_a_time_axis_and_a_legend_of_the_phases_drawn() {
        let t = Timeline::new(10);
        let origin = t.origin();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        t.record_between("precompiler", Phase::Recording, at(0), at(2_000), "porep-2k".into());
        t.record_between("synth-0", Phase::Admission, at(100), at(300), "job-1/0".into());
        t.record_between("synth-0", Phase::SrsLoad, at(300), at(1_300), "porep-2k".into());
        t.record_between("synth-0", Phase::Synthesis, at(1_300), at(12_500), "job-1/0".into());
        let spans = t.spans();
        assert_eq!(spans[2].start, Duration::from_millis(300));
        assert_eq!(spans[2].duration, Duration::from_secs(1));
        let svg = t.svg();
        // 12.5 s: a tick every 2 s, labelled at the top and the bottom.
        for label in ["0 s", "2 s", "12 s"] {
            assert_eq!(svg.matches(&format!(">{label}</text>")).count(), 2, "{label}: {svg}");
        }
        assert!(!svg.contains(">14 s<"));
        // The legend names the phases drawn, and only those.
        for drawn in ["recording", "admission", "srs_load", "synthesis"] {
            assert!(svg.contains(&format!(">{drawn}</text>")), "{drawn}");
        }
        assert!(!svg.contains(">finish</text>"));
        assert!(svg.contains(">precompiler</text>"));
    }

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(export::tick_step(12.5), (2.0, 0));
        assert_eq!(export::tick_step(210.0), (50.0, 0));
        assert_eq!(export::tick_step(0.8), (0.1, 1));
        let (step, decimals) = export::tick_step(0.003);
        assert!((step - 0.0005).abs() < 1e-12 && decimals == 4, "{step} {decimals}");
    }

    #[test]
    fn is_bounded() {
        let t = Timeline::new(3);
        for i in 0..10 {
            t.record("l", Phase::Synthesis, Instant::now(), format!("{i}"));
        }
        let spans = t.spans();
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[0].label, "7");
    }
}
