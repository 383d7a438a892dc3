//! A stand-in for a deadline set's tokio entry (`SetEntry`), with tokio's behaviour
//! as the set's service relies on it: the driver fires the entry once its time has
//! come and wakes the last waker it was polled with (outside the driver's lock); a
//! reset to a time the driver has passed fires the entry at once, waking that waker
//! from inside the reset; a poll registers the waker, then reports the fire.
#![allow(dead_code)]

use lazy_deadline::core::service::SetEntry;
use lazy_deadline::core::shared_set::SharedSet;
use loom::sync::Mutex;
use std::sync::{Arc, Weak};

/// The driver's side of the stand-in.
pub struct Driver {
    /// (time the driver has passed, where the entry is armed, fired, waker registered)
    state: Mutex<(u64, u64, bool, bool)>,
    /// The set whose service the entry's waker runs (a std `Weak`: the entry lives
    /// inside that set, and the model does not leak it).
    set: Mutex<Weak<SharedSet<StubEntry>>>,
}

/// The entry as the set holds it.
pub struct StubEntry {
    driver: Arc<Driver>,
}

impl Driver {
    /// A driver at time 0 and its entry, not armed.
    pub fn new() -> (Arc<Self>, StubEntry) {
        let driver = Arc::new(Self {
            state: Mutex::new((0, u64::MAX, false, false)),
            set: Mutex::new(Weak::new()),
        });
        let entry = StubEntry {
            driver: driver.clone(),
        };
        (driver, entry)
    }

    /// Points the entry's waker at `set`.
    pub fn wakes(&self, set: &Arc<SharedSet<StubEntry>>) {
        *self.set.lock().unwrap() = Arc::downgrade(set);
    }

    /// The driver turns at time `now`: fires the entry if it is due, then wakes the
    /// registered waker (the set's service), outside the driver's lock.
    pub fn turn(&self, now: u64) {
        let wake = {
            let mut state = self.state.lock().unwrap();
            state.0 = state.0.max(now);
            if state.1 <= state.0 && !state.2 {
                state.2 = true;
                std::mem::replace(&mut state.3, false)
            } else {
                false
            }
        };
        if wake {
            self.wake();
        }
    }

    fn wake(&self) {
        let set = self.set.lock().unwrap().upgrade();
        if let Some(set) = set {
            set.signal();
        }
    }
}

impl SetEntry for StubEntry {
    fn poll_fired(&mut self) -> bool {
        let mut state = self.driver.state.lock().unwrap();
        state.3 = true; // tokio registers first, and keeps the waker after a fire
        state.2
    }

    fn reset(&mut self, at: u64) {
        let wake = {
            let mut state = self.driver.state.lock().unwrap();
            state.1 = at;
            state.2 = at <= state.0;
            state.2 && std::mem::replace(&mut state.3, false)
        };
        if wake {
            // Inside the reset, as tokio does: the set's holder is the caller.
            self.driver.wake();
        }
    }

    fn home_now(&mut self) -> Option<u64> {
        None // the service runs away from the set's runtime: only fires count
    }

    fn keeps_waker_across_reset(&self) -> bool {
        true // as tokio's default driver: `reset` above leaves the waker registered
    }
}
