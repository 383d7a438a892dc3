//! Shared state of a multi-slot timer (`SlotTimer` + `SlotHandle`).
//!
//! One `AtomicU64` deadline per kind ([`NEVER`] when unset) and `armed`, the deadline
//! the owner arms its single runtime entry at after its last collection.
//!
//! # Protocol
//!
//! - **Owner `set`/`cancel`**: a relaxed store. A set earlier than the entry also
//!   stores the deadline into `armed` (lowering it), which sends the owner's next
//!   poll down the slow path; it holds `&mut`, so that poll follows on this thread.
//! - **Handle `set`**: `swap` the deadline in. If it is not earlier than the value it
//!   replaced, stop: whoever wrote that value already made sure the owner is armed no
//!   later than it (seen by the owner's scan, or woken by its own check below), so the
//!   owner is armed no later than this one. Otherwise `fence(SeqCst)`, load `armed`,
//!   and wake the owner if the new deadline is earlier. **Owner collection**: scan,
//!   store `armed`, `fence(SeqCst)`, scan again. This is Dekker's pattern: of the two
//!   fences one is first in the single total order of SeqCst fences, so either the
//!   owner's second scan sees the handle's deadline, or the handle's load sees the
//!   owner's `armed` and wakes it. Without the fences both could read the old values
//!   and the earlier deadline would fire late (the design's store-then-check trap).
//! - **Handle `cancel`**: a `swap` to `NEVER`; a cancel never needs a wake (the entry
//!   fires at the old time, finds nothing due and re-arms).
//! - Handle writes are RMWs rather than stores so they are totally ordered with the
//!   owner's disarming CAS in every model loom explores (loom does not enforce RMW
//!   atomicity against a concurrent plain store, tokio-rs/loom issue 254); the
//!   `swap` also yields the previous value that lets a later re-set skip the fence.
//! - **Entry fired**: the owner polls its runtime entry with a waker that calls
//!   [`entry_fired`](SlotShared::entry_fired), which lowers `armed` to
//!   [`ENTRY_FIRED`] and wakes the owner. So the owner's pending poll needs neither
//!   its runtime entry nor a clock: while `armed` is at or above its horizon, no
//!   handle moved anything earlier and the entry has not fired. `ENTRY_FIRED` (0) is
//!   below every horizon because a live entry is never armed at 0 (a target of 0 is
//!   always witnessed: `LazyEntry` fires it). It is the same signal as a handle
//!   setting a deadline of 0 without a slot, so the argument above covers it; the
//!   owner's collection overwrites it and then polls the entry, which sees the fire
//!   or registers for it.
//! - **Reporting**: the owner disarms a due slot with a CAS from the exact value it
//!   judged due to `NEVER`, so each set is reported at most once, and a cancel or
//!   re-set that lands first makes the CAS fail (the slot is judged again).

use super::{MAX_ROUNDS, NEVER};
use crate::sync::{fence, Arc, AtomicU64, Ordering, WakerMemo, WakerSlot};
use std::task::Waker;

/// What `armed` holds after the owner's runtime entry fired and before the owner's
/// next collection: below any deadline a live entry is armed at.
pub const ENTRY_FIRED: u64 = 0;

/// State shared by a `SlotTimer` and its handles.
#[derive(Debug)]
pub struct SlotShared {
    deadlines: Box<[AtomicU64]>,
    /// Where the owner's entry is (or is about to be) armed; `NEVER` when idle.
    armed: AtomicU64,
    waker: WakerSlot,
}

/// What one collection found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collected {
    /// Bit `i` set: kind `i` was due and is now disarmed (reported once).
    pub expired: u64,
    /// Earliest deadline still set, `NEVER` if none; published as `armed`.
    pub next: u64,
    /// `false` when the collection stopped at its round bound with handles still
    /// moving deadlines earlier under it: `next` is then the earliest seen, and the
    /// owner must collect again (in this poll or the next).
    pub complete: bool,
}

