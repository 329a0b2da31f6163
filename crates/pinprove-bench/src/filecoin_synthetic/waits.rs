//! Waiting for proofs: a job's results, the circuit's recording, and
//! WinningPoSts submitted into running work and timed.

use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use pinprove_engine::{JobOutcome, PartitionResult};
use pinprove_filecoin::{FilecoinProver, ProofRequest, Submission};

use super::secs;

/// Submits the prepared WinningPoSt once partitions submitted since
/// `started` are on a device, and times it to its end.
fn winning_into(prover: &FilecoinProver, w: pinprove_filecoin::PreparedProof, started: Instant) -> Result<f64> {
    let engine = prover.engine();
    while engine.status().devices.iter().all(|d| d.in_flight == 0) && started.elapsed() < Duration::from_secs(1200) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let sub = prover.submit_prepared(w)?;
    let results = completed(prover, &sub)?;
    let s = secs(t.elapsed());
    eprintln!("a WinningPoSt submitted while other partitions were being proved: done in {s:.2} s");
    for r in &results {
        let p = &r.timings;
        eprintln!(
            "  its partition {}: admission {:.3} s, synthesis {:.3} s, wait for a device worker {:.3} s, start {:.3} s, \
             wait for a finalizer {:.3} s, finish {:.3} s",
            r.index,
            secs(p.queue_wait + p.budget_wait + p.srs_load),
            secs(p.synthesis),
            secs(p.handoff_wait),
            secs(p.start),
            secs(p.finish_wait),
            secs(p.finish)
        );
    }
    Ok(s)
}

/// Runs `proofs` (which waits for the measured proofs) while up to `n`
/// WinningPoSts of the request `w` are submitted among their partitions,
/// one after another, `interval` apart, until `proofs` returns; gives its
/// result and each WinningPoSt's time.
pub(super) fn winnings_during<T: Send>(
    prover: &FilecoinProver,
    w: &pinprove_filecoin::ProofRequest,
    n: usize,
    interval: Duration,
    started: Instant,
    proofs: impl FnOnce() -> Result<T> + Send,
) -> Result<(T, Vec<f64>)> {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let winnings = scope.spawn(|| -> Result<Vec<f64>> {
            let mut times = Vec::new();
            for i in 0..n {
                if i > 0 {
                    let until = Instant::now() + interval;
                    while Instant::now() < until && !done.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                times.push(winning_into(prover, prover.prepare(w)?, started)?);
            }
            Ok(times)
        });
        let result = proofs();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let times = winnings
            .join()
            .map_err(|_| anyhow::anyhow!("the WinningPoSt thread panicked"))??;
        Ok((result?, times))
    })
}

/// Records `circuit` from the first partition of `req` before any proof,
/// as a daemon that has been up holds its recording; the seconds it took.
pub(crate) fn record_ahead(prover: &FilecoinProver, req: &ProofRequest, circuit: &str) -> Result<f64> {
    let part = prover.prepare(req)?.into_partitions().swap_remove(0);
    let t = Instant::now();
    ensure!(
        prover.engine().precompile(circuit, &*part),
        "{circuit}: its partitions cannot be pre-compiled"
    );
    drop(part);
    wait_for_recording(prover.engine())?;
    Ok(secs(t.elapsed()))
}

/// Waits until the engine is quiet: its circuit recording (started ahead,
/// or by the first proof) is made.
pub(super) fn wait_for_recording(engine: &pinprove_engine::Engine) -> Result<()> {
    ensure!(
        engine.wait_quiet(Duration::from_secs(1800)),
        "the circuit's recording did not finish"
    );
    Ok(())
}

/// Waits for a submission and checks it completed (its proof cannot
/// verify: `finish` does not try).
pub(super) fn completed(prover: &FilecoinProver, sub: &Submission) -> Result<Vec<PartitionResult>> {
    match prover.engine().wait(sub.job, None)? {
        JobOutcome::Completed(r) => Ok(r),
        other => bail!("{} job {} ended {other:?}", sub.kind, sub.job),
    }
}
