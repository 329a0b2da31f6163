//! Non-interactive PoRep's C2: the partitions' Groth16 proofs aggregated
//! into one SnarkPack proof (bellperson's `aggregate`, version 2), as
//! filecoin-proofs does for the `..._Feat_NonInteractivePoRep` seal
//! proofs: the partition proofs padded to a power of two with copies of
//! the last, and the transcript bound to the sector's comm_r.
//!
//! The aggregation keys come from Filecoin's inner-product SRS
//! ([`SRS_FILE`] in the parameter cache; `lotus fetch-params` fetches it).
//! Like filecoin-proofs, pinprove reads the first [`READ_POWERS`] powers of
//! each of its four vectors and no more: the verifier key of an
//! aggregation is taken from the end of what was read, so reading another
//! count would make aggregates no one else accepts.
//!
//! For test sector sizes a missing SRS is made, as their parameters are
//! (random powers: aggregates that verify only against this SRS). Such an
//! SRS is much shorter than the ceremony's, and is refused for 32 GiB and
//! 64 GiB sectors, whose aggregates go on chain.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, ensure};
use bellperson::groth16::aggregate::{
    AggregateProof, AggregateVersion, GenericSRS, ProverSRS, VerifierSRS, aggregate_proofs, setup_fake_srs,
    verify_aggregate_proof,
};
use bellperson::groth16::{PreparedVerifyingKey, Proof};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use pinprove_mem::sync::Recover;
use rand::rngs::OsRng;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::params::{GENERATED_BELOW, open_lock, write_atomically};

/// The inner-product SRS's file name in the parameter cache.
pub const SRS_FILE: &str = "v28-fil-inner-product-v1.srs";
/// Powers read from each of the SRS's vectors (filecoin-proofs' count).
pub const READ_POWERS: usize = (2 << 14) + 1;
/// The most powers a vector of the file may have (the ceremony's).
const MAX_POWERS: usize = (2 << 19) + 1;
/// Proofs a made SRS can aggregate (it holds twice as many powers).
const MADE_FOR_PROOFS: usize = 256;

/// The prover's and verifier's keys for one number of proofs.
type Keys = Arc<(ProverSRS<Bls12>, VerifierSRS<Bls12>)>;

/// The inner-product SRS, and the keys specialized from it so far.
pub(crate) struct InnerProductSrs {
    generic: GenericSRS<Bls12>,
    path: PathBuf,
    keys: Mutex<HashMap<usize, Keys>>,
}

impl InnerProductSrs {
    /// Reads the SRS of the parameter cache `dir`, made first when it is
    /// missing and `sector_bytes` is a test size. A short (made) SRS is
    /// refused for production sizes.
    pub(crate) fn load(dir: &Path, sector_bytes: u64, generate: bool) -> anyhow::Result<InnerProductSrs> {
        let path = dir.join(SRS_FILE);
        if !path.is_file() {
            ensure!(
                sector_bytes < GENERATED_BELOW && generate,
                "Filecoin's inner-product SRS is missing: {} (non-interactive PoRep aggregates with it; \
                 fetch it into the parameter cache, as `lotus fetch-params` does{})",
                path.display(),
                if sector_bytes < GENERATED_BELOW {
                    ", or switch `filecoin.generate_parameters` on to make one for test sectors"
                } else {
                    ""
                }
            );
            make(&path)?;
        }
        let generic = read(&path).with_context(|| format!("reading {}", path.display()))?;
        let srs = InnerProductSrs {
            generic,
            path,
            keys: Mutex::new(HashMap::new()),
        };
        srs.check_for(sector_bytes)?;
        Ok(srs)
    }

