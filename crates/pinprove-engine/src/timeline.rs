//! A timeline of what every worker did, exported as Chrome trace-event JSON
//! (opens in Perfetto) or drawn as an SVG chart, one lane per worker.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;
use serde::Serialize;

/// One span of work on one lane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Span {
    /// The worker, such as "synth-0" or "gpu0-worker-1".
    pub lane: String,
    /// The phase, such as "synthesis" or "start".
    pub name: &'static str,
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
    pub fn record(&self, lane: &str, name: &'static str, start: Instant, label: String) {
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

    /// Chrome trace-event JSON: one thread per lane, complete events for
    /// spans, counter events for samples.
    pub fn chrome_trace(&self) -> String {
        let spans = self.spans();
        let samples = self.samples();
        let lanes = lane_order(&spans);
        let mut events = Vec::new();
        for (i, lane) in lanes.iter().enumerate() {
            events.push(serde_json::json!({
                "name": "thread_name", "ph": "M", "pid": 1, "tid": i,
                "args": { "name": lane },
            }));
        }
        for s in &spans {
            let tid = lanes.iter().position(|l| *l == s.lane).unwrap_or(0);
            events.push(serde_json::json!({
                "name": s.name, "cat": s.name, "ph": "X", "pid": 1, "tid": tid,
                "ts": s.start.as_secs_f64() * 1e6, "dur": s.duration.as_secs_f64() * 1e6,
                "args": { "work": s.label },
            }));
        }
        for c in &samples {
            events.push(serde_json::json!({
                "name": c.name, "ph": "C", "pid": 1,
                "ts": c.at.as_secs_f64() * 1e6, "args": { "value": c.value },
            }));
        }
        serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" }).to_string()
    }

    /// An SVG chart: a row per lane, a bar per span coloured by phase, and
    /// a line per sampled counter below.
    pub fn svg(&self) -> String {
        let spans = self.spans();
        let samples = self.samples();
        let lanes = lane_order(&spans);
        let end = spans
            .iter()
            .map(|s| s.start + s.duration)
            .chain(samples.iter().map(|c| c.at))
            .max()
            .unwrap_or(Duration::from_millis(1))
            .as_secs_f64()
            .max(1e-3);
        let counters: BTreeMap<&str, Vec<&CounterSample>> = samples.iter().fold(BTreeMap::new(), |mut m, c| {
            m.entry(c.name.as_str()).or_insert_with(Vec::new).push(c);
            m
        });
        let (label_w, width, row_h) = (150.0, 1200.0, 22.0);
        let counter_h = 60.0;
        let height = 40.0 + row_h * lanes.len() as f64 + counter_h * counters.len() as f64 + 30.0;
        let x = |t: f64| label_w + (width - label_w - 10.0) * t / end;
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = write!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = write!(
            svg,
            r#"<text x="10" y="16" font-size="13">pinprove timeline, {:.3} s</text>"#,
            end
        );
        for (i, lane) in lanes.iter().enumerate() {
            let y = 30.0 + row_h * i as f64;
            let _ = write!(svg, r#"<text x="10" y="{}">{}</text>"#, y + 14.0, escape(lane));
            let _ = write!(
                svg,
                r##"<line x1="{label_w}" y1="{}" x2="{}" y2="{}" stroke="#eee"/>"##,
                y + row_h,
                width - 10.0,
                y + row_h
            );
        }
        for s in &spans {
            let i = lanes.iter().position(|l| *l == s.lane).unwrap_or(0);
            let y = 30.0 + row_h * i as f64 + 3.0;
            let (x0, x1) = (x(s.start.as_secs_f64()), x((s.start + s.duration).as_secs_f64()));
            let _ = write!(
                svg,
                r#"<rect x="{x0:.2}" y="{y}" width="{:.2}" height="{}" fill="{}"><title>{} {} {:.3} ms</title></rect>"#,
                (x1 - x0).max(0.5),
                row_h - 6.0,
                colour(s.name),
                s.name,
                escape(&s.label),
                s.duration.as_secs_f64() * 1e3
            );
        }
        let mut y0 = 30.0 + row_h * lanes.len() as f64 + 10.0;
        for (name, points) in &counters {
            let max = points.iter().map(|c| c.value).fold(f64::MIN_POSITIVE, f64::max);
            let path: Vec<String> = points
                .iter()
                .map(|c| {
                    format!(
                        "{:.2},{:.2}",
                        x(c.at.as_secs_f64()),
                        y0 + counter_h - 8.0 - (counter_h - 16.0) * c.value / max
                    )
                })
                .collect();
            let _ = write!(
                svg,
                r#"<text x="10" y="{}">{} (max {:.1})</text>"#,
                y0 + 20.0,
                escape(name),
                max
            );
            let _ = write!(
                svg,
                r##"<polyline fill="none" stroke="#444" stroke-width="1" points="{}"/>"##,
                path.join(" ")
            );
            y0 += counter_h;
        }
        let _ = write!(svg, r#"<text x="{label_w}" y="{}">0 s</text>"#, y0 + 15.0);
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{end:.3} s</text>"#,
            width - 10.0,
            y0 + 15.0
        );
        svg.push_str("</svg>");
        svg
    }
}

fn lane_order(spans: &[Span]) -> Vec<String> {
    let mut lanes: Vec<String> = Vec::new();
    for s in spans {
        if !lanes.contains(&s.lane) {
            lanes.push(s.lane.clone());
        }
    }
    // Devices first, then synthesis workers; numbered lanes in numeric
    // order (synth-2 before synth-10).
    lanes.sort_by_key(|l| {
        let split = l.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let n: u64 = l[split..].parse().unwrap_or(0);
        (l.starts_with("synth"), l[..split].to_string(), n)
    });
    lanes
}

fn colour(phase: &str) -> &'static str {
    match phase {
        "synthesis" => "#4e79a7",
        "admission" => "#bab0ac",
        "srs-load" => "#9c755f",
        "start" => "#e15759",
        "finish" => "#f28e2b",
        _ => "#76b7b2",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_spans_and_samples() {
        let t = Timeline::new(10);
        let start = Instant::now();
        t.record("synth-0", "synthesis", start, "job-1/0".into());
        t.record("gpu0-worker-0", "start", start, "job-1/0".into());
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
            name: "synthesis",
            start: Duration::ZERO,
            duration: Duration::ZERO,
            label: String::new(),
        })
        .collect();
        assert_eq!(
            lane_order(&spans),
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
            t.record("l", "synthesis", Instant::now(), format!("{i}"));
        }
        let spans = t.spans();
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[0].label, "7");
    }
}
