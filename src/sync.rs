//! The sync shim: std atomics and `futures`' `AtomicWaker` normally, loom's under
//! `--cfg lazy_deadline_loom`, so that `loom-tests/` model-checks the very code that ships.

#[cfg(not(lazy_deadline_loom))]
pub use std::sync::{
    atomic::{fence, AtomicU64, Ordering},
    Arc,
};

#[cfg(lazy_deadline_loom)]
pub use loom::sync::{
    atomic::{fence, AtomicU64, Ordering},
    Arc,
};

use std::task::Waker;

/// One waker slot shared between the owner (who registers) and handles (who wake).
///
/// A thin wrapper so both backends expose the same by-reference API.
pub struct AtomicWaker {
    #[cfg(not(lazy_deadline_loom))]
    inner: futures::task::AtomicWaker,
    #[cfg(lazy_deadline_loom)]
    inner: loom::future::AtomicWaker,
}

impl AtomicWaker {
    /// An empty slot.
    pub fn new() -> Self {
        Self {
            #[cfg(not(lazy_deadline_loom))]
            inner: futures::task::AtomicWaker::new(),
            #[cfg(lazy_deadline_loom)]
            inner: loom::future::AtomicWaker::new(),
        }
    }

    /// Stores `waker` for the next `wake`. Whatever a waker stored before this call
    /// (and before the `wake` that follows it) is visible after it: the inner type's
    /// acquire/release state machine gives that, and the wake-then-check protocols in
    /// `core` rely on it.
    pub fn register(&self, waker: &Waker) {
        #[cfg(not(lazy_deadline_loom))]
        self.inner.register(waker);
        #[cfg(lazy_deadline_loom)]
        self.inner.register_by_ref(waker);
    }

    /// Wakes (and removes) the registered waker, if any.
    pub fn wake(&self) {
        self.inner.wake();
    }

    /// Drops the registered waker without waking it (the owner is going away).
    pub fn clear(&self) {
        #[cfg(not(lazy_deadline_loom))]
        drop(self.inner.take());
        #[cfg(lazy_deadline_loom)]
        drop(self.inner.take_waker());
    }
}

impl Default for AtomicWaker {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for AtomicWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtomicWaker")
    }
}
