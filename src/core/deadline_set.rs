//! `SetCore`: the deadlines of many in-flight requests on one thread, for one
//! runtime, behind one runtime timer entry (see `crate::timeout`).
//!
//! A slab of slots (one per pending request: its deadline and its task's waker) and
//! a min-heap of `(deadline, slot, generation)` records. Filing is a slab store and a
//! heap push; a request answered in time vacates its slot at once (its memory is
//! reused by the next request) and leaves a stale record, which the heap purges once
//! stale records outnumber live ones, so memory follows the requests in flight, not
//! the ones answered under long deadlines. Expiring pops due records, vacates their
//! slots and hands back their wakers. Nothing here reads a clock or touches tokio.

use super::NEVER;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::task::Waker;

/// Below this many stale records the heap is never purged (a purge is `O(n)`).
const PURGE_MIN: usize = 64;

/// Where a request's deadline is filed: its slot and the slot's generation then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filed {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    deadline: u64,
    /// `None`: vacant.
    waker: Option<Waker>,
}

/// The deadline set's data; see the module docs.
#[derive(Debug, Default)]
pub struct SetCore {
    slots: Vec<Slot>,
    free: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    live: usize,
    stale: usize,
}

impl SetCore {
    /// Files `deadline` for the task of `waker` (the slot keeps it).
    ///
    /// # Panics
    ///
    /// With more than `u32::MAX` requests pending on one thread at once.
    pub fn file(&mut self, deadline: u64, waker: Waker) -> Filed {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len())
                    .expect("at most u32::MAX pending deadlines per thread");
                self.slots.push(Slot {
                    generation: 0,
                    deadline: NEVER,
                    waker: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.deadline = deadline;
        slot.waker = Some(waker);
        self.live += 1;
        self.heap.push(Reverse((deadline, index, slot.generation)));
        Filed {
            index,
            generation: slot.generation,
        }
    }

    /// The waker a pending request's slot holds (a clone of the one given).
    pub fn stored_waker(&self, filed: Filed) -> Option<&Waker> {
        self.slot(filed)?.waker.as_ref()
    }

    /// Whether `filed` is still pending (not expired, not cancelled).
    #[cfg(test)]
    pub fn is_pending(&self, filed: Filed) -> bool {
        self.slot(filed).is_some()
    }

    /// Replaces the pending request's waker: `Some` with the replaced one (to be
    /// dropped outside the lock), `None` when the request is no longer pending.
    pub fn update_waker(&mut self, filed: Filed, waker: &Waker) -> Option<Option<Waker>> {
        let slot = self.slot_mut(filed)?;
        Some(match &slot.waker {
            Some(stored) if stored.will_wake(waker) => None,
            _ => slot.waker.replace(waker.clone()),
        })
    }

    /// The request was answered or dropped: vacates its slot (its record goes
    /// stale) and returns its waker, to be dropped outside the lock. Nothing if it
    /// already expired.
    pub fn cancel(&mut self, filed: Filed) -> Option<Waker> {
        self.slot(filed)?;
        let waker = self.vacate(filed.index);
        self.stale += 1;
        if self.stale >= PURGE_MIN && self.stale > self.live {
            let slots = &self.slots;
            self.heap.retain(|Reverse((_, index, generation))| {
                let slot = &slots[*index as usize];
                slot.waker.is_some() && slot.generation == *generation
            });
            self.stale = 0;
        }
        waker
    }

    /// Expires every pending request due at or before `up_to`, pushing their wakers
    /// to `wake` (wake them outside the lock), and returns the earliest deadline
    /// still pending (`NEVER`: none).
    pub fn expire(&mut self, up_to: u64, wake: &mut Vec<Waker>) -> u64 {
        while let Some(&Reverse((deadline, index, generation))) = self.heap.peek() {
            let live = {
                let slot = &self.slots[index as usize];
                slot.waker.is_some() && slot.generation == generation
            };
            if live && deadline > up_to {
                return deadline;
            }
            self.heap.pop();
            if !live {
                self.stale = self.stale.saturating_sub(1);
                continue;
            }
            if let Some(waker) = self.vacate(index) {
                wake.push(waker);
            }
        }
        NEVER
    }

    /// Pending requests.
    #[cfg(any(test, lazy_deadline_loom))]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether nothing is pending.
    #[cfg(any(test, lazy_deadline_loom))]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Heap records, stale ones included (for tests of the purge).
    #[cfg(test)]
    pub fn records(&self) -> usize {
        self.heap.len()
    }

    fn slot(&self, filed: Filed) -> Option<&Slot> {
        self.slots
            .get(filed.index as usize)
            .filter(|slot| slot.generation == filed.generation && slot.waker.is_some())
    }

    fn slot_mut(&mut self, filed: Filed) -> Option<&mut Slot> {
        self.slots
            .get_mut(filed.index as usize)
            .filter(|slot| slot.generation == filed.generation && slot.waker.is_some())
    }

    /// Empties slot `index`: its generation moves on (wrapping: a filed request is
    /// answered long before four billion more pass through one slot) and it is free.
    fn vacate(&mut self, index: u32) -> Option<Waker> {
        let slot = &mut self.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.deadline = NEVER;
        self.free.push(index);
        self.live -= 1;
        slot.waker.take()
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    #[test]
    fn expires_in_deadline_order_and_reports_the_next() {
        let mut set = SetCore::default();
        let w = Waker::noop();
        let late = set.file(30, w.clone());
        let early = set.file(10, w.clone());
        let mut wake = Vec::new();
        assert_eq!(set.expire(9, &mut wake), 10);
        assert!(wake.is_empty());
        assert_eq!(set.expire(10, &mut wake), 30);
        assert_eq!(wake.len(), 1);
        assert!(!set.is_pending(early) && set.is_pending(late));
        assert_eq!(set.expire(100, &mut wake), NEVER);
        assert!(set.is_empty());
    }

    #[test]
    fn a_cancelled_request_never_expires_and_its_slot_is_reused() {
        let mut set = SetCore::default();
        let w = Waker::noop();
        let first = set.file(10, w.clone());
        assert!(set.cancel(first).is_some());
        assert!(set.cancel(first).is_none(), "cancelled once");
        let second = set.file(20, w.clone());
        assert_eq!(second.index, first.index, "the slot is reused");
        assert!(!set.is_pending(first), "the old filing stays stale");
        assert!(set.update_waker(first, w).is_none());
        let mut wake = Vec::new();
        assert_eq!(set.expire(15, &mut wake), 20);
        assert!(wake.is_empty(), "the cancelled deadline woke nobody");
    }

    #[test]
    fn memory_follows_the_requests_in_flight() {
        // A million answered requests under hour-long deadlines, ten in flight.
        let mut set = SetCore::default();
        let w = Waker::noop();
        let mut in_flight = std::collections::VecDeque::new();
        for i in 0..1_000_000u64 {
            in_flight.push_back(set.file(3_600_000_000_000 + i, w.clone()));
            if in_flight.len() > 10 {
                set.cancel(in_flight.pop_front().unwrap());
            }
        }
        assert_eq!(set.len(), 10);
        assert!(set.slots.len() <= 11, "slots: {}", set.slots.len());
        assert!(
            set.records() <= 2 * PURGE_MIN + 22,
            "records: {}",
            set.records()
        );
    }
}
