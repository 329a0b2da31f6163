//! The daemon's configuration: a TOML file in which every key has a
//! default and an unknown key is an error naming it.
//!
//! ```toml
//! listen = "127.0.0.1:9820"          # or "unix:///run/pinprove/pinprove.sock"
//! http_listen = "127.0.0.1:9821"     # status, metrics, health; "" turns it off
//! http_allowed_hosts = ["prover1"]   # Host names the page answers besides IPs and localhost
//! auth_token_file = "/etc/pinprove/token"   # bearer token for TCP gRPC, /status and /metrics
//!
//! [memory]
//! budget = "auto"                    # or a size: "96GiB"
//! urgent_reserve = "auto"            # kept for WindowPoSt/WinningPoSt; auto: min(2 GiB, budget/16)
//! warm_partitions = 3                # buffers prepared per preloaded circuit; default: what the budget admits
//! warm_hinted = true                 # at start, also for every circuit the capacity hints know
//! pinning = "register"               # how pool buffers are page-locked: register, register-whole or host-alloc
//! planner = false                    # the planner's rules for idle parameters and recordings (off until GPU-checked)
//!
//! [gpu]
//! backend = "auto"                   # auto, cpu, native, supraseal
//! devices = "all"                    # or ordinals: "0,1"
//! workers_per_device = 2
//! queue_depth = 2                    # pieces of proofs queued on a GPU at once; 1 lets WinningPoSt in sooner
//! partitions_sharing_bases = 1       # partitions whose MSMs read bases streamed from host memory together
//! memory_limit = "22GiB"             # the most pinprove takes of each GPU; default: what it has free
//!
//! [synthesis]
//! workers = 16                       # default: one per CPU
//! max_concurrent = 8                 # default: as many as the memory budget admits
//! precompiled = true                 # record circuits' R1CS, then synthesize witnesses only
//!
//! [filecoin]
//! parameter_cache = "/var/tmp/filecoin-proof-parameters"
//! preload = ["porep-32g", "wpost-32g"]
//! verify = true
//! generate_parameters = false        # make missing test-size parameters (minutes of CPU)
//!
//! [hints]
//! dir = "/var/cache/pinprove/hints"  # capacity hints, and circuit recordings when precompiled
//!
//! [jobs]
//! keep_results = 1000
//! keep_results_secs = 3600
//! keep_results_bytes = "64MiB"
//! disconnect_grace_secs = 30
//! shutdown_grace_secs = 600
//! max_active = { porep = 64, snap = 64, wpost = 64, winning = 16 }
//! max_request_bytes = "auto"         # requests held, decoded; auto: RAM/8, at most 16 GiB
//! max_preparing = 4                  # requests decoded at once
//! max_receiving = 4                  # proof requests received at once
//!
//! [log]
//! level = "info"
//! json = false
//! ```

use std::path::{Path, PathBuf};

use pinprove_filecoin::{PerKind, ProofKind};
use pinprove_mem::BudgetConfig;
use pinprove_stack::{BackendKind, DeviceSelection};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ServerError;

/// The whole configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the gRPC service listens: `host:port`, or `unix:///path`
    /// (created with mode 0600).
    pub listen: String,
    /// Where the HTTP status page listens (`host:port`); empty: nowhere.
    pub http_listen: String,
    /// Host names the status page answers to besides IP addresses and
    /// `localhost` (a name in any other `Host` header is refused, so that
    /// no web page can reach the page through DNS rebinding).
    pub http_allowed_hosts: Vec<String>,
    /// A file holding the bearer token TCP clients must send
    /// (`authorization: Bearer <token>`); none when empty.
    pub auth_token_file: Option<PathBuf>,
    /// Memory.
    pub memory: MemoryConfig,
    /// GPUs.
    pub gpu: GpuConfig,
    /// Synthesis.
    pub synthesis: SynthesisConfig,
    /// Filecoin.
    pub filecoin: FilecoinConfig,
    /// Capacity hints.
    pub hints: HintsConfig,
    /// Jobs and results.
    pub jobs: JobsConfig,
    /// Logging.
    pub log: LogConfig,
}

