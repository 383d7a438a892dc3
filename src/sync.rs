//! The sync shim: std atomics and `Mutex` normally, loom's under
//! `--cfg lazy_deadline_loom`, so that `loom-tests/` model-checks the very code that
//! ships. Also the owner's waker slot, [`WakerSlot`], built on the same primitives.

#[cfg(not(lazy_deadline_loom))]
pub use std::sync::{
    atomic::{fence, AtomicBool, AtomicU64, Ordering},
    Arc, Mutex,
};

#[cfg(lazy_deadline_loom)]
pub use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU64, Ordering},
    Arc, Mutex,
};

use std::task::Waker;

/// One waker slot shared between the owner (who registers) and handles (who wake).
///
/// A mutex-guarded `Option<Waker>` plus `full`, which is changed only under the lock.
/// The point of `full` is the owner's fast path: a `select!` loop polls its timer on
/// every iteration, and re-registering the same waker each time (what an
/// `AtomicWaker` does: two CASes) doubled the cost of a pending poll. The owner
/// remembers which waker it stored last ([`WakerMemo`]) and skips the lock when the
/// slot is still full with that waker.
///
/// Why the skip is safe: only the owner stores into the slot, so a full slot holds the
/// owner's last waker. If the owner reads `full == true` but a handle has just emptied
/// the slot, that handle is waking exactly this (equivalent) waker, so the owner is
/// polled again, and the wake's hand-off through the scheduler makes `full == false`
/// visible to that poll, which registers. The usual register-then-read / store-then-
/// wake guarantee comes from the mutex: the two critical sections are totally ordered.
pub struct WakerSlot {
    waker: Mutex<Option<Waker>>,
    full: AtomicBool,
}

/// The identity of the waker the owner stored last (`Waker::data` and `vtable`
/// addresses, as `Waker::will_wake` compares them); zero when none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakerMemo {
    data: usize,
    vtable: usize,
}

impl WakerMemo {
    #[inline]
    fn of(waker: &Waker) -> Self {
        Self {
            data: waker.data() as usize,
            vtable: waker.vtable() as *const _ as usize,
        }
    }
}

impl WakerSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self {
            waker: Mutex::new(None),
            full: AtomicBool::new(false),
        }
    }

    fn slot(&self) -> impl std::ops::DerefMut<Target = Option<Waker>> + '_ {
        // A poisoned lock only means a waker panicked while we held it: the slot's
        // content is still valid, so keep going rather than panic inside the crate.
        #[cfg(not(lazy_deadline_loom))]
        let guard = self
            .waker
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        #[cfg(lazy_deadline_loom)]
        let guard = self.waker.lock().unwrap();
        guard
    }

    /// Stores `waker` for the next `wake`, unless the slot still holds the same one
    /// (see the type docs). Whatever a waker stored before a `wake` that found the
    /// slot empty is visible after this call.
    #[inline]
    pub fn register(&self, waker: &Waker, memo: &mut WakerMemo) {
        let id = WakerMemo::of(waker);
        // Relaxed: a stale `true` implies a wake to this same waker is in flight
        // (type docs); a stale `false` only costs a lock.
        if *memo == id && self.full.load(Ordering::Relaxed) {
            return;
        }
        self.store(waker, memo, id);
    }

    /// The locked part of [`register`](Self::register), kept out of line so the
    /// unchanged-waker check inlines into every poll.
    #[inline(never)]
    fn store(&self, waker: &Waker, memo: &mut WakerMemo, id: WakerMemo) {
        let mut slot = self.slot();
        match slot.as_mut() {
            Some(stored) if stored.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
        // Relaxed: written under the lock; the lock orders it with `wake`.
        self.full.store(true, Ordering::Relaxed);
        drop(slot);
        *memo = id;
    }

    /// Wakes (and removes) the registered waker, if any.
    pub fn wake(&self) {
        if let Some(waker) = self.take() {
            waker.wake();
        }
    }

    /// Drops the registered waker without waking it (the owner is going away).
    pub fn clear(&self) {
        drop(self.take());
    }

    fn take(&self) -> Option<Waker> {
        let mut slot = self.slot();
        // Relaxed: written under the lock (see `register`).
        self.full.store(false, Ordering::Relaxed);
        slot.take()
    }
}

impl Default for WakerSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WakerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakerSlot")
            .field("full", &self.full.load(Ordering::Relaxed))
            .finish()
    }
}