    /// Fails when this SRS may not aggregate proofs of `sector_bytes`
    /// sectors: one shorter than the ceremony's (made for test sectors)
    /// serves test sizes only.
    pub(crate) fn check_for(&self, sector_bytes: u64) -> anyhow::Result<()> {
        let powers = self.generic.g_alpha_powers.len();
        ensure!(
            sector_bytes < GENERATED_BELOW || powers >= READ_POWERS,
            "{} holds {powers} powers, not Filecoin's: an SRS made for test sectors cannot aggregate proofs of \
             {} GiB sectors (fetch Filecoin's into the parameter cache)",
            self.path.display(),
            sector_bytes >> 30
        );
        Ok(())
    }

    /// The prover and verifier keys for `n` proofs (a power of two).
    fn keys(&self, n: usize) -> anyhow::Result<Keys> {
        ensure!(n.is_power_of_two() && n >= 2, "{n} proofs cannot be aggregated");
        let have = self.generic.g_alpha_powers.len().min(self.generic.h_alpha_powers.len());
        ensure!(
            have >= 2 * n,
            "{} holds {have} powers, too few to aggregate {n} proofs",
            self.path.display()
        );
        if let Some(k) = self.keys.lock().recover().get(&n) {
            return Ok(Arc::clone(k));
        }
        let k = Arc::new(self.generic.specialize(n));
        Ok(Arc::clone(self.keys.lock().recover().entry(n).or_insert(k)))
    }
}

/// What a non-interactive PoRep's aggregate binds to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Aggregation {
    /// The sector's replica commitment.
    pub comm_r: [u8; 32],
    /// The sector's size (which SRS may aggregate for it).
    pub sector_bytes: u64,
}

impl Aggregation {
    /// The transcript's binding: SHA-256 over the sectors' comm_r (one
    /// sector here; non-interactive PoRep leaves the seed out).
    fn transcript(&self) -> [u8; 32] {
        Sha256::digest(self.comm_r).into()
    }

    /// The aggregate of `proofs` (one per partition, in order): its bytes.
    pub(crate) fn aggregate(&self, srs: &InnerProductSrs, mut proofs: Vec<Proof<Bls12>>) -> anyhow::Result<Vec<u8>> {
        let last = proofs.last().cloned().context("no partition proofs to aggregate")?;
        let n = target_len(proofs.len());
        proofs.resize(n, last);
        let keys = srs.keys(n)?;
        let proof = aggregate_proofs::<Bls12>(&keys.0, &self.transcript(), &proofs, AggregateVersion::V2)
            .context("aggregating the partition proofs")?;
        let mut bytes = Vec::new();
        proof.write(&mut bytes)?;
        Ok(bytes)
    }

    /// Whether `bytes` is an aggregate of proofs of `inputs` (one list per
    /// partition, in order) under `pvk`.
    pub(crate) fn verify(
        &self,
        srs: &InnerProductSrs,
        pvk: &PreparedVerifyingKey<Bls12>,
        inputs: &[Vec<Scalar>],
        bytes: &[u8],
    ) -> anyhow::Result<bool> {
        let proof = AggregateProof::<Bls12>::read(bytes).context("the aggregate does not decode")?;
        let last = inputs.last().cloned().context("no public inputs")?;
        let n = target_len(inputs.len());
        ensure!(
            proof.tmipp.gipa.nproofs as usize == n,
            "the aggregate holds {} proofs, not {n}",
            proof.tmipp.gipa.nproofs
        );
        let mut padded = inputs.to_vec();
        padded.resize(n, last);
        let keys = srs.keys(n)?;
        Ok(verify_aggregate_proof(
            &keys.1,
            pvk,
            OsRng,
            &padded,
            &proof,
            &self.transcript(),
            AggregateVersion::V2,
        )?)
    }
}

/// The number of proofs an aggregate of `n` holds: the next power of two,
/// at least two.
fn target_len(n: usize) -> usize {
    n.next_power_of_two().max(2)
}

