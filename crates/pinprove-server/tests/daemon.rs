//! The daemon end to end on the CPU backend, through a client generated
//! from the .proto: every Filecoin kind at 2 KiB over TCP and a unix
//! socket, verified by filecoin-proofs-api; concurrent clients with mixed
//! priorities; request ids as retry keys; cancellation, disconnects, bad
//! and unauthenticated requests; shutdown with a proof in flight.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{ProofKind, ProofRequest};
use pinprove_mem::BudgetConfig;
use pinprove_server::pb::{self, await_proof_response::Status as S};
use pinprove_server::{Config, Daemon, client};
use pinprove_stack::BackendKind;
use tonic::Code;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-daemon-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(dir: &Path) -> Config {
    let mut c = Config {
        listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        ..Config::default()
    };
    c.memory.budget = BudgetConfig::Fixed(12 << 30);
    c.gpu.backend = BackendKind::Cpu;
    c.synthesis.workers = Some(2);
    c.hints.dir = dir.join("hints");
    c.jobs.disconnect_grace_secs = 1;
    c.jobs.shutdown_grace_secs = 120;
    // A fresh machine makes the 2 KiB parameters on first use.
    c.filecoin.generate_parameters = true;
    c
}

/// The wire form of a request.
fn submit(id: &str, req: &ProofRequest, priority: pb::Priority) -> pb::SubmitProofRequest {
    let kind = match req.kind {
        ProofKind::PoRep => pb::ProofKind::PorepSealCommit,
        ProofKind::SnapDeals => pb::ProofKind::SnapDealsUpdate,
        ProofKind::WindowPoSt => pb::ProofKind::WindowPostPartition,
        ProofKind::WinningPoSt => pb::ProofKind::WinningPost,
    };
    pb::SubmitProofRequest {
        request_id: id.into(),
        proof_kind: kind as i32,
        sector_size: req.sector_size,
        registered_proof: req.registered_proof,
        priority: priority as i32,
        vanilla_proof: req.vanilla_proof.clone(),
        vanilla_proofs: req.vanilla_proofs.clone(),
        sector_number: req.sector_number,
        miner_id: req.miner_id,
        randomness: req.randomness.clone(),
        partition_index: req.partition_index,
        comm_r_old: req.comm_r_old.clone(),
        comm_r_new: req.comm_r_new.clone(),
        comm_d_new: req.comm_d_new.clone(),
    }
}

