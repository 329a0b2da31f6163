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
//! it, not a second full copy ([`parts_scratch_bytes`]); the first wave's size
//! sizes the rest (no spills after it), and the buffers of one wave are
//! reused by the next. The first wave's buffers are paid out of the job's
//! funds (admission counts [`parts_scratch_bytes`] for a circuit made of parts);
//! later waves reuse them from the pool, already covered.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use ff::Field;
use pinprove_mem::{PinnedPool, Reservation};
use rayon::prelude::*;

use crate::assignment::Capacities;
use crate::synth::SynthesisTarget;
use crate::{CapacityHint, ProveError, ProvingAssignment, Scalar, SynthesisStats};

/// Parts synthesized one after the other into one constraint system: the
/// circuit they make together.
pub(crate) struct Sequence<'p, T>(pub(crate) &'p [T]);

impl<T> Circuit<Scalar> for Sequence<'_, T>
where
    for<'a> &'a T: Circuit<Scalar>,
{
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.iter().try_for_each(|part| part.synthesize(cs))
    }
}

/// Waves a circuit's parts are split into (at least: more with few threads).
const WAVES: usize = 8;

impl SynthesisTarget<'_> {
    /// Like [`synthesize`](Self::synthesize) for a circuit made of `parts`
    /// (see the module documentation): the same assignment, synthesized in
    /// parallel on rayon's pool. Memory for the groups is taken from the
    /// pool as work already admitted (it does not queue behind admissions).
    pub fn synthesize_parts<T>(self, parts: &[T]) -> Result<(ProvingAssignment, SynthesisStats), ProveError>
    where
        T: Sync,
        for<'a> &'a T: Circuit<Scalar>,
    {
        let pool = self.pool;
        self.synthesize_with(|cs, caps, funds| append_parts(parts, cs, pool, caps, funds))
    }
}

/// The memory the groups of a circuit of `parts` parts take beside its
/// assignment, when the whole circuit has `shape`: one wave of groups'
/// buffers, as `pool` sizes them (later waves reuse them).
pub fn parts_scratch_bytes(pool: &PinnedPool, shape: CapacityHint, parts: usize) -> u64 {
    if parts == 0 {
        return 0;
    }
    let (threads, group) = grouping(parts);
    let groups = parts.div_ceil(group).min(threads) as u64;
    let share = |n: usize| n.saturating_mul(group).div_ceil(parts);
    let rounded = |elems: usize| pool.rounded_size(elems.saturating_mul(32)).unwrap_or(usize::MAX) as u64;
    let one_group = rounded(share(shape.constraints))
        .saturating_mul(3)
        .saturating_add(rounded(share(shape.inputs).saturating_add(1)))
        .saturating_add(rounded(share(shape.aux)));
    one_group.saturating_mul(groups)
}

/// For a circuit of `parts` parts: the groups run at once (one per thread
/// of rayon's pool), and the parts in each group.
pub(crate) fn grouping(parts: usize) -> (usize, usize) {
    let threads = rayon::current_num_threads().max(1);
    (threads, parts.div_ceil(threads * WAVES).max(1))
}

fn append_parts<T>(
    parts: &[T],
    cs: &mut ProvingAssignment,
    pool: &Arc<PinnedPool>,
    caps: Capacities,
    mut funds: Option<&mut Reservation>,
) -> Result<(), ProveError>
where
    T: Sync,
    for<'a> &'a T: Circuit<Scalar>,
{
    if parts.is_empty() {
        return Ok(());
    }
    let (threads, group) = grouping(parts.len());
    let groups: Vec<&[T]> = parts.chunks(group).collect();
    // What the job was admitted with for its groups: what is left of its
    // funds after its own assignment, up to one wave's share.
    let mut scratch = match funds.as_deref_mut() {
        Some(f) => {
            let shape = CapacityHint {
                constraints: caps.constraints,
                inputs: caps.inputs,
                aux: caps.aux,
            };
            f.split(parts_scratch_bytes(pool, shape, parts.len()))
        }
        None => Reservation::empty(pool.budget()),
    };
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
        // The wave's groups share what is left of the scratch funds by their
        // parts (once the first wave's buffers are back in the pool, later
        // waves reuse them and need none).
        let (total, in_wave) = (scratch.bytes(), wave.iter().map(|g| g.len()).sum::<usize>().max(1));
        let shares: Vec<Reservation> = wave
            .iter()
            .map(|g| scratch.split(total * g.len() as u64 / in_wave as u64))
            .collect();
        let done: Vec<(Result<ProvingAssignment, ProveError>, Reservation)> = wave
            .par_iter()
            .zip(shares)
            .map(|(g, mut share)| (synthesize_group(g, pool, scaled(per_part, g.len()), &mut share), share))
            .collect();
        for (d, share) in done {
            scratch.merge(share).map_err(ProveError::from)?;
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
    // Unspent (the pool had the buffers already): back to the job.
    if let Some(f) = funds {
        f.merge(scratch)?;
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

/// One group of parts in an assignment of its own, ONE first, paid out of
/// `share` (beyond it, as urgent memory of admitted work: not queued behind
/// admissions).
fn synthesize_group<T>(
    group: &[T],
    pool: &Arc<PinnedPool>,
    caps: Capacities,
    share: &mut Reservation,
) -> Result<ProvingAssignment, ProveError>
where
    for<'a> &'a T: Circuit<Scalar>,
{
    let mut part = ProvingAssignment::with_capacities(pool, caps, Some(share))?;
    part.alloc_input(|| "one", || Ok(Scalar::ONE))?;
    for p in group {
        p.synthesize(&mut part)?;
    }
    match part.take_error() {
        Some(e) => Err(e),
        None => Ok(part),
    }
}
