//! `IdleTimeout` + `ActivityHandle`: the SCTP heartbeat technique as a type.

use crate::core::activity::ActivityShared;
use crate::core::{Step, MAX_ROUNDS, SATURATED};
use crate::entry::RuntimeEntry;
use crate::stats::Stats;
use crate::sync::Arc;
use crate::time_base::{duration_to_nanos, from_nanos, now_nanos, to_nanos};
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// A timer that resolves once no activity has been recorded for `timeout`.
///
/// Recording activity ([`touch`](IdleTimeout::touch), [`touch_at`](IdleTimeout::touch_at),
/// or the same on an [`ActivityHandle`] from any task or thread) only stores a
/// timestamp. The one runtime timer entry stays armed; when it fires, the timer
/// compares the time since the last activity with the timeout and either resolves or
/// re-arms for the remainder. This is the fix Linux SCTP made to its heartbeat timer
/// ("avoid refreshing heartbeat timer too often"), which had spent a third of a
/// profile re-arming on every DATA chunk.
///
/// The deadline is `last_activity + timeout` (saturating). After it resolves the
/// timer stays ready until new activity moves the deadline past the current time;
/// then it re-arms, so one `IdleTimeout` serves a whole connection.
///
/// `IdleTimeout` is `Send` and `Unpin` but not `Sync`: the owner's
/// [`touch_at`](IdleTimeout::touch_at) is a plain compare-and-store into a field of
/// its own, which is only race-free with one thread at a time. Share activity across
/// tasks with [`handle`](IdleTimeout::handle).
///
/// # Precision
///
/// "Due" is judged by the clock of the runtime that owns the timer's entry (the one
/// it was created in), paused clock included, also when the timer is polled from
/// another runtime or a plain executor: it resolves only once that entry has fired at
/// or after the deadline. So it is never early, and never later than a
/// `tokio::time::Sleep` armed at the final deadline (on whole milliseconds of a paused
/// clock, at the same virtual instant): a deadline that moved later is re-armed when
/// the entry fires, before the later deadline's tick. Like tokio, a deadline off a
/// whole millisecond is reached at the next 1 ms tick.
///
/// Polled away from that runtime (another runtime's thread, a plain executor; judged
/// when the poll's waker changes), a later deadline (an owner touch, a longer timeout) re-arms the entry at
/// once, as `tokio::time::Sleep::reset` would: that runtime's clock does not wait for
/// this poller (a paused one jumps to its next timer as soon as its own tasks are
/// idle), so a lazy re-check could come too late. At home it stays a store.
///
/// # Cancel safety
///
/// Awaiting `&mut idle` in `select!` is cancel safe: the state lives in the timer,
/// not in the future, so a dropped await loses nothing.
///
/// # Examples
///
/// Close a connection after 30 s without traffic in either direction; the writer task
/// records activity through a handle:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::IdleTimeout;
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let mut idle = IdleTimeout::new(Duration::from_secs(30));
/// let writer = idle.handle();
/// tokio::spawn(async move {
///     for _ in 0..10 {
///         tokio::time::sleep(Duration::from_secs(10)).await;
///         writer.touch(); // "sent a segment"
///     }
/// });
/// let start = Instant::now();
/// (&mut idle).await;
/// // Last write at 100 s, then 30 s of silence.
/// assert_eq!(start.elapsed(), Duration::from_secs(130));
/// # }
/// ```
pub struct IdleTimeout {
    shared: Arc<ActivityShared>,
    /// The owner's own last activity: only this thread writes it, so a compare and a
    /// store keep it monotonic without an atomic.
    owner_activity: Cell<Instant>,
    /// The runtime entry, armed lazily by `poll`.
    entry: RuntimeEntry,
}

impl IdleTimeout {
    /// A timer that resolves after `timeout` without activity; activity is recorded
    /// now (by the tokio clock). `Duration::MAX` saturates (about 584 years: never in
    /// practice); `Duration::ZERO` resolves on the first poll unless activity is
    /// recorded in the future.
    ///
    /// # Panics
    ///
    /// Like `tokio::time::sleep`: outside a tokio runtime, or in one without the time
    /// driver. The panic points at the caller.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use lazy_deadline::IdleTimeout;
    /// use std::time::Duration;
    ///
    /// let idle = IdleTimeout::new(Duration::from_secs(5));
    /// assert_eq!(idle.deadline(), idle.last_activity() + Duration::from_secs(5));
    /// # }
    /// ```
    #[track_caller]
    pub fn new(timeout: Duration) -> Self {
        // Created first so that a missing runtime panics here, as tokio's sleep does.
        let entry = RuntimeEntry::new();
        let now = Instant::now();
        Self {
            shared: ActivityShared::new(to_nanos(now), duration_to_nanos(timeout)),
            owner_activity: Cell::new(now),
            entry,
        }
    }

    /// Records activity now, by the tokio clock (honours `tokio::time::pause`).
    ///
    /// One clock read and a field store. When you already have `now` for a batch of
    /// packets, [`touch_at`](IdleTimeout::touch_at) saves the clock read.
    pub fn touch(&self) {
        self.touch_at(Instant::now());
    }

