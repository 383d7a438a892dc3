//! `DelayMap<K, V>`: deadlines keyed by the caller's own key.

use crate::delay_queue::{self, DelayQueue};
use crate::time_base::{duration_to_nanos, now_nanos, to_nanos};
use futures::Stream;
use hashbrown::HashTable;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash, RandomState};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// `timeout` from now on the tokio clock, in nanoseconds of the time base; saturates.
fn after_now(timeout: Duration) -> u64 {
    now_nanos().saturating_add(duration_to_nanos(timeout))
}

/// Values keyed by the caller's own key (a peer id, a session address), each with a
/// deadline: what the `HashMap<K, delay_queue::Key>` + `DelayQueue` pair that many
/// crates write by hand is for, in one structure.
///
/// Every key is stored once, beside its value in the queue's slot; the index is a
/// hash table of slot keys that hashes and compares through the slots. So a
/// [`reset`](DelayMap::reset) is one hash lookup and a store (later) or a record
/// (earlier), with none of the pair's second lookup, wheel relink, or stale-key
/// panic. Expired pairs come out of [`poll_expired`](DelayMap::poll_expired),
/// [`expired`](DelayMap::expired) or the [`Stream`] impl as `(K, V)`.
///
/// Built on [`DelayQueue`]'s core and keeping its semantics: a later reset is a
/// store; an earlier one, or an insert earlier than the runtime entry, wakes the
/// task so its next poll moves the entry; the stream ends when the map is empty (not
/// fused); never early by the owning runtime's clock (the runtime of the first
/// poll), never later than tokio-util's queue; entries due together come out in
/// deadline order, within tokio's cooperative budget and with bounded work per
/// poll; `Duration::MAX` and far instants saturate. Absent keys answer `None` or
/// `false`, never a panic.
///
/// # Precision
///
/// As [`DelayQueue`]'s: a pair comes out once the owning runtime's timer has reached
/// its deadline's 1 ms tick (at the exact deadline when its clock sits a whole tick
/// past it).
///
/// # Cancel safety
///
/// [`expired`](DelayMap::expired) and `StreamExt::next` are cancel safe: a pair
/// leaves the map only inside the poll that returns it.
///
/// # Panics
///
/// The first poll panics outside a tokio runtime with a time driver (tokio's own
/// panic). Holding more than `u32::MAX - 1` pairs, or reserving more than memory can
/// hold, panics too.
///
/// # Examples
///
/// A peer table: every message from a peer pushes its deadline back; peers silent
/// for 30 s are dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::DelayMap;
/// use std::time::Duration;
///
/// let mut peers: DelayMap<u64, &str> = DelayMap::new();
/// peers.insert(7, "10.0.0.7:9000", Duration::from_secs(30));
/// peers.insert(9, "10.0.0.9:9000", Duration::from_secs(30));
/// for _ in 0..50 {
///     tokio::time::advance(Duration::from_secs(1)).await;
///     assert!(peers.reset(&7, Duration::from_secs(30))); // a message from peer 7
/// }
/// assert!(!peers.reset(&8, Duration::from_secs(30))); // unknown peer: false
/// let (silent, address) = peers.expired().await.unwrap();
/// assert_eq!((silent, address), (9, "10.0.0.9:9000"));
/// assert!(peers.contains_key(&7));
/// # }
/// ```
pub struct DelayMap<K, V> {
    queue: DelayQueue<(K, V)>,
    /// The slot key of each pair, found by hashing the caller's key stored in the
    /// slot itself.
    index: HashTable<delay_queue::Key>,
    hasher: RandomState,
}

