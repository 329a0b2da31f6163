//! A proof through a daemon, as `prove` and `demo` ask for one: submit,
//! wait with progress, cancel on Ctrl-C. Without a daemon address, one
//! runs in this process on a private unix socket.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use pinprove_filecoin::{ProofKind, ProofRequest};
use pinprove_server::pb::{self, await_proof_response::Status as S};
use pinprove_server::{Config, Daemon, client};

use crate::progress::Progress;

/// A daemon started by this process, serving on a socket only it can reach.
pub struct InProcess {
    pub daemon: Daemon,
    dir: PathBuf,
}

impl InProcess {
    /// Starts a daemon from `config`, listening on a unix socket in a
    /// private directory (no HTTP page).
    pub async fn start(mut config: Config) -> Result<InProcess> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("pinprove-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        config.listen = format!("unix://{}", dir.join("pinprove.sock").display());
        config.http_listen = String::new();
        let daemon = Daemon::start_with(config, std::sync::Arc::new(crate::progress::Generation::default())).await?;
        Ok(InProcess { daemon, dir })
    }

    pub async fn client(&self) -> Result<client::Client> {
        Ok(client::connect(&self.daemon.endpoint().uri(), None).await?)
    }

    pub async fn stop(self) -> Result<()> {
        let stopped = self.daemon.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(stopped?)
    }
}

/// The bearer token in `file`, if one is named.
pub fn token(file: Option<&std::path::Path>) -> Result<Option<String>> {
    file.map(|f| {
        let t = std::fs::read_to_string(f).with_context(|| format!("reading the token file {}", f.display()))?;
        Ok(t.trim().to_string())
    })
    .transpose()
}

/// Proves `req` under `request_id`: submits it, shows progress until it
/// ends, and returns the result; a failure or cancellation is an error
/// carrying the daemon's reason. Ctrl-C cancels the job.
pub async fn prove(c: &mut client::Client, request_id: &str, req: ProofRequest) -> Result<pb::AwaitProofResponse> {
    let kind = req.kind;
    let submitted = c
        .submit_proof(pinprove_server::wire::submit_request(request_id, req))
        .await
        .map_err(status_error)?
        .into_inner();
    let job = submitted.job_id;
    let progress = Progress::new(&format!("{kind} {job}"));
    progress.set(&format!("submitted, {} ahead of it", submitted.queue_position));
    loop {
        let wait = c.await_proof(pb::AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms: 500,
        });
        let r = tokio::select! {
            r = wait => r.map_err(status_error)?.into_inner(),
            _ = tokio::signal::ctrl_c() => {
                let _ = c.cancel_proof(pb::CancelProofRequest { job_id: job.clone() }).await;
                bail!("interrupted: {job} cancelled");
            }
        };
        match r.status() {
            S::Timeout | S::Unknown => {
                if let Ok(s) = c.get_status(pb::GetStatusRequest {}).await {
                    progress.set(&queue_state(&s.into_inner(), kind));
                }
            }
            S::Completed => return Ok(r),
            S::Failed => bail!("{kind} {job} failed: {}", r.error_message),
            S::Cancelled => bail!("{kind} {job} was cancelled"),
        }
    }
}

/// What the daemon says about the kind's queue.
fn queue_state(s: &pb::GetStatusResponse, kind: ProofKind) -> String {
    match s.queues.iter().find(|q| q.proof_kind == kind.name()) {
        Some(q) if q.in_progress > 0 => {
            format!("proving ({} {kind} in progress, {} waiting)", q.in_progress, q.pending)
        }
        Some(q) => format!("waiting ({} {kind} waiting)", q.pending),
        None => "waiting".into(),
    }
}

/// The daemon's per-phase timings of a result.
pub fn timings(r: &pb::AwaitProofResponse) -> String {
    let ms = |m: u64| {
        if m >= 1000 {
            format!("{:.2} s", m as f64 / 1e3)
        } else {
            format!("{m} ms")
        }
    };
    format!(
        "queued {}, parameters {}, synthesis {}, proving {}, total {}",
        ms(r.queue_wait_ms),
        ms(r.srs_load_ms),
        ms(r.synthesis_ms),
        ms(r.gpu_compute_ms),
        ms(r.total_ms)
    )
}

/// A gRPC error as a readable one.
pub fn status_error(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("the daemon answered {:?}: {}", s.code(), s.message())
}
