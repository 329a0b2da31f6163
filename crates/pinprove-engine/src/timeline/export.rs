//! The timeline's exports: Chrome trace-event JSON and an SVG chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::{CounterSample, Span, Timeline};
use crate::Phase;

impl Timeline {
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
                "name": s.name.name(), "cat": s.name.name(), "ph": "X", "pid": 1, "tid": tid,
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

pub(super) fn lane_order(spans: &[Span]) -> Vec<String> {
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

fn colour(phase: Phase) -> &'static str {
    match phase {
        Phase::Synthesis => "#4e79a7",
        Phase::Admission => "#bab0ac",
        Phase::SrsLoad => "#9c755f",
        Phase::Start => "#e15759",
        Phase::Finish => "#f28e2b",
        _ => "#76b7b2",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
