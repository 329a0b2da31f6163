//! CUDA runtime error codes, sorted by what they leave of the device.
//!
//! Some errors are *sticky*: a kernel that faults (an illegal address, a
//! trap, a hardware exception) or a device that stops answering leaves the
//! process's context on that device unusable, and every later runtime call
//! on it returns an error. Others (running out of memory, a launch
//! configuration the device cannot take) fail only the call that made them.
//! The backends turn the first kind into [`DeviceFault::Lost`] and refuse
//! work from then on, so a scheduler can move work elsewhere instead of
//! failing job after job on a dead device.

use std::sync::{Arc, OnceLock};

use pinprove_groth16::{DeviceFault, ProveError};

/// What a CUDA runtime error code (`cudaError_t`) means for the device.
/// sppark's exceptions carry the code negated; either sign is accepted.
pub fn classify(code: i32) -> DeviceFault {
    match code.unsigned_abs() {
        // cudaErrorMemoryAllocation.
        2 => DeviceFault::OutOfMemory,
        // InvalidConfiguration, InvalidDeviceFunction, InvalidKernelImage,
        // NoKernelImageForDevice, LaunchOutOfResources,
        // CooperativeLaunchTooLarge.
        9 | 98 | 200 | 209 | 701 | 720 => DeviceFault::Launch,
        // InitializationError, CudartUnloading, DevicesUnavailable,
        // PriorLaunchFailure, NoDevice, DeviceUninitialized (the context is
        // gone), ECCUncorrectable, NvlinkUncorrectable, Contained;
        // IllegalAddress, LaunchTimeout, ContextIsDestroyed, Assert,
        // HardwareStackError, IllegalInstruction, MisalignedAddress,
        // InvalidAddressSpace, InvalidPc, LaunchFailure; SystemNotReady,
        // ExternalDevice, Unknown. What cannot be told apart from a lost
        // device is treated as one: a device in an unknown state must not
        // produce proofs.
        3 | 4 | 46 | 53 | 100 | 201 | 214 | 220 | 226 | 700 | 702 | 709 | 710 | 714..=719 | 802 | 911 | 999 => {
            DeviceFault::Lost
        }
        _ => DeviceFault::Other,
    }
}

/// A device error of backend `backend`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn device_error(backend: &'static str, code: i32, message: impl Into<String>) -> ProveError {
    ProveError::Device {
        backend,
        fault: classify(code),
        message: message.into(),
    }
}

/// Remembers the first error that lost a backend's device, shared by the
/// backend and its proofs in flight.
#[derive(Clone, Debug, Default)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct LostDevice(Arc<OnceLock<String>>);

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl LostDevice {
    /// Why the device was lost, once it was.
    pub(crate) fn reason(&self) -> Option<String> {
        self.0.get().cloned()
    }

    /// An error when the device was lost: calls fail at once, without
    /// touching it.
    pub(crate) fn check(&self, backend: &'static str) -> Result<(), ProveError> {
        match self.0.get() {
            None => Ok(()),
            Some(why) => Err(ProveError::Device {
                backend,
                fault: DeviceFault::Lost,
                message: format!("the device failed earlier ({why}); a new process is needed to use it again"),
            }),
        }
    }

    /// Passes `result` on, noting a lost device.
    pub(crate) fn note<T>(&self, result: Result<T, ProveError>) -> Result<T, ProveError> {
        if let Err(
            e @ ProveError::Device {
                fault: DeviceFault::Lost,
                ..
            },
        ) = &result
            && self.0.set(e.to_string()).is_ok()
        {
            tracing::error!("{e}; the device takes no more work");
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_sort_by_what_they_leave_of_the_device() {
        assert_eq!(classify(2), DeviceFault::OutOfMemory);
        // sppark negates the codes it throws.
        assert_eq!(classify(-2), DeviceFault::OutOfMemory);
        assert_eq!(classify(701), DeviceFault::Launch);
        assert_eq!(classify(9), DeviceFault::Launch);
        for lost in [700, 719, 214, 999, -700, 46] {
            assert_eq!(classify(lost), DeviceFault::Lost, "{lost}");
        }
        assert_eq!(classify(1), DeviceFault::Other);
        assert_eq!(classify(i32::MIN), DeviceFault::Other);
    }

    #[test]
    fn a_lost_device_refuses_later_calls() {
        let lost = LostDevice::default();
        assert!(lost.check("x").is_ok());
        let oom: Result<(), _> = Err(device_error("x", 2, "cudaMallocAsync"));
        assert!(lost.note(oom).is_err());
        assert!(lost.reason().is_none(), "running out of memory loses nothing");
        let fault: Result<(), _> = Err(device_error("x", 700, "an illegal address"));
        assert!(lost.note(fault).is_err());
        let second: Result<(), _> = Err(device_error("x", 719, "a later error"));
        let _ = lost.note(second);
        let why = lost.reason().expect("lost");
        assert!(why.contains("illegal address"), "the first error is kept: {why}");
        let err = lost.check("x").unwrap_err();
        assert_eq!(err.device_fault(), Some(DeviceFault::Lost));
        assert!(lost.clone().check("x").is_err(), "clones share the state");
    }
}
