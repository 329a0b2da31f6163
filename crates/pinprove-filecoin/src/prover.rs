//! The Filecoin front of the engine: a request in, the proof bytes out,
//! verified.
//!
//! A request is decoded and checked, and its circuits built, before any
//! work is queued (bad input fails at once, with a message saying what is
//! wrong); its parameters are found in the cache (or made, for test sector
//! sizes) and registered with the engine; its partitions go to the engine as
//! one job. The job's partition proofs, concatenated in partition order, are
//! the proof filecoin-proofs makes; before they are returned they are
//! verified against the public inputs the verifier derives from the request
//! (storage-proofs' own derivation, bellperson's pairing check).

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::{self, PreparedVerifyingKey};
use blstrs::Bls12;
use pinprove_engine::{Engine, JobId, JobOutcome, JobSpec, Partition, PartitionTimings, Priority};
use pinprove_groth16::{PROOF_BYTES, Scalar};
use pinprove_mem::ErrorChain;
use pinprove_mem::sync::Recover;
use rand::rngs::OsRng;

use crate::aggregate::{Aggregation, InnerProductSrs};
use crate::params::{CircuitParams, Generator, ParamCache};
use crate::prepared::{Checks, Prepared};
use crate::{FilecoinError, ProofKind, ProofRequest, kind, porep, post, snap};
use pinprove_groth16::setup::SetupStage;

/// Partitions' buffers the pool keeps for a Critical circuit (WinningPoSt)
/// while background work waits for memory (see [`Engine::keep_ready`]): its
/// partition's, and those of its one sector group (WinningPoSt proves one
/// sector, so the group is as large as the circuit).
const KEPT_PARTITIONS: usize = 2;

/// Settings of the Filecoin front.
#[derive(Clone, Debug)]
pub struct FilecoinOptions {
    /// Verify every proof before it is returned (default): a proof that does
    /// not verify is a failed job, never a result.
    pub verify: bool,
}

impl Default for FilecoinOptions {
    fn default() -> Self {
        FilecoinOptions { verify: true }
    }
}

/// What the requests a prover takes are.
enum Inputs {
    /// Curio's: checked, proved with real parameters, verified.
    Real,
    /// [`synthetic`](crate::synthetic) ones (see
    /// [`FilecoinProver::for_synthetic_inputs`]), with the shapes counted
    /// for their parameters kept in the cache when there is one.
    #[cfg(any(test, feature = "lab"))]
    Synthetic(Option<crate::shapes::ShapeCache>),
}

/// A circuit whose parameters are registered with the engine.
struct Registered {
    /// The parameter file; `None` for synthetic parameters.
    params: Option<PathBuf>,
    vk: OnceLock<Arc<PreparedVerifyingKey<Bls12>>>,
    /// Whether the engine keeps its buffers ready (see
    /// [`FilecoinProver::keep_ready_for`]).
    kept: std::sync::atomic::AtomicBool,
}

/// Filecoin proofs through an engine.
pub struct FilecoinProver {
    engine: Arc<Engine>,
    params: ParamCache,
    options: FilecoinOptions,
    inputs: Inputs,
    registered: Mutex<HashMap<String, Arc<Registered>>>,
    /// One generation at a time per process (each takes minutes and most
    /// of the machine).
    generating: Mutex<()>,
    /// Filecoin's inner-product SRS, once a non-interactive PoRep needed it.
    inner_product: Mutex<Option<Arc<InnerProductSrs>>>,
}

/// A request decoded and checked, its circuits built, not yet submitted.
pub struct PreparedProof {
    prepared: Prepared,
    priority: pinprove_engine::Priority,
    randomness: Option<Vec<(Scalar, Scalar)>>,
}

impl PreparedProof {
    /// What it proves.
    pub fn kind(&self) -> ProofKind {
        self.prepared.kind
    }

    /// Its circuit ("porep-32g").
    pub fn circuit_id(&self) -> &str {
        &self.prepared.circuit.circuit_id
    }

    /// Its partitions.
    pub fn partitions(&self) -> usize {
        self.prepared.partitions.len()
    }

