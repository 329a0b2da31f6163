//! The engine's jobs by id: those running, and the last ended ones kept
//! for their outcome (`EngineConfig::finished_jobs_kept`). Its own state:
//! nothing else reads or writes the map.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pinprove_mem::sync::Recover;

use super::state::JobCtl;
use crate::EngineError;
use crate::job::JobId;

pub(super) struct JobTable {
    jobs: Mutex<HashMap<JobId, Arc<JobCtl>>>,
    /// Ended jobs, oldest first: beyond `kept`, the oldest is forgotten.
    ended: Mutex<VecDeque<JobId>>,
    kept: usize,
    next_id: AtomicU64,
}

impl JobTable {
    pub(super) fn new(kept: usize) -> JobTable {
        JobTable {
            jobs: Mutex::new(HashMap::new()),
            ended: Mutex::new(VecDeque::new()),
            kept,
            next_id: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<JobId, Arc<JobCtl>>> {
        self.jobs.lock().recover()
    }

    /// Enters the job `make` builds under a fresh id.
    pub(super) fn insert(&self, make: impl FnOnce(JobId) -> JobCtl) -> Arc<JobCtl> {
        let id = JobId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let job = Arc::new(make(id));
        self.lock().insert(id, Arc::clone(&job));
        job
    }

    pub(super) fn get(&self, id: JobId) -> Result<Arc<JobCtl>, EngineError> {
        self.lock().get(&id).cloned().ok_or(EngineError::UnknownJob(id))
    }

    /// Every job known now (running, or ended and still kept).
    pub(super) fn all(&self) -> Vec<Arc<JobCtl>> {
        self.lock().values().cloned().collect()
    }

    /// Notes `id` ended: kept for its outcome until `kept` later jobs end.
    pub(super) fn ended(&self, id: JobId) {
        let mut ended = self.ended.lock().recover();
        ended.push_back(id);
        while ended.len() > self.kept {
            if let Some(old) = ended.pop_front() {
                self.lock().remove(&old);
            }
        }
    }
}
