//! The daemon's jobs: requests, their dedup by id and payload, their
//! results kept for retries, the cancellation of jobs whose clients went
//! away, and the bounds on accepted work.
//!
//! A `request_id` is a retry key, not a payload's identity: Curio reuses
//! one id for every WindowPoSt partition of a deadline (with different
//! vanilla proofs) and for a retry with fewer sectors. So a job is found
//! again only by its id *and* the digest of its payload; a repeat of both
//! while the job is queued, running or completed gets that job; after a
//! failure or cancellation it starts a new attempt.
//!
//! Accepted work is bounded before anything of a request is decoded: each
//! kind has its own count of unfinished jobs, and every unfinished job's
//! request is counted in bytes (its wire size times
//! [`REQUEST_MEMORY_FACTOR`](crate::REQUEST_MEMORY_FACTOR), for its
//! decoded form and circuits) against a limit of which WindowPoSt and
//! WinningPoSt keep a quarter for themselves. Beyond either, a request is
//! refused with `RESOURCE_EXHAUSTED` and a reason; Curio fails that task
//! and retries it later. Job ids are 128 random bits: whoever holds one
//! was given it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pinprove_engine::metrics::LatencyHistogram;
use pinprove_engine::{JobId, Priority};
use pinprove_filecoin::{FilecoinError, FilecoinProver, PerKind, ProofKind, ProofRequest, Proved};
use pinprove_mem::ErrorChain;
use pinprove_mem::sync::Recover;
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::config::JobsConfig;
use crate::ids::shown;
use crate::job_prover::JobProver;

mod turns;
use self::turns::{Turn, Turns};

/// How a job ended.
#[derive(Clone, Debug)]
pub(crate) enum Ended {
    /// The proof, verified.
    Proved(Arc<Proved>),
    /// The request was refused (bad input).
    Refused(String),
    /// Proving failed.
    Failed(String),
    /// Cancelled (by a client, because its client went away, or at
    /// shutdown).
    Cancelled,
}

/// Where a job is.
#[derive(Clone, Debug)]
pub(crate) enum State {
    /// Its request is being decoded and checked.
    Preparing,
    /// Decoded and checked; its parameters are being found (or made).
    Decoded,
    /// In the engine, as this job.
    Submitted(JobId),
    /// Done.
    Ended(Ended),
}

/// One request's job.
pub(crate) struct Job {
    pub id: String,
    pub request_id: String,
    pub digest: [u8; 32],
    pub kind: ProofKind,
    /// The priority it is proved at (the request's, or its kind's default).
    pub priority: Priority,
    pub submitted: Instant,
    /// Where it is: the one record of it from the wire to the engine.
    state: watch::Sender<State>,
    /// `Prove` calls waiting for it now.
    waiters: AtomicUsize,
    /// A `SubmitProof` took it: its caller awaits it by id, from any
    /// connection, so no disconnect cancels it.
    detached: AtomicBool,
    /// Cancelled: no more work is started for it.
    cancelled: AtomicBool,
}

impl Job {
    pub(crate) fn state(&self) -> State {
        self.state.borrow().clone()
    }

    fn ended(&self) -> bool {
        matches!(*self.state.borrow(), State::Ended(_))
    }

    /// The engine's job, while the engine has it.
    pub(crate) fn engine_job(&self) -> Option<JobId> {
        match *self.state.borrow() {
            State::Submitted(id) => Some(id),
            _ => None,
        }
    }

