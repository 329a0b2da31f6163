//! The composition root: one way to assemble a proving stack from the
//! engine and the backends beside it (the engine itself knows only the
//! [`Backend`] trait and the [`GpuTelemetry`] it is handed).
//!
//! From one [`StackConfig`]: the memory budget, the pool with the allocator
//! the backends want (CUDA pinned memory for GPU backends), and one
//! [`Device`] per selected GPU — or the CPU — with its backend. The binary's
//! commands and the daemon all build what they prove with through here;
//! [`pool`] and [`backend`] are the pieces, for benchmarks that compare
//! kinds of memory or backends side by side.
//!
//! ```
//! use pinprove_stack::{BackendKind, Stack, StackConfig};
//! use pinprove_mem::BudgetConfig;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let stack = Stack::build(&StackConfig {
//!     backend: BackendKind::Cpu,
//!     budget: BudgetConfig::Fixed(1 << 30),
//!     ..StackConfig::default()
//! })?;
//! assert_eq!(stack.devices.len(), 1);
//! let engine = stack.engine(Default::default())?;
//! # drop(engine);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use pinprove_groth16::{Backend, CpuBackend, ProveError};
use pinprove_mem::sync::Recover;
use pinprove_mem::{BudgetConfig, HeapAllocator, HostAllocator, MemoryBudget, PinMethod, PinnedPool, PoolConfig};
use serde::{Deserialize, Serialize};

use pinprove_engine::telemetry::GpuTelemetry;
use pinprove_engine::{Device, DeviceId, Engine, EngineConfig, EngineError, GpuReading};

/// Which prover runs on the devices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BackendKind {
    /// The best one available: `native` on every usable GPU of a GPU build,
    /// else `cpu`.
    #[default]
    Auto,
    /// pinprove's CPU backend.
    Cpu,
    /// pinprove's own GPU backend (a GPU build).
    Native,
    /// Supranational's supraseal-c2 on the GPU (a GPU build; the reference
    /// Filecoin uses).
    Supraseal,
}

impl BackendKind {
    /// Every kind, as written in configs and on the command line.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Auto,
        BackendKind::Cpu,
        BackendKind::Native,
        BackendKind::Supraseal,
    ];

    /// The name in configs, on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Native => "native",
            BackendKind::Supraseal => "supraseal",
        }
    }

    /// Whether it runs on a GPU.
    pub fn is_gpu(self) -> bool {
        matches!(self, BackendKind::Native | BackendKind::Supraseal)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown backend {s:?} (auto, cpu, native or supraseal)"))
    }
}

/// Which GPUs to prove on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceSelection {
    /// Every GPU the machine has.
    #[default]
    All,
    /// These CUDA ordinals.
    Ordinals(Vec<usize>),
}

impl FromStr for DeviceSelection {
    type Err = String;

    /// "all", or ordinals separated by commas ("0,2").
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("all") {
            return Ok(DeviceSelection::All);
        }
        let mut v = Vec::new();
        for part in s.split(',') {
            let n: usize = part
                .trim()
                .parse()
                .map_err(|_| format!("not a GPU ordinal: {part:?} (\"all\" or a list such as 0,1)"))?;
            if !v.contains(&n) {
                v.push(n);
            }
        }
        Ok(DeviceSelection::Ordinals(v))
    }
}

impl fmt::Display for DeviceSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelection::All => f.write_str("all"),
            DeviceSelection::Ordinals(v) => {
                let s: Vec<String> = v.iter().map(usize::to_string).collect();
                f.write_str(&s.join(","))
            }
        }
    }
}

/// What the pool's buffers are made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PoolMemory {
    /// CUDA pinned memory when a GPU build finds a usable driver, else
    /// page-aligned heap memory (said once in the log).
    #[default]
    Auto,
    /// CUDA pinned memory, or an error.
    Pinned,
    /// Page-aligned heap memory.
    Heap,
}

