//! What GPUs the machine has.

use pinprove_mem::cuda::{self, CudaError};

use crate::nvml::{Nvml, PcieLink};

/// A GPU as the CUDA runtime and NVML describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Name, such as "NVIDIA H200".
    pub name: String,
    /// PCI bus id.
    pub pci_bus_id: String,
    /// Multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Free device memory when read.
    pub free_memory: u64,
    /// The driver's CUDA version ("13.0").
    pub driver_cuda: String,
    /// The linked runtime's version.
    pub runtime_cuda: String,
    /// The driver's own version ("580.159.04"), from NVML.
    pub driver_version: Option<String>,
    /// The PCIe link, from NVML.
    pub pcie: Option<PcieLink>,
}

fn version(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Every usable GPU. An error when no CUDA driver is usable at all; an
/// empty list when a driver has no devices.
pub fn gpus() -> Result<Vec<Gpu>, CudaError> {
    let n = cuda::device_count()?;
    let nvml = Nvml::load()
        .map_err(|e| tracing::debug!("{e}; PCIe link and driver version not reported"))
        .ok();
    let driver_version = nvml.as_ref().and_then(|n| n.driver_version().ok());
    (0..n)
        .map(|ordinal| {
            let info = cuda::device_info(ordinal)?;
            let pcie = nvml
                .as_ref()
                .and_then(|n| n.device_by_pci_bus_id(&info.pci_bus_id).and_then(|d| n.link(d)).ok());
            Ok(Gpu {
                ordinal,
                name: info.name,
                pci_bus_id: info.pci_bus_id,
                multiprocessors: info.multiprocessors,
                total_memory: info.total_memory,
                free_memory: info.free_memory,
                driver_cuda: version(info.driver_version),
                runtime_cuda: version(info.runtime_version),
                driver_version: driver_version.clone(),
                pcie,
            })
        })
        .collect()
}
