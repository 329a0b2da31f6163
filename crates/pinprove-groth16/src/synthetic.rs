//! Synthetic parameters: valid points in the right shape, fast to make.
//!
//! A real setup for 2^24 constraints takes hours; benchmarks of large
//! circuits only need parameters of the right shape whose points are valid
//! curve points. These are the multiples (i+1)·G of the generators, written
//! in bellperson's format. Proofs made with them do not verify (the points
//! share no toxic waste); timings are real.

use std::io::{self, Write};

use blstrs::{G1Projective, G2Projective};
use group::{Curve, Group, UncompressedEncoding};
use rayon::prelude::*;

use crate::domain::domain_size;
use crate::{ProvingAssignment, Scalar};

/// What a circuit needs from its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitShape {
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Constraints, input constraints included.
    pub constraints: usize,
    /// Aux variables used by A.
    pub a_aux: usize,
    /// Inputs used by B.
    pub b_inputs: usize,
    /// Aux variables used by B.
    pub b_aux: usize,
}

impl CircuitShape {
    /// The shape of a synthesized circuit.
    pub fn of(p: &ProvingAssignment) -> Self {
        CircuitShape {
            inputs: p.num_inputs(),
            aux: p.num_aux(),
            constraints: p.num_constraints(),
            a_aux: p.a_aux_density().total(),
            b_inputs: p.b_input_density().total(),
            b_aux: p.b_aux_density().total(),
        }
    }

    /// Bytes of the parameter file.
    pub fn file_bytes(&self) -> u64 {
        let domain = domain_size(self.constraints).unwrap_or(usize::MAX / 2);
        let g1 = (self.inputs + (domain - 1) + self.aux + self.inputs + self.a_aux + self.b_inputs + self.b_aux) as u64;
        864 + 6 * 4 + 96 * g1 + 192 * (self.b_inputs + self.b_aux) as u64
    }
}

const CHUNK: usize = 1 << 14;
const BATCH: usize = 64 * CHUNK;

/// The encodings of (first+1)·G … (first+n)·G, computed in parallel chunks.
fn multiples<G>(first: usize, n: usize) -> Vec<u8>
where
    G: Curve + Group<Scalar = Scalar> + Send + Sync,
    G::AffineRepr: UncompressedEncoding + Default + Copy + Send,
{
    let size = <G::AffineRepr as UncompressedEncoding>::Uncompressed::default()
        .as_ref()
        .len();
    let mut out = vec![0u8; n * size];
    out.par_chunks_mut(CHUNK * size).enumerate().for_each(|(c, bytes)| {
        let k = bytes.len() / size;
        let mut p = G::generator() * Scalar::from((first + c * CHUNK + 1) as u64);
        let mut proj = Vec::with_capacity(k);
        for _ in 0..k {
            proj.push(p);
            p += G::generator();
        }
        let mut aff = vec![G::AffineRepr::default(); k];
        G::batch_normalize(&proj, &mut aff);
        for (dst, a) in bytes.chunks_exact_mut(size).zip(&aff) {
            dst.copy_from_slice(a.to_uncompressed().as_ref());
        }
    });
    out
}

fn section(w: &mut impl Write, n: usize, g2: bool) -> io::Result<()> {
    w.write_all(&(n as u32).to_be_bytes())?;
    let mut done = 0;
    while done < n {
        let k = (n - done).min(BATCH);
        w.write_all(&if g2 {
            multiples::<G2Projective>(done, k)
        } else {
            multiples::<G1Projective>(done, k)
        })?;
        done += k;
    }
    Ok(())
}

/// Writes synthetic parameters for `shape` in bellperson's format.
pub fn write_synthetic_params(shape: &CircuitShape, w: &mut impl Write) -> io::Result<()> {
    let too_big = |n: usize| n > u32::MAX as usize;
    let domain = domain_size(shape.constraints).map_err(io::Error::other)?;
    let b = shape.b_inputs + shape.b_aux;
    if [shape.inputs, shape.aux, domain, b, shape.inputs + shape.a_aux]
        .into_iter()
        .any(too_big)
    {
        return Err(io::Error::other("circuit too large for the parameter format"));
    }
    let g1 = |k: u64| {
        (G1Projective::generator() * Scalar::from(k))
            .to_affine()
            .to_uncompressed()
    };
    let g2 = |k: u64| {
        (G2Projective::generator() * Scalar::from(k))
            .to_affine()
            .to_uncompressed()
    };
    // vk: alpha, beta (G1, G2), gamma, delta (G1, G2), then ic.
    w.write_all(&g1(2))?;
    w.write_all(&g1(3))?;
    w.write_all(&g2(3))?;
    w.write_all(&g2(5))?;
    w.write_all(&g1(7))?;
    w.write_all(&g2(7))?;
    w.write_all(&(shape.inputs as u32).to_be_bytes())?;
    for i in 0..shape.inputs {
        w.write_all(&g1(11 + i as u64))?;
    }
    section(w, domain - 1, false)?;
    section(w, shape.aux, false)?;
    section(w, shape.inputs + shape.a_aux, false)?;
    section(w, b, false)?;
    section(w, b, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuits::{BenchCircuit, WitnessMix};
    use crate::{AbcLayout, Backend, CapacityHints, Srs, Validation, synthesize};
    use blstrs::G1Affine;
    use pinprove_mem::{HeapAllocator, MemoryBudget, PinnedPool, PoolConfig};
    use std::sync::Arc;

    #[test]
    fn synthetic_parameters_fit_their_circuit() {
        let pool = PinnedPool::new(
            Arc::new(HeapAllocator::new(false)),
            MemoryBudget::new(1 << 30),
            PoolConfig::default(),
        );
        let c = BenchCircuit::new(5000, WitnessMix::Bits).unwrap();
        let (asg, _) = synthesize(
            c.clone(),
            &c.id(),
            &pool,
            &CapacityHints::in_memory(),
            AbcLayout::PaddedToDomain,
            None,
        )
        .unwrap();
        let shape = CircuitShape::of(&asg);
        let mut bytes = Vec::new();
        write_synthetic_params(&shape, &mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, shape.file_bytes());
        let srs = Arc::new(Srs::from_bytes(&bytes, &pool, Validation::Subgroup).unwrap());
        // The point at index i of a section is (i+1)·G.
        let p = srs.points().unwrap();
        let mut g = G1Affine::default();
        *g.as_mut() = p.l()[41];
        assert_eq!(g, (G1Projective::generator() * Scalar::from(42u64)).to_affine());
        // The CPU backend accepts them (the proof itself does not verify).
        let proofs = crate::CpuBackend::new(Arc::clone(&pool))
            .prove(crate::ProvingJob {
                srs,
                assignments: vec![asg],
                randomness: vec![(Scalar::from(1u64), Scalar::from(2u64))],
            })
            .unwrap();
        assert_eq!(proofs.len(), 1);
    }
}
