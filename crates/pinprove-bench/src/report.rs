//! What a benchmark ran on, and small helpers for summarizing timings.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

pub use pinprove::units::{bytes, dur};

/// How a benchmark reports.
#[derive(Args, Debug, Clone)]
pub struct Output {
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Also append the JSON object, as one line, to this file.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// A note about this run, kept in the JSON object as "label" (for
    /// result files, which only the tools write).
    #[arg(long)]
    pub label: Option<String>,
}

impl Output {
    /// Prints `report` as asked: the summary (or JSON) on stdout, and a JSON
    /// line appended to `--json-out`.
    pub fn emit<R: Serialize>(&self, report: &R, summary: impl FnOnce(&R)) -> Result<()> {
        let mut value = serde_json::to_value(report)?;
        if let (Some(label), Some(object)) = (&self.label, value.as_object_mut()) {
            object.insert("label".into(), serde_json::Value::String(label.clone()));
        }
        let line = serde_json::to_string(&value)?;
        if let Some(path) = &self.json_out {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            writeln!(f, "{line}").with_context(|| format!("writing {}", path.display()))?;
        }
        if self.json {
            println!("{line}");
        } else {
            summary(report);
        }
        Ok(())
    }
}

/// The host a measurement was taken on.
#[derive(Clone, Debug, Serialize)]
pub struct Host {
    pub cpu: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub hostname: String,
}

impl Host {
    pub fn detect() -> Host {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        Host {
            cpu,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            memory_bytes: pinprove_mem::sys::mem_total_bytes().unwrap_or(0),
            kernel: read("/proc/sys/kernel/osrelease"),
            hostname: read("/proc/sys/kernel/hostname"),
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "{} ({} cores), {}, Linux {}",
            self.cpu,
            self.cores,
            bytes(self.memory_bytes),
            self.kernel
        )
    }
}

/// NVML reports GPU utilization averaged over its last sampling period (up
/// to about a sixth of a second on data-center GPUs): a sample closer than
/// this to a window's start still sees what came before it.
pub const NVML_LAG: Duration = Duration::from_millis(200);

/// One device's share of a run of an engine with several.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceShare {
    pub device: String,
    /// Partitions whose device step ran there.
    pub partitions: usize,
    /// Share of its own steady window in the device step.
    pub device_busy_fraction: f64,
    /// Mean NVML utilization of its GPU over that window, and while a
    /// partition routed to it waited for it.
    pub gpu_utilization_percent: Option<f64>,
    pub gpu_utilization_backlog_percent: Option<f64>,
}

impl DeviceShare {
    /// Each of `devices`' share of the partitions of `jobs`.
    pub fn of_jobs(
        timeline: &pinprove_engine::timeline::Timeline,
        jobs: &[pinprove_engine::JobId],
        devices: &[String],
    ) -> Vec<DeviceShare> {
        crate::utilization::DeviceUtilization::of_jobs(timeline, jobs, NVML_LAG, devices)
            .into_iter()
            .map(|d| DeviceShare {
                device: d.device,
                partitions: d.partitions,
                device_busy_fraction: d.utilization.device_busy,
                gpu_utilization_percent: d.utilization.gpu_percent,
                gpu_utilization_backlog_percent: d.utilization.backlog_gpu_percent,
            })
            .collect()
    }

    /// One summary line per device, when there are several.
    pub fn print(shares: &[DeviceShare]) {
        if shares.len() < 2 {
            return;
        }
        let pct = |v: Option<f64>| v.map_or_else(|| "?".into(), |v| format!("{v:.1}%"));
        for s in shares {
            println!(
                "  {}: {} partitions, device step busy {:.1}% of its window, GPU utilization {} ({} while a partition waited for it)",
                s.device,
                s.partitions,
                100.0 * s.device_busy_fraction,
                pct(s.gpu_utilization_percent),
                pct(s.gpu_utilization_backlog_percent)
            );
        }
    }
}

/// The median of `samples` (which it sorts).
pub fn median(samples: &mut [Duration]) -> Duration {
    assert!(!samples.is_empty(), "median of no samples");
    samples.sort();
    let n = samples.len();
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2
    }
}

/// The `q` quantile (0..=1) of sorted `samples`.
pub fn quantile_sorted(samples: &[Duration], q: f64) -> Duration {
    assert!(!samples.is_empty(), "quantile of no samples");
    let idx = ((samples.len() - 1) as f64 * q).round() as usize;
    samples[idx.min(samples.len() - 1)]
}

/// A file as a report names it: its name, not where it lies on the machine
/// that measured (reports are kept and shared).
pub fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Decimal gigabytes per second.
pub fn gbps(bytes: u64, d: Duration) -> f64 {
    if bytes == 0 || d.is_zero() {
        return 0.0;
    }
    bytes as f64 / d.as_secs_f64() / 1e9
}

/// The error of a command or option that needs the `cuda` feature, in a
/// build without it.
#[cfg(not(feature = "cuda"))]
pub fn needs_gpu_build(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} needs a GPU build: this pinprove-bench was built without the `cuda` feature \
         (build one with scripts/gpu-build)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_quantiles() {
        let ms = Duration::from_millis;
        assert_eq!(median(&mut [ms(3), ms(1), ms(2)]), ms(2));
        assert_eq!(median(&mut [ms(4), ms(1), ms(2), ms(3)]), Duration::from_micros(2500));
        let sorted = [ms(1), ms(2), ms(3), ms(4), ms(100)];
        assert_eq!(quantile_sorted(&sorted, 0.5), ms(3));
        assert_eq!(quantile_sorted(&sorted, 1.0), ms(100));
    }

    #[test]
    fn gigabytes_per_second() {
        assert!((gbps(1_000_000_000, Duration::from_secs(2)) - 0.5).abs() < 1e-12);
    }
}
