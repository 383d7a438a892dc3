//! `IdleQueue<T>`: many idle timeouts owned by one task, where a touch is a store.

use crate::core::keyed::{Idle, KeyedCore, Popped, Timing};
use crate::core::remote::{confirm_expiry, RemoteActivity};
use crate::core::signal::EntrySignal;
use crate::core::MAX_ROUNDS;
use crate::entry::RuntimeEntry;
use crate::key_handle::KeyHandle;
use crate::stats::Stats;
use crate::sync::Arc;
use crate::time_base::{duration_to_nanos, from_nanos, now_nanos, to_nanos};
use futures::Stream;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

pub use crate::core::keyed::Key;

/// How many heap records one poll handles (re-files and stale records) before it
/// yields: a poll never does unbounded work, even when a million touched keys were
/// filed at the same check time.
const WORK_PER_POLL: usize = 1024;

/// Many idle timeouts in one task: one entry per key (a session, a connection, a
/// cache line), each expiring once it has seen no activity for its timeout.
///
/// A touch ([`touch`](IdleQueue::touch), [`touch_at`](IdleQueue::touch_at)) records a
/// timestamp in the entry: no heap or wheel operation, no allocation, no runtime
/// call. Ordering work happens only when a key's filed check time comes up: if the
/// key was touched since, it is filed again at its new deadline, at most once per key
/// per timeout period however often it is touched (Linux SCTP's heartbeat fix, per
/// key). tokio-util's `DelayQueue` instead unlinks and relinks the entry in its wheel
/// on every `reset`. The queue holds one runtime timer entry, armed at the earliest
/// check time.
///
/// Expired entries leave the queue and come out of
/// [`poll_expired`](IdleQueue::poll_expired), [`expired`](IdleQueue::expired) or the
/// [`Stream`] impl as [`Expired`], in order of deadline. The stream never ends: an
/// empty queue is `Pending`, and the owner's next poll sees what it inserted.
///
/// `IdleQueue` is `Unpin`, `Send` when `T` is, and owned by one task (`&mut self`):
/// touches, inserts and removes are plain memory operations; a pending poll reads
/// one atomic flag (set when the runtime entry fires). Other tasks touch a key
/// through a [`KeyHandle`](crate::KeyHandle) ([`handle`](IdleQueue::handle)).
///
/// # Precision
///
/// An entry is yielded only once its deadline (`last_activity + timeout`) has passed
/// by the clock of the runtime that owns the queue (the one it was created in; paused
/// clock included): when polled inside that runtime its clock decides, and anywhere
/// else only the queue's runtime entry firing does. So it is never early, and never
/// later than a `tokio::time::Sleep` armed at the final deadline (on whole
/// milliseconds of a paused clock, at the same virtual instant). Entries due in the
/// same poll come out in deadline order.
///
/// Polled away from that runtime (another runtime's thread, a plain executor; judged
/// when the poll's waker changes), a move to a later deadline re-arms the entry at
/// once, as `tokio::time::Sleep::reset` would: that runtime's clock does not wait for
/// this poller (a paused one jumps to its next timer as soon as its own tasks are
/// idle), so a lazy re-check could come too late. At home it stays a store.
/// A handle's touch counts when the key's check time comes up, so it is lazy there
/// too: the entry fires at the old check time and the key is filed again.
///
/// # Cancel safety
///
/// [`expired`](IdleQueue::expired) and `StreamExt::next` are cancel safe: an entry
/// leaves the queue only inside the poll that returns it. In a `select!` loop, an
/// `insert` or `set_timeout` made in another branch is seen on the loop's next
/// iteration, which polls the queue again.
///
/// # Bad input
///
/// | input | outcome |
/// |---|---|
/// | `Duration::MAX` timeout | saturates (~584 years): never due in practice |
/// | `Duration::ZERO` timeout | due on the next poll |
/// | `touch_at` older than the last activity | ignored; returns `true` for a live key |
/// | `touch_at` far in the future | taken as given: the key idles from then |
/// | a stale key (removed, expired, cleared) | `touch`/`set_timeout` `false`, `get`/`remove` `None`; never another entry |
/// | a key from another queue | no panic; it may name an entry of this queue |
/// | 1,000,000 entries, `clear` of them | works; `clear` drops them all and stales their keys |
/// | more than `u32::MAX - 1` entries at once | panics in `insert` |
///
/// # Examples
///
/// A UDP relay's session table: every datagram touches its session, and sessions
/// idle for 30 s are dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::IdleQueue;
/// use std::collections::HashMap;
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let mut sessions = IdleQueue::new(Duration::from_secs(30));
/// let mut by_peer = HashMap::new();
/// for peer in 0..1_000u32 {
///     by_peer.insert(peer, sessions.insert(peer));
/// }
/// // Traffic for the even peers only, one clock reading per batch of datagrams.
/// for _ in 0..20 {
///     tokio::time::advance(Duration::from_secs(1)).await;
///     let now = Instant::now();
///     for peer in (0..1_000u32).step_by(2) {
///         sessions.touch_at(by_peer[&peer], now); // a store
///     }
/// }
/// let start = Instant::now();
/// let mut quiet = 0;
/// while quiet < 500 {
///     let expired = sessions.expired().await;
///     assert_eq!(expired.get_ref() % 2, 1);
///     by_peer.remove(expired.get_ref());
///     quiet += 1;
/// }
/// assert_eq!(start.elapsed(), Duration::from_secs(10)); // 30 s after they went quiet
/// assert_eq!(sessions.len(), 500);
/// # }
/// ```
pub struct IdleQueue<T> {
    core: KeyedCore<T, Idle>,
    /// The shared activity of the keys that have `KeyHandle`s: keys without one pay
    /// nothing, and the owner's touch path never looks here.
    remotes: HashMap<Key, Remote>,
    /// The timeout `insert` gives (nanoseconds, saturated).
    default_timeout: u64,
    /// Armed at the earliest check time, and polled with `signal`'s waker, so a
    /// pending poll reads the flag instead of the entry.
    entry: RuntimeEntry,
    signal: Arc<EntrySignal>,
}

