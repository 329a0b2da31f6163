use std::io;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bellpepper_core::SynthesisError;

/// Why a parameter file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    /// The file could not be opened or read.
    #[error("reading parameters from {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The file ends before the section it announces.
    #[error(
        "parameter file is truncated: section {section} needs {needed} bytes at offset {offset}, \
         but the file has {available}"
    )]
    Truncated {
        /// Which part of the file.
        section: &'static str,
        /// Where the section starts.
        offset: u64,
        /// Bytes the section needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// Bytes follow the last section.
    #[error("parameter file has {extra} unexpected trailing bytes after the last section")]
    TrailingBytes {
        /// How many.
        extra: u64,
    },
    /// A point does not decode, is not on the curve, or not in the subgroup.
    #[error("parameter file: point {index} of section {section} is not a valid {group} point ({why})")]
    InvalidPoint {
        /// Section name.
        section: &'static str,
        /// Index inside the section.
        index: usize,
        /// "G1" or "G2".
        group: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A point that must not be the identity is.
    #[error("parameter file: point {index} of section {section} is the point at infinity")]
    PointAtInfinity {
        /// Section name.
        section: &'static str,
        /// Index inside the section.
        index: usize,
    },
    /// Memory for the decoded points could not be had.
    #[error("no memory for the parameters")]
    Memory(#[from] pinprove_mem::Error),
    /// Synthetic parameters of this shape cannot exist (a domain beyond the
    /// field's, counts beyond the format's).
    #[error("no parameters of this shape: {0}")]
    Shape(String),
}

/// Why parameters could not be generated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The circuit could not be recorded (its synthesis failed, or it has
    /// more distinct coefficients than a recording holds).
    #[error("recording the circuit")]
    Record(#[from] PrecompiledError),
    /// The recording's matrices were released.
    #[error("the circuit's matrices")]
    Prove(#[from] ProveError),
    /// Beyond the field's domain or the file format's counts.
    #[error("the circuit is too large for parameters: {0}")]
    TooLarge(String),
    /// An aux variable appears in no constraint: its L point would be the
    /// identity (bellperson's generator refuses such circuits too).
    #[error("aux variable {index} appears in no constraint")]
    UnconstrainedVariable {
        /// The aux variable.
        index: usize,
    },
    /// Writing the parameters failed.
    #[error("writing the parameters")]
    Io(#[from] io::Error),
}

/// Why a proof could not be produced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProveError {
    /// The circuit's own synthesis failed (a missing assignment, division by
    /// zero, …) or it referenced a variable it never allocated.
    #[error("synthesis failed")]
    Synthesis(#[from] SynthesisError),
    /// Host memory could not be had within the budget.
    #[error("host memory")]
    Memory(#[from] pinprove_mem::Error),
    /// The parameters do not belong to this circuit.
    #[error("the parameters do not match the circuit: {what} has {found} entries, the circuit needs {expected}")]
    ParamsMismatch {
        /// Which part of the parameters.
        what: &'static str,
        /// What the circuit needs.
        expected: usize,
        /// What the parameters have.
        found: usize,
    },
    /// The circuits of one batch differ in shape.
    #[error("circuit {index} of the batch differs in shape from the first: {what}")]
    BatchShapeMismatch {
        /// Which circuit.
        index: usize,
        /// What differs.
        what: &'static str,
    },
    /// The number of (r, s) pairs differs from the number of circuits.
    #[error("{pairs} randomness pairs for {circuits} circuits")]
    RandomnessCount {
        /// Pairs given.
        pairs: usize,
        /// Circuits given.
        circuits: usize,
    },
    /// The circuit has more constraints than the scalar field's FFT domain.
    #[error("{constraints} constraints exceed the largest evaluation domain (2^{max_log2})")]
    DomainTooLarge {
        /// Constraints including the input constraints.
        constraints: usize,
        /// The largest supported power of two.
        max_log2: u32,
    },
    /// An empty batch.
    #[error("no circuits to prove")]
    EmptyBatch,
    /// The assignment's a/b/c were already consumed.
    #[error("the assignment's a/b/c vectors were already released")]
    AbcReleased,
    /// A pre-compiled circuit's matrices were released from host memory
    /// (every device holds its own copy) and a host computation needed them.
    #[error("the matrices of circuit {circuit} were released from host memory (every device holds its own copy)")]
    MatricesReleased {
        /// The circuit type recorded.
        circuit: String,
    },
    /// The verifying key's delta is the identity: a subverted setup.
    #[error("the parameters' delta is the point at infinity (subverted setup)")]
    UnexpectedIdentity,
    /// The device failed; [`DeviceFault`] says whether it can still be used.
    #[error("{backend} backend: {fault}: {message}")]
    Device {
        /// Which backend.
        backend: &'static str,
        /// What kind of failure.
        fault: DeviceFault,
        /// What the device layer said.
        message: String,
    },
    /// A backend-specific failure that is not the device's (a job the
    /// backend cannot run, a missing capability).
    #[error("{backend} backend: {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// What happened.
        message: String,
    },
}

/// Why a pre-compiled circuit (its recorded R1CS matrices) could not be
/// made, read, or used for a synthesis.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrecompiledError {
    /// The recording file could not be created, opened, read or written.
    #[error("recording file {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The file does not start with a recording's magic bytes.
    #[error("{path} is not a circuit recording")]
    NotARecording {
        /// The file.
        path: PathBuf,
    },
    /// The file was written in another format version.
    #[error("circuit recording {path} has format version {found}; this build reads version {supported}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The file ends before what its header announces.
    #[error("circuit recording {path} is truncated: {needed} bytes expected, {available} present")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes the header announces (header included).
        needed: u64,
        /// Bytes in the file.
        available: u64,
    },
    /// Bytes follow what the header announces.
    #[error("circuit recording {path} has {extra} unexpected trailing bytes")]
    TrailingBytes {
        /// The file.
        path: PathBuf,
        /// How many.
        extra: u64,
    },
    /// A checksum does not match: the file was damaged.
    #[error(
        "circuit recording {path}: the {part} checksum does not match (stored {stored:#010x}, computed {computed:#010x})"
    )]
    Checksum {
        /// The file.
        path: PathBuf,
        /// "header" or "body".
        part: &'static str,
        /// The checksum in the file.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// The checksums match but the content is not a valid recording (an
    /// index out of range, a non-canonical coefficient, sizes beyond the
    /// format's).
    #[error("circuit recording {path} is invalid: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The circuit uses more distinct coefficients than the format's 16-bit
    /// coefficient ids can name.
    #[error("the circuit uses more than {limit} distinct coefficients")]
    TooManyCoefficients {
        /// The most a recording holds.
        limit: usize,
    },
    /// The circuit has more variables or non-zero entries than the format's
    /// indices can hold.
    #[error("the circuit has more {what} than a recording holds ({limit})")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// The most a recording holds.
        limit: u64,
    },
    /// A constraint names a variable that was not allocated before it (the
    /// classic synthesis fails on it as well).
    #[error("constraint {constraint} refers to a variable that was never allocated before it")]
    UnknownVariable {
        /// The constraint's row.
        constraint: usize,
    },
    /// The circuit's witness-only synthesis did not produce the recorded
    /// shape: its constraints depend on the witness, or the recording is of
    /// another circuit. Callers fall back to the classic synthesis, which
    /// is always right.
    #[error("the circuit does not match its recording: {what} recorded {recorded}, synthesized {found}")]
    ShapeMismatch {
        /// What differs.
        what: &'static str,
        /// What the recording has.
        recorded: usize,
        /// What this synthesis produced.
        found: usize,
    },
    /// The circuit's synthesis failed, memory could not be had, or the
    /// circuit is too large for an evaluation domain.
    #[error("synthesis failed")]
    Prove(#[from] ProveError),
}

impl PrecompiledError {
    /// Whether the circuit did not match its recording: the case where a
    /// caller falls back to the classic synthesis.
    pub fn is_mismatch(&self) -> bool {
        matches!(self, PrecompiledError::ShapeMismatch { .. })
    }
}

impl From<SynthesisError> for PrecompiledError {
    fn from(e: SynthesisError) -> Self {
        PrecompiledError::Prove(ProveError::Synthesis(e))
    }
}

impl From<pinprove_mem::Error> for PrecompiledError {
    fn from(e: pinprove_mem::Error) -> Self {
        PrecompiledError::Prove(ProveError::Memory(e))
    }
}

impl ProveError {
    /// The kind of device failure, when this is one.
    pub fn device_fault(&self) -> Option<DeviceFault> {
        match self {
            ProveError::Device { fault, .. } => Some(*fault),
            _ => None,
        }
    }

    /// Whether this error leaves its device unusable.
    pub fn loses_device(&self) -> bool {
        self.device_fault().is_some_and(|f| !f.device_usable())
    }
}

/// How a device failed, by what it means for the device's later work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceFault {
    /// Device memory (or host memory for device work) ran out. The device
    /// is fine: the same work may fit later, when other work has finished.
    #[error("out of memory")]
    OutOfMemory,
    /// A kernel could not be launched (too many resources asked, no code for
    /// this device). The device is fine; the work will fail the same way
    /// again.
    #[error("launch failure")]
    Launch,
    /// The device can no longer be used by this process: a kernel faulted,
    /// an uncorrectable memory error, the device left the bus. Every later
    /// call fails; the backend refuses work from then on, and only a new
    /// process (after the device is repaired or reset) can use it again.
    #[error("device lost")]
    Lost,
    /// Any other error of the device layer (an invalid argument: a bug).
    #[error("device error")]
    Other,
}

