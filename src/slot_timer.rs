//! `SlotTimer<K>` + `SlotHandle<K>`: several kinds of deadline, one runtime entry.

use crate::core::slots::{SlotShared, ENTRY_FIRED};
use crate::core::{MAX_ROUNDS, NEVER, SATURATED};
use crate::entry::RuntimeEntry;
use crate::kind::{KindSet, TimerKind};
use crate::stats::Stats;
use crate::sync::Arc;
use crate::time_base::{duration_to_nanos, from_nanos, now_nanos, to_nanos};
use futures::Stream;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Several kinds of deadline (RTO, TLP, PROBE0, delayed ACK, keepalive, ...) sharing
/// one runtime timer entry, each with its own deadline that never fights the others.
///
/// Linux TCP keeps RTO, TLP and PROBE0 on one timer and moves it back and forth on
/// every send (arm the loss probe, earlier) and every ACK (re-arm the retransmission
/// timer, later); in a 256-flow profile that re-arming was half of `tcp_write_xmit`.
/// `SlotTimer` keeps every kind's deadline at once and the one entry armed at the
/// earliest, so moving any kind later is a store, and the entry is re-armed at most
/// once per expiry of the earliest deadline.
///
/// Deadlines are set by the owner ([`set`](SlotTimer::set), `&mut self`: a store and
/// a compare) or from any task or thread through a [`SlotHandle`]. Expired kinds come
/// out of [`poll_expired`](SlotTimer::poll_expired), [`expired`](SlotTimer::expired)
/// or the [`Stream`] impl as a [`KindSet`]: every kind whose deadline has passed, each
/// reported once and disarmed. A kind set again is reported again.
///
/// # Precision
///
/// A kind is reported only once the runtime entry, on the clock of the runtime that
/// owns it (where the timer was created; paused clock included), has fired at or after
/// its deadline, also when the timer is polled from another runtime or a plain
/// executor. So it is never early, and never later than a `tokio::time::Sleep` armed
/// at that deadline (on whole milliseconds of a paused clock, at the same virtual
/// instant). Kinds the runtime finds due in the same poll come out in one
/// [`KindSet`]: polled inside that runtime, every kind due by its clock at that poll.
/// Like tokio, a deadline off a whole millisecond is reached at the next 1 ms tick.
///
/// Polled away from that runtime (another runtime's thread, a plain executor; judged
/// when the poll's waker changes), an owner `set` to a later deadline re-arms the entry at
/// once, as `tokio::time::Sleep::reset` would: that runtime's clock does not wait for
/// this poller (a paused one jumps to its next timer as soon as its own tasks are
/// idle), so a lazy re-check could come too late. At home it stays a store.
///
/// # Cancel safety
///
/// [`expired`](SlotTimer::expired) and `StreamExt::next` are cancel safe: expired
/// kinds are disarmed only inside the poll that returns them.
///
/// # Examples
///
/// The timers of a TCP-like sender: every segment arms the tail-loss probe and pushes
/// the retransmission timer back, both as stores.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::{timer_kinds, SlotTimer};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// timer_kinds! {
///     /// The timers of one connection.
///     pub enum TcpTimer { Rto, Tlp, Probe0, DelAck, Keepalive }
/// }
///
/// let mut timers = SlotTimer::<TcpTimer>::new();
/// timers.set_after(TcpTimer::Keepalive, Duration::from_secs(7200));
/// let start = Instant::now();
/// for _segment in 0..500 {
///     let now = Instant::now();
///     timers.set(TcpTimer::Tlp, now + Duration::from_millis(20));
///     timers.set(TcpTimer::Rto, now + Duration::from_millis(200));
///     tokio::time::advance(Duration::from_micros(100)).await;
/// }
/// let last_send = start + Duration::from_millis(50);
/// // No ACK came back: the loss probe fires first, 20 ms after the last segment.
/// let expired = timers.expired().await;
/// assert_eq!(expired.iter().collect::<Vec<_>>(), [TcpTimer::Tlp]);
/// assert!(Instant::now() >= last_send + Duration::from_millis(20));
/// // 1,000 sets cost one arming, plus one re-arm per 20 ms of traffic.
/// assert!(timers.stats().registrations <= 5);
/// # }
/// ```
pub struct SlotTimer<K: TimerKind> {
    shared: Arc<SlotShared>,
    /// The one runtime entry, armed at the earliest deadline after a collection.
    entry: RuntimeEntry,
    _kind: PhantomData<fn() -> K>,
}

