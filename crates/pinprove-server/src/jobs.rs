//! The daemon's jobs: requests, their dedup by id and payload, their
//! results kept for retries, and the cancellation of jobs whose clients went
//! away.
//!
//! A `request_id` is a retry key, not a payload's identity: Curio reuses
//! one id for every WindowPoSt partition of a deadline (with different
//! vanilla proofs) and for a retry with fewer sectors. So a job is found
//! again only by its id *and* the digest of its payload; a repeat of both
//! while the job is queued, running or completed gets that job; after a
//! failure or cancellation it starts a new attempt.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use pinprove_engine::{JobId, JobState as EngineJobState};
use pinprove_filecoin::{FilecoinError, FilecoinProver, ProofKind, ProofRequest, Proved};
use pinprove_mem::ErrorChain;
use pinprove_mem::sync::Recover;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::config::JobsConfig;

/// How a job ended.
#[derive(Clone, Debug)]
pub(crate) enum Ended {
    /// The proof, verified.
    Proved(Arc<Proved>),
    /// The request was refused (bad input).
    Refused(String),
    /// Proving failed.
    Failed(String),
    /// Cancelled (by a client, or because its client went away).
    Cancelled,
}

/// Where a job is.
#[derive(Clone, Debug)]
pub(crate) enum State {
    /// Its parameters are being found (or made).
    Preparing,
    /// In the engine.
    Submitted,
    /// Done.
    Ended(Ended),
}

/// One request's job.
pub(crate) struct Job {
    pub id: String,
    pub request_id: String,
    pub digest: [u8; 32],
    pub kind: ProofKind,
    pub submitted: Instant,
    engine_job: OnceLock<JobId>,
    state: watch::Sender<State>,
    /// `Prove` calls waiting for it now.
    waiters: AtomicUsize,
    /// Cancelled before it reached the engine.
    cancelled: AtomicBool,
}

impl Job {
    pub(crate) fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// The engine's job, once submitted.
    pub(crate) fn engine_job(&self) -> Option<JobId> {
        self.engine_job.get().copied()
    }

    /// Waits for the end, at most `timeout`; `None` when it ran out.
    pub(crate) async fn ended(&self, timeout: Option<Duration>) -> Option<Ended> {
        let mut rx = self.state.subscribe();
        let wait = async {
            loop {
                if let State::Ended(e) = &*rx.borrow_and_update() {
                    return e.clone();
                }
                if rx.changed().await.is_err() {
                    // The sender lives as long as the job: cannot happen.
                    return Ended::Failed("the job's state was lost".into());
                }
            }
        };
        match timeout {
            None => Some(wait.await),
            Some(t) => tokio::time::timeout(t, wait).await.ok(),
        }
    }

    fn end(&self, e: Ended) {
        self.state.send_replace(State::Ended(e));
    }
}

/// What is known of the jobs.
#[derive(Default)]
struct Table {
    by_id: HashMap<String, Arc<Job>>,
    /// (request id, payload digest) → job id, while queued, running or
    /// completed.
    by_key: HashMap<(String, [u8; 32]), String>,
    /// Ended jobs, oldest first, for expiry.
    ended: VecDeque<(Instant, String)>,
}

/// Counts of the daemon's own (for metrics).
#[derive(Default)]
pub(crate) struct Counters {
    pub submitted: AtomicU64,
    pub proved: AtomicU64,
    pub failed: AtomicU64,
    pub deduplicated: AtomicU64,
    pub cancelled: AtomicU64,
    pub refused: AtomicU64,
    pub disconnected_cancels: AtomicU64,
    /// Proofs verified before they were returned, and the time that took.
    pub verified: AtomicU64,
    pub verification_us: AtomicU64,
}

/// The job table.
pub(crate) struct Jobs {
    prover: Arc<FilecoinProver>,
    config: JobsConfig,
    table: Mutex<Table>,
    next: AtomicU64,
    draining: AtomicBool,
    pub counters: Counters,
}

/// Why a request was not taken.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Bad input: the message says what.
    Invalid(String),
    /// The daemon is stopping.
    Draining,
}

