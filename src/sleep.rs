//! `Sleep`: a drop-in for `tokio::time::Sleep` whose later resets are field stores.

use crate::core::NEVER;
use crate::deadline_set::{Bound, FileResult, Filing};
use crate::stats::Stats;
use crate::time_base::{to_nanos, FAR_FUTURE};
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

/// Waits until `duration` has elapsed; the lazy counterpart of [`tokio::time::sleep`].
///
/// Equivalent to `sleep_until(Instant::now() + duration)`, with `duration` capped at
/// about 30 years exactly as tokio caps it, so `Duration::MAX` means "practically
/// never" rather than an overflow.
///
/// # Panics
///
/// Like tokio's `sleep`: panics outside a tokio runtime, or in a runtime built
/// without the time driver (`enable_time`). The panic points at the caller. A poll
/// of the `Sleep` that finds it pending after that runtime shut down (from outside
/// it) panics with tokio's message too.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// lazy_deadline::sleep(Duration::from_millis(100)).await;
/// # }
/// ```
#[track_caller]
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration.min(FAR_FUTURE))
}

/// Waits until `deadline` is reached; the lazy counterpart of
/// [`tokio::time::sleep_until`].
///
/// A deadline in the past completes on the first poll.
///
/// # Panics
///
/// Like tokio's `sleep_until`: panics outside a tokio runtime, or in a runtime built
/// without the time driver. The panic points at the caller; see [`sleep`] for a
/// poll after the runtime shut down.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio::time::Instant;
/// lazy_deadline::sleep_until(Instant::now() + Duration::from_millis(100)).await;
/// # }
/// ```
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        at: to_nanos(deadline),
        // This thread's set for the current runtime: a missing runtime or time driver
        // panics here with tokio's own message, and that runtime's clock judges it.
        bound: Bound::current(),
        filing: None,
        fallback: None,
        filed_at: NEVER,
        reset_unpolled: false,
        completed: false,
        last_waker: None,
        away: None,
        stats: Stats::default(),
        _pinned: PhantomPinned,
    }
}

pin_project! {
    /// Future returned by [`sleep`] and [`sleep_until`]: a drop-in for
    /// [`tokio::time::Sleep`] whose [`reset`](Sleep::reset) to a later deadline is a
    /// field store.
    ///
    /// It registers no runtime timer entry of its own: at its first poll it files its
    /// deadline in the *deadline set* that the thread it was made on keeps for its
    /// runtime (the set that [`timeout`](crate::timeout) uses), whose one
    /// `tokio::time::Sleep` serves every deadline filed there. So a fresh `sleep` per
    /// request costs no trip through tokio's timer driver, whose one lock all workers
    /// share. A reset to a later deadline only records it; when the filing expires,
    /// the `Sleep` compares with the recorded deadline and files the remainder. A
    /// reset to an earlier deadline re-files at once. Resets before the first poll
    /// are all stores; the first poll files once, at the final deadline.
    ///
    /// Like tokio's, it does not implement `Unpin`: pin it (`tokio::pin!` or
    /// `Box::pin`) to use it with `select!` or `reset`.
    ///
    /// # Precision
    ///
    /// Completes only once the set's runtime entry (a `tokio::time::Sleep` on the
    /// runtime it was created in) has fired at or after the deadline, or that
    /// runtime's clock, read by the set, is a whole tick past it: never early by that
    /// runtime's clock, also when polled from another runtime or a plain executor, and
    /// never later than a `tokio::time::Sleep` with the same final deadline (on whole
    /// milliseconds of a paused clock, at the same virtual instant). A deadline moved
    /// later is filed again when the earlier filing expires, before the later
    /// deadline's tick.
    ///
    /// Polled from outside the runtime that created it (another runtime's thread, a
    /// plain executor), a later reset re-files at once, as tokio's re-registers:
    /// that runtime's clock does not wait for this poller (a paused clock jumps to its
    /// next timer as soon as its own tasks are idle), so the lazy re-check could come
    /// too late. Where it is used is judged once, at its first reset to a later
    /// deadline after its first poll (a `Sleep` is reset where it is polled: by
    /// the task that awaits it).
    ///
    /// # Shutdown
    ///
    /// When its runtime shuts down, a `Sleep` that is waiting is woken, as tokio's
    /// driver wakes its timers. Polled then from outside that runtime, it panics with
    /// tokio's message, as tokio's does; polled from inside it (a task or a blocking
    /// thread of the runtime while it shuts down), it carries on as a
    /// `tokio::time::Sleep` would, on a timer entry of its own.
    ///
    /// # Cancel safety
    ///
    /// Dropping or not polling it loses nothing: dropping it gives its place in the
    /// deadline set back, and it never wakes the task afterwards.
    ///
    /// # Examples
    ///
    /// An idle timeout pushed back on every message, as in a proxy's read loop:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(16);
    /// tokio::spawn(async move {
    ///     for i in 0..100 {
    ///         tx.send(i).await.unwrap();
    ///         tokio::time::sleep(Duration::from_millis(10)).await;
    ///     }
    /// });
    /// let idle = lazy_deadline::sleep(Duration::from_secs(1));
    /// tokio::pin!(idle);
    /// let mut received = 0;
    /// loop {
    ///     tokio::select! {
    ///         Some(_) = rx.recv() => {
    ///             received += 1;
    ///             // A field store, not a trip through tokio's timer wheel.
    ///             idle.as_mut().reset(Instant::now() + Duration::from_secs(1));
    ///         }
    ///         () = &mut idle => break,
    ///     }
    /// }
    /// assert_eq!(received, 100);
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Sleep {
        // The deadline exactly as the caller gave it, and in the time base.
        deadline: Instant,
        at: u64,
        // The deadline set that judges it (its thread's set for the runtime it was
        // made in), and where its deadline is filed there, from the first poll on.
        bound: Bound,
        filing: Option<Filing>,
        // Its own tokio entry, once its runtime shut down (see `# Shutdown`).
        fallback: Option<Pin<Box<tokio::time::Sleep>>>,
        // Where the filing stands. Invariant once filed: `filed_at <= at`, or the
        // filing has expired and is re-filed at `at` by the next poll (a move
        // earlier re-files at once).
        filed_at: u64,
        // Reset before the first poll (tokio registers on `reset`; `is_elapsed`
        // answers as if we had).
        reset_unpolled: bool,
        // Resolved at `deadline`; cleared by `reset`. Repeated polls stop here.
        completed: bool,
        // The waker of its last `Ready` poll. tokio's entry keeps the waker it was
        // last polled with, and a reset of a completed `Sleep` re-registers the entry
        // with it: the task is woken at the new deadline (inside the reset if that
        // has passed) without polling again. A reset of a completed `Sleep` files at
        // once with this waker, to the same effect.
        last_waker: Option<Waker>,
        // Used outside the set's runtime: later resets re-file at once (see `reset`).
        // Judged at the first later reset after the first poll (`None` until then),
        // so a `Sleep` that is never moved later never asks.
        away: Option<bool>,
        stats: Stats,
        // `!Unpin`, as tokio's.
        #[pin]
        _pinned: PhantomPinned,
    }
}

