//! Reading a timeline back: how busy the device step kept its workers, and
//! what the GPU did while synthesized partitions waited for it.
//!
//! The steady window runs from the first device step to the end of the last
//! one. The backlog is the union of the intervals from a partition's end of
//! synthesis to the end of its device step: a proof ready for the device and
//! not yet queued on it. GPU utilization sampled while there was a backlog
//! is the device's own idleness, not starvation by the host.

use std::collections::HashMap;
use std::time::Duration;

use pinprove_engine::timeline::{CounterSample, GPU_UTILIZATION, Span, Timeline};
use pinprove_engine::{JobId, Phase};
use serde::Serialize;

/// A half-open stretch of time from the timeline's origin.
pub type Interval = (Duration, Duration);

/// What a run of partitions did to the device, from its spans and samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Utilization {
    /// The steady window: first device step to the last one's end.
    pub window: Interval,
    /// Share of the window some worker spent in the device step.
    pub device_busy: f64,
    /// Share of the window spent in the device step or the finish step.
    pub device_or_finish_busy: f64,
    /// Share of the whole run (first span to last) in the device step.
    pub device_busy_whole_run: f64,
    /// Mean GPU utilization over the window, and the number of samples.
    pub gpu_percent: Option<f64>,
    /// Samples behind `gpu_percent`.
    pub gpu_samples: usize,
    /// Time some synthesized partition waited for the device.
    pub backlog: Duration,
    /// Mean GPU utilization while it did (samples whose averaging period
    /// lies inside the backlog), and their number.
    pub backlog_gpu_percent: Option<f64>,
    /// Samples behind `backlog_gpu_percent`.
    pub backlog_gpu_samples: usize,
}

impl Utilization {
    /// The utilization of the partitions of `jobs` in `timeline` (other
    /// jobs' spans left out), with GPU samples whose averaging period is
    /// `lag`.
    pub fn of_jobs(timeline: &Timeline, jobs: &[JobId], lag: Duration) -> Utilization {
        Utilization::of(&job_spans(timeline, jobs), &timeline.samples(), lag)
    }

    /// The utilization of the partitions in `spans` (which should hold one
    /// run's spans only), with GPU samples whose averaging period is `lag`.
    pub fn of(spans: &[Span], samples: &[CounterSample], lag: Duration) -> Utilization {
        let device: Vec<&Span> = spans.iter().filter(|s| s.name == Phase::Start).collect();
        let either: Vec<&Span> = spans
            .iter()
            .filter(|s| matches!(s.name, Phase::Start | Phase::Finish))
            .collect();
        let from = device.iter().map(|s| s.start).min().unwrap_or_default();
        let to = device.iter().map(|s| end(s)).max().unwrap_or_default();
        let share = |v: &[&Span], (a, b): Interval| covered(v, a, b).as_secs_f64() / (b - a).as_secs_f64().max(1e-9);
        let run_from = spans.iter().map(|s| s.start).min().unwrap_or_default();
        let run_to = spans.iter().map(end).max().unwrap_or_default();
        let (gpu_percent, gpu_samples) = mean_inside(samples, GPU_UTILIZATION, &[(from, to)], Duration::ZERO);
        let waiting = backlog(spans);
        let (backlog_gpu_percent, backlog_gpu_samples) = mean_inside(samples, GPU_UTILIZATION, &waiting, lag);
        Utilization {
            window: (from, to),
            device_busy: share(&device, (from, to)),
            device_or_finish_busy: share(&either, (from, to)),
            device_busy_whole_run: share(&device, (run_from, run_to.max(run_from))),
            gpu_percent,
            gpu_samples,
            backlog: waiting.iter().map(|(a, b)| *b - *a).sum(),
            backlog_gpu_percent,
            backlog_gpu_samples,
        }
    }
}

/// What one device did: the partitions it ran, from their spans, and its
/// own GPU's samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceUtilization {
    /// The device's name, such as "gpu1".
    pub device: String,
    /// Partitions whose device step ran on it.
    pub partitions: usize,
    /// Its utilization, as [`Utilization::of`] reads it.
    pub utilization: Utilization,
}

