//! `Sleep`: a drop-in for `tokio::time::Sleep` whose later resets are field stores.

use crate::stats::Stats;
use crate::time_base::FAR_FUTURE;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
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
/// without the time driver (`enable_time`). The panic points at the caller.
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
/// without the time driver. The panic points at the caller.
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
    // The entry first, so that a missing runtime panics with tokio's own message.
    let entry = tokio::time::sleep_until(deadline);
    Sleep {
        deadline,
        armed: deadline,
        polled: false,
        reset_unpolled: false,
        completed: false,
        away: false,
        owner: tokio::runtime::Handle::current().id(),
        stats: Stats::default(),
        entry,
    }
}

pin_project! {
    /// Future returned by [`sleep`] and [`sleep_until`]: a drop-in for
    /// [`tokio::time::Sleep`] whose [`reset`](Sleep::reset) to a later deadline is a
    /// field store.
    ///
    /// It owns one `tokio::time::Sleep` (the *entry*). A reset to a later deadline
    /// only records it; when the entry fires, the `Sleep` compares with the recorded
    /// deadline and re-arms the entry for the remainder. A reset to an earlier
    /// deadline re-arms the entry at once, as tokio does. Resets before the first poll
    /// are all stores; the first poll arms the entry once, at the final deadline.
    ///
    /// Like tokio's, it does not implement `Unpin`: pin it (`tokio::pin!` or
    /// `Box::pin`) to use it with `select!` or `reset`.
    ///
    /// # Precision
    ///
    /// Completes only once its runtime entry (a `tokio::time::Sleep` on the runtime
    /// it was created in) has fired at or after the deadline: never early by that
    /// runtime's clock, also when polled from another runtime or a plain executor, and
    /// never later than a `tokio::time::Sleep` with the same final deadline (on whole
    /// milliseconds of a paused clock, at the same virtual instant). A deadline moved
    /// later is re-armed when the entry fires, before the later deadline's tick.
    ///
    /// Polled from outside the runtime that created it (another runtime's thread, a
    /// plain executor), a later reset re-arms the entry at once, as tokio's does:
    /// that runtime's clock does not wait for this poller (a paused clock jumps to its
    /// next timer as soon as its own tasks are idle), so the lazy re-check could come
    /// too late. Where it is polled is judged at its first poll.
    ///
    /// # Cancel safety
    ///
    /// Dropping or not polling it loses nothing: it is a plain future with no
    /// side effect beyond its own entry.
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
        // The deadline exactly as the caller gave it.
        deadline: Instant,
        // Where `entry` is armed. Invariant: `armed <= deadline`, or the entry has
        // been re-armed at `deadline` (moves earlier re-arm at once).
        armed: Instant,
        // Whether `entry` has been polled (and so registered with the driver).
        polled: bool,
        // Reset before the first poll (tokio registers on `reset`; `is_elapsed`
        // answers as if we had).
        reset_unpolled: bool,
        // Resolved at `deadline`; cleared by `reset`. Repeated polls stop here.
        completed: bool,
        // First polled outside the runtime that owns the entry: later resets re-arm
        // at once (see `reset`).
        away: bool,
        // The runtime the entry belongs to (where `sleep_until` ran).
        owner: tokio::runtime::Id,
        stats: Stats,
        #[pin]
        entry: tokio::time::Sleep,
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
    /// registers its timer on the first poll or reset), `true` once it completed. A
    /// deadline the runtime entry has not fired at yet (a reset before the first poll,
    /// or a later reset since the entry fired) is judged by the current tokio clock,
    /// where tokio would ask its driver; the future itself only completes when the
    /// entry of the runtime that owns it has fired at the deadline.
    pub fn is_elapsed(&self) -> bool {
        if self.completed {
            return true;
        }
        if !self.polled {
            return self.reset_unpolled && self.deadline <= Instant::now();
        }
        self.entry.is_elapsed() && (self.deadline <= self.armed || self.deadline <= Instant::now())
    }

    /// Resets the `Sleep` to a new deadline, before or after it completed.
    ///
    /// A later deadline is a field store: no driver call, no clock read, no atomic.
    /// An earlier one re-arms the runtime entry at once (tokio's cost). Before the
    /// first poll every reset is a store. Polled away from its runtime, every reset
    /// re-arms at once (see the type's `# Precision`).
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
        *this.completed = false;
        *this.reset_unpolled = true;
        if *this.polled && (deadline < *this.armed || (*this.away && deadline != *this.armed)) {
            this.entry.reset(deadline);
            *this.armed = deadline;
            this.stats.registrations += 1;
        }
    }

    /// How much driver work this `Sleep` has caused so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl Future for Sleep {
    type Output = ();

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Fast path (inlined into the caller, as a `select!` loop polls it on every
        // turn): armed and not done, so only the entry can have news.
        let this = self.as_mut().project();
        if *this.polled && !*this.completed {
            ready!(this.entry.poll(cx));
            return self.entry_fired(cx);
        }
        self.poll_cold(cx)
    }
}

impl Sleep {
    /// The first poll, or a poll after completion.
    #[inline(never)]
    fn poll_cold(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.as_mut().project();
        if *this.completed {
            // Ready again without the entry: spend the task's budget as tokio's
            // `Sleep::poll` does, so a loop over a completed `Sleep` still yields.
            ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
            return Poll::Ready(());
        }
        // First poll: arm the entry once, at the final deadline, whatever the resets
        // before it said (tokio registers on reset or first poll).
        *this.polled = true;
        *this.away = crate::entry::polled_away_from(*this.owner);
        this.stats.registrations += 1;
        if *this.armed != *this.deadline {
            this.entry.as_mut().reset(*this.deadline);
            *this.armed = *this.deadline;
        }
        ready!(this.entry.as_mut().poll(cx));
        self.entry_fired(cx)
    }

    /// The entry fired at `armed`: the owning runtime's clock is past it. That is
    /// the only witness trusted; the polling context's clock may belong to another
    /// runtime. Completes, or re-arms for a deadline that moved later meanwhile (at
    /// most twice: after a re-arm, `armed == deadline`; tokio's entry spends the
    /// task's cooperative budget on each poll that returns ready).
    #[inline(never)]
    fn entry_fired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        loop {
            this.stats.entry_fires += 1;
            if *this.deadline <= *this.armed {
                // Keep the invariant for later resets: the entry stands at `armed`.
                *this.completed = true;
                return Poll::Ready(());
            }
            // The deadline moved later while we waited: re-arm for the remainder (if
            // it has passed too, tokio fires the entry within this poll). Polled
            // outside the budget: the poll that saw the fire has spent this poll's
            // unit already, and one `Ready` must cost one unit, as tokio's does (an
            // `Interval` catching up in a burst re-arms on every tick).
            this.entry.as_mut().reset(*this.deadline);
            *this.armed = *this.deadline;
            this.stats.registrations += 1;
            ready!(std::pin::pin!(tokio::task::unconstrained(this.entry.as_mut())).poll(cx));
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("armed", &self.armed)
            .field("is_elapsed", &self.is_elapsed())
            .finish()
    }
}