/// Where the native backend keeps MSM bases, as configured (the GPU build
/// maps it onto the backend's own setting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SrsPlacement {
    /// In device memory, uploaded once per SRS, when the device memory
    /// plan keeps them there (streamed otherwise).
    #[default]
    Device,
    /// Streamed from pinned host memory for every MSM.
    Host,
}

/// Settings of the native GPU backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeOptions {
    /// Where MSM bases live.
    pub srs_placement: SrsPlacement,
    /// Pieces of proofs queued on one GPU at once (see
    /// `pinprove_cuda::NativeConfig::queue_depth`).
    pub queue_depth: usize,
    /// Threads preparing scalars and adding up results (0: half the CPUs).
    pub prep_threads: usize,
    /// Workers the engine runs per GPU.
    pub workers_per_device: usize,
    /// The most device memory pinprove takes of each GPU (`None`: what it
    /// has free); see `pinprove_cuda::NativeConfig::memory_limit`.
    pub memory_limit: Option<u64>,
    /// Partitions whose MSMs share streamed bases (see
    /// `pinprove_cuda::NativeConfig::partitions_sharing_bases`).
    pub partitions_sharing_bases: usize,
    /// The kernel that sums full-width scalars (see
    /// `pinprove_cuda::NativeConfig::msm_kernel`): sppark's until a passing
    /// `scripts/gpu-check` line runs pinprove's (DEVELOPERS.md, "GPU
    /// defaults"); the daemon's configuration does not offer it yet.
    pub msm_kernel: pinprove_cuda::MsmKernelKind,
}

impl Default for NativeOptions {
    /// The native backend's own defaults (`pinprove_cuda::NativeConfig`'s,
    /// the one place they are written).
    fn default() -> Self {
        NativeOptions::of(&pinprove_cuda::NativeConfig::default())
    }
}

impl NativeOptions {
    /// The options a backend configuration stands for.
    fn of(c: &pinprove_cuda::NativeConfig) -> Self {
        NativeOptions {
            srs_placement: match c.srs_placement {
                pinprove_cuda::SrsPlacement::Device => SrsPlacement::Device,
                pinprove_cuda::SrsPlacement::Host => SrsPlacement::Host,
            },
            queue_depth: c.queue_depth,
            prep_threads: c.prep_threads,
            workers_per_device: c.workers_per_device,
            memory_limit: c.memory_limit,
            partitions_sharing_bases: c.partitions_sharing_bases,
            msm_kernel: c.msm_kernel,
        }
    }

    /// The backend configuration of GPU `ordinal` with these options.
    fn config(&self, ordinal: usize) -> pinprove_cuda::NativeConfig {
        pinprove_cuda::NativeConfig {
            srs_placement: match self.srs_placement {
                SrsPlacement::Device => pinprove_cuda::SrsPlacement::Device,
                SrsPlacement::Host => pinprove_cuda::SrsPlacement::Host,
            },
            workers_per_device: self.workers_per_device,
            device: ordinal,
            queue_depth: self.queue_depth,
            memory_limit: self.memory_limit,
            prep_threads: self.prep_threads,
            partitions_sharing_bases: self.partitions_sharing_bases,
            msm_kernel: self.msm_kernel,
        }
    }

    /// The settings as one line of `name=value` words
    /// (`pinprove_cuda::NativeConfig::settings`): what `scripts/gpu-check`
    /// records beside its figures, and what a test compares the defaults
    /// with (a default that changes what runs on the GPU lands only with a
    /// passing check of it).
    pub fn settings(&self) -> String {
        self.config(0).settings()
    }
}

/// Everything a proving stack is built from.
#[derive(Clone, Debug, Default)]
pub struct StackConfig {
    /// The backend.
    pub backend: BackendKind,
    /// The memory budget.
    pub budget: BudgetConfig,
    /// The GPUs (ignored by the CPU backend).
    pub devices: DeviceSelection,
    /// What pool buffers are made of.
    pub memory: PoolMemory,
    /// How pinned pool buffers are page-locked.
    pub pinning: PinMethod,
    /// The pool's settings.
    pub pool: PoolConfig,
    /// The native backend's settings.
    pub native: NativeOptions,
}

