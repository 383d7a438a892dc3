//! Shared state of an activity timer (`IdleTimeout` + `ActivityHandle`).
//!
//! The owner keeps its own last activity in a plain field (it is the only writer, so
//! a compare and a store keep it monotonic) and passes it in; handles record theirs
//! here with one `fetch_max`. The timer's deadline is
//! `max(owner's, handles') + timeout`, saturating.
//!
//! Orderings: everything is `Relaxed`; the waker slot's mutex does the ordering.
//! - Touches only move the deadline *later*, so they never need to wake anyone; the
//!   owner finds them when its entry fires. A touch that happened-before the owner's
//!   read is seen by it through read-write coherence, which `Relaxed` already gives.
//! - A shorter timeout must reach the owner. The writer stores it, then wakes; the
//!   owner registers its waker, then reads. The slot's mutex orders the two: either
//!   the owner's register comes after the wake (and its read sees the store), or the
//!   wake comes after the register (and wakes the owner, whose next poll reads
//!   again). When the owner skips re-registering (same waker as it stored last),
//!   the slot still holds that waker: wakes clone it and never take it out
//!   (`WakerSlot`).
//! - The owner's runtime entry firing reaches the owner through the same slot, with
//!   a flag the owner reads instead of polling its entry on every turn
//!   ([`EntrySignal`]).

use super::signal::EntrySignal;
use super::{LazyEntry, Step};
use crate::sync::{Arc, AtomicU64, Ordering::Relaxed, WakerMemo};
use std::task::Waker;

/// State shared by an `IdleTimeout` and its handles.
#[derive(Debug)]
pub struct ActivityShared {
    /// Latest activity recorded through handles (nanoseconds, monotonic).
    handle_activity: AtomicU64,
    /// Timeout in nanoseconds (saturated).
    timeout: AtomicU64,
    /// The owner's waker, for shortened timeouts and the entry's fires.
    signal: EntrySignal,
}

impl ActivityShared {
    /// New shared state; `activity` is the creation time.
    pub fn new(activity: u64, timeout: u64) -> Arc<Self> {
        Arc::new(Self {
            handle_activity: AtomicU64::new(activity),
            timeout: AtomicU64::new(timeout),
            signal: EntrySignal::new(),
        })
    }

    /// Records activity at `at` from a handle; an older `at` changes nothing.
    /// One RMW at most, and none when `at` is not newer.
    #[inline]
    pub fn touch_at(&self, at: u64) {
        // Relaxed: a stale read only costs the fetch_max below, which decides.
        if at > self.handle_activity.load(Relaxed) {
            // Relaxed: monotonic by fetch_max; touches publish nothing else and never
            // need a wake (they move the deadline later). See the module docs.
            self.handle_activity.fetch_max(at, Relaxed);
        }
    }

    /// Latest activity recorded through handles.
    #[inline]
    pub fn handle_activity(&self) -> u64 {
        // Relaxed: coherence makes every touch that happened-before this read visible.
        self.handle_activity.load(Relaxed)
    }

    /// The timeout in nanoseconds.
    #[inline]
    pub fn timeout(&self) -> u64 {
        // Relaxed: see `set_timeout` for how a shorter value reaches the owner.
        self.timeout.load(Relaxed)
    }

    /// Sets the timeout; a shorter one wakes the owner so it takes effect at once.
    pub fn set_timeout(&self, timeout: u64) {
        // Relaxed: the wake below (the slot's mutex) publishes this store to the
        // owner's next register-then-read; see the module docs.
        let previous = self.timeout.swap(timeout, Relaxed);
        if timeout < previous {
            self.signal.wake();
        }
    }

    /// The deadline given the owner's own last activity.
    #[inline]
    pub fn deadline(&self, owner_activity: u64) -> u64 {
        owner_activity
            .max(self.handle_activity())
            .saturating_add(self.timeout())
    }

    /// The owner's poll: register the waker *before* reading the shared state, then
    /// decide what to do with the runtime entry. `away` says whether the poller is
    /// away from the entry's runtime; it is asked only when the waker changed (see
    /// [`LazyEntry::set_away`]).
    #[inline]
    pub fn poll_step(
        &self,
        waker: &Waker,
        memo: &mut WakerMemo,
        owner_activity: u64,
        entry: &mut LazyEntry,
        away: impl FnOnce() -> bool,
    ) -> Step {
        if self.signal.register(waker, memo) {
            entry.set_away(away());
        }
        entry.step(Some(self.deadline(owner_activity)))
    }

    /// Whether the owner's runtime entry fired since the owner last polled it; see
    /// [`EntrySignal::entry_has_fired`].
    #[inline]
    pub fn entry_has_fired(&self) -> bool {
        self.signal.entry_has_fired()
    }

    /// The owner is about to poll its entry; see [`EntrySignal::clear_entry_fired`].
    #[inline]
    pub fn clear_entry_fired(&self) {
        self.signal.clear_entry_fired();
    }

    /// The owner's runtime entry fired; see [`EntrySignal::entry_fired`].
    pub fn entry_fired(&self) {
        self.signal.entry_fired();
    }

    /// The owner is gone: drop its waker so handles do not wake a stale task.
    pub fn owner_dropped(&self) {
        self.signal.owner_dropped();
    }
}

/// The waker the owner polls its runtime entry with (see the module docs).
#[cfg(not(lazy_deadline_loom))]
impl std::task::Wake for ActivityShared {
    fn wake(self: Arc<Self>) {
        self.entry_fired();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.entry_fired();
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn handle_touches_are_monotonic() {
        let s = ActivityShared::new(5, 10);
        s.touch_at(9);
        s.touch_at(7);
        assert_eq!(s.handle_activity(), 9);
        assert_eq!(s.deadline(3), 19);
        assert_eq!(s.deadline(12), 22);
    }

    #[test]
    fn deadline_saturates() {
        let s = ActivityShared::new(5, u64::MAX);
        assert_eq!(s.deadline(0), u64::MAX);
    }

    #[test]
    fn decision_follows_activity() {
        let s = ActivityShared::new(0, 10);
        let mut e = LazyEntry::new();
        let (w, m) = (Waker::noop(), &mut WakerMemo::default());
        assert_eq!(s.poll_step(w, m, 0, &mut e, || false), Step::Arm(10));
        s.touch_at(8);
        assert_eq!(s.poll_step(w, m, 0, &mut e, || false), Step::Wait);
        e.fired(); // the owning runtime's clock passed 10
        assert_eq!(s.poll_step(w, m, 0, &mut e, || false), Step::Arm(18));
        e.fired();
        assert_eq!(s.poll_step(w, m, 0, &mut e, || false), Step::Fire);
        s.set_timeout(2);
        assert_eq!(s.poll_step(w, m, 0, &mut e, || false), Step::Fire);
    }
}