/// Reads the first [`READ_POWERS`] powers of each vector of an SRS file
/// (g^α^i, g^β^i in G1, h^α^i, h^β^i in G2, each a big-endian u32 count and
/// compressed points), checking every point.
fn read(path: &Path) -> anyhow::Result<GenericSRS<Bls12>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut r = BufReader::with_capacity(4 << 20, file);
    let mut offset = 0u64;
    let g_alpha_powers = read_powers(&mut r, &mut offset, |b| G1Affine::from_compressed(b).into())?;
    let g_beta_powers = read_powers(&mut r, &mut offset, |b| G1Affine::from_compressed(b).into())?;
    let h_alpha_powers = read_powers(&mut r, &mut offset, |b| G2Affine::from_compressed(b).into())?;
    let h_beta_powers = read_powers(&mut r, &mut offset, |b| G2Affine::from_compressed(b).into())?;
    ensure!(
        offset <= size,
        "the file is truncated ({size} bytes, {offset} expected)"
    );
    Ok(GenericSRS {
        g_alpha_powers,
        h_alpha_powers,
        g_beta_powers,
        h_beta_powers,
    })
}

fn read_powers<const N: usize, T: Send>(
    r: &mut BufReader<File>,
    offset: &mut u64,
    decode: impl Fn(&[u8; N]) -> Option<T> + Sync,
) -> anyhow::Result<Vec<T>> {
    let mut count = [0u8; 4];
    r.read_exact(&mut count)?;
    let count = u32::from_be_bytes(count) as usize;
    ensure!(
        (1..=MAX_POWERS).contains(&count),
        "a vector of {count} powers (at most {MAX_POWERS})"
    );
    let take = count.min(READ_POWERS);
    let mut raw = vec![0u8; take * N];
    r.read_exact(&mut raw)?;
    let skip = ((count - take) * N) as i64;
    r.seek_relative(skip)?;
    *offset += 4 + (count * N) as u64;
    raw.par_chunks_exact(N)
        .enumerate()
        .map(|(i, c)| {
            let bytes: &[u8; N] = c.try_into().expect("chunks of N bytes");
            decode(bytes).with_context(|| format!("power {i} is not a valid point"))
        })
        .collect()
}

/// Makes a test SRS at `path` (random powers), once across processes.
fn make(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let lock = open_lock(&path.with_extension("srs.lock"))?;
    lock.lock()?;
    if path.is_file() {
        return Ok(());
    }
    tracing::info!(path = %path.display(), "making an inner-product SRS for test sectors (its aggregates verify only against it)");
    let srs = setup_fake_srs::<Bls12, _>(&mut OsRng, MADE_FOR_PROOFS);
    write_atomically(path, |w| Ok(srs.write(w)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_srs_reads_back_and_is_refused_for_production_sizes() {
        let dir = std::env::temp_dir().join(format!("pinprove-srs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let missing = InnerProductSrs::load(&dir, 32 << 30, true).err().unwrap();
        assert!(format!("{missing:#}").contains("missing"), "{missing:#}");
        let srs = InnerProductSrs::load(&dir, 2 << 10, true).unwrap();
        assert_eq!(srs.generic.g_alpha_powers.len(), 2 * MADE_FOR_PROOFS);
        assert!(srs.keys(16).is_ok());
        assert!(srs.keys(2 * MADE_FOR_PROOFS).is_err(), "too few powers");
        assert!(srs.keys(12).is_err(), "not a power of two");
        let refused = InnerProductSrs::load(&dir, 32 << 30, true).err().unwrap();
        assert!(format!("{refused:#}").contains("test sectors"), "{refused:#}");
        // A truncated file is an error, not a short SRS.
        let bytes = std::fs::read(dir.join(SRS_FILE)).unwrap();
        std::fs::write(dir.join(SRS_FILE), &bytes[..bytes.len() - 100]).unwrap();
        assert!(InnerProductSrs::load(&dir, 2 << 10, true).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn target_lengths_are_powers_of_two_of_at_least_two() {
        assert_eq!(target_len(1), 2);
        assert_eq!(target_len(2), 2);
        assert_eq!(target_len(13), 16);
        assert_eq!(target_len(126), 128);
    }
}