/// Why a stack could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssemblyError {
    /// A GPU backend in a build without the `cuda` feature.
    #[error("the {0} backend needs a GPU build (the `cuda` feature)")]
    NeedsCuda(BackendKind),
    /// A GPU backend, but no GPU can be used.
    #[error("the {kind} backend needs a GPU, and none is usable: {why}")]
    NoGpu {
        /// The backend asked for.
        kind: BackendKind,
        /// What the CUDA runtime said.
        why: String,
    },
    /// An ordinal the machine does not have.
    #[error("GPU {ordinal} was selected, but this machine has {count} GPU(s)")]
    NoSuchGpu {
        /// The ordinal.
        ordinal: usize,
        /// GPUs found.
        count: usize,
    },
    /// An empty list of GPUs.
    #[error("no GPU selected")]
    NoDevices,
    /// supraseal-c2 drives the GPUs it finds itself.
    #[error("the supraseal backend runs as one device; select one GPU, or use the native backend for several")]
    SuprasealDevices,
    /// Pinned memory was required and is not available.
    #[error("pinned host memory is not available: {0}")]
    Pinned(String),
    /// More backend threads asked for than are started.
    #[error("{asked} preparation threads asked for; at most {max} are started", max = pinprove_engine::MAX_THREADS)]
    TooManyThreads {
        /// Threads asked for.
        asked: usize,
    },
    /// A backend failed to start.
    #[error("starting the {kind} backend")]
    Backend {
        /// The backend.
        kind: BackendKind,
        /// Why.
        #[source]
        source: ProveError,
    },
}

/// A backend as built, with its concrete type for benchmarks that need a
/// backend's own calls (the native backend's phases, supraseal's loads).
#[derive(Clone)]
pub enum BuiltBackend {
    /// The CPU backend.
    Cpu(Arc<CpuBackend>),
    /// A GPU backend (none in a build without GPU support).
    Gpu(pinprove_cuda::GpuBackend),
}

impl BuiltBackend {
    /// The backend behind the trait the engine uses.
    pub fn as_dyn(&self) -> Arc<dyn Backend> {
        match self {
            BuiltBackend::Cpu(b) => Arc::clone(b) as Arc<dyn Backend>,
            BuiltBackend::Gpu(b) => b.as_dyn(),
        }
    }

    /// Which kind it is.
    pub fn kind(&self) -> BackendKind {
        match self {
            BuiltBackend::Cpu(_) => BackendKind::Cpu,
            BuiltBackend::Gpu(b) if b.is_native() => BackendKind::Native,
            BuiltBackend::Gpu(_) => BackendKind::Supraseal,
        }
    }
}

/// A budget, a pool and devices, ready for an engine.
pub struct Stack {
    /// The memory budget everything large is accounted in.
    pub budget: Arc<MemoryBudget>,
    /// The pool synthesis and the backends draw from.
    pub pool: Arc<PinnedPool>,
    /// The backend kind actually built (`auto` resolved).
    pub backend: BackendKind,
    /// One per GPU (or the CPU).
    pub devices: Vec<Device>,
    /// The backends, as built.
    pub backends: Vec<BuiltBackend>,
    /// Workers per device the chosen backend wants.
    pub workers_per_device: usize,
    /// What the CUDA runtime and NVML said of each GPU device when the
    /// stack was built (name, memory, PCIe link): the one discovery of
    /// them, which the daemon's status reads.
    pub gpus: Vec<(DeviceId, pinprove_cuda::Gpu)>,
}

