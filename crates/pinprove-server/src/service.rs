//! The cuzk.v1 service: a thin adapter from the generated gRPC types to
//! the job table and the engine.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pinprove_filecoin::PerKind;
use pinprove_mem::ErrorChain;
use tonic::{Request, Response, Status};

use crate::ids::shown;
use crate::jobs::{Attached, Ended, Job, Jobs, Refusal, State, digest};
use crate::pb::{self, await_proof_response, srs_status};

/// The service's state.
pub(crate) struct Service {
    pub jobs: Arc<Jobs>,
    pub started: Instant,
    /// The GPUs the stack found (none on the CPU backend).
    pub gpus: Arc<Vec<(pinprove_engine::DeviceId, pinprove_cuda::Gpu)>>,
    /// The shipped alert rules over the daemon's metrics.
    pub alerts: Arc<crate::alerts::Alerts>,
}

impl Service {
    /// A request's job; with `attach`, held by the caller from the start
    /// (see [`Jobs::submit`]).
    async fn take(&self, s: pb::SubmitProofRequest, attach: bool) -> Result<(Arc<Job>, Option<Attached>), Status> {
        if self.jobs.draining() {
            return Err(draining());
        }
        let (request_id, req) = crate::wire::request_of(s).inspect_err(|_| {
            // Refused before it became a job: counted with those refused after.
            self.jobs
                .counters
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })?;
        // Tens of MB to hash for a 32 GiB proof: off the runtime.
        let (d, req) = tokio::task::spawn_blocking(move || (digest(&req), req))
            .await
            .map_err(|e| Status::internal(format!("hashing the request failed: {e}")))?;
        self.jobs.submit(request_id, d, req, attach).await.map_err(|r| match r {
            Refusal::Invalid(m) => Status::invalid_argument(m),
            Refusal::Full(m) => Status::resource_exhausted(m),
            Refusal::Draining => draining(),
        })
    }

    fn job(&self, id: &str) -> Result<Arc<Job>, Status> {
        self.jobs.get(id).ok_or_else(|| {
            Status::not_found(format!(
                "no job \"{}\" (unknown, or forgotten since it ended)",
                shown(id)
            ))
        })
    }
}

fn draining() -> Status {
    Status::unavailable("the daemon is shutting down and takes no new work")
}

/// The wire form of how a job ended.
fn response(job: &Job, ended: Option<Ended>) -> pb::AwaitProofResponse {
    use await_proof_response::Status as S;
    let mut r = pb::AwaitProofResponse {
        job_id: job.id.clone(),
        ..Default::default()
    };
    match ended {
        None => r.set_status(S::Timeout),
        Some(Ended::Proved(p)) => {
            r.set_status(S::Completed);
            r.proof = p.proof.clone();
            let ms = |d: Duration| d.as_millis() as u64;
            let t = &p.partitions;
            r.queue_wait_ms = t.iter().map(|t| ms(t.queue_wait)).max().unwrap_or(0);
            r.srs_load_ms = t.iter().map(|t| ms(t.srs_load)).max().unwrap_or(0);
            r.synthesis_ms = t.iter().map(|t| ms(t.synthesis)).sum();
            r.gpu_compute_ms = t.iter().map(|t| ms(t.start + t.finish)).sum();
            r.total_ms = ms(job.submitted.elapsed());
        }
        Some(Ended::Failed(why) | Ended::Refused(why)) => {
            r.set_status(S::Failed);
            r.error_message = why;
        }
        Some(Ended::Cancelled) => {
            r.set_status(S::Cancelled);
            r.error_message = "cancelled".into();
        }
    }
    r
}