impl<K: Eq + Hash + Clone, V> DelayMap<K, V> {
    /// An empty map. Needs no runtime: the runtime entry is made at the first poll.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty map with room for `capacity` pairs.
    ///
    /// # Panics
    ///
    /// If `capacity` pairs cannot be allocated.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            queue: DelayQueue::with_capacity(capacity),
            index: HashTable::with_capacity(capacity),
            hasher: RandomState::new(),
        }
    }

    #[inline]
    fn slot_key(&self, key: &K) -> Option<delay_queue::Key> {
        let hash = self.hasher.hash_one(key);
        let queue = &self.queue;
        self.index
            .find(hash, |slot| queue.get(slot).is_some_and(|(k, _)| k == key))
            .copied()
    }

    /// Inserts `value` under `key`, due at `when`. A key already present gets the
    /// new value and deadline in place, and its old value is returned.
    pub fn insert_at(&mut self, key: K, value: V, when: Instant) -> Option<V> {
        self.insert_nanos(key, value, to_nanos(when))
    }

    fn insert_nanos(&mut self, key: K, value: V, when: u64) -> Option<V> {
        if let Some(slot) = self.slot_key(&key) {
            let (_, stored) = self.queue.get_mut(&slot).expect("indexed slots are live");
            let old = std::mem::replace(stored, value);
            self.queue.reset_nanos(&slot, when);
            return Some(old);
        }
        let hash = self.hasher.hash_one(&key);
        let slot = self.queue.insert_nanos((key, value), when);
        let (queue, hasher) = (&self.queue, &self.hasher);
        self.index.insert_unique(hash, slot, |slot| {
            hasher.hash_one(&queue.get(slot).expect("indexed slots are live").0)
        });
        None
    }

    /// Inserts `value` under `key`, due `timeout` from now (tokio clock; saturates),
    /// as [`insert_at`](DelayMap::insert_at).
    pub fn insert(&mut self, key: K, value: V, timeout: Duration) -> Option<V> {
        self.insert_nanos(key, value, after_now(timeout))
    }

    /// Moves `key`'s deadline to `when`: later is a store, earlier files a record and
    /// wakes the task if the runtime entry is armed later. `false` if `key` is absent.
    #[inline]
    pub fn reset_at(&mut self, key: &K, when: Instant) -> bool {
        match self.slot_key(key) {
            Some(slot) => {
                self.queue.reset_at(&slot, when);
                true
            }
            None => false,
        }
    }

    /// Moves `key`'s deadline to `timeout` from now (tokio clock; saturates), as
    /// [`reset_at`](DelayMap::reset_at).
    pub fn reset(&mut self, key: &K, timeout: Duration) -> bool {
        match self.slot_key(key) {
            Some(slot) => {
                self.queue.reset_nanos(&slot, after_now(timeout));
                true
            }
            None => false,
        }
    }

    /// Removes `key`'s pair and returns its value (`None` if absent). Emptying a map
    /// that was polled wakes its task, whose next poll returns `Ready(None)`.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        let queue = &self.queue;
        let entry = self
            .index
            .find_entry(hash, |slot| queue.get(slot).is_some_and(|(k, _)| k == key))
            .ok()?;
        let (slot, _) = entry.remove();
        self.queue
            .try_remove(&slot)
            .map(|expired| expired.into_inner().1)
    }

    /// `key`'s value, if present.
    pub fn get(&self, key: &K) -> Option<&V> {
        let slot = self.slot_key(key)?;
        self.queue.get(&slot).map(|(_, value)| value)
    }

    /// `key`'s value, mutably, if present.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let slot = self.slot_key(key)?;
        self.queue.get_mut(&slot).map(|(_, value)| value)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &K) -> bool {
        self.slot_key(key).is_some()
    }

    /// `key`'s deadline (exactly the instant given), if present.
    pub fn deadline(&self, key: &K) -> Option<Instant> {
        let slot = self.slot_key(key)?;
        Some(self.queue.deadline(&slot))
    }

    /// The key with the earliest deadline, and that deadline.
    pub fn peek(&self) -> Option<(&K, Instant)> {
        let slot = self.queue.peek()?;
        let (key, _) = self.queue.get(&slot)?;
        Some((key, self.queue.deadline(&slot)))
    }

    /// Keeps the pairs for which `keep` returns `true` and removes the others (they
    /// are not yielded).
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        let queue = &mut self.queue;
        self.index.retain(|slot| {
            let (key, value) = queue.get_mut(slot).expect("indexed slots are live");
            if keep(key, value) {
                return true;
            }
            let _ = queue.try_remove(slot);
            false
        });
    }

    /// Every pair with its deadline, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V, Instant)> + '_ {
        self.queue
            .iter()
            .map(|(_, (key, value), deadline)| (key, value, deadline))
    }

    /// How many pairs the map holds.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether the map holds no pair.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Removes every pair; wakes a polled task if there were any.
    pub fn clear(&mut self) {
        self.index.clear();
        self.queue.clear();
    }

    /// Gives back memory held beyond the pairs (the slab keeps its slots, so no
    /// pair moves).
    pub fn shrink_to_fit(&mut self) {
        self.queue.shrink_to_fit();
        let (queue, hasher) = (&self.queue, &self.hasher);
        self.index.shrink_to_fit(|slot| {
            hasher.hash_one(&queue.get(slot).expect("indexed slots are live").0)
        });
    }

    /// Polls for the next expired pair: `Ready(Some((key, value)))` (it has left the
    /// map), `Pending` with the waker stored for the earliest deadline, or
    /// `Ready(None)` when the map is empty.
    ///
    /// # Panics
    ///
    /// On the first poll outside a tokio runtime with a time driver.
    #[track_caller]
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<(K, V)>> {
        let expired = match self.queue.poll_expired(cx) {
            Poll::Ready(Some(expired)) => expired,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let slot = expired.key();
        let (key, value) = expired.into_inner();
        let hash = self.hasher.hash_one(&key);
        if let Ok(entry) = self.index.find_entry(hash, |&indexed| indexed == slot) {
            entry.remove();
        }
        Poll::Ready(Some((key, value)))
    }

    /// Waits for the next expired pair (`None`: the map is empty). Cancel safe.
    pub fn expired(&mut self) -> impl Future<Output = Option<(K, V)>> + '_ {
        std::future::poll_fn(move |cx| self.poll_expired(cx))
    }

    /// How much driver work the map has caused so far.
    pub fn stats(&self) -> crate::Stats {
        self.queue.stats()
    }

    /// Heap bytes the map holds for its pairs, records and index (excluding what `K`
    /// and `V` themselves own), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.queue.heap_bytes()
            + crate::memory::hash_table_bytes(
                self.index.capacity(),
                std::mem::size_of::<delay_queue::Key>(),
            )
    }
}

impl<K: Eq + Hash + Clone, V> Default for DelayMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

// No projection reaches the pairs.
impl<K, V> Unpin for DelayMap<K, V> {}

impl<K: Eq + Hash + Clone, V> Stream for DelayMap<K, V> {
    type Item = (K, V);

    /// Yields each pair as it expires; `None` when the map is empty (not fused).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<(K, V)>> {
        self.get_mut().poll_expired(cx)
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for DelayMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (_, (key, value), deadline) in self.queue.iter() {
            map.entry(key, &(value, deadline));
        }
        map.finish()
    }
}