impl DeviceUtilization {
    /// Device `device`'s share of `spans` (the partitions whose device step
    /// ran on one of its lanes, "gpu1-worker-0", …) and of `samples` (its
    /// counter "gpu1 util %").
    pub fn of(spans: &[Span], samples: &[CounterSample], lag: Duration, device: &str) -> DeviceUtilization {
        let lane = format!("{device}-");
        let mine: std::collections::HashSet<&str> = spans
            .iter()
            .filter(|s| s.name == Phase::Start && s.lane.starts_with(&lane))
            .map(|s| s.label.as_str())
            .collect();
        let spans: Vec<Span> = spans
            .iter()
            .filter(|s| mine.contains(s.label.as_str()))
            .cloned()
            .collect();
        let counter = format!("{device}{GPU_UTILIZATION}");
        let samples: Vec<CounterSample> = samples.iter().filter(|c| c.name == counter).cloned().collect();
        DeviceUtilization {
            device: device.to_string(),
            partitions: mine.len(),
            utilization: Utilization::of(&spans, &samples, lag),
        }
    }

    /// Each of `devices` over the partitions of `jobs` in `timeline`.
    pub fn of_jobs(timeline: &Timeline, jobs: &[JobId], lag: Duration, devices: &[String]) -> Vec<DeviceUtilization> {
        let spans = job_spans(timeline, jobs);
        let samples = timeline.samples();
        devices
            .iter()
            .map(|d| DeviceUtilization::of(&spans, &samples, lag, d))
            .collect()
    }
}

/// The spans of the partitions of `jobs`.
fn job_spans(timeline: &Timeline, jobs: &[JobId]) -> Vec<Span> {
    let prefixes: Vec<String> = jobs.iter().map(|j| format!("{j}/")).collect();
    timeline
        .spans()
        .into_iter()
        .filter(|s| prefixes.iter().any(|p| s.label.starts_with(p.as_str())))
        .collect()
}

fn end(s: &Span) -> Duration {
    s.start + s.duration
}

