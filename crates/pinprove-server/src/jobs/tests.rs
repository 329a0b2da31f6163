//! The job table's logic against a fake prover whose every step the test
//! controls: no parameters, no proofs, seconds for the whole module.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pinprove_engine::{JobId, Priority};
use pinprove_filecoin::{FilecoinError, ProofKind, ProofRequest, Proved};
use tokio::sync::watch;

use super::{Attached, Ended, Job, Jobs, Refusal, State, digest};
use crate::config::{ByteSize, JobsConfig, ReserveSize};
use crate::job_prover::{JobProver, Outcome};

/// How a fake job ends in the fake prover.
#[derive(Clone, Debug)]
enum End {
    Proved,
    Failed,
    Cancelled,
}

/// A prover that proves nothing: requests whose payload is `bad` are bad
/// input, `prepare` waits while `hold` is set, and a submitted job ends
/// when the test says so (or is cancelled).
#[derive(Default)]
struct Fake {
    prepared: AtomicUsize,
    /// The payloads `prepare` was called with, in order.
    prepared_payloads: Mutex<Vec<Vec<u8>>>,
    hold: AtomicBool,
    next: AtomicU64,
    ends: Mutex<HashMap<u64, watch::Sender<Option<End>>>>,
    running: Mutex<HashSet<u64>>,
    cancels: AtomicUsize,
}

impl Fake {
    fn end(&self, job: JobId, end: End) {
        let ends = self.ends.lock().unwrap();
        ends[&job.0].send_replace(Some(end));
    }
}

impl JobProver for Fake {
    type Prepared = ProofKind;
    type Submitted = ProofKind;
    type Outcome = End;

    fn prepare(&self, req: &ProofRequest) -> Result<ProofKind, FilecoinError> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        self.prepared_payloads.lock().unwrap().push(req.vanilla_proof.clone());
        while self.hold.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
        if req.vanilla_proof == b"bad" {
            return Err(FilecoinError::SectorSize(1));
        }
        Ok(req.kind)
    }

    fn submit(&self, kind: ProofKind) -> Result<(JobId, ProofKind), FilecoinError> {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        self.ends.lock().unwrap().insert(id, watch::channel(None).0);
        Ok((JobId(id), kind))
    }

    fn outcome(&self, job: JobId) -> Result<Outcome<End>, String> {
        let mut rx = self.ends.lock().unwrap().get(&job.0).ok_or("unknown job")?.subscribe();
        Ok(Box::pin(async move {
            loop {
                if let Some(end) = rx.borrow_and_update().clone() {
                    return end;
                }
                if rx.changed().await.is_err() {
                    return End::Failed;
                }
            }
        }))
    }

    fn cancel(&self, job: JobId) {
        self.cancels.fetch_add(1, Ordering::SeqCst);
        if let Some(tx) = self.ends.lock().unwrap().get(&job.0) {
            tx.send_if_modified(|e| {
                let open = e.is_none();
                if open {
                    *e = Some(End::Cancelled);
                }
                open
            });
        }
    }

    fn is_running(&self, job: JobId) -> bool {
        self.running.lock().unwrap().contains(&job.0)
    }

    fn finish(&self, kind: &ProofKind, end: End) -> Result<Proved, FilecoinError> {
        match end {
            End::Proved => Ok(Proved {
                kind: *kind,
                proof: vec![7; 192],
                partitions: Vec::new(),
                verification: Some(Duration::from_micros(10)),
                aggregation: None,
            }),
            End::Failed => Err(FilecoinError::Failed {
                kind: *kind,
                why: "the fake failed it".into(),
            }),
            End::Cancelled => Err(FilecoinError::Cancelled(*kind)),
        }
    }
}

fn config() -> JobsConfig {
    JobsConfig {
        max_request_bytes: ReserveSize::Bytes(1 << 30),
        disconnect_grace_secs: 1,
        ..JobsConfig::default()
    }
}

fn table(config: JobsConfig) -> (Arc<Fake>, Arc<Jobs<Fake>>) {
    let fake = Arc::new(Fake::default());
    (Arc::clone(&fake), Jobs::new(fake, config))
}

fn request(kind: ProofKind, payload: &[u8]) -> (ProofRequest, [u8; 32]) {
    let mut req = ProofRequest::new(kind);
    req.vanilla_proof = payload.to_vec();
    let d = digest(&req);
    (req, d)
}

