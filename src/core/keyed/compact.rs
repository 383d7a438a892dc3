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

use super::{Key, KeyedCore, Record, Timing};
use std::collections::HashMap;

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

    /// The entry in `index` left: forget its move; returns its handed-out key.
    pub(super) fn left(&mut self, index: u32) -> Option<Key> {
        let key = self.original.remove(&index)?;
        self.current.remove(&key);
        Some(key)
    }

    fn moved(&mut self, handed_out: Key, to: u32) {
        self.current.insert(handed_out, to);
        self.original.insert(to, handed_out);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.current.capacity() * std::mem::size_of::<(Key, u32)>()
            + self.original.capacity() * std::mem::size_of::<(u32, Key)>()
    }
}

impl<T, M: Timing> KeyedCore<T, M> {
    /// Shrinks the slab to exactly its live entries (`capacity() == len()` as far as
    /// the allocator allows); every live key stays valid. `O(n)`.
    pub fn compact(&mut self) {
        let len = self.len;
        let holes: Vec<usize> = (0..len)
            .filter(|&index| self.slots[index].value.is_none())
            .collect();
        let mut holes = holes.into_iter();
        for from in len..self.slots.len() {
            if self.slots[from].value.is_none() {
                continue;
            }
            let to = holes
                .next()
                .expect("as many holes below len as entries above");
            let handed_out = self.handed_out_key(from as u32);
            let _ = self.remap.left(from as u32);
            let value = self.slots[from].value.take();
            let timing = self.slots[from].timing;
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
        let cut_generation = self.slots[len..].iter().map(|slot| slot.generation).max();
        if let Some(generation) = cut_generation {
            self.remap.floor = self.remap.floor.max(generation.saturating_add(1));
        }
        self.slots.truncate(len);
        self.slots.shrink_to_fit();
        self.free.clear();
        self.free.shrink_to_fit();
        // Refile every entry at its deadline: the old records name moved slots.
        self.heap.clear();
        for index in 0..len {
            let slot = &mut self.slots[index];
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
}