/// `[memory]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// The memory budget: "auto" (usable memory less a margin) or a size.
    #[serde(serialize_with = "display", deserialize_with = "parsed")]
    pub budget: BudgetConfig,
    /// Bytes of the budget only WindowPoSt and WinningPoSt (High and
    /// Critical priority) may use, so that they are admitted at once while
    /// sealing work holds the rest: "auto" (the smaller of 2 GiB and a
    /// sixteenth of the budget) or a size ("0" turns it off).
    #[serde(serialize_with = "display", deserialize_with = "parsed")]
    pub urgent_reserve: ReserveSize,
    /// For each preloaded circuit, the partitions whose pinned buffers are
    /// prepared before proofs arrive (0: none; default: as many as the
    /// budget admits at once, at most the synthesis workers).
    pub warm_partitions: Option<usize>,
    /// At start, also prepare the pinned buffers of every circuit the
    /// persisted capacity hints know (the circuits this daemon proved
    /// before), as for a preloaded one: a restarted daemon does not pin on
    /// live work. Out of spare budget only (default: on).
    pub warm_hinted: bool,
    /// How pinned pool buffers are page-locked: "host-alloc"
    /// (`cudaHostAlloc`) or "register" (huge-page memory faulted in first,
    /// then `cudaHostRegister`: stalls other CUDA calls for less time), or
    /// "register-whole" (the same, each buffer faulted in by one call
    /// instead of 32 MiB pieces: slower on the H200 host, for comparison).
    #[serde(serialize_with = "display", deserialize_with = "parsed")]
    pub pinning: pinprove_mem::PinMethod,
    /// Keep and evict as the planner does (`EngineConfig::planner`,
    /// `Policy::planned`): an urgent kind's parameters kept for a burst
    /// window after its latest job instead of until idle as long as their
    /// load took, Critical kinds' kept, and recordings evicted after
    /// parameters. Off until a GPU day confirms it (DEVELOPERS.md, "GPU
    /// defaults").
    pub planner: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            budget: BudgetConfig::default(),
            urgent_reserve: ReserveSize::default(),
            warm_partitions: None,
            warm_hinted: true,
            pinning: pinprove_mem::PinMethod::default(),
            planner: false,
        }
    }
}

/// A size that may be left to the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReserveSize {
    /// The engine's default.
    #[default]
    Auto,
    /// This many bytes.
    Bytes(u64),
}

impl ReserveSize {
    /// The bytes, `None` for the engine's default.
    pub fn bytes(self) -> Option<u64> {
        match self {
            ReserveSize::Auto => None,
            ReserveSize::Bytes(n) => Some(n),
        }
    }
}

impl std::str::FromStr for ReserveSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(ReserveSize::Auto);
        }
        pinprove_mem::parse_bytes(s).map(ReserveSize::Bytes)
    }
}

impl std::fmt::Display for ReserveSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReserveSize::Auto => f.write_str("auto"),
            ReserveSize::Bytes(n) => write!(f, "{n}"),
        }
    }
}

/// `[gpu]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    /// The backend; `auto` is the native GPU backend where a GPU build finds
    /// GPUs, else the CPU backend.
    pub backend: BackendKind,
    /// "all", or CUDA ordinals ("0,1").
    #[serde(serialize_with = "display", deserialize_with = "parsed")]
    pub devices: DeviceSelection,
    /// Workers per GPU; the backend's choice when absent.
    pub workers_per_device: Option<usize>,
    /// Pieces of proofs queued on one GPU at once (native backend; default
    /// 2): with 2 the next piece's upload overlaps the running one's work,
    /// with 1 an urgent proof waits behind one piece at most.
    pub queue_depth: Option<usize>,
    /// Partitions of one circuit whose l, a and b MSMs read bases streamed
    /// from host memory together (native backend, when the bases do not
    /// fit the GPU; default 1, off, until measured): the bases cross PCIe once for all of them,
    /// each partition waiting for the others' h. 1: each streams its own.
    pub partitions_sharing_bases: Option<usize>,
    /// The most memory pinprove takes of each GPU ("24GiB"; default: what
    /// the GPU has free at start). Where the SRS bases and circuit matrices
    /// live, and how many proofs share the GPU, are planned within it:
    /// leave room for other users of the card, or reproduce a smaller
    /// card's capacity.
    #[serde(
        serialize_with = "display_option",
        deserialize_with = "parsed_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_limit: Option<ByteSize>,
}

