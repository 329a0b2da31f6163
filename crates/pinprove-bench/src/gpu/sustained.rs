//! Back-to-back proofs with the GPU's utilization sampled, and threads
//! that keep the host busy meanwhile.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::baseline::VecAssignment;
use crate::utilization::mean;
use anyhow::{Context, Result};
use pinprove_groth16::circuits::BenchCircuit;
use pinprove_groth16::{AbcLayout, Backend, CapacityHints, Proof, ProofBatch, ProveError, Srs, synthesize};
use pinprove_mem::PinnedPool;
use serde::Serialize;

use crate::report::NVML_LAG;

use super::checks::rs;

/// Back-to-back proofs on one thread (`--sustained`).
#[derive(Serialize)]
pub(super) struct Sustained {
    pub(super) log_size: u32,
    pub(super) mix: String,
    pub(super) proofs: usize,
    pub(super) wall_s: f64,
    pub(super) proofs_per_s: f64,
    /// Mean of NVML's utilization samples taken meanwhile (None without
    /// NVML).
    pub(super) gpu_utilization_percent: Option<f64>,
    pub(super) samples: usize,
    /// The same over the steady window: from the first proof queued on
    /// the device to the last one's finish, less NVML's averaging lag at
    /// the front (no first preparation, no last host sums).
    pub(super) steady_gpu_utilization_percent: Option<f64>,
    pub(super) steady_samples: usize,
    pub(super) steady_window_s: f64,
    /// Whether every proof was byte-identical to the case's reference.
    pub(super) identical_to_reference: bool,
}

/// Synthesizes `n` partitions, then proves them back to back (the next
/// started before the last is finished) while a thread samples the
/// GPU's utilization.
pub(super) fn sustained(
    backend: &dyn Backend,
    srs: &Arc<Srs>,
    circuit: &BenchCircuit,
    pinned: &Arc<PinnedPool>,
    pci_bus_id: &str,
    n: usize,
    reference: &Proof,
) -> Result<Sustained> {
    let id = circuit.id();
    let hints = CapacityHints::in_memory();
    let mut partitions = Vec::with_capacity(n);
    for _ in 0..n {
        partitions.push(synthesize(circuit.clone(), &id, pinned, &hints, AbcLayout::Exact, None)?.0);
    }
    let nvml = pinprove_cuda::Nvml::load().ok();
    let device = nvml.as_ref().and_then(|m| m.device_by_pci_bus_id(pci_bus_id).ok());
    let stop = AtomicBool::new(false);
    type Samples = Vec<(Instant, f64)>;
    type Run = (Duration, Samples, (Instant, Instant), bool);
    let (wall, samples, steady, identical) = thread::scope(|s| -> Result<Run> {
        let sampler = s.spawn(|| {
            let mut v = Vec::new();
            if let (Some(m), Some(d)) = (&nvml, device) {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(x) = m.sample(d) {
                        v.push((Instant::now(), f64::from(x.gpu_percent)));
                    }
                    thread::sleep(Duration::from_millis(50));
                }
            }
            v
        });
        let t = Instant::now();
        let mut steady = (t, t);
        // Two proofs in flight, as a worker and the engine's finalizer
        // keep them: the next one is started (prepared, queued on the
        // device) before the oldest is finished.
        let mut in_flight = std::collections::VecDeque::new();
        let check = |p: Vec<Proof>| p.iter().all(|p| p.to_bytes() == reference.to_bytes());
        let proved = (|| -> Result<bool, ProveError> {
            let mut identical = true;
            for (i, asg) in partitions.into_iter().enumerate() {
                let job = ProofBatch::new(Arc::clone(srs), vec![asg], vec![rs()]);
                in_flight.push_back(backend.start(job)?);
                if i == 0 {
                    steady.0 = Instant::now();
                }
                if in_flight.len() == 2 {
                    identical &= check(in_flight.pop_front().expect("two in flight").finish()?);
                }
            }
            while let Some(p) = in_flight.pop_front() {
                if in_flight.is_empty() {
                    steady.1 = Instant::now();
                }
                identical &= check(p.finish()?);
            }
            Ok(identical)
        })();
        let wall = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        let samples = sampler.join().unwrap_or_default();
        Ok((wall, samples, steady, proved?))
    })?;
    let all: Vec<f64> = samples.iter().map(|x| x.1).collect();
    let in_steady: Vec<f64> = samples
        .iter()
        .filter(|(at, _)| *at >= steady.0 + NVML_LAG && *at <= steady.1)
        .map(|x| x.1)
        .collect();
    Ok(Sustained {
        log_size: pinprove_groth16::domain::domain_size(circuit.constraints())?.trailing_zeros(),
        mix: circuit.mix().to_string(),
        proofs: n,
        wall_s: wall.as_secs_f64(),
        proofs_per_s: n as f64 / wall.as_secs_f64().max(1e-9),
        gpu_utilization_percent: mean(&all),
        samples: all.len(),
        steady_gpu_utilization_percent: mean(&in_steady),
        steady_samples: in_steady.len(),
        steady_window_s: steady.1.saturating_duration_since(steady.0).as_secs_f64(),
        identical_to_reference: identical,
    })
}

/// Threads synthesizing copies of a circuit until dropped.
pub(super) struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Busy {
    pub(super) fn start(n: usize, circuit: &BenchCircuit) -> Result<Busy> {
        let stop = Arc::new(AtomicBool::new(false));
        // Threads started so far are stopped by `Busy`'s drop if a
        // later one cannot start.
        let mut busy = Busy {
            stop: Arc::clone(&stop),
            threads: Vec::with_capacity(n),
        };
        for i in 0..n {
            let (stop, c) = (Arc::clone(&stop), circuit.clone().with_seed(1000 + i as u64));
            let t = thread::Builder::new()
                .name(format!("busy-{i}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(cs) = VecAssignment::synthesize(c.clone()) {
                            black_box(cs);
                        }
                    }
                })
                .context("starting a busy thread")?;
            busy.threads.push(t);
        }
        Ok(busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
