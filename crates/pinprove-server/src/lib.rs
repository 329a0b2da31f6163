//! pinprove's daemon: the cuzk.v1 gRPC service Curio points at (one
//! daemon per GPU host), an HTTP status page, and the configuration they
//! run from.
//!
//! * [`config`] — the TOML configuration (every key has a default; an
//!   unknown key is an error naming it).
//! * [`pb`] — the protocol, generated from `proto/cuzk/v1/proving.proto`
//!   (server and client); [`client`] connects to a daemon; [`wire`]
//!   turns requests into their wire form and back.
//! * [`Daemon`] — builds the proving stack from the configuration, listens
//!   (TCP or a unix socket with mode 0600; a bearer token guards TCP when
//!   configured), serves until told to stop, then stops taking work, lets
//!   running proofs finish within the grace period, and exits.
//!
//! The service itself is a thin adapter: requests become
//! [`pinprove_filecoin::ProofRequest`]s, jobs are kept by request id *and*
//! payload digest, results are kept a while for retries, and a `Prove`
//! whose client went away cancels its job after a grace period unless the
//! client came back.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod alerts;
pub mod client;
pub mod codec;
pub mod config;
mod http;
mod ids;
mod intake;
mod job_prover;
mod jobs;
mod metrics;
mod service;
pub mod wire;

/// The cuzk.v1 protocol (generated).
#[allow(clippy::all, clippy::pedantic, missing_docs, unreachable_pub)]
pub mod pb {
    tonic::include_proto!("cuzk.v1");

    /// Each message's field numbers by field name, written by the build
    /// script from the descriptors the types above come from.
    pub mod field {
        include!(concat!(env!("OUT_DIR"), "/cuzk.v1.fields.rs"));
    }
}

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pinprove_engine::{EngineConfig, EngineError};
use pinprove_filecoin::params::{GenerationProgress, LogProgress};
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache};
use pinprove_mem::ErrorChain;
use pinprove_stack::{NativeOptions, Stack, StackConfig};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::Config;

/// Largest message the client sends or takes (Curio's own limit). The
/// daemon takes less: each method what it can legitimately carry (see
/// [`codec`]).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// How many times its wire size an accepted request is counted in the
/// bound on accepted work (`[jobs] max_request_bytes`): the request as
/// received, its decoded vanilla proofs, and the circuits built from them
/// are held until the proof is done. Measured on synthetic 32 GiB requests
/// (2-core machine): a WindowPoSt partition (58.6 MB on the wire) held
/// 2.4 times its size once prepared (4.7 at the peak of its preparation,
/// which few requests reach at once: `[jobs] max_preparing`); a PoRep C1
/// output (38.7 MB) 1.65 times, 2 at the peak.
pub const REQUEST_MEMORY_FACTOR: u64 = 3;

