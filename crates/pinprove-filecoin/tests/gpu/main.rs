//! Filecoin's kinds at 2 KiB through the engine and the native GPU backend
//! together, as the daemon runs them on a small card: device memory capped
//! so that the bases stream from host memory and background partitions
//! are started two at a time over them, background and urgent work mixed,
//! every proof verified by filecoin-proofs-api. The marks that close each
//! group of MSMs are held back on the device
//! ([`pinprove_cuda::delay_msm_marks_for_tests`]) as a partner's long last
//! window holds them at 32 GiB: there, reading a proof's GPU times before
//! they completed failed every paired proof (`cudaErrorNotReady`).
//!
//! Each test skips where no GPU is usable, and fails there instead where
//! one is expected (`PINPROVE_REQUIRE_GPU=1`, set by `scripts/gpu-run`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pinprove_engine::{EngineConfig, JobOutcome};
use pinprove_filecoin::kind::ProofKind;
use pinprove_filecoin::sample::SampleSector;
use pinprove_filecoin::{FilecoinOptions, FilecoinProver, ParamCache, ProofRequest, Proved, Submission};
use pinprove_mem::BudgetConfig;
use pinprove_stack::{BackendKind, NativeOptions, Stack, StackConfig};

/// How long the device holds each group's closing marks behind its
/// results.
const MARK_DELAY_US: u32 = 300_000;

/// No proof here takes this long, unless something waits forever.
const DEADLINE: Duration = Duration::from_secs(240);

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pinprove-fc-gpu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The least device memory in which `kind`'s 2 KiB proofs plan at all,
/// and whether their bases stream there (in the smallest windows that
/// fit; a circuit as small as a 2 KiB WindowPoSt's keeps them resident
/// even then).
fn least_limit(kind: ProofKind) -> (u64, bool) {
    use pinprove_cuda::plan::{CircuitSizes, Plan};
    let (path, _) = pinprove_filecoin::ensure_parameters(&ParamCache::from_env(), kind, 2048).unwrap();
    let pool = pinprove_mem::PinnedPool::new(
        Arc::new(pinprove_mem::HeapAllocator::default()) as Arc<dyn pinprove_mem::HostAllocator>,
        pinprove_mem::MemoryBudget::new(8 << 30),
        pinprove_mem::PoolConfig::default(),
    );
    let srs = pinprove_groth16::Srs::read_file(&path, &pool, pinprove_groth16::Validation::OnCurve).unwrap();
    let sizes = CircuitSizes::of_srs(&srs);
    let limit = (1..)
        .map(|mib: u64| pinprove_cuda::plan::SLACK + (mib << 20))
        .find(|&l| Plan::new(&sizes, l).is_ok())
        .unwrap();
    let plan = Plan::new(&sizes, limit).unwrap();
    (limit, !plan.bases_resident)
}

/// A prover at the daemon's defaults on the native backend (but for
/// pairing, on: two background partitions per start), with the least GPU
/// memory in which every kind of `kinds` plans (the first one's bases
/// streamed there: its partitions are the ones that pair), a budget of
/// `budget` bytes, one device worker and one piece queued at a time (so
/// that background partitions gather in the hand-off and are started
/// together); `None` (the test skipped, said why) where no GPU is usable.
fn native_prover(test: &str, kinds: &[ProofKind], budget: u64) -> Option<FilecoinProver> {
    if !pinprove_cuda::BUILT_WITH_CUDA {
        pinprove_mem::test_util::skip_without_gpu(test, "built without the cuda feature");
        return None;
    }
    let limits: Vec<(u64, bool)> = kinds.iter().map(|&k| least_limit(k)).collect();
    let memory_limit = limits.iter().map(|&(l, _)| l).max().unwrap();
    if kinds.len() == 1 {
        assert!(limits[0].1, "{}: its bases stream under {memory_limit} bytes", kinds[0]);
    }
    eprintln!("{test}: device memory limit {memory_limit} bytes");
    let stack = match Stack::build(&StackConfig {
        backend: BackendKind::Native,
        budget: BudgetConfig::Fixed(budget),
        native: NativeOptions {
            memory_limit: Some(memory_limit),
            queue_depth: 1,
            workers_per_device: 1,
            // Pairing, on here whatever the default.
            partitions_sharing_bases: 2,
            ..NativeOptions::default()
        },
        ..StackConfig::default()
    }) {
        Ok(s) => s,
        Err(e) => {
            pinprove_mem::test_util::skip_without_gpu(test, e);
            return None;
        }
    };
    let engine = stack
        .engine(EngineConfig {
            synthesis_workers: 2,
            // As the daemon: recorded circuits, a/b/c computed on the device.
            precompiled: true,
            ..EngineConfig::default()
        })
        .unwrap();
    pinprove_cuda::delay_msm_marks_for_tests(MARK_DELAY_US);
    Some(FilecoinProver::new(
        Arc::new(engine),
        ParamCache::from_env(),
        FilecoinOptions::default(),
    ))
}

