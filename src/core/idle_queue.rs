//! The ordering structure of `IdleQueue<T>`: a slab of entries and a min-heap of
//! check times, with lazy re-filing and lazy deletion.
//!
//! # Why a heap with lazy re-filing
//!
//! A touch must be a store, so the structure may not move an entry when it is
//! touched. Each live entry has exactly one *live* heap record `(check, index, stamp)`
//! filed at a time no later than its deadline (`last_activity + timeout`). Touches move
//! the deadline later and leave the record alone. When the record reaches the top and
//! its check time has been witnessed, the entry's real deadline is compared with it:
//! equal means due (yield it); later means it was touched since (re-file it at its
//! deadline, the SCTP re-arm for the remainder). Under continuous touching that is one
//! re-file per key per timeout period, however many touches.
//!
//! Because an entry is yielded only from a record filed at exactly its deadline,
//! entries come out in deadline order, also when many are due in one poll.
//!
//! A binary heap rather than a hierarchical wheel: re-filing happens at most once per
//! timeout period per key, so the heap's `O(log n)` is paid rarely, while a wheel's
//! cascading and its fixed horizon (tokio-util's `DelayQueue` panics past 2^36 ms)
//! would cost on every key. The heap also keeps exact nanosecond order.
//!
//! Stale records (from `remove`, `clear` and shortened timeouts, which file a new
//! record earlier) are skipped when they surface and purged in one `O(n)` pass when
//! they exceed a quarter of the heap, as Go's runtime timers do.
//!
//! A record is live when its slot is occupied and the slot's `stamp` (bumped on every
//! filing, never reset, so it differs from every older record of the slot that a
//! purge or pop has not yet removed) equals the record's. Keys carry the slot's
//! `generation`, bumped when an entry leaves, so a stale key never reaches a later
//! entry in the same slot.

use super::SATURATED;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A key in an [`IdleQueue`](crate::IdleQueue): the slot and its generation, so a key
/// of an entry that was removed or expired never reaches an entry inserted later.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Key {
    index: u32,
    generation: u32,
}

/// A heap record: `check` first so the derived order is by check time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Record {
    check: u64,
    index: u32,
    stamp: u32,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    stamp: u32,
    last_activity: u64,
    timeout: u64,
    /// `None`: vacant (its index is on the free list).
    value: Option<T>,
}

impl<T> Slot<T> {
    fn deadline(&self) -> u64 {
        self.last_activity
            .saturating_add(self.timeout)
            .min(SATURATED)
    }
}

/// What [`IdleCore::pop_expired`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Popped<T> {
    /// An entry whose deadline has been witnessed; it has left the queue.
    Expired {
        /// Its key (now stale).
        key: Key,
        /// Its deadline, `last_activity + timeout`.
        deadline: u64,
        /// Its value.
        value: T,
    },
    /// Nothing is due by the witnessed time; the earliest check time, if any.
    NotYet(Option<u64>),
    /// The work bound was reached (re-files and stale records); call again.
    Busy,
}

/// Entries with idle deadlines, ordered by check time. Times are nanoseconds of the
/// time base; `now` and the witnessed time are arguments, never read here.
#[derive(Debug)]
pub struct IdleCore<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    heap: BinaryHeap<Reverse<Record>>,
    len: usize,
    /// Records in `heap` that are no longer live.
    stale: usize,
    /// Times a popped record found its entry touched since and filed it again.
    refiles: u64,
    default_timeout: u64,
}

/// Below this many stale records the heap is never purged (a purge is `O(n)`).
const PURGE_MIN: usize = 64;

impl<T> IdleCore<T> {
    /// An empty queue whose `insert` uses `default_timeout` (nanoseconds).
    pub fn with_capacity(default_timeout: u64, capacity: usize) -> Self {
        Self {
            slots: Vec::with_capacity(capacity),
            free: Vec::new(),
            heap: BinaryHeap::with_capacity(capacity),
            len: 0,
            stale: 0,
            refiles: 0,
            default_timeout,
        }
    }

    /// The timeout `insert` uses.
    pub fn default_timeout(&self) -> u64 {
        self.default_timeout
    }

