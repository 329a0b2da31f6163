//! A timeline of what every worker did, exported as Chrome trace-event JSON
//! (opens in Perfetto) or drawn as an SVG chart, one lane per worker
//! ([`export`]), and read back by [`analysis`] (how busy the device was,
//! what the GPU did while work waited for it).

pub mod analysis;
mod export;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;
use serde::Serialize;

use crate::Phase;

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
    inner: Mutex<(Vec<Span>, Vec<CounterSample>)>,
}

impl Timeline {
    /// An empty timeline keeping at most `cap` spans and `cap` samples.
    pub fn new(cap: usize) -> Self {
        Timeline {
            origin: Instant::now(),
            cap,
            inner: Mutex::new((Vec::new(), Vec::new())),
        }
    }

    /// The instant times are measured from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Records a span that started at `start` and ends now.
    pub fn record(&self, lane: &str, name: Phase, start: Instant, label: String) {
        let span = Span {
            lane: lane.to_string(),
            name,
            start: start.saturating_duration_since(self.origin),
            duration: start.elapsed(),
            label,
        };
        let mut g = self.inner.lock().recover();
        if g.0.len() >= self.cap {
            g.0.remove(0);
        }
        g.0.push(span);
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
            g.1.remove(0);
        }
        g.1.push(s);
    }

    /// The spans recorded so far.
    pub fn spans(&self) -> Vec<Span> {
        self.inner.lock().recover().0.clone()
    }

    /// The counter samples recorded so far.
    pub fn samples(&self) -> Vec<CounterSample> {
        self.inner.lock().recover().1.clone()
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