    /// Waits for the end, at most `timeout`; `None` when it ran out.
    pub(crate) async fn wait_end(&self, timeout: Option<Duration>) -> Option<Ended> {
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

    /// Ends the job once; returns whether this call ended it.
    fn end(&self, e: Ended) -> bool {
        self.state.send_if_modified(|s| {
            if matches!(s, State::Ended(_)) {
                return false;
            }
            *s = State::Ended(e);
            true
        })
    }
}

/// What is known of the jobs.
#[derive(Default)]
struct Table {
    by_id: HashMap<String, Arc<Job>>,
    /// (request id, payload digest) → job id, while queued, running or
    /// completed.
    by_key: HashMap<(String, [u8; 32]), String>,
    /// Ended jobs, oldest first, with the bytes each keeps, for expiry.
    ended: VecDeque<(Instant, String, usize)>,
    ended_bytes: usize,
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
    /// Requests refused because accepted work was at its bounds.
    pub refused_full: AtomicU64,
    pub disconnected_cancels: AtomicU64,
    /// Proofs verified before they were returned, and the time that took.
    pub verified: AtomicU64,
    pub verification_us: AtomicU64,
    /// Per kind: seconds from a proof's request to its verified result.
    pub proof_seconds: Mutex<PerKind<LatencyHistogram>>,
}

impl Counters {
    /// Counts a proof of `kind` returned `took` after it was asked for.
    fn proved(&self, kind: ProofKind, took: Duration) {
        self.proved.fetch_add(1, Ordering::Relaxed);
        self.proof_seconds.lock().recover()[kind].observe(took);
    }
}

/// Accepted work not yet finished: what the bounds are checked against.
#[derive(Default)]
struct Work {
    /// Unfinished jobs per kind.
    active: PerKind<AtomicUsize>,
    bytes: AtomicU64,
}

/// A job's share of the bounds, given back when its work is over (its
/// request decoded, proved or refused, its engine job ended).
pub(crate) struct Accepted<P: JobProver> {
    jobs: Arc<Jobs<P>>,
    kind: ProofKind,
    bytes: u64,
}

impl<P: JobProver> Drop for Accepted<P> {
    fn drop(&mut self) {
        self.jobs.work.active[self.kind].fetch_sub(1, Ordering::AcqRel);
        self.jobs.work.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The job table, over the daemon's prover (or a test's fake).
pub(crate) struct Jobs<P: JobProver = FilecoinProver> {
    prover: Arc<P>,
    config: JobsConfig,
    /// The bound on accepted requests' bytes.
    max_request_bytes: u64,
    table: Mutex<Table>,
    work: Work,
    /// Turns to decode a request, most urgent first.
    preparing: Arc<Turns>,
    draining: AtomicBool,
    pub counters: Counters,
}

/// Why a request was not taken.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Bad input: the message says what.
    Invalid(String),
    /// Accepted work is at its bounds: the message says which.
    Full(String),
    /// The daemon is stopping.
    Draining,
}

/// The bytes of accepted requests `auto` allows: an eighth of the host's
/// memory, at most 16 GiB.
fn auto_request_bytes() -> u64 {
    (pinprove_mem::sys::usable_memory_bytes() / 8).min(16 << 30)
}

impl<P: JobProver> Jobs<P> {
    pub(crate) fn new(prover: Arc<P>, config: JobsConfig) -> Arc<Jobs<P>> {
        let max_request_bytes = config.max_request_bytes.bytes().unwrap_or_else(auto_request_bytes);
        Arc::new(Jobs {
            prover,
            preparing: Turns::new(config.max_preparing),
            config,
            max_request_bytes,
            table: Mutex::new(Table::default()),
            work: Work::default(),
            draining: AtomicBool::new(false),
            counters: Counters::default(),
        })
    }