impl<K: TimerKind> SlotTimer<K> {
    /// A timer with every kind unset.
    ///
    /// # Panics
    ///
    /// Like `tokio::time::sleep`: outside a tokio runtime or in one without the time
    /// driver (the panic points at the caller). Also if `K::COUNT` is not in `1..=64`,
    /// which only a hand-written [`TimerKind`] can cause.
    #[track_caller]
    pub fn new() -> Self {
        assert!(
            (1..=64).contains(&K::COUNT),
            "TimerKind::COUNT must be in 1..=64, {:?} has {}",
            std::any::type_name::<K>(),
            K::COUNT
        );
        Self {
            entry: RuntimeEntry::new(),
            shared: SlotShared::new(K::COUNT),
            _kind: PhantomData,
        }
    }

    /// Sets `kind` to expire at `deadline`, replacing its previous deadline. A past
    /// deadline is reported on the next poll.
    ///
    /// A store and a compare: if the deadline is earlier than the armed entry, the
    /// next poll re-arms it (which `select!` loops do right after the branch).
    #[inline]
    pub fn set(&mut self, kind: K, deadline: Instant) {
        self.set_nanos(kind, to_nanos(deadline));
    }

    /// Sets `kind` to expire `after` from now (tokio clock). `Duration::MAX`
    /// saturates (about 584 years).
    pub fn set_after(&mut self, kind: K, after: Duration) {
        self.set_nanos(kind, now_nanos().saturating_add(duration_to_nanos(after)));
    }