/// Submits `payload` as `id` at `priority`, as `SubmitProof` does.
async fn submit_at(jobs: &Arc<Jobs<Fake>>, id: &str, kind: ProofKind, payload: &[u8], priority: Priority) -> Arc<Job> {
    let (mut req, _) = request(kind, payload);
    req.priority = Some(priority);
    let d = digest(&req);
    jobs.submit(id.to_string(), d, req, false)
        .await
        .map(|(j, _)| j)
        .unwrap_or_else(|_| panic!("{id} refused"))
}

/// Submits `payload` as `id`; `attach` as a `Prove` call does.
async fn submit(
    jobs: &Arc<Jobs<Fake>>,
    id: &str,
    kind: ProofKind,
    payload: &[u8],
    attach: bool,
) -> Result<(Arc<Job>, Option<Attached<Fake>>), Refusal> {
    let (req, d) = request(kind, payload);
    jobs.submit(id.to_string(), d, req, attach).await
}

/// The prover's id of `job`, once it was submitted.
async fn in_prover(job: &Job) -> JobId {
    for _ in 0..2500 {
        if let Some(id) = job.engine_job() {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("job {} never reached the prover", job.id);
}

async fn ended(job: &Job) -> Ended {
    job.wait_end(Some(Duration::from_secs(10))).await.expect("the job ends")
}

#[tokio::test]
async fn a_repeat_of_id_and_payload_is_the_same_job_and_another_payload_is_another() {
    let (fake, jobs) = table(config());
    let (a, _) = submit(&jobs, "deadline-7", ProofKind::WindowPoSt, b"partition 0", false)
        .await
        .unwrap();
    let (again, _) = submit(&jobs, "deadline-7", ProofKind::WindowPoSt, b"partition 0", false)
        .await
        .unwrap();
    assert_eq!(a.id, again.id, "a repeat while queued is the same job");
    // Curio reuses the id for every partition of a deadline.
    let (b, _) = submit(&jobs, "deadline-7", ProofKind::WindowPoSt, b"partition 1", false)
        .await
        .unwrap();
    assert_ne!(a.id, b.id, "another payload under the same id is another job");
    fake.end(in_prover(&a).await, End::Proved);
    assert!(matches!(ended(&a).await, Ended::Proved(_)));
    let (done, _) = submit(&jobs, "deadline-7", ProofKind::WindowPoSt, b"partition 0", false)
        .await
        .unwrap();
    assert_eq!(done.id, a.id, "a repeat after the proof gets the kept result");
    assert_eq!(fake.prepared.load(Ordering::SeqCst), 2, "each payload decoded once");
    assert_eq!(jobs.counters.deduplicated.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn a_repeat_after_a_failure_or_a_cancellation_is_a_new_attempt() {
    let (fake, jobs) = table(config());
    let (a, _) = submit(&jobs, "r", ProofKind::PoRep, b"c1", false).await.unwrap();
    fake.end(in_prover(&a).await, End::Failed);
    assert!(matches!(ended(&a).await, Ended::Failed(why) if why.contains("the fake failed it")));
    let (b, _) = submit(&jobs, "r", ProofKind::PoRep, b"c1", false).await.unwrap();
    assert_ne!(a.id, b.id, "a retry after a failure proves again");
    in_prover(&b).await;
    jobs.cancel(&b);
    assert!(matches!(ended(&b).await, Ended::Cancelled));
    let (c, _) = submit(&jobs, "r", ProofKind::PoRep, b"c1", false).await.unwrap();
    assert_ne!(b.id, c.id, "a retry after a cancellation proves again");
}

#[tokio::test]
async fn a_refused_request_is_invalid_and_forgotten_so_a_retry_is_decoded_again() {
    let (fake, jobs) = table(config());
    for _ in 0..2 {
        match submit(&jobs, "r", ProofKind::SnapDeals, b"bad", true).await {
            Err(Refusal::Invalid(why)) => assert!(why.contains("sector size"), "{why}"),
            other => panic!("not refused as invalid: {:?}", other.map(|(j, _)| j.id.clone())),
        }
    }
    assert_eq!(fake.prepared.load(Ordering::SeqCst), 2);
    assert_eq!(jobs.load().3, 0, "nothing of a refused request is kept");
    assert_eq!(jobs.load().1, 0, "its bytes are given back");
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_job_after_the_grace_unless_it_comes_back() {
    let (fake, jobs) = table(config());
    // Gone and back within the grace: the job goes on.
    let (a, held) = submit(&jobs, "a", ProofKind::PoRep, b"a", true).await.unwrap();
    let id = in_prover(&a).await;
    fake.running.lock().unwrap().insert(id.0);
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (back, held) = submit(&jobs, "a", ProofKind::PoRep, b"a", true).await.unwrap();
    assert_eq!(back.id, a.id);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        matches!(a.state(), State::Submitted(_)),
        "cancelled though its client came back"
    );
    // Gone for good: cancelled once the grace is over.
    drop(held);
    assert!(matches!(ended(&a).await, Ended::Cancelled));
    assert_eq!(fake.cancels.load(Ordering::SeqCst), 1);
    assert_eq!(jobs.counters.disconnected_cancels.load(Ordering::Relaxed), 1);
    // A SubmitProof job is awaited by id from anywhere: no disconnect
    // cancels it, even after a Prove of the same request went away.
    let (b, _) = submit(&jobs, "b", ProofKind::PoRep, b"b", false).await.unwrap();
    let (_, held) = submit(&jobs, "b", ProofKind::PoRep, b"b", true).await.unwrap();
    drop(held);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!matches!(b.state(), State::Ended(_)), "a detached job was cancelled");
    // A call that got its result cancels nothing.
    let (c, held) = submit(&jobs, "c", ProofKind::PoRep, b"c", true).await.unwrap();
    fake.end(in_prover(&c).await, End::Proved);
    ended(&c).await;
    held.unwrap().done();
    assert_eq!(fake.cancels.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn results_are_kept_within_their_count_and_bytes_then_forgotten() {
    let (fake, jobs) = table(JobsConfig {
        keep_results: 2,
        ..config()
    });
    let mut ids = Vec::new();
    for n in 0..3u8 {
        let (j, _) = submit(&jobs, &format!("r{n}"), ProofKind::WinningPoSt, &[n], false)
            .await
            .unwrap();
        fake.end(in_prover(&j).await, End::Proved);
        ended(&j).await;
        ids.push(j.id.clone());
    }
    assert!(
        jobs.get(&ids[0]).is_none(),
        "the oldest of three beyond a count of two is forgotten"
    );
    assert!(jobs.get(&ids[1]).is_some() && jobs.get(&ids[2]).is_some());
    // By bytes: each result keeps its 192-byte proof, its ids and 256
    // bytes (about 490): one fits in 700, two do not.
    let (fake, jobs) = table(JobsConfig {
        keep_results_bytes: ByteSize(700),
        ..config()
    });
    let (j, _) = submit(&jobs, "big", ProofKind::WinningPoSt, b"x", false).await.unwrap();
    fake.end(in_prover(&j).await, End::Proved);
    ended(&j).await;
    assert!(jobs.get(&j.id).is_some(), "one result fits");
    let (k, _) = submit(&jobs, "next", ProofKind::WinningPoSt, b"y", false)
        .await
        .unwrap();
    fake.end(in_prover(&k).await, End::Proved);
    ended(&k).await;
    assert!(jobs.get(&j.id).is_none(), "the older result goes beyond the bytes kept");
    assert!(jobs.get(&k.id).is_some());
}

#[tokio::test]
async fn a_job_cancelled_before_the_prover_ends_at_once_and_one_in_it_is_stopped_there() {
    let (fake, jobs) = table(config());
    // Being decoded: ends at once, never reaches the prover.
    fake.hold.store(true, Ordering::SeqCst);
    let j2 = Arc::clone(&jobs);
    let pending = tokio::spawn(async move { submit(&j2, "slow", ProofKind::PoRep, b"s", false).await.is_ok() });
    let job = loop {
        if let Some(j) = jobs.active().into_iter().next() {
            break j;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    assert!(!jobs.cancel(&job), "nothing was running");
    assert!(matches!(job.state(), State::Ended(Ended::Cancelled)), "ended at once");
    fake.hold.store(false, Ordering::SeqCst);
    let _ = pending.await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(fake.next.load(Ordering::SeqCst), 0, "a cancelled job was submitted");
    // In the prover and running: the prover is told, the job ends cancelled.
    let (run, _) = submit(&jobs, "run", ProofKind::PoRep, b"r", false).await.unwrap();
    let id = in_prover(&run).await;
    fake.running.lock().unwrap().insert(id.0);
    assert!(jobs.cancel(&run), "it was running");
    assert!(matches!(ended(&run).await, Ended::Cancelled));
    assert_eq!(fake.cancels.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_draining_table_refuses_new_work_and_cancels_what_has_not_reached_the_prover() {
    let (fake, jobs) = table(config());
    let (proving, _) = submit(&jobs, "p", ProofKind::PoRep, b"p", false).await.unwrap();
    in_prover(&proving).await;
    fake.hold.store(true, Ordering::SeqCst);
    let j2 = Arc::clone(&jobs);
    let decoding = tokio::spawn(async move { submit(&j2, "d", ProofKind::WindowPoSt, b"d", false).await.is_ok() });
    while jobs.active().len() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    jobs.drain();
    assert!(matches!(
        submit(&jobs, "n", ProofKind::WinningPoSt, b"n", true).await,
        Err(Refusal::Draining)
    ));
    let active = jobs.active();
    assert_eq!(active.len(), 1, "only the proof in the prover goes on");
    assert_eq!(active[0].id, proving.id);
    fake.hold.store(false, Ordering::SeqCst);
    let _ = decoding.await;
    fake.end(in_prover(&proving).await, End::Proved);
    assert!(jobs.wait_idle(Duration::from_secs(5)).await);
    assert!(matches!(ended(&proving).await, Ended::Proved(_)));
}

#[tokio::test]
async fn bounds_per_kind_and_in_bytes_refuse_with_a_reason_and_deadline_kinds_keep_a_quarter() {
    let mut limits = config();
    limits.max_active.0[ProofKind::PoRep] = 1;
    let (fake, jobs) = table(limits);
    let (first, _) = submit(&jobs, "1", ProofKind::PoRep, b"1", false).await.unwrap();
    match submit(&jobs, "2", ProofKind::PoRep, b"2", false).await {
        Err(Refusal::Full(why)) => assert!(why.contains("max_active"), "{why}"),
        _ => panic!("a second PoRep beyond max_active 1 was taken"),
    }
    assert_eq!(jobs.counters.refused_full.load(Ordering::Relaxed), 1);
    submit(&jobs, "w", ProofKind::WindowPoSt, b"w", false).await.unwrap();
    // Its place comes back when it ends.
    fake.end(in_prover(&first).await, End::Proved);
    ended(&first).await;
    while jobs.load().0[ProofKind::PoRep] > 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    submit(&jobs, "2", ProofKind::PoRep, b"2", false).await.unwrap();

    // Bytes: a request counts its payload (plus 4 KiB) three times; of a
    // bound of 1 MiB PoRep may take three quarters (768 KiB), PoSt all.
    let (_, jobs) = table(JobsConfig {
        max_request_bytes: ReserveSize::Bytes(1 << 20),
        ..config()
    });
    let (big, small) = (vec![0u8; 200 << 10], vec![1u8; 50 << 10]);
    submit(&jobs, "a", ProofKind::PoRep, &big, false).await.unwrap(); // 612 KiB
    match submit(&jobs, "b", ProofKind::PoRep, &small, false).await {
        // 612 + 162 KiB > 768 KiB
        Err(Refusal::Full(why)) => assert!(why.contains("max_request_bytes"), "{why}"),
        _ => panic!("PoRep took the quarter kept for PoSt"),
    }
    submit(&jobs, "w", ProofKind::WindowPoSt, &small, false)
        .await
        .expect("WindowPoSt has the last quarter");
    let (_, bytes, limit, _) = jobs.load();
    assert!(bytes <= limit, "{bytes} of {limit}");
}

/// The request's own priority decides, not its kind's: a PoRep sent as
/// urgent may use the quarter of the request bytes kept for urgent work, a
/// WindowPoSt sent as background may not; and the jobs ahead of one are
/// counted by the priorities the requests carry.
#[tokio::test]
async fn a_requests_own_priority_decides_its_share_of_the_bounds_and_its_place() {
    let (_, jobs) = table(JobsConfig {
        max_request_bytes: ReserveSize::Bytes(1 << 20),
        ..config()
    });
    let (big, small) = (vec![0u8; 200 << 10], vec![1u8; 50 << 10]);
    submit_at(&jobs, "a", ProofKind::PoRep, &big, Priority::Normal).await; // 612 KiB
    let (mut late, _) = request(ProofKind::WindowPoSt, &small);
    late.priority = Some(Priority::Normal);
    match jobs.submit("w".into(), digest(&late), late, false).await {
        Err(Refusal::Full(why)) => assert!(why.contains("max_request_bytes"), "{why}"),
        _ => panic!("a WindowPoSt sent as background took the urgent quarter"),
    }
    let urgent = submit_at(&jobs, "b", ProofKind::PoRep, &small, Priority::High).await;
    assert_eq!(urgent.priority, Priority::High);

    let (_, jobs) = table(config());
    let first = submit_at(&jobs, "1", ProofKind::PoRep, b"1", Priority::Normal).await;
    let second = submit_at(&jobs, "2", ProofKind::PoRep, b"2", Priority::Normal).await;
    let critical = submit_at(&jobs, "3", ProofKind::PoRep, b"3", Priority::Critical).await;
    let post = submit_at(&jobs, "4", ProofKind::WindowPoSt, b"4", Priority::Low).await;
    assert_eq!(jobs.ahead_of(&first), 1, "the Critical PoRep goes first");
    assert_eq!(jobs.ahead_of(&second), 2);
    assert_eq!(jobs.ahead_of(&critical), 0);
    assert_eq!(jobs.ahead_of(&post), 3, "a WindowPoSt sent as Low goes last");
}

/// Requests are decoded most urgent first when they wait for a turn: a
/// WindowPoSt that comes behind a backlog of PoRep requests is decoded
/// next. On bcf8eca the turns were a first-come semaphore.
#[tokio::test]
async fn requests_waiting_to_be_decoded_take_their_turns_by_priority() {
    let (fake, jobs) = table(JobsConfig {
        max_preparing: 1,
        ..config()
    });
    fake.hold.store(true, Ordering::SeqCst);
    let mut submitted = Vec::new();
    for (i, (id, kind)) in [
        ("porep-1", ProofKind::PoRep),
        ("porep-2", ProofKind::PoRep),
        ("porep-3", ProofKind::PoRep),
        ("wpost", ProofKind::WindowPoSt),
    ]
    .into_iter()
    .enumerate()
    {
        let j = Arc::clone(&jobs);
        submitted.push(tokio::spawn(async move {
            let (req, d) = request(kind, id.as_bytes());
            j.submit(id.to_string(), d, req, false).await.map(|(job, _)| job)
        }));
        // The first holds the one turn; the others wait for it, in order.
        while fake.prepared.load(Ordering::SeqCst) + jobs.preparing.waiting() < i + 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    fake.hold.store(false, Ordering::SeqCst);
    for s in submitted {
        assert!(s.await.unwrap().is_ok());
    }
    let order: Vec<String> = fake
        .prepared_payloads
        .lock()
        .unwrap()
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    assert_eq!(order, ["porep-1", "wpost", "porep-2", "porep-3"]);
}

/// Every kind has its place in each table the daemon keeps by kind: its
/// `[jobs] max_active` entry (written and read back by its name), its
/// unfinished jobs and latency histogram, and their metrics. A new kind
/// needs only its row in `proof_kinds!` for these (ARCHITECTURE.md,
/// "Adding a proof kind").
#[tokio::test]
async fn every_kind_is_counted_bounded_and_reported() {
    let limits = crate::config::ActiveLimits::default();
    let written = toml::to_string(&JobsConfig::default()).unwrap();
    let read: JobsConfig = toml::from_str(&written).unwrap();
    assert_eq!(read.max_active, limits, "{written}");
    let (fake, jobs) = table(config());
    for (i, kind) in ProofKind::ALL.into_iter().enumerate() {
        assert!(limits.of(kind) > 0);
        assert!(written.contains(kind.name()), "{kind} in {written}");
        let (job, _) = submit(&jobs, &format!("{i}"), kind, &[i as u8], false).await.unwrap();
        fake.end(in_prover(&job).await, End::Proved);
        ended(&job).await;
    }
    let mut text = String::new();
    crate::metrics::daemon_metrics(&jobs, &mut text);
    for kind in ProofKind::ALL {
        let name = kind.name();
        assert!(
            text.contains(&format!("pinprove_jobs_active{{kind=\"{name}\"}}")),
            "{text}"
        );
        assert!(
            text.contains(&format!("pinprove_proof_seconds_count{{kind=\"{name}\"}} 1")),
            "{name}: {text}"
        );
    }
    let unknown = toml::from_str::<JobsConfig>("[max_active]\nsealing = 3\n").unwrap_err();
    assert!(
        unknown.to_string().contains("unknown proof kind `sealing`"),
        "{unknown}"
    );
}
