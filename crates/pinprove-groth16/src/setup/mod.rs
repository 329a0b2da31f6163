//! Groth16 parameters for a circuit: pinprove's own setup.
//!
//! A one-party setup with fresh toxic waste, for test sizes and lab
//! circuits: production Filecoin parameters come from the network's
//! ceremony and are never made here. The file is bellperson's format
//! (`Parameters::write`), so bellperson and filecoin-proofs read it and
//! verify proofs made with it, and existing parameter caches keep working.
//! Given the same toxic waste the file is byte for byte bellperson's
//! generator's (a test holds it to that).
//!
//! What makes it fast: the circuit is recorded once
//! ([`record`](crate::precompiled::record)), the QAP is evaluated at τ from
//! the recorded matrices column by column on every core, and every point is
//! a product of one of two fixed bases (the G1 and G2 generators of the
//! setup) by a scalar, made by table lookup: one mixed addition per signed
//! 16-bit digit, no doublings, and one inversion per batch of 512 points
//! to make them affine. bellperson's generator spends about 255 doublings
//! per point and an inversion per point.
//!
//! Measured on the 2-core development machine: see `pinprove-bench params`
//! and docs/benchmarks.md.

pub(crate) mod fixed_base;
mod qap;

use std::io::Write;
use std::time::{Duration, Instant};

use bellpepper_core::Circuit;
use blstrs::{G1Projective, G2Projective};
use ff::Field;
use group::{Curve, Group, UncompressedEncoding};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::domain::Domain;
use crate::precompiled::{Recording, record};
use crate::{Scalar, SetupError, VerifyingKey};
use fixed_base::{FixedBase, SetupGroup};

/// The secrets of one setup. Whoever knows them can forge proofs: they
/// live only while the parameters are made.
pub struct ToxicWaste {
    /// The G1 base.
    pub g1: G1Projective,
    /// The G2 base.
    pub g2: G2Projective,
    /// α.
    pub alpha: Scalar,
    /// β.
    pub beta: Scalar,
    /// γ.
    pub gamma: Scalar,
    /// δ.
    pub delta: Scalar,
    /// τ, the point the QAP is evaluated at.
    pub tau: Scalar,
}

impl ToxicWaste {
    /// Fresh secrets from `rng`, drawn in the order bellperson's
    /// `generate_random_parameters` draws them (so one seed makes the same
    /// parameters with either).
    pub fn random(rng: &mut impl RngCore) -> ToxicWaste {
        ToxicWaste {
            g1: G1Projective::random(&mut *rng),
            g2: G2Projective::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }
}

impl std::fmt::Debug for ToxicWaste {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToxicWaste(..)")
    }
}

/// Where a setup is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupStage {
    /// Recording the circuit's constraints.
    Recording,
    /// Evaluating the QAP at τ and building the bases' tables.
    Evaluating,
    /// Computing and writing points: `done` of `total` (a G2 point counts
    /// three, its cost against a G1 point's).
    Points {
        /// Weighted points written.
        done: u64,
        /// Weighted points in all.
        total: u64,
    },
}

/// What one setup made and how long each part took.
#[derive(Clone, Copy, Debug)]
pub struct SetupStats {
    /// Constraints, the input constraints included.
    pub constraints: usize,
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// G1 points written (verifying key's included).
    pub g1_points: usize,
    /// G2 points written (verifying key's included).
    pub g2_points: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Recording the circuit (zero when given a recording).
    pub record: Duration,
    /// QAP at τ and the bases' tables.
    pub evaluate: Duration,
    /// Computing, encoding and writing the points.
    pub points: Duration,
}

/// Records `circuit` (its blank form will do: no value is asked for) and
/// writes its parameters for `waste` to `w`; returns their verifying key
/// (the start of what was written) and what was made.
pub fn generate<C: Circuit<Scalar>>(
    circuit: C,
    waste: &ToxicWaste,
    w: &mut impl Write,
    progress: &(dyn Fn(SetupStage) + Sync),
) -> Result<(VerifyingKey, SetupStats), SetupError> {
    progress(SetupStage::Recording);
    let t = Instant::now();
    let recording = record(circuit, "setup")?;
    let record = t.elapsed();
    let (vk, stats) = write_parameters(&recording, waste, w, progress)?;
    Ok((vk, SetupStats { record, ..stats }))
}

/// G1 and G2 points written in one batch: bounds what is held besides the
/// scalars (about 6 MiB of G1 points).
const WRITE_BATCH: usize = 1 << 16;