    /// Starts a batch of sets that share one clock reading, `now`: one packet, one
    /// ACK, one read from the socket. [`SlotBatch::set_after`] is then integer
    /// arithmetic and a store, with no clock read and no `Instant` conversion.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use lazy_deadline::{timer_kinds, SlotTimer};
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// timer_kinds! { enum Tcp { Rto, Tlp } }
    ///
    /// let mut timers = SlotTimer::<Tcp>::new();
    /// let now = Instant::now(); // once per packet (or per batch of packets)
    /// let mut batch = timers.batch_at(now);
    /// batch.set_after(Tcp::Tlp, Duration::from_millis(20));
    /// batch.set_after(Tcp::Rto, Duration::from_millis(200));
    /// assert_eq!(timers.deadline(Tcp::Rto), Some(now + Duration::from_millis(200)));
    /// # }
    /// ```
    pub fn batch_at(&mut self, now: Instant) -> SlotBatch<'_, K> {
        SlotBatch {
            now: to_nanos(now),
            timer: self,
        }
    }

    /// Disarms `kind`; it will not be reported until set again. A store.
    pub fn cancel(&mut self, kind: K) {
        self.shared.store_owner(slot(kind), NEVER);
    }

    /// The deadline of `kind`, or `None` if it is unset (cancelled or reported).
    pub fn deadline(&self, kind: K) -> Option<Instant> {
        let deadline = self.shared.deadline(slot(kind));
        (deadline != NEVER).then(|| from_nanos(deadline))
    }

    /// The earliest set kind and its deadline (the lowest index on a tie).
    pub fn next_deadline(&self) -> Option<(K, Instant)> {
        (0..K::COUNT)
            .map(|index| (index, self.shared.deadline(index)))
            .filter(|&(_, deadline)| deadline != NEVER)
            .min_by_key(|&(_, deadline)| deadline)
            .map(|(index, deadline)| (K::from_index(index), from_nanos(deadline)))
    }

    /// A handle that sets and cancels kinds from any task or thread.
    pub fn handle(&self) -> SlotHandle<K> {
        SlotHandle {
            shared: self.shared.clone(),
            _kind: PhantomData,
        }
    }

    /// How much driver work this timer has caused so far.
    pub fn stats(&self) -> Stats {
        self.entry.stats()
    }

    /// Bytes one `SlotTimer<K>` occupies: the struct, its boxed runtime entry and its
    /// shared state (with one 8-byte deadline per kind), without allocator overhead.
    pub fn memory_footprint() -> usize {
        std::mem::size_of::<Self>() + RuntimeEntry::boxed_size() + SlotShared::heap_size(K::COUNT)
    }

    /// Polls for expired kinds: `Ready` with the non-empty set of every kind whose
    /// deadline has passed (each then disarmed), or `Pending` with the waker stored
    /// for the earliest remaining deadline and for handles that set an earlier one.
    #[inline]
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<KindSet<K>> {
        // Before reading `armed` or any slot: see the core's protocol.
        let shared = &self.shared;
        self.entry
            .register(|memo| shared.register(cx.waker(), memo));
        // Fast path (inlined into the caller, as a `select!` loop polls it on every
        // turn): nothing moved earlier than what is armed (or, with nothing armed,
        // nothing was set at all), and the entry has not fired. Owner sets and handle
        // sets that move earlier lower `armed`, and so does the entry's waker when it
        // fires, so the entry itself need not be polled here.
        if self.shared.armed() >= self.entry.horizon() {
            return Poll::Pending;
        }
        self.collect_expired(cx)
    }

    /// The rest of [`poll_expired`](Self::poll_expired): the entry fired or a
    /// deadline moved earlier, so collect, re-arm and report.
    #[inline(never)]
    fn collect_expired(&mut self, cx: &mut Context<'_>) -> Poll<KindSet<K>> {
        // A report may come without the entry firing in this poll (a kind set at or
        // before a time already witnessed): spend the budget as tokio's `Sleep` does.
        // Taken before anything is disarmed, so an exhausted budget loses nothing.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        // Polled inside the owning runtime, everything due by its clock comes out in
        // this one report; elsewhere, what the entry has witnessed.
        self.entry.witness_home_clock();
        let mut expired = 0u64;
        let mut rounds = 0;
        loop {
            let collected = self.shared.collect(self.entry.witnessed());
            expired |= collected.expired;
            let target = (collected.next != NEVER).then_some(collected.next);
            // Fire: a handle set a witnessed deadline after the scan; collect again.
            let step = self.entry.step(target);
            let again = self.entry.carry_out(step, &self.shared);
            rounds += 1;
            if !again && collected.complete {
                break;
            }
            if rounds == MAX_ROUNDS {
                // The entry keeps firing at once, or handles keep moving deadlines
                // earlier under the scan: report what we have, leave `armed` low so
                // the next poll collects again, and come straight back.
                self.shared.lower_armed(ENTRY_FIRED);
                cx.waker().wake_by_ref();
                break;
            }
            // The entry fired (or a kind is already witnessed): everything the
            // runtime now says is due goes into this same report.
        }
        if expired == 0 {
            return Poll::Pending;
        }
        coop.made_progress();
        Poll::Ready(KindSet::from_bits(expired))
    }

    /// Waits for the next expired kinds. Cancel safe: dropping the future before it
    /// completes loses nothing.
    pub fn expired(&mut self) -> impl Future<Output = KindSet<K>> + '_ {
        std::future::poll_fn(move |cx| self.poll_expired(cx))
    }

    #[inline]
    fn set_nanos(&mut self, kind: K, deadline: u64) {
        // NEVER means "unset"; a real deadline saturates just below it.
        let deadline = deadline.min(SATURATED);
        self.shared.store_owner(slot(kind), deadline);
        if deadline < self.entry.horizon() {
            // Earlier than the entry (or any set, polled away from the entry's
            // runtime): make the next poll take the slow path.
            self.shared.lower_armed(deadline);
        }
    }
}

/// Sets on a [`SlotTimer`] relative to one clock reading; see
/// [`SlotTimer::batch_at`].
#[derive(Debug)]
pub struct SlotBatch<'a, K: TimerKind> {
    timer: &'a mut SlotTimer<K>,
    now: u64,
}

