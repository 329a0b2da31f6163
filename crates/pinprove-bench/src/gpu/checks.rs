//! Each case's proof checked against the CPU backend and bellperson, and
//! timed against another GPU backend; a/b/c uploads timed.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use pinprove_cuda::runtime::{DeviceBuffer, Stream};
use pinprove_groth16::circuits::BenchCircuit;
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHints, Proof, ProofBatch, ProvingAssignment, Scalar, Srs, Validation, synthesize,
};
use pinprove_mem::PinnedPool;
use pinprove_stack::{BackendKind, NativeOptions};
use serde::Serialize;

use crate::report::median;

/// The (r, s) of every proof this benchmark makes: the same circuit then
/// always gives the same bytes, so every timed proof can be compared
/// with the case's checked one at no cost.
pub(super) fn rs() -> (Scalar, Scalar) {
    (Scalar::from(3u64), Scalar::from(5u64))
}

/// The parameters as `backend` wants them (decoded points, or only the
/// header for a backend that loads the file itself), prepared on it;
/// and the time that took.
pub(super) fn load(backend: &dyn Backend, path: &Path, pinned: &Arc<PinnedPool>) -> Result<(Arc<Srs>, Duration)> {
    let t = Instant::now();
    let srs = if backend.capabilities().needs_srs_points {
        Srs::read_file(path, pinned, Validation::OnCurve)?
    } else {
        Srs::read_file_header(path)?
    };
    backend.prepare_srs(&srs)?;
    Ok((Arc::new(srs), t.elapsed()))
}

#[derive(Serialize)]
pub(super) struct Comparison {
    pub(super) log_size: u32,
    pub(super) mix: String,
    pub(super) backend: &'static str,
    pub(super) gpu_proof_s: f64,
    pub(super) compare: &'static str,
    pub(super) compare_gpu_proof_s: f64,
    pub(super) speedup: f64,
    pub(super) identical_proofs: bool,
}

/// Proves `circuit` once on the GPU, once with the CPU backend and once
/// with bellperson, same parameters, r and s; are the bytes equal? Also
/// returns the GPU proof, the reference for the case's timed proofs.
pub(super) fn cross_check(
    circuit: &BenchCircuit,
    path: &Path,
    loaded: &Arc<Srs>,
    gpu: &dyn Backend,
    pool: &Arc<PinnedPool>,
) -> Result<(bool, bool, Proof)> {
    let rs = rs();
    let hints = CapacityHints::in_memory();
    let job = |srs: &Arc<Srs>, layout| -> Result<ProofBatch> {
        let (asg, _) = synthesize(circuit.clone(), &circuit.id(), pool, &hints, layout, None)?;
        Ok(ProofBatch::new(Arc::clone(srs), vec![asg], vec![rs]))
    };
    let proof = gpu.prove(job(loaded, AbcLayout::Exact)?)?.remove(0);
    let on_gpu = proof.to_bytes();
    let full = Arc::new(Srs::read_file(path, pool, Validation::OnCurve)?);
    let cpu = pinprove_stack::backend(BackendKind::Cpu, pool, 0, &NativeOptions::default())?.as_dyn();
    let on_cpu = cpu.prove(job(&full, AbcLayout::PaddedToDomain)?)?.remove(0).to_bytes();
    drop(full);
    let params = crate::reference::read(path)?;
    let theirs = crate::reference::prove(circuit.clone(), &params, rs.0, rs.1)?;
    Ok((on_gpu == on_cpu, on_gpu.to_vec() == theirs, proof))
}

/// Uploads a/b/c of `asg` from where they are, timed on the device.
pub(super) fn upload_abc(stream: &Stream, dev: &mut DeviceBuffer, asg: &ProvingAssignment) -> Result<(Duration, u64)> {
    let mut total = Duration::ZERO;
    let mut bytes = 0;
    for v in [asg.a(), asg.b(), asg.c()].into_iter().flatten() {
        total += stream.timed_upload(dev, v)?;
        bytes += std::mem::size_of_val(v) as u64;
    }
    Ok((total, bytes))
}

/// Proves `circuit` with `other` from pool buffers (`runs` times, the last
/// `reps` timed) and once more with the backend under test; compares the
/// proofs' bytes.
pub(super) fn compare_case(
    log: u32,
    circuit: &BenchCircuit,
    path: &Path,
    (ours, our_proof, our_time): (&dyn Backend, &Proof, f64),
    other: &dyn Backend,
    pinned: &Arc<PinnedPool>,
    (runs, reps): (usize, usize),
) -> Result<Comparison> {
    let (srs, _) = load(other, path, pinned)?;
    let hints = CapacityHints::in_memory();
    let rs = rs();
    let job = |srs: &Arc<Srs>| -> Result<ProofBatch> {
        let (asg, _) = synthesize(circuit.clone(), &circuit.id(), pinned, &hints, AbcLayout::Exact, None)?;
        Ok(ProofBatch::new(Arc::clone(srs), vec![asg], vec![rs]))
    };
    let mut times = Vec::new();
    let mut theirs = None;
    for run in 0..runs {
        let j = job(&srs)?;
        let t = Instant::now();
        let p = other.prove(j)?.remove(0);
        if run + reps >= runs {
            times.push(t.elapsed());
        }
        theirs = Some(p);
    }
    other.evict_srs(&srs);
    let theirs_s = median(&mut times).as_secs_f64();
    let identical = theirs.is_some_and(|p| p.to_bytes() == our_proof.to_bytes());
    eprintln!(
        "{}: {} {:.3} s, {} {:.3} s, identical proofs: {identical}",
        circuit.id(),
        ours.name(),
        our_time,
        other.name(),
        theirs_s
    );
    Ok(Comparison {
        log_size: log,
        mix: circuit.mix().to_string(),
        backend: ours.name(),
        gpu_proof_s: our_time,
        compare: other.name(),
        compare_gpu_proof_s: theirs_s,
        speedup: theirs_s / our_time.max(1e-9),
        identical_proofs: identical,
    })
}