    /// Records activity at `at`. An `at` older than the last activity is ignored, so
    /// the last activity never moves backwards; one in the future is taken as given.
    ///
    /// A compare and a field store: no clock read, no atomic, no driver work.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use lazy_deadline::IdleTimeout;
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let idle = IdleTimeout::new(Duration::from_secs(1));
    /// let now = Instant::now();
    /// for _packet in 0..64 {
    ///     idle.touch_at(now); // one clock read for the whole batch
    /// }
    /// idle.touch_at(now - Duration::from_secs(5)); // older: ignored
    /// assert_eq!(idle.last_activity(), now);
    /// # }
    /// ```
    #[inline]
    pub fn touch_at(&self, at: Instant) {
        if at > self.owner_activity.get() {
            self.owner_activity.set(at);
        }
    }

    /// A handle that records activity (and changes the timeout) from any task or
    /// thread. Handles are cheap to clone and outlive the timer harmlessly.
    pub fn handle(&self) -> ActivityHandle {
        ActivityHandle {
            shared: self.shared.clone(),
        }
    }

    /// The timeout, saturated at `u64::MAX` nanoseconds (about 584 years).
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.shared.timeout())
    }

    /// Changes the timeout. A shorter one takes effect at once: the timer re-arms
    /// earlier, or resolves if the new deadline has already passed. A longer one is a
    /// store, picked up when the armed entry fires.
    pub fn set_timeout(&self, timeout: Duration) {
        self.shared.set_timeout(duration_to_nanos(timeout));
    }

    /// The latest activity recorded by the owner or any handle.
    pub fn last_activity(&self) -> Instant {
        let owner = self.owner_activity.get();
        let handles = self.shared.handle_activity();
        if to_nanos(owner) >= handles {
            owner
        } else {
            from_nanos(handles)
        }
    }

    /// `last_activity() + timeout()`, saturating (see [`timeout`](IdleTimeout::timeout)).
    pub fn deadline(&self) -> Instant {
        from_nanos(self.deadline_nanos())
    }

    /// Whether the deadline has passed: the runtime entry has fired at or after it,
    /// or the current tokio clock is past it. (The future itself resolves only on the
    /// entry's word: see the type's `# Precision`.) A saturated deadline never has.
    pub fn is_elapsed(&self) -> bool {
        let deadline = self.deadline_nanos();
        deadline <= self.entry.witnessed() || (deadline < SATURATED && deadline <= now_nanos())
    }

    /// How much driver work this timer has caused so far.
    pub fn stats(&self) -> Stats {
        self.entry.stats()
    }

    fn deadline_nanos(&self) -> u64 {
        self.shared.deadline(to_nanos(self.owner_activity.get()))
    }
}

impl Future for IdleTimeout {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let owner = to_nanos(this.owner_activity.get());
        // Each round either resolves, waits on the entry, or re-arms after the entry
        // fired; handles touching meanwhile can only add rounds, so bound them.
        for _ in 0..MAX_ROUNDS {
            let (memo, lazy, away) = this.entry.parts();
            match this.shared.poll_step(cx.waker(), memo, owner, lazy, away) {
                Step::Fire => {
                    // Ready without polling the entry: spend the budget as tokio does.
                    ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
                    return Poll::Ready(());
                }
                Step::Arm(at) => this.entry.arm(at),
                Step::Wait => {
                    // The pending fast path: the entry raises the flag when it fires,
                    // so until then there is nothing to poll.
                    if !this.entry.is_armed() || !this.shared.entry_has_fired() {
                        return Poll::Pending;
                    }
                }
            }
            // Polled with the shared state's waker: its fire raises the flag and
            // wakes whichever task owns the timer by then. The flag is lowered right
            // before the poll, with no early return in between.
            this.shared.clear_entry_fired();
            if this.entry.poll(&this.shared).is_pending() {
                return Poll::Pending;
            }
        }
        // Out of rounds: yield, and come straight back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Drop for IdleTimeout {
    fn drop(&mut self) {
        self.shared.owner_dropped();
    }
}

impl fmt::Debug for IdleTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdleTimeout")
            .field("timeout", &self.timeout())
            .field("last_activity", &self.last_activity())
            .field("deadline", &self.deadline())
            .field("stats", &self.stats())
            .finish()
    }
}

/// Records activity for an [`IdleTimeout`] from any task or thread.
///
/// `Send + Sync + 'static` and cheap to clone (one `Arc`). A touch is one relaxed
/// load and, when the time is newer, one `fetch_max`: no lock, no allocation, no
/// wake. Concurrent touches never move the last activity backwards. Using a handle
/// after its timer is dropped is harmless and does nothing observable.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::IdleTimeout;
/// use std::time::Duration;
///
/// let idle = IdleTimeout::new(Duration::from_secs(10));
/// let handle = idle.handle();
/// tokio::time::advance(Duration::from_secs(3)).await;
/// std::thread::spawn(move || handle.touch()).join().unwrap();
/// assert_eq!(idle.deadline(), idle.last_activity() + Duration::from_secs(10));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ActivityHandle {
    shared: Arc<ActivityShared>,
}

impl ActivityHandle {
    /// Records activity now, by the tokio clock of the *caller's* runtime (paused
    /// clock included; outside a runtime, the system's monotonic clock). From a plain
    /// thread, a timer on a paused runtime thus gets real-time activity: pass the
    /// owner's clock with [`touch_at`](ActivityHandle::touch_at) where that matters.
    pub fn touch(&self) {
        self.touch_at(Instant::now());
    }

    /// Records activity at `at`; older than the last activity is ignored.
    pub fn touch_at(&self, at: Instant) {
        self.shared.touch_at(to_nanos(at));
    }

    /// Changes the timeout; a shorter one wakes the timer so it takes effect at once.
    pub fn set_timeout(&self, timeout: Duration) {
        self.shared.set_timeout(duration_to_nanos(timeout));
    }
}
