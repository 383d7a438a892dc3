//! A drop-in for `tokio_util::time::DelayQueue` whose later resets are stores.
//!
//! `use tokio_util::time::{delay_queue, DelayQueue}` becomes
//! `use lazy_deadline::{delay_queue, DelayQueue}`: the same names, signatures and
//! behaviour, checked by running tokio-util's own test suite against this type (see
//! the repository's CI). What differs is listed on [`DelayQueue`].

use crate::core::keyed::{At, KeyedCore, Popped, Timing};
use crate::core::signal::EntrySignal;
use crate::core::MAX_ROUNDS;
use crate::entry::RuntimeEntry;
use crate::request_sets::RuntimeLife;
use crate::stats::Stats;
use crate::sync::Arc;
use crate::time_base::{duration_to_nanos, from_nanos, now_nanos, to_nanos, TICK_NANOS};
use futures::Stream;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// How many heap records one poll handles (re-files and stale records) before it
/// yields, so no poll does unbounded work.
const WORK_PER_POLL: usize = 1024;

/// A queue of values that each come out once their deadline has passed: a drop-in
/// for tokio-util's `DelayQueue`, where a reset to a later deadline is a store.
///
/// tokio-util's queue unlinks and relinks an entry in its timer wheel on every
/// [`reset_at`](DelayQueue::reset_at), rescans for the next deadline and resets its
/// `Sleep`. Here an entry is filed once in a heap at a time no later than its
/// deadline; a later reset only records the new deadline, and the entry is filed
/// again when its old check time comes up (at most once per check time, however
/// many resets). An earlier reset, or an insert earlier than the queue's runtime
/// entry, files a record and wakes the queue's task so its next poll moves the entry.
///
/// The queue holds one runtime timer entry, made at its first poll; the runtime of
/// that poll owns it and its clock judges "due". `new`, `with_capacity` and `Default`
/// need no runtime.
///
/// # Differences from tokio-util's `DelayQueue`
///
/// | what | tokio-util | here |
/// |---|---|---|
/// | `reset_at` later | wheel relink, next-deadline scan, `Sleep` reset | a store |
/// | a wake after a later reset of the earliest entry | right away when its wheel slot started (its suite's `reset_later_after_slot_starts` asserts it) | none for a consumer that keeps polling: its poll re-files the entry and moves the runtime entry; one that does not poll sees one wake, at the old deadline |
/// | keys of entries that left | reused: a stale key reaches whatever entry took its slot | generation-checked: `try_remove` gives `None`; `remove`, `reset_at`, `deadline` panic as for any key not in the queue |
/// | `deadline()`, `Expired::deadline()` | rounded to its millisecond grid | exactly the instant given |
/// | `Duration::MAX`, instants far ahead | panic past 2^36 ms | saturate (about 584 years: never) |
/// | entries due in one poll | in wheel-slot order | in deadline order |
///
/// # Precision
///
/// Never early by the clock of the runtime that owns the queue's entry, and never
/// later than tokio-util's queue: an entry comes out once that runtime's timer has
/// reached its deadline's 1 ms tick. Polled inside that runtime, what its clock puts
/// a whole tick in the past is due without a timer registration of its own; newer
/// deadlines wait for the entry to fire, which tokio does at the deadline's tick.
/// Polled from elsewhere (another runtime, a plain executor), only the entry firing
/// counts.
///
/// # Cancel safety
///
/// `StreamExt::next` and [`poll_expired`](DelayQueue::poll_expired) are cancel safe:
/// an entry leaves the queue only inside the poll that returns it.
///
/// # Panics
///
/// [`poll_expired`](DelayQueue::poll_expired) (and the `Stream`) panic like
/// `tokio::time::sleep` on their first call outside a runtime with a time driver.
/// [`remove`](DelayQueue::remove), [`reset_at`](DelayQueue::reset_at),
/// [`reset`](DelayQueue::reset) and [`deadline`](DelayQueue::deadline) panic on a key
/// that is not in the queue (removed or expired), as tokio-util's do. Inserting past
/// `u32::MAX - 1` entries, or reserving more than memory can hold, panics too.
///
/// A key is checked against its slot's generation, not against the queue that made
/// it: a key of *another* queue is not detected and may name an unrelated entry of
/// this one, as with tokio-util's keys (slab indices). Keep keys with their queue.
///
/// # Runtimes
///
/// The queue adopts the runtime of its first poll: that runtime owns its entry and
/// its clock judges "due", also when the queue is polled from elsewhere. If that
/// runtime shuts down, the next poll adopts the runtime it runs in (a poll outside
/// any runtime then panics as the first poll would). The first poll spawns one idle
/// task per runtime, shared by every queue, through which the crate learns that the
/// runtime shut down; it shows in the runtime's task metrics.
///
/// # Examples
///
/// Request timeouts, where most requests finish and a late reply pushes its deadline
/// back:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use futures::StreamExt;
/// use lazy_deadline::{delay_queue, DelayQueue};
/// use std::time::Duration;
///
/// let mut timeouts: DelayQueue<u32> = DelayQueue::new();
/// let keys: Vec<delay_queue::Key> = (0..100)
///     .map(|request| timeouts.insert(request, Duration::from_secs(5)))
///     .collect();
/// for (request, key) in keys.iter().enumerate() {
///     if request % 10 != 0 {
///         timeouts.remove(key); // answered
///     } else {
///         timeouts.reset(key, Duration::from_secs(8)); // later: a store
///     }
/// }
/// let mut timed_out = Vec::new();
/// while let Some(expired) = timeouts.next().await {
///     timed_out.push(expired.into_inner());
/// }
/// assert_eq!(timed_out, [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
/// # }
/// ```
pub struct DelayQueue<T> {
    core: KeyedCore<T, At>,
    /// The runtime entry and its signal, made at the first poll.
    home: Option<Home>,
    /// The task was woken (an earlier deadline, an emptied queue) and has not polled
    /// since: no second wake.
    woken: bool,
    /// The clock reading at creation, then at each poll inside the owning runtime:
    /// what was due by then is due at the next poll (see `poll_slow`).
    looked: u64,
}

