//! A waker that records whether it was woken, built on loom's atomics; a stand-in
//! for tokio's timer entry; a waker whose clones move (`moving_waker`).
#![allow(dead_code)]

mod moving_waker;
pub mod set_entry;
#[allow(unused_imports)] // only the wakers models use it
pub use moving_waker::MovingWaker;

use loom::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

pub struct WakeFlag(AtomicUsize);

impl WakeFlag {
    pub fn new() -> (Arc<Self>, Waker) {
        let flag = Arc::new(Self(AtomicUsize::new(0)));
        let waker = Waker::from(flag.clone());
        (flag, waker)
    }

    /// Whether any wake reached this waker (read after joining the waking thread).
    pub fn woken(&self) -> bool {
        self.count() > 0
    }

    /// How many wakes reached this waker so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Release);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// A stand-in for tokio's timer entry, with the guarantee the owner relies on: a poll
/// either sees the fire, or the fire comes after it and calls the registered waker.
/// (tokio gets this lock-free from its entry state and `AtomicWaker`; a mutex gives
/// the same guarantee in fewer states.) The "waker" is a closure standing for the
/// shared state's `Wake` impl, since loom's `Arc` cannot make a std `Waker`.
pub struct EntryStub {
    state: loom::sync::Mutex<(bool, bool)>, // (fired, registered)
}

impl EntryStub {
    /// An entry armed and already polled once (registered), not fired.
    pub fn registered() -> Self {
        Self {
            state: loom::sync::Mutex::new((false, true)),
        }
    }

    /// An entry armed and never polled: its fire calls no waker until a poll
    /// registers one.
    pub fn unregistered() -> Self {
        Self {
            state: loom::sync::Mutex::new((false, false)),
        }
    }

    /// Whether it fired (tokio's `is_elapsed`: no registration).
    pub fn has_fired(&self) -> bool {
        self.state.lock().unwrap().0
    }

    /// The driver fires the entry: marks it, then calls the waker if one is there.
    pub fn fire(&self, wake: impl FnOnce()) {
        let registered = {
            let mut state = self.state.lock().unwrap();
            state.0 = true;
            std::mem::replace(&mut state.1, false)
        };
        if registered {
            wake();
        }
    }

    /// The owner polls it: `true` once fired; otherwise registers and says pending.
    pub fn poll(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        if state.0 {
            return true;
        }
        state.1 = true;
        false
    }
}
