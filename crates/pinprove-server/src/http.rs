//! The HTTP status page on its own address: `GET /` (a page, no external
//! assets, that shows what `/status` and `/timeline.svg` say and refreshes
//! itself), `GET /status` (JSON: budget, pool, parameters, queues, GPUs,
//! partitions in flight with their phase, the daemon's jobs, recent
//! proofs, the alert rules that hold), `GET /timeline.svg` (the engine's timeline of the last five
//! minutes), `GET /metrics` (Prometheus text), `GET /healthz` (503 once a
//! GPU is lost).
//!
//! The page answers only requests whose `Host` is an IP address,
//! `localhost`, or a name in `http_allowed_hosts`: a web page a browser
//! loaded from elsewhere cannot reach it through a name it points at the
//! daemon (DNS rebinding). With a bearer token configured, `/status`,
//! `/timeline.svg` and `/metrics` need it too; the page itself holds no
//! data and sends the token it is given (a form, or `#token=` in its
//! address) with its requests; `/healthz` says only whether the GPUs are
//! well.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State as Axum};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use crate::ids::shown;
use crate::jobs::{Ended, State};
use crate::metrics::{metrics_text, metrics_text_of};
use crate::service::Service;

/// What the page serves, and to whom.
#[derive(Clone)]
pub(crate) struct Page {
    pub service: Arc<Service>,
    /// The bearer token `/status` and `/metrics` need, when configured.
    pub token: Option<Arc<str>>,
    /// Host names answered besides IP addresses and `localhost`.
    pub hosts: Vec<String>,
}

/// The router.
pub(crate) fn router(page: Page) -> axum::Router {
    let guarded = axum::Router::new()
        .route("/status", get(status))
        .route("/timeline.svg", get(timeline))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(page.clone(), needs_token));
    axum::Router::new()
        .merge(guarded)
        .route("/", get(page_html))
        .route("/healthz", get(healthz))
        .layer(middleware::from_fn_with_state(page.clone(), known_host))
        .with_state(page)
}

/// Whether `host` (a `Host` header: name or address, maybe a port) is one
/// the page answers to.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = match host.strip_prefix('[') {
        // [::1]:9821
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                host
            }
        }),
    };
    name.parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

async fn known_host(Axum(page): Axum<Page>, headers: HeaderMap, req: Request, next: Next) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if host_allowed(host, &page.hosts) {
        return next.run(req).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        format!(
            "this page answers to IP addresses, localhost and http_allowed_hosts, not host \"{}\"\n",
            shown(host)
        ),
    )
        .into_response()
}

async fn needs_token(Axum(page): Axum<Page>, headers: HeaderMap, req: Request, next: Next) -> Response {
    let Some(token) = &page.token else {
        return next.run(req).await;
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(t) if t.len() == token.len() && t.bytes().zip(token.bytes()).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0 => {
            next.run(req).await
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            "this page needs `authorization: Bearer <token>`\n",
        )
            .into_response(),
    }
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
struct RecentView {
    job: String,
    kind: &'static str,
    outcome: &'static str,
    /// From the request to the result.
    took_s: f64,
    ended_s_ago: f64,
}

#[derive(Serialize)]
struct StatusView {
    uptime_s: u64,
    jobs: Vec<JobView>,
    /// The last proofs that ended, newest first.
    recent: Vec<RecentView>,
    /// The shipped alert rules that hold now (deploy/pinprove-alerts.yml).
    alerts: Vec<crate::alerts::Firing>,
    engine: pinprove_engine::EngineStatus,
}

/// Proofs the status shows as recent.
const RECENT: usize = 20;
/// What the page's timeline covers.
const TIMELINE_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

async fn page_html() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        include_str!("page.html"),
    )
}

async fn timeline(Axum(page): Axum<Page>) -> impl IntoResponse {
    let svg = page
        .service
        .jobs
        .prover()
        .engine()
        .timeline()
        .svg_of_last(TIMELINE_WINDOW);
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        svg,
    )
}

async fn status(Axum(page): Axum<Page>) -> Json<StatusView> {
    let s = &page.service;
    let service = Arc::clone(s);
    // One reading of the engine (its locks: off the runtime) serves the
    // view and the metrics the alert rules are evaluated over.
    let read = tokio::task::spawn_blocking(move || {
        let engine = service.jobs.prover().engine().status();
        let alerts = service.alerts.firing(&metrics_text_of(&service.jobs, &engine));
        (alerts, engine)
    })
    .await;
    let (alerts, engine) = match read {
        Ok(read) => read,
        Err(_) => (Vec::new(), s.jobs.prover().engine().status()),
    };
    let jobs = s
        .jobs
        .active()
        .iter()
        .map(|j| JobView {
            job: j.id.clone(),
            request_id: shown(&j.request_id),
            kind: j.kind.name(),
            state: match j.state() {
                State::Preparing => "decoding",
                State::Decoded => "waiting for parameters",
                State::Submitted(_) => "proving",
                State::Ended(_) => "ended",
            },
            engine_job: j.engine_job().map(|e| e.to_string()),
            age_s: j.submitted.elapsed().as_secs_f64(),
        })
        .collect();
    let recent = s
        .jobs
        .recent(RECENT)
        .into_iter()
        .map(|(j, ended)| RecentView {
            job: j.id.clone(),
            kind: j.kind.name(),
            outcome: match j.state() {
                State::Ended(Ended::Proved(_)) => "proved",
                State::Ended(Ended::Cancelled) => "cancelled",
                _ => "failed",
            },
            took_s: ended.saturating_duration_since(j.submitted).as_secs_f64(),
            ended_s_ago: ended.elapsed().as_secs_f64(),
        })
        .collect();
    Json(StatusView {
        uptime_s: s.started.elapsed().as_secs(),
        jobs,
        recent,
        alerts,
        engine,
    })
}

async fn metrics(Axum(page): Axum<Page>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics_text(&page.service.jobs),
    )
}

async fn healthz(Axum(page): Axum<Page>) -> (StatusCode, String) {
    let lost: Vec<String> = page
        .service
        .jobs
        .prover()
        .engine()
        .status()
        .devices
        .into_iter()
        .filter_map(|d| d.lost.map(|why| format!("{}: {why}", d.id)))
        .collect();
    if lost.is_empty() {
        (StatusCode::OK, "ok\n".into())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("lost: {}\n", lost.join("; ")))
    }
}
