//! The daemon's Prometheus text: the engine's metrics, then the job
//! table's counters and gauges (`GET /metrics` and `GetMetrics`).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use pinprove_mem::sync::Recover;

use pinprove_filecoin::ProofKind;

use crate::job_prover::JobProver;
use crate::jobs::Jobs;

/// The engine's metrics and the daemon's own.
pub(crate) fn metrics_text(jobs: &Jobs) -> String {
    metrics_text_of(jobs, &jobs.prover().engine().status())
}

/// [`metrics_text`] of an engine status the caller already read.
pub(crate) fn metrics_text_of(jobs: &Jobs, engine: &pinprove_engine::EngineStatus) -> String {
    let mut out = jobs.prover().engine().metrics_text_of(engine);
    daemon_metrics(jobs, &mut out);
    out
}

/// The job table's counters and gauges, per kind where they are kept so.
pub(crate) fn daemon_metrics<P: JobProver>(jobs: &Jobs<P>, out: &mut String) {
    let c = &jobs.counters;
    for (name, help, v) in [
        ("pinprove_requests_total", "Proof requests taken.", &c.submitted),
        (
            "pinprove_requests_deduplicated_total",
            "Repeats of a known request answered by its job.",
            &c.deduplicated,
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
        (
            "pinprove_requests_refused_full_total",
            "Requests refused because accepted work was at its bounds.",
            &c.refused_full,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
            v.load(Ordering::Relaxed)
        );
    }
    let refused = c.refused.load(Ordering::Relaxed) + crate::codec::REFUSED_ON_DECODE.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "# HELP pinprove_requests_refused_total Requests refused as invalid (by the wire's checks, or once decoded).\n\
         # TYPE pinprove_requests_refused_total counter\npinprove_requests_refused_total {refused}"
    );
    let _ = writeln!(
        out,
        "# HELP pinprove_proof_seconds Seconds from a Filecoin proof's request to its verified result, by kind.\n\
         # TYPE pinprove_proof_seconds histogram"
    );
    let latencies = c.proof_seconds.lock().recover().clone();
    for (k, h) in latencies.iter() {
        h.render(out, "pinprove_proof_seconds", &format!("kind=\"{}\"", k.name()));
    }
    let mut oldest = pinprove_filecoin::PerKind::<f64>::default();
    for j in jobs.active() {
        let age = j.submitted.elapsed().as_secs_f64();
        oldest[j.kind] = oldest[j.kind].max(age);
    }
    let _ = writeln!(
        out,
        "# HELP pinprove_jobs_oldest_seconds Age of the oldest unfinished job, by kind (0: none).\n\
         # TYPE pinprove_jobs_oldest_seconds gauge"
    );
    for (k, age) in oldest.iter() {
        let _ = writeln!(out, "pinprove_jobs_oldest_seconds{{kind=\"{}\"}} {age:.3}", k.name());
    }
    let _ = writeln!(
        out,
        "# HELP pinprove_job_latency_bound_seconds How long a job of a kind may take before it is late for the chain.\n\
         # TYPE pinprove_job_latency_bound_seconds gauge"
    );
    for k in ProofKind::ALL {
        if let Some(bound) = k.latency_bound() {
            let _ = writeln!(
                out,
                "pinprove_job_latency_bound_seconds{{kind=\"{}\"}} {}",
                k.name(),
                bound.as_secs_f64()
            );
        }
    }
    let (active, bytes, max_bytes, known) = jobs.load();
    let _ = writeln!(
        out,
        "# HELP pinprove_jobs_active Jobs accepted and not finished, by kind.\n# TYPE pinprove_jobs_active gauge"
    );
    for (k, n) in active.iter() {
        let _ = writeln!(out, "pinprove_jobs_active{{kind=\"{}\"}} {n}", k.name());
    }
    let _ = writeln!(
        out,
        "# HELP pinprove_request_bytes Bytes counted for accepted, unfinished requests.\n\
         # TYPE pinprove_request_bytes gauge\npinprove_request_bytes {bytes}\n\
         # HELP pinprove_request_bytes_limit The bound on those bytes.\n\
         # TYPE pinprove_request_bytes_limit gauge\npinprove_request_bytes_limit {max_bytes}\n\
         # HELP pinprove_jobs_known Jobs in the job table (unfinished, and results kept for retries).\n\
         # TYPE pinprove_jobs_known gauge\npinprove_jobs_known {known}"
    );
    let _ = writeln!(
        out,
        "# HELP pinprove_verifications_total Proofs verified before they were returned.\n\
         # TYPE pinprove_verifications_total counter\npinprove_verifications_total {}\n\
         # HELP pinprove_verification_seconds_total Time spent verifying proofs before returning them.\n\
         # TYPE pinprove_verification_seconds_total counter\npinprove_verification_seconds_total {:.6}",
        c.verified.load(Ordering::Relaxed),
        c.verification_us.load(Ordering::Relaxed) as f64 / 1e6
    );
}