impl<K: TimerKind> SlotBatch<'_, K> {
    /// Sets `kind` to expire `after` the batch's `now`; saturates like
    /// [`SlotTimer::set_after`].
    #[inline]
    pub fn set_after(&mut self, kind: K, after: Duration) {
        let deadline = self.now.saturating_add(duration_to_nanos(after));
        self.timer.set_nanos(kind, deadline);
    }

    /// Sets `kind` to expire at `deadline`, as [`SlotTimer::set`].
    pub fn set(&mut self, kind: K, deadline: Instant) {
        self.timer.set(kind, deadline);
    }

    /// Disarms `kind`, as [`SlotTimer::cancel`].
    pub fn cancel(&mut self, kind: K) {
        self.timer.cancel(kind);
    }
}

/// The slot of `kind`, checked against the contract of [`TimerKind`].
fn slot<K: TimerKind>(kind: K) -> usize {
    let index = kind.index();
    assert!(
        index < K::COUNT,
        "TimerKind::index of {kind:?} is {index}, not below COUNT = {}",
        K::COUNT
    );
    index
}

impl<K: TimerKind> Default for SlotTimer<K> {
    #[track_caller]
    fn default() -> Self {
        Self::new()
    }
}

impl<K: TimerKind> Stream for SlotTimer<K> {
    type Item = KindSet<K>;

    /// Never ends: yields the expired kinds each time some expire.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<KindSet<K>>> {
        self.get_mut().poll_expired(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

impl<K: TimerKind> Drop for SlotTimer<K> {
    fn drop(&mut self) {
        self.shared.owner_dropped();
    }
}

impl<K: TimerKind> fmt::Debug for SlotTimer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deadlines: Vec<(K, Option<Instant>)> = (0..K::COUNT)
            .map(|index| {
                let kind = K::from_index(index);
                (kind, self.deadline(kind))
            })
            .collect();
        f.debug_struct("SlotTimer")
            .field("deadlines", &deadlines)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Sets and cancels the kinds of a [`SlotTimer`] from any task or thread.
///
/// `Send + Sync`, cheap to clone. A `set` is one `swap` on the kind's deadline; one
/// earlier than the value it replaced adds a fence and a load, and, earlier than what
/// the timer has armed, wakes the timer's task so it re-arms at once. A handle
/// outliving its timer is harmless.
///
/// A re-set that is not earlier than the value it replaced relies on the handle that
/// wrote that value to have woken the timer if needed. That is always correct (the
/// loom model `skipped_check_on_later_reset_is_safe` checks it), but not always
/// prompt: if that other handle's thread is preempted between its `swap` and its
/// wake, an earlier deadline set meanwhile by a second handle waits for the first
/// handle's wake.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::{timer_kinds, SlotTimer};
/// use std::time::Duration;
///
/// timer_kinds! { enum Kind { Retransmit, Ack } }
///
/// let mut timer = SlotTimer::<Kind>::new();
/// timer.set_after(Kind::Retransmit, Duration::from_millis(200));
/// let receiver = timer.handle();
/// tokio::spawn(async move {
///     // The receive path wants an ACK out within 1 ms.
///     receiver.set_after(Kind::Ack, Duration::from_millis(1));
/// });
/// assert!(timer.expired().await.contains(Kind::Ack));
/// # }
/// ```
#[derive(Clone)]
pub struct SlotHandle<K> {
    shared: Arc<SlotShared>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: TimerKind> SlotHandle<K> {
    /// Sets `kind` to expire at `deadline`; wakes the timer if that is earlier than
    /// what it has armed.
    pub fn set(&self, kind: K, deadline: Instant) {
        self.set_nanos(kind, to_nanos(deadline));
    }

    /// Sets `kind` to expire `after` from now by the *caller's* tokio clock (the
    /// system clock outside a runtime; for a paused owner see
    /// [`ActivityHandle::touch`](crate::ActivityHandle::touch)); saturates.
    pub fn set_after(&self, kind: K, after: Duration) {
        self.set_nanos(kind, now_nanos().saturating_add(duration_to_nanos(after)));
    }

    /// Disarms `kind`. A store; never wakes the timer.
    pub fn cancel(&self, kind: K) {
        self.shared.cancel_remote(slot(kind));
    }

    fn set_nanos(&self, kind: K, deadline: u64) {
        self.shared.set_remote(slot(kind), deadline.min(SATURATED));
    }
}

impl<K: TimerKind> fmt::Debug for SlotHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotHandle")
            .field("kind", &std::any::type_name::<K>())
            .finish()
    }
}
