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
    found: Vec<(usize, pinprove_cuda::Gpu)>,
    nvml: Option<pinprove_cuda::Nvml>,
}

impl Gpus {
    /// The GPUs of `selection` (the configured devices): none in a build
    /// without GPU support.
    pub(crate) fn discover(selection: &pinprove_stack::DeviceSelection) -> Gpus {
        use pinprove_stack::DeviceSelection;
        let all = pinprove_cuda::gpus().unwrap_or_default();
        let found: Vec<_> = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| match selection {
                DeviceSelection::All => true,
                DeviceSelection::Ordinals(o) => o.contains(i),
            })
            .collect();
        let nvml = if found.is_empty() {
            None
        } else {
            pinprove_cuda::Nvml::load().ok()
        };
        Gpus { found, nvml }
    }

    /// No GPU (the daemon proves on the CPU).
    pub(crate) fn none() -> Gpus {
        Gpus {
            found: Vec::new(),
            nvml: None,
        }
    }

    /// Every GPU with its memory now (free memory from NVML, when it is
    /// there).
    pub(crate) fn list(&self) -> Vec<GpuView> {
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
}
