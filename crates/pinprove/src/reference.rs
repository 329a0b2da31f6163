//! bellperson, the reference: parameter generation, its prover and its
//! verifier.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bellpepper_core::Circuit;
use bellperson::groth16;
use blstrs::{Bls12, Scalar};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Real Groth16 parameters for `circuit`, from bellperson's generator.
pub fn generate<C: Circuit<Scalar>>(circuit: C, seed: u64) -> Result<groth16::Parameters<Bls12>> {
    groth16::generate_random_parameters::<Bls12, _, _>(circuit, &mut ChaCha8Rng::seed_from_u64(seed))
        .context("bellperson could not generate parameters for the circuit")
}

/// Writes parameters in bellperson's format, atomically.
pub fn write(params: &groth16::Parameters<Bls12>, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut w = BufWriter::new(File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?);
    params.write(&mut w).context("writing parameters")?;
    w.flush()?;
    drop(w);
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

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

/// Which parameters a benchmark proves with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamsKind {
    /// bellperson's generator: proofs verify; slow for large circuits.
    Real,
    /// Right-shaped points, written fast; proofs do not verify.
    Synthetic,
}

/// The parameter file for `circuit`: `explicit` when given, else the cached
/// file under `dir` (or [`default_params_dir`]), written first when missing.
pub fn params_file(
    circuit: &pinprove_groth16::circuits::BenchCircuit,
    explicit: Option<&Path>,
    dir: Option<&Path>,
    kind: ParamsKind,
) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let dir = dir.map_or_else(default_params_dir, Path::to_path_buf);
    let id = circuit.id();
    let ext = match kind {
        ParamsKind::Real => "params",
        ParamsKind::Synthetic => "synthetic.params",
    };
    let p = dir.join(format!("{id}.{ext}"));
    if !p.exists() {
        eprintln!("writing {ext} for {id} into {} (once)", p.display());
        let t = std::time::Instant::now();
        match kind {
            ParamsKind::Real => write(&generate(circuit.clone(), 1)?, &p)?,
            ParamsKind::Synthetic => {
                crate::params_cmd::write_synthetic(circuit, &p)?;
            }
        }
        eprintln!("written in {}", crate::report::dur(t.elapsed()));
    }
    Ok(p)
}

/// Where parameters generated for benchmarks are cached.
pub fn default_params_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("pinprove").join("params")
}