#[tonic::async_trait]
impl pb::proving_engine_server::ProvingEngine for Service {
    async fn submit_proof(
        &self,
        request: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        let (job, _) = self.take(request.into_inner(), false).await?;
        Ok(Response::new(pb::SubmitProofResponse {
            job_id: job.id.clone(),
            queue_position: self.jobs.ahead_of(&job) as u32,
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        request: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let r = request.into_inner();
        let job = self.job(&r.job_id)?;
        let timeout = (r.timeout_ms > 0).then(|| Duration::from_millis(r.timeout_ms));
        let ended = job.wait_end(timeout).await;
        Ok(Response::new(response(&job, ended)))
    }

    async fn prove(&self, request: Request<pb::ProveRequest>) -> Result<Response<pb::ProveResponse>, Status> {
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("ProveRequest.submit is not set"))?;
        // If this future is dropped (the client's deadline, a disconnect),
        // the guard cancels the job after the grace period, also while its
        // request is still being decoded.
        let (job, attached) = self.take(submit, true).await?;
        let ended = job.wait_end(None).await;
        if let Some(a) = attached {
            a.done();
        }
        Ok(Response::new(pb::ProveResponse {
            result: Some(response(&job, ended)),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let job = self.job(&request.into_inner().job_id)?;
        let was_running = self.jobs.cancel(&job);
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(self.status()))
    }

    async fn get_metrics(
        &self,
        _request: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        Ok(Response::new(pb::GetMetricsResponse {
            prometheus_text: crate::metrics::metrics_text(&self.jobs),
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        if self.jobs.draining() {
            return Err(draining());
        }
        let id = request.into_inner().circuit_id;
        let prover = Arc::clone(self.jobs.prover());
        let loaded = tokio::task::spawn_blocking(move || -> Result<(bool, Duration), Status> {
            prover.register(&id).map_err(|e| {
                let m = ErrorChain(&e).to_string();
                if e.is_bad_input() {
                    Status::invalid_argument(m)
                } else {
                    Status::failed_precondition(m)
                }
            })?;
            prover
                .engine()
                .preload_srs(&id)
                .map_err(|e| Status::internal(ErrorChain(&e).to_string()))
        })
        .await
        .map_err(|e| Status::internal(format!("loading panicked: {e}")))??;
        Ok(Response::new(pb::PreloadSrsResponse {
            already_loaded: loaded.0,
            load_time_ms: loaded.1.as_millis() as u64,
        }))
    }

    async fn evict_srs(&self, request: Request<pb::EvictSrsRequest>) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let engine = self.jobs.prover().engine();
        let info = engine.status().srs.into_iter().find(|s| s.circuit_id == id);
        match info {
            Some(s) if s.loaded && s.refs > 0 => Err(Status::failed_precondition(format!(
                "{id} is in use by {} partitions; evict it when they are done",
                s.refs
            ))),
            Some(s) if s.loaded => {
                let freed = engine.evict_srs(&id).unwrap_or(0);
                Ok(Response::new(pb::EvictSrsResponse {
                    was_loaded: true,
                    freed_bytes: freed,
                }))
            }
            _ => Ok(Response::new(pb::EvictSrsResponse {
                was_loaded: false,
                freed_bytes: 0,
            })),
        }
    }
}

impl Service {
    /// GetStatus: queues per kind (jobs), GPUs, parameters, pinned memory.
    pub(crate) fn status(&self) -> pb::GetStatusResponse {
        let engine = self.jobs.prover().engine();
        let es = engine.status();
        let active = self.jobs.active();
        let mut queues = PerKind::from_fn(|k| pb::QueueStatus {
            proof_kind: k.name().to_string(),
            pending: 0,
            in_progress: 0,
        });
        for job in &active {
            let q = &mut queues[job.kind];
            let running = job
                .engine_job()
                .and_then(|j| engine.job_status(j).ok())
                .is_some_and(|s| s.state == pinprove_engine::JobState::Running);
            match (job.state(), running) {
                (State::Submitted(_), true) => q.in_progress += 1,
                _ => q.pending += 1,
            }
        }
        let job_on = |engine_job: Option<pinprove_engine::JobId>| {
            engine_job.and_then(|e| active.iter().find(|j| j.engine_job() == Some(e)).cloned())
        };
        let gpus = self
            .gpus
            .iter()
            .map(|(id, gpu)| {
                let device = es.devices.iter().find(|d| d.id == *id);
                let job = job_on(device.and_then(|d| d.current_job));
                // Free memory as the engine last read it (NVML), else unknown.
                let reading = device.and_then(|d| d.gpu);
                pb::GpuStatus {
                    ordinal: id.gpu().unwrap_or_default() as u32,
                    name: gpu.device.name.clone(),
                    vram_total_bytes: gpu.device.total_memory,
                    vram_free_bytes: reading.map_or(0, |r| r.memory_total_bytes.saturating_sub(r.memory_used_bytes)),
                    current_job_id: job.as_ref().map(|j| j.id.clone()).unwrap_or_default(),
                    current_proof_kind: job.map(|j| j.kind.name().to_string()).unwrap_or_default(),
                }
            })
            .collect();
        let loaded_srs = es
            .srs
            .iter()
            .map(|s| {
                let tier = match (s.loaded, s.refs) {
                    (true, r) if r > 0 => srs_status::Tier::Hot,
                    (true, _) => srs_status::Tier::Warm,
                    _ => srs_status::Tier::Cold,
                };
                pb::SrsStatus {
                    circuit_id: s.circuit_id.clone(),
                    tier: tier as i32,
                    size_bytes: s.bytes,
                    ref_count: s.refs as u32,
                }
            })
            .collect();
        let pool = engine.pool().stats();
        let c = &self.jobs.counters;
        pb::GetStatusResponse {
            gpus,
            loaded_srs,
            queues: queues.into_values().collect(),
            total_proofs_completed: c.proved.load(Ordering::Relaxed),
            total_proofs_failed: c.failed.load(Ordering::Relaxed),
            uptime_seconds: self.started.elapsed().as_secs(),
            pinned_memory_bytes: if engine.pool().kind() == pinprove_mem::MemoryKind::CudaPinned {
                pool.allocated_bytes
            } else {
                0
            },
            pinned_memory_limit_bytes: es.budget_total,
        }
    }
}
