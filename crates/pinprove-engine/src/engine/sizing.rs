//! How much memory a partition of a circuit type is admitted with: its
//! vectors as the pool rounds them (none of a/b/c where the devices compute
//! them from the circuit's recording), densities, its backend's share, the
//! scratch of a circuit in parts, and which pool buffers it will check out.
//! One rule, read by admission, the warm sets and the engine's own sizing.

use std::sync::Arc;

use pinprove_groth16::{AbcLayout, Backend, CapacityHints, QueryLengths, domain::domain_size};
use pinprove_mem::PinnedPool;

use super::precompiler::Precompiler;
use crate::EngineError;
use crate::srs::SrsRegistry;

/// What sizing reads: the circuits' parameters and hints, their
/// recordings, the backends' shares.
pub(super) struct Sizing {
    pool: Arc<PinnedPool>,
    srs: Arc<SrsRegistry>,
    hints: Arc<CapacityHints>,
    precompiled: Arc<Precompiler>,
    backends: Vec<Arc<dyn Backend>>,
    /// How synthesis lays a/b/c out (padded for a backend that runs the
    /// FFT on the CPU).
    layout: AbcLayout,
    /// Whether pre-compiled partitions leave a/b/c to the devices (every
    /// backend computes them there).
    abc_on_device: bool,
}

impl Sizing {
    pub(super) fn new(
        pool: Arc<PinnedPool>,
        srs: Arc<SrsRegistry>,
        hints: Arc<CapacityHints>,
        precompiled: Arc<Precompiler>,
        backends: Vec<Arc<dyn Backend>>,
    ) -> Sizing {
        // Synthesis serves every device: pad for the FFT when any backend
        // runs it on the CPU.
        let layout = if backends
            .iter()
            .any(|b| b.capabilities().abc_layout == AbcLayout::PaddedToDomain)
        {
            AbcLayout::PaddedToDomain
        } else {
            AbcLayout::Exact
        };
        let abc_on_device = backends.iter().all(|b| b.capabilities().evaluates_recordings);
        Sizing {
            pool,
            srs,
            hints,
            precompiled,
            backends,
            layout,
            abc_on_device,
        }
    }

    /// How synthesis lays a/b/c out.
    pub(super) fn layout(&self) -> AbcLayout {
        self.layout
    }

    /// Whether every backend computes a recorded circuit's a/b/c itself.
    pub(super) fn abc_on_device(&self) -> bool {
        self.abc_on_device
    }

    /// Host bytes one partition of `circuit_id` needs while in flight: its
    /// vectors (as the pool rounds them; no a/b/c where a recording lets the
    /// devices compute them), densities, and what the backends add. From
    /// the capacity hint, or from the parameters' shape before the first
    /// synthesis. A hint that is implausible, or that disagrees with
    /// the parameters (other inputs or aux, more constraints than their
    /// domain), is discarded and relearned: a tampered hints file must not
    /// turn every later submission away. A partition made of `parts` parts
    /// (0: synthesized whole) also has its groups' buffers while it
    /// synthesizes classically (see
    /// [`pinprove_groth16::parts_scratch_bytes`]); from a recording it
    /// computes its witness whole and has none (a partition that falls
    /// back tops its funds up, as for a/b/c).
    /// `urgent`: for a partition of an urgent job (backends may add more
    /// for it).
    pub(super) fn working_set(&self, circuit_id: &str, parts: usize, urgent: bool) -> Result<u64, EngineError> {
        let (shape, n, queries) = self.partition_shape(circuit_id)?;
        let vec = |elems: usize| self.pool.rounded_size(elems.saturating_mul(32)).unwrap_or(usize::MAX) as u64;
        let densities = (shape.inputs.saturating_add(shape.aux.saturating_mul(2)) / 8 + 64) as u64;
        let extra = self
            .backends
            .iter()
            .map(|b| b.extra_working_set(&shape, queries.as_ref(), urgent))
            .max()
            .unwrap_or(0);
        // A partition that falls back to the classic synthesis tops its
        // funds up when it takes a/b/c (urgently: it was admitted).
        let abc = if self.abc_on_host(circuit_id) {
            vec(n).saturating_mul(3)
        } else {
            0
        };
        let scratch = if self.precompiled.ready_recording(circuit_id).is_some() {
            0
        } else {
            pinprove_groth16::parts_scratch_bytes(&self.pool, shape, parts)
        };
        Ok(abc
            .saturating_add(vec(shape.inputs))
            .saturating_add(vec(shape.aux))
            .saturating_add(densities)
            .saturating_add(extra)
            .saturating_add(scratch))
    }