/// `[synthesis]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SynthesisConfig {
    /// Synthesis threads (default: one per CPU).
    pub workers: Option<usize>,
    /// At most this many syntheses at once (default: as the budget admits).
    pub max_concurrent: Option<usize>,
    /// Pre-compiled circuits (default on): each circuit type's R1CS is
    /// recorded after its first proof (kept in `[hints] dir`, counted in
    /// the memory budget) and later proofs synthesize only the witness.
    /// Every Filecoin kind's witness is then made without gadgets, on every
    /// core. With the native backend a, b and c are computed on the GPU
    /// from matrices kept in device memory where they fit (only the witness
    /// is uploaded), otherwise on the host; with the CPU backend on the
    /// CPU. Circuits whose structure depends on the witness stay classic by
    /// themselves; `false` keeps every circuit classic.
    pub precompiled: bool,
}

impl Default for SynthesisConfig {
    fn default() -> Self {
        // On since a 32 GiB PoRep C2 streamed at 21.1 s per proof with it on
        // the H200, against 57 s with witness-only synthesis through the
        // gadgets and 321 s classic (docs/benchmarks.md).
        SynthesisConfig {
            workers: None,
            max_concurrent: None,
            precompiled: true,
        }
    }
}

/// `[filecoin]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilecoinConfig {
    /// The Filecoin parameter cache (default: `FIL_PROOFS_PARAMETER_CACHE`,
    /// else `/var/tmp/filecoin-proof-parameters`).
    pub parameter_cache: PathBuf,
    /// Circuits whose parameters are loaded at start ("porep-32g", …).
    pub preload: Vec<String>,
    /// Verify every proof before returning it.
    pub verify: bool,
    /// Make missing parameters of test sector sizes (2 KiB to 512 MiB) on
    /// first use: minutes of every core and GBs of disk that any client
    /// could start, so off unless asked for (the demo asks).
    pub generate_parameters: bool,
}

/// `[hints]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HintsConfig {
    /// Where capacity hints persist.
    pub dir: PathBuf,
}

/// `[jobs]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    /// Finished jobs' results kept for retries and late waiters.
    pub keep_results: usize,
    /// … for at most this long.
    pub keep_results_secs: u64,
    /// … and in at most this many bytes (proofs and ids).
    #[serde(serialize_with = "display", deserialize_with = "parsed")]
    pub keep_results_bytes: ByteSize,
    /// A `Prove` whose client went away cancels its job after this long,
    /// unless a retry of the same request attached to it meanwhile.
    pub disconnect_grace_secs: u64,
    /// On SIGTERM, running proofs get this long to finish.
    pub shutdown_grace_secs: u64,
    /// Jobs of each kind accepted and not yet finished; a request beyond
    /// is answered `RESOURCE_EXHAUSTED`. Each kind has its own count, so a
    /// flood of one cannot lock the others out.
    pub max_active: ActiveLimits,
    /// Bytes of requests accepted and not yet finished (their payloads,
    /// decoded, and the circuits built from them: counted as
    /// [`REQUEST_MEMORY_FACTOR`](crate::REQUEST_MEMORY_FACTOR) times their
    /// wire size): "auto" (an eighth of the host's memory, at most 16 GiB)
    /// or a size. PoRep and SnapDeals may take three quarters of it; the
    /// rest is WindowPoSt's and WinningPoSt's.
    #[serde(serialize_with = "display", deserialize_with = "parsed")]
    pub max_request_bytes: ReserveSize,
    /// Requests decoded and checked at once (CPU work beside synthesis);
    /// the others wait their turn.
    pub max_preparing: usize,
    /// Proof requests (`Prove`, `SubmitProof`) whose bytes are received at
    /// once; the others wait, sending no more than their flow-control
    /// window, before their bytes are read.
    pub max_receiving: usize,
}

/// `[jobs] max_active`: unfinished jobs per kind, written as a table by
/// kind name (`{ porep = 64, snap = 64, wpost = 64, winning = 16 }`); a
/// kind left out keeps its default, an unknown name is an error.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveLimits(pub PerKind<usize>);

impl Default for ActiveLimits {
    /// Each Curio node keeps at most `MaxPending` (10) proofs in flight over
    /// every kind, and a few nodes may share a daemon: several times that
    /// per kind.
    fn default() -> Self {
        ActiveLimits(PerKind::from_fn(|kind| match kind {
            ProofKind::PoRep | ProofKind::SnapDeals | ProofKind::WindowPoSt => 64,
            ProofKind::WinningPoSt => 16,
        }))
    }
}