impl Sleep {
    /// Returns the instant at which the future will complete: exactly the deadline
    /// last given to [`sleep_until`] or [`reset`](Sleep::reset).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Returns `true` if the deadline has been reached, as
    /// `tokio::time::Sleep::is_elapsed` does.
    ///
    /// Like tokio's: `false` for a `Sleep` that was neither polled nor reset (tokio
    /// registers its timer on the first poll or reset), `true` once it completed or
    /// its deadline set has seen the deadline pass. A deadline not filed yet (a reset
    /// before the first poll, or a later reset since the filing expired) is judged by
    /// the current tokio clock, where tokio would ask its driver; the future itself
    /// only completes when the set has seen the deadline pass by the clock of the
    /// runtime that owns it.
    pub fn is_elapsed(&self) -> bool {
        if self.completed {
            return true;
        }
        match &self.filing {
            Some(filing) => {
                filing.has_passed(self.at)
                    || (filing.has_passed(self.filed_at) && self.deadline <= Instant::now())
            }
            None => self.reset_unpolled && self.deadline <= Instant::now(),
        }
    }

    /// Resets the `Sleep` to a new deadline, before or after it completed.
    ///
    /// A later deadline is a field store: no lock, no clock read, no atomic. An
    /// earlier one re-files the deadline in the set at once (the set's lock; its
    /// runtime entry moves only if the deadline beats every other one filed there).
    /// Before the first poll every reset is a store. Polled away from its runtime,
    /// every reset re-files at once (see the type's `# Precision`).
    ///
    /// A reset of a completed `Sleep` files at once, as tokio's re-registers its
    /// entry with the waker of its last poll: the task that polled it last is woken
    /// at the new deadline (at once, if that has passed) even if it does not poll it
    /// again in between.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let sleep = lazy_deadline::sleep(Duration::from_millis(10));
    /// tokio::pin!(sleep);
    /// let start = Instant::now();
    /// sleep.as_mut().reset(start + Duration::from_millis(20));
    /// sleep.as_mut().await;
    /// assert_eq!(start.elapsed(), Duration::from_millis(20));
    /// # }
    /// ```
    #[inline]
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.project();
        *this.deadline = deadline;
        *this.at = to_nanos(deadline);
        let completed = std::mem::replace(this.completed, false);
        *this.reset_unpolled = true;
        if let Some(fallback) = this.fallback {
            fallback.as_mut().reset(deadline);
            return;
        }
        if completed {
            if let Some(waker) = this.last_waker {
                refile_completed(
                    this.filing,
                    this.bound,
                    *this.at,
                    this.filed_at,
                    this.stats,
                    waker,
                );
                return;
            }
        }
        if this.filing.is_some()
            && (*this.at < *this.filed_at
                || (*this.at != *this.filed_at
                    && *this.away.get_or_insert_with(|| {
                        crate::entry::polled_away_from(this.bound.runtime())
                    })))
        {
            refile_now(this.filing, *this.at, this.filed_at, this.stats);
        }
    }

    /// How often this `Sleep` filed its deadline in its deadline set (`registrations`:
    /// the first poll, earlier resets, and the rest of a deadline moved later), and
    /// how often a filing expired before a deadline that had moved later
    /// (`entry_fires`). The set's one runtime entry is shared, and not counted here.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if !*this.completed {
            let passed = match this.filing {
                Some(filing) if !filing.is_void() => {
                    poll_filed(this.filing, *this.at, this.filed_at, this.stats, cx.waker())
                }
                Some(_) => None, // its runtime shut down
                None if this.fallback.is_some() => None,
                None => {
                    // First poll (or the first since an earlier reset found the filing
                    // expired): file once, at the final deadline, whatever the resets
                    // before it said (tokio registers on reset or first poll).
                    this.stats.registrations += 1;
                    *this.filed_at = *this.at;
                    filed(
                        this.filing,
                        this.bound.file(*this.at, cx.waker()),
                        this.stats,
                    )
                }
            };
            let passed = match passed {
                Some(passed) => passed,
                None => {
                    *this.filing = None;
                    crate::timeout::shut_down(*this.at, this.bound, this.fallback, cx)
                }
            };
            if !passed {
                return Poll::Pending;
            }
            *this.completed = true;
        }
        // As tokio's `Sleep::poll`: a unit of the task's budget per `Ready`; when the
        // budget is spent, `Pending` with the task woken to yield. Asked only on the
        // way out: a pending poll yields anyway (tokio's also wakes the task then,
        // to register at its next poll; ours has filed already).
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        // As tokio's entry, keep the waker of this poll (see `last_waker`).
        if !this
            .last_waker
            .as_ref()
            .is_some_and(|last| last.will_wake(cx.waker()))
        {
            *this.last_waker = Some(cx.waker().clone());
        }
        Poll::Ready(())
    }
}