impl DeviceFault {
    /// Whether the device can still run work after this failure.
    pub fn device_usable(self) -> bool {
        self != DeviceFault::Lost
    }
}

/// Remembers the first error that lost a device: shared by a backend and
/// its proofs in flight, or kept by a scheduler for each device.
#[derive(Clone, Debug, Default)]
pub struct LostDevice(Arc<OnceLock<String>>);

impl LostDevice {
    /// Why the device was lost, once it was.
    pub fn reason(&self) -> Option<String> {
        self.0.get().cloned()
    }

    /// Records `err` when it loses the device; true when it is the first
    /// such error (so the caller reports the loss once).
    pub fn record(&self, err: &ProveError) -> bool {
        err.loses_device() && self.0.set(err.to_string()).is_ok()
    }

    /// An error of `backend` once the device was lost: calls fail at once,
    /// without touching it.
    pub fn check(&self, backend: &'static str) -> Result<(), ProveError> {
        match self.0.get() {
            None => Ok(()),
            Some(why) => Err(ProveError::Device {
                backend,
                fault: DeviceFault::Lost,
                message: format!("the device failed earlier ({why}); a new process is needed to use it again"),
            }),
        }
    }

    /// Passes `result` on, recording (and logging) a lost device.
    pub fn note<T>(&self, result: Result<T, ProveError>) -> Result<T, ProveError> {
        if let Err(e) = &result
            && self.record(e)
        {
            tracing::error!("{e}; the device takes no more work");
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(fault: DeviceFault, message: &str) -> ProveError {
        ProveError::Device {
            backend: "x",
            fault,
            message: message.into(),
        }
    }

    #[test]
    fn a_lost_device_refuses_later_calls() {
        let lost = LostDevice::default();
        assert!(lost.check("x").is_ok());
        let oom: Result<(), _> = Err(device(DeviceFault::OutOfMemory, "cudaMallocAsync"));
        assert!(lost.note(oom).is_err());
        assert!(lost.reason().is_none(), "running out of memory loses nothing");
        let fault: Result<(), _> = Err(device(DeviceFault::Lost, "an illegal address"));
        assert!(lost.note(fault).is_err());
        assert!(
            !lost.record(&device(DeviceFault::Lost, "a later error")),
            "only the first is recorded"
        );
        let why = lost.reason().expect("lost");
        assert!(why.contains("illegal address"), "the first error is kept: {why}");
        let err = lost.check("x").unwrap_err();
        assert_eq!(err.device_fault(), Some(DeviceFault::Lost));
        assert!(err.loses_device());
        assert!(lost.clone().check("x").is_err(), "clones share the state");
    }
}
