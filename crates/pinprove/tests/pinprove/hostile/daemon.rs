//! A `pinprove serve` child process and the good requests the tests send
//! it.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pinprove_engine::EngineConfig;
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache, ProofKind, ProofRequest};
use pinprove_mem::BudgetConfig;
use pinprove_server::{client, pb, wire};
use pinprove_stack::{BackendKind, Stack, StackConfig};

/// The bearer token of the daemons under test.
pub const TOKEN: &str = "hostile-suite-token";

/// How a daemon under test is configured.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Its own parameter cache, holding only the PoSt parameters (linked
    /// from the shared one), with generation on.
    pub own_parameters: bool,
    /// More `[jobs]` keys.
    pub jobs: &'static str,
}

/// A daemon under test.
pub struct Serve {
    child: Child,
    pub dir: PathBuf,
    grpc: String,
    http: SocketAddr,
    params: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The shared parameter cache (`FIL_PROOFS_PARAMETER_CACHE`), with the
/// 2 KiB PoSt parameters made when missing (seconds; once per machine).
fn shared_parameters() -> (PathBuf, Vec<PathBuf>) {
    let stack = Stack::build(&StackConfig {
        backend: BackendKind::Cpu,
        budget: BudgetConfig::Fixed(1 << 30),
        ..StackConfig::default()
    })
    .unwrap();
    let engine = stack.engine(EngineConfig::default()).unwrap();
    let prover = FilecoinProver::new(Arc::new(engine), ParamCache::from_env(), FilecoinOptions::default());
    let files = ["wpost-2k", "winning-2k"]
        .iter()
        .map(|id| prover.register(id).unwrap().expect("a parameter file"))
        .collect();
    (prover.params().dir().to_path_buf(), files)
}

impl Serve {
    /// A daemon on TCP, its grace periods short (one second for a client
    /// to come back, five to finish at shutdown).
    pub async fn start(name: &str, options: Options) -> Serve {
        let dir = temp_dir(name);
        let (shared, files) = shared_parameters();
        let params = if options.own_parameters {
            let own = dir.join("params");
            std::fs::create_dir_all(&own).unwrap();
            for f in files {
                for ext in ["params", "vk", "meta"] {
                    let from = f.with_extension(ext);
                    std::fs::hard_link(&from, own.join(from.file_name().unwrap()))
                        .or_else(|_| std::fs::copy(&from, own.join(from.file_name().unwrap())).map(|_| ()))
                        .unwrap();
                }
            }
            own
        } else {
            shared
        };
        std::fs::write(dir.join("token"), TOKEN).unwrap();
        let grpc = format!("127.0.0.1:{}", free_port());
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = format!(
            "listen = \"{grpc}\"\nhttp_listen = \"{http}\"\nauth_token_file = \"{token}\"\n\
             [memory]\nbudget = \"6GiB\"\nwarm_hinted = false\n\
             [gpu]\nbackend = \"cpu\"\n\
             [synthesis]\nworkers = 2\n\
             [filecoin]\nparameter_cache = \"{params}\"\ngenerate_parameters = {generate}\n\
             [hints]\ndir = \"{hints}\"\n\
             [jobs]\ndisconnect_grace_secs = 1\nshutdown_grace_secs = 5\n{jobs}\n",
            token = dir.join("token").display(),
            params = params.display(),
            generate = options.own_parameters,
            hints = dir.join("hints").display(),
            jobs = options.jobs,
        );
        std::fs::write(dir.join("pinprove.toml"), config).unwrap();
        let child = spawn(&dir);
        let serve = Serve {
            child,
            dir,
            grpc,
            http,
            params,
        };
        serve.wait_ready().await;
        serve
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(mut c) = client::connect(&self.grpc, Some(TOKEN)).await
                && c.get_status(pb::GetStatusRequest {}).await.is_ok()
            {
                return;
            }
            assert!(Instant::now() < deadline, "the daemon did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A client with the token.
    pub async fn client(&self) -> client::Client {
        client::connect(&self.grpc, Some(TOKEN)).await.unwrap()
    }

    /// A raw channel (for requests no generated client would send).
    pub async fn channel(&self) -> super::raw::Authorized {
        super::raw::connect(&client::uri(&self.grpc), TOKEN).await
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http
    }

    pub fn params_dir(&self) -> &Path {
        &self.params
    }

    fn proc_status(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb << 10
    }

    /// The daemon's peak resident memory so far.
    pub fn peak_rss(&self) -> u64 {
        self.proc_status("VmHWM:")
    }

    /// The daemon's resident memory now.
    pub fn rss(&self) -> u64 {
        self.proc_status("VmRSS:")
    }

    /// What must be back where it was once the daemon is idle: jobs per
    /// kind, request bytes, the budget held by work (reserved, less the
    /// idle pool buffers kept for reuse), pool buffers checked out, queued
    /// partitions.
    pub async fn idle_values(&self, c: &mut client::Client) -> Vec<(String, String)> {
        let text = c
            .get_metrics(pb::GetMetricsRequest {})
            .await
            .unwrap()
            .into_inner()
            .prometheus_text;
        let values: Vec<(&str, &str)> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' '))
            .collect();
        let number = |name: &str| {
            values
                .iter()
                .find(|(k, _)| *k == name)
                .map_or(0.0, |(_, v)| v.parse::<f64>().unwrap())
        };
        let mut idle: Vec<(String, String)> = values
            .iter()
            .filter(|(k, _)| {
                [
                    "pinprove_jobs_active",
                    "pinprove_request_bytes",
                    "pinprove_pool_checked_out_bytes",
                    "pinprove_queue_pending",
                    "pinprove_queue_in_progress",
                ]
                .iter()
                .any(|name| k.split('{').next() == Some(name))
            })
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let held = number("pinprove_budget_used_bytes") - number("pinprove_pool_idle_bytes");
        idle.push(("budget held by work".into(), held.to_string()));
        idle
    }

