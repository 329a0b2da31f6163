//! What a long command is doing, on stderr (stdout is for results): a
//! spinner with the elapsed time when stdout is a terminal, one plain line
//! per change of state when it is not (a log file, a pipe, a test).

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use pinprove_filecoin::params::{GenerationProgress, LogProgress};

fn terminal() -> bool {
    std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

fn spinner(prefix: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix}: {msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_prefix(prefix.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

pub struct Progress {
    what: String,
    started: Instant,
    bar: Option<ProgressBar>,
    last: Mutex<String>,
}

impl Progress {
    /// A display of `what` ("winning job-3").
    pub fn new(what: &str) -> Progress {
        let bar = terminal().then(|| spinner(what));
        Progress {
            what: what.to_string(),
            started: Instant::now(),
            bar,
            last: Mutex::new(String::new()),
        }
    }

    /// Now doing `state` ("queued", "proving").
    pub fn set(&self, state: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(state.to_string()),
            None => {
                let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
                if *last != state {
                    eprintln!(
                        "{}: {state} (after {:.1} s)",
                        self.what,
                        self.started.elapsed().as_secs_f64()
                    );
                    *last = state.to_string();
                }
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Parameter generation (minutes, once per circuit): a spinner on a
/// terminal, log lines otherwise.
#[derive(Default)]
pub struct Generation {
    bar: Mutex<Option<ProgressBar>>,
}

impl GenerationProgress for Generation {
    fn started(&self, circuit_id: &str, path: &Path) {
        if !terminal() {
            return LogProgress.started(circuit_id, path);
        }
        let bar = spinner(&format!("parameters {circuit_id}"));
        bar.set_message("making them (once; they are kept in the parameter cache)");
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
    }

    fn tick(&self, circuit_id: &str, elapsed: Duration, done: Option<f64>) {
        if !terminal() {
            return LogProgress.tick(circuit_id, elapsed, done);
        }
        if let (Some(bar), Some(f)) = (self.bar.lock().unwrap_or_else(|p| p.into_inner()).as_ref(), done) {
            bar.set_message(format!(
                "{:.0}% of the points (once; they are kept in the parameter cache)",
                f * 100.0
            ));
        }
    }

    fn finished(&self, circuit_id: &str, elapsed: Duration, bytes: u64) {
        match self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(bar) => {
                bar.finish_and_clear();
                eprintln!(
                    "parameters {circuit_id}: made in {:.1} s ({})",
                    elapsed.as_secs_f64(),
                    pinprove::units::bytes(bytes)
                );
            }
            None => LogProgress.finished(circuit_id, elapsed, bytes),
        }
    }
}