impl Stack {
    /// Builds the stack `config` describes.
    pub fn build(config: &StackConfig) -> Result<Stack, AssemblyError> {
        let asked = config.native.prep_threads;
        if asked > pinprove_engine::MAX_THREADS {
            return Err(AssemblyError::TooManyThreads { asked });
        }
        let kind = resolve(config.backend);
        let ordinals: Vec<Option<usize>> = match kind {
            BackendKind::Cpu | BackendKind::Auto => vec![None],
            BackendKind::Supraseal => match gpu_ordinals(kind, &config.devices)?.as_slice() {
                [one] => vec![Some(*one)],
                _ => return Err(AssemblyError::SuprasealDevices),
            },
            BackendKind::Native => gpu_ordinals(kind, &config.devices)?.into_iter().map(Some).collect(),
        };
        let budget = MemoryBudget::from_config(&config.budget);
        let memory = match (config.memory, kind) {
            // GPU backends upload: their pool must be pinned.
            (PoolMemory::Auto, k) if k.is_gpu() => PoolMemory::Pinned,
            (m, _) => m,
        };
        let pool = pool(&budget, memory, config.pinning, config.pool.clone())?;
        let mut devices = Vec::new();
        let mut backends = Vec::new();
        let found = if ordinals.iter().any(Option::is_some) {
            pinprove_cuda::gpus().unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut gpus = Vec::new();
        for ordinal in ordinals {
            let built = backend(kind, &pool, ordinal.unwrap_or(0), &config.native)?;
            let id = ordinal.map_or(DeviceId::Cpu, DeviceId::Gpu);
            if let Some(gpu) = ordinal.and_then(|o| found.get(o)) {
                gpus.push((id, gpu.clone()));
            }
            devices.push(Device {
                id,
                backend: built.as_dyn(),
            });
            backends.push(built);
        }
        let workers_per_device = match kind {
            BackendKind::Native => config.native.workers_per_device,
            _ => devices[0].backend.capabilities().workers_per_device,
        };
        if config.backend == BackendKind::Auto {
            tracing::info!(backend = %kind, devices = devices.len(), "backend chosen automatically");
        }
        Ok(Stack {
            budget,
            pool,
            backend: kind,
            devices,
            backends,
            workers_per_device,
            gpus,
        })
    }

    /// An engine over this stack's devices and pool, reading its GPUs
    /// through NVML where it is there (unless `config` brings its own
    /// telemetry).
    pub fn engine(&self, mut config: EngineConfig) -> Result<Engine, EngineError> {
        config.workers_per_device.get_or_insert(self.workers_per_device);
        if config.gpu_telemetry.is_none() && self.devices.iter().any(|d| d.backend.gpu().is_some()) {
            config.gpu_telemetry = NvmlTelemetry::load().map(|t| Arc::new(t) as Arc<dyn GpuTelemetry>);
        }
        Engine::new(config, self.devices.clone(), Arc::clone(&self.pool))
    }
}

/// GPU readings from NVML, found by PCI bus id (NVML numbers GPUs in bus
/// order, CUDA fastest first).
struct NvmlTelemetry {
    nvml: pinprove_cuda::Nvml,
    /// NVML's handle of each CUDA ordinal read so far (`None`: not found).
    handles: Mutex<HashMap<usize, Option<pinprove_cuda::nvml::NvmlDevice>>>,
}

impl NvmlTelemetry {
    /// `None` (with the reason logged) where NVML is not there.
    fn load() -> Option<NvmlTelemetry> {
        match pinprove_cuda::Nvml::load() {
            Ok(nvml) => Some(NvmlTelemetry {
                nvml,
                handles: Mutex::new(HashMap::new()),
            }),
            Err(e) => {
                tracing::info!("no GPU readings: {e}");
                None
            }
        }
    }
}

impl fmt::Debug for NvmlTelemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NvmlTelemetry")
    }
}

impl GpuTelemetry for NvmlTelemetry {
    fn read(&self, gpu: usize) -> Option<GpuReading> {
        let handle = *self.handles.lock().recover().entry(gpu).or_insert_with(|| {
            let info = pinprove_cuda::device_info(gpu).ok()?;
            self.nvml.device_by_pci_bus_id(&info.pci_bus_id).ok()
        });
        let handle = handle?;
        let s = self.nvml.sample(handle).ok()?;
        let (total, free) = self.nvml.memory(handle).unwrap_or_default();
        Some(GpuReading {
            utilization_percent: f64::from(s.gpu_percent),
            memory_used_bytes: total.saturating_sub(free),
            memory_total_bytes: total,
            pcie_rx_bytes_per_s: s.pcie_rx_bytes_per_s as f64,
            pcie_tx_bytes_per_s: s.pcie_tx_bytes_per_s as f64,
        })
    }
}

