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

    /// An SVG chart: a time axis with ticks, a row per lane with a bar per
    /// span coloured by phase, a legend of the phases drawn, and a line per
    /// sampled counter below.
    pub fn svg(&self) -> String {
        svg_of(&self.spans(), &self.samples())
    }

    /// The SVG chart of the last `window` (a live page's view): the spans
    /// that ended within it, cut at its start, and the samples taken in
    /// it, with times counted from its start.
    pub fn svg_of_last(&self, window: Duration) -> String {
        let from = self.origin().elapsed().saturating_sub(window);
        let spans: Vec<Span> = self
            .spans()
            .into_iter()
            .filter(|s| s.start + s.duration >= from)
            .map(|mut s| {
                let start = s.start.max(from);
                s.duration = s.start + s.duration - start;
                s.start = start - from;
                s
            })
            .collect();
        let samples: Vec<CounterSample> = self
            .samples()
            .into_iter()
            .filter(|c| c.at >= from)
            .map(|mut c| {
                c.at -= from;
                c
            })
            .collect();
        svg_of(&spans, &samples)
    }
}

/// The chart of `spans` and `samples` (see [`Timeline::svg`]).
fn svg_of(spans: &[Span], samples: &[CounterSample]) -> String {
    let lanes = lane_order(spans);
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
    let drawn: Vec<Phase> = DRAWN
        .into_iter()
        .filter(|p| spans.iter().any(|s| s.name == *p))
        .collect();
    let (label_w, width, row_h) = (150.0, 1200.0, 22.0);
    let (counter_h, top) = (60.0, 46.0);
    let lanes_bottom = top + row_h * lanes.len() as f64;
    let counters_bottom = lanes_bottom + 10.0 + counter_h * counters.len() as f64;
    let height = counters_bottom + 30.0 + if drawn.is_empty() { 0.0 } else { 24.0 };
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
    // The time axis: a labelled tick every `step`, its line across every
    // lane and counter.
    let (step, decimals) = tick_step(end);
    let ticks = (end / step).floor() as usize;
    for k in 0..=ticks {
        let t = step * k as f64;
        let tx = x(t);
        let _ = write!(
            svg,
            r##"<line x1="{tx:.2}" y1="{}" x2="{tx:.2}" y2="{counters_bottom}" stroke="#ddd"/>"##,
            top - 4.0
        );
        for ty in [top - 7.0, counters_bottom + 14.0] {
            let _ = write!(
                svg,
                r##"<text x="{tx:.2}" y="{ty}" text-anchor="middle" fill="#555">{t:.decimals$} s</text>"##
            );
        }
    }
    for (i, lane) in lanes.iter().enumerate() {
        let y = top + row_h * i as f64;
        let _ = write!(svg, r#"<text x="10" y="{}">{}</text>"#, y + 14.0, escape(lane));
        let _ = write!(
            svg,
            r##"<line x1="{label_w}" y1="{}" x2="{}" y2="{}" stroke="#eee"/>"##,
            y + row_h,
            width - 10.0,
            y + row_h
        );
    }
    for s in spans {
        let i = lanes.iter().position(|l| *l == s.lane).unwrap_or(0);
        let y = top + row_h * i as f64 + 3.0;
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
    let mut y0 = lanes_bottom + 10.0;
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
    // The legend: one swatch per phase drawn.
    let mut lx = label_w;
    let ly = counters_bottom + 30.0;
    for p in drawn {
        let _ = write!(
            svg,
            r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{ly}">{p}</text>"#,
            ly - 10.0,
            colour(p),
            lx + 16.0
        );
        lx += 24.0 + 7.0 * p.name().len() as f64;
    }
    svg.push_str("</svg>");
    svg
}

/// A tick step of 1, 2 or 5 times a power of ten giving about ten ticks over
/// `end` seconds, and the decimals its labels need.
pub(super) fn tick_step(end: f64) -> (f64, usize) {
    let raw = end / 10.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    (step, decimals)
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

/// The phases workers spend time in, in the legend's order (the waits are
/// a partition's, not a worker's, and have no lane).
const DRAWN: [Phase; 6] = [
    Phase::Recording,
    Phase::Admission,
    Phase::SrsLoad,
    Phase::Synthesis,
    Phase::Start,
    Phase::Finish,
];

fn colour(phase: Phase) -> &'static str {
    match phase {
        Phase::Recording => "#59a14f",
        Phase::QueueWait => "#b07aa1",
        Phase::Admission => "#bab0ac",
        Phase::SrsLoad => "#9c755f",
        Phase::Synthesis => "#4e79a7",
        Phase::HandoffWait => "#edc948",
        Phase::Start => "#e15759",
        Phase::FinishWait => "#ff9da7",
        Phase::Finish => "#f28e2b",
        Phase::Total => "#76b7b2",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
