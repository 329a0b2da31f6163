//! The QAP at τ: every variable's polynomials a, b, c of the recorded
//! matrices evaluated at the secret point.
//!
//! Variable v's polynomial in A is Σ_rows A[r][v]·L_r, with L_r the Lagrange
//! basis of the proving domain, so its value at τ is a sum over v's column
//! of A, weighted by L_r(τ). The matrices are recorded by rows; each is
//! turned into columns once (a counting sort of its entries) so that every
//! column is summed on its own core.

use ff::Field;
use rayon::prelude::*;

use crate::domain::Domain;
use crate::precompiled::{Matrices, Matrix};
use crate::{Scalar, SetupError};

/// Values at τ of every variable's a, b and c (inputs then aux, as the
/// recording numbers its columns).
pub(crate) struct AtTau {
    pub(crate) a: Vec<Scalar>,
    pub(crate) b: Vec<Scalar>,
    pub(crate) c: Vec<Scalar>,
}

/// L_r(τ) for every r of the domain of size n: the inverse transform of
/// the powers of τ.
pub(crate) fn lagrange_at(tau: Scalar, domain: &Domain) -> Vec<Scalar> {
    let mut v = powers(tau, domain.size());
    domain.ifft(&mut v);
    v
}

/// τ^0 … τ^(n−1), in parallel chunks.
pub(crate) fn powers(tau: Scalar, n: usize) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 14;
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut p = tau.pow_vartime([(i * CHUNK) as u64]);
        for x in c {
            *x = p;
            p *= tau;
        }
    });
    v
}

/// The columns of `m`: for column v, the rows and coefficient ids of its
/// entries at `ptr[v]..ptr[v + 1]`.
struct Columns {
    ptr: Vec<usize>,
    rows: Vec<u32>,
    ids: Vec<u16>,
}

fn columns(m: &Matrix, vars: usize) -> Result<Columns, SetupError> {
    if u32::try_from(m.rows()).is_err() {
        return Err(SetupError::TooLarge(format!("{} constraints", m.rows())));
    }
    let mut ptr = vec![0usize; vars + 1];
    for &c in m.cols() {
        ptr[c as usize + 1] += 1;
    }
    for v in 0..vars {
        ptr[v + 1] += ptr[v];
    }
    let mut next = ptr.clone();
    let (mut rows, mut ids) = (vec![0u32; m.nnz()], vec![0u16; m.nnz()]);
    for r in 0..m.rows() {
        let (cols, coeff_ids) = m.row(r);
        for (&c, &id) in cols.iter().zip(coeff_ids) {
            let at = &mut next[c as usize];
            rows[*at] = r as u32;
            ids[*at] = id;
            *at += 1;
        }
    }
    Ok(Columns { ptr, rows, ids })
}

/// Σ over each column of coefficient × L_row(τ).
fn column_sums(
    m: &Matrix,
    vars: usize,
    coefficients: &[Scalar],
    lagrange: &[Scalar],
) -> Result<Vec<Scalar>, SetupError> {
    let cols = columns(m, vars)?;
    let one_id = coefficients.iter().position(|c| *c == Scalar::ONE);
    Ok((0..vars)
        .into_par_iter()
        .with_min_len(1024)
        .map(|v| {
            let span = cols.ptr[v]..cols.ptr[v + 1];
            cols.rows[span.clone()]
                .iter()
                .zip(&cols.ids[span])
                .fold(Scalar::ZERO, |acc, (&r, &id)| {
                    let l = lagrange[r as usize];
                    // Most coefficients are one: no multiplication for them.
                    if Some(id as usize) == one_id {
                        acc + l
                    } else {
                        acc + coefficients[id as usize] * l
                    }
                })
        })
        .collect())
}

/// Every variable's a, b, c at τ, given the Lagrange basis there.
pub(crate) fn evaluate(m: &Matrices, vars: usize, lagrange: &[Scalar]) -> Result<AtTau, SetupError> {
    let coefficients = m.coefficients();
    Ok(AtTau {
        a: column_sums(m.a(), vars, coefficients, lagrange)?,
        b: column_sums(m.b(), vars, coefficients, lagrange)?,
        c: column_sums(m.c(), vars, coefficients, lagrange)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_lagrange_basis_at_tau_interpolates_a_polynomial() {
        // Σ_r p(ω^r)·L_r(τ) = p(τ) for a polynomial of degree below n.
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let domain = Domain::new(64).unwrap();
        let coeffs: Vec<Scalar> = (0..64).map(|_| Scalar::random(&mut rng)).collect();
        let mut evals = coeffs.clone();
        domain.fft(&mut evals);
        let tau = Scalar::random(&mut rng);
        let lagrange = lagrange_at(tau, &domain);
        let interpolated: Scalar = evals.iter().zip(&lagrange).map(|(e, l)| *e * l).sum();
        let direct = coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * tau + c);
        assert_eq!(interpolated, direct);
    }
}
