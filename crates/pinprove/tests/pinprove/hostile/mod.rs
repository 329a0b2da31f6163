//! `pinprove serve` against hostile clients: every request is refused with
//! `INVALID_ARGUMENT` or `RESOURCE_EXHAUSTED` and a message naming what is
//! wrong, the daemon stays alive and keeps proving, and its peak resident
//! memory (`VmHWM` of the daemon process, not of this test) stays small:
//! a bomb must not even transiently allocate. Then a soak of mixed
//! requests from concurrent clients, after which the daemon is back at its
//! idle values; and the daemon's socket and shutdown.
//!
//! The daemon runs as a child process on the CPU backend with 2 KiB
//! WindowPoSt and WinningPoSt parameters (made on first use into the test
//! parameter cache).

mod daemon;
mod raw;

use std::time::{Duration, Instant};

use daemon::{Options, Serve, Unix, good_requests};
use pinprove_server::pb;
use prost::Message;
use tonic::Code;

/// The most resident memory the daemon may reach over the hostile suite.
const HOSTILE_PEAK_BYTES: u64 = 512 << 20;

/// A request answered with `code`, with a message saying `says`.
#[track_caller]
fn refused(result: Result<impl std::fmt::Debug, tonic::Status>, code: Code, says: &str) {
    let status = result.expect_err("refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(
        status.message().contains(says),
        "{:?} does not say {says:?}",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_requests_are_refused_and_the_daemon_keeps_proving() {
    let serve = Serve::start(
        "hostile",
        Options {
            jobs: "max_request_bytes = \"3MiB\"",
            ..Options::default()
        },
    )
    .await;
    let good = good_requests(&serve.dir);
    let mut c = serve.client().await;
    let channel = serve.channel().await;
    let prove = |s: pb::SubmitProofRequest| pb::ProveRequest { submit: Some(s) };

    // A valid WindowPoSt with a partition index no deadline has: once an
    // allocation of 343 GB that aborted the daemon.
    let mut s = good.window.clone();
    s.partition_index = u32::MAX;
    refused(
        c.prove(prove(s)).await,
        Code::InvalidArgument,
        "partition index 4294967295 is out of range",
    );

    // A 645 KB sector proof sent as a 32 GiB WindowPoSt (13): refused on the
    // wire, before it is decoded or copied for the partition's sectors.
    let mut s = good.window.clone();
    s.registered_proof = 13;
    s.sector_size = 32 << 30;
    s.vanilla_proofs = vec![vec![0; 645_000]];
    refused(
        c.prove(prove(s)).await,
        Code::InvalidArgument,
        "an entry of vanilla_proofs is 645000 bytes",
    );

    // 100 M empty entries (190 MiB on the wire, 2.4 GiB decoded): refused
    // by the size its frame declares.
    let bomb = raw::empty_entries(&good.winning, 100_000_000);
    assert!(bomb.len() > 190 << 20);
    refused(
        raw::unary(&channel, "Prove", raw::prove_of(&bomb)).await,
        Code::ResourceExhausted,
        "a Prove request is at most",
    );
    // 50 M more (95 MiB, within the size a Prove may have): refused by count,
    // before it is decoded.
    let bomb = raw::empty_entries(&good.winning, 50_000_000);
    refused(
        raw::unary(&channel, "SubmitProof", bomb).await,
        Code::InvalidArgument,
        "vanilla_proofs holds 50000001 entries",
    );
    // A 64 MiB request id.
    let mut s = good.winning.clone();
    s.request_id = "x".repeat(64 << 20);
    refused(
        c.prove(prove(s)).await,
        Code::InvalidArgument,
        "request_id is 67108864 bytes; at most 256",
    );
    let mut s = good.winning.clone();
    s.request_id = "winpost\u{7}".into();
    refused(c.prove(prove(s)).await, Code::InvalidArgument, "not printable");
    // Nested empty arrays as a 2 KiB PoRep's C1 output (eightfold when
    // decoded), and one larger than a 2 KiB C1 output can be.
    let mut s = pb::SubmitProofRequest {
        request_id: "porep-1000-7".into(),
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        registered_proof: 5,
        sector_number: 7,
        miner_id: 1000,
        ..Default::default()
    };
    s.vanilla_proof = [b"[".as_slice(), &b"[],".repeat(200_000), b"[]]"].concat();
    refused(
        c.prove(prove(s.clone())).await,
        Code::InvalidArgument,
        "arrays and objects in",
    );
    s.vanilla_proof = vec![b' '; 3 << 20];
    refused(
        c.prove(prove(s)).await,
        Code::InvalidArgument,
        "vanilla_proof is 3145728 bytes",
    );
    // Counts and sizes for the kind.
    let mut s = good.winning.clone();
    s.vanilla_proofs.push(s.vanilla_proofs[0].clone());
    refused(
        c.prove(prove(s)).await,
        Code::InvalidArgument,
        "vanilla_proofs holds 2 entries",
    );
    let mut s = good.winning.clone();
    s.randomness = vec![1; 4096];
    refused(
        c.prove(prove(s)).await,
        Code::InvalidArgument,
        "randomness is 4096 bytes, not 32",
    );
    // Malformed wire bytes, and oversized requests of the small methods.
    refused(
        raw::unary(&channel, "Prove", vec![0x0a, 0xff, 0xff, 0xff, 0x0f]).await,
        Code::InvalidArgument,
        "malformed message",
    );
    let long = pb::AwaitProofRequest {
        job_id: "j".repeat(1000),
        timeout_ms: 1,
    };
    refused(c.await_proof(long).await, Code::InvalidArgument, "job_id is 1000 bytes");
    let huge = pb::PreloadSrsRequest {
        circuit_id: "c".repeat(1 << 20),
    };
    refused(
        raw::unary(&channel, "PreloadSRS", huge.encode_to_vec()).await,
        Code::ResourceExhausted,
        "a PreloadSRS request is at most 4096 bytes",
    );
    // Job ids are not sequential: no client can name another's job.
    refused(
        c.await_proof(pb::AwaitProofRequest {
            job_id: "job-1".into(),
            timeout_ms: 1,
        })
        .await,
        Code::NotFound,
        "no job \"job-1\"",
    );

    // Bounded work: PoRep may hold three quarters of the request bytes
    // (3 MiB here, a request counted three times its size), so one request
    // of 900 KB is more than it may take.
    // A PoRep request larger than PoRep's share of the request bytes.
    let mut s = pb::SubmitProofRequest {
        request_id: "porep-big".into(),
        proof_kind: pb::ProofKind::PorepSealCommit as i32,
        registered_proof: 5,
        ..Default::default()
    };
    s.vanilla_proof = vec![b' '; 900_000];
    refused(c.prove(prove(s)).await, Code::ResourceExhausted, "max_request_bytes");
    let winning = c
        .prove(prove(good.winning.clone()))
        .await
        .expect("a WinningPoSt proves")
        .into_inner();
    let r = winning.result.expect("a result");
    assert_eq!(
        r.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        r.error_message
    );
    assert!(good.verify_winning(&r.proof));

    // A job a SubmitProof took is not cancelled by a duplicate Prove whose
    // client goes away (the grace period here is one second).
    let mut s = good.window.clone();
    s.request_id = "wdpost-dup".into();
    let job = c.submit_proof(s.clone()).await.unwrap().into_inner().job_id;
    // 128 random bits.
    assert!(job.starts_with("job-") && job.len() == 4 + 32, "{job}");
    let mut other = serve.client().await;
    let mut call = tonic::Request::new(prove(s));
    call.set_timeout(Duration::from_millis(20));
    let _ = other.prove(call).await;
    drop(other);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = c
        .await_proof(pb::AwaitProofRequest {
            job_id: job,
            timeout_ms: 120_000,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        r.error_message
    );

    // Parameter generation is off for serve unless configured: a test
    // size's missing parameters are an error, not minutes of CPU.
    refused(
        c.preload_srs(pb::PreloadSrsRequest {
            circuit_id: "snap-8m".into(),
        })
        .await,
        Code::FailedPrecondition,
        "filecoin.generate_parameters",
    );

    // The status page: only for hosts it knows, and with the token.
    let http = serve.http_addr();
    assert!(raw::http_get(http, "/healthz", "localhost", None).starts_with("HTTP/1.1 200"));
    let foreign = raw::http_get(http, "/status", "rebind.example.com", Some(daemon::TOKEN));
    assert!(foreign.starts_with("HTTP/1.1 421"), "{foreign}");
    let no_token = raw::http_get(http, "/metrics", "127.0.0.1", None);
    assert!(no_token.starts_with("HTTP/1.1 401"), "{no_token}");
    let metrics = raw::http_get(http, "/metrics", "127.0.0.1", Some(daemon::TOKEN));
    assert!(metrics.contains("pinprove_requests_refused_full_total 1"), "{metrics}");

    // Alive, and within its memory bound all along.
    let r = c
        .prove(prove(good.winning_again.clone()))
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(
        r.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        r.error_message
    );
    let peak = serve.peak_rss();
    println!("daemon peak resident memory over the hostile suite: {} MiB", peak >> 20);
    assert!(peak < HOSTILE_PEAK_BYTES, "peak {peak} bytes");
    serve.stop(Duration::from_secs(10));
}

/// Requests of the soak, by their number.
#[derive(Clone, Copy, Debug)]
enum Soak {
    Good,
    Garbage,
    Oversized,
    Duplicate,
    SubmitAndCancel,
    Disconnect,
    Unknown,
    Status,
}

impl Soak {
    fn of(i: usize) -> Soak {
        match i % 25 {
            0 => Soak::Good,
            1 | 9 | 17 => Soak::SubmitAndCancel,
            2 | 10 | 18 => Soak::Disconnect,
            3..=6 => Soak::Garbage,
            7 | 11 | 12 => Soak::Oversized,
            13 | 14 | 19 => Soak::Duplicate,
            15 | 20 | 21 => Soak::Unknown,
            _ => Soak::Status,
        }
    }
}

/// Memory the daemon's resident size may grow by over the soak, beyond
/// where it stood after its first proofs and beyond the pool buffers it
/// keeps for reuse (those the budget bounds).
const SOAK_RSS_SLACK: u64 = 128 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_soak_of_mixed_requests_leaves_the_daemon_at_its_idle_values() {
    const CLIENTS: usize = 8;
    const EACH: usize = 300;
    let serve = Serve::start("soak", Options::default()).await;
    let good = good_requests(&serve.dir);
    let mut c = serve.client().await;
    // Warm: the first proofs of each circuit, then the values to return to.
    for s in [&good.winning, &good.window] {
        let r = c
            .prove(pb::ProveRequest {
                submit: Some(s.clone()),
            })
            .await
            .unwrap()
            .into_inner()
            .result
            .unwrap();
        assert_eq!(
            r.status(),
            pb::await_proof_response::Status::Completed,
            "{}",
            r.error_message
        );
    }
    let idle = serve.idle_values(&mut c).await;
    let rss_before = serve.rss();
    let pool_before = serve.pool_idle(&mut c).await;
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for k in 0..CLIENTS {
        let mut c = serve.client().await;
        let channel = serve.channel().await;
        let good = good.clone();
        clients.spawn(async move {
            let (mut proved, mut refused) = (0, 0);
            for i in 0..EACH {
                let what = Soak::of(i + k);
                let id = format!("soak-{k}-{i}");
                match what {
                    Soak::Good => {
                        let mut s = good.winning.clone();
                        s.request_id = format!("winpost-soak-{}", i % 3);
                        let r = c.prove(pb::ProveRequest { submit: Some(s) }).await;
                        let r = r.expect("a good request proves").into_inner().result.unwrap();
                        assert_eq!(
                            r.status(),
                            pb::await_proof_response::Status::Completed,
                            "{}",
                            r.error_message
                        );
                        proved += 1;
                    }
                    Soak::Garbage => {
                        let mut s = good.window.clone();
                        s.request_id = id;
                        s.vanilla_proofs[0][40] ^= 0x5a;
                        let e = c
                            .prove(pb::ProveRequest { submit: Some(s) })
                            .await
                            .expect_err("garbage");
                        // A full table refuses before anything is decoded
                        // (the cheap check first); the disconnected and
                        // cancelled WindowPoSts of the soak fill it on a
                        // busy machine.
                        match e.code() {
                            Code::InvalidArgument => refused += 1,
                            Code::ResourceExhausted if e.message().contains("max_active") => {}
                            _ => panic!("garbage: {e:?}"),
                        }
                    }
                    Soak::Oversized => {
                        let e = raw::unary(
                            &channel,
                            "Prove",
                            raw::prove_of(&raw::empty_entries(&good.winning, 10_000)),
                        )
                        .await
                        .expect_err("oversized");
                        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
                    }
                    Soak::Duplicate => {
                        // The same id as a good request, another payload.
                        let mut s = good.winning.clone();
                        s.request_id = "winpost-soak-0".into();
                        s.randomness = vec![9; 32];
                        let e = c
                            .prove(pb::ProveRequest { submit: Some(s) })
                            .await
                            .expect_err("wrong randomness");
                        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
                    }
                    Soak::SubmitAndCancel => {
                        let mut s = good.window.clone();
                        s.request_id = id;
                        match c.submit_proof(s).await {
                            Ok(r) => {
                                let job_id = r.into_inner().job_id;
                                c.cancel_proof(pb::CancelProofRequest { job_id })
                                    .await
                                    .expect("cancelled");
                            }
                            Err(e) => assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}"),
                        }
                    }
                    Soak::Disconnect => {
                        let mut s = good.window.clone();
                        s.request_id = id;
                        let mut call = tonic::Request::new(pb::ProveRequest { submit: Some(s) });
                        call.set_timeout(Duration::from_millis(5));
                        let _ = c.prove(call).await;
                    }
                    Soak::Unknown => {
                        let e = c
                            .await_proof(pb::AwaitProofRequest {
                                job_id: format!("job-{id}"),
                                timeout_ms: 1,
                            })
                            .await
                            .expect_err("unknown");
                        assert_eq!(e.code(), Code::NotFound, "{e:?}");
                    }
                    Soak::Status => {
                        c.get_status(pb::GetStatusRequest {}).await.expect("status");
                    }
                }
            }
            (proved, refused)
        });
    }
    let (mut proved, mut refused) = (0, 0);
    while let Some(r) = clients.join_next().await {
        let (p, r) = r.expect("a client");
        (proved, refused) = (proved + p, refused + r);
    }
    assert!(refused > 0, "no garbage reached the decoder to be refused");
    println!(
        "soak: {} requests from {CLIENTS} clients ({proved} proofs, {refused} garbage refused as invalid) in {:.1} s",
        CLIENTS * EACH,
        started.elapsed().as_secs_f64()
    );
    // Disconnected and cancelled jobs end within their grace period.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = serve.idle_values(&mut c).await;
        if now == idle {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not back at idle: {now:?}, idle was {idle:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pool = serve.pool_idle(&mut c).await.saturating_sub(pool_before);
    let grown = serve.rss().saturating_sub(rss_before);
    println!(
        "daemon resident memory grew by {} MiB over the soak, {} MiB of it idle pool buffers",
        grown >> 20,
        pool >> 20
    );
    assert!(
        grown.saturating_sub(pool) < SOAK_RSS_SLACK,
        "grew {grown} bytes, {pool} of them pool"
    );
    serve.stop(Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_does_not_take_a_live_socket_and_shutdown_removes_only_its_own() {
    let dir = std::env::temp_dir().join(format!("pinprove-hostile-sockets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pinprove.sock");
    let a = Unix::start("socket-a", &path).await;
    // A second daemon on the same socket is refused; the first still answers.
    let (b, log) = Unix::spawn("socket-b", &path);
    let out = b.wait_with_output().expect("the second daemon exits");
    assert!(!out.status.success());
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("another daemon is listening on"), "{err}");
    std::fs::remove_dir_all(log.parent().unwrap()).unwrap();
    a.client().await.expect("the first still answers");
    // The socket replaced under the first (removed, then bound by another
    // daemon): stopping the first leaves the other's in place.
    std::fs::remove_file(&path).unwrap();
    let c = Unix::start("socket-c", &path).await;
    a.stop();
    assert!(path.exists(), "the other daemon's socket was removed");
    c.client().await.expect("the other answers");
    c.stop();
    assert!(!path.exists(), "a daemon removes its own socket");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_sealing_work_leaves_room_for_post_and_sigterm_cancels_what_waits() {
    // Its own parameter cache, with the PoSt parameters only and generation
    // on: a PoRep's parameters take minutes to make, so PoRep jobs wait for
    // them (holding their place) while the test runs.
    let mut serve = Serve::start(
        "flood",
        Options {
            own_parameters: true,
            jobs: "max_active = { porep = 2, snap = 64, wpost = 64, winning = 16 }",
        },
    )
    .await;
    let good = good_requests(&serve.dir);
    let mut c = serve.client().await;
    let mut held = Vec::new();
    for i in 0..2 {
        let mut s = good.porep.clone();
        s.request_id = format!("porep-flood-{i}");
        s.priority = pb::Priority::Low as i32 + i;
        held.push(c.submit_proof(s).await.expect("within the bound").into_inner().job_id);
    }
    let mut third = good.porep.clone();
    third.request_id = "porep-flood-third".into();
    refused(
        c.submit_proof(third).await,
        Code::ResourceExhausted,
        "porep jobs are accepted and unfinished",
    );
    // The PoRep jobs wait for their parameters; a WinningPoSt, whose
    // parameters are in the cache, is proved meanwhile (a file in the cache
    // takes no generation lock).
    let t = Instant::now();
    let r = c
        .prove(pb::ProveRequest {
            submit: Some(good.winning.clone()),
        })
        .await
        .expect("a WinningPoSt proves")
        .into_inner()
        .result
        .unwrap();
    assert_eq!(
        r.status(),
        pb::await_proof_response::Status::Completed,
        "{}",
        r.error_message
    );
    println!(
        "WinningPoSt in {:.2} s beside the PoRep flood",
        t.elapsed().as_secs_f64()
    );
    for id in &held {
        let r = c
            .await_proof(pb::AwaitProofRequest {
                job_id: id.clone(),
                timeout_ms: 1,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.status(),
            pb::await_proof_response::Status::Timeout,
            "still waiting: {r:?}"
        );
    }
    // SIGTERM: what has not reached the engine is cancelled at once, the
    // daemon refuses new work, and exits within its grace (5 s) and a few
    // seconds, leaving no temporary file.
    let t = Instant::now();
    serve.signal_term();
    for id in &held {
        if let Ok(r) = c
            .await_proof(pb::AwaitProofRequest {
                job_id: id.clone(),
                timeout_ms: 10_000,
            })
            .await
        {
            assert_eq!(r.into_inner().status(), pb::await_proof_response::Status::Cancelled);
        }
    }
    if let Err(e) = c
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "wpost-2k".into(),
        })
        .await
    {
        // Refused while draining, or the daemon is already gone: nothing
        // left to drain, it closed the connection first.
        let gone = e.code() == Code::Cancelled && std::error::Error::source(&e).is_some();
        assert!(e.code() == Code::Unavailable || gone, "{e:?}");
    } else {
        panic!("PreloadSRS taken while draining");
    }
    let params = serve.params_dir().to_path_buf();
    let status = serve.wait_exit(Duration::from_secs(15));
    println!("exited {status:?} {:.1} s after SIGTERM", t.elapsed().as_secs_f64());
    assert!(status.success(), "{status:?}");
    let leftovers: Vec<_> = std::fs::read_dir(params)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
