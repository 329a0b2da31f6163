//! The CPU backend: the reference prover, and the fallback without a GPU.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Projective, G2Projective};
use group::Curve;
use pinprove_mem::{PinnedPool, PinnedVec};
use rayon::prelude::*;

use crate::backend::check_job;
use crate::domain::{Domain, bit_reverse_index, domain_size};
use crate::msm::{ScalarBytes, g1_msm, g2_msm};
use crate::params::SrsPoints;
use crate::{
    AbcLayout, Backend, Capabilities, CapacityHint, Density, Proof, ProofBatch, ProveError, QueryLengths, Scalar, Srs,
    StartedProof, Witness,
};

/// Groth16 on the CPU: multithreaded radix-2 FFTs for h, blst's Pippenger
/// for the MSMs (with zeros and ones of bit-heavy witnesses handled apart).
///
/// Every vector it needs beyond the assignment comes from the pool, so its
/// memory is accounted in the budget; a/b/c are turned into h in place.
#[derive(Debug, Clone)]
pub struct CpuBackend {
    pool: Arc<PinnedPool>,
}

impl CpuBackend {
    /// A CPU backend taking its scratch vectors from `pool`.
    pub fn new(pool: Arc<PinnedPool>) -> Self {
        CpuBackend { pool }
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            workers_per_device: 1,
            abc_layout: AbcLayout::PaddedToDomain,
            uses_device: false,
            needs_srs_points: true,
            evaluates_recordings: false,
        }
    }

    fn extra_working_set(&self, shape: &CapacityHint, _: Option<&QueryLengths>, _: bool) -> u64 {
        let m = domain_size(shape.constraints).map_or(u64::MAX / 64, |m| m as u64);
        // h's scalars, the twiddle table (ω^j for j < m/2), and the gathered
        // scalars of the A and B MSMs (at most one per variable each).
        32 * m + 16 * m + 2 * 32 * (shape.inputs + shape.aux) as u64
    }

    fn start(&self, mut job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        let started = Instant::now();
        let n = check_job(&job)?;
        if job.srs.points().is_none() {
            return Err(ProveError::Backend {
                backend: "cpu",
                message: "the parameters were read without their points".into(),
            });
        }
        let domain = Domain::new(n)?;
        let mut h = Vec::with_capacity(job.assignments.len());
        for asg in &mut job.assignments {
            crate::precompiled::evaluate_pending(asg, AbcLayout::PaddedToDomain)?;
            let [a, b, c] = asg.take_abc().ok_or(ProveError::AbcReleased)?;
            // a/b/c go back to the pool before h's vector is taken, so h
            // usually reuses b's buffer.
            let h_vec = self.h_coefficients(&domain, a, b, c)?;
            h.push(self.h_scalars(h_vec, asg.working_set_mut())?);
        }
        Ok(Box::new(CpuStarted {
            pool: Arc::clone(&self.pool),
            srs: job.srs,
            witnesses: job.assignments.into_iter().map(|a| a.into_witness()).collect(),
            randomness: job.randomness,
            h,
            fft_time: started.elapsed(),
        }))
    }
}

impl CpuBackend {
    /// h = (A·B − C) / Z from the evaluations a, b, c, computed in `a`:
    /// its coefficients in bit-reversed order. b and c go back to the pool.
    fn h_coefficients(
        &self,
        domain: &Domain,
        mut a: PinnedVec<Scalar>,
        mut b: PinnedVec<Scalar>,
        mut c: PinnedVec<Scalar>,
    ) -> Result<(PinnedVec<Scalar>, u32), ProveError> {
        let m = domain.size();
        for v in [&mut a, &mut b, &mut c] {
            v.try_resize(m, Scalar::from(0u64))?;
        }
        domain.evaluations_to_coset(&mut a);
        domain.evaluations_to_coset(&mut b);
        domain.evaluations_to_coset(&mut c);
        let z_inv = domain.z_on_coset_inverse();
        a.par_iter_mut()
            .zip(b.par_iter())
            .zip(c.par_iter())
            .with_min_len(4096)
            .for_each(|((x, y), z)| *x = (*x * y - z) * z_inv);
        drop((b, c));
        domain.coset_to_coefficients_bit_reversed(&mut a);
        Ok((a, domain.log_size()))
    }

    /// h's m − 1 coefficients (the top one is zero by construction; the H
    /// query has m − 1 points) in natural order, as MSM scalars, paid for
    /// out of the job's working set when there is one. Gives `a` back.
    fn h_scalars(
        &self,
        (a, log_m): (PinnedVec<Scalar>, u32),
        funds: Option<&mut pinprove_mem::Reservation>,
    ) -> Result<PinnedVec<ScalarBytes>, ProveError> {
        let m = 1usize << log_m;
        let mut h = PinnedVec::with_capacity_charged(m - 1, &self.pool, funds)?;
        h.try_resize(m - 1, [0u8; 32])?;
        h.par_iter_mut()
            .enumerate()
            .with_min_len(4096)
            .for_each(|(i, out)| *out = a[bit_reverse_index(i, log_m)].to_bytes_le());
        Ok(h)
    }
}

