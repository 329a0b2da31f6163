//! One partition alone, outside the engine: its shape, densities, aux
//! values and the heap its synthesis holds; with `--precompiled`, its
//! circuit recorded and synthesized from the recording.

use std::time::Instant;

use anyhow::{Context, Result, ensure};
use pinprove_engine::SynthesisContext;
use pinprove_filecoin::{FilecoinProver, ProofRequest};
use pinprove_groth16::Scalar;
use pinprove_mem::sys;
use pinprove_stack::Stack;
use serde::Serialize;

use super::secs;
use crate::report::bytes;

/// One partition, synthesized alone.
#[derive(Serialize)]
pub struct PartitionProfile {
    pub(super) constraints: usize,
    pub(super) inputs: usize,
    pub(super) aux: usize,
    /// Aux variables A uses, inputs and aux variables B uses.
    pub(super) a_aux_density: usize,
    pub(super) b_input_density: usize,
    pub(super) b_aux_density: usize,
    /// Shares of the aux values: 0, 1, below 2^64 (else), the rest.
    pub(super) aux_zero: f64,
    pub(super) aux_one: f64,
    pub(super) aux_small: f64,
    pub(super) aux_large: f64,
    pub(super) abc_bytes: u64,
    pub(super) aux_bytes: u64,
    pub(super) synthesis_alone_s: f64,
    /// Heap the synthesis held at its peak beyond the pool buffers it
    /// pinned (see [`HeapWatch`]); absent where the kernel does not say.
    pub(super) synthesis_heap_bytes: Option<u64>,
    /// With --precompiled: the same partition's circuit recorded, then
    /// synthesized from the recording (witness only).
    pub(super) precompiled: Option<PrecompiledProfile>,
}

/// The heap a synthesis holds at its peak beyond the pool buffers it pins:
/// the process's peak resident memory over the synthesis, less what was
/// resident before and what the pool allocated meanwhile (its buffers are
/// resident once allocated). The heap's free pages are given back first:
/// a synthesis reusing what an earlier phase freed (counting the shape of a
/// WindowPoSt's blank circuit leaves gigabytes) would not grow the resident
/// set. What admission does not count unless the partition declares it
/// (`Partition::heap_bytes`). Only meaningful with nothing else running,
/// as in the profile.
struct HeapWatch {
    growth: sys::PeakGrowth,
    pool_bytes: u64,
}

impl HeapWatch {
    fn start(pool: &pinprove_mem::PinnedPool) -> Self {
        sys::trim_heap();
        HeapWatch {
            growth: sys::PeakGrowth::start(),
            pool_bytes: pool.stats().allocated_bytes,
        }
    }

    fn finish(self, pool: &pinprove_mem::PinnedPool) -> Option<u64> {
        let pinned = pool.stats().allocated_bytes.saturating_sub(self.pool_bytes);
        Some(self.growth.bytes()?.saturating_sub(pinned))
    }
}

/// A partition's circuit pre-compiled, alone on the host.
#[derive(Serialize)]
pub struct PrecompiledProfile {
    pub(super) record_s: f64,
    pub(super) recording_bytes: u64,
    pub(super) nonzero_entries: usize,
    pub(super) coefficients: usize,
    /// Witness-only synthesis, into pool buffers.
    pub(super) witness_s: f64,
    pub(super) witness_bytes: u64,
    /// Heap the witness-only synthesis held at its peak beyond its pool
    /// buffers.
    pub(super) witness_heap_bytes: Option<u64>,
    /// a/b/c from the recording on the host's cores (what the GPU does
    /// with the native backend); absent where they would not fit in memory.
    pub(super) host_evaluation_s: Option<f64>,
}

/// Shares of aux values that are 0, 1, other values below 2^64, the rest.
pub(super) fn value_classes(aux: &[Scalar]) -> [f64; 4] {
    use rayon::prelude::*;
    let counts = aux
        .par_iter()
        .fold(
            || [0usize; 4],
            |mut c, v| {
                let b = v.to_bytes_le();
                let small = b[8..].iter().all(|&x| x == 0);
                let low = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                c[match (small, low) {
                    (true, 0) => 0,
                    (true, 1) => 1,
                    (true, _) => 2,
                    (false, _) => 3,
                }] += 1;
                c
            },
        )
        .reduce(|| [0; 4], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]);
    let n = aux.len().max(1) as f64;
    counts.map(|c| c as f64 / n)
}