impl SlotShared {
    /// `count` unset slots (`1..=64`).
    pub fn new(count: usize) -> Arc<Self> {
        assert!((1..=64).contains(&count), "a timer has 1 to 64 kinds");
        Arc::new(Self {
            deadlines: (0..count).map(|_| AtomicU64::new(NEVER)).collect(),
            armed: AtomicU64::new(NEVER),
            waker: WakerSlot::new(),
        })
    }

    /// Heap bytes of the shared state for `count` slots: the `Arc` allocation (two
    /// counters and the struct) plus the deadline array.
    pub fn heap_size(count: usize) -> usize {
        2 * std::mem::size_of::<usize>()
            + std::mem::size_of::<Self>()
            + count * std::mem::size_of::<AtomicU64>()
    }

    /// The deadline of slot `index`, `NEVER` if unset.
    #[inline]
    pub fn deadline(&self, index: usize) -> u64 {
        // Relaxed: a snapshot for the caller; decisions re-read under the protocol.
        self.deadlines[index].load(Ordering::Relaxed)
    }

    /// Owner-side set or cancel (`NEVER`): a plain store. The owner's next poll
    /// re-evaluates, so no wake and no fence.
    #[inline]
    pub fn store_owner(&self, index: usize, deadline: u64) {
        // Relaxed: only the owner's own later poll (same thread) must see it; handles
        // never read slots.
        self.deadlines[index].store(deadline, Ordering::Relaxed);
    }

    /// Owner-side: something was set earlier than the entry; lower the published
    /// `armed` so the owner's next poll takes the slow path.
    #[inline]
    pub fn lower_armed(&self, deadline: u64) {
        // Relaxed store, not fetch_min: any value below the owner's horizon sends its
        // next poll down the slow path, which rescans every slot, so overwriting a
        // handle's (lower) value loses nothing. Read by this same thread.
        self.armed.store(deadline, Ordering::Relaxed);
    }

    /// Handle-side set: swap in, then wake the owner if it may be armed later than
    /// this (see the module docs for why a re-set no earlier than the replaced value
    /// needs no check).
    #[inline]
    pub fn set_remote(&self, index: usize, deadline: u64) {
        // Relaxed: the swap is ordered with the owner's CAS by RMW atomicity; what the
        // owner must see is published by the fence below or by the previous writer.
        let previous = self.deadlines[index].swap(deadline, Ordering::Relaxed);
        if deadline >= previous {
            return;
        }
        // SeqCst fence + relaxed load: the handle half of the Dekker pattern (the
        // fence orders the swap before the load of `armed`).
        fence(Ordering::SeqCst);
        if deadline < self.armed.load(Ordering::Relaxed) {
            // Relaxed: lowers `armed` so the owner's fast path (register, then read
            // `armed`) notices; the wake that follows publishes it (the slot's mutex).
            self.armed.fetch_min(deadline, Ordering::Relaxed);
            self.waker.wake();
        }
    }

    /// Handle-side cancel: never needs a wake.
    #[inline]
    pub fn cancel_remote(&self, index: usize) {
        // Relaxed: a cancel only makes the owner's next collection find less; the
        // owner's CAS on the slot decides whether the old deadline was reported.
        self.deadlines[index].swap(NEVER, Ordering::Relaxed);
    }

    /// The earliest deadline the owner must be armed by: what its last collection
    /// published, lowered by handles that set something earlier since.
    #[inline]
    pub fn armed(&self) -> u64 {
        // Relaxed: read after `register`; see `set_remote` and the module docs.
        self.armed.load(Ordering::Relaxed)
    }

    /// Registers the owner's waker; call before reading any slot or `armed`, so a
    /// wake for a store the owner misses is delivered to this waker. `true` when the
    /// waker changed (see `WakerSlot::register`).
    #[inline]
    pub fn register(&self, waker: &Waker, memo: &mut WakerMemo) -> bool {
        self.waker.register(waker, memo)
    }