/// What exists once the queue has been polled inside a runtime.
struct Home {
    entry: RuntimeEntry,
    signal: Arc<EntrySignal>,
    /// Whether the runtime that owns `entry` has shut down.
    life: RuntimeLife,
}

/// A key of an entry in a [`DelayQueue`]: generation-checked, so a key of an entry
/// that left never reaches an entry inserted later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key(crate::core::keyed::Key);

/// An entry that left a [`DelayQueue`]: its deadline passed, or it was removed.
pub struct Expired<T> {
    key: Key,
    deadline: u64,
    value: T,
}

impl<T> DelayQueue<T> {
    /// An empty queue. Needs no runtime: the runtime entry is made at the first poll.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue with room for `capacity` entries before it reallocates.
    ///
    /// # Panics
    ///
    /// If `capacity` entries cannot be allocated (`Vec`'s capacity overflow).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            core: KeyedCore::with_capacity(capacity),
            home: None,
            woken: false,
            looked: now_nanos(),
        }
    }

    /// Inserts `value`, due at `when`. A `when` in the past is due at the next poll.
    /// Earlier than what the queue's runtime entry is armed at, it wakes the queue's
    /// task so its next poll moves the entry.
    ///
    /// # Panics
    ///
    /// If the queue would hold more than `u32::MAX - 1` entries.
    pub fn insert_at(&mut self, value: T, when: Instant) -> Key {
        self.insert_nanos(value, to_nanos(when))
    }

    /// Inserts `value`, due `timeout` from now (tokio clock). `Duration::MAX`
    /// saturates (about 584 years).
    ///
    /// # Panics
    ///
    /// As [`insert_at`](DelayQueue::insert_at).
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        let when = now_nanos().saturating_add(duration_to_nanos(timeout));
        self.insert_nanos(value, when)
    }

    pub(crate) fn insert_nanos(&mut self, value: T, when: u64) -> Key {
        let key = self.core.insert(value, At::new(when));
        self.moved_earlier(when);
        Key(key)
    }

    /// Polls for the next expired entry: `Ready(Some)` with it (it has left the
    /// queue), `Pending` with the waker stored for the earliest deadline, or
    /// `Ready(None)` when the queue is empty (the stream ends there, and resumes
    /// after an insert: it is not fused).
    ///
    /// # Panics
    ///
    /// On the first poll outside a tokio runtime with a time driver (tokio's panic).
    #[track_caller]
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        // Not `get_or_insert_with`: a closure would lose the caller's location for
        // tokio's panic outside a runtime.
        let home = match &mut self.home {
            Some(home) => home,
            None => self.home.insert(Home::new()),
        };
        let signal = &home.signal;
        home.entry
            .register(|memo| signal.register(cx.waker(), memo));
        self.woken = false;
        if self.core.is_empty() {
            return Poll::Ready(None);
        }
        // Fast path: the entry is armed at exactly the earliest deadline (nothing
        // filed earlier, the earliest not moved later) and has not fired. (When the
        // owning runtime shuts down it fires every entry, so a queue whose home is
        // gone always reaches the slow path.)
        if home.entry.is_armed()
            && self.core.next_check() == Some(home.entry.horizon())
            && !home.signal.entry_has_fired()
            && self.core.earliest_is_settled()
        {
            return Poll::Pending;
        }
        self.poll_slow(cx)
    }

    #[inline(never)]
    #[track_caller]
    fn poll_slow(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        let Some(home) = self.home.as_mut() else {
            return Poll::Pending;
        };
        if home.life.is_gone() {
            // The runtime that owned the entry has shut down: its entry can no longer
            // be polled and its clock judges nothing. Adopt the runtime of this poll,
            // as at the first poll (tokio-util's queue makes its next `Sleep` there
            // too); nothing the old clock witnessed carries over.
            *home = Home::new();
            self.looked = now_nanos();
            let signal = &home.signal;
            home.entry
                .register(|memo| signal.register(cx.waker(), memo));
        }
        // Taken before anything leaves the queue, so an exhausted budget loses
        // nothing; spent only when an entry is yielded.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let mut looked = false;
        for _ in 0..MAX_ROUNDS {
            match self.core.pop_expired(home.entry.witnessed(), WORK_PER_POLL) {
                Popped::Expired {
                    key,
                    deadline,
                    value,
                } => {
                    coop.made_progress();
                    return Poll::Ready(Some(Expired {
                        key: Key(key),
                        deadline,
                        value,
                    }));
                }
                Popped::Busy => break,
                Popped::NotYet(next) => {
                    // What was already witnessed is not enough: look at the clock (once
                    // per poll, and only now, so that draining a mass expiry reads it
                    // once, not per entry).
                    if !looked {
                        looked = true;
                        home.look_at_home_clock(&mut self.looked);
                        if next.is_some_and(|check| check <= home.entry.witnessed()) {
                            continue;
                        }
                    }
                    // Later resets of the earliest entries: file them at their
                    // deadlines, so the entry moves to the real earliest one.
                    let Some(next) = self.core.settle_earliest(WORK_PER_POLL) else {
                        break;
                    };
                    let step = home.entry.step_exact(next);
                    if !home.entry.carry_out(step, &home.signal) {
                        return Poll::Pending;
                    }
                }
            }
        }
        // Work or rounds ran out: yield, and come straight back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The deadline `key`'s entry is due at: exactly the instant given (tokio-util
    /// rounds it to its millisecond grid).
    ///
    /// # Panics
    ///
    /// If `key` is not in the queue.
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        match self.core.timing(key.0) {
            Some(timing) => from_nanos(timing.deadline()),
            None => invalid_key(),
        }
    }

    /// Removes `key`'s entry and returns it. Emptying a queue that was polled wakes
    /// its task, whose next poll returns `Ready(None)`.
    ///
    /// # Panics
    ///
    /// If `key` is not in the queue (it was removed or expired).
    /// [`try_remove`](DelayQueue::try_remove) returns `None` instead. A key of
    /// another queue is not detected: it may name an entry of this one (see the
    /// type's docs).
    #[track_caller]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        match self.try_remove(key) {
            Some(expired) => expired,
            None => invalid_key(),
        }
    }

    /// Removes `key`'s entry and returns it, or `None` if it is not in the queue.
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        let (value, timing) = self.core.remove(key.0)?;
        if self.core.is_empty() {
            self.wake_owner();
        }
        Some(Expired {
            key: *key,
            deadline: timing.deadline(),
            value,
        })
    }

    /// Moves `key`'s deadline to `when`. Later: a store (no heap, wheel or runtime
    /// work, no wake). Earlier: files a record, and wakes the queue's task if it is
    /// earlier than the runtime entry.
    ///
    /// # Panics
    ///
    /// If `key` is not in the queue.
    #[track_caller]
    #[inline]
    pub fn reset_at(&mut self, key: &Key, when: Instant) {
        self.reset_nanos(key, to_nanos(when));
    }

    /// Moves `key`'s deadline to `timeout` from now (tokio clock), as
    /// [`reset_at`](DelayQueue::reset_at); `Duration::MAX` saturates.
    ///
    /// # Panics
    ///
    /// If `key` is not in the queue.
    #[track_caller]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        self.reset_nanos(key, now_nanos().saturating_add(duration_to_nanos(timeout)));
    }

    #[track_caller]
    #[inline]
    pub(crate) fn reset_nanos(&mut self, key: &Key, when: u64) {
        match self.core.reset_at(key.0, when) {
            Some(false) => {}
            Some(true) => self.moved_earlier(when),
            None => invalid_key(),
        }
    }

    /// A deadline at `when` was just filed: wake the task unless the runtime entry
    /// will (see `EntrySignal::filing_needs_wake`: an entry that fired may have woken
    /// a poll that returned `Ready(None)`, which never looks at the entry).
    #[inline]
    fn moved_earlier(&mut self, when: u64) {
        if let Some(home) = &self.home {
            if !self.woken && home.signal.filing_needs_wake(when, home.entry.horizon()) {
                self.woken = true;
                home.signal.wake();
            }
        }
    }

    fn wake_owner(&mut self) {
        if let Some(home) = &self.home {
            if !self.woken {
                self.woken = true;
                home.signal.wake();
            }
        }
    }

    /// The key of the entry with the earliest deadline (also after later resets).
    ///
    /// One heap peek when the earliest entry has not been reset later since the last
    /// poll; otherwise (later resets are stores, so the heap does not know yet) a scan
    /// of every entry, `O(n)`. A poll settles the heap again.
    pub fn peek(&self) -> Option<Key> {
        self.core.peek().map(|(key, _)| Key(key))
    }

    /// Removes every entry; their keys go stale. Wakes a polled task if there were
    /// any, so its next poll returns `Ready(None)`.
    pub fn clear(&mut self) {
        let had_entries = !self.core.is_empty();
        self.core.clear();
        if had_entries {
            self.wake_owner();
        }
    }

    /// How many entries the queue can hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.core.capacity()
    }

    /// How many entries the queue holds.
    pub fn len(&self) -> usize {
        self.core.len()
    }

    /// Whether the queue holds no entry.
    pub fn is_empty(&self) -> bool {
        self.core.is_empty()
    }

    /// Makes room for at least `additional` more entries.
    ///
    /// # Panics
    ///
    /// If the new capacity cannot be allocated (`Vec`'s capacity overflow).
    pub fn reserve(&mut self, additional: usize) {
        self.core.reserve(additional);
    }

    /// Gives back memory held beyond the entries' slots; keys stay valid.
    pub fn shrink_to_fit(&mut self) {
        self.core.shrink_to_fit();
    }

    /// Brings [`capacity`](DelayQueue::capacity) down to [`len`](DelayQueue::len) by
    /// moving entries into vacant slots; every live key stays valid. `O(n)`.
    pub fn compact(&mut self) {
        self.core.compact();
    }

    /// Whether `key`'s entry is in the queue.
    pub fn contains(&self, key: &Key) -> bool {
        self.core.timing(key.0).is_some()
    }

    /// `key`'s value, if it is in the queue.
    pub fn get(&self, key: &Key) -> Option<&T> {
        self.core.get(key.0)
    }

    /// `key`'s value, mutably, if it is in the queue.
    pub fn get_mut(&mut self, key: &Key) -> Option<&mut T> {
        self.core.get_mut(key.0)
    }

    /// Every entry with its key and deadline, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, &T, Instant)> + '_ {
        self.core
            .iter()
            .map(|(key, value, timing)| (Key(key), value, from_nanos(timing.deadline())))
    }

    /// How much driver work the queue has caused so far.
    pub fn stats(&self) -> Stats {
        self.home
            .as_ref()
            .map_or_else(Stats::default, |home| home.entry.stats())
    }

    /// Heap bytes the queue holds for its entries and records (excluding what `T`
    /// itself owns), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.core.heap_bytes()
    }
}