/// Loads (on a fresh machine: makes, which takes minutes) the parameters
/// of `ids`, so that what a test times is proving alone.
async fn preload(addr: &str, token: Option<&str>, ids: &[&str]) {
    let mut c = client::connect(addr, token).await.unwrap();
    for id in ids {
        c.preload_srs(pb::PreloadSrsRequest {
            circuit_id: id.to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("preloading {id}: {e:?}"));
    }
}

async fn prove(c: &mut client::Client, s: pb::SubmitProofRequest) -> pb::AwaitProofResponse {
    c.prove(pb::ProveRequest { submit: Some(s) })
        .await
        .expect("Prove answers")
        .into_inner()
        .result
        .expect("a result")
}

/// The daemon's engine is back at its idle values.
fn assert_idle(d: &Daemon, what: &str) {
    if let Err(held) = pinprove_filecoin::sample::check_idle(d.prover().engine(), Duration::from_secs(60)) {
        panic!("{what}: {held}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_kind_proves_through_the_daemon_with_concurrent_clients_and_priorities() {
    let dir = temp_dir("kinds");
    let daemon = Daemon::start(config(&dir)).await.unwrap();
    let addr = daemon.endpoint().uri();
    let mut porep_sector = SampleSector::seal(&dir.join("s1"), 2048, 1, 1000, 11).unwrap();
    let mut snap_sector = SampleSector::seal(&dir.join("s2"), 2048, 2, 1000, 12).unwrap();
    let porep = porep_sector.porep_request();
    let snap = snap_sector.snap_update(&dir.join("u2")).unwrap();
    let r_window = porep_sector.randomness();
    let sectors = [1, 4, 6];
    let window = porep_sector.window_post_requests(&sectors, r_window).unwrap();
    let r_winning = porep_sector.randomness();
    let winning = porep_sector.winning_post_request(r_winning).unwrap();
    preload(&addr, None, &["porep-2k", "snap-2k", "wpost-2k", "winning-2k"]).await;

    // Eight clients at once. PoRep and SnapDeals first; then the WindowPoSt
    // partitions, all under one request id as Curio sends them (different
    // payloads: separate jobs); a repeat of the PoRep request (same id and
    // payload: the same job); the WinningPoSt last, CRITICAL.
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    let spawn = |calls: &mut tokio::task::JoinSet<_>, name: &'static str, s: pb::SubmitProofRequest, delay_ms: u64| {
        let addr = addr.clone();
        calls.spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let mut c = client::connect(&addr, None).await.unwrap();
            let r = prove(&mut c, s).await;
            (name, r, started.elapsed())
        });
    };
    spawn(
        &mut calls,
        "porep",
        submit("porep-1000-1", &porep, pb::Priority::Normal),
        0,
    );
    spawn(
        &mut calls,
        "snap",
        submit("snap-1000-2", &snap, pb::Priority::Normal),
        0,
    );
    for (i, w) in window.iter().enumerate() {
        let name = ["wpost-0", "wpost-1"][i];
        spawn(
            &mut calls,
            name,
            submit("wdpost-1000-0-[0 1 2]", w, pb::Priority::High),
            300,
        );
    }
    spawn(
        &mut calls,
        "porep-again",
        submit("porep-1000-1", &porep, pb::Priority::Normal),
        300,
    );
    let mut second = porep.clone();
    second.priority = None;
    spawn(
        &mut calls,
        "porep-unspecified-priority",
        submit("porep-1000-1b", &second, pb::Priority::Unspecified),
        400,
    );
    spawn(
        &mut calls,
        "winning-other-id",
        submit("winpost-1000-a", &winning, pb::Priority::Critical),
        1500,
    );
    spawn(
        &mut calls,
        "winning",
        submit("winpost-1000-b", &winning, pb::Priority::Critical),
        1500,
    );
    let mut done = std::collections::HashMap::new();
    while let Some(r) = calls.join_next().await {
        let (name, r, at) = r.unwrap();
        assert_eq!(r.status(), S::Completed, "{name}: {}", r.error_message);
        assert_eq!(r.proof.len(), 192, "{name}");
        done.insert(name, (r, at));
    }
    // filecoin-proofs-api accepts every proof.
    assert!(porep_sector.verify_seal(&done["porep"].0.proof).unwrap());
    assert!(
        porep_sector
            .verify_seal(&done["porep-unspecified-priority"].0.proof)
            .unwrap()
    );
    assert!(SampleSector::verify_update(&snap, &done["snap"].0.proof).unwrap());
    let merged = [done["wpost-0"].0.proof.clone(), done["wpost-1"].0.proof.clone()].concat();
    assert!(porep_sector.verify_window_post(&sectors, r_window, &merged).unwrap());
    assert_ne!(
        done["wpost-0"].0.proof, done["wpost-1"].0.proof,
        "one id, two payloads: two proofs"
    );
    assert!(
        porep_sector
            .verify_winning_post(r_winning, &done["winning"].0.proof)
            .unwrap()
    );
    // The repeat was the same job.
    assert_eq!(done["porep"].0.job_id, done["porep-again"].0.job_id);
    assert_eq!(done["porep"].0.proof, done["porep-again"].0.proof);
    assert_ne!(done["porep"].0.job_id, done["porep-unspecified-priority"].0.job_id);
    // The WinningPoSt, asked for last, overtook the PoRep still queued
    // behind the first two jobs (those were already being proved: nothing
    // is preempted).
    let mut order: Vec<_> = done.iter().map(|(name, (_, at))| (*at, *name)).collect();
    order.sort();
    eprintln!("finished: {order:?}");
    let winning_at = done["winning"].1;
    let queued_at = done["porep-unspecified-priority"].1;
    assert!(
        winning_at < queued_at,
        "winning {winning_at:?}, the queued porep {queued_at:?}"
    );
    assert!(done["porep"].0.synthesis_ms > 0 && done["porep"].0.total_ms >= done["porep"].0.synthesis_ms);

    // Status and metrics tell the truth afterwards.
    let mut c = client::connect(&addr, None).await.unwrap();
    let status = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert!(
        status.queues.iter().all(|q| q.pending == 0 && q.in_progress == 0),
        "{:?}",
        status.queues
    );
    assert_eq!(
        status.total_proofs_completed, 7,
        "seven jobs proved (the repeat was one of them)"
    );
    assert!(
        status
            .loaded_srs
            .iter()
            .any(|s| s.circuit_id == "porep-2k" && s.size_bytes > 0)
    );
    assert!(status.pinned_memory_limit_bytes > 0);
    let metrics = c
        .get_metrics(pb::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text;
    assert!(metrics.contains("pinprove_requests_deduplicated_total 1"), "{metrics}");
    assert!(metrics.contains("pinprove_proofs_completed_total"));
    // Every returned proof was verified first, and the cost is counted.
    assert!(metrics.contains("pinprove_verifications_total 7"), "{metrics}");
    let verify_s: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("pinprove_verification_seconds_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(verify_s > 0.0, "{metrics}");
    assert!(
        metrics.contains("pinprove_proof_seconds_count{kind=\"porep\"} 2"),
        "two PoRep jobs proved: {metrics}"
    );
    // Every metric the Grafana dashboard queries is one the daemon exports
    // (those of GPUs need NVML: the engine's telemetry test checks them).
    for name in dashboard_metrics().iter().filter(|n| !n.starts_with("pinprove_gpu_")) {
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "the dashboard queries {name}"
        );
    }
    // And every metric the shipped alert rules read.
    for name in alert_metrics() {
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "the alert rules read {name}"
        );
    }
    // HTTP: status, metrics, health.
    let http = daemon.http_addr().unwrap();
    let status = || async {
        let body = http_get(http, "/status").await;
        serde_json::from_str::<serde_json::Value>(body.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    };
    let json = status().await;
    assert!(json["engine"]["budget_total"].as_u64().unwrap() > 0);
    assert!(json["alerts"].is_array(), "{json}");
    assert!(http_get(http, "/metrics").await.contains("pinprove_budget_total_bytes"));
    assert!(http_get(http, "/healthz").await.starts_with("HTTP/1.1 200"));
    // Parameters are evicted when idle; loading them again says so.
    let evicted = c
        .evict_srs(pb::EvictSrsRequest {
            circuit_id: "wpost-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(evicted.was_loaded && evicted.freed_bytes > 0, "{evicted:?}");
    let preload = c
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "wpost-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!preload.already_loaded);
    let unknown = c
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "porep-3g".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::InvalidArgument);
    assert_idle(&daemon, "after the proofs");
    daemon.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A request refused as invalid: the status page's alerts say what the
/// shipped Prometheus rules would, from the daemon's own metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_request_fires_its_alert_on_the_status_page() {
    let dir = temp_dir("alerts");
    let daemon = Daemon::start(config(&dir)).await.unwrap();
    let http = daemon.http_addr().unwrap();
    let status = || async {
        let body = http_get(http, "/status").await;
        serde_json::from_str::<serde_json::Value>(body.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    };
    let firing = |json: &serde_json::Value| -> Vec<String> {
        let alerts = json["alerts"]
            .as_array()
            .expect("the status lists the alerts that fire");
        alerts
            .iter()
            .map(|a| a["alert"].as_str().unwrap().to_string())
            .collect()
    };
    let json = status().await;
    assert!(firing(&json).is_empty(), "{}", json["alerts"]);
    let mut c = client::connect(&daemon.endpoint().uri(), None).await.unwrap();
    let req = pinprove_filecoin::synthetic::request(ProofKind::WinningPoSt, 2048, 1).unwrap();
    let mut invalid = submit("invalid", &req, pb::Priority::Critical);
    invalid.proof_kind = 0;
    assert!(c.prove(pb::ProveRequest { submit: Some(invalid) }).await.is_err());
    let metrics = http_get(http, "/metrics").await;
    assert!(metrics.contains("\npinprove_requests_refused_total 1\n"), "{metrics}");
    let json = status().await;
    assert_eq!(firing(&json), ["PinproveRequestRefused"], "{}", json["alerts"]);
    assert_eq!(json["alerts"][0]["severity"], "warning");
    daemon.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One HTTP/1.1 GET, the whole response as text.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_unix_socket_with_mode_0600_serves_and_bad_requests_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("unix");
    let mut cfg = config(&dir);
    let socket = dir.join("run").join("pinprove.sock");
    cfg.listen = format!("unix://{}", socket.display());
    cfg.http_listen = String::new();
    let daemon = Daemon::start(cfg).await.unwrap();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut c = client::connect(&daemon.endpoint().uri(), None).await.unwrap();
    let mut sector = SampleSector::seal(&dir.join("s"), 2048, 3, 1000, 13).unwrap();
    let r = sector.randomness();
    let winning = sector.winning_post_request(r).unwrap();
    let ok = prove(&mut c, submit("winpost-unix", &winning, pb::Priority::Critical)).await;
    assert_eq!(ok.status(), S::Completed, "{}", ok.error_message);
    assert!(sector.verify_winning_post(r, &ok.proof).unwrap());

    // Malformed: no kind, garbage vanilla proofs, a proof number that does
    // not exist, wrong sizes, no submit at all. Each an INVALID_ARGUMENT
    // that says what is wrong.
    let mut no_kind = submit("x", &winning, pb::Priority::Critical);
    no_kind.proof_kind = 0;
    let mut garbage = submit("x", &winning, pb::Priority::Critical);
    garbage.vanilla_proofs = vec![vec![1, 2, 3]];
    let mut number = submit("x", &winning, pb::Priority::Critical);
    number.registered_proof = 99;
    let mut short = submit("x", &winning, pb::Priority::Critical);
    short.randomness = vec![0; 31];
    let mut window_as_winning = submit("x", &winning, pb::Priority::Critical);
    window_as_winning.registered_proof = 10;
    let mut c1 = submit("x", &sector.porep_request(), pb::Priority::Normal);
    c1.vanilla_proof = b"{\"SectorNum\": 3, \"Phase1Out\": \"!!!\", \"SectorSize\": 2048}".to_vec();
    let mut other_sector = submit("x", &sector.porep_request(), pb::Priority::Normal);
    other_sector.sector_number = 4;
    for (what, s, says) in [
        ("no kind", no_kind, "proof_kind"),
        ("garbage", garbage, "does not decode"),
        ("number", number, "no PoSt proof number 99"),
        ("short randomness", short, "31 bytes"),
        ("wrong type", window_as_winning, "is not a winning proof"),
        ("bad base64", c1, "base64"),
        ("another sector", other_sector, "names sector 3"),
    ] {
        let err = c.prove(pb::ProveRequest { submit: Some(s) }).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{what}: {err:?}");
        assert!(err.message().contains(says), "{what}: {}", err.message());
    }
    let err = c.prove(pb::ProveRequest { submit: None }).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    // Big but within 256 MiB: it arrives and is refused for what it holds.
    let mut big = submit("x", &winning, pb::Priority::Critical);
    big.vanilla_proofs = vec![vec![0; 100 << 20]];
    let err = c.prove(pb::ProveRequest { submit: Some(big) }).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    // Too big: more than 256 MiB.
    let mut huge = submit("x", &winning, pb::Priority::Critical);
    huge.vanilla_proofs = vec![vec![0; (256 << 20) + 1]];
    let err = c.prove(pb::ProveRequest { submit: Some(huge) }).await.unwrap_err();
    assert!(
        matches!(err.code(), Code::OutOfRange | Code::ResourceExhausted | Code::Internal),
        "{err:?}"
    );
    // A client that goes away while its (large) request is still being
    // decoded leaves nothing behind: the job reaches its end (here: refused,
    // a synthetic request fails the vanilla checks), and a retry gets that
    // answer instead of waiting on a job stuck in preparation.
    let large = pinprove_filecoin::synthetic::request(ProofKind::WindowPoSt, 32 << 30, 5).unwrap();
    let mut req = tonic::Request::new(pb::ProveRequest {
        submit: Some(submit("wdpost-large", &large, pb::Priority::High)),
    });
    req.set_timeout(Duration::from_millis(20));
    assert!(c.prove(req).await.is_err(), "the deadline ends the call");
    let retry = tokio::time::timeout(
        Duration::from_secs(120),
        c.prove(pb::ProveRequest {
            submit: Some(submit("wdpost-large", &large, pb::Priority::High)),
        }),
    )
    .await
    .expect("a retry is answered, not left waiting on a job that never ends")
    .unwrap_err();
    assert_eq!(retry.code(), Code::InvalidArgument, "{retry:?}");
    let status = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
    assert!(
        status.queues.iter().all(|q| q.pending == 0 && q.in_progress == 0),
        "no job is left behind: {:?}",
        status.queues
    );
    // Still serving.
    let again = prove(&mut c, submit("winpost-unix-2", &winning, pb::Priority::Critical)).await;
    assert_eq!(again.status(), S::Completed);
    assert_idle(&daemon, "unix");
    daemon.shutdown().await.unwrap();
    assert!(!socket.exists(), "the socket is removed at exit");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_guards_tcp_and_cancellation_and_disconnects_return_everything() {
    let dir = temp_dir("cancel");
    let mut cfg = config(&dir);
    let token = dir.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    cfg.auth_token_file = Some(token);
    let daemon = Daemon::start(cfg).await.unwrap();
    let addr = daemon.endpoint().uri();
    let sector = SampleSector::seal(&dir.join("s"), 2048, 5, 1000, 14).unwrap();
    let porep = sector.porep_request();
    preload(&addr, Some("s3cret"), &["porep-2k"]).await;

    // No token, a wrong token: refused.
    for t in [None, Some("wrong")] {
        let mut c = client::connect(&addr, t).await.unwrap();
        let err = c.get_status(pb::GetStatusRequest {}).await.unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{t:?}");
    }
    let mut c = client::connect(&addr, Some("s3cret")).await.unwrap();

    // Cancel a running job.
    let job = c
        .submit_proof(submit("porep-cancel", &porep, pb::Priority::Normal))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    // AwaitProof honours its timeout: the proof takes seconds.
    let waited = Instant::now();
    let r = c
        .await_proof(pb::AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms: 200,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status(), S::Timeout);
    assert!(waited.elapsed() < Duration::from_secs(5), "{:?}", waited.elapsed());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
        if s.queues.iter().any(|q| q.proof_kind == "porep" && q.in_progress == 1) {
            break;
        }
        assert!(Instant::now() < deadline, "the job never started: {:?}", s.queues);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled = c
        .cancel_proof(pb::CancelProofRequest { job_id: job.clone() })
        .await
        .unwrap()
        .into_inner();
    assert!(cancelled.was_running);
    let r = c
        .await_proof(pb::AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms: 30_000,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status(), S::Cancelled);
    assert_idle(&daemon, "after the cancel");
    // A repeat after a cancellation is a new attempt.
    let again = c
        .submit_proof(submit("porep-cancel", &porep, pb::Priority::Normal))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    assert_ne!(again, job);
    c.cancel_proof(pb::CancelProofRequest { job_id: again }).await.unwrap();
    // An unknown job.
    let unknown = c
        .await_proof(pb::AwaitProofRequest {
            job_id: "job-999".into(),
            timeout_ms: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);

    // A Prove whose client goes away (its deadline) cancels its job after
    // the grace period (1 s here)…
    let mut req = tonic::Request::new(pb::ProveRequest {
        submit: Some(submit("porep-gone", &porep, pb::Priority::Normal)),
    });
    req.set_timeout(Duration::from_millis(1500));
    let err = c.prove(req).await.unwrap_err();
    assert!(
        matches!(err.code(), Code::Cancelled | Code::DeadlineExceeded),
        "{err:?}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_idle(&daemon, "after the disconnect");
    let metrics = c
        .get_metrics(pb::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text;
    assert!(
        metrics.contains("pinprove_jobs_cancelled_after_disconnect_total 1"),
        "{metrics}"
    );
    // …but a retry within the grace period re-attaches to the same job.
    let mut req = tonic::Request::new(pb::ProveRequest {
        submit: Some(submit("porep-back", &porep, pb::Priority::Normal)),
    });
    req.set_timeout(Duration::from_millis(500));
    assert!(c.prove(req).await.is_err());
    let back = prove(&mut c, submit("porep-back", &porep, pb::Priority::Normal)).await;
    assert_eq!(back.status(), S::Completed, "{}", back.error_message);
    assert!(sector.verify_seal(&back.proof).unwrap());
    let metrics = c
        .get_metrics(pb::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text;
    assert!(
        metrics.contains("pinprove_requests_deduplicated_total 1"),
        "the retry found the job: {metrics}"
    );
    assert!(metrics.contains("pinprove_jobs_cancelled_after_disconnect_total 1"));
    assert_idle(&daemon, "at the end");
    daemon.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_lets_the_proof_in_flight_finish_and_takes_no_more() {
    let dir = temp_dir("shutdown");
    let daemon = Daemon::start(config(&dir)).await.unwrap();
    let addr = daemon.endpoint().uri();
    let mut sector = SampleSector::seal(&dir.join("s"), 2048, 8, 1000, 15).unwrap();
    let snap = sector.snap_update(&dir.join("u")).unwrap();
    preload(&addr, None, &["snap-2k"]).await;
    let in_flight = {
        let addr = addr.clone();
        let s = submit("snap-shutdown", &snap, pb::Priority::Normal);
        tokio::spawn(async move {
            let mut c = client::connect(&addr, None).await.unwrap();
            prove(&mut c, s).await
        })
    };
    // Shut down once the job runs in the engine (not after a fixed time: on
    // a busy machine decoding the request can take longer than any sleep;
    // and not while it is still being decoded: drain cancels that).
    let mut c = client::connect(&addr, None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = c.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner();
        if s.queues.iter().any(|q| q.proof_kind == "snap" && q.in_progress == 1) {
            break;
        }
        assert!(Instant::now() < deadline, "the job never arrived: {:?}", s.queues);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(c);
    let stopping = tokio::spawn(daemon.shutdown());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // New work is refused while draining.
    if let Ok(mut c) = client::connect(&addr, None).await {
        let r = sector.randomness();
        let err = c
            .prove(pb::ProveRequest {
                submit: Some(submit(
                    "late",
                    &sector.winning_post_request(r).unwrap(),
                    pb::Priority::Critical,
                )),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    }
    let r = in_flight.await.unwrap();
    assert_eq!(r.status(), S::Completed, "{}", r.error_message);
    assert!(SampleSector::verify_update(&snap, &r.proof).unwrap());
    stopping.await.unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Debian's Chromium, where it is installed (`scripts/install-browser`;
/// CI installs it and sets `PINPROVE_REQUIRE_BROWSER`, elsewhere a test
/// without it says it skipped).
fn browser(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("PINPROVE_REQUIRE_BROWSER").is_none(),
            "{test}: no chromium on PATH (scripts/install-browser)"
        );
        eprintln!("{test}: skipped: no chromium on PATH (scripts/install-browser installs it)");
    }
    found
}

/// Runs headless Chromium on `url` with `args` (nothing fetched in the
/// background: test machines may have no outside network) and returns what
/// it printed.
fn headless(chromium: &Path, args: &[&str], url: &str) -> String {
    let profile = temp_dir("chromium-profile");
    let mut cmd = std::process::Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&profile);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The status page in a real browser, against a daemon with a token that
/// has proved a WinningPoSt: the page itself holds no data, and with the
/// token (given in its address's fragment) its DOM lists the job among the
/// recent proofs, the parameters, the budget and the timeline's SVG.
/// `PINPROVE_PAGE_SCREENSHOT=FILE` also saves a screenshot of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_status_page_shows_the_daemon_at_work_in_a_browser() {
    let Some(chromium) = browser("the_status_page_shows_the_daemon_at_work_in_a_browser") else {
        return;
    };
    let dir = temp_dir("page");
    let mut cfg = config(&dir);
    let token = dir.join("token");
    std::fs::write(&token, "page-token\n").unwrap();
    cfg.auth_token_file = Some(token);
    let daemon = Daemon::start(cfg).await.unwrap();
    let mut c = client::connect(&daemon.endpoint().uri(), Some("page-token"))
        .await
        .unwrap();
    let mut sector = SampleSector::seal(&dir.join("s"), 2048, 6, 1000, 16).unwrap();
    let r = sector.randomness();
    let winning = sector.winning_post_request(r).unwrap();
    let ok = prove(&mut c, submit("winpost-page", &winning, pb::Priority::Critical)).await;
    assert_eq!(ok.status(), S::Completed, "{}", ok.error_message);
    let http = daemon.http_addr().unwrap();
    // The page is there for anyone; what it shows needs the token.
    assert!(http_get(http, "/").await.contains("<title>pinprove</title>"));
    for data in ["/status", "/timeline.svg"] {
        assert!(http_get(http, data).await.starts_with("HTTP/1.1 401"), "{data}");
    }
    let url = format!("http://{http}/#token=page-token");
    let chromium2 = chromium.clone();
    let url2 = url.clone();
    let dom = tokio::task::spawn_blocking(move || {
        headless(&chromium2, &["--virtual-time-budget=10000", "--dump-dom"], &url2)
    })
    .await
    .unwrap();
    assert!(dom.contains(&ok.job_id), "the job among the recent proofs: {dom}");
    assert!(dom.contains("proved") && dom.contains("winning"), "{dom}");
    assert!(dom.contains("winning-2k"), "its parameters: {dom}");
    assert!(dom.contains("budget") && dom.contains("GiB"), "{dom}");
    assert!(
        dom.contains("Alerts") && dom.contains("none firing"),
        "the alerts: {dom}"
    );
    assert!(
        dom.contains("<svg") && dom.contains("<rect x="),
        "the timeline renders: {dom}"
    );
    assert!(dom.contains("<div id=\"error\"></div>"), "no error shown: {dom}");
    if let Some(shot) = std::env::var_os("PINPROVE_PAGE_SCREENSHOT") {
        let arg = format!("--screenshot={}", Path::new(&shot).display());
        tokio::task::spawn_blocking(move || {
            headless(
                &chromium,
                &[
                    "--virtual-time-budget=10000",
                    "--window-size=1300,1500",
                    "--hide-scrollbars",
                    &arg,
                ],
                &url,
            )
        })
        .await
        .unwrap();
    }
    daemon.shutdown().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The metrics deploy/pinprove-alerts.yml reads.
fn alert_metrics() -> std::collections::BTreeSet<String> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/pinprove-alerts.yml")).unwrap();
    let names: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .flat_map(|e| e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| w.starts_with("pinprove_"))
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    names
}

/// The metric families deploy/grafana-dashboard.json queries.
fn dashboard_metrics() -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana-dashboard.json"
    ))
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let exprs = json["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().clone());
    let words: Vec<String> = exprs
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .flat_map(|e| {
            e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|w| w.starts_with("pinprove_"))
        .collect();
    let family = |w: &str| {
        ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| w.strip_suffix(s))
            .unwrap_or(w)
            .to_owned()
    };
    let names: std::collections::BTreeSet<String> = words.iter().map(|w| family(w)).collect();
    assert!(names.len() >= 10, "{names:?}");
    names
}
