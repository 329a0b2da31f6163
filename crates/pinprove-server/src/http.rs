//! The HTTP status page on its own address: `GET /status` (JSON: budget,
//! pool, parameters, queues, GPUs, partitions in flight with their phase,
//! the daemon's jobs), `GET /metrics` (Prometheus text), `GET /healthz`
//! (503 once a GPU is lost).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State as Axum;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;

use crate::jobs::{Jobs, State};
use crate::service::Service;

/// The router.
pub(crate) fn router(service: Arc<Service>) -> axum::Router {
    axum::Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(service)
}

#[derive(Serialize)]
struct JobView {
    job: String,
    /// The request id, as given (an opaque string).
    request_id: String,
    kind: &'static str,
    state: &'static str,
    engine_job: Option<String>,
    age_s: f64,
}

#[derive(Serialize)]
struct StatusView {
    uptime_s: u64,
    jobs: Vec<JobView>,
    engine: pinprove_engine::EngineStatus,
}

async fn status(Axum(s): Axum<Arc<Service>>) -> Json<StatusView> {
    let jobs = s
        .jobs
        .active()
        .iter()
        .map(|j| JobView {
            job: j.id.clone(),
            request_id: j.request_id.clone(),
            kind: j.kind.name(),
            state: match j.state() {
                State::Preparing => "preparing",
                State::Submitted => "proving",
                State::Ended(_) => "ended",
            },
            engine_job: j.engine_job().map(|e| e.to_string()),
            age_s: j.submitted.elapsed().as_secs_f64(),
        })
        .collect();
    Json(StatusView {
        uptime_s: s.started.elapsed().as_secs(),
        jobs,
        engine: s.jobs.prover().engine().status(),
    })
}

async fn metrics(Axum(s): Axum<Arc<Service>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics_text(&s.jobs),
    )
}

async fn healthz(Axum(s): Axum<Arc<Service>>) -> (StatusCode, String) {
    let lost: Vec<String> = s
        .jobs
        .prover()
        .engine()
        .status()
        .devices
        .into_iter()
        .filter_map(|d| d.lost.map(|why| format!("{}: {why}", d.name)))
        .collect();
    if lost.is_empty() {
        (StatusCode::OK, "ok\n".into())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("lost: {}\n", lost.join("; ")))
    }
}

/// The engine's metrics and the daemon's own.
pub(crate) fn metrics_text(jobs: &Jobs) -> String {
    let mut out = jobs.prover().engine().metrics_text();
    let c = &jobs.counters;
    for (name, help, v) in [
        ("pinprove_requests_total", "Proof requests taken.", &c.submitted),
        (
            "pinprove_requests_deduplicated_total",
            "Repeats of a known request answered by its job.",
            &c.deduplicated,
        ),
        (
            "pinprove_requests_refused_total",
            "Requests refused as invalid.",
            &c.refused,
        ),
        (
            "pinprove_jobs_proved_total",
            "Filecoin proofs returned, verified.",
            &c.proved,
        ),
        ("pinprove_jobs_failed_total", "Filecoin proofs that failed.", &c.failed),
        (
            "pinprove_jobs_cancelled_by_clients_total",
            "Jobs cancelled.",
            &c.cancelled,
        ),
        (
            "pinprove_jobs_cancelled_after_disconnect_total",
            "Jobs cancelled because their client went away.",
            &c.disconnected_cancels,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            v.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "# HELP pinprove_verifications_total Proofs verified before they were returned.\n\
         # TYPE pinprove_verifications_total counter\npinprove_verifications_total {}\n\
         # HELP pinprove_verification_seconds_total Time spent verifying proofs before returning them.\n\
         # TYPE pinprove_verification_seconds_total counter\npinprove_verification_seconds_total {:.6}",
        c.verified.load(Ordering::Relaxed),
        c.verification_us.load(Ordering::Relaxed) as f64 / 1e6
    );
    out
}
