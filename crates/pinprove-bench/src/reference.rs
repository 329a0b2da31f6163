//! bellperson, the reference: its reader, prover and verifier.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{Context, Result};
use bellpepper_core::Circuit;
use bellperson::groth16;
use blstrs::{Bls12, Scalar};

/// Reads parameters with bellperson (unchecked: files we generated).
pub fn read(path: &Path) -> Result<groth16::Parameters<Bls12>> {
    let f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    groth16::Parameters::read(BufReader::with_capacity(1 << 20, f), false)
        .with_context(|| format!("bellperson reading {}", path.display()))
}

/// The verifying key at the start of a parameter file.
pub fn read_vk(path: &Path) -> Result<groth16::VerifyingKey<Bls12>> {
    let f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    groth16::VerifyingKey::read(BufReader::new(f))
        .with_context(|| format!("reading the verifying key of {}", path.display()))
}

/// bellperson's proof of `circuit`, encoded.
pub fn prove<C: Circuit<Scalar> + Send>(
    circuit: C,
    params: &groth16::Parameters<Bls12>,
    r: Scalar,
    s: Scalar,
) -> Result<Vec<u8>> {
    let proof = groth16::create_proof::<Bls12, _, _>(circuit, params, r, s).context("bellperson's prover failed")?;
    let mut out = Vec::with_capacity(192);
    proof.write(&mut out)?;
    Ok(out)
}

/// Whether bellperson's verifier accepts an encoded proof.
pub fn verify(vk: &groth16::VerifyingKey<Bls12>, proof: &[u8], inputs: &[Scalar]) -> Result<bool> {
    let pvk = groth16::prepare_verifying_key(vk);
    let proof = groth16::Proof::<Bls12>::read(proof).context("decoding the proof")?;
    Ok(groth16::verify_proof(&pvk, &proof, inputs)?)
}
