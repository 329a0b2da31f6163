//! What the GPU layer reports about a device: plain data, the same in every
//! build.

use crate::nvml::PcieLink;

/// What a device is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, such as "NVIDIA H200".
    pub name: String,
    /// PCI bus id, such as "0000:17:00.0".
    pub pci_bus_id: String,
    /// Compute capability, major and minor (9.0 for Hopper).
    pub compute_capability: (u32, u32),
    /// Whether it can launch cooperative kernels (grid-wide
    /// synchronization, which sppark's kernels use).
    pub cooperative_launch: bool,
    /// Multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Free device memory in bytes when read.
    pub free_memory: u64,
    /// Driver's CUDA version, as 1000×major + 10×minor.
    pub driver_version: u32,
    /// Linked runtime version, same encoding.
    pub runtime_version: u32,
}

/// The oldest compute capability pinprove's kernels are built for (Turing:
/// the CUDA 13.0 toolkit emits no code for Volta, 7.0).
pub const OLDEST_SUPPORTED: (u32, u32) = (7, 5);

impl DeviceInfo {
    /// Whether pinprove's kernels run on it: an architecture this build has
    /// code for, and cooperative launch (grid-wide synchronization).
    pub fn is_supported(&self) -> bool {
        self.compute_capability >= OLDEST_SUPPORTED && self.cooperative_launch
    }

    /// The driver's CUDA version as "major.minor".
    pub fn driver_cuda(&self) -> String {
        cuda_version(self.driver_version)
    }

    /// The linked runtime's version as "major.minor".
    pub fn runtime_cuda(&self) -> String {
        cuda_version(self.runtime_version)
    }
}

fn cuda_version(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// A GPU as the CUDA runtime and NVML describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// What the CUDA runtime reports.
    pub device: DeviceInfo,
    /// The driver's own version ("580.159.04"), from NVML.
    pub driver_version: Option<String>,
    /// The PCIe link, from NVML.
    pub pcie: Option<PcieLink>,
}