/// Waits for `sub` (failing the test past [`DEADLINE`]) and finishes it:
/// the proof checked and returned.
fn finish(prover: &FilecoinProver, sub: &Submission, what: &str) -> Proved {
    let outcome: JobOutcome = prover
        .engine()
        .wait(sub.job, Some(DEADLINE))
        .unwrap_or_else(|e| panic!("{what}: not done after {DEADLINE:?}: {e}"));
    prover
        .finish(sub, outcome)
        .unwrap_or_else(|e| panic!("{what}: {}", pinprove_mem::ErrorChain(&e)))
}

fn submit(prover: &FilecoinProver, req: &ProofRequest) -> Submission {
    prover.submit(req).unwrap()
}

/// Several PoRep C2 jobs at once over streamed bases (background, started
/// in pairs), a WinningPoSt among them: every proof verifies.
#[test]
fn paired_porep_partitions_over_streamed_bases_prove_and_verify_beside_winning_post() {
    let test = "paired_porep_partitions_over_streamed_bases_prove_and_verify_beside_winning_post";
    let dir = temp_dir("porep");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 31, 1000, 5).unwrap();
    let Some(prover) = native_prover(test, &[ProofKind::PoRep], 8 << 30) else {
        return;
    };
    let req = sector.porep_request();
    let jobs: Vec<Submission> = (0..6).map(|_| submit(&prover, &req)).collect();
    let randomness = sector.randomness();
    let winning = submit(&prover, &sector.winning_post_request(randomness).unwrap());
    let proved = finish(&prover, &winning, "winning post");
    assert!(sector.verify_winning_post(randomness, &proved.proof).unwrap());
    for (i, sub) in jobs.iter().enumerate() {
        let proved = finish(&prover, sub, &format!("porep {i}"));
        assert!(sector.verify_seal(&proved.proof).unwrap(), "porep {i} verifies");
    }
    let together = prover.engine().metrics().partitions_started_together();
    assert!(together >= 2, "partitions were started in pairs: {together}");
    eprintln!("{test}: 6 PoRep proofs, {together} partitions started in pairs");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Several SnapDeals updates at once over streamed bases, started in pairs:
/// every proof verifies.
#[test]
fn paired_snap_deals_partitions_over_streamed_bases_prove_and_verify() {
    let test = "paired_snap_deals_partitions_over_streamed_bases_prove_and_verify";
    let dir = temp_dir("snap");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 33, 1000, 6).unwrap();
    let req = sector.snap_update(&dir.join("update")).unwrap();
    let Some(prover) = native_prover(test, &[ProofKind::SnapDeals], 8 << 30) else {
        return;
    };
    let jobs: Vec<Submission> = (0..6).map(|_| submit(&prover, &req)).collect();
    for (i, sub) in jobs.iter().enumerate() {
        let proved = finish(&prover, sub, &format!("snap {i}"));
        assert!(
            SampleSector::verify_update(&req, &proved.proof).unwrap(),
            "update {i} verifies"
        );
    }
    let together = prover.engine().metrics().partitions_started_together();
    assert!(together >= 2, "partitions were started in pairs: {together}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two WindowPoSt partitions queued at once (urgent) beside a PoRep
/// stream (background), bases streamed, in a budget of about two
/// partitions' working sets (1.87 GB each at 2 KiB, the pool's buffers
/// rounded up: 1 GiB refused every job as too large): all come back
/// within the deadline and verify.
#[test]
fn window_post_partitions_queued_at_once_beside_a_porep_stream_all_prove() {
    let test = "window_post_partitions_queued_at_once_beside_a_porep_stream_all_prove";
    let dir = temp_dir("wpost");
    let mut sector = SampleSector::seal(&dir.join("sector"), 2048, 35, 1000, 7).unwrap();
    let Some(prover) = native_prover(test, &[ProofKind::WindowPoSt, ProofKind::PoRep], 4 << 30) else {
        return;
    };
    let porep = sector.porep_request();
    let stream: Vec<Submission> = (0..4).map(|_| submit(&prover, &porep)).collect();
    let randomness = sector.randomness();
    let sectors = [3, 7, 11];
    let requests = sector.window_post_requests(&sectors, randomness).unwrap();
    assert_eq!(requests.len(), 2);
    let posts: Vec<Submission> = requests.iter().map(|r| submit(&prover, r)).collect();
    let mut merged = Vec::new();
    for (i, sub) in posts.iter().enumerate() {
        merged.extend(finish(&prover, sub, &format!("window post partition {i}")).proof);
    }
    assert!(sector.verify_window_post(&sectors, randomness, &merged).unwrap());
    for (i, sub) in stream.iter().enumerate() {
        let proved = finish(&prover, sub, &format!("porep {i}"));
        assert!(sector.verify_seal(&proved.proof).unwrap(), "porep {i} verifies");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