    /// Proves with the given `(r, s)` per partition instead of fresh random
    /// ones: the same pairs give the same bytes whichever way the witness
    /// was made, which is how two paths are compared. `None` if the count
    /// is not the number of partitions. Never for proofs that leave the
    /// host: r and s hide the witness.
    pub fn with_randomness(mut self, rs: Vec<(Scalar, Scalar)>) -> Option<Self> {
        (rs.len() == self.partitions()).then(|| {
            self.randomness = Some(rs);
            self
        })
    }

    /// The partitions themselves, to synthesize outside an engine (for
    /// measurements of one partition alone).
    pub fn into_partitions(self) -> Vec<Box<dyn Partition>> {
        self.prepared.partitions
    }
}

/// A job the engine is proving, and how to check its result.
pub struct Submission {
    /// The engine's job.
    pub job: JobId,
    /// What it proves.
    pub kind: ProofKind,
    /// Its circuit ("porep-32g").
    pub circuit_id: String,
    /// Partitions (one 192-byte proof each).
    pub partitions: usize,
    inputs: Vec<Vec<Scalar>>,
    circuit: Arc<Registered>,
    /// For non-interactive PoRep: what the aggregate binds to.
    aggregation: Option<Aggregation>,
}

/// A finished Filecoin proof.
#[derive(Clone, Debug)]
pub struct Proved {
    /// What it proves.
    pub kind: ProofKind,
    /// The bytes filecoin-proofs would return: the partitions' proofs in
    /// partition order (for non-interactive PoRep, their SnarkPack
    /// aggregate).
    pub proof: Vec<u8>,
    /// Each partition's timings.
    pub partitions: Vec<PartitionTimings>,
    /// Time the verification took (`None` when switched off).
    pub verification: Option<Duration>,
    /// Time the aggregation took (non-interactive PoRep only).
    pub aggregation: Option<Duration>,
}

impl FilecoinProver {
    /// A prover proving on `engine`, with parameters from `params`.
    pub fn new(engine: Arc<Engine>, params: ParamCache, options: FilecoinOptions) -> FilecoinProver {
        FilecoinProver::with_inputs(engine, params, options, Inputs::Real)
    }

    /// A prover of [`synthetic`](crate::synthetic) requests, for benchmarks
    /// at production size: parameters of the real shape made from each
    /// circuit's shape (counted once, and kept in `shape_cache` across
    /// processes when given), vanilla proofs not checked and proofs not
    /// verified, since neither can pass. Never for real work: only with the
    /// `lab` feature.
    #[cfg(any(test, feature = "lab"))]
    pub fn for_synthetic_inputs(
        engine: Arc<Engine>,
        params: ParamCache,
        shape_cache: Option<crate::shapes::ShapeCache>,
    ) -> FilecoinProver {
        FilecoinProver::with_inputs(
            engine,
            params,
            FilecoinOptions::default(),
            Inputs::Synthetic(shape_cache),
        )
    }

    fn with_inputs(
        engine: Arc<Engine>,
        params: ParamCache,
        options: FilecoinOptions,
        inputs: Inputs,
    ) -> FilecoinProver {
        FilecoinProver {
            engine,
            params,
            options,
            inputs,
            registered: Mutex::new(HashMap::new()),
            generating: Mutex::new(()),
            inner_product: Mutex::new(None),
        }
    }