/// Where filing left the `Sleep`: whether its deadline has passed (`None`: its
/// runtime shut down).
fn filed(slot: &mut Option<Filing>, result: FileResult, stats: &mut Stats) -> Option<bool> {
    match result {
        FileResult::Filed(filing) => {
            *slot = Some(filing);
            Some(false)
        }
        FileResult::Passed => {
            stats.entry_fires += 1;
            Some(true)
        }
        FileResult::Void => None,
    }
}

/// A filed `Sleep`'s poll: whether its deadline `at` has passed (`None`: its runtime
/// shut down). Registers `waker` if it changed; re-files at `at` if the filing
/// expired before it (the deadline moved later since it was filed).
fn poll_filed(
    slot: &mut Option<Filing>,
    at: u64,
    filed_at: &mut u64,
    stats: &mut Stats,
    waker: &Waker,
) -> Option<bool> {
    let filing = slot.as_mut().expect("filed");
    if !filing.poll_passed(*filed_at, waker) {
        return Some(false); // the set wakes `waker` when the filing expires
    }
    stats.entry_fires += 1;
    if filing.has_passed(at) {
        return Some(true);
    }
    // The filing expired before the deadline, which moved later: file the rest.
    stats.registrations += 1;
    *filed_at = at;
    let filing = slot.take().expect("filed");
    match filing.refile(at, Some(waker)) {
        Some(result) => filed(slot, result, stats),
        None => unreachable!("a waker was given"),
    }
}

/// A reset that cannot wait for the filing to expire (earlier, or away from the
/// set's runtime): moves the filing to `at` now, with the waker it holds. If the
/// filing expired already, nothing is filed now: the poll its expiry asked for
/// files at `at`.
#[inline(never)]
fn refile_now(slot: &mut Option<Filing>, at: u64, filed_at: &mut u64, stats: &mut Stats) {
    let Some(filing) = slot.take() else {
        return;
    };
    match filing.refile(at, None) {
        Some(FileResult::Filed(filing)) => {
            *slot = Some(filing);
            *filed_at = at;
            stats.registrations += 1;
        }
        // Passed, or its runtime shut down: the next poll files afresh, and learns.
        Some(FileResult::Passed | FileResult::Void) | None => {}
    }
}

/// A reset of a completed `Sleep` (see `last_waker`): files `at` now, for `waker`.
/// If it has passed already, or the runtime has shut down, nothing is filed and
/// `waker` is woken now (tokio wakes it inside the reset): its next poll files afresh
/// and completes, or learns of the shutdown.
#[inline(never)]
fn refile_completed(
    slot: &mut Option<Filing>,
    bound: &Bound,
    at: u64,
    filed_at: &mut u64,
    stats: &mut Stats,
    waker: &Waker,
) {
    let result = match slot.take() {
        Some(filing) => filing.refile(at, Some(waker)),
        None => Some(bound.file(at, waker)),
    };
    match result {
        Some(FileResult::Filed(filing)) => {
            *slot = Some(filing);
            *filed_at = at;
            stats.registrations += 1;
        }
        Some(FileResult::Passed | FileResult::Void) | None => waker.wake_by_ref(),
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field(
                "filed_at",
                &(self.filing.is_some()).then(|| crate::time_base::from_nanos(self.filed_at)),
            )
            .field("is_elapsed", &self.is_elapsed())
            .finish()
    }
}