    /// The owner's collection at `now` (after [`register`](Self::register)): disarms
    /// and reports every slot due by `now`, and publishes the earliest remaining
    /// deadline as `armed`.
    pub fn collect(&self, now: u64) -> Collected {
        let mut expired = 0u64;
        let mut earliest = NEVER;
        // Bounded: each round repeats only because a handle set something earlier
        // during the scan, and a handle that keeps doing so must not turn one poll
        // into a spin. The owner comes back for the rest (`complete: false`).
        for _ in 0..MAX_ROUNDS {
            let mut next = NEVER;
            for (index, slot) in self.deadlines.iter().enumerate() {
                // Relaxed: the CAS below decides; visibility of handles' stores is
                // the fence's job.
                let mut deadline = slot.load(Ordering::Relaxed);
                while deadline != NEVER && deadline <= now {
                    // Relaxed: the slot word is the only data; exactly-once comes from
                    // the CAS itself (a cancel or re-set in between makes it fail).
                    match slot.compare_exchange(
                        deadline,
                        NEVER,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            expired |= 1 << index;
                            deadline = NEVER;
                        }
                        Err(current) => deadline = current,
                    }
                }
                next = next.min(deadline);
            }
            // Relaxed store + SeqCst fence + relaxed loads: the owner half of Dekker.
            self.armed.store(next, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            earliest = self.earliest();
            if earliest >= next {
                return Collected {
                    expired,
                    next,
                    complete: true,
                };
            }
            // A handle set something earlier during the scan: collect again.
        }
        Collected {
            expired,
            next: earliest,
            complete: false,
        }
    }

    /// The earliest deadline set, `NEVER` if none.
    pub fn earliest(&self) -> u64 {
        self.deadlines
            .iter()
            // Relaxed: ordered after the caller's fence, which is what matters.
            .map(|slot| slot.load(Ordering::Relaxed))
            .min()
            .unwrap_or(NEVER)
    }

    /// The owner's runtime entry fired (its waker was woken): send the owner's next
    /// poll down the slow path, and wake it.
    pub fn entry_fired(&self) {
        // Relaxed: lowers `armed` so the owner's fast path (register, then read
        // `armed`) notices; the wake that follows publishes it (the slot's mutex).
        self.armed.fetch_min(ENTRY_FIRED, Ordering::Relaxed);
        self.waker.wake();
    }

    /// The owner is gone: drop its waker so handles do not wake a stale task.
    pub fn owner_dropped(&self) {
        self.waker.clear();
    }
}

/// The waker the owner polls its runtime entry with (see the module docs).
#[cfg(not(lazy_deadline_loom))]
impl std::task::Wake for SlotShared {
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

    #[test]
    fn collects_due_slots_once_and_reports_next() {
        let s = SlotShared::new(3);
        s.store_owner(0, 10);
        s.store_owner(1, 20);
        s.store_owner(2, 10);
        assert_eq!(
            s.collect(5),
            Collected {
                expired: 0,
                next: 10,
                complete: true
            }
        );
        assert_eq!(
            s.collect(10),
            Collected {
                expired: 0b101,
                next: 20,
                complete: true
            }
        );
        assert_eq!(
            s.collect(10),
            Collected {
                expired: 0,
                next: 20,
                complete: true
            }
        );
        assert_eq!(s.deadline(0), NEVER);
    }

    #[test]
    fn cancelled_slot_is_never_reported() {
        let s = SlotShared::new(2);
        s.store_owner(0, 10);
        s.cancel_remote(0);
        assert_eq!(
            s.collect(100),
            Collected {
                expired: 0,
                next: NEVER,
                complete: true
            }
        );
    }

    #[test]
    fn remote_set_earlier_than_armed_wakes() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        let count = std::sync::Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let s = SlotShared::new(2);
        s.store_owner(0, 100);
        assert_eq!(
            {
                s.register(&waker, &mut WakerMemo::default());
                s.collect(0)
            }
            .next,
            100
        );
        s.set_remote(1, 200); // later than armed: no wake
        assert_eq!(count.0.load(SeqCst), 0);
        s.set_remote(1, 50); // earlier: wake
        assert_eq!(count.0.load(SeqCst), 1);
    }
}
