//! The sync shim: std atomics and `Mutex` normally, loom's under
//! `--cfg lazy_deadline_loom`, so that `loom-tests/` model-checks the very code that
//! ships. Also the owner's waker slot, [`WakerSlot`], built on the same primitives.

#[cfg(not(lazy_deadline_loom))]
pub use std::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering},
    Arc, Mutex,
};

#[cfg(lazy_deadline_loom)]
pub use loom::sync::{
    atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering},
    Arc, Mutex,
};

use std::task::Waker;

/// What an owner's shared state must be to make the waker its runtime entry is
/// polled with: its `Wake` impl records the fire and wakes the owner.
#[cfg(not(lazy_deadline_loom))]
pub trait EntryWake: std::task::Wake + Send + Sync + 'static {}
#[cfg(not(lazy_deadline_loom))]
impl<T: std::task::Wake + Send + Sync + 'static> EntryWake for T {}

/// Under loom the adapters compile but never run (the models drive the core, and
/// call its `entry_fired` directly), and loom's `Arc` is not std's.
#[cfg(lazy_deadline_loom)]
pub trait EntryWake {}
#[cfg(lazy_deadline_loom)]
impl<T> EntryWake for T {}

/// The waker an owner polls its runtime entry with: waking it runs the shared
/// state's `Wake` impl (the entry fired), which tells the owner without the owner
/// having to poll the entry on every turn.
#[cfg(not(lazy_deadline_loom))]
pub fn entry_waker<T: EntryWake>(shared: &Arc<T>) -> Waker {
    Waker::from(shared.clone())
}

/// Under loom: a no-op waker (see [`EntryWake`]).
#[cfg(lazy_deadline_loom)]
pub fn entry_waker<T>(_shared: &Arc<T>) -> Waker {
    Waker::noop().clone()
}

/// One waker slot shared between the owner (who registers) and handles (who wake).
///
/// A mutex-guarded `Option<Waker>`. Only the owner stores into it, and a wake *clones*
/// the stored waker rather than taking it out, so the slot keeps the owner's last
/// waker until the owner registers another one or goes away ([`clear`](Self::clear)).
/// That is what makes the owner's fast path a plain compare: a `select!` loop polls
/// its timer on every iteration, and re-registering the same waker each time (what an
/// `AtomicWaker` does: two CASes) doubled the cost of a pending poll. The owner
/// remembers which waker it stored last ([`WakerMemo`]); when the poll's waker is that
/// one, the slot already holds it, and nobody else can have changed it, so there is
/// nothing to do: no lock, no atomic.
///
/// The usual register-then-read / store-then-wake guarantee: a handle's wake locks,
/// clones whatever the slot holds and wakes it. If the owner registered under the lock
/// first, its waker is what the handle wakes; if the owner skipped registering, the
/// slot holds the equivalent waker the owner stored earlier, so the owner is polled
/// again, and the wake's hand-off through the scheduler makes the handle's store
/// visible to that poll. If the handle's critical section comes first, the owner's
/// later lock (when it registers a new waker) orders the store before its read.
pub struct WakerSlot {
    waker: Mutex<Option<Waker>>,
}

/// The identity of the waker the slot holds since the owner's last store
/// (`Waker::data` and `vtable` addresses, as `Waker::will_wake` compares them); zero
/// when none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakerMemo {
    data: usize,
    vtable: usize,
}

impl WakerMemo {
    /// The identity of `waker` (data and vtable pointers).
    #[inline]
    pub fn of(waker: &Waker) -> Self {
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

    /// Stores `waker` for the next `wake`, unless the owner stored this same waker
    /// last (`memo`), in which case the slot still holds it (see the type docs).
    /// Whatever a waker stored before a `wake` that ran before this call is visible
    /// after it. Returns `true` when it stored (the poll's waker changed).
    #[inline]
    pub fn register(&self, waker: &Waker, memo: &mut WakerMemo) -> bool {
        if *memo == WakerMemo::of(waker) {
            return false;
        }
        self.store(waker, memo);
        true
    }

    /// The locked part of [`register`](Self::register), kept out of line so the
    /// unchanged-waker check inlines into every poll.
    ///
    /// The memo records the waker the slot *holds* (the clone), not the caller's:
    /// `RawWaker`'s contract lets a clone have another data pointer, and then nothing
    /// keeps the caller's address alive, so another task's waker could later be
    /// allocated there and pass the memo while the slot still wakes the old task. The
    /// clone's address is owned by the slot until the slot lets it go, so no other
    /// waker can share it meanwhile. A waker whose clones always move costs a lock per
    /// poll (it never matches), which is correct, only slower.
    ///
    /// The replaced waker is dropped after the lock is released: its `Drop` may run
    /// user code that touches this same timer (a handle's `set_timeout`, a
    /// `SlotHandle::set`), which wakes through this slot and would otherwise re-lock
    /// the mutex on the same thread and hang.
    #[inline(never)]
    fn store(&self, waker: &Waker, memo: &mut WakerMemo) {
        let mut slot = self.slot();
        let replaced = match slot.as_ref() {
            Some(stored) if stored.will_wake(waker) => None,
            _ => slot.replace(waker.clone()),
        };
        *memo = slot.as_ref().map_or_else(WakerMemo::default, WakerMemo::of);
        drop(slot);
        drop(replaced);
    }

    /// Wakes the registered waker, if any, and leaves it registered. The clone is
    /// woken outside the lock, so a waker that polls the owner at once cannot
    /// deadlock on this slot.
    pub fn wake(&self) {
        let waker = self.slot().clone();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Drops the registered waker without waking it (the owner is going away).
    pub fn clear(&self) {
        // Taken out under the lock, dropped after it (see `store`).
        let waker = self.slot().take();
        drop(waker);
    }
}

impl Default for WakerSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WakerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakerSlot").finish_non_exhaustive()
    }
}
