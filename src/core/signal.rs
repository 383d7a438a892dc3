//! How an owner learns that its runtime entry fired without polling the entry on
//! every turn: [`EntrySignal`], a flag plus the owner's waker slot.
//!
//! The owner polls its runtime entry (a `tokio::time::Sleep`) only on its slow path,
//! and with a waker made from the `Arc` that holds the signal, so the entry's fire
//! calls [`EntrySignal::entry_fired`]: raise the flag, then wake the owner through
//! the slot (store-then-wake). The owner registers its waker, then reads the flag
//! (register-then-read); the slot's mutex orders the two, as for any other news
//! carried by a wake (see `WakerSlot`). The owner clears the flag right before it
//! polls the entry, with nothing in between that could return early (a coop budget
//! check there would drop the news), so a fire after the clear raises it again, and
//! one before it is seen by that poll (tokio's entry guarantees a poll sees a fire
//! that woke its waker first, or registers for the next wake). The entry's own
//! budget check, inside tokio's poll, wakes through the same waker and so raises
//! the flag again.

use crate::sync::{AtomicBool, Ordering::Relaxed, WakerMemo, WakerSlot};
use std::task::Waker;

/// The owner's waker slot and the "entry fired" flag.
#[derive(Debug)]
pub struct EntrySignal {
    /// Raised by the owner's runtime entry when it fires; cleared by the owner.
    fired: AtomicBool,
    /// The owner's waker: for the entry's fires and for whatever else its shared
    /// state must tell it (a shortened timeout).
    waker: WakerSlot,
}

impl Default for EntrySignal {
    fn default() -> Self {
        Self::new()
    }
}

impl EntrySignal {
    /// Not fired, no waker.
    pub fn new() -> Self {
        Self {
            fired: AtomicBool::new(false),
            waker: WakerSlot::new(),
        }
    }

    /// Registers the owner's waker; call before reading the flag or any other state
    /// a wake announces. `true` when the waker changed (see `WakerSlot::register`).
    #[inline]
    pub fn register(&self, waker: &Waker, memo: &mut WakerMemo) -> bool {
        self.waker.register(waker, memo)
    }

    /// The owner's runtime entry fired (its waker was woken): raise the flag, then
    /// wake the owner.
    pub fn entry_fired(&self) {
        // Relaxed: the wake that follows publishes it (the slot's mutex); see the
        // module docs.
        self.fired.store(true, Relaxed);
        self.waker.wake();
    }

    /// Whether the entry fired since the owner last polled it (or since
    /// [`clear_entry_fired`](Self::clear_entry_fired)).
    #[inline]
    pub fn entry_has_fired(&self) -> bool {
        // Relaxed: read after `register` (module docs).
        self.fired.load(Relaxed)
    }

    /// A deadline at `when` was just filed into a queue whose entry is armed at
    /// `horizon` (`NEVER`: not armed): whether the owner's task must be woken so its
    /// next poll moves the entry. Not when the entry is armed no later than `when`
    /// and has not fired: its fire will wake the task. An entry that already fired
    /// may have spent its wake on a poll that found the queue empty or drained it by
    /// the clock, so nothing would wake the task again. Call it under whatever
    /// orders the insert after the owner's last poll (the queue's `&mut`, or the
    /// user's lock around it): the poll registered after the fire's wake, so the
    /// flag it raised is visible here.
    #[inline]
    pub fn filing_needs_wake(&self, when: u64, horizon: u64) -> bool {
        when < horizon || self.entry_has_fired()
    }

    /// The owner is about to poll its entry: lower the flag first.
    #[inline]
    pub fn clear_entry_fired(&self) {
        // Relaxed: only the owner clears it, and a fire after this store raises it
        // again (coherence orders the two stores); one before it is seen by the
        // entry poll that follows (module docs).
        self.fired.store(false, Relaxed);
    }

    /// Wakes the owner for news other than a fire (stored before this call).
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// The owner is gone: drop its waker so nothing wakes a stale task.
    pub fn owner_dropped(&self) {
        self.waker.clear();
    }
}

/// The waker an owner with no other shared state polls its runtime entry with.
#[cfg(not(lazy_deadline_loom))]
impl std::task::Wake for EntrySignal {
    fn wake(self: std::sync::Arc<Self>) {
        self.entry_fired();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.entry_fired();
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn a_fire_raises_the_flag_until_cleared_and_wakes_the_owner_each_time() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let owner = Waker::from(count.clone());
        let signal = Arc::new(EntrySignal::new());
        signal.register(&owner, &mut WakerMemo::default());
        assert!(!signal.entry_has_fired());
        let entry_waker = Waker::from(signal.clone());
        entry_waker.wake_by_ref();
        assert_eq!(count.0.load(SeqCst), 1);
        assert!(signal.entry_has_fired());
        assert!(signal.entry_has_fired(), "reading does not clear it");
        signal.clear_entry_fired();
        assert!(!signal.entry_has_fired());
        entry_waker.wake();
        assert_eq!(
            count.0.load(SeqCst),
            2,
            "the owner's waker stays registered"
        );
        signal.owner_dropped();
        assert!(signal.entry_has_fired());
        signal.entry_fired();
        assert_eq!(count.0.load(SeqCst), 2, "no wake after the owner is gone");
    }
}
