//! What the job table needs of a prover.
//!
//! The daemon's prover is the Filecoin prover on the engine; the job
//! table's own logic (dedup by id and payload, grace periods, retention,
//! cancellation, drain, bounds) does not care, so its tests run against a
//! fake in seconds and the real prover's tests keep one end-to-end pass
//! per proof kind.

use std::future::Future;
use std::pin::Pin;

use pinprove_engine::{JobId, JobOutcome, JobState};
use pinprove_filecoin::{FilecoinError, FilecoinProver, PreparedProof, ProofRequest, Proved, Submission};
use pinprove_mem::ErrorChain;

/// The end of a submitted job, awaited.
pub(crate) type Outcome<O> = Pin<Box<dyn Future<Output = O> + Send>>;

/// A prover the job table drives: decode, submit, await, finish. Every
/// method but [`outcome`](Self::outcome)'s future is blocking CPU work; the
/// table calls them off the async runtime.
pub(crate) trait JobProver: Send + Sync + 'static {
    /// A decoded, checked request.
    type Prepared: Send + 'static;
    /// What finishing a submitted job needs.
    type Submitted: Send + Sync + 'static;
    /// How a submitted job ended in the prover.
    type Outcome: Send + 'static;

    /// Decodes and checks a request; bad input is an error
    /// ([`FilecoinError::is_bad_input`]).
    fn prepare(&self, req: &ProofRequest) -> Result<Self::Prepared, FilecoinError>;
    /// Finds its parameters (minutes when a test size's are made) and
    /// queues it: its id and what finishing it needs.
    fn submit(&self, prepared: Self::Prepared) -> Result<(JobId, Self::Submitted), FilecoinError>;
    /// Its end, awaited; an error when the prover does not know the job.
    fn outcome(&self, job: JobId) -> Result<Outcome<Self::Outcome>, String>;
    /// Cancels it (a job already ended is left as it is).
    fn cancel(&self, job: JobId);
    /// Whether any of its partitions has started.
    fn is_running(&self, job: JobId) -> bool;
    /// The verified proof of an ended job.
    fn finish(&self, submitted: &Self::Submitted, outcome: Self::Outcome) -> Result<Proved, FilecoinError>;
}

impl JobProver for FilecoinProver {
    type Prepared = PreparedProof;
    type Submitted = Submission;
    type Outcome = JobOutcome;

    fn prepare(&self, req: &ProofRequest) -> Result<PreparedProof, FilecoinError> {
        FilecoinProver::prepare(self, req)
    }

    fn submit(&self, prepared: PreparedProof) -> Result<(JobId, Submission), FilecoinError> {
        let sub = self.submit_prepared(prepared)?;
        Ok((sub.job, sub))
    }

    fn outcome(&self, job: JobId) -> Result<Outcome<JobOutcome>, String> {
        match self.engine().outcome(job) {
            Ok(f) => Ok(Box::pin(f)),
            Err(e) => Err(ErrorChain(&e).to_string()),
        }
    }

    fn cancel(&self, job: JobId) {
        let _ = self.engine().cancel(job);
    }

    fn is_running(&self, job: JobId) -> bool {
        self.engine()
            .job_status(job)
            .is_ok_and(|s| s.state == JobState::Running)
    }

    fn finish(&self, submitted: &Submission, outcome: JobOutcome) -> Result<Proved, FilecoinError> {
        FilecoinProver::finish(self, submitted, outcome)
    }
}
