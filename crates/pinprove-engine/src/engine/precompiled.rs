//! How the engine synthesizes a partition when its circuit type has a
//! recording (see [`Precompiler`](super::precompiler::Precompiler) for the
//! recordings themselves): the witness from a copy of the circuit, a/b/c
//! from the recording (or on the devices), and the classic synthesis of the
//! untouched partition when that fails.

use std::sync::Arc;
use std::time::Instant;

use pinprove_groth16::precompiled::{defer, evaluate};
use pinprove_groth16::{ProveError, ProvingAssignment};
use pinprove_mem::Reservation;

use super::inner::Inner;
use super::precompiler::Held;
use crate::job::{Partition, SynthesisContext};

impl Inner {
    /// Starts recording `circuit_id` from a copy of `partition` when
    /// pre-compiled synthesis is on and the circuit type has no recording
    /// (nor one being made); returns whether one is being made or held.
    pub(super) fn precompile(&self, circuit_id: &str, partition: &dyn Partition) -> bool {
        self.plan_recording(circuit_id, partition).is_some() || self.precompiled.held_or_recording(circuit_id)
    }

    /// [`Precompiler::plan`] with what this engine knows of the circuit
    /// type: the bytes to reserve while recording, and its parameters'
    /// query lengths.
    fn plan_recording(&self, circuit_id: &str, partition: &dyn Partition) -> Option<Arc<Held>> {
        let estimate = || {
            // Matrices of a few entries a row take about what a, b and c do.
            self.sizing
                .partition_buffers(circuit_id)
                .map_or(0, |b| b[..3].iter().sum::<usize>() as u64)
        };
        let lengths = || self.srs.shape_and_lengths(circuit_id).ok().map(|(_, l)| l);
        self.precompiled.plan(circuit_id, partition, estimate, lengths)
    }

    /// Synthesizes a partition as its circuit type's mode says: from the
    /// recording, falling back to the classic synthesis of the untouched
    /// partition, or classically.
    pub(super) fn synthesize_partition(
        &self,
        partition: Box<dyn Partition>,
        mut ctx: SynthesisContext<'_>,
    ) -> Result<ProvingAssignment, ProveError> {
        let id = ctx.circuit_id;
        if let Some(held) = self.plan_recording(id, &*partition)
            && let Some(fresh) = partition.fresh_circuit()
        {
            let started = Instant::now();
            let mut funds = std::mem::replace(&mut ctx.funds, Reservation::empty(&self.budget));
            let rec = held.recording();
            let attempt = match fresh.synthesize_witness(rec, ctx.pool, Some(&mut funds)) {
                Ok(witness) => {
                    let witness_time = started.elapsed();
                    let mut left = Some(funds);
                    // Where the devices compute a/b/c, only the witness is
                    // held.
                    let on_device = self.sizing.devices_evaluate(rec);
                    let made = if on_device {
                        defer(Arc::clone(rec), witness, &mut left)
                    } else {
                        evaluate(rec, witness, ctx.pool, ctx.layout, &mut left)
                    };
                    if let Some(funds) = left {
                        // It failed: the admission pays for the classic
                        // synthesis instead.
                        ctx.funds = funds;
                    }
                    made.inspect(|_| {
                        tracing::debug!(
                            circuit = id,
                            witness_ms = witness_time.as_millis() as u64,
                            evaluation_ms = (started.elapsed() - witness_time).as_millis() as u64,
                            abc_on_device = on_device,
                            "synthesized from the recording"
                        );
                    })
                }
                Err(e) => {
                    // Whatever the witness took went back to the pool; the
                    // rest of the admission pays for the classic synthesis.
                    ctx.funds = funds;
                    Err(e)
                }
            };
            match attempt {
                Ok(asg) => {
                    self.precompiled.count(id, true);
                    return Ok(asg);
                }
                Err(e) => self.precompiled.failed(id, &e),
            }
        }
        self.precompiled.count(id, false);
        partition.synthesize(ctx).map(|(asg, _)| asg)
    }
}