    /// Whether partitions of `circuit_id` synthesize a, b and c into host
    /// memory (all but pre-compiled circuits whose a/b/c the devices
    /// compute).
    pub(super) fn abc_on_host(&self, circuit_id: &str) -> bool {
        !(self.abc_on_device
            && self
                .precompiled
                .ready_recording(circuit_id)
                .is_some_and(|rec| self.devices_evaluate(&rec)))
    }

    /// Whether every device computes the a/b/c of `recording`'s circuit
    /// itself (a device whose memory plan leaves the circuit's matrices on
    /// the host does not: then synthesis computes them, within the
    /// partition's admission).
    pub(super) fn devices_evaluate(&self, recording: &Arc<pinprove_groth16::precompiled::Recording>) -> bool {
        self.abc_on_device && self.backends.iter().all(|b| b.evaluates_recording(recording))
    }

    /// The pool buffers one partition of `circuit_id` synthesizes into, in
    /// bytes: a, b, c (none where the devices compute them), inputs and aux
    /// (what a warm set prepares).
    pub(super) fn partition_buffers(&self, circuit_id: &str) -> Result<[usize; 5], EngineError> {
        let (shape, n, _) = self.partition_shape(circuit_id)?;
        let bytes = |elems: usize| elems.saturating_mul(32);
        let abc = if self.abc_on_host(circuit_id) { bytes(n) } else { 0 };
        Ok([abc, abc, abc, bytes(shape.inputs), bytes(shape.aux)])
    }

    /// The pool buffers a partition of `circuit_id` takes between its
    /// admission and its proof: those it synthesizes into, and for an
    /// `urgent` one also those its backend prepares into (as a proof of
    /// the circuit showed; see
    /// [`BackendHint::host_buffers`](pinprove_groth16::BackendHint)), so
    /// that admission (and a circuit's kept set) holds those too. Not for
    /// background partitions: they would hold their backend's buffers
    /// from admission on, through synthesis and the wait for a device,
    /// while the partitions at the device need them (measured on the H200
    /// at 2^24, with preparation ahead of the device: each of 16 partitions
    /// pinned its own, 80 fresh buffers, the GPU 81.6% busy against 94.5%).
    /// Within the working set `ws`: a hint naming more (stale, or tampered
    /// with) adds only what fits.
    pub(super) fn admission_buffers(&self, circuit_id: &str, ws: u64, urgent: bool) -> Result<Vec<usize>, EngineError> {
        let mut buffers = self.partition_buffers(circuit_id)?.to_vec();
        if !urgent {
            return Ok(buffers);
        }
        let mut room = ws.saturating_sub(buffers.iter().map(|&b| b as u64).sum());
        let prepared = self
            .backends
            .iter()
            .find_map(|b| self.hints.backend_hint(circuit_id, b.name()))
            .map(|h| h.host_buffers)
            .unwrap_or_default();
        for b in prepared {
            if b > 0 && b <= room {
                room -= b;
                buffers.push(b as usize);
            }
        }
        Ok(buffers)
    }

    /// A partition's shape (see `working_set`), the length of its a, b and
    /// c under the engine's layout, and its parameters' query lengths when
    /// they are registered (one header read gives both).
    fn partition_shape(
        &self,
        circuit_id: &str,
    ) -> Result<(pinprove_groth16::CapacityHint, usize, Option<QueryLengths>), EngineError> {
        let budget = self.pool.budget().total();
        let header = self.srs.shape_and_lengths(circuit_id);
        let queries = header.as_ref().ok().map(|(_, q)| *q);
        let params = header.map(|(shape, _)| shape);
        let hint = pinprove_groth16::plausible_hint(&self.hints, circuit_id, self.layout, budget).filter(|h| {
            let Ok(p) = &params else { return true };
            let agrees = h.inputs == p.inputs && h.aux == p.aux && h.constraints <= p.constraints;
            if !agrees {
                tracing::warn!(circuit = circuit_id, hint = ?h, parameters = ?p, "capacity hint disagrees with the parameters; discarded and relearned");
                self.hints.forget(circuit_id);
            }
            agrees
        });
        let shape = match hint {
            Some(h) => h,
            None => params?,
        };
        let n = match self.layout {
            AbcLayout::Exact => shape.constraints,
            AbcLayout::PaddedToDomain => domain_size(shape.constraints)?,
        };
        Ok((shape, n, queries))
    }
}