impl Home {
    /// "Due" by the owning runtime's clock, the way tokio's timers and tokio-util's
    /// queue see it: a deadline counts as passed once a whole tick (1 ms) is behind
    /// it (tokio fires at the tick after), or once it is no later than what the
    /// queue's previous look at that clock saw (tokio-util files such an entry as
    /// expired at once). Anything newer waits for the runtime entry to fire. Away
    /// from the owning runtime, only the entry counts.
    fn look_at_home_clock(&mut self, looked: &mut u64) {
        if let Some(now) = self.entry.home_clock() {
            self.entry
                .witness(now.saturating_sub(TICK_NANOS).max((*looked).min(now)));
            *looked = now;
        }
    }

    #[track_caller]
    fn new() -> Self {
        // The entry first: outside a runtime it panics with tokio's message.
        let entry = RuntimeEntry::new();
        Self {
            entry,
            signal: Arc::new(EntrySignal::new()),
            life: RuntimeLife::of(&tokio::runtime::Handle::current()),
        }
    }
}

#[track_caller]
fn invalid_key() -> ! {
    panic!("invalid key: not in this DelayQueue (it was removed or expired)")
}

impl<T> Drop for DelayQueue<T> {
    fn drop(&mut self) {
        if let Some(home) = &self.home {
            home.signal.owner_dropped();
        }
    }
}

// The queue never pins its values (no projection reaches them), so it is `Unpin`
// whatever `T` is, like tokio-util's.
impl<T> Unpin for DelayQueue<T> {}

impl<T> Default for DelayQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Stream for DelayQueue<T> {
    type Item = Expired<T>;

    /// Yields each entry as it expires; `None` when the queue is empty (not fused:
    /// an insert makes it yield again).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx)
    }
}

impl<T: fmt::Debug> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayQueue")
            .field("len", &self.len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<T> Expired<T> {
    /// The value.
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// The value, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The value, by value.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The deadline it was due at: exactly the instant given.
    pub fn deadline(&self) -> Instant {
        from_nanos(self.deadline)
    }

    /// The key it had (now stale).
    pub fn key(&self) -> Key {
        self.key
    }
}

impl<T: fmt::Debug> fmt::Debug for Expired<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expired")
            .field("key", &self.key)
            .field("deadline", &self.deadline())
            .field("value", &self.value)
            .finish()
    }
}