impl<T> IdleQueue<T> {
    /// An empty queue whose [`insert`](IdleQueue::insert) gives entries `timeout`.
    ///
    /// # Panics
    ///
    /// Like `tokio::time::sleep`: outside a tokio runtime, or in one without the time
    /// driver. The panic points at the caller.
    #[track_caller]
    pub fn new(timeout: Duration) -> Self {
        Self::with_capacity(timeout, 0)
    }

    /// An empty queue with room for `capacity` entries before it reallocates.
    ///
    /// # Panics
    ///
    /// As [`new`](IdleQueue::new).
    #[track_caller]
    pub fn with_capacity(timeout: Duration, capacity: usize) -> Self {
        // Created first so that a missing runtime panics here, as tokio's sleep does.
        let entry = RuntimeEntry::new();
        Self {
            core: KeyedCore::with_capacity(capacity),
            default_timeout: duration_to_nanos(timeout),
            entry,
            signal: Arc::new(EntrySignal::new()),
            remotes: HashMap::new(),
        }
    }

    /// Inserts `value` with activity now (tokio clock) and the queue's timeout.
    ///
    /// # Panics
    ///
    /// If the queue would hold more than `u32::MAX - 1` entries.
    pub fn insert(&mut self, value: T) -> Key {
        let timeout = self.default_timeout;
        self.insert_nanos(value, timeout)
    }

    /// Inserts `value` with activity now and its own `timeout`.
    ///
    /// # Panics
    ///
    /// As [`insert`](IdleQueue::insert).
    pub fn insert_with_timeout(&mut self, value: T, timeout: Duration) -> Key {
        self.insert_nanos(value, duration_to_nanos(timeout))
    }

    fn insert_nanos(&mut self, value: T, timeout: u64) -> Key {
        let timing = Idle {
            last_activity: now_nanos(),
            timeout,
        };
        self.core.insert(value, timing)
    }

    /// Records activity on `key` now (one clock read and a store). `false` if the key
    /// is not in the queue.
    pub fn touch(&mut self, key: Key) -> bool {
        self.core.touch_at(key, now_nanos())
    }

    /// Records activity on `key` at `at`: a compare and a store, no clock read, no
    /// allocation, no heap or runtime work. An `at` older than the last activity is
    /// ignored (and still returns `true`); one in the future is taken as given.
    /// `false` if the key is not in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use lazy_deadline::IdleQueue;
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut queue = IdleQueue::new(Duration::from_secs(5));
    /// let key = queue.insert("session");
    /// let now = Instant::now();
    /// assert!(queue.touch_at(key, now + Duration::from_secs(1)));
    /// assert!(queue.touch_at(key, now)); // older: ignored
    /// assert_eq!(queue.deadline(key), Some(now + Duration::from_secs(6)));
    /// # }
    /// ```
    #[inline]
    pub fn touch_at(&mut self, key: Key, at: Instant) -> bool {
        self.core.touch_at(key, to_nanos(at))
    }

    /// Changes `key`'s timeout. A shorter one takes effect at once: the entry is due
    /// at its new deadline, on the next poll if that has passed. A longer one is a
    /// store. `false` if the key is not in the queue.
    pub fn set_timeout(&mut self, key: Key, timeout: Duration) -> bool {
        self.core.set_timeout(key, duration_to_nanos(timeout))
    }