/// `auto` as it resolves here: `native` when a GPU build finds a GPU.
fn resolve(kind: BackendKind) -> BackendKind {
    match kind {
        BackendKind::Auto if gpu_count().is_ok_and(|n| n > 0) => BackendKind::Native,
        BackendKind::Auto => BackendKind::Cpu,
        k => k,
    }
}

fn gpu_count() -> Result<usize, String> {
    pinprove_cuda::device_count().map_err(|e| e.to_string())
}

fn gpu_ordinals(kind: BackendKind, selection: &DeviceSelection) -> Result<Vec<usize>, AssemblyError> {
    if !pinprove_cuda::BUILT_WITH_CUDA {
        return Err(AssemblyError::NeedsCuda(kind));
    }
    let count = gpu_count().map_err(|why| AssemblyError::NoGpu { kind, why })?;
    if count == 0 {
        return Err(AssemblyError::NoGpu {
            kind,
            why: "the driver reports no devices".into(),
        });
    }
    let ordinals = match selection {
        DeviceSelection::All => (0..count).collect(),
        DeviceSelection::Ordinals(v) => v.clone(),
    };
    if ordinals.is_empty() {
        return Err(AssemblyError::NoDevices);
    }
    if let Some(&ordinal) = ordinals.iter().find(|&&o| o >= count) {
        return Err(AssemblyError::NoSuchGpu { ordinal, count });
    }
    Ok(ordinals)
}

/// A pool over `budget` whose buffers are of `memory` (pinned ones locked
/// by `pinning`).
pub fn pool(
    budget: &Arc<MemoryBudget>,
    memory: PoolMemory,
    pinning: PinMethod,
    config: PoolConfig,
) -> Result<Arc<PinnedPool>, AssemblyError> {
    let allocator: Arc<dyn HostAllocator> = match memory {
        PoolMemory::Auto => pinned(pinning).unwrap_or_else(|e| {
            // Worth a warning only where pinned memory was expected.
            if pinprove_cuda::BUILT_WITH_CUDA {
                tracing::warn!("{e}; pool buffers use pageable heap memory");
            }
            Arc::new(HeapAllocator::default())
        }),
        PoolMemory::Heap => Arc::new(HeapAllocator::default()),
        PoolMemory::Pinned => pinned(pinning)?,
    };
    Ok(PinnedPool::new(allocator, Arc::clone(budget), config))
}

fn pinned(pinning: PinMethod) -> Result<Arc<dyn HostAllocator>, AssemblyError> {
    pinprove_cuda::pinned_allocator(pinning).map_err(|e| AssemblyError::Pinned(e.to_string()))
}

/// A backend of `kind` drawing from `pool`, on GPU `ordinal` (GPU kinds).
pub fn backend(
    kind: BackendKind,
    pool: &Arc<PinnedPool>,
    ordinal: usize,
    native: &NativeOptions,
) -> Result<BuiltBackend, AssemblyError> {
    match resolve(kind) {
        BackendKind::Cpu | BackendKind::Auto => Ok(BuiltBackend::Cpu(Arc::new(CpuBackend::new(Arc::clone(pool))))),
        gpu => gpu_backend(gpu, pool, ordinal, native),
    }
}

fn gpu_backend(
    kind: BackendKind,
    pool: &Arc<PinnedPool>,
    ordinal: usize,
    native: &NativeOptions,
) -> Result<BuiltBackend, AssemblyError> {
    if !pinprove_cuda::BUILT_WITH_CUDA {
        return Err(AssemblyError::NeedsCuda(kind));
    }
    let started = |source| AssemblyError::Backend { kind, source };
    let built = match kind {
        BackendKind::Supraseal => pinprove_cuda::supraseal_backend(),
        _ => pinprove_cuda::native_backend(Arc::clone(pool), native.config(ordinal)),
    };
    Ok(BuiltBackend::Gpu(built.map_err(started)?))
}