impl ActiveLimits {
    /// The limit of `kind`.
    pub fn of(&self, kind: ProofKind) -> usize {
        self.0[kind]
    }
}

impl Serialize for ActiveLimits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(ProofKind::COUNT))?;
        for (kind, n) in self.0.iter() {
            map.serialize_entry(kind.name(), n)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ActiveLimits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let given = std::collections::BTreeMap::<String, usize>::deserialize(d)?;
        let mut limits = ActiveLimits::default();
        for (name, n) in given {
            let kind = ProofKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
                let names: Vec<_> = ProofKind::ALL.iter().map(|k| k.name()).collect();
                serde::de::Error::custom(format!(
                    "unknown proof kind `{name}`, expected one of {}",
                    names.join(", ")
                ))
            })?;
            limits.0[kind] = n;
        }
        Ok(limits)
    }
}

/// A number of bytes, written as a size ("64MiB") in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        pinprove_mem::parse_bytes(s).map(ByteSize)
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// `[log]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter ("info", "pinprove_engine=debug,info"); the
    /// `PINPROVE_LOG` environment variable overrides it.
    pub level: String,
    /// JSON lines instead of text.
    pub json: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:9820".into(),
            http_listen: "127.0.0.1:9821".into(),
            http_allowed_hosts: Vec::new(),
            auth_token_file: None,
            memory: MemoryConfig::default(),
            gpu: GpuConfig::default(),
            synthesis: SynthesisConfig::default(),
            filecoin: FilecoinConfig::default(),
            hints: HintsConfig::default(),
            jobs: JobsConfig::default(),
            log: LogConfig::default(),
        }
    }
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            backend: BackendKind::Auto,
            devices: DeviceSelection::All,
            workers_per_device: None,
            queue_depth: None,
            partitions_sharing_bases: None,
            memory_limit: None,
        }
    }
}

impl Default for FilecoinConfig {
    fn default() -> Self {
        FilecoinConfig {
            parameter_cache: pinprove_filecoin::ParamCache::from_env().dir().to_path_buf(),
            preload: Vec::new(),
            verify: true,
            generate_parameters: false,
        }
    }
}

impl Default for HintsConfig {
    fn default() -> Self {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        HintsConfig {
            dir: base.join("pinprove").join("hints"),
        }
    }
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            keep_results: 1000,
            keep_results_secs: 3600,
            keep_results_bytes: ByteSize(64 << 20),
            disconnect_grace_secs: 30,
            shutdown_grace_secs: 600,
            max_active: ActiveLimits::default(),
            max_request_bytes: ReserveSize::Auto,
            max_preparing: 4,
            max_receiving: 4,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            json: false,
        }
    }
}

