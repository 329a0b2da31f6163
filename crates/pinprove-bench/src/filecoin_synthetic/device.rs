//! The GPU's phases of the last partition proved, as the native backend
//! reports them.

use serde::Serialize;

#[cfg(feature = "cuda")]
use pinprove_stack::BuiltBackend;
use pinprove_stack::Stack;

#[cfg(feature = "cuda")]
use super::secs;
#[cfg(feature = "cuda")]
use crate::report::gbps;

/// The GPU's phases of the last partition proved (native backend).
#[derive(Serialize)]
pub struct DevicePhases {
    /// a/b/c's upload, or the witness's for a pre-compiled circuit.
    pub(super) upload_s: f64,
    pub(super) upload_gbps: f64,
    pub(super) upload_bytes: u64,
    /// Computing a/b/c from a pre-compiled circuit's matrices (part of h).
    pub(super) evaluation_s: f64,
    /// NTTs and the quotient.
    pub(super) h_s: f64,
    /// Each MSM: name, seconds, bases, bases per second, bases through
    /// Pippenger (the rest had 0, 1 or small scalars).
    pub(super) msm: Vec<(String, f64, usize, f64, usize)>,
    pub(super) device_s: f64,
    /// Host work in `start` before the device (see `NativePhases`).
    pub(super) preparation_s: f64,
    /// Scalar preparation on the synthesis thread, ahead of `start`.
    pub(super) prepared_ahead_s: f64,
    /// Partitions whose l, a and b MSMs read the same streamed bases (their
    /// times above are this partition's share); 1 when its own.
    pub(super) bases_shared_by: usize,
    /// Whether the times above are the GPU's (false: its events could not
    /// be read, and upload, evaluation and h are unknown, the MSMs' host
    /// times).
    pub(super) device_timed: bool,
}

#[cfg(feature = "cuda")]
pub(super) fn device_phases(stack: &Stack) -> Option<DevicePhases> {
    let p = stack.backends.iter().find_map(|b| match b {
        BuiltBackend::Gpu(pinprove_cuda::GpuBackend::Native(n)) => n.last_phases(),
        _ => None,
    })?;
    let msm = p
        .msm
        .iter()
        .zip(pinprove_cuda::NativePhases::MSM_NAMES)
        .zip(p.pippenger_points)
        .map(|(((t, n), name), pip)| {
            let rate = if t.is_zero() { 0.0 } else { *n as f64 / secs(*t) };
            (name.to_string(), secs(*t), *n, rate, pip)
        })
        .collect();
    let upload_bytes = p.abc_bytes + p.witness_bytes;
    Some(DevicePhases {
        upload_s: secs(p.upload),
        upload_gbps: gbps(upload_bytes, p.upload),
        upload_bytes,
        evaluation_s: secs(p.evaluation),
        h_s: secs(p.h),
        msm,
        device_s: secs(p.device()),
        preparation_s: secs(p.preparation),
        prepared_ahead_s: secs(p.prepared_ahead),
        bases_shared_by: p.bases_shared_by.max(1),
        device_timed: p.device_timed,
    })
}

/// What a report says of partitions sharing streamed bases.
pub(super) fn shared_note(shared_by: usize) -> String {
    if shared_by > 1 {
        format!("; l, a and b over bases streamed once for {shared_by} partitions (each one's share)")
    } else {
        String::new()
    }
}

/// Without the `cuda` feature there is no device to report on.
#[cfg(not(feature = "cuda"))]
pub(super) fn device_phases(_: &Stack) -> Option<DevicePhases> {
    None
}
