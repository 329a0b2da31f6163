//! The GPUs the daemon proves on, as status reports them: name and memory
//! per CUDA ordinal (GPU builds with a GPU backend; none otherwise).

/// One GPU now.
pub(crate) struct GpuView {
    pub ordinal: u32,
    pub name: String,
    pub total: u64,
    pub free: u64,
}

/// What was found at start.
pub(crate) struct Gpus {
    /// With their CUDA ordinals.
    #[cfg(feature = "cuda")]
    found: Vec<(usize, pinprove_cuda::Gpu)>,
    #[cfg(feature = "cuda")]
    nvml: Option<pinprove_cuda::Nvml>,
}

impl Gpus {
    /// The GPUs of `selection` (the configured devices).
    pub(crate) fn discover(selection: &pinprove_engine::assembly::DeviceSelection) -> Gpus {
        #[cfg(feature = "cuda")]
        {
            use pinprove_engine::assembly::DeviceSelection;
            let all = pinprove_cuda::gpus().unwrap_or_default();
            let found = all
                .into_iter()
                .enumerate()
                .filter(|(i, _)| match selection {
                    DeviceSelection::All => true,
                    DeviceSelection::Ordinals(o) => o.contains(i),
                })
                .collect();
            Gpus {
                found,
                nvml: pinprove_cuda::Nvml::load().ok(),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = selection;
            Gpus {}
        }
    }

    /// No GPU (the daemon proves on the CPU).
    pub(crate) fn none() -> Gpus {
        #[cfg(feature = "cuda")]
        {
            Gpus {
                found: Vec::new(),
                nvml: None,
            }
        }
        #[cfg(not(feature = "cuda"))]
        Gpus {}
    }

    /// Every GPU with its memory now (free memory from NVML, when it is
    /// there).
    pub(crate) fn list(&self) -> Vec<GpuView> {
        #[cfg(feature = "cuda")]
        {
            self.found
                .iter()
                .map(|(i, g)| {
                    let free = self
                        .nvml
                        .as_ref()
                        .and_then(|n| {
                            n.device_by_pci_bus_id(&g.device.pci_bus_id)
                                .and_then(|d| n.memory(d))
                                .ok()
                        })
                        .map_or(0, |(_, free)| free);
                    GpuView {
                        ordinal: *i as u32,
                        name: g.device.name.clone(),
                        total: g.device.total_memory,
                        free,
                    }
                })
                .collect()
        }
        #[cfg(not(feature = "cuda"))]
        Vec::new()
    }
}
