//! Synthesis of a circuit made of independent parts, in parallel.
//!
//! Filecoin's PoSt circuit is one part per sector: each part allocates its
//! own inputs and aux variables and refers to nothing outside itself but
//! the constant ONE. Such a circuit synthesizes part by part on all cores:
//! groups of parts go into assignments of their own (each with its own copy
//! of ONE as its first input), which are appended in order to the circuit's
//! assignment with [`ProvingAssignment::extend`] — the result is exactly
//! the sequential synthesis (the same R1CS, hence the same proof).
//!
//! The groups are small and run in waves of one per thread, so what exists
//! beside the circuit's own assignment at any time is about an eighth of
//! it, not a second full copy; the first wave's size sizes the rest (no
//! spills after it), and the buffers of one wave are reused by the next.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem};
use ff::Field;
use pinprove_mem::{PinnedPool, Reservation};
use rayon::prelude::*;

use crate::assignment::Capacities;
use crate::synth::synthesize_with;
use crate::{AbcLayout, CapacityHint, CapacityHints, ProveError, ProvingAssignment, Scalar, SynthesisStats};

/// Waves a circuit's parts are split into (at least: more with few threads).
const WAVES: usize = 8;

/// Like [`synthesize_sized`](crate::synthesize_sized) for a circuit made of
/// `parts` (see the module documentation): the same assignment, synthesized
/// in parallel on rayon's pool. Memory for the groups is taken from the
/// pool as work already admitted (it does not queue behind admissions).
pub fn synthesize_parts<T>(
    parts: &[T],
    circuit_id: &str,
    pool: &Arc<PinnedPool>,
    hints: &CapacityHints,
    layout: AbcLayout,
    funds: Option<Reservation>,
    fallback: Option<CapacityHint>,
) -> Result<(ProvingAssignment, SynthesisStats), ProveError>
where
    T: Sync,
    for<'a> &'a T: Circuit<Scalar>,
{
    let body = |cs: &mut ProvingAssignment, caps: Capacities| append_parts(parts, cs, pool, caps);
    synthesize_with(body, circuit_id, pool, hints, layout, funds, fallback)
}

fn append_parts<T>(
    parts: &[T],
    cs: &mut ProvingAssignment,
    pool: &Arc<PinnedPool>,
    caps: Capacities,
) -> Result<(), ProveError>
where
    T: Sync,
    for<'a> &'a T: Circuit<Scalar>,
{
    if parts.is_empty() {
        return Ok(());
    }
    let threads = rayon::current_num_threads().max(1);
    let group = parts.len().div_ceil(threads * WAVES).max(1);
    let groups: Vec<&[T]> = parts.chunks(group).collect();
    // Per part, from the circuit's capacities (its hint) until a wave has
    // shown the real sizes.
    let n = parts.len();
    let mut per_part = Capacities {
        constraints: caps.constraints / n,
        inputs: caps.inputs / n,
        aux: caps.aux / n,
    };
    let mut appended = 0;
    for wave in groups.chunks(threads) {
        let done: Vec<Result<ProvingAssignment, ProveError>> = wave
            .par_iter()
            .map(|g| synthesize_group(g, pool, scaled(per_part, g.len())))
            .collect();
        for d in done {
            let d = d?;
            cs.extend(&d);
            if let Some(e) = cs.take_error() {
                return Err(e);
            }
        }
        // Parts are alike: what the ones so far took sizes the rest (the
        // circuit's assignment held only ONE before them).
        appended += wave.iter().map(|g| g.len()).sum::<usize>();
        per_part = Capacities {
            constraints: cs.num_constraints().div_ceil(appended),
            inputs: (cs.num_inputs() - 1).div_ceil(appended),
            aux: cs.num_aux().div_ceil(appended),
        };
    }
    Ok(())
}

fn scaled(per_part: Capacities, parts: usize) -> Capacities {
    Capacities {
        constraints: per_part.constraints.saturating_mul(parts),
        // Each group has its own ONE.
        inputs: per_part.inputs.saturating_mul(parts).saturating_add(1),
        aux: per_part.aux.saturating_mul(parts),
    }
}

/// One group of parts in an assignment of its own, ONE first.
fn synthesize_group<T>(group: &[T], pool: &Arc<PinnedPool>, caps: Capacities) -> Result<ProvingAssignment, ProveError>
where
    for<'a> &'a T: Circuit<Scalar>,
{
    // Charged to an empty reservation: taken as urgent memory of admitted
    // work, not queued behind admissions.
    let mut urgent = Reservation::empty(pool.budget());
    let mut part = ProvingAssignment::with_capacities(pool, caps, Some(&mut urgent))?;
    part.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    for p in group {
        p.synthesize(&mut part)?;
    }
    match part.take_error() {
        Some(e) => Err(e),
        None => Ok(part),
    }
}
