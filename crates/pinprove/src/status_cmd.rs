//! `pinprove status`: a daemon's GetStatus, readable.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use pinprove_server::pb::{self, srs_status::Tier};

use crate::remote;
use pinprove::units::bytes;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The daemon (host:port, http://host:port or unix:///path); the
    /// default config's address when left out.
    #[arg(long)]
    daemon: Option<String>,
    /// A file holding the daemon's bearer token.
    #[arg(long)]
    token_file: Option<PathBuf>,
}

pub fn run(args: &StatusArgs) -> Result<()> {
    let addr = args
        .daemon
        .clone()
        .unwrap_or_else(|| pinprove_server::Config::default().listen);
    let token = remote::token(args.token_file.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let s = runtime.block_on(async {
        let mut c = pinprove_server::client::connect(&addr, token.as_deref()).await?;
        let s = c
            .get_status(pb::GetStatusRequest {})
            .await
            .map_err(remote::status_error)?;
        anyhow::Ok(s.into_inner())
    })?;
    print!("{}", summary(&pinprove_server::client::uri(&addr), &s));
    Ok(())
}

fn uptime(s: u64) -> String {
    let d = Duration::from_secs(s);
    match d.as_secs() {
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
        s if s >= 3600 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s => format!("{}m {}s", s / 60, s % 60),
    }
}

/// The summary, line by line.
fn summary(addr: &str, s: &pb::GetStatusResponse) -> String {
    let mut out = format!(
        "daemon {addr}: up {}; {} proofs completed, {} failed\n",
        uptime(s.uptime_seconds),
        s.total_proofs_completed,
        s.total_proofs_failed
    );
    out += &format!(
        "memory: budget {}, pinned buffers {}\n",
        bytes(s.pinned_memory_limit_bytes),
        bytes(s.pinned_memory_bytes)
    );
    out += "queues:";
    for q in &s.queues {
        out += &format!("  {} {} waiting, {} proving;", q.proof_kind, q.pending, q.in_progress);
    }
    out.pop();
    out += "\n";
    if s.gpus.is_empty() {
        out += "GPUs: none (proving on the CPU)\n";
    }
    for g in &s.gpus {
        out += &format!(
            "GPU {} {}: {} free of {}",
            g.ordinal,
            g.name,
            bytes(g.vram_free_bytes),
            bytes(g.vram_total_bytes)
        );
        if !g.current_job_id.is_empty() {
            out += &format!(", proving {} ({})", g.current_job_id, g.current_proof_kind);
        }
        out += "\n";
    }
    if s.loaded_srs.is_empty() {
        out += "parameters: none known yet\n";
    }
    for p in &s.loaded_srs {
        let tier = match p.tier() {
            Tier::Hot => "in use",
            Tier::Warm => "loaded",
            Tier::Cold => "on disk",
        };
        out += &format!("parameters {}: {tier}", p.circuit_id);
        if p.size_bytes > 0 {
            out += &format!(", {}", bytes(p.size_bytes));
        }
        if p.ref_count > 0 {
            out += &format!(", {} partitions using them", p.ref_count);
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_what_the_status_holds() {
        let s = pb::GetStatusResponse {
            gpus: vec![pb::GpuStatus {
                ordinal: 0,
                name: "NVIDIA H200".into(),
                vram_total_bytes: 140 << 30,
                vram_free_bytes: 100 << 30,
                current_job_id: "job-4".into(),
                current_proof_kind: "porep".into(),
            }],
            loaded_srs: vec![pb::SrsStatus {
                circuit_id: "porep-32g".into(),
                tier: Tier::Hot as i32,
                size_bytes: 45 << 30,
                ref_count: 2,
            }],
            queues: vec![pb::QueueStatus {
                proof_kind: "porep".into(),
                pending: 3,
                in_progress: 1,
            }],
            total_proofs_completed: 12,
            total_proofs_failed: 1,
            uptime_seconds: 3723,
            pinned_memory_bytes: 12 << 30,
            pinned_memory_limit_bytes: 96 << 30,
        };
        let text = summary("http://127.0.0.1:9820", &s);
        for want in [
            "up 1h 2m; 12 proofs completed, 1 failed",
            "budget 96.00 GiB, pinned buffers 12.00 GiB",
            "porep 3 waiting, 1 proving",
            "GPU 0 NVIDIA H200: 100.00 GiB free of 140.00 GiB, proving job-4 (porep)",
            "parameters porep-32g: in use, 45.00 GiB, 2 partitions using them",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
    }
}