    pub(crate) fn prover(&self) -> &Arc<P> {
        &self.prover
    }

    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Takes no new work from now on, and cancels what has not reached the
    /// engine yet (requests being decoded, jobs waiting for parameters):
    /// only proofs already proving get the grace period.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        for job in self.active() {
            if job.engine_job().is_none() {
                self.cancel(&job);
            }
        }
    }

    /// Where accepted work stands: (unfinished jobs per kind, their request
    /// bytes, the bound on those bytes, jobs known).
    pub(crate) fn load(&self) -> (PerKind<usize>, u64, u64, usize) {
        let active = self.work.active.map(|_, n| n.load(Ordering::Acquire));
        let known = self.table.lock().recover().by_id.len();
        (
            active,
            self.work.bytes.load(Ordering::Acquire),
            self.max_request_bytes,
            known,
        )
    }

    /// Takes a share of the bounds for a request of `kind` at `priority`
    /// carrying `bytes`, or says which bound is full. Called under the
    /// table's lock, so that two requests never both take the last place.
    fn accept(self: &Arc<Self>, kind: ProofKind, priority: Priority, bytes: u64) -> Result<Accepted<P>, String> {
        let most = self.config.max_active.of(kind);
        let active = self.work.active[kind].load(Ordering::Acquire);
        if active >= most {
            return Err(format!(
                "{active} {kind} jobs are accepted and unfinished, the most this daemon takes \
                 ([jobs] max_active); try again later"
            ));
        }
        // Background work (PoRep and SnapDeals unless sent as urgent) leaves
        // a quarter to urgent work (the deadline-bound kinds).
        let urgent = priority.is_urgent();
        let limit = if urgent {
            self.max_request_bytes
        } else {
            self.max_request_bytes - self.max_request_bytes / 4
        };
        let held = self.work.bytes.load(Ordering::Acquire);
        if held + bytes > limit {
            return Err(format!(
                "accepted requests hold {held} bytes and this one needs {bytes}; {kind} requests at {priority:?} \
                 priority may hold {limit} ([jobs] max_request_bytes); try again later"
            ));
        }
        self.work.active[kind].fetch_add(1, Ordering::AcqRel);
        self.work.bytes.fetch_add(bytes, Ordering::AcqRel);
        Ok(Accepted {
            jobs: Arc::clone(self),
            kind,
            bytes,
        })
    }

    /// The job of this request: an existing one with the same id and
    /// payload (preparing, queued, running or completed), or a new one.
    /// `digest` is the payload's (see [`digest`]). With `attach`, the caller
    /// (a `Prove` call) holds the job from the moment it is found or made,
    /// so that a client going away while the request is still being decoded
    /// cancels it like any other; without, the caller (`SubmitProof`) will
    /// await it by id and no disconnect cancels it. Returns once the request
    /// was decoded and checked: a refused request is an error, and nothing
    /// of it is queued.
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
    ) -> Result<(Arc<Job>, Option<Attached<P>>), Refusal> {
        if self.draining() {
            return Err(Refusal::Draining);
        }
        // The job is in the table before its request is decoded, so that a
        // repeat arriving meanwhile finds it instead of decoding it twice.
        let (job, attached) = {
            let mut t = self.table.lock().recover();
            if let Some(job) = Self::known(&mut t, &request_id, &digest) {
                if !attach {
                    job.detached.store(true, Ordering::Release);
                }
                let attached = attach.then(|| self.attach(&job));
                drop(t);
                self.counters.deduplicated.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(job = %job.id, "a repeat of a known request: the same job");
                (job, attached)
            } else {
                let accepted = match self.accept(req.kind, req.priority(), request_bytes(&req)) {
                    Ok(a) => a,
                    Err(why) => {
                        drop(t);
                        self.counters.refused_full.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(kind = %req.kind, request = %shown(&request_id), "request refused: {why}");
                        return Err(Refusal::Full(why));
                    }
                };
                let id = new_job_id();
                let job = Arc::new(Job {
                    id: id.clone(),
                    request_id: request_id.clone(),
                    digest,
                    kind: req.kind,
                    priority: req.priority(),
                    submitted: Instant::now(),
                    state: watch::Sender::new(State::Preparing),
                    waiters: AtomicUsize::new(0),
                    detached: AtomicBool::new(!attach),
                    cancelled: AtomicBool::new(false),
                });
                t.by_id.insert(id.clone(), Arc::clone(&job));
                t.by_key.insert((request_id, digest), id);
                let attached = attach.then(|| self.attach(&job));
                drop(t);
                let (jobs, j) = (Arc::clone(self), Arc::clone(&job));
                tokio::spawn(async move { jobs.prepare_and_run(j, req, accepted).await });
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

    /// A new job's life: its request decoded and its circuits built (a few
    /// at a time) and handed to the engine, in one trip off the runtime;
    /// then the engine's outcome and the verified result. `accepted` is
    /// held until the work is over.
    async fn prepare_and_run(self: Arc<Self>, job: Arc<Job>, req: ProofRequest, accepted: Accepted<P>) {
        let permit = self.preparing.take(job.priority).await;
        if job.cancelled.load(Ordering::Acquire) {
            return self.finish(&job, Ended::Cancelled);
        }
        let (jobs, j) = (Arc::clone(&self), Arc::clone(&job));
        let submitted = tokio::task::spawn_blocking(move || jobs.prepare_and_submit(&j, &req, permit, accepted)).await;
        let (id, sub, accepted) = match submitted {
            Ok(Some(sub)) => sub,
            // Ended there, its memory given back first.
            Ok(None) => return,
            Err(e) => {
                return self.finish(
                    &job,
                    Ended::Failed(format!("preparing or submitting the proof panicked: {e}")),
                );
            }
        };
        self.run(&job, id, sub).await;
        drop(accepted);
    }

    /// Decodes `req` and builds its circuits (holding `permit` meanwhile),
    /// then hands them to the engine; returns what `run` needs, with
    /// `accepted`. `None` when the job ended here (refused and forgotten,
    /// cancelled meanwhile, or not taken by the engine), `accepted` given
    /// back before its end shows.
    fn prepare_and_submit(
        &self,
        job: &Arc<Job>,
        req: &ProofRequest,
        permit: Turn,
        accepted: Accepted<P>,
    ) -> Option<(JobId, P::Submitted, Accepted<P>)> {
        let prepared = match self.prover.prepare(req) {
            Ok(p) => p,
            Err(e) => {
                let why = ErrorChain(&e).to_string();
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(job = %job.id, "request refused: {why}");
                drop((permit, accepted));
                // Forgotten first: a repeat must not find the refused job.
                self.forget(job);
                job.end(Ended::Refused(why));
                return None;
            }
        };
        drop(permit);
        // The caller may go: the request is taken.
        job.state.send_if_modified(|s| {
            let preparing = matches!(s, State::Preparing);
            if preparing {
                *s = State::Decoded;
            }
            preparing
        });
        self.counters.submitted.fetch_add(1, Ordering::Relaxed);
        tracing::info!(job = %job.id, request = %shown(&job.request_id), kind = %req.kind, "proof requested");
        if job.cancelled.load(Ordering::Acquire) {
            // Cancelled while its request was being decoded.
            drop(accepted);
            self.finish(job, Ended::Cancelled);
            return None;
        }
        match self.prover.submit(prepared) {
            Ok((id, sub)) => Some((id, sub, accepted)),
            Err(e) => {
                drop(accepted);
                self.finish(job, failure(&e));
                None
            }
        }
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

    /// A job's life once the engine has it (as `id`, submitted as `sub`):
    /// its outcome, then the verified result. Returns once the engine is
    /// done with it, also when it was cancelled (and ended) earlier.
    async fn run(self: &Arc<Self>, job: &Arc<Job>, id: JobId, sub: P::Submitted) {
        job.state.send_if_modified(|s| {
            // A job cancelled while it waited for its parameters has ended.
            let waiting = matches!(s, State::Decoded);
            if waiting {
                *s = State::Submitted(id);
            }
            waiting
        });
        // `cancel` set the flag before it read the state this wrote: it saw
        // the engine's job and cancelled it, or this sees the flag.
        if job.cancelled.load(Ordering::Acquire) {
            self.prover.cancel(id);
        }
        let outcome = match self.prover.outcome(id) {
            Ok(f) => f.await,
            Err(why) => return self.finish(job, Ended::Failed(why)),
        };
        if job.ended() {
            return;
        }
        // Assembly and verification are CPU work.
        let prover = Arc::clone(&self.prover);
        let finished = tokio::task::spawn_blocking(move || prover.finish(&sub, outcome)).await;
        let ended = match finished {
            Ok(Ok(p)) => Ended::Proved(Arc::new(p)),
            Ok(Err(e)) => failure(&e),
            Err(e) => Ended::Failed(format!("verifying the proof panicked: {e}")),
        };
        self.finish(job, ended);
    }

    /// Ends `job` as `ended` (once: a job already ended stays as it is),
    /// and keeps its result for retries within the kept count, bytes and
    /// age.
    fn finish(&self, job: &Arc<Job>, ended: Ended) {
        let kept = match &ended {
            Ended::Proved(p) => p.proof.len(),
            Ended::Failed(why) | Ended::Refused(why) => why.len(),
            Ended::Cancelled => 0,
        } + job.request_id.len()
            + job.id.len()
            + 256;
        let log = ended.clone();
        if !job.end(ended) {
            return;
        }
        match &log {
            Ended::Proved(_) => self.counters.proved(job.kind, job.submitted.elapsed()),
            Ended::Failed(_) | Ended::Refused(_) => _ = self.counters.failed.fetch_add(1, Ordering::Relaxed),
            Ended::Cancelled => _ = self.counters.cancelled.fetch_add(1, Ordering::Relaxed),
        }
        match log {
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
        let mut t = self.table.lock().recover();
        t.ended.push_back((Instant::now(), job.id.clone(), kept));
        t.ended_bytes += kept;
        self.expire(&mut t);
    }

    /// Forgets ended jobs beyond the kept count, bytes and age.
    fn expire(&self, t: &mut Table) {
        let age = Duration::from_secs(self.config.keep_results_secs);
        let bytes = usize::try_from(self.config.keep_results_bytes.0).unwrap_or(usize::MAX);
        while let Some((at, id, kept)) = t.ended.front().cloned() {
            if t.ended.len() <= self.config.keep_results && t.ended_bytes <= bytes && at.elapsed() <= age {
                break;
            }
            t.ended.pop_front();
            t.ended_bytes -= kept;
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

    /// Cancels a job; returns whether it was proving. One that has not
    /// reached the engine (being decoded, or waiting for its parameters) ends
    /// at once; its background work stops at its next step.
    pub(crate) fn cancel(&self, job: &Arc<Job>) -> bool {
        job.cancelled.store(true, Ordering::Release);
        let Some(engine_job) = job.engine_job() else {
            self.finish(job, Ended::Cancelled);
            return false;
        };
        let running = self.prover.is_running(engine_job);
        self.prover.cancel(engine_job);
        running
    }

    /// A `Prove` call attaches to `job`; the guard it gets detaches on drop,
    /// and when the call went away without the result (its client is gone),
    /// nobody else waits and no `SubmitProof` took the job, the job is
    /// cancelled after the grace period — unless a retry attached
    /// meanwhile.
    pub(crate) fn attach(self: &Arc<Self>, job: &Arc<Job>) -> Attached<P> {
        job.waiters.fetch_add(1, Ordering::AcqRel);
        Attached {
            jobs: Arc::clone(self),
            job: Arc::clone(job),
            done: false,
        }
    }

    /// Every job not ended, with where it is.
    /// The last `n` jobs that ended, newest first, with when each ended
    /// (among those whose results are still kept).
    pub(crate) fn recent(&self, n: usize) -> Vec<(Arc<Job>, Instant)> {
        let t = self.table.lock().recover();
        t.ended
            .iter()
            .rev()
            .filter_map(|(at, id, _)| Some((Arc::clone(t.by_id.get(id)?), *at)))
            .take(n)
            .collect()
    }

    /// Unfinished jobs that go before `job`: those of a higher priority,
    /// and those of its own that came first (the engine's order).
    pub(crate) fn ahead_of(&self, job: &Job) -> usize {
        self.active()
            .iter()
            .filter(|j| j.priority > job.priority || (j.priority == job.priority && j.submitted < job.submitted))
            .count()
    }

    pub(crate) fn active(&self) -> Vec<Arc<Job>> {
        let t = self.table.lock().recover();
        t.by_id.values().filter(|j| !j.ended()).cloned().collect()
    }

    /// Waits until no job is active, at most `grace`; returns whether none
    /// is. (A cancelled job's background step that cannot be interrupted,
    /// a parameter generation, is not waited for.)
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

/// A new job id: 128 random bits, so that no client can name another's job.
fn new_job_id() -> String {
    let mut b = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut b);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("job-{hex}")
}

/// What a request is counted as in the bounds on accepted work: its
/// payload's bytes, decoded and built into circuits.
fn request_bytes(req: &ProofRequest) -> u64 {
    let payload = req.vanilla_proof.len()
        + req.vanilla_proofs.iter().map(Vec::len).sum::<usize>()
        + req.randomness.len()
        + req.comm_r_old.len()
        + req.comm_r_new.len()
        + req.comm_d_new.len();
    (payload as u64 + 4096) * crate::REQUEST_MEMORY_FACTOR
}

fn failure(e: &FilecoinError) -> Ended {
    match e {
        FilecoinError::Cancelled(_) => Ended::Cancelled,
        e if e.is_bad_input() => Ended::Refused(ErrorChain(e).to_string()),
        e => Ended::Failed(ErrorChain(e).to_string()),
    }
}

/// A `Prove` call's hold on its job.
pub(crate) struct Attached<P: JobProver = FilecoinProver> {
    jobs: Arc<Jobs<P>>,
    job: Arc<Job>,
    done: bool,
}

impl<P: JobProver> Attached<P> {
    /// The call got its result: nothing to cancel.
    pub(crate) fn done(mut self) {
        self.done = true;
    }
}

impl<P: JobProver> Drop for Attached<P> {
    fn drop(&mut self) {
        let left = self.job.waiters.fetch_sub(1, Ordering::AcqRel) - 1;
        let detached = self.job.detached.load(Ordering::Acquire);
        if self.done || left > 0 || detached || self.job.ended() {
            return;
        }
        let (jobs, job) = (Arc::clone(&self.jobs), Arc::clone(&self.job));
        let grace = Duration::from_secs(jobs.config.disconnect_grace_secs);
        tracing::info!(job = %job.id, grace_s = grace.as_secs(), "the client went away; cancelling unless it comes back");
        // Drop runs inside the runtime (a handler future being dropped).
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                tokio::time::sleep(grace).await;
                if job.waiters.load(Ordering::Acquire) == 0 && !job.detached.load(Ordering::Acquire) && !job.ended() {
                    jobs.counters.disconnected_cancels.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(job = %job.id, "no client came back: job cancelled");
                    jobs.cancel(&job);
                }
            });
        }
    }
}

/// The digest of a request's payload: every field but the request id and
/// the priority, in the order of the wire message. Tens of MB for a 32 GiB
/// proof: computed off the async runtime.
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

#[cfg(test)]
mod tests;
