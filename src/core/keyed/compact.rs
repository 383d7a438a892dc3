//! `compact`: bring the slab down to its live entries while every key handed out
//! stays valid.
//!
//! Live entries in slots at or past `len` move into the vacant slots below it, the
//! slab is cut to `len`, and the heap is refiled. A moved entry's key still names its
//! old slot, so [`Remap`] maps each moved key to the slot now holding it (and back,
//! so the key handed out is the one `Expired::key` reports). Lookups consult it only
//! when the key's own slot does not match and the map is not empty, so a queue that
//! never compacts pays one `is_empty` check on a miss.
//!
//! A slot cut off and later created again at the same index starts at a generation
//! above every generation the cut slots had (`generation_floor`), so an old key never
//! matches it.

use super::{Key, KeyedCore, Record, Timing, RETIRED};
use std::collections::HashMap;

/// Slots whose generation reached this are never cut by `compact` (see there).
pub(super) const CUT_LIMIT: u32 = 1 << 31;

/// Keys moved by `compact`.
#[derive(Debug, Default)]
pub(super) struct Remap {
    /// Handed-out key → the slot holding its entry now.
    current: HashMap<Key, u32>,
    /// Slot → the key its entry was handed out under (the inverse of `current`).
    original: HashMap<u32, Key>,
    /// The generation a newly created slot starts at.
    floor: u32,
}

impl Remap {
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    pub(super) fn generation_floor(&self) -> u32 {
        self.floor
    }

    /// The slot holding the entry handed out as `key`, if it was moved.
    pub(super) fn current(&self, key: Key) -> Option<u32> {
        self.current.get(&key).copied()
    }

    /// The key the entry in `index` was handed out under, if it was moved.
    pub(super) fn original(&self, index: u32) -> Option<Key> {
        self.original.get(&index).copied()
    }

    /// The entry in `index` left: forget its move; returns its handed-out key. The
    /// tables' memory goes back once no moved entry is left.
    pub(super) fn left(&mut self, index: u32) -> Option<Key> {
        let key = self.original.remove(&index)?;
        self.current.remove(&key);
        if self.current.is_empty() {
            self.current = HashMap::new();
            self.original = HashMap::new();
        }
        Some(key)
    }

    /// Gives back the tables' memory beyond what the moved entries need.
    pub(super) fn shrink_to_fit(&mut self) {
        self.current.shrink_to_fit();
        self.original.shrink_to_fit();
    }

    fn moved(&mut self, handed_out: Key, to: u32) {
        self.current.insert(handed_out, to);
        self.original.insert(to, handed_out);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        crate::memory::hash_table_bytes(self.current.capacity(), std::mem::size_of::<(Key, u32)>())
            + crate::memory::hash_table_bytes(
                self.original.capacity(),
                std::mem::size_of::<(u32, Key)>(),
            )
    }
}

impl<T, M: Timing> KeyedCore<T, M> {
    /// Shrinks the slab to its live entries (`capacity() == len()` as far as the
    /// allocator allows); every live key stays valid. `O(n)`.
    ///
    /// Live entries move, from the top down, into the lowest vacant slots below them,
    /// then the vacant tail is cut. Two kinds of slot are never reused for a move or
    /// cut, so that no key ever names two entries: a retired slot (its generation
    /// would wrap) never takes an entry, and a slot at or above [`CUT_LIMIT`] is
    /// kept (a slot created again at a cut index starts above every cut generation,
    /// and a floor that high would leave new slots few uses before they retire). So
    /// after some 2^31 removals in one slot, the slab can stay that many slots
    /// above `len`.
    pub fn compact(&mut self) {
        let holes: Vec<usize> = (0..self.slots.len())
            .filter(|&index| {
                let slot = &self.slots[index];
                slot.value.is_none() && slot.generation != RETIRED
            })
            .collect();
        let mut holes = holes.into_iter().peekable();
        for from in (0..self.slots.len()).rev() {
            if self.slots[from].value.is_none() {
                continue;
            }
            let Some(to) = holes.next_if(|&to| to < from) else {
                break; // every hole left is above this entry
            };
            self.move_entry(from, to);
        }
        let keep = self
            .slots
            .iter()
            .rposition(|slot| slot.value.is_some() || slot.generation >= CUT_LIMIT)
            .map_or(0, |index| index + 1);
        if let Some(cut) = self.slots[keep..].iter().map(|slot| slot.generation).max() {
            // Below CUT_LIMIT, so the floor stays far from RETIRED.
            self.remap.floor = self.remap.floor.max(cut + 1);
        }
        self.slots.truncate(keep);
        self.slots.shrink_to_fit();
        self.free = (0..keep as u32)
            .filter(|&index| {
                let slot = &self.slots[index as usize];
                slot.value.is_none() && slot.generation != RETIRED
            })
            .collect();
        self.free.shrink_to_fit();
        self.remap.shrink_to_fit();
        // Refile every entry at its deadline: the old records name moved slots.
        self.heap.clear();
        for index in 0..keep {
            let slot = &mut self.slots[index];
            if slot.value.is_none() {
                continue;
            }
            slot.stamp = slot.stamp.wrapping_add(1);
            self.heap.push(Record {
                check: slot.timing.deadline(),
                index: index as u32,
                stamp: slot.stamp,
            });
        }
        self.heap.shrink_to_fit();
        self.stale = 0;
    }

    /// Moves the entry in slot `from` into the vacant slot `to`, keeping the key it
    /// was handed out under. The emptied slot's generation moves on, as when an
    /// entry leaves, so a slot that stays in the slab is never reused under the
    /// moved entry's key.
    fn move_entry(&mut self, from: usize, to: usize) {
        let handed_out = self.handed_out_key(from as u32);
        let _ = self.remap.left(from as u32);
        let source = &mut self.slots[from];
        let value = source.value.take();
        let timing = source.timing;
        source.generation = source.generation.saturating_add(1);
        let slot = &mut self.slots[to];
        slot.value = value;
        slot.timing = timing;
        let own = Key {
            index: to as u32,
            generation: slot.generation,
        };
        if handed_out != own {
            self.remap.moved(handed_out, to as u32);
        }
    }
}
