//! What a deadline set gives back: the owner slots answered without the lock, the
//! wakers kept by free slots once nothing is filed, the remote slots and capacity a
//! burst grew, and everything at a close (see the parent module's "Memory" and
//! "Wakers"). All under the set's lock.

use super::{is_live, word, Filed, SetCore, SHRINK_KEEP, TAG_CANCELLED, TAG_PENDING};
use crate::sync::Ordering;
use std::task::Waker;

impl SetCore {
    /// Gives back the owner slots whose requests the owner answered without the
    /// lock and has not given back yet (their state word says cancelled; the owner's
    /// own give-back of them later finds them free, and does nothing), and with
    /// nothing filed then, lets go of the wakers the free owner slots kept (see
    /// [`take_let_go`](Self::take_let_go)). So a thread whose last requests were
    /// answered partly on other threads (whose answers it does not see) keeps no
    /// finished task past the set's next expiry. O(owner slots), once per expiry
    /// that found nothing pending due.
    pub(super) fn sweep_answered(&mut self) {
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            if !slot.taken {
                continue;
            }
            let ticket = slot.ticket;
            // Relaxed: under the lock; the owner writes a pending word once (to
            // cancelled) without it, and never touches a cancelled one again.
            if self.states.get(i).load(Ordering::Relaxed) == word(ticket, TAG_CANCELLED) {
                self.release_owned(Filed {
                    index: i as u32,
                    ticket,
                });
            }
        }
        let let_go = self.let_go_if_idle();
        self.let_go.extend(let_go);
    }

    /// The wakers an expiry let go of (see [`sweep_answered`](Self::sweep_answered)),
    /// to drop after the lock.
    pub fn take_let_go(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.let_go)
    }

    /// With nothing filed, the wakers the free owner slots kept, to drop after the
    /// lock.
    pub(super) fn let_go_if_idle(&mut self) -> Vec<Waker> {
        if self.filings != 0 {
            return Vec::new();
        }
        self.slots
            .iter_mut()
            .filter(|slot| !slot.taken)
            .filter_map(|slot| slot.waker.take())
            .collect()
    }

    /// Remote slot `i` goes back on the free list (its waker taken already).
    pub(super) fn free_remote(&mut self, i: usize) {
        let slot = &mut self.remote[i];
        debug_assert!(slot.waker.is_none(), "a free remote slot keeps no waker");
        slot.taken = false;
        self.remote_free.push(i as u32);
        self.remote_taken -= 1;
    }

    /// Gives back what a burst grew, once it is mostly answered: the remote slots
    /// past the last taken one, the capacity left over, and the lanes' stale records.
    /// O(1) when there is nothing to give back; otherwise amortised over the burst.
    /// Drops no waker (a free remote slot keeps none), so it may run under the lock
    /// from any thread.
    pub(super) fn tidy(&mut self) {
        let len = self.remote.len();
        if len > SHRINK_KEEP
            && len >= 4 * self.remote_taken
            && self.remote.last().is_some_and(|slot| !slot.taken)
        {
            while self.remote.last().is_some_and(|slot| !slot.taken) {
                self.remote.pop();
            }
            let len = self.remote.len();
            // Entries past the end stay in the free list until popped, unless they
            // outnumber the free slots (then it is compacted: amortised).
            if self.remote_free.len() > 2 * (len - self.remote_taken) + SHRINK_KEEP {
                self.remote_free.retain(|&i| (i as usize) < len);
            }
            let keep = SHRINK_KEEP.max(2 * len);
            self.remote.shrink_to(keep);
            self.remote_free.shrink_to(keep);
        }
        let (slots, remote, states) = (&self.slots, &self.remote, &self.states);
        self.lanes
            .compact_sparse(|index, ticket| is_live(slots, remote, states, index, ticket));
    }

    /// The set's runtime shut down: every pending request's waker goes to `wake`
    /// (their futures then observe the shutdown), the wakers kept by answered
    /// requests' slots go to `drop_later` (drop them after the lock: as tokio's
    /// timers let go of their wakers at shutdown, so that a task that owns a timer
    /// of this set through its waker cannot keep the set for ever), and the records
    /// go. Slots stay until their filings are dropped.
    pub fn close(&mut self, wake: &mut Vec<Waker>, drop_later: &mut Vec<Waker>) {
        drop_later.append(&mut self.let_go);
        self.lanes.clear();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            // Relaxed: under the lock (see `is_live`).
            let state = self.states.get(index).load(Ordering::Relaxed);
            if slot.taken && state == word(slot.ticket, TAG_PENDING) {
                wake.extend(slot.waker.take());
            } else {
                drop_later.extend(slot.waker.take());
            }
        }
        for slot in self.remote.iter_mut().filter(|slot| slot.taken) {
            wake.extend(slot.waker.take());
        }
    }

    /// Drops everything, for a set going back to the pool (no filing is alive):
    /// memory back to nothing; tickets keep counting.
    pub fn clear(&mut self) -> Vec<Waker> {
        debug_assert_eq!(self.filings, 0);
        let next_ticket = self.next_ticket;
        let old = std::mem::take(self);
        self.next_ticket = next_ticket;
        old.slots
            .into_iter()
            .chain(old.remote)
            .filter_map(|slot| slot.waker)
            .collect()
    }

    /// Bytes the set's collections hold (capacity, not length): what stays after a
    /// burst.
    #[cfg(all(test, not(lazy_deadline_loom)))]
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        (self.slots.capacity() + self.remote.capacity()) * size_of::<super::Slot>()
            + self.states.len() * size_of::<u64>()
            + (self.free.capacity() + self.remote_free.capacity()) * size_of::<u32>()
            + self.lanes.heap_bytes()
    }
}