    /// Inserts `value` with activity at `now` and `timeout`; files it at its deadline.
    ///
    /// # Panics
    ///
    /// If the queue would hold more than `u32::MAX` entries.
    pub fn insert(&mut self, value: T, now: u64, timeout: u64) -> Key {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&index| index != u32::MAX)
                    .expect("an IdleQueue holds at most u32::MAX - 1 entries");
                self.slots.push(Slot {
                    generation: 0,
                    stamp: 0,
                    last_activity: 0,
                    timeout: 0,
                    value: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.last_activity = now;
        slot.timeout = timeout;
        slot.value = Some(value);
        self.len += 1;
        let key = Key {
            index,
            generation: slot.generation,
        };
        self.file(index);
        key
    }

    /// Files slot `index` at its current deadline; any older record becomes stale.
    fn file(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.stamp = slot.stamp.wrapping_add(1);
        self.heap.push(Reverse(Record {
            check: slot.deadline(),
            index,
            stamp: slot.stamp,
        }));
    }

    fn slot(&self, key: Key) -> Option<&Slot<T>> {
        self.slots
            .get(key.index as usize)
            .filter(|slot| slot.generation == key.generation && slot.value.is_some())
    }

    fn slot_mut(&mut self, key: Key) -> Option<&mut Slot<T>> {
        self.slots
            .get_mut(key.index as usize)
            .filter(|slot| slot.generation == key.generation && slot.value.is_some())
    }

    /// Records activity at `at` (older is ignored): a compare and a store.
    #[inline]
    pub fn touch_at(&mut self, key: Key, at: u64) -> bool {
        match self.slot_mut(key) {
            Some(slot) => {
                if at > slot.last_activity {
                    slot.last_activity = at;
                }
                true
            }
            None => false,
        }
    }

    /// Changes the timeout. Longer: a store (found when the record surfaces).
    /// Shorter: files the entry again at its new deadline, so it is due at once if
    /// that has passed (the SCTP "blocked shortening" trap).
    pub fn set_timeout(&mut self, key: Key, timeout: u64) -> bool {
        let Some(slot) = self.slot_mut(key) else {
            return false;
        };
        let shorter = timeout < slot.timeout;
        slot.timeout = timeout;
        if shorter {
            self.stale += 1;
            self.file(key.index);
            self.maybe_purge();
        }
        true
    }

    /// The entry's timeout, last activity and deadline.
    pub fn times(&self, key: Key) -> Option<(u64, u64, u64)> {
        self.slot(key)
            .map(|slot| (slot.timeout, slot.last_activity, slot.deadline()))
    }

    /// The entry's value.
    pub fn get(&self, key: Key) -> Option<&T> {
        self.slot(key).and_then(|slot| slot.value.as_ref())
    }

    /// The entry's value, mutably.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        self.slot_mut(key).and_then(|slot| slot.value.as_mut())
    }