    /// Whether its requests are synthetic.
    fn synthetic(&self) -> bool {
        match self.inputs {
            Inputs::Real => false,
            #[cfg(any(test, feature = "lab"))]
            Inputs::Synthetic(_) => true,
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The parameter cache.
    pub fn params(&self) -> &ParamCache {
        &self.params
    }

    /// Finds (or, for a test sector size, makes) the parameters of a circuit
    /// ("porep-32g", "wpost-2k", …) and registers them with the engine;
    /// returns their file (`None` with synthetic inputs: then synthetic
    /// parameters of the circuit's shape are registered, made in memory when
    /// first needed).
    pub fn register(&self, circuit_id: &str) -> Result<Option<PathBuf>, FilecoinError> {
        let (kind, sector_bytes) = parse_circuit_id(circuit_id)?;
        Ok(self.registered(circuit_params(kind, sector_bytes)?)?.params.clone())
    }

    fn registered(&self, circuit: CircuitParams) -> Result<Arc<Registered>, FilecoinError> {
        if let Some(r) = self.registered.lock().recover().get(&circuit.circuit_id) {
            return Ok(Arc::clone(r));
        }
        let id = circuit.circuit_id.clone();
        let params = match &self.inputs {
            Inputs::Real => {
                // A file in the cache needs no lock: only a generation waits
                // for another one.
                let path = match self.params.existing(&circuit)? {
                    Some(path) => path,
                    None => {
                        let _one = self.generating.lock().recover();
                        self.params.ensure(circuit)?
                    }
                };
                self.engine.register_srs(&id, &path);
                Some(path)
            }
            #[cfg(any(test, feature = "lab"))]
            Inputs::Synthetic(shape_cache) => {
                self.register_synthetic(circuit, shape_cache.as_ref())?;
                None
            }
        };
        let r = Arc::new(Registered {
            params,
            vk: OnceLock::new(),
            kept: std::sync::atomic::AtomicBool::new(false),
        });
        let r = Arc::clone(self.registered.lock().recover().entry(id.clone()).or_insert(r));
        // Registered ahead of any request (a preload): its kind's priority.
        if let Ok((kind, _)) = parse_circuit_id(&id) {
            self.keep_ready_for(&id, &r, kind.default_priority());
        }
        Ok(r)
    }

    /// Has the engine keep the buffers of `circuit_id` ready when its
    /// proofs come at `priority` Critical (once per circuit): a WinningPoSt,
    /// or any request a client marked Critical.
    fn keep_ready_for(&self, circuit_id: &str, registered: &Registered, priority: Priority) {
        use std::sync::atomic::Ordering;
        if priority != Priority::Critical || registered.kept.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Err(e) = self.engine.keep_ready(circuit_id, KEPT_PARTITIONS) {
            tracing::warn!(circuit = %circuit_id, "cannot keep its buffers ready: {}", ErrorChain(&e));
        }
    }

    /// Registers synthetic parameters of `circuit`'s shape: counted before
    /// (in `shape_cache`), measured at 32 GiB, or counted now.
    #[cfg(any(test, feature = "lab"))]
    fn register_synthetic(
        &self,
        circuit: CircuitParams,
        shape_cache: Option<&crate::shapes::ShapeCache>,
    ) -> Result<(), FilecoinError> {
        let CircuitParams {
            circuit_id: id, blank, ..
        } = circuit;
        // Counted before, or measured at 32 GiB: counting a 32 GiB
        // WindowPoSt's shape took 334 s on the H100 host.
        let cached = shape_cache
            .and_then(|c| c.get(&id))
            .or_else(|| crate::production::shape_of(&id));
        let shape = match cached {
            Some(shape) => shape,
            None => {
                let shape = blank.shape().map_err(|source| FilecoinError::Parameters {
                    circuit_id: id.clone(),
                    source,
                })?;
                if let Some(c) = shape_cache {
                    c.record(&id, shape);
                }
                shape
            }
        };
        tracing::info!(circuit = %id, ?shape, "synthetic parameters registered (proofs will not verify)");
        self.engine.register_synthetic_srs(&id, shape);
        Ok(())
    }

    /// Decodes and checks `req` and builds its circuits: what fails here is
    /// the request's fault ([`FilecoinError::is_bad_input`]). Quick (no
    /// parameters are touched); the circuits are big for big sectors.
    pub fn prepare(&self, req: &ProofRequest) -> Result<PreparedProof, FilecoinError> {
        let checks = Checks {
            vanilla: !self.synthetic(),
        };
        let prepared = match req.kind {
            ProofKind::PoRep => porep::prepare(req, checks)?,
            ProofKind::SnapDeals => snap::prepare(req, checks)?,
            ProofKind::WindowPoSt | ProofKind::WinningPoSt => post::prepare(req, checks)?,
        };
        Ok(PreparedProof {
            prepared,
            priority: req.priority(),
            randomness: None,
        })
    }

    /// Decodes, checks and submits `req` ([`prepare`](Self::prepare), then
    /// [`submit_prepared`](Self::submit_prepared)).
    pub fn submit(&self, req: &ProofRequest) -> Result<Submission, FilecoinError> {
        self.submit_prepared(self.prepare(req)?)
    }

    /// Makes sure a prepared proof's parameters are there (making test
    /// sizes' first: minutes) and submits it to the engine as one job.
    pub fn submit_prepared(&self, proof: PreparedProof) -> Result<Submission, FilecoinError> {
        let PreparedProof {
            prepared,
            priority,
            randomness,
        } = proof;
        let Prepared {
            kind,
            circuit,
            partitions,
            inputs,
            aggregation,
        } = prepared;
        let circuit_id = circuit.circuit_id.clone();
        let registered = self.registered(circuit)?;
        self.keep_ready_for(&circuit_id, &registered, priority);
        if let Some(agg) = &aggregation {
            // Before the partitions are proved: without the SRS their proofs
            // could not be returned.
            self.inner_product_srs(agg.sector_bytes)
                .map_err(|source| FilecoinError::Aggregation { kind, source })?;
        }
        let n = partitions.len();
        let job = self.engine.submit(JobSpec {
            circuit_id: circuit_id.clone(),
            priority,
            partitions,
            randomness,
        })?;
        tracing::debug!(%job, %kind, circuit = %circuit_id, partitions = n, "Filecoin proof submitted");
        Ok(Submission {
            job,
            kind,
            circuit_id,
            partitions: n,
            inputs,
            circuit: registered,
            aggregation,
        })
    }

    /// The proof of a submitted job from the job's outcome: its partitions'
    /// proofs in order, verified unless verification is switched off.
    pub fn finish(&self, sub: &Submission, outcome: JobOutcome) -> Result<Proved, FilecoinError> {
        let results = match outcome {
            JobOutcome::Completed(r) => r,
            JobOutcome::Failed(why) => return Err(FilecoinError::Failed { kind: sub.kind, why }),
            JobOutcome::Cancelled => return Err(FilecoinError::Cancelled(sub.kind)),
        };
        let mut proof = Vec::with_capacity(PROOF_BYTES * results.len());
        for r in &results {
            proof.extend_from_slice(&r.proof.to_bytes());
        }
        let verify = self.options.verify && !self.synthetic();
        let t = Instant::now();
        // The points as the prover made them, checked once as a parse of
        // their bytes would check them, for the verifier and the aggregator
        // alike: nothing is parsed back.
        let proofs = if verify || sub.aggregation.is_some() {
            results
                .iter()
                .map(|r| checked(&r.proof))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|source| match verify {
                    true => FilecoinError::Verification { kind: sub.kind, source },
                    false => FilecoinError::Aggregation { kind: sub.kind, source },
                })?
        } else {
            Vec::new()
        };
        let mut verification = if verify {
            self.verify(sub, &proofs)?;
            Some(t.elapsed())
        } else {
            None
        };
        let mut aggregation = None;
        if let Some(agg) = &sub.aggregation {
            let (aggregate, took, checked) = self.aggregate(sub, agg, proofs, verify)?;
            proof = aggregate;
            aggregation = Some(took);
            verification = verification.zip(checked).map(|(a, b)| a + b);
        }
        Ok(Proved {
            kind: sub.kind,
            proof,
            partitions: results.iter().map(|r| r.timings).collect(),
            verification,
            aggregation,
        })
    }

    /// The aggregate of a non-interactive PoRep's partition proofs (in
    /// order), the time it took, and the time its check took (when
    /// `verify`).
    fn aggregate(
        &self,
        sub: &Submission,
        agg: &Aggregation,
        partition_proofs: Vec<groth16::Proof<Bls12>>,
        verify: bool,
    ) -> Result<(Vec<u8>, Duration, Option<Duration>), FilecoinError> {
        let t = Instant::now();
        let failed = |source: anyhow::Error| FilecoinError::Aggregation { kind: sub.kind, source };
        let srs = self.inner_product_srs(agg.sector_bytes).map_err(failed)?;
        let aggregate = agg.aggregate(&srs, partition_proofs).map_err(failed)?;
        let took = t.elapsed();
        if !verify {
            return Ok((aggregate, took, None));
        }
        let t = Instant::now();
        let failed = |source: anyhow::Error| FilecoinError::Verification { kind: sub.kind, source };
        let pvk = self.prepared_vk(sub).map_err(failed)?;
        if !agg.verify(&srs, &pvk, &sub.inputs, &aggregate).map_err(failed)? {
            return Err(FilecoinError::AggregateNotVerified(sub.kind));
        }
        Ok((aggregate, took, Some(t.elapsed())))
    }

    /// Submits `req` and waits for its proof (blocking the thread).
    pub fn prove(&self, req: &ProofRequest) -> Result<Proved, FilecoinError> {
        let sub = self.submit(req)?;
        let outcome = self.engine.wait(sub.job, None)?;
        self.finish(&sub, outcome)
    }

    /// The inner-product SRS of the parameter cache (read once; made for
    /// test sector sizes when missing).
    fn inner_product_srs(&self, sector_bytes: u64) -> anyhow::Result<Arc<InnerProductSrs>> {
        let mut srs = self.inner_product.lock().recover();
        if let Some(s) = srs.as_ref() {
            s.check_for(sector_bytes)?;
            return Ok(Arc::clone(s));
        }
        let s = Arc::new(InnerProductSrs::load(
            self.params.dir(),
            sector_bytes,
            self.params.generates(),
        )?);
        *srs = Some(Arc::clone(&s));
        Ok(s)
    }

    /// The verifying key of a submission's circuit, prepared: the key the
    /// engine loaded with its parameters, prepared once per circuit.
    fn prepared_vk(&self, sub: &Submission) -> anyhow::Result<Arc<PreparedVerifyingKey<Bls12>>> {
        if let Some(v) = sub.circuit.vk.get() {
            return Ok(Arc::clone(v));
        }
        let vk = self.engine.verifying_key(&sub.circuit_id)?;
        let vk = groth16::VerifyingKey::<Bls12> {
            alpha_g1: vk.alpha_g1,
            beta_g1: vk.beta_g1,
            beta_g2: vk.beta_g2,
            gamma_g2: vk.gamma_g2,
            delta_g1: vk.delta_g1,
            delta_g2: vk.delta_g2,
            ic: vk.ic.clone(),
        };
        Ok(Arc::clone(
            sub.circuit
                .vk
                .get_or_init(|| Arc::new(groth16::prepare_verifying_key(&vk))),
        ))
    }

    fn verify(&self, sub: &Submission, proofs: &[groth16::Proof<Bls12>]) -> Result<(), FilecoinError> {
        let failed = |source: anyhow::Error| FilecoinError::Verification { kind: sub.kind, source };
        let pvk = self.prepared_vk(sub).map_err(failed)?;
        let refs: Vec<&groth16::Proof<Bls12>> = proofs.iter().collect();
        let all = groth16::verify_proofs_batch(&pvk, &mut OsRng, &refs, &sub.inputs).map_err(|e| failed(e.into()))?;
        if all {
            return Ok(());
        }
        let partition = proofs
            .iter()
            .zip(&sub.inputs)
            .position(|(p, i)| !groth16::verify_proof(&pvk, p, i).unwrap_or(false))
            .unwrap_or(0);
        Err(FilecoinError::NotVerified {
            kind: sub.kind,
            partition,
        })
    }
}

/// A proof as bellperson's verifier and aggregator take it, its points
/// checked as bellperson's `Proof::read` checks them: on the curve, in the
/// group, not the identity.
fn checked(p: &pinprove_groth16::Proof) -> anyhow::Result<groth16::Proof<Bls12>> {
    use group::prime::PrimeCurveAffine;
    for (name, on_curve, in_group, identity) in [
        ("A", p.a.is_on_curve(), p.a.is_torsion_free(), p.a.is_identity()),
        ("B", p.b.is_on_curve(), p.b.is_torsion_free(), p.b.is_identity()),
        ("C", p.c.is_on_curve(), p.c.is_torsion_free(), p.c.is_identity()),
    ] {
        anyhow::ensure!(
            bool::from(on_curve & in_group),
            "the proof's {name} is not a point of its group"
        );
        anyhow::ensure!(!bool::from(identity), "the proof's {name} is the point at infinity");
    }
    Ok(groth16::Proof { a: p.a, b: p.b, c: p.c })
}

/// The circuit of `kind` for `sector_bytes`-byte sectors, as the
/// parameter cache knows it.
pub(crate) fn circuit_params(kind: ProofKind, sector_bytes: u64) -> Result<CircuitParams, FilecoinError> {
    match kind {
        ProofKind::PoRep => porep::circuit_params(sector_bytes),
        ProofKind::SnapDeals => snap::circuit_params(sector_bytes),
        ProofKind::WindowPoSt | ProofKind::WinningPoSt => post::circuit_params(kind, sector_bytes),
    }
}

/// The parameter file of `kind` at `sector_bytes` in `cache`, made first
/// when it is missing, the size is a test size and the cache generates
/// (`pinprove params generate`); and whether it was made now.
pub fn ensure_parameters(
    cache: &ParamCache,
    kind: ProofKind,
    sector_bytes: u64,
) -> Result<(PathBuf, bool), FilecoinError> {
    let circuit = circuit_params(kind, sector_bytes)?;
    if let Some(path) = cache.existing(&circuit)? {
        return Ok((path, false));
    }
    Ok((cache.ensure(circuit)?, true))
}

/// Writes fresh parameters of `kind` at a test sector size to `w`, made by
/// `generator` from `rng` (what the cache does on first use, open to a
/// comparison of the generators: `pinprove-bench params`); returns the
/// verifying key's bytes.
pub fn write_test_parameters(
    kind: ProofKind,
    sector_bytes: u64,
    generator: Generator,
    rng: &mut dyn rand::RngCore,
    w: &mut std::io::BufWriter<File>,
    progress: &(dyn Fn(SetupStage) + Sync),
) -> Result<Vec<u8>, FilecoinError> {
    let circuit = circuit_params(kind, sector_bytes)?;
    let id = circuit.circuit_id.clone();
    let written = if sector_bytes >= crate::params::GENERATED_BELOW {
        Err(anyhow::anyhow!(
            "production sector sizes use the network's parameters, never generated ones"
        ))
    } else {
        circuit.blank.write(generator, rng, w, progress)
    };
    written.map_err(|source| FilecoinError::Parameters { circuit_id: id, source })
}

/// "porep-32g" → (PoRep, 32 GiB).
pub fn parse_circuit_id(circuit_id: &str) -> Result<(ProofKind, u64), FilecoinError> {
    let unknown = || FilecoinError::UnknownCircuit(circuit_id.to_string());
    let (k, size) = circuit_id.split_once('-').ok_or_else(unknown)?;
    let kind: ProofKind = k.parse().map_err(|_| unknown())?;
    let bytes = kind::SECTOR_SIZES
        .into_iter()
        .find(|&b| kind::size_tag(b).is_ok_and(|t| t == size))
        .ok_or_else(unknown)?;
    Ok((kind, bytes))
}

#[cfg(test)]
mod tests {
    use blstrs::{G1Affine, G2Affine};
    use group::prime::PrimeCurveAffine;

    use super::checked;

    #[test]
    fn proof_points_are_checked_as_a_parse_would_check_them() {
        let good = pinprove_groth16::Proof {
            a: G1Affine::generator(),
            b: G2Affine::generator(),
            c: G1Affine::generator(),
        };
        assert!(checked(&good).is_ok());
        let at_infinity = pinprove_groth16::Proof {
            b: G2Affine::identity(),
            ..good
        };
        let e = checked(&at_infinity).unwrap_err().to_string();
        assert!(e.contains("B is the point at infinity"), "{e}");
        // A point of the curve outside G1: the first small x with a y
        // (compressed bytes, decompressed without the subgroup check).
        let outside = (1u8..=255)
            .find_map(|x| {
                let mut bytes = [0u8; 48];
                (bytes[0], bytes[47]) = (0x80, x);
                Option::<G1Affine>::from(G1Affine::from_compressed_unchecked(&bytes))
                    .filter(|p| !bool::from(p.is_torsion_free()))
            })
            .expect("a point outside G1 among the first x");
        let e = checked(&pinprove_groth16::Proof { c: outside, ..good })
            .unwrap_err()
            .to_string();
        assert!(e.contains("C is not a point of its group"), "{e}");
    }
}
