//! What held the memory budget while a stream ran: sampled from the
//! engine's status a few times a second, the moment it was fullest kept,
//! so that a stream bound by admission says by what.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use pinprove_engine::{Engine, Phase};
use serde::Serialize;

use crate::report::bytes;

/// The budget at one moment, by holder.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BudgetSample {
    pub used: u64,
    pub total: u64,
    /// Loaded parameters.
    pub srs: u64,
    /// Circuit recordings.
    pub recordings: u64,
    /// Pool buffers checked out: the loaded parameters' points (`srs`
    /// counts them too), synthesized partitions' witnesses, a/b/c,
    /// prepared scalars.
    pub checked_out: u64,
    /// Pool buffers idle (of them, `kept` are kept for device lanes and
    /// urgent circuits, out of reach of other work).
    pub idle: u64,
    pub kept: u64,
    /// Everything else: reservations of admissions not yet in buffers,
    /// fenced buffers, the urgent reserve.
    pub other: u64,
    /// Partitions out of the queue, and of them those in admission, in
    /// synthesis, and on a device (waiting for it, in its first step or its
    /// second).
    pub partitions: usize,
    pub admitting: usize,
    pub synthesizing: usize,
    pub on_device: usize,
}

impl BudgetSample {
    fn of(engine: &Engine) -> BudgetSample {
        let s = engine.status();
        let srs = s.srs.iter().filter(|i| i.loaded).map(|i| i.bytes).sum();
        let recordings = s.synthesis.iter().map(|c| c.recording_bytes).sum();
        let count = |phases: &[Phase]| s.partitions.iter().filter(|p| phases.contains(&p.phase)).count();
        // The parameters' points are pool buffers: in `checked_out` already.
        let known = recordings + s.pool_checked_out + s.pool_idle;
        BudgetSample {
            used: s.budget_used,
            total: s.budget_total,
            srs,
            recordings,
            checked_out: s.pool_checked_out,
            idle: s.pool_idle,
            kept: s.pool_kept,
            other: s.budget_used.saturating_sub(known),
            partitions: s.partitions.len(),
            admitting: count(&[Phase::Admission, Phase::SrsLoad]),
            synthesizing: count(&[Phase::Synthesis]),
            on_device: count(&[Phase::HandoffWait, Phase::Start, Phase::FinishWait, Phase::Finish]),
        }
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        format!(
            "budget at its fullest: {} of {} used: pool checked out {} (parameters {} of it), recordings {}, idle {} ({} kept), other {}; \
             partitions out of the queue then {} ({} in admission, {} synthesizing, {} at the device)",
            bytes(self.used),
            bytes(self.total),
            bytes(self.checked_out),
            bytes(self.srs),
            bytes(self.recordings),
            bytes(self.idle),
            bytes(self.kept),
            bytes(self.other),
            self.partitions,
            self.admitting,
            self.synthesizing,
            self.on_device
        )
    }
}

/// Samples `engine` every `every` until [`BudgetWatch::stop`] (or until
/// dropped, on an early return).
pub struct BudgetWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<(BudgetSample, usize)>>,
}

impl BudgetWatch {
    pub fn start(engine: Arc<Engine>, every: Duration) -> BudgetWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut fullest = BudgetSample::default();
            let mut most_on_device = 0;
            while !stopped.load(Ordering::Relaxed) {
                let s = BudgetSample::of(&engine);
                most_on_device = most_on_device.max(s.on_device);
                if s.used >= fullest.used {
                    fullest = s;
                }
                std::thread::sleep(every);
            }
            (fullest, most_on_device)
        });
        BudgetWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// The fullest sample, and the most partitions at the device at once.
    pub fn stop(mut self) -> (BudgetSample, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for BudgetWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
