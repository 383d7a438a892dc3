//! The ordering structure of the keyed timers (`IdleQueue<T>`, `DelayQueue<T>`): a
//! slab of entries and a min-heap of check times, with lazy re-filing and lazy
//! deletion. One implementation, two ways to say when an entry is due ([`Timing`]):
//! `IdleQueue`'s deadline is `last_activity + timeout` ([`Idle`]), `DelayQueue`'s the
//! instant it was given ([`At`]).
//!
//! # Why a heap with lazy re-filing
//!
//! Moving a deadline later must be a store, so the structure may not move an entry
//! when that happens. Each live entry has exactly one *live* heap record `(check,
//! index, stamp)` filed at a time no later than its deadline. Later moves leave the
//! record alone. When the record reaches the top and its check time has been
//! witnessed, the entry's real deadline is compared with it: equal means due (yield
//! it); later means it moved since (re-file it at its deadline, the SCTP re-arm for
//! the remainder). Under continuous touching that is one re-file per key per timeout
//! period, however many touches. A move *earlier* files a new record at once (the old
//! one goes stale), so the invariant "live record no later than the deadline" holds.
//!
//! Because an entry is yielded only from a record filed at exactly its deadline,
//! entries come out in deadline order, also when many are due in one poll.
//!
//! A binary heap rather than a hierarchical wheel: re-filing happens at most once per
//! timeout period per key, so the heap's `O(log n)` is paid rarely, while a wheel's
//! cascading and its fixed horizon (tokio-util's `DelayQueue` panics past 2^36 ms)
//! would cost on every key. The heap also keeps exact nanosecond order.
//!
//! Stale records (from `remove`, `clear` and earlier moves) are skipped when they
//! surface and purged in one `O(n)` pass when they exceed a quarter of the heap, as
//! Go's runtime timers do.
//!
//! A record is live when its slot is occupied and the slot's `stamp` (bumped on every
//! filing, never reset, so it differs from every older record of the slot that a
//! purge or pop has not yet removed) equals the record's. Keys carry the slot's
//! `generation`, bumped when an entry leaves, so a stale key never reaches a later
//! entry in the same slot. A slot whose generation would wrap is retired (never
//! reused), so that holds however many entries pass through one slot.

mod compact;
mod heap;
#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests;

use super::SATURATED;
use compact::Remap;
use heap::RecordHeap;

/// When an entry is due.
pub trait Timing: Copy {
    /// The deadline, at most [`SATURATED`].
    fn deadline(&self) -> u64;
}

/// `IdleQueue`'s timing: due once idle for `timeout` after `last_activity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idle {
    /// The latest activity (nanoseconds of the time base).
    pub last_activity: u64,
    /// The idle timeout (nanoseconds, saturated).
    pub timeout: u64,
}

impl Timing for Idle {
    #[inline]
    fn deadline(&self) -> u64 {
        self.last_activity
            .saturating_add(self.timeout)
            .min(SATURATED)
    }
}

/// `DelayQueue`'s timing: due at the given instant (clamped to [`SATURATED`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At(u64);

impl At {
    /// Due at `deadline` (saturated).
    #[inline]
    pub fn new(deadline: u64) -> Self {
        Self(deadline.min(SATURATED))
    }
}

impl Timing for At {
    #[inline]
    fn deadline(&self) -> u64 {
        self.0
    }
}

/// A key of a keyed timer: the slot and its generation, so a key of an entry that
/// was removed or expired never reaches an entry inserted later.
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
struct Slot<T, M> {
    generation: u32,
    stamp: u32,
    timing: M,
    /// `None`: vacant (on the free list, or retired).
    value: Option<T>,
}

/// What [`KeyedCore::pop_expired`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Popped<T> {
    /// An entry whose deadline has been witnessed; it has left the queue.
    Expired {
        /// Its key (now stale).
        key: Key,
        /// Its deadline.
        deadline: u64,
        /// Its value.
        value: T,
    },
    /// Nothing is due by the witnessed time; the earliest check time, if any.
    NotYet(Option<u64>),
    /// The work bound was reached (re-files and stale records); call again.
    Busy,
}