    /// Removes the entry; its record becomes stale.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        self.slot(key)?;
        self.stale += 1;
        let value = self.vacate(key.index);
        self.maybe_purge();
        value
    }

    fn vacate(&mut self, index: u32) -> Option<T> {
        let slot = &mut self.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        let value = slot.value.take();
        self.free.push(index);
        self.len -= 1;
        value
    }

    /// Removes every entry (their keys go stale) and every record.
    pub fn clear(&mut self) {
        for index in 0..self.slots.len() {
            if self.slots[index].value.is_some() {
                self.vacate(index as u32);
            }
        }
        self.heap.clear();
        self.stale = 0;
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Re-files so far (entries found touched when their record surfaced).
    pub fn refiles(&self) -> u64 {
        self.refiles
    }

    /// The earliest check time filed (stale records included: they only make the
    /// adapter look earlier than needed, never later).
    #[inline]
    pub fn next_check(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(record)| record.check)
    }

    /// Pops records whose check time is at or before `witnessed`, skipping stale ones
    /// and re-filing touched ones, until an entry is due (it leaves the queue and is
    /// returned), nothing more is due, or `work` records have been handled.
    pub fn pop_expired(&mut self, witnessed: u64, work: usize) -> Popped<T> {
        for _ in 0..work {
            let Some(&Reverse(record)) = self.heap.peek() else {
                return Popped::NotYet(None);
            };
            if record.check > witnessed {
                return Popped::NotYet(Some(record.check));
            }
            self.heap.pop();
            let slot = &self.slots[record.index as usize];
            if slot.value.is_none() || slot.stamp != record.stamp {
                // Saturating: the count only paces purges.
                self.stale = self.stale.saturating_sub(1);
                continue;
            }
            let deadline = slot.deadline();
            if deadline > record.check {
                // Touched (or given a longer timeout) since it was filed.
                self.refiles += 1;
                self.file(record.index);
                continue;
            }
            let key = Key {
                index: record.index,
                generation: slot.generation,
            };
            let value = self
                .vacate(record.index)
                .expect("a live record points at an occupied slot");
            return Popped::Expired {
                key,
                deadline,
                value,
            };
        }
        Popped::Busy
    }

    /// Drops stale records and re-files touched ones at the top of the heap, whatever
    /// their check time, until the earliest record is filed at its entry's deadline:
    /// then returns that check time (`None`: nothing filed). `None` overall when
    /// `work` records were handled first. For an owner polled away from the entry's
    /// runtime, which must arm at the real earliest deadline rather than lazily.
    pub fn settle_earliest(&mut self, work: usize) -> Option<Option<u64>> {
        for _ in 0..work {
            let Some(&Reverse(record)) = self.heap.peek() else {
                return Some(None);
            };
            let slot = &self.slots[record.index as usize];
            if slot.value.is_none() || slot.stamp != record.stamp {
                self.heap.pop();
                self.stale = self.stale.saturating_sub(1);
                continue;
            }
            if slot.deadline() == record.check {
                return Some(Some(record.check));
            }
            self.heap.pop();
            self.refiles += 1;
            self.file(record.index);
        }
        None
    }

    /// Purges stale records once they pass a quarter of the heap.
    fn maybe_purge(&mut self) {
        if self.stale >= PURGE_MIN && self.stale * 4 > self.heap.len() {
            let slots = &self.slots;
            self.heap.retain(|Reverse(record)| {
                let slot = &slots[record.index as usize];
                slot.value.is_some() && slot.stamp == record.stamp
            });
            self.stale = 0;
        }
    }

    /// Heap bytes per entry slot and per heap record, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<T>>()
            + self.heap.capacity() * std::mem::size_of::<Reverse<Record>>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }

    /// Records in the heap, stale ones included (for tests of the purge).
    #[cfg(test)]
    pub fn records(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    fn expired<T>(popped: Popped<T>) -> (Key, u64, T) {
        match popped {
            Popped::Expired {
                key,
                deadline,
                value,
            } => (key, deadline, value),
            _ => panic!("expected an expiry"),
        }
    }

    #[test]
    fn untouched_entry_expires_at_its_deadline() {
        let mut q = IdleCore::with_capacity(100, 0);
        let k = q.insert("a", 0, 100);
        assert_eq!(q.pop_expired(99, 10), Popped::NotYet(Some(100)));
        let (key, deadline, value) = expired(q.pop_expired(100, 10));
        assert_eq!((key, deadline, value), (k, 100, "a"));
        assert_eq!(q.len(), 0);
        assert!(!q.touch_at(k, 5));
        assert_eq!(q.pop_expired(1_000, 10), Popped::NotYet(None));
    }

    #[test]
    fn touches_are_stores_and_refile_once_per_period() {
        let mut q = IdleCore::with_capacity(100, 0);
        let k = q.insert((), 0, 100);
        for t in 1..=99 {
            assert!(q.touch_at(k, t));
        }
        assert_eq!(q.records(), 1, "touching files nothing");
        assert_eq!(q.pop_expired(100, 10), Popped::NotYet(Some(199)));
        assert_eq!(q.refiles(), 1);
        assert!(q.touch_at(k, 50)); // older: ignored
        assert_eq!(q.times(k), Some((100, 99, 199)));
        assert_eq!(expired(q.pop_expired(199, 10)).1, 199);
    }

    #[test]
    fn due_entries_come_out_in_deadline_order() {
        let mut q = IdleCore::with_capacity(100, 0);
        let a = q.insert('a', 0, 10); // filed at 10, touched to 15
        let b = q.insert('b', 0, 12);
        let c = q.insert('c', 0, 11);
        q.touch_at(a, 5);
        let order: Vec<_> = (0..3).map(|_| expired(q.pop_expired(20, 10)).2).collect();
        assert_eq!(order, ['c', 'b', 'a']);
        let _ = (b, c);
    }

    #[test]
    fn shortening_is_due_at_once_and_longer_is_a_store() {
        let mut q = IdleCore::with_capacity(1_000, 0);
        let k = q.insert((), 0, 1_000);
        assert!(q.set_timeout(k, 2_000));
        assert_eq!(q.records(), 1);
        assert!(q.set_timeout(k, 10));
        assert_eq!(q.pop_expired(10, 10).clone_deadline(), Some(10));
        // The old record at 1000 is stale and skipped.
        assert_eq!(q.pop_expired(5_000, 10), Popped::NotYet(None));
    }

    #[test]
    fn stale_keys_never_reach_a_later_entry() {
        let mut q = IdleCore::with_capacity(10, 0);
        let old = q.insert(1, 0, 10);
        assert_eq!(q.remove(old), Some(1));
        let new = q.insert(2, 0, 10);
        assert_ne!(old, new);
        assert_eq!(q.get(old), None);
        assert_eq!(q.remove(old), None);
        assert!(!q.set_timeout(old, 1));
        assert_eq!(q.get(new), Some(&2));
        // The removed entry's record is skipped; only the new one expires.
        assert_eq!(expired(q.pop_expired(10, 10)).2, 2);
        assert_eq!(q.pop_expired(10, 10), Popped::NotYet(None));
    }

    #[test]
    fn work_is_bounded_per_call() {
        let mut q = IdleCore::with_capacity(10, 0);
        let keys: Vec<_> = (0..10).map(|i| q.insert(i, 0, 10)).collect();
        for &k in &keys {
            q.touch_at(k, 5);
        }
        assert_eq!(q.pop_expired(10, 4), Popped::Busy);
        assert_eq!(q.pop_expired(10, 4), Popped::Busy);
        assert_eq!(q.pop_expired(10, 4), Popped::NotYet(Some(15)));
        assert_eq!(q.refiles(), 10);
    }

    #[test]
    fn settling_refiles_touched_records_at_the_top_only() {
        let mut q = IdleCore::with_capacity(100, 0);
        let a = q.insert('a', 0, 100);
        let b = q.insert('b', 0, 150);
        let c = q.insert('c', 0, 200);
        q.touch_at(a, 80); // deadline 180: past b's
        q.touch_at(c, 10); // deadline 210, below the top: left alone
        assert_eq!(q.settle_earliest(10), Some(Some(150)));
        assert_eq!(q.refiles(), 1);
        q.remove(b);
        assert_eq!(q.settle_earliest(10), Some(Some(180)));
        assert_eq!(q.settle_earliest(0), None, "no work allowed: not settled");
        q.clear();
        assert_eq!(q.settle_earliest(10), Some(None));
        let _ = c;
    }

    #[test]
    fn stale_records_are_purged_past_a_quarter() {
        let mut q = IdleCore::with_capacity(10, 0);
        let keys: Vec<_> = (0..400).map(|i| q.insert(i, 0, 10)).collect();
        for &k in &keys[..100] {
            q.remove(k);
        }
        assert_eq!(q.records(), 400, "a quarter exactly: not yet");
        q.remove(keys[100]);
        assert_eq!(q.records(), 299);
        assert_eq!(q.len(), 299);
    }

    #[test]
    fn clear_empties_and_stales_every_key() {
        let mut q = IdleCore::with_capacity(10, 0);
        let k = q.insert(1, 0, 10);
        q.clear();
        assert_eq!((q.len(), q.records()), (0, 0));
        assert_eq!(q.get(k), None);
        let k2 = q.insert(2, 0, 10);
        assert_ne!(k, k2);
        assert_eq!(expired(q.pop_expired(10, 10)).2, 2);
    }

    #[test]
    fn saturated_deadlines_clamp_below_never() {
        let mut q = IdleCore::with_capacity(u64::MAX, 0);
        let k = q.insert((), u64::MAX, u64::MAX);
        assert_eq!(q.times(k).unwrap().2, SATURATED);
        assert_eq!(q.next_check(), Some(SATURATED));
    }

    impl<T> Popped<T> {
        fn clone_deadline(&self) -> Option<u64> {
            match self {
                Popped::Expired { deadline, .. } => Some(*deadline),
                _ => None,
            }
        }
    }
}