    /// `key`'s timeout (saturated at `u64::MAX` ns), if it is in the queue.
    pub fn timeout(&self, key: Key) -> Option<Duration> {
        self.core
            .timing(key)
            .map(|timing| Duration::from_nanos(timing.timeout))
    }

    /// `key`'s last activity (the owner's or its handles', whichever is later), if
    /// it is in the queue.
    pub fn last_activity(&self, key: Key) -> Option<Instant> {
        self.timing_with_handles(key)
            .map(|timing| from_nanos(timing.last_activity))
    }

    /// `last_activity + timeout` (saturating: a saturated deadline reads as tokio's
    /// far future), if `key` is in the queue.
    pub fn deadline(&self, key: Key) -> Option<Instant> {
        self.timing_with_handles(key)
            .map(|timing| from_nanos(timing.deadline()))
    }

    fn timing_with_handles(&self, key: Key) -> Option<Idle> {
        let mut timing = self.core.timing(key)?;
        if let Some(seen) = self.remotes.get(&key).map(|r| r.0.load()) {
            if seen != crate::core::remote::LEFT {
                timing.last_activity = timing.last_activity.max(seen);
            }
        }
        Some(timing)
    }

    /// A handle that touches `key` from any task or thread (`None` if the key is
    /// not in the queue). The first handle of a key allocates its shared activity
    /// word (kept in a side table, so keys without handles pay nothing); later calls
    /// share it.
    ///
    /// # Examples
    ///
    /// A relay whose per-session tasks see the traffic, while one task owns the
    /// session table:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use lazy_deadline::IdleQueue;
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut sessions = IdleQueue::new(Duration::from_secs(30));
    /// let key = sessions.insert("10.0.0.1:5000");
    /// let handle = sessions.handle(key).unwrap();
    /// let start = Instant::now();
    /// let upstream = tokio::spawn(async move {
    ///     for _ in 0..10 {
    ///         tokio::time::sleep(Duration::from_secs(5)).await;
    ///         assert!(handle.touch()); // a reply went out: one atomic RMW
    ///     }
    ///     handle
    /// });
    /// let expired = sessions.expired().await; // 30 s after the last reply
    /// assert_eq!(start.elapsed(), Duration::from_secs(80));
    /// assert_eq!(expired.into_inner(), "10.0.0.1:5000");
    /// assert!(!upstream.await.unwrap().touch(), "the session has left");
    /// # }
    /// ```
    pub fn handle(&mut self, key: Key) -> Option<KeyHandle> {
        self.core.get(key)?;
        let remote = self
            .remotes
            .entry(key)
            .or_insert_with(|| Remote(RemoteActivity::new()));
        Some(KeyHandle::new(remote.0.clone()))
    }

    /// Whether `key` is in the queue.
    pub fn contains(&self, key: Key) -> bool {
        self.core.get(key).is_some()
    }

    /// `key`'s value, if it is in the queue.
    pub fn get(&self, key: Key) -> Option<&T> {
        self.core.get(key)
    }