/// Why the daemon could not start or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is wrong.
    #[error("configuration: {0}")]
    Config(String),
    /// The proving stack could not be built.
    #[error("building the proving stack")]
    Stack(#[from] pinprove_stack::AssemblyError),
    /// The engine could not start.
    #[error("starting the engine")]
    Engine(#[from] EngineError),
    /// A listener could not be set up.
    #[error("listening on {what}")]
    Listen {
        /// The address.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A server failed.
    #[error("serving")]
    Serve(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Where the gRPC service listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// TCP.
    Tcp(SocketAddr),
    /// A unix socket.
    Unix(PathBuf),
}

impl Endpoint {
    /// The address a client dials: `http://host:port` or `unix:///path`.
    pub fn uri(&self) -> String {
        match self {
            Endpoint::Tcp(a) => format!("http://{a}"),
            Endpoint::Unix(p) => format!("unix://{}", p.display()),
        }
    }
}

/// A running daemon.
pub struct Daemon {
    endpoint: Endpoint,
    /// The unix socket this process bound (device and inode), which it
    /// alone removes at shutdown.
    socket: Option<(u64, u64)>,
    http: Option<SocketAddr>,
    jobs: Arc<jobs::Jobs>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<Result<(), ServerError>>>,
    grace: Duration,
}

impl Daemon {
    /// Builds the proving stack `config` describes, starts listening and
    /// serving, and returns (at once: parameters named in
    /// `filecoin.preload` load in the background). Parameter generation
    /// (test sizes) is reported in the log.
    pub async fn start(config: Config) -> Result<Daemon, ServerError> {
        Daemon::start_with(config, Arc::new(LogProgress)).await
    }

    /// [`start`](Self::start), with parameter generation reported to
    /// `generation` (a command's progress display).
    pub async fn start_with(config: Config, generation: Arc<dyn GenerationProgress>) -> Result<Daemon, ServerError> {
        let native = NativeOptions {
            workers_per_device: config
                .gpu
                .workers_per_device
                .unwrap_or(NativeOptions::default().workers_per_device),
            queue_depth: config.gpu.queue_depth.unwrap_or(NativeOptions::default().queue_depth),
            partitions_sharing_bases: config
                .gpu
                .partitions_sharing_bases
                .unwrap_or(NativeOptions::default().partitions_sharing_bases),
            memory_limit: config.gpu.memory_limit.map(|l| l.0),
            ..NativeOptions::default()
        };
        let stack = Stack::build(&StackConfig {
            backend: config.gpu.backend,
            budget: config.memory.budget.clone(),
            devices: config.gpu.devices.clone(),
            native,
            pinning: config.memory.pinning,
            ..StackConfig::default()
        })?;
        let stack_is_gpu = stack.backend.is_gpu();
        if stack_is_gpu {
            tracing::info!(backend = %stack.backend, gpus = stack.devices.len(), "proving on the GPU");
        } else {
            tracing::info!(
                "proving on the CPU backend ({})",
                if pinprove_cuda::BUILT_WITH_CUDA {
                    "no usable GPU, or the CPU backend was asked for"
                } else {
                    "a build without GPU support"
                }
            );
        }
        let defaults = EngineConfig::default();
        let engine = stack.engine(EngineConfig {
            synthesis_workers: config.synthesis.workers.unwrap_or(defaults.synthesis_workers),
            max_concurrent_syntheses: config.synthesis.max_concurrent,
            workers_per_device: config.gpu.workers_per_device,
            hints_dir: Some(config.hints.dir.clone()),
            priority_reserve: config.memory.urgent_reserve.bytes(),
            warm_partitions: config.memory.warm_partitions,
            precompiled: config.synthesis.precompiled,
            planner: config.memory.planner.then(pinprove_engine::planner::Policy::planned),
            ..defaults
        })?;
        let prover = Arc::new(FilecoinProver::new(
            Arc::new(engine),
            ParamCache::new(&config.filecoin.parameter_cache)
                .with_progress(generation)
                .with_generation(config.filecoin.generate_parameters),
            FilecoinOptions {
                verify: config.filecoin.verify,
            },
        ));
        if !config.filecoin.verify {
            tracing::warn!("proofs are returned without verifying them (filecoin.verify = false)");
        }
        for id in config.filecoin.preload.clone() {
            let p = Arc::clone(&prover);
            tokio::task::spawn_blocking(move || {
                let loaded = p
                    .register(&id)
                    .map_err(|e| ErrorChain(&e).to_string())
                    .and_then(|_| p.engine().preload_srs(&id).map_err(|e| ErrorChain(&e).to_string()));
                match loaded {
                    Ok((_, t)) => tracing::info!(circuit = %id, ms = t.as_millis() as u64, "parameters preloaded"),
                    Err(e) => tracing::error!(circuit = %id, "cannot preload the parameters: {e}"),
                }
            });
        }
        if config.memory.warm_hinted {
            let p = Arc::clone(&prover);
            tokio::task::spawn_blocking(move || {
                let warmed = p.engine().warm_hinted();
                if !warmed.is_empty() {
                    tracing::info!(circuits = ?warmed, "pool warming for the circuits the capacity hints know");
                }
            });
        }
        let jobs = jobs::Jobs::new(Arc::clone(&prover), config.jobs.clone());
        let service = Arc::new(service::Service {
            jobs: Arc::clone(&jobs),
            started: Instant::now(),
            gpus: Arc::new(stack.gpus.clone()),
            alerts: Arc::new(alerts::Alerts::shipped()),
        });
        let token = match &config.auth_token_file {
            Some(path) => {
                let t = std::fs::read_to_string(path)
                    .map_err(|e| ServerError::Config(format!("reading auth_token_file {}: {e}", path.display())))?;
                let t = t.trim().to_string();
                if t.is_empty() {
                    return Err(ServerError::Config(format!(
                        "auth_token_file {} is empty",
                        path.display()
                    )));
                }
                Some(Arc::<str>::from(t))
            }
            None => None,
        };
        let (stop, stopped) = watch::channel(false);
        let mut tasks = Vec::new();
        let (endpoint, socket, grpc) = listen::grpc(
            &config.listen,
            Arc::clone(&service),
            token.clone(),
            config.jobs.max_receiving,
            stopped.clone(),
        )
        .await?;
        tasks.push(grpc);
        tasks.push(tokio::spawn(sample_for_alerts(Arc::clone(&service), stopped.clone())));
        let http = match config.http_listen.trim() {
            "" => None,
            addr => {
                let page = crate::http::Page {
                    service: Arc::clone(&service),
                    token,
                    hosts: config.http_allowed_hosts.clone(),
                };
                let (bound, task) = listen::http(addr, page, stopped).await?;
                tasks.push(task);
                Some(bound)
            }
        };
        let http_page = http.map_or_else(|| "off".to_string(), |a| format!("http://{a}"));
        tracing::info!(grpc = %endpoint.uri(), http = %http_page, "pinprove daemon serving");
        Ok(Daemon {
            endpoint,
            socket,
            http,
            jobs,
            stop,
            tasks,
            grace: Duration::from_secs(config.jobs.shutdown_grace_secs),
        })
    }

    /// Where the gRPC service listens.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Where the HTTP status page listens.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http
    }

    /// The prover behind the service.
    pub fn prover(&self) -> &Arc<FilecoinProver> {
        self.jobs.prover()
    }

    /// Serves until `signal` completes, then shuts down.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<(), ServerError> {
        signal.await;
        self.shutdown().await
    }

    /// Stops taking work and cancels what has not reached the engine, lets
    /// running proofs finish within the grace period (then cancels what is
    /// left), stops the servers, and removes its socket and any temporary
    /// file it was writing. Returns within the grace period and a few
    /// seconds.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        tracing::info!(
            grace_s = self.grace.as_secs(),
            "shutting down: no new proofs; running ones may finish"
        );
        self.jobs.drain();
        if !self.jobs.wait_idle(self.grace).await {
            let left = self.jobs.active();
            tracing::warn!(jobs = left.len(), "the grace period is over; cancelling what is left");
            for j in &left {
                self.jobs.cancel(j);
            }
            let _ = self.jobs.wait_idle(Duration::from_secs(10)).await;
        }
        let _ = self.stop.send(true);
        for t in self.tasks {
            match tokio::time::timeout(Duration::from_secs(10), t).await {
                Ok(Ok(r)) => r?,
                Ok(Err(e)) => return Err(ServerError::Serve(Box::new(e))),
                Err(_) => tracing::warn!("a server did not stop within 10 s"),
            }
        }
        if let (Endpoint::Unix(p), Some(ours)) = (&self.endpoint, self.socket) {
            // Only the socket this process bound: another daemon may have
            // replaced it since.
            if listen::identity(p) == Some(ours) {
                let _ = std::fs::remove_file(p);
            }
        }
        pinprove_filecoin::params::remove_temporary_files();
        tracing::info!("pinprove daemon stopped");
        Ok(())
    }
}

