//! pinprove's proving engine.
//!
//! Jobs (one circuit type, one or more partitions, a priority) are queued by
//! priority, FIFO within a priority. Synthesis workers take partitions in
//! that order, each admitted by the memory budget for its working set (a/b/c
//! and assignments sized from the capacity hint, or from the parameters'
//! shape before the first synthesis) — the budget, not a worker count,
//! decides how many run at once. A bounded hand-off feeds each device's
//! workers, which run the backend's first step and pass the rest to a
//! finalizer, so a device takes its next partition at once. Parameters are
//! loaded on first use, accounted in the budget, and evicted least recently
//! used first when idle and unreferenced. Every phase is timed, recorded on
//! a timeline (Chrome trace JSON, SVG) and counted in Prometheus metrics.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use pinprove_engine::{Device, DeviceId, Engine, EngineConfig, JobOutcome, JobSpec, Priority, circuit_partition};
//! use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
//! use pinprove_groth16::CpuBackend;
//! use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One budget for everything large; the pool draws from it.
//! let pool = PinnedPool::new(Arc::new(HeapAllocator::default()), MemoryBudget::new(1 << 30), PoolConfig::default());
//! let cpu = Device { id: DeviceId::Cpu, backend: Arc::new(CpuBackend::new(Arc::clone(&pool))) };
//! let engine = Engine::new(EngineConfig::default(), vec![cpu], Arc::clone(&pool))?;
//!
//! // Parameters are registered by circuit type and loaded on first use.
//! let circuit = BenchCircuit::new(256, WitnessMix::Bits)?;
//! # let dir = std::env::temp_dir().join(format!("pinprove-engine-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let params_path = dir.join("bench.params");
//! # use rand_chacha::rand_core::SeedableRng as _;
//! # let params = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
//! #     circuit.clone(), &mut rand_chacha::ChaCha8Rng::from_seed([7; 32]))?;
//! # let mut bytes = Vec::new();
//! # params.write(&mut bytes)?;
//! # std::fs::write(&params_path, bytes)?;
//! engine.register_srs(&circuit.id(), &params_path);
//!
//! // A job: partitions of one circuit type, proved in any order, returned in order.
//! let partitions = (0..3).map(|seed| circuit_partition(circuit.clone().with_seed(seed))).collect();
//! let job = engine.submit(JobSpec {
//!     circuit_id: circuit.id(),
//!     priority: Priority::High,
//!     partitions,
//!     randomness: None,
//! })?;
//! match engine.wait(job, Some(Duration::from_secs(60)))? {
//!     JobOutcome::Completed(results) => assert_eq!(results.len(), 3),
//!     other => panic!("{other:?}"),
//! }
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod clock;
mod device_id;
mod engine;
pub mod job;
pub mod metrics;
mod phase;
pub mod planner;
pub mod simulate;
mod srs;
pub mod telemetry;
pub mod timeline;

pub use device_id::DeviceId;
pub use engine::{
    CircuitSynthesis, Device, DeviceStatus, Engine, EngineConfig, EngineStatus, GpuReading, JobFuture, MAX_THREADS,
    PartitionStatus, QueueStatus, SynthesisMode,
};
pub use job::{
    FreshCircuit, JobId, JobOutcome, JobSpec, JobState, JobStatus, Partition, PartitionResult, PartitionTimings,
    Priority, SynthesisContext, circuit_partition, circuit_partition_with_inputs, holding_heap,
    precompilable_partition, precompilable_partition_with_inputs,
};
pub use phase::Phase;
pub use srs::{SrsInfo, SrsRegistry, SrsSource};

use pinprove_groth16::{ParamsError, ProveError};

/// Why the engine refused or could not finish something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// An engine needs at least one device (the CPU backend counts).
    #[error("no device to prove on")]
    NoDevice,
    /// Every device was lost (see [`DeviceStatus::lost`]).
    #[error("every device was lost: {0}")]
    DevicesLost(String),
    /// No such job (or it was forgotten long ago).
    #[error("unknown job {0}")]
    UnknownJob(JobId),
    /// No parameters were registered for the circuit type.
    #[error("no parameters registered for circuit type {0:?}")]
    UnknownCircuit(String),
    /// A job without partitions.
    #[error("the job has no partitions")]
    EmptyJob,
    /// Randomness given for the wrong number of partitions.
    #[error("{pairs} (r, s) pairs for {partitions} partitions")]
    Randomness {
        /// Pairs given.
        pairs: usize,
        /// Partitions in the job.
        partitions: usize,
    },
    /// The job can never fit in the memory budget.
    #[error(
        "one partition of this job needs about {needed} bytes with its parameters, more than the whole \
         memory budget of {total} bytes"
    )]
    TooLarge {
        /// Bytes needed.
        needed: u64,
        /// The budget.
        total: u64,
    },
    /// A circuit type's parameters alone need more than the memory budget
    /// gives the work that asked for them.
    #[error(
        "loading the parameters of {circuit_id} needs about {needed} bytes, more than the memory budget of {total} \
         bytes"
    )]
    ParamsTooLarge {
        /// The circuit type.
        circuit_id: String,
        /// Bytes the load needs.
        needed: u64,
        /// The budget (less the urgent reserve for work below it).
        total: u64,
    },
    /// Waiting ran out of time (the job goes on).
    #[error("timed out waiting for the job")]
    Timeout,
    /// The engine is stopping.
    #[error("the engine is shutting down")]
    ShutDown,
    /// The parameters could not be read.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// A proof step failed.
    #[error(transparent)]
    Prove(#[from] ProveError),
    /// Memory could not be had.
    #[error(transparent)]
    Memory(#[from] pinprove_mem::Error),
    /// A worker thread could not be started.
    #[error("starting a worker thread")]
    Thread(#[from] std::io::Error),
    /// More threads were asked for than the engine starts.
    #[error("{asked} {what} asked for; at most {max} are started", max = MAX_THREADS)]
    TooManyThreads {
        /// Which threads.
        what: &'static str,
        /// How many were asked for.
        asked: usize,
    },
}
