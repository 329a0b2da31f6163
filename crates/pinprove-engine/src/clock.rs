//! Where the engine's decisions read the time: a wall clock in service, a
//! clock moved by hand in tests and simulations, so that what depends on
//! how long something took (a parameter set idle as long as its load took)
//! is tested without waiting that long.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;

/// A source of time: how long since the clock's origin.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Time since the clock's origin; never goes back.
    fn now(&self) -> Duration;
}

/// The wall clock, from when it was made.
#[derive(Debug)]
pub struct WallClock {
    origin: Instant,
}

impl WallClock {
    /// A wall clock whose origin is now.
    pub fn new() -> WallClock {
        WallClock { origin: Instant::now() }
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new()
    }
}

impl Clock for WallClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told: a test says that a load took an
/// hour, or that an hour passed, without either happening.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Mutex<Duration>,
}

impl ManualClock {
    /// A clock at its origin.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.now.lock().recover() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.now.lock().recover()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::new();
        assert_eq!(c.now(), Duration::ZERO);
        c.advance(Duration::from_secs(3600));
        assert_eq!(c.now(), Duration::from_secs(3600));
        let w = WallClock::new();
        let a = w.now();
        assert!(w.now() >= a);
    }
}
