//! CUDA runtime error codes, sorted by what they leave of the device.
//!
//! Some errors are *sticky*: a kernel that faults (an illegal address, a
//! trap, a hardware exception) or a device that stops answering leaves the
//! process's context on that device unusable, and every later runtime call
//! on it returns an error. Others (running out of memory, a launch
//! configuration the device cannot take) fail only the call that made them.
//! The backends turn the first kind into [`DeviceFault::Lost`] and refuse
//! work from then on (see [`pinprove_groth16::LostDevice`]), so a scheduler
//! can move work elsewhere instead of failing job after job on a dead
//! device.

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
}