    /// `key`'s value, mutably, if it is in the queue.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        self.core.get_mut(key)
    }

    /// Removes `key`'s entry and returns its value; it is never yielded.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let (value, _) = self.core.remove(key)?;
        self.forget_handles(key);
        Some(value)
    }

    /// How many entries the queue holds.
    pub fn len(&self) -> usize {
        self.core.len()
    }

    /// Whether the queue holds no entry.
    pub fn is_empty(&self) -> bool {
        self.core.is_empty()
    }

    /// Removes every entry; their keys go stale. The runtime entry stays armed and
    /// finds nothing when it fires.
    pub fn clear(&mut self) {
        self.core.clear();
        // Dropping each `Remote` tells its handles.
        self.remotes.clear();
    }

    /// `key`'s entry left: drop its `Remote` (which tells its handles), if any.
    #[inline]
    fn forget_handles(&mut self, key: Key) {
        if !self.remotes.is_empty() {
            self.remotes.remove(&key);
        }
    }

    /// How much driver work the queue has caused so far.
    pub fn stats(&self) -> Stats {
        self.entry.stats()
    }

    /// How many times an entry was found touched when its check time came up and was
    /// filed again: at most about one per key per timeout period under continuous
    /// touching, however many touches.
    pub fn refiles(&self) -> u64 {
        self.core.refiles()
    }

    /// Heap bytes the queue holds for its entries, check times and the shared words
    /// of keys with handles (excluding what `T` itself owns), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.core.heap_bytes()
            + crate::memory::hash_table_bytes(
                self.remotes.capacity(),
                std::mem::size_of::<(Key, Remote)>(),
            )
            + self.remotes.len() * crate::memory::arc_bytes::<RemoteActivity>()
    }

    /// Polls for the next expired entry: `Ready` with it (it has left the queue), or
    /// `Pending` with the waker stored for the earliest check time. Never
    /// `Ready(None)`-like: an empty queue is `Pending`.
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Expired<T>> {
        // Before reading the flag: see `core::signal`.
        let signal = &self.signal;
        self.entry
            .register(|memo| signal.register(cx.waker(), memo));
        // Fast path: nothing filed earlier than the armed entry, and the entry has
        // not fired (its waker raises the flag), so there is nothing to do.
        let next = self.core.next_check();
        if next.is_none_or(|check| check >= self.entry.horizon())
            && (!self.entry.is_armed() || !self.signal.entry_has_fired())
        {
            return Poll::Pending;
        }
        // Taken before anything leaves the queue, so an exhausted budget loses
        // nothing; spent only when an entry is yielded.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let mut looked = false;
        for _ in 0..MAX_ROUNDS {
            let witnessed = self.entry.witnessed();
            let remotes = &self.remotes;
            let popped = self.core.pop_expired_confirmed(
                witnessed,
                WORK_PER_POLL,
                |key, _, timing, check| {
                    // Handles' touches count when the key's check time comes up.
                    remotes.is_empty()
                        || confirm_expiry(remotes.get(&key).map(|r| &*r.0), timing, check)
                },
            );
            match popped {
                Popped::Expired {
                    key,
                    deadline,
                    value,
                } => {
                    coop.made_progress();
                    // Its handles saw it leave in `confirm_expiry`.
                    self.forget_handles(key);
                    return Poll::Ready(Expired {
                        key,
                        deadline,
                        value,
                    });
                }
                Popped::Busy => break,
                Popped::NotYet(mut next) => {
                    // Read the home clock only when what is already witnessed is not
                    // enough: once per poll, so a mass expiry drains without a clock
                    // read per entry.
                    if !looked {
                        looked = true;
                        self.entry.witness_home_clock();
                        if next.is_some_and(|check| check <= self.entry.witnessed()) {
                            continue;
                        }
                    }
                    if self.entry.is_away() {
                        // Away from the entry's runtime, a touch must move the entry
                        // now (see `LazyEntry`): settle the earliest records first.
                        match self.core.settle_earliest(WORK_PER_POLL) {
                            Some(settled) => next = settled,
                            None => break,
                        }
                    }
                    let step = self.entry.step(next);
                    if !self.entry.carry_out(step, &self.signal) {
                        return Poll::Pending;
                    }
                }
            }
        }
        // Work or rounds ran out: yield, and come straight back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Waits for the next expired entry. Cancel safe.
    pub fn expired(&mut self) -> impl Future<Output = Expired<T>> + '_ {
        std::future::poll_fn(move |cx| self.poll_expired(cx))
    }
}

/// The queue's hold on a key's shared activity. However the entry leaves (expired,
/// removed, cleared, the queue dropped), dropping this tells the key's handles.
struct Remote(Arc<RemoteActivity>);

impl Drop for Remote {
    fn drop(&mut self) {
        self.0.leave();
    }
}

// The queue never pins its values (no projection reaches them), so it is `Unpin`
// whatever `T` is, like `Vec<T>` behind a `Box`.
impl<T> Unpin for IdleQueue<T> {}

impl<T> Stream for IdleQueue<T> {
    type Item = Expired<T>;

    /// Never ends: yields each entry as it expires, `Pending` while none is due.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx).map(Some)
    }
}

impl<T> fmt::Debug for IdleQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdleQueue")
            .field("len", &self.len())
            .field("timeout", &Duration::from_nanos(self.default_timeout))
            .field("stats", &self.stats())
            .field("refiles", &self.refiles())
            .finish_non_exhaustive()
    }
}

/// An entry that left an [`IdleQueue`] because it was idle for its timeout.
pub struct Expired<T> {
    key: Key,
    deadline: u64,
    value: T,
}

impl<T> Expired<T> {
    /// The key it had (now stale).
    pub fn key(&self) -> Key {
        self.key
    }

    /// The deadline it expired at: its last activity plus its timeout (in the past
    /// already when a shortened timeout made it due).
    pub fn deadline(&self) -> Instant {
        from_nanos(self.deadline)
    }

    /// Its value.
    pub fn get_ref(&self) -> &T {
        &self.value
    }

    /// Its value, by value.
    pub fn into_inner(self) -> T {
        self.value
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
