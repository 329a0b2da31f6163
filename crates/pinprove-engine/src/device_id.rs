//! Which device a backend drives: the one name of a device from the
//! stack that finds it to the engine's status, its metrics and the
//! daemon's GPU report.

use std::fmt;

use serde::{Serialize, Serializer};

/// A device the engine proves on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceId {
    /// The host's CPUs (the CPU backend).
    Cpu,
    /// The GPU of this CUDA ordinal.
    Gpu(usize),
}

impl DeviceId {
    /// The CUDA ordinal of a GPU.
    pub fn gpu(self) -> Option<usize> {
        match self {
            DeviceId::Gpu(o) => Some(o),
            DeviceId::Cpu => None,
        }
    }
}

impl fmt::Display for DeviceId {
    /// "cpu", "gpu0": the `device` label of metrics and status.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cpu => f.write_str("cpu"),
            DeviceId::Gpu(o) => write!(f, "gpu{o}"),
        }
    }
}

impl Serialize for DeviceId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_named_as_metrics_and_status_show_them() {
        assert_eq!(DeviceId::Cpu.to_string(), "cpu");
        assert_eq!(DeviceId::Gpu(3).to_string(), "gpu3");
        assert_eq!(serde_json::to_string(&DeviceId::Gpu(0)).unwrap(), "\"gpu0\"");
        assert_eq!(DeviceId::Gpu(7).gpu(), Some(7));
        assert_eq!(DeviceId::Cpu.gpu(), None);
    }
}