/// The union of intervals, sorted and disjoint.
pub fn merge(mut iv: Vec<Interval>) -> Vec<Interval> {
    iv.retain(|(a, b)| b > a);
    iv.sort();
    let mut out: Vec<Interval> = Vec::with_capacity(iv.len());
    for (a, b) in iv {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// From each partition's end of synthesis to the end of its device step.
pub fn backlog(spans: &[Span]) -> Vec<Interval> {
    let synthesized: HashMap<&str, Duration> = spans
        .iter()
        .filter(|s| s.name == Phase::Synthesis)
        .map(|s| (s.label.as_str(), s.start + s.duration))
        .collect();
    merge(
        spans
            .iter()
            .filter(|s| s.name == Phase::Start)
            .filter_map(|s| synthesized.get(s.label.as_str()).map(|&a| (a, s.start + s.duration)))
            .collect(),
    )
}

/// Mean of the counter samples named `…suffix` whose averaging period
/// (`lag` before the sample) lies inside one of `intervals`, and how many.
pub fn mean_inside(
    samples: &[CounterSample],
    suffix: &str,
    intervals: &[Interval],
    lag: Duration,
) -> (Option<f64>, usize) {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.name.ends_with(suffix))
        .filter(|s| intervals.iter().any(|&(a, b)| s.at >= a + lag && s.at <= b))
        .map(|s| s.value)
        .collect();
    (mean(&v), v.len())
}

/// Arithmetic mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Length of the union of `spans` clipped to `[from, to]`.
pub fn covered(spans: &[&Span], from: Duration, to: Duration) -> Duration {
    merge(
        spans
            .iter()
            .map(|s| (s.start.max(from), (s.start + s.duration).min(to)))
            .collect(),
    )
    .iter()
    .map(|(a, b)| *b - *a)
    .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: Phase, label: &str, start_ms: u64, len_ms: u64) -> Span {
        Span {
            lane: "l".into(),
            name,
            start: Duration::from_millis(start_ms),
            duration: Duration::from_millis(len_ms),
            label: label.into(),
        }
    }

    fn sample(name: &str, ms: u64, value: f64) -> CounterSample {
        CounterSample {
            name: name.into(),
            at: Duration::from_millis(ms),
            value,
        }
    }

    #[test]
    fn averages_gpu_samples_within_the_window_only() {
        let s = [
            sample("gpu0 util %", 50, 0.0),
            sample("gpu0 util %", 150, 90.0),
            sample("gpu0 PCIe RX GB/s", 160, 40.0),
            sample("gpu0 util %", 250, 100.0),
            sample("gpu0 util %", 400, 0.0),
        ];
        let ms = Duration::from_millis;
        let window = |a, b| [(ms(a), ms(b))];
        assert_eq!(
            mean_inside(&s, GPU_UTILIZATION, &window(100, 300), ms(0)),
            (Some(95.0), 2)
        );
        assert_eq!(mean_inside(&s, GPU_UTILIZATION, &window(500, 600), ms(0)), (None, 0));
    }

    #[test]
    fn backlog_runs_from_synthesis_end_to_start_end_and_selects_samples_inside() {
        let spans = [
            at(Phase::Synthesis, "1/0", 0, 100),
            at(Phase::Synthesis, "1/1", 0, 150),
            at(Phase::Start, "1/0", 300, 50), // waited 100..350
            at(Phase::Start, "1/1", 350, 50), // waited 150..400
            at(Phase::Synthesis, "2/0", 600, 100),
            at(Phase::Start, "2/0", 700, 100),  // waited 700..800
            at(Phase::Finish, "1/0", 350, 500), // not a wait
        ];
        let ms = Duration::from_millis;
        let b = backlog(&spans);
        assert_eq!(b, vec![(ms(100), ms(400)), (ms(700), ms(800))]);
        let s = [
            sample("gpu0 util %", 120, 0.0),
            sample("gpu0 util %", 200, 90.0),
            sample("gpu0 util %", 390, 100.0),
            sample("gpu0 util %", 500, 0.0),
            sample("gpu0 util %", 790, 80.0),
        ];
        // With a 50 ms lag, the sample at 120 ms still averages time before
        // the backlog.
        assert_eq!(mean_inside(&s, GPU_UTILIZATION, &b, ms(50)), (Some(90.0), 3));
        let u = Utilization::of(&spans, &s, ms(50));
        assert_eq!(u.window, (ms(300), ms(800)));
        assert_eq!(u.backlog, ms(400));
        assert_eq!((u.backlog_gpu_percent, u.backlog_gpu_samples), (Some(90.0), 3));
        // Device steps cover 300..400 and 700..800 of the 500 ms window.
        assert!((u.device_busy - 0.4).abs() < 1e-9, "{}", u.device_busy);
    }

    #[test]
    fn a_device_counts_the_partitions_it_ran_and_its_own_gpu_samples() {
        let on = |lane: &str, name, label: &str, start_ms, len_ms| Span {
            lane: lane.into(),
            ..at(name, label, start_ms, len_ms)
        };
        let spans = [
            on("synth-0", Phase::Synthesis, "1/0", 0, 100),
            on("synth-1", Phase::Synthesis, "1/1", 0, 100),
            on("gpu1-worker-0", Phase::Start, "1/0", 100, 100),
            on("gpu10-worker-0", Phase::Start, "1/1", 300, 100),
            on("gpu1-finalizer", Phase::Finish, "1/0", 200, 50),
        ];
        let s = [
            sample("gpu1 util %", 150, 80.0),
            sample("gpu10 util %", 150, 10.0),
            sample("gpu10 util %", 350, 90.0),
        ];
        let ms = Duration::from_millis;
        let gpu1 = DeviceUtilization::of(&spans, &s, ms(0), "gpu1");
        assert_eq!(gpu1.partitions, 1);
        assert_eq!(gpu1.utilization.window, (ms(100), ms(200)));
        assert_eq!(
            gpu1.utilization.backlog,
            ms(100),
            "synthesis end to its device step's end"
        );
        assert_eq!(
            (gpu1.utilization.gpu_percent, gpu1.utilization.gpu_samples),
            (Some(80.0), 1)
        );
        let gpu10 = DeviceUtilization::of(&spans, &s, ms(0), "gpu10");
        assert_eq!(gpu10.partitions, 1);
        assert_eq!(gpu10.utilization.window, (ms(300), ms(400)));
        assert_eq!(gpu10.utilization.gpu_percent, Some(90.0));
        assert_eq!(DeviceUtilization::of(&spans, &s, ms(0), "gpu2").partitions, 0);
    }

    #[test]
    fn unions_overlapping_spans_within_the_window() {
        let s = [
            at(Phase::Start, "", 0, 10),
            at(Phase::Start, "", 5, 10),
            at(Phase::Start, "", 30, 10),
            at(Phase::Start, "", 100, 10),
        ];
        let refs: Vec<&Span> = s.iter().collect();
        let ms = Duration::from_millis;
        assert_eq!(covered(&refs, ms(0), ms(200)), ms(35));
        assert_eq!(covered(&refs, ms(8), ms(35)), ms(12));
    }
}