/// Completes on SIGTERM or SIGINT.
pub async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
            }
        }
        Err(e) => {
            tracing::warn!("cannot watch for SIGTERM ({e}); only SIGINT stops the daemon");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Records the metrics the alert rules read every
/// [`alerts::SAMPLE_EVERY`], from the start until `stop`.
async fn sample_for_alerts(service: Arc<service::Service>, mut stop: watch::Receiver<bool>) -> Result<(), ServerError> {
    let mut every = tokio::time::interval(alerts::SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {
                let s = Arc::clone(&service);
                // The engine's status takes its locks: off the runtime.
                let _ = tokio::task::spawn_blocking(move || s.alerts.record(&metrics::metrics_text(&s.jobs))).await;
            }
            _ = async { let _ = stop.wait_for(|s| *s).await; } => return Ok(()),
        }
    }
}

mod listen {
    //! Listeners: the gRPC service on TCP or a unix socket, the HTTP page
    //! on TCP.

    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
    use std::path::Path;

    use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
    use tonic::service::interceptor::InterceptedService;
    use tonic::transport::Server;

    use super::*;
    use crate::intake;
    use crate::pb::proving_engine_server::ProvingEngineServer;
    use crate::service::Service;

    fn listen_error(what: &str) -> impl FnOnce(std::io::Error) -> ServerError + '_ {
        move |source| ServerError::Listen {
            what: what.to_string(),
            source,
        }
    }

    async fn stopped(mut rx: watch::Receiver<bool>) {
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Binds a unix socket at `path` that is never reachable with looser
    /// permissions than 0600: it is bound inside a fresh directory only its
    /// owner may enter, made 0600 there, then renamed into place (a rename
    /// keeps the bound socket).
    fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let private = dir.join(format!(".pinprove-bind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&private);
        std::fs::DirBuilder::new().mode(0o700).create(&private)?;
        let bound = (|| {
            let tmp = private.join("s");
            let listener = UnixListener::bind(&tmp)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&tmp, path)?;
            Ok(listener)
        })();
        let _ = std::fs::remove_dir_all(&private);
        bound
    }

    /// The device and inode of the file at `path` (not following a link).
    pub(super) fn identity(path: &Path) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }

    /// Makes room for a socket at `path`: nothing there, or a socket no
    /// daemon answers on any more (left by one that died), which is
    /// removed. A socket that answers belongs to a running daemon: starting
    /// a second one there is an error, not a takeover.
    fn clear_socket(path: &Path) -> Result<(), ServerError> {
        let Ok(m) = std::fs::symlink_metadata(path) else {
            return Ok(());
        };
        if !m.file_type().is_socket() {
            return Err(ServerError::Config(format!(
                "{} exists and is not a socket",
                path.display()
            )));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(ServerError::Config(format!(
                "another daemon is listening on {}; stop it first, or choose another socket",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(listen_error(&path.display().to_string()))
    }

    /// The gRPC server with the daemon's transport bounds: messages no
    /// larger than a method can carry, windows, streams per connection.
    fn server() -> Server {
        Server::builder()
            .initial_stream_window_size(intake::STREAM_WINDOW)
            .initial_connection_window_size(intake::CONNECTION_WINDOW)
            .max_concurrent_streams(intake::MAX_STREAMS_PER_CONNECTION)
            .http2_keepalive_interval(Some(Duration::from_secs(60)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)))
    }

    /// Binds `addr` and serves the gRPC service on it; returns the endpoint,
    /// the identity of the unix socket it bound (if one), and the task.
    #[allow(clippy::type_complexity)]
    pub(super) async fn grpc(
        addr: &str,
        service: Arc<Service>,
        token: Option<Arc<str>>,
        receiving: usize,
        stop: watch::Receiver<bool>,
    ) -> Result<(Endpoint, Option<(u64, u64)>, JoinHandle<Result<(), ServerError>>), ServerError> {
        // Each method's size is bounded by the intake (a message declaring
        // more is refused before it is read) and the codec; tonic's own
        // limit stays the protocol's.
        let svc = ProvingEngineServer::from_arc(service)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        // A unix socket is guarded by its mode (0600); TCP by the token,
        // when one is configured.
        let tcp = !addr.starts_with("unix://");
        let required = token.filter(|_| tcp);
        let check = move |req: tonic::Request<()>| {
            let Some(token) = &required else {
                return Ok(req);
            };
            let given = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match given {
                Some(t) if same(t.as_bytes(), token.as_bytes()) => Ok(req),
                Some(_) => Err(tonic::Status::unauthenticated("wrong bearer token")),
                None => Err(tonic::Status::unauthenticated(
                    "this daemon needs `authorization: Bearer <token>`",
                )),
            }
        };
        let svc = intake::Intake::new(InterceptedService::new(svc, check), receiving);
        if let Some(path) = addr.strip_prefix("unix://") {
            let path = PathBuf::from(path);
            clear_socket(&path)?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(listen_error(addr))?;
            }
            let listener = bind_private(&path).map_err(listen_error(addr))?;
            let ours = identity(&path);
            let incoming = UnixListenerStream::new(listener);
            let task = spawn_serving(server().add_service(svc), incoming, stop);
            return Ok((Endpoint::Unix(path), ours, task));
        }
        let listener = TcpListener::bind(addr).await.map_err(listen_error(addr))?;
        let bound = listener.local_addr().map_err(listen_error(addr))?;
        let task = spawn_serving(server().add_service(svc), TcpListenerStream::new(listener), stop);
        Ok((Endpoint::Tcp(bound), None, task))
    }

    /// Serves `router` on the connections of `incoming` (a Unix or a TCP
    /// listener's), no more of them at once than the intake allows, until
    /// `stop`.
    fn spawn_serving<IO, E>(
        router: tonic::transport::server::Router,
        incoming: impl tokio_stream::Stream<Item = Result<IO, E>> + Send + 'static,
        stop: watch::Receiver<bool>,
    ) -> JoinHandle<Result<(), ServerError>>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + tonic::transport::server::Connected + Unpin + Send + 'static,
        IO::ConnectInfo: Clone + Send + Sync + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        let incoming = intake::limit_connections(incoming);
        tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(incoming, stopped(stop))
                .await
                .map_err(|e| ServerError::Serve(Box::new(e)))
        })
    }

    /// Compares in time independent of where the inputs differ.
    fn same(a: &[u8], b: &[u8]) -> bool {
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Binds `addr` and serves the HTTP page on it.
    pub(super) async fn http(
        addr: &str,
        page: crate::http::Page,
        stop: watch::Receiver<bool>,
    ) -> Result<(SocketAddr, JoinHandle<Result<(), ServerError>>), ServerError> {
        let listener = TcpListener::bind(addr).await.map_err(listen_error(addr))?;
        let bound = listener.local_addr().map_err(listen_error(addr))?;
        let app = crate::http::router(page);
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped(stop))
                .await
                .map_err(|e| ServerError::Serve(Box::new(e)))
        });
        Ok((bound, task))
    }
}