    /// The idle pool buffers the daemon keeps for reuse (bytes).
    pub async fn pool_idle(&self, c: &mut client::Client) -> u64 {
        let text = c
            .get_metrics(pb::GetMetricsRequest {})
            .await
            .unwrap()
            .into_inner()
            .prometheus_text;
        text.lines()
            .find_map(|l| l.strip_prefix("pinprove_pool_idle_bytes "))
            .map_or(0, |v| v.parse::<f64>().unwrap() as u64)
    }

    pub fn signal_term(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Waits for the daemon to exit, at most `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the daemon did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then the daemon exits cleanly within `within`.
    pub fn stop(mut self, within: Duration) {
        self.signal_term();
        let status = self.wait_exit(within);
        assert!(status.success(), "{status:?}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_unless_failing(&self.dir);
    }
}

/// Removes a test daemon's directory, unless the test is failing: then its
/// log stays for whoever reads the failure.
fn remove_unless_failing(dir: &Path) {
    if !std::thread::panicking() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Starts `pinprove serve` with the configuration in `dir`, its log in
/// `dir/serve.log` (a pipe nobody read would stop it once full).
fn spawn(dir: &Path) -> Child {
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    Command::new(env!("CARGO_BIN_EXE_pinprove"))
        .arg("serve")
        .arg("--config")
        .arg(dir.join("pinprove.toml"))
        .env("PINPROVE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("pinprove serve starts")
}

/// A daemon on a unix socket (no token: the socket's mode guards it).
pub struct Unix {
    child: Child,
    path: PathBuf,
    dir: PathBuf,
}

impl Unix {
    /// Starts a daemon serving `socket` and waits until it answers.
    pub async fn start(name: &str, socket: &Path) -> Unix {
        let (child, log) = Unix::spawn(name, socket);
        let unix = Unix {
            child,
            path: socket.to_path_buf(),
            dir: log
                .parent()
                .expect("the log lies in the daemon's directory")
                .to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while unix.client().await.is_err() {
            assert!(Instant::now() < deadline, "the daemon did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        unix
    }

    /// Starts a daemon serving `socket`, without waiting; returns it and
    /// its log file.
    pub fn spawn(name: &str, socket: &Path) -> (Child, PathBuf) {
        let dir = temp_dir(name);
        let config = format!(
            "listen = \"unix://{}\"\nhttp_listen = \"\"\n[gpu]\nbackend = \"cpu\"\n[hints]\ndir = \"{}\"\n\
             [jobs]\nshutdown_grace_secs = 5\n",
            socket.display(),
            dir.join("hints").display()
        );
        std::fs::write(dir.join("pinprove.toml"), config).unwrap();
        (spawn(&dir), dir.join("serve.log"))
    }

    pub async fn client(&self) -> Result<pb::GetStatusResponse, String> {
        let mut c = client::connect(&format!("unix://{}", self.path.display()), None)
            .await
            .map_err(|e| e.to_string())?;
        c.get_status(pb::GetStatusRequest {})
            .await
            .map(|r| r.into_inner())
            .map_err(|e| e.to_string())
    }

    /// SIGTERM, then a clean exit.
    pub fn stop(mut self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status:?}");
                return;
            }
            assert!(Instant::now() < deadline, "the daemon did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Unix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_unless_failing(&self.dir);
    }
}

/// Good requests of a sealed 2 KiB sector, in their wire form.
#[derive(Clone)]
pub struct Good {
    /// Partition 0 of a WindowPoSt (two sectors).
    pub window: pb::SubmitProofRequest,
    pub winning: pb::SubmitProofRequest,
    /// Another WinningPoSt (other randomness).
    pub winning_again: pb::SubmitProofRequest,
    pub porep: pb::SubmitProofRequest,
    winning_randomness: [u8; 32],
    sector: Arc<SampleSector>,
}

impl Good {
    /// Whether `proof` is `winning`'s, by filecoin-proofs' verifier.
    pub fn verify_winning(&self, proof: &[u8]) -> bool {
        self.sector.verify_winning_post(self.winning_randomness, proof).unwrap()
    }
}

fn wire_of(id: &str, req: ProofRequest) -> pb::SubmitProofRequest {
    wire::submit_request(id, req)
}

/// Seals a sample sector under `dir` and makes its requests.
pub fn good_requests(dir: &Path) -> Good {
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 7, 1000, 21).unwrap();
    let r = sector.randomness();
    let window = sector.window_post_requests(&[7, 9], r).unwrap().remove(0);
    let winning_randomness = sector.randomness();
    let winning = sector.winning_post_request(winning_randomness).unwrap();
    let r3 = sector.randomness();
    let winning_again = sector.winning_post_request(r3).unwrap();
    assert_eq!(winning.kind, ProofKind::WinningPoSt);
    Good {
        window: wire_of("wdpost-1000-0-[0]", window),
        winning: wire_of("winpost-1000-01", winning),
        winning_again: wire_of("winpost-1000-02", winning_again),
        porep: wire_of("porep-1000-7", sector.porep_request()),
        winning_randomness,
        sector: Arc::new(sector),
    }
}