#[cfg(test)]
mod gpu_checks;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print_the_same_names() {
        for k in BackendKind::ALL {
            assert_eq!(k.to_string().parse::<BackendKind>(), Ok(k));
        }
        assert_eq!("NATIVE".parse::<BackendKind>(), Ok(BackendKind::Native));
        assert!("cuda".parse::<BackendKind>().unwrap_err().contains("auto, cpu, native"));
    }

    #[test]
    fn device_selections_parse() {
        assert_eq!("all".parse::<DeviceSelection>(), Ok(DeviceSelection::All));
        assert_eq!(
            "0, 2,2".parse::<DeviceSelection>(),
            Ok(DeviceSelection::Ordinals(vec![0, 2]))
        );
        assert!("0,x".parse::<DeviceSelection>().is_err());
        assert_eq!(DeviceSelection::Ordinals(vec![1, 3]).to_string(), "1,3");
    }

    #[test]
    fn a_cpu_stack_has_one_device_and_proves() {
        use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
        use pinprove_groth16::shape::CircuitShape;
        let stack = Stack::build(&StackConfig {
            backend: BackendKind::Cpu,
            budget: BudgetConfig::Fixed(1 << 28),
            ..StackConfig::default()
        })
        .unwrap();
        assert_eq!(stack.backend, BackendKind::Cpu);
        assert_eq!(stack.devices.len(), 1);
        assert_eq!(stack.devices[0].id, DeviceId::Cpu);
        assert_eq!(stack.budget.total(), 1 << 28);
        // Its engine proves a small circuit end to end.
        let engine = stack.engine(pinprove_engine::EngineConfig::default()).unwrap();
        let c = BenchCircuit::new(300, WitnessMix::Bits).unwrap();
        engine.register_synthetic_srs(&c.id(), CircuitShape::of_blank(c.clone()).unwrap());
        let id = engine
            .submit(pinprove_engine::JobSpec {
                circuit_id: c.id(),
                priority: pinprove_engine::Priority::Normal,
                partitions: vec![pinprove_engine::circuit_partition(c)],
                randomness: None,
            })
            .unwrap();
        match engine.wait(id, Some(std::time::Duration::from_secs(60))).unwrap() {
            pinprove_engine::JobOutcome::Completed(r) => assert_eq!(r.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gpu_kinds_without_the_cuda_feature_are_clear_errors() {
        if pinprove_cuda::BUILT_WITH_CUDA {
            return;
        }
        for kind in [BackendKind::Native, BackendKind::Supraseal] {
            let err = Stack::build(&StackConfig {
                backend: kind,
                budget: BudgetConfig::Fixed(1 << 28),
                ..StackConfig::default()
            })
            .err()
            .expect("no GPU backend without cuda");
            assert!(matches!(err, AssemblyError::NeedsCuda(k) if k == kind), "{err}");
            assert!(err.to_string().contains("GPU build"), "{err}");
        }
        // Auto falls back to the CPU.
        let auto = Stack::build(&StackConfig {
            budget: BudgetConfig::Fixed(1 << 28),
            ..StackConfig::default()
        })
        .unwrap();
        assert_eq!(auto.backend, BackendKind::Cpu);
    }

    #[test]
    fn too_many_preparation_threads_are_a_clear_error() {
        let err = Stack::build(&StackConfig {
            budget: BudgetConfig::Fixed(1 << 28),
            native: NativeOptions {
                prep_threads: pinprove_engine::MAX_THREADS + 1,
                ..NativeOptions::default()
            },
            ..StackConfig::default()
        })
        .err()
        .expect("refused");
        assert!(matches!(err, AssemblyError::TooManyThreads { .. }), "{err}");
        assert!(err.to_string().contains("at most 1024"), "{err}");
    }
}