/// A generation past which a slot is retired rather than reused.
const RETIRED: u32 = u32::MAX;

/// Below this many stale records the heap is never purged (a purge is `O(n)`).
const PURGE_MIN: usize = 64;

/// Entries with deadlines, ordered by check time. Times are nanoseconds of the time
/// base; `now` and the witnessed time are arguments, never read here.
#[derive(Debug)]
pub struct KeyedCore<T, M> {
    slots: Vec<Slot<T, M>>,
    free: Vec<u32>,
    heap: RecordHeap,
    len: usize,
    /// Records in `heap` that are no longer live.
    stale: usize,
    /// Times a popped record found its entry moved later since and filed it again.
    refiles: u64,
    /// Keys moved by `compact`, and the generation new slots start from.
    remap: Remap,
}

impl<T, M: Timing> KeyedCore<T, M> {
    /// An empty queue with room for `capacity` entries.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            slots: Vec::with_capacity(capacity),
            free: Vec::new(),
            heap: RecordHeap::with_capacity(capacity),
            len: 0,
            stale: 0,
            refiles: 0,
            remap: Remap::default(),
        }
    }

    /// Inserts `value`, due as `timing` says; files it at its deadline.
    ///
    /// # Panics
    ///
    /// If the queue would hold more than `u32::MAX - 1` entries.
    pub fn insert(&mut self, value: T, timing: M) -> Key {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&index| index != u32::MAX)
                    .expect("a keyed timer holds at most u32::MAX - 1 entries");
                self.slots.push(Slot {
                    generation: self.remap.generation_floor(),
                    stamp: 0,
                    timing,
                    value: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.timing = timing;
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
        self.heap.push(Record {
            check: slot.timing.deadline(),
            index,
            stamp: slot.stamp,
        });
    }

    /// The slot index holding `key`'s entry, if it is live (through the remap of a
    /// `compact` when the key's own slot does not hold it).
    #[inline]
    fn locate(&self, key: Key) -> Option<u32> {
        match self.slots.get(key.index as usize) {
            Some(slot) if slot.generation == key.generation && slot.value.is_some() => {
                Some(key.index)
            }
            _ if self.remap.is_empty() => None,
            _ => self.remap.current(key),
        }
    }

    /// `key`'s timing, if it is in the queue.
    #[inline]
    pub fn timing(&self, key: Key) -> Option<M> {
        let index = self.locate(key)?;
        Some(self.slots[index as usize].timing)
    }

    /// `key`'s timing, for a change that moves its deadline **later or not at all**
    /// (a touch, a later reset): a store, nothing is filed. A move earlier must go
    /// through [`reschedule`](Self::reschedule).
    #[inline]
    pub fn timing_for_later(&mut self, key: Key) -> Option<&mut M> {
        let index = self.locate(key)?;
        Some(&mut self.slots[index as usize].timing)
    }

    /// Sets `key`'s timing. Later or equal: a store. Earlier: files a record at the
    /// new deadline at once (the old one goes stale), so it is due on time, at once
    /// if it has passed (the SCTP "blocked shortening" trap). `None` if the key is not
    /// in the queue, else whether the deadline moved earlier.
    pub fn reschedule(&mut self, key: Key, timing: M) -> Option<bool> {
        let index = self.locate(key)?;
        let slot = &mut self.slots[index as usize];
        let earlier = timing.deadline() < slot.timing.deadline();
        slot.timing = timing;
        if earlier {
            self.stale += 1;
            self.file(index);
            self.maybe_purge();
        }
        Some(earlier)
    }

    /// The entry's value.
    pub fn get(&self, key: Key) -> Option<&T> {
        let index = self.locate(key)?;
        self.slots[index as usize].value.as_ref()
    }

    /// The entry's value, mutably.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let index = self.locate(key)?;
        self.slots[index as usize].value.as_mut()
    }

    /// Removes the entry; its record becomes stale. Returns its value and timing.
    pub fn remove(&mut self, key: Key) -> Option<(T, M)> {
        let index = self.locate(key)?;
        self.stale += 1;
        let timing = self.slots[index as usize].timing;
        let (_, value) = self.vacate(index);
        self.maybe_purge();
        Some((value, timing))
    }

    /// Empties slot `index`: bumps its generation (retiring it before a wrap), frees
    /// it, and returns the key it was handed out under and its value.
    fn vacate(&mut self, index: u32) -> (Key, T) {
        let slot = &mut self.slots[index as usize];
        let mut key = Key {
            index,
            generation: slot.generation,
        };
        let value = slot.value.take().expect("vacating an occupied slot");
        slot.generation = slot.generation.saturating_add(1);
        if slot.generation != RETIRED {
            self.free.push(index);
        }
        self.len -= 1;
        if !self.remap.is_empty() {
            if let Some(original) = self.remap.left(index) {
                key = original;
            }
        }
        (key, value)
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

    /// Re-files so far (entries found moved later when their record surfaced).
    pub fn refiles(&self) -> u64 {
        self.refiles
    }

    /// The earliest check time filed (stale records included: they only make the
    /// adapter look earlier than needed, never later).
    #[inline]
    pub fn next_check(&self) -> Option<u64> {
        self.heap.peek().map(|record| record.check)
    }

    /// Whether the earliest record is live and filed at its entry's deadline (or
    /// there is none): then [`next_check`](Self::next_check) is the real earliest
    /// deadline. One heap peek and one slot read.
    #[inline]
    pub fn earliest_is_settled(&self) -> bool {
        self.heap.peek().is_none_or(|record| {
            let slot = &self.slots[record.index as usize];
            slot.value.is_some()
                && slot.stamp == record.stamp
                && slot.timing.deadline() == record.check
        })
    }

    /// Pops records whose check time is at or before `witnessed`, skipping stale ones
    /// and re-filing moved ones, until an entry is due (it leaves the queue and is
    /// returned), nothing more is due, or `work` records have been handled.
    pub fn pop_expired(&mut self, witnessed: u64, work: usize) -> Popped<T> {
        self.pop_expired_confirmed(witnessed, work, |_, _, _, _| true)
    }

    /// [`pop_expired`](Self::pop_expired), where an entry whose record comes up due
    /// expires only if `confirm(key, value, timing, check)` agrees; `false` means it moved
    /// later by news the core does not see (a `KeyHandle`'s touch), which `confirm`
    /// has folded into `timing`, and it is filed again.
    pub fn pop_expired_confirmed(
        &mut self,
        witnessed: u64,
        work: usize,
        mut confirm: impl FnMut(Key, &T, &mut M, u64) -> bool,
    ) -> Popped<T> {
        for _ in 0..work {
            let Some(&record) = self.heap.peek() else {
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
            let deadline = slot.timing.deadline();
            if deadline > record.check {
                // Moved later since it was filed.
                self.refiles += 1;
                self.file(record.index);
                continue;
            }
            let key = self.handed_out_key(record.index);
            let slot = &mut self.slots[record.index as usize];
            let value = slot.value.as_ref().expect("checked occupied above");
            if !confirm(key, value, &mut slot.timing, record.check) {
                self.refiles += 1;
                self.file(record.index);
                continue;
            }
            let deadline = slot.timing.deadline();
            let (key, value) = self.vacate(record.index);
            return Popped::Expired {
                key,
                deadline,
                value,
            };
        }
        Popped::Busy
    }

    /// Drops stale records and re-files moved ones at the top of the heap, whatever
    /// their check time, until the earliest record is filed at its entry's deadline:
    /// then returns that check time (`None`: nothing filed). `None` overall when
    /// `work` records were handled first. For an owner that must arm at the real
    /// earliest deadline rather than lazily.
    pub fn settle_earliest(&mut self, work: usize) -> Option<Option<u64>> {
        for _ in 0..work {
            let Some(&record) = self.heap.peek() else {
                return Some(None);
            };
            let slot = &self.slots[record.index as usize];
            if slot.value.is_none() || slot.stamp != record.stamp {
                self.heap.pop();
                self.stale = self.stale.saturating_sub(1);
                continue;
            }
            if slot.timing.deadline() == record.check {
                return Some(Some(record.check));
            }
            self.heap.pop();
            self.refiles += 1;
            self.file(record.index);
        }
        None
    }

    /// The entry with the earliest deadline, and that deadline (the lowest index on a
    /// tie). One peek when the earliest record is settled; otherwise (deadlines moved
    /// later since the last settling) a scan of the slab.
    pub fn peek(&self) -> Option<(Key, u64)> {
        if self.earliest_is_settled() {
            let &record = self.heap.peek()?;
            return Some((self.handed_out_key(record.index), record.check));
        }
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.value.is_some())
            .min_by_key(|(index, slot)| (slot.timing.deadline(), *index))
            .map(|(index, slot)| (self.handed_out_key(index as u32), slot.timing.deadline()))
    }

    /// Live entries with their keys, in slab order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, &T, M)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(index, slot)| {
                let value = slot.value.as_ref()?;
                Some((self.handed_out_key(index as u32), value, slot.timing))
            })
    }

    /// The key the entry in slot `index` was handed out under.
    fn handed_out_key(&self, index: u32) -> Key {
        if !self.remap.is_empty() {
            if let Some(original) = self.remap.original(index) {
                return original;
            }
        }
        Key {
            index,
            generation: self.slots[index as usize].generation,
        }
    }

    /// Purges stale records once they pass a quarter of the heap.
    fn maybe_purge(&mut self) {
        if self.stale >= PURGE_MIN && self.stale * 4 > self.heap.len() {
            let slots = &self.slots;
            self.heap.retain(|record| {
                let slot = &slots[record.index as usize];
                slot.value.is_some() && slot.stamp == record.stamp
            });
            self.stale = 0;
        }
    }

    /// How many entries the slab holds room for without reallocating.
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Room for `additional` more entries (slab and heap).
    pub fn reserve(&mut self, additional: usize) {
        self.slots
            .reserve(additional.saturating_sub(self.free.len()));
        self.heap.reserve(additional);
    }

    /// Gives back memory the slab, heap and free list hold beyond their lengths
    /// (purging stale records first). Keys stay as they are.
    pub fn shrink_to_fit(&mut self) {
        self.purge();
        self.slots.shrink_to_fit();
        self.heap.shrink_to_fit();
        self.free.shrink_to_fit();
        self.remap.shrink_to_fit();
    }

    fn purge(&mut self) {
        let slots = &self.slots;
        self.heap.retain(|record| {
            let slot = &slots[record.index as usize];
            slot.value.is_some() && slot.stamp == record.stamp
        });
        self.stale = 0;
    }

    /// Heap bytes per entry slot and per heap record, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<T, M>>()
            + self.heap.capacity() * std::mem::size_of::<Record>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + self.remap.heap_bytes()
    }

    /// Records in the heap, stale ones included (for tests of the purge).
    #[cfg(test)]
    pub fn records(&self) -> usize {
        self.heap.len()
    }
}

impl<T> KeyedCore<T, Idle> {
    /// Records activity at `at` (older is ignored): a compare and a store.
    #[inline]
    pub fn touch_at(&mut self, key: Key, at: u64) -> bool {
        match self.timing_for_later(key) {
            Some(timing) => {
                if at > timing.last_activity {
                    timing.last_activity = at;
                }
                true
            }
            None => false,
        }
    }

    /// Changes the timeout. Longer: a store (found when the record surfaces).
    /// Shorter: filed again at the new deadline, due at once if that has passed.
    pub fn set_timeout(&mut self, key: Key, timeout: u64) -> bool {
        let Some(timing) = self.timing(key) else {
            return false;
        };
        self.reschedule(key, Idle { timeout, ..timing }).is_some()
    }
}

impl<T> KeyedCore<T, At> {
    /// Moves `key`'s deadline to `when`: later is a store, earlier files a record.
    /// `None` if the key is not in the queue, else whether it moved earlier.
    #[inline]
    pub fn reset_at(&mut self, key: Key, when: u64) -> Option<bool> {
        let when = At::new(when);
        let timing = self.timing_for_later(key)?;
        if when.0 >= timing.0 {
            *timing = when;
            return Some(false);
        }
        self.reschedule(key, when)
    }
}