/// One partition of `req`, synthesized alone outside the engine (and,
/// with `precompiled`, recorded, then synthesized from the recording).
pub(super) fn partition_alone(
    prover: &FilecoinProver,
    stack: &Stack,
    req: &ProofRequest,
    circuit: &str,
    precompiled: bool,
) -> Result<PartitionProfile> {
    let engine = prover.engine();
    let mut parts = prover.prepare(req)?.into_partitions();
    ensure!(!parts.is_empty(), "the request has no partitions");
    let part = parts.swap_remove(0);
    let copies = if precompiled {
        let copy = || {
            part.fresh_circuit()
                .context("this kind's partitions are not pre-compiled (they stay classic)")
        };
        Some((copy()?, copy()?))
    } else {
        None
    };
    drop(parts);
    let hint = engine.circuit_shape(circuit)?;
    let funds = stack
        .budget
        .acquire_blocking(hint.abc_bytes() + hint.assignment_bytes())
        .context("memory for one partition")?;
    let layout = stack.devices[0].backend.capabilities().abc_layout;
    let heap = HeapWatch::start(&stack.pool);
    let t = Instant::now();
    let (asg, _) = part.synthesize(SynthesisContext {
        circuit_id: circuit,
        pool: &stack.pool,
        hints: engine.hints(),
        layout,
        funds,
        shape: Some(hint),
    })?;
    let alone = t.elapsed();
    let synthesis_heap_bytes = heap.finish(&stack.pool);
    let [zero, one, small, large] = value_classes(asg.aux());
    let (constraints, inputs, aux) = (asg.num_constraints(), asg.num_inputs(), asg.num_aux());
    let densities = [
        asg.densities().a_aux.total(),
        asg.densities().b_input.total(),
        asg.densities().b_aux.total(),
    ];
    drop(asg);
    // The recording is not in the budget: give the classic buffers back.
    stack.pool.shrink(u64::MAX);
    let precompiled = copies
        .map(|(to_record, to_prove)| -> Result<PrecompiledProfile> {
            let t = Instant::now();
            let rec = to_record.record(circuit)?;
            let record_s = secs(t.elapsed());
            let stats = rec.stats();
            eprintln!(
                "recorded in {record_s:.1} s: {} non-zero entries, {} coefficients, {}",
                stats.nnz.iter().sum::<usize>(),
                stats.coefficients,
                bytes(stats.bytes)
            );
            let heap = HeapWatch::start(&stack.pool);
            let t = Instant::now();
            let w = to_prove.synthesize_witness(&rec, &stack.pool, None)?;
            let witness_s = secs(t.elapsed());
            let witness_heap_bytes = heap.finish(&stack.pool);
            let witness_bytes = 32 * (w.inputs.len() + w.aux.len()) as u64;
            // a/b/c beside the recording and the witness, where they fit.
            let abc = 3 * 32 * constraints as u64;
            let room = stack.budget.total().saturating_sub(stats.bytes + witness_bytes);
            let host_evaluation_s = if abc <= room {
                let t = Instant::now();
                let evaluated = pinprove_groth16::precompiled::evaluate(&rec, w, &stack.pool, layout, &mut None)?;
                let took = secs(t.elapsed());
                drop(evaluated);
                Some(took)
            } else {
                eprintln!("a/b/c from the recording on the host: skipped (they would not fit beside it)");
                None
            };
            eprintln!("witness only in {witness_s:.1} s");
            Ok(PrecompiledProfile {
                record_s,
                recording_bytes: stats.bytes,
                nonzero_entries: stats.nnz.iter().sum(),
                coefficients: stats.coefficients,
                witness_s,
                witness_bytes,
                witness_heap_bytes,
                host_evaluation_s,
            })
        })
        .transpose()?;
    Ok(PartitionProfile {
        constraints,
        inputs,
        aux,
        a_aux_density: densities[0],
        b_input_density: densities[1],
        b_aux_density: densities[2],
        aux_zero: zero,
        aux_one: one,
        aux_small: small,
        aux_large: large,
        abc_bytes: 3 * 32 * constraints as u64,
        aux_bytes: 32 * aux as u64,
        synthesis_alone_s: secs(alone),
        synthesis_heap_bytes,
        precompiled,
    })
}
