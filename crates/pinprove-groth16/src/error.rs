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
