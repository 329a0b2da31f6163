//! How the native backend is configured: plain data, the same in every
//! build, so that the crates above can describe a GPU backend without
//! knowing whether this build has one.

/// Where the MSM bases live while proofs run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum SrsPlacement {
    /// Uploaded to device memory once per SRS (falls back to `Host` when
    /// the device has too little memory).
    #[default]
    Device,
    /// Streamed from the SRS's pinned host buffers for every MSM.
    Host,
}

/// Which kernel sums the MSMs' full-width scalars.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum MsmKernelKind {
    /// sppark's Pippenger.
    #[default]
    Sppark,
    /// pinprove's signed-digit bucket kernel (`cuda/msm_tables.cu`), over
    /// tables of precomputed copies of the resident bases, built when the
    /// bases are uploaded in the device memory the plan leaves beside
    /// `queue_depth` proofs (h's first, then L, A, B in G1, B in G2).
    /// Off until a passing `scripts/gpu-check` line runs it.
    Tables,
}

impl MsmKernelKind {
    /// The kernel's name in settings and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            MsmKernelKind::Sppark => "sppark",
            MsmKernelKind::Tables => "tables",
        }
    }
}

impl std::fmt::Display for MsmKernelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no MSM kernel.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is no MSM kernel (sppark, tables)")]
pub struct UnknownMsmKernel(String);

impl std::str::FromStr for MsmKernelKind {
    type Err = UnknownMsmKernel;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [MsmKernelKind::Sppark, MsmKernelKind::Tables]
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownMsmKernel(s.to_string()))
    }
}

/// How the native backend runs.
#[derive(Clone, Copy, Debug)]
pub struct NativeConfig {
    /// Where MSM bases live.
    pub srs_placement: SrsPlacement,
    /// Workers the engine should run per device.
    pub workers_per_device: usize,
    /// The GPU, by CUDA ordinal (the order sppark enumerates them in when
    /// every visible GPU is Volta or newer, as on any machine this runs on).
    pub device: usize,
    /// Pieces of proofs' device work that may be queued on the GPU at once
    /// (resident bases; a background proof queues h, each part of the h
    /// MSM and the other MSMs as pieces, an urgent one all at once): with 2
    /// one runs while the next waits behind it, so the GPU never waits for
    /// the host between pieces; with 1 an urgent proof waits for one piece
    /// at most. A proof holds its device memory (a/b/c, scalars, MSM
    /// scratch) from its first piece until its last has run.
    pub queue_depth: usize,
    /// The most device memory the backend takes of its GPU, in bytes
    /// (`None`: all the GPU has free when the backend starts). Everything
    /// is planned to fit (see `plan`): where the SRS bases and a circuit's
    /// matrices live, and how many proofs are on the device at once.
    pub memory_limit: Option<u64>,
    /// Threads of the backend's own pool, which prepares scalars before the
    /// device work and adds up the MSMs' results after it (0: half the
    /// CPUs, at least 2). Not rayon's global pool: synthesis keeps that one
    /// saturated, and a preparation queued behind it would leave the GPU
    /// without work. Urgent proofs have a pool of their own, a quarter of
    /// this size (at least 2): a rayon pool runs the tasks it has before
    /// one handed in from outside, so a WinningPoSt's sums queued behind a
    /// 32 GiB partition's preparation (1.6 s on 8 threads) waited for all
    /// of it.
    pub prep_threads: usize,
    /// Background partitions of one circuit the engine hands to one
    /// `start` when its bases are streamed from host memory and that many
    /// are waiting: their l, a and b MSMs then read each window of bases
    /// together, so the bases cross PCIe once for all of them (1: every
    /// partition streams its own). Each waits for the others' h before its
    /// MSMs, so more trades latency and host memory for PCIe traffic.
    /// Default 2: `scripts/gpu-check` passed with it at 74a8855 (H100,
    /// 2026-12-07: PoRep at 15 GiB free 26.4 s per proof, 1.30x the whole
    /// card's); on 8171b47 every paired 32 GiB partition had failed.
    pub partitions_sharing_bases: usize,
    /// The MSM kernel for full-width scalars (ones and small values are
    /// summed by batched addition either way). Default sppark's.
    pub msm_kernel: MsmKernelKind,
}

/// The native backend's defaults are written here and nowhere else: the
/// stack's options, the daemon's configuration and the benchmarks read
/// them from this `Default`, and a test compares them with the newest
/// passing `scripts/gpu-check` line (`docs/gpu-checks.md`).
impl Default for NativeConfig {
    fn default() -> Self {
        NativeConfig {
            srs_placement: SrsPlacement::Device,
            workers_per_device: 2,
            device: 0,
            queue_depth: 2,
            memory_limit: None,
            prep_threads: 0,
            partitions_sharing_bases: 2,
            msm_kernel: MsmKernelKind::Sppark,
        }
    }
}

impl NativeConfig {
    /// The settings that change what runs on the GPU, as one line of
    /// `name=value` words in a fixed order: what `scripts/gpu-check` records
    /// beside its figures, and what the defaults' test compares. The GPU's
    /// ordinal is not among them: it says where, not what.
    pub fn settings(&self) -> String {
        let placement = match self.srs_placement {
            SrsPlacement::Device => "device",
            SrsPlacement::Host => "host",
        };
        let limit = self.memory_limit.map_or("none".to_string(), |b| b.to_string());
        let kernel = self.msm_kernel;
        format!(
            "srs_placement={placement} queue_depth={} prep_threads={} workers_per_device={} memory_limit={limit} partitions_sharing_bases={} msm_kernel={kernel}",
            self.queue_depth, self.prep_threads, self.workers_per_device, self.partitions_sharing_bases
        )
    }
}
