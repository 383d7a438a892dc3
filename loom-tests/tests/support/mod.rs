//! A waker that records whether it was woken, built on loom's atomics.
#![allow(dead_code)]

use loom::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

pub struct WakeFlag(AtomicBool);

impl WakeFlag {
    pub fn new() -> (Arc<Self>, Waker) {
        let flag = Arc::new(Self(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        (flag, waker)
    }

    /// Whether any wake reached this waker (read after joining the waking thread).
    pub fn woken(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}