struct CpuStarted {
    pool: Arc<PinnedPool>,
    srs: Arc<Srs>,
    witnesses: Vec<Witness>,
    randomness: Vec<(Scalar, Scalar)>,
    h: Vec<PinnedVec<ScalarBytes>>,
    fft_time: Duration,
}

impl StartedProof for CpuStarted {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        let started = Instant::now();
        let CpuStarted {
            pool,
            srs,
            witnesses,
            randomness,
            h,
            fft_time,
        } = *self;
        let points = srs.points().ok_or(ProveError::Backend {
            backend: "cpu",
            message: "the parameters were read without their points".into(),
        })?;
        let mut proofs = Vec::with_capacity(witnesses.len());
        for ((w, (r, s)), h) in witnesses.into_iter().zip(randomness).zip(h) {
            proofs.push(prove_one(&pool, &srs, points, w, r, s, &h)?);
        }
        tracing::debug!(
            fft_ms = fft_time.as_millis() as u64,
            msm_ms = started.elapsed().as_millis() as u64,
            proofs = proofs.len(),
            "cpu proofs done"
        );
        Ok(proofs)
    }
}

/// Scalars `parts` selected by their densities (all when `None`), in order,
/// in one pool vector.
fn gather(
    pool: &Arc<PinnedPool>,
    funds: Option<&mut pinprove_mem::Reservation>,
    parts: &[(&[ScalarBytes], Option<&Density>)],
) -> Result<PinnedVec<ScalarBytes>, ProveError> {
    let len = parts.iter().map(|(s, d)| d.map_or(s.len(), Density::total)).sum();
    let mut out = PinnedVec::with_capacity_charged(len, pool, funds)?;
    for (scalars, density) in parts {
        match density {
            None => out.try_extend_from_slice(scalars)?,
            Some(d) => {
                for i in d.iter_ones() {
                    // Densities track exactly the assignment's variables.
                    out.try_push(scalars[i])?;
                }
            }
        }
    }
    Ok(out)
}

fn prove_one(
    pool: &Arc<PinnedPool>,
    srs: &Srs,
    points: &SrsPoints,
    w: Witness,
    r: Scalar,
    s: Scalar,
    h: &[ScalarBytes],
) -> Result<Proof, ProveError> {
    let Witness {
        inputs,
        aux,
        densities,
        mut working_set,
    } = w;
    let inputs = inputs.map_in_place(|x| x.to_bytes_le());
    let aux = aux.map_in_place(|x| x.to_bytes_le());

    let (h_acc, _) = g1_msm(points.h(), h);
    let (l_acc, _) = g1_msm(points.l(), &aux);
    let a_scalars = gather(
        pool,
        working_set.as_mut(),
        &[(&inputs, None), (&aux, Some(&densities.a_aux))],
    )?;
    let (a_acc, _) = g1_msm(points.a(), &a_scalars);
    drop(a_scalars);
    let b_scalars = gather(
        pool,
        working_set.as_mut(),
        &[(&inputs, Some(&densities.b_input)), (&aux, Some(&densities.b_aux))],
    )?;
    let (b1_acc, _) = g1_msm(points.b_g1(), &b_scalars);
    let (b2_acc, _) = g2_msm(points.b_g2(), &b_scalars);
    drop(b_scalars);

    Ok(assemble(srs, r, s, a_acc, b1_acc, b2_acc, h_acc, l_acc))
}

/// The proof from the MSM results and the blinding factors:
/// A = α + Σa + rδ, B = β + Σb + sδ,
/// C = s·Σa + r·Σb₁ + rs·δ + s·α + r·β + Σh + Σl.
/// Backends that compute the MSMs elsewhere (a GPU) finish with it.
#[allow(clippy::too_many_arguments)]
pub fn assemble(
    srs: &Srs,
    r: Scalar,
    s: Scalar,
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
    h: G1Projective,
    l: G1Projective,
) -> Proof {
    let vk = srs.vk();
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let alpha_g1 = G1Projective::from(vk.alpha_g1);
    let beta_g1 = G1Projective::from(vk.beta_g1);
    let g_a = delta_g1 * r + alpha_g1 + a;
    let g_b = G2Projective::from(vk.delta_g2) * s + G2Projective::from(vk.beta_g2) + b_g2;
    let g_c = a * s + b_g1 * r + delta_g1 * (r * s) + alpha_g1 * s + beta_g1 * r + h + l;
    Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    }
}