/// Writes the parameters of the recorded circuit for `waste` to `w`;
/// returns their verifying key and what was made.
pub fn write_parameters(
    recording: &Recording,
    waste: &ToxicWaste,
    w: &mut impl Write,
    progress: &(dyn Fn(SetupStage) + Sync),
) -> Result<(VerifyingKey, SetupStats), SetupError> {
    progress(SetupStage::Evaluating);
    let started = Instant::now();
    let matrices = recording.matrices()?;
    let (inputs, aux) = (recording.num_inputs(), recording.num_aux());
    let constraints = recording.num_constraints();
    let domain = Domain::new(constraints).map_err(|e| SetupError::TooLarge(e.to_string()))?;
    let n = domain.size();
    if [n - 1, inputs + aux].into_iter().any(|k| k > u32::MAX as usize) {
        return Err(SetupError::TooLarge(format!(
            "{constraints} constraints, {} variables: beyond the file format's 2^32 points",
            inputs + aux
        )));
    }
    let degenerate = || SetupError::TooLarge("γ or δ is zero".into());
    let gamma_inv = Option::<Scalar>::from(waste.gamma.invert()).ok_or_else(degenerate)?;
    let delta_inv = Option::<Scalar>::from(waste.delta.invert()).ok_or_else(degenerate)?;

    let at = qap::evaluate(&matrices, inputs + aux, &qap::lagrange_at(waste.tau, &domain))?;
    drop(domain);
    // h: τ^i·Z(τ)/δ for i < n − 1 (Z(τ) = τ^n − 1 vanishes on the domain).
    let h_coeff = (waste.tau.pow_vartime([n as u64]) - Scalar::ONE) * delta_inv;
    let mut h = qap::powers(waste.tau, n - 1);
    h.par_iter_mut().for_each(|x| *x *= h_coeff);
    // IC (inputs, over γ) and L (aux, over δ): (β·a + α·b + c)/γ or δ.
    let combined = |v: usize, inv: Scalar| (waste.beta * at.a[v] + waste.alpha * at.b[v] + at.c[v]) * inv;
    let ic: Vec<Scalar> = (0..inputs).into_par_iter().map(|v| combined(v, gamma_inv)).collect();
    let l: Vec<Scalar> = (inputs..inputs + aux)
        .into_par_iter()
        .map(|v| combined(v, delta_inv))
        .collect();
    if let Some(index) = l.iter().position(|s| bool::from(s.is_zero())) {
        return Err(SetupError::UnconstrainedVariable { index });
    }
    // A and B leave out the variables whose polynomial is zero at τ (the
    // points at infinity), as the prover's densities do.
    let non_zero = |v: &[Scalar]| -> Vec<Scalar> { v.iter().copied().filter(|s| !bool::from(s.is_zero())).collect() };
    let (a, b) = (non_zero(&at.a), non_zero(&at.b));
    drop(at);

    let g1 = FixedBase::new(waste.g1, ic.len() + h.len() + l.len() + a.len() + b.len());
    let g2 = FixedBase::new(waste.g2, b.len());
    tracing::debug!(
        constraints,
        g1_table_bytes = g1.bytes(),
        g2_table_bytes = g2.bytes(),
        "setup: QAP at τ, tables built"
    );
    let evaluate = started.elapsed();

    let started = Instant::now();
    let (g1_base, g2_base) = (waste.g1.to_affine(), waste.g2.to_affine());
    let mut ic_points = vec![Default::default(); ic.len()];
    g1.mul_all(&ic, &mut ic_points);
    let vk = VerifyingKey {
        alpha_g1: (g1_base * waste.alpha).to_affine(),
        beta_g1: (g1_base * waste.beta).to_affine(),
        beta_g2: (g2_base * waste.beta).to_affine(),
        gamma_g2: (g2_base * waste.gamma).to_affine(),
        delta_g1: (g1_base * waste.delta).to_affine(),
        delta_g2: (g2_base * waste.delta).to_affine(),
        ic: ic_points,
    };
    let mut out = Counting { w, bytes: 0 };
    vk.write(&mut out)?;
    let total = (h.len() + l.len() + a.len() + b.len() + 3 * b.len()) as u64;
    let mut done = 0u64;
    let mut report = |n: usize, weight: u64| {
        done += n as u64 * weight;
        progress(SetupStage::Points { done, total });
    };
    for section in [&h, &l, &a, &b] {
        write_section(&g1, section, &mut out, |n| report(n, 1))?;
    }
    write_section(&g2, &b, &mut out, |n| report(n, 3))?;
    let stats = SetupStats {
        constraints,
        inputs,
        aux,
        g1_points: 4 + inputs + h.len() + l.len() + a.len() + b.len(),
        g2_points: 3 + b.len(),
        bytes: out.bytes,
        record: Duration::ZERO,
        evaluate,
        points: started.elapsed(),
    };
    Ok((vk, stats))
}

/// One section of the file: its length (u32, big-endian), then `s·P` for
/// every scalar, uncompressed.
fn write_section<G: SetupGroup>(
    base: &FixedBase<G>,
    scalars: &[Scalar],
    w: &mut impl Write,
    mut wrote: impl FnMut(usize),
) -> Result<(), SetupError> {
    w.write_all(&(scalars.len() as u32).to_be_bytes())?;
    let mut points = vec![G::Affine::default(); WRITE_BATCH.min(scalars.len())];
    let mut bytes = Vec::new();
    for batch in scalars.chunks(WRITE_BATCH) {
        let points = &mut points[..batch.len()];
        base.mul_all(batch, points);
        bytes.clear();
        for p in points.iter() {
            bytes.extend_from_slice(p.to_uncompressed().as_ref());
        }
        w.write_all(&bytes)?;
        wrote(batch.len());
    }
    Ok(())
}

/// A writer that counts what went through it.
struct Counting<'a, W: Write> {
    w: &'a mut W,
    bytes: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.w.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests;