impl Config {
    /// The configuration in `text` (TOML).
    pub fn parse(text: &str) -> Result<Config, ServerError> {
        let c: Config = toml::from_str(text).map_err(|e| ServerError::Config(e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    /// The configuration in the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServerError::Config(format!("reading {}: {e}", path.display())))?;
        Config::parse(&text).map_err(|e| match e {
            ServerError::Config(m) => ServerError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// The effective configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot print the configuration: {e}\n"))
    }

    fn check(&self) -> Result<(), ServerError> {
        let bad = |m: String| Err(ServerError::Config(m));
        if self.listen.trim().is_empty() {
            return bad("listen is empty".into());
        }
        let limit = pinprove_engine::MAX_THREADS;
        for (what, n) in [
            ("gpu.workers_per_device", self.gpu.workers_per_device),
            ("gpu.queue_depth", self.gpu.queue_depth),
            ("gpu.partitions_sharing_bases", self.gpu.partitions_sharing_bases),
            ("synthesis.workers", self.synthesis.workers),
            ("synthesis.max_concurrent", self.synthesis.max_concurrent),
        ] {
            match n {
                Some(0) => return bad(format!("{what} must be at least 1")),
                Some(n) if n > limit => return bad(format!("{what} is {n}, more than {limit}")),
                _ => {}
            }
        }
        let active = self
            .jobs
            .max_active
            .0
            .iter()
            .map(|(kind, &n)| (format!("jobs.max_active.{kind}"), n));
        let counts = [
            ("jobs.max_preparing".to_string(), self.jobs.max_preparing),
            ("jobs.max_receiving".to_string(), self.jobs.max_receiving),
        ];
        for (what, n) in counts.into_iter().chain(active) {
            if n == 0 {
                return bad(format!("{what} must be at least 1"));
            }
            if n > 1 << 20 {
                return bad(format!("{what} is {n}, more than {}", 1 << 20));
            }
        }
        if let Some(l) = self.gpu.memory_limit
            && l.0 < 1 << 30
        {
            return bad(format!(
                "gpu.memory_limit is {} bytes; a GPU pinprove proves on needs at least 1 GiB",
                l.0
            ));
        }
        for id in &self.filecoin.preload {
            if let Err(e) = pinprove_filecoin::parse_circuit_id(id) {
                return bad(format!("filecoin.preload: {e}"));
            }
        }
        Ok(())
    }
}

fn display<T: std::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

fn display_option<T: std::fmt::Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

fn parsed_option<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
where
    T: std::str::FromStr<Err = String>,
    D: Deserializer<'de>,
{
    parsed(d).map(Some)
}

fn parsed<'de, T, D>(d: D) -> Result<T, D::Error>
where
    T: std::str::FromStr<Err = String>,
    D: Deserializer<'de>,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_a_default() {
        let c = Config::parse("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.listen, "127.0.0.1:9820");
        assert!(c.filecoin.verify);
        assert!(c.memory.warm_hinted, "a restarted daemon warms what it proved before");
        assert!(
            !Config::parse("[memory]\nwarm_hinted = false")
                .unwrap()
                .memory
                .warm_hinted
        );
        // The planner's rules are off until a GPU day confirms them.
        assert!(!c.memory.planner);
        assert!(Config::parse("[memory]\nplanner = true").unwrap().memory.planner);
        // What --print-config prints reads back the same.
        assert_eq!(Config::parse(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let err = Config::parse("listen = \"127.0.0.1:1\"\nlisten_addr = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("listen_addr"), "{err}");
        let err = Config::parse("[gpu]\nordinals = [0]\n").unwrap_err();
        assert!(err.to_string().contains("ordinals"), "{err}");
    }

    #[test]
    fn values_are_checked() {
        let c = Config::parse("[memory]\nbudget = \"96GiB\"\n[gpu]\ndevices = \"0,1\"\nbackend = \"cpu\"\n").unwrap();
        assert_eq!(c.memory.budget, BudgetConfig::Fixed(96 << 30));
        assert_eq!(c.memory.urgent_reserve, ReserveSize::Auto);
        let r = Config::parse("[memory]\nurgent_reserve = \"4GiB\"\n").unwrap();
        assert_eq!(r.memory.urgent_reserve, ReserveSize::Bytes(4 << 30));
        assert_eq!(Config::parse(&r.to_toml()).unwrap(), r);
        assert!(Config::parse("[memory]\nurgent_reserve = \"much\"\n").is_err());
        assert_eq!(c.gpu.devices, DeviceSelection::Ordinals(vec![0, 1]));
        assert_eq!(c.gpu.backend, BackendKind::Cpu);
        assert!(c.synthesis.precompiled, "on unless turned off");
        let p = Config::parse("[synthesis]\nprecompiled = false\n").unwrap();
        assert!(!p.synthesis.precompiled);
        assert_eq!(Config::parse(&p.to_toml()).unwrap(), p);
        for bad in [
            "[memory]\nbudget = \"lots\"",
            "[gpu]\nbackend = \"tpu\"",
            "[synthesis]\nworkers = 0",
            "[synthesis]\nworkers = 100000",
            "[synthesis]\nprecompiled = \"yes\"",
            "[filecoin]\npreload = [\"porep-3g\"]",
            "listen = \"\"",
        ] {
            assert!(Config::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_host_examples_read_back_each_for_the_gpu_backend() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/examples");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let c = Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(c.gpu.backend, BackendKind::Native, "{}", path.display());
            assert!(
                c.filecoin.preload.iter().any(|p| p == "porep-32g"),
                "{}",
                path.display()
            );
            assert!(
                c.filecoin.preload.iter().any(|p| p == "winning-32g"),
                "{}",
                path.display()
            );
            read += 1;
        }
        assert_eq!(read, 3, "one example per class of host");
    }

    #[test]
    fn the_example_in_deploy_reads_back() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/pinprove.toml");
        let c = Config::load(&file).unwrap();
        assert_eq!(c.listen, "unix:///run/pinprove/pinprove.sock");
        assert_eq!(c.filecoin.preload.len(), 3);
        assert_eq!(c.jobs, JobsConfig::default());
    }
}
