//! Awaiting a job from async code: a future that resolves to the job's
//! outcome without a thread blocked per waiter, and optionally cancels the
//! job when the awaiting side goes away (a client that disconnected).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::inner::Inner;
use super::state::JobCtl;
use crate::job::{JobId, JobOutcome};

/// The outcome of a job, as a future (from [`Engine::outcome`](crate::Engine::outcome)).
///
/// It works on any executor: the engine's threads wake the task when the
/// job ends. Several futures may await one job.
pub struct JobFuture {
    job: Arc<JobCtl>,
    engine: Weak<Inner>,
    cancel_on_drop: bool,
}

impl JobFuture {
    pub(super) fn new(job: Arc<JobCtl>, engine: Weak<Inner>) -> JobFuture {
        JobFuture {
            job,
            engine,
            cancel_on_drop: false,
        }
    }

    /// Cancels the job if this future is dropped before the job ended: the
    /// guard a request handler holds, so that a client that goes away takes
    /// its job with it.
    pub fn cancel_on_drop(mut self) -> JobFuture {
        self.cancel_on_drop = true;
        self
    }

    /// The job awaited.
    pub fn id(&self) -> JobId {
        self.job.id
    }
}

impl Future for JobFuture {
    type Output = JobOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<JobOutcome> {
        self.job.poll_outcome(cx)
    }
}

impl Drop for JobFuture {
    fn drop(&mut self) {
        if self.cancel_on_drop
            && self.job.outcome().is_none()
            && let Some(engine) = self.engine.upgrade()
        {
            tracing::debug!(job = %self.job.id, "the awaiting side went away: job cancelled");
            engine.cancel(&self.job);
        }
    }
}