impl Jobs {
    pub(crate) fn new(prover: Arc<FilecoinProver>, config: JobsConfig) -> Arc<Jobs> {
        Arc::new(Jobs {
            prover,
            config,
            table: Mutex::new(Table::default()),
            next: AtomicU64::new(1),
            draining: AtomicBool::new(false),
            counters: Counters::default(),
        })
    }

    pub(crate) fn prover(&self) -> &Arc<FilecoinProver> {
        &self.prover
    }

    /// Takes no new work from now on.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// The job of this request: an existing one with the same id and
    /// payload (preparing, queued, running or completed), or a new one.
    /// `digest` is the payload's (see [`digest`]). With `attach`, the caller
    /// (a `Prove` call) holds the job from the moment it is found or made,
    /// so that a client going away while the request is still being decoded
    /// cancels it like any other. Returns once the request was decoded and
    /// checked: a refused request is an error, and nothing of it is queued.
    ///
    /// The decoding runs in a task of its own: if this future is dropped
    /// (the client went away), the job still reaches an end and is never
    /// left "preparing" for a retry to wait on.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        request_id: String,
        digest: [u8; 32],
        req: ProofRequest,
        attach: bool,
    ) -> Result<(Arc<Job>, Option<Attached>), Refusal> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Refusal::Draining);
        }
        // The job is in the table before its request is decoded, so that a
        // repeat arriving meanwhile finds it instead of decoding it twice.
        let (job, attached) = {
            let mut t = self.table.lock().recover();
            if let Some(job) = Self::known(&mut t, &request_id, &digest) {
                let attached = attach.then(|| self.attach(&job));
                drop(t);
                self.counters.deduplicated.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(job = %job.id, "a repeat of a known request: the same job");
                (job, attached)
            } else {
                let id = format!("job-{}", self.next.fetch_add(1, Ordering::Relaxed));
                let job = Arc::new(Job {
                    id: id.clone(),
                    request_id: request_id.clone(),
                    digest,
                    kind: req.kind,
                    submitted: Instant::now(),
                    engine_job: OnceLock::new(),
                    state: watch::Sender::new(State::Preparing),
                    waiters: AtomicUsize::new(0),
                    cancelled: AtomicBool::new(false),
                });
                t.by_id.insert(id.clone(), Arc::clone(&job));
                t.by_key.insert((request_id, digest), id);
                let attached = attach.then(|| self.attach(&job));
                drop(t);
                let (jobs, j) = (Arc::clone(self), Arc::clone(&job));
                tokio::spawn(async move { jobs.prepare_and_run(j, req).await });
                (job, attached)
            }
        };
        // Until the request is decoded (or refused).
        let mut rx = job.state.subscribe();
        loop {
            match &*rx.borrow_and_update() {
                State::Preparing => {}
                State::Ended(Ended::Refused(why)) => {
                    if let Some(a) = attached {
                        a.done();
                    }
                    return Err(Refusal::Invalid(why.clone()));
                }
                _ => return Ok((job, attached)),
            }
            if rx.changed().await.is_err() {
                return Ok((job, attached));
            }
        }
    }

    /// A new job's life: its request decoded and its circuits built, then
    /// the engine, then the verified result.
    async fn prepare_and_run(self: Arc<Self>, job: Arc<Job>, req: ProofRequest) {
        let kind = req.kind;
        let prover = Arc::clone(&self.prover);
        // Decoding and building circuits is CPU work: off the runtime.
        let prepared = match tokio::task::spawn_blocking(move || prover.prepare(&req)).await {
            Ok(Ok(p)) => p,
            refused => {
                let why = match refused {
                    Ok(Err(e)) => ErrorChain(&e).to_string(),
                    Err(e) => format!("the request could not be decoded: {e}"),
                    Ok(Ok(_)) => unreachable!("matched above"),
                };
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(job = %job.id, "request refused: {why}");
                // Forgotten first: a repeat must not find the refused job.
                self.forget(&job);
                job.end(Ended::Refused(why));
                return;
            }
        };
        self.counters.submitted.fetch_add(1, Ordering::Relaxed);
        tracing::info!(job = %job.id, request = %job.request_id.escape_debug(), %kind, "proof requested");
        self.run(job, prepared).await;
    }

    /// The job a request with this id and payload digest gets again: one
    /// preparing, queued, running or completed. A repeat after a failure or
    /// cancellation is a new attempt.
    fn known(t: &mut Table, request_id: &str, digest: &[u8; 32]) -> Option<Arc<Job>> {
        let key = (request_id.to_string(), *digest);
        let job = t.by_key.get(&key).and_then(|id| t.by_id.get(id)).cloned()?;
        match job.state() {
            State::Ended(Ended::Failed(_) | Ended::Refused(_) | Ended::Cancelled) => {
                t.by_key.remove(&key);
                None
            }
            _ => Some(job),
        }
    }

    /// Drops a job from the table at once (a refused request: nothing to
    /// keep for retries).
    fn forget(&self, job: &Job) {
        let mut t = self.table.lock().recover();
        t.by_id.remove(&job.id);
        let key = (job.request_id.clone(), job.digest);
        if t.by_key.get(&key) == Some(&job.id) {
            t.by_key.remove(&key);
        }
    }

    /// A job's life after its request was decoded: parameters, the engine,
    /// the verified result.
    async fn run(self: Arc<Self>, job: Arc<Job>, prepared: pinprove_filecoin::PreparedProof) {
        if job.cancelled.load(Ordering::Acquire) {
            // Cancelled while its request was being decoded.
            return self.finish(&job, Ended::Cancelled);
        }
        let prover = Arc::clone(&self.prover);
        let submitted = tokio::task::spawn_blocking(move || prover.submit_prepared(prepared)).await;
        let sub = match submitted {
            Ok(Ok(sub)) => sub,
            Ok(Err(e)) => return self.finish(&job, failure(&e)),
            Err(e) => return self.finish(&job, Ended::Failed(format!("submitting the proof panicked: {e}"))),
        };
        let _ = job.engine_job.set(sub.job);
        job.state.send_replace(State::Submitted);
        let engine = self.prover.engine();
        if job.cancelled.load(Ordering::Acquire) {
            let _ = engine.cancel(sub.job);
        }
        let outcome = match engine.outcome(sub.job) {
            Ok(f) => f.await,
            Err(e) => return self.finish(&job, Ended::Failed(ErrorChain(&e).to_string())),
        };
        // Assembly and verification are CPU work.
        let prover = Arc::clone(&self.prover);
        let finished = tokio::task::spawn_blocking(move || prover.finish(&sub, outcome)).await;
        let ended = match finished {
            Ok(Ok(p)) => Ended::Proved(Arc::new(p)),
            Ok(Err(e)) => failure(&e),
            Err(e) => Ended::Failed(format!("verifying the proof panicked: {e}")),
        };
        self.finish(&job, ended);
    }

    fn finish(&self, job: &Arc<Job>, ended: Ended) {
        match &ended {
            Ended::Proved(p) => {
                let verify_us = p.verification.map_or(0, |d| d.as_micros() as u64);
                self.counters
                    .verified
                    .fetch_add(u64::from(p.verification.is_some()), Ordering::Relaxed);
                self.counters.verification_us.fetch_add(verify_us, Ordering::Relaxed);
                tracing::info!(job = %job.id, kind = %job.kind, bytes = p.proof.len(),
                    ms = job.submitted.elapsed().as_millis() as u64, verify_ms = verify_us as f64 / 1000.0, "proof done")
            }
            Ended::Cancelled => tracing::info!(job = %job.id, "proof cancelled"),
            Ended::Failed(why) | Ended::Refused(why) => tracing::warn!(job = %job.id, "proof failed: {why}"),
        }
        let counter = match &ended {
            Ended::Proved(_) => &self.counters.proved,
            Ended::Failed(_) | Ended::Refused(_) => &self.counters.failed,
            Ended::Cancelled => &self.counters.cancelled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        job.end(ended);
        let mut t = self.table.lock().recover();
        t.ended.push_back((Instant::now(), job.id.clone()));
        self.expire(&mut t);
    }

    /// Forgets ended jobs beyond the kept count and age.
    fn expire(&self, t: &mut Table) {
        let age = Duration::from_secs(self.config.keep_results_secs);
        while let Some((at, id)) = t.ended.front().cloned() {
            if t.ended.len() <= self.config.keep_results && at.elapsed() <= age {
                break;
            }
            t.ended.pop_front();
            if let Some(job) = t.by_id.remove(&id) {
                let key = (job.request_id.clone(), job.digest);
                if t.by_key.get(&key) == Some(&id) {
                    t.by_key.remove(&key);
                }
            }
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Job>> {
        let mut t = self.table.lock().recover();
        self.expire(&mut t);
        t.by_id.get(id).cloned()
    }

    /// Cancels a job, queued or running; returns whether it had started.
    pub(crate) fn cancel(&self, job: &Job) -> bool {
        job.cancelled.store(true, Ordering::Release);
        let Some(engine_job) = job.engine_job() else {
            // Still preparing: it ends when it reaches the engine.
            return false;
        };
        let engine = self.prover.engine();
        let running = engine
            .job_status(engine_job)
            .is_ok_and(|s| s.state == EngineJobState::Running);
        let _ = engine.cancel(engine_job);
        running
    }

    /// A `Prove` call attaches to `job`; the guard it gets detaches on drop,
    /// and when the call went away without the result (its client is gone)
    /// and nobody else waits, the job is cancelled after the grace period —
    /// unless a retry attached meanwhile.
    pub(crate) fn attach(self: &Arc<Self>, job: &Arc<Job>) -> Attached {
        job.waiters.fetch_add(1, Ordering::AcqRel);
        Attached {
            jobs: Arc::clone(self),
            job: Arc::clone(job),
            done: false,
        }
    }

    /// Every job not ended, with where it is.
    pub(crate) fn active(&self) -> Vec<Arc<Job>> {
        let t = self.table.lock().recover();
        t.by_id
            .values()
            .filter(|j| !matches!(j.state(), State::Ended(_)))
            .cloned()
            .collect()
    }

    /// Waits until no job is active, at most `grace`; returns whether none is.
    pub(crate) async fn wait_idle(&self, grace: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            if self.active().is_empty() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn failure(e: &FilecoinError) -> Ended {
    match e {
        FilecoinError::Cancelled(_) => Ended::Cancelled,
        e if e.is_bad_input() => Ended::Refused(ErrorChain(e).to_string()),
        e => Ended::Failed(ErrorChain(e).to_string()),
    }
}

/// A `Prove` call's hold on its job.
pub(crate) struct Attached {
    jobs: Arc<Jobs>,
    job: Arc<Job>,
    done: bool,
}

impl Attached {
    /// The call got its result: nothing to cancel.
    pub(crate) fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let left = self.job.waiters.fetch_sub(1, Ordering::AcqRel) - 1;
        if self.done || left > 0 || matches!(self.job.state(), State::Ended(_)) {
            return;
        }
        let (jobs, job) = (Arc::clone(&self.jobs), Arc::clone(&self.job));
        let grace = Duration::from_secs(jobs.config.disconnect_grace_secs);
        tracing::info!(job = %job.id, grace_s = grace.as_secs(), "the client went away; cancelling unless it comes back");
        // Drop runs inside the runtime (a handler future being dropped).
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                tokio::time::sleep(grace).await;
                if job.waiters.load(Ordering::Acquire) == 0 && !matches!(job.state(), State::Ended(_)) {
                    jobs.counters.disconnected_cancels.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(job = %job.id, "no client came back: job cancelled");
                    jobs.cancel(&job);
                }
            });
        }
    }
}

/// The digest of a request's payload: every field but the request id and
/// the priority, in the order of the wire message.
pub(crate) fn digest(req: &ProofRequest) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut field = |tag: u8, bytes: &[u8]| {
        h.update([tag]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(2, req.kind.name().as_bytes());
    field(3, &req.sector_size.to_le_bytes());
    field(4, &req.registered_proof.to_le_bytes());
    field(10, &req.vanilla_proof);
    field(11, &(req.vanilla_proofs.len() as u64).to_le_bytes());
    for v in &req.vanilla_proofs {
        field(11, v);
    }
    field(20, &req.sector_number.to_le_bytes());
    field(21, &req.miner_id.to_le_bytes());
    field(22, &req.randomness);
    field(23, &req.partition_index.to_le_bytes());
    field(30, &req.comm_r_old);
    field(31, &req.comm_r_new);
    field(32, &req.comm_d_new);
    h.finalize().into()
}
