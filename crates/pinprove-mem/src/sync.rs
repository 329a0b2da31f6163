//! Locks that outlive a panic.
//!
//! A panic while a lock is held poisons it. Every lock in pinprove guards
//! state that stays consistent between statements (counters, queues, maps
//! updated in one step), and a panicking job is turned into that job's
//! failure while the process goes on serving others; so a poisoned lock is
//! taken as it is instead of spreading the panic to every later user.

use std::sync::{LockResult, PoisonError};

/// Takes the value of a lock result whether or not the lock was poisoned.
pub trait Recover<T> {
    /// The guard (or the wait result), poisoned or not.
    fn recover(self) -> T;
}

impl<T> Recover<T> for LockResult<T> {
    fn recover(self) -> T {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::Recover;

    #[test]
    fn a_poisoned_lock_is_taken_as_it_is() {
        let m = Arc::new(Mutex::new(1));
        let m2 = Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g = 2;
            panic!("while holding the lock");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.lock().recover(), 2);
    }
}
