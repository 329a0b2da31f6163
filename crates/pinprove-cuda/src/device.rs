//! What GPUs the machine has.

use pinprove_mem::cuda::{self, CudaError, DeviceInfo};

use crate::nvml::{Nvml, PcieLink};

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
            let device = cuda::device_info(ordinal)?;
            let pcie = nvml
                .as_ref()
                .and_then(|n| n.device_by_pci_bus_id(&device.pci_bus_id).and_then(|d| n.link(d)).ok());
            Ok(Gpu {
                device,
                driver_version: driver_version.clone(),
                pcie,
            })
        })
        .collect()
}
