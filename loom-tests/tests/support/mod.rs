//! A waker that records whether it was woken, built on loom's atomics.
#![allow(dead_code)]

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
