//! A proof that does not verify is a failed job, never a result: a backend
//! that spoils every proof it makes (A and C swapped) must make the Filecoin
//! front refuse the proof, with that reason, and leave the engine serving.

use std::sync::Arc;

use crate::common::*;
use pinprove_engine::{EngineConfig, JobOutcome};
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinError, FilecoinOptions, FilecoinProver, ParamCache};
use pinprove_groth16::{
    Backend, Capabilities, CapacityHint, Proof, ProofBatch, ProveError, QueryLengths, ResidentSrs, Srs, StartedProof,
};
use pinprove_mem::BudgetConfig;
use pinprove_stack::{BackendKind, Stack, StackConfig};

/// Delegates everything, and swaps A and C of every proof it returns.
struct Spoiling(Arc<dyn Backend>);

struct SpoiledStart(Box<dyn StartedProof>);

impl StartedProof for SpoiledStart {
    fn finish(self: Box<Self>) -> Result<Vec<Proof>, ProveError> {
        let mut proofs = self.0.finish()?;
        for p in &mut proofs {
            std::mem::swap(&mut p.a, &mut p.c);
        }
        Ok(proofs)
    }
}

impl Backend for Spoiling {
    fn name(&self) -> &'static str {
        "spoiling"
    }
    fn capabilities(&self) -> Capabilities {
        self.0.capabilities()
    }
    fn extra_working_set(&self, shape: &CapacityHint, queries: Option<&QueryLengths>, urgent: bool) -> u64 {
        self.0.extra_working_set(shape, queries, urgent)
    }
    fn prepare_srs(&self, srs: &Srs) -> Result<u64, ProveError> {
        self.0.prepare_srs(srs)
    }
    fn evict_srs(&self, srs: &Srs) {
        self.0.evict_srs(srs)
    }
    fn resident_srs(&self) -> Vec<ResidentSrs> {
        self.0.resident_srs()
    }
    fn holds_srs(&self, srs: &Srs) -> bool {
        self.0.holds_srs(srs)
    }
    fn needs_host_points(&self, srs: &Srs) -> bool {
        self.0.needs_host_points(srs)
    }
    fn start(&self, job: ProofBatch) -> Result<Box<dyn StartedProof>, ProveError> {
        Ok(Box::new(SpoiledStart(self.0.start(job)?)))
    }
}

fn spoiling_prover(options: FilecoinOptions) -> FilecoinProver {
    let mut stack = Stack::build(&StackConfig {
        backend: BackendKind::Cpu,
        budget: BudgetConfig::Fixed(8 << 30),
        ..StackConfig::default()
    })
    .unwrap();
    for d in &mut stack.devices {
        d.backend = Arc::new(Spoiling(Arc::clone(&d.backend)));
    }
    let engine = stack
        .engine(EngineConfig {
            synthesis_workers: 2,
            ..EngineConfig::default()
        })
        .unwrap();
    FilecoinProver::new(Arc::new(engine), ParamCache::from_env(), options)
}

#[test]
fn a_proof_that_does_not_verify_fails_its_job_and_the_engine_keeps_serving() {
    let dir = temp_dir("unverified");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 7, 1000, 1).unwrap();
    let randomness = sector.randomness();
    let req = sector.winning_post_request(randomness).unwrap();

    let prover = spoiling_prover(FilecoinOptions::default());
    let sub = prover.submit(&req).unwrap();
    let outcome = prover.engine().wait(sub.job, None).unwrap();
    assert!(matches!(outcome, JobOutcome::Completed(_)), "the engine made a proof");
    match prover.finish(&sub, outcome) {
        Err(e @ FilecoinError::NotVerified { .. }) => {
            assert!(e.to_string().contains("does not verify"), "{e}")
        }
        other => panic!("a spoiled proof must be refused, got {other:?}"),
    }
    // The next request is served (and refused for the same reason), and
    // everything the jobs held is back.
    assert!(matches!(prover.prove(&req), Err(FilecoinError::NotVerified { .. })));
    assert_idle(prover.engine(), "after refused proofs");

    // With verification switched off the spoiled bytes are returned, and
    // filecoin-proofs' verifier rejects them: the check above is what kept
    // them from the caller.
    let unchecked = spoiling_prover(FilecoinOptions { verify: false });
    let proved = unchecked.prove(&req).unwrap();
    assert!(proved.verification.is_none());
    assert!(!sector.verify_winning_post(randomness, &proved.proof).unwrap());
    assert_idle(unchecked.engine(), "unchecked");
    std::fs::remove_dir_all(&dir).unwrap();
}
