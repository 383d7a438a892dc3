//! `Sleep`: a drop-in for `tokio::time::Sleep` whose later resets are field stores.
//!
//! Two places its deadline can live: filed in the thread's deadline set (a fresh
//! `Sleep`, as per-request code makes them: `in_set`), or, from the first reset that
//! the set would pay its lock for, a tokio entry of its own, re-armed lazily
//! (`own_entry`; also what carries a `Sleep` on once its runtime shut down).

mod counts;
mod in_set;
mod made;
mod own_entry;
mod place;
mod tokio_entry;

use crate::request_sets::thread_sets;
use crate::stats::Stats;
use crate::time_base::{to_nanos, FAR_FUTURE};
use counts::Counts;
use own_entry::Fired;
use pin_project_lite::pin_project;
use place::{
    Place, PlaceProj, AWAY, AWAY_KNOWN, COMPLETED, FIRE_COUNTED, FOR_FIRES, REGISTERED,
    RESET_UNPOLLED,
};
use std::fmt;
use std::future::Future;
use std::marker::PhantomPinned;
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
#[inline(always)]
pub fn sleep(duration: Duration) -> Sleep {
    let duration = duration.min(FAR_FUTURE);
    if thread_sets::takes_tokio_entry() {
        Sleep {
            place: Place::tokio(Instant::now() + duration),
            _pinned: PhantomPinned,
        }
    } else {
        made::sleep_looked_up(duration)
    }
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
#[inline(always)]
pub fn sleep_until(deadline: Instant) -> Sleep {
    // tokio's own entry, or this thread's set for the current runtime: either way a
    // missing runtime or time driver panics here with tokio's own message, and that
    // runtime's clock judges it. One struct literal on the hint's path, so that
    // tokio's entry is made in its final place (no copy of it).
    if thread_sets::takes_tokio_entry() {
        Sleep {
            place: Place::tokio(deadline),
            _pinned: PhantomPinned,
        }
    } else {
        made::sleep_until_looked_up(deadline)
    }
}

pin_project! {
    /// Future returned by [`sleep`] and [`sleep_until`]: a drop-in for
    /// [`tokio::time::Sleep`] whose [`reset`](Sleep::reset) to a later deadline is a
    /// field store.
    ///
    /// Where it is made decides where its deadline lives. On a current-thread runtime
    /// (no second worker contends for tokio's timer driver, whose path is then
    /// cheaper than any set) it is a `tokio::time::Sleep` of its own, inline: every
    /// poll and reset is tokio's, but a reset to a later deadline while it waits,
    /// which is a store (the entry fires at the earlier deadline, and the poll that
    /// sees it re-arms at the later one). Such a `Sleep` used outside a current-thread
    /// runtime's context (polled from a plain thread or a multi-thread runtime) has
    /// tokio's later resets too.
    ///
    /// On a multi-thread runtime, a thread whose `Sleep`s mostly fire (at least three
    /// in four of its last 32, counted wherever they live: a retry's backoff, a poll
    /// loop's pause) makes its fresh ones on tokio's own entry too, with no runtime
    /// lookup: a deadline that fires costs tokio's driver its work all the same, so
    /// the set would only add its own. Later resets are stores there too, from any
    /// runtime's context (its runtime's clock is the real one, which does not wait for
    /// a poller); from a plain thread, tokio's resets. Once fewer than three in four
    /// of a window of 32 fired (lost `select!`s, per-request deadlines), its fresh
    /// `Sleep`s take the set again. One slip remains: a thread that is not pinned
    /// (`on_thread_start`), moving from such a runtime to a paused current-thread
    /// runtime's context, makes up to 31 `Sleep`s there by this rule before its
    /// runtime check notices; one of them sent to a multi-thread runtime and reset
    /// later there keeps the store, and may complete late by its paused clock (never
    /// early). The rest of these docs is about a `Sleep` in the deadline set:
    ///
    /// A fresh `Sleep` registers no runtime timer entry of its own: at its first poll
    /// it files its deadline in the *deadline set* that the thread it was made on
    /// keeps for its runtime (the set that [`timeout`](crate::timeout) uses), whose
    /// one `tokio::time::Sleep` serves every deadline filed there. So a fresh `sleep`
    /// per request costs no trip through tokio's timer driver, whose one lock all
    /// workers share. A reset to a later deadline only records it; when the filing
    /// expires, the `Sleep` compares with the recorded deadline and files the
    /// remainder. A reset to an earlier deadline within the filing's driver tick is a
    /// store too (tokio's driver fires both at that tick's end). Resets before the
    /// first poll are all stores; the first poll files once, at the final deadline.
    ///
    /// A `Sleep` that is reset earlier across ticks, or reset once it completed, is a
    /// long-lived timer (a connection's, a limiter's), not a per-request one: at such
    /// a reset it leaves the set for a tokio entry of its own (one allocation, once),
    /// which it re-arms lazily from then on. A later reset is still a store, any
    /// other one tokio's own reset of that entry. Polled about once per fire (a
    /// ticker's, a limiter's), it polls that entry as tokio's `Sleep` does, with the
    /// task's waker; polled pending more often between fires (a `select!` loop), it
    /// goes through a signal of its own, whose slot holds the task's waker, so that a
    /// pending poll by the same task does not call into tokio. The mode is chosen
    /// at each fire.
    ///
    /// Like tokio's, it does not implement `Unpin`: pin it (`tokio::pin!` or
    /// `Box::pin`) to use it with `select!` or `reset`.
    ///
    /// # Precision
    ///
    /// Completes only once its runtime entry (the set's, or its own: a
    /// `tokio::time::Sleep` on the runtime it was created in) has fired at or after
    /// the deadline, or that runtime's clock, read by the set, is a whole tick past
    /// it: never early by that
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
        // tokio's own entry, or the deadline set that judges it, each with what it
        // needs beside (in one enum, so that a `Sleep` on tokio's entry is no larger
        // than 128 bytes: moved by value, as a `select!` moves it, it is copied
        // inline, as tokio's 112 are, not by a call to `memcpy`).
        #[pin]
        place: Place,
        // `!Unpin`, as tokio's.
        #[pin]
        _pinned: PhantomPinned,
    }
}

impl Sleep {
    /// Returns the instant at which the future will complete: exactly the deadline
    /// last given to [`sleep_until`] or [`reset`](Sleep::reset).
    pub fn deadline(&self) -> Instant {
        match &self.place {
            Place::Tokio { entry, later, .. } => tokio_entry::deadline(entry, *later),
            Place::InSet { deadline, .. } => *deadline,
        }
    }

    /// Returns `true` if the deadline has been reached, as
    /// `tokio::time::Sleep::is_elapsed` does.
    ///
    /// Like tokio's: `false` for a `Sleep` that was neither polled nor reset (tokio
    /// registers its timer on the first poll or reset), `true` once it completed or
    /// its entry or deadline set has seen the deadline pass. A deadline not in the
    /// entry or the set yet (a reset before the first poll in a set, or a later
    /// reset since the entry fired or the filing expired: nothing re-arms those until
    /// a poll) is judged by the current tokio clock, where tokio would ask its
    /// driver: `true` once that clock reads the deadline, as tokio's once its driver
    /// has turned past it. The future itself only completes when its entry or set
    /// has seen the deadline pass by the clock of the runtime that owns it.
    pub fn is_elapsed(&self) -> bool {
        let (deadline, request, filed_at, own, flags) = match &self.place {
            Place::Tokio { entry, later, .. } => return tokio_entry::is_elapsed(entry, *later),
            Place::InSet {
                deadline,
                request,
                filed_at,
                own,
                flags,
                ..
            } => (*deadline, request, *filed_at, own, *flags),
        };
        if flags & COMPLETED != 0 {
            return true;
        }
        if let Some(own) = own {
            return own.is_elapsed();
        }
        if request.is_filed() {
            let at = to_nanos(deadline);
            return request.has_passed(at)
                || (request.has_passed(filed_at) && deadline <= Instant::now());
        }
        flags & RESET_UNPOLLED != 0 && deadline <= Instant::now()
    }

    /// Resets the `Sleep` to a new deadline, before or after it completed.
    ///
    /// A later deadline is a field store: no lock, no clock read, no atomic. In the
    /// deadline set, so is an earlier one within the driver tick where the deadline is
    /// filed (a load of the set's tick grid and a compare).
    /// Before the first poll every reset is a store. An earlier one across ticks moves
    /// the timer to an entry of its own (the first time; see the type's docs) and is
    /// tokio's own reset of that entry. Polled away from its runtime, every reset
    /// re-files at once (see the type's `# Precision`).
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
        let (old, request, filed_at, own, last_waker, counts, flags) = match this.place.project() {
            PlaceProj::Tokio {
                entry,
                later,
                counts,
                flags,
            } => {
                tokio_entry::reset(entry, later, deadline, flags, counts);
                return;
            }
            PlaceProj::InSet {
                deadline,
                request,
                filed_at,
                own,
                last_waker,
                counts,
                flags,
            } => (deadline, request, filed_at, own, last_waker, counts, flags),
        };
        let completed = *flags & COMPLETED != 0;
        if completed && deadline == *old {
            return; // the same deadline: no move (it stays complete)
        }
        *old = deadline;
        *flags = (*flags & !COMPLETED) | RESET_UNPOLLED;
        if let Some(own) = own {
            own.as_mut().reset(
                deadline,
                completed,
                || away(flags, request.runtime()),
                counts,
            );
            return;
        }
        let at = to_nanos(deadline);
        if completed && last_waker.is_some() {
            in_set::reset_completed(request, own, deadline, at, filed_at, counts, last_waker);
            return;
        }
        if !request.is_filed() {
            return; // filed at the next poll, at the final deadline
        }
        let store = if at >= *filed_at {
            at == *filed_at || !away(flags, request.runtime())
        } else {
            // Earlier, but within the filing's tick: the set's entry fires both at
            // that tick's end.
            request
                .tick_end(at)
                .is_some_and(|end| Some(end) == request.tick_end(*filed_at))
        };
        if !store {
            in_set::move_now(request, own, deadline, at, filed_at, counts);
        }
    }

    /// A reset that registers nothing, as tokio's `Sleep::reset_without_timer` (what
    /// its `Interval` uses after a tick): a completed `Sleep` wakes nobody at the new
    /// deadline until it is polled again. A store, whatever the deadline; the next
    /// poll files it (or, on an entry of its own, re-arms it when it finds it fired).
    /// On the entry that carries a `Sleep` on once its runtime shut down, tokio's
    /// `reset` (tokio offers nothing else there).
    pub(crate) fn reset_unregistered(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.project();
        let (old, request, own, counts, flags) = match this.place.project() {
            PlaceProj::Tokio {
                entry,
                later,
                flags,
                ..
            } => {
                tokio_entry::reset_unregistered(entry, later, deadline, flags);
                return;
            }
            PlaceProj::InSet {
                deadline,
                request,
                own,
                counts,
                flags,
                ..
            } => (deadline, request, own, counts, flags),
        };
        *old = deadline;
        // After it completed only: an entry of its own has fired then, so its next
        // poll sees that and re-arms.
        debug_assert!(
            *flags & COMPLETED != 0,
            "reset_unregistered of a waiting Sleep"
        );
        *flags &= !COMPLETED;
        match own {
            Some(entry) => entry.as_mut().retarget(deadline),
            None => in_set::leave_unregistered(request, own, deadline, counts),
        }
    }

    /// How often this `Sleep` registered its deadline (`registrations`: filings in its
    /// deadline set, the first poll's, earlier resets' and the rest of a deadline
    /// moved later; and, once it has an entry of its own, that entry's arming and
    /// tokio resets), and how often a filing expired or its own entry fired
    /// (`entry_fires`). The set's one runtime entry is shared, and not counted here.
    ///
    /// On tokio's own entry (a current-thread runtime's `Sleep`, or one made where
    /// `Sleep`s mostly fire: see the type's docs), the first poll's or reset's
    /// registration, tokio resets and re-arms of the entry, and its fires; these
    /// counts saturate at 65,535.
    pub fn stats(&self) -> Stats {
        match &self.place {
            Place::Tokio { counts, .. } => counts.stats(),
            Place::InSet { counts, .. } => counts.stats(),
        }
    }
}

/// Whether the `Sleep` is used away from its runtime `home` (judged once: see
/// `AWAY`).
#[inline]
fn away(flags: &mut u8, home: tokio::runtime::Id) -> bool {
    if *flags & AWAY_KNOWN == 0 {
        *flags |= AWAY_KNOWN;
        if crate::entry::polled_away_from(home) {
            *flags |= AWAY;
        }
    }
    *flags & AWAY != 0
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let (deadline, request, filed_at, own, last_waker, counts, flags) =
            match self.project().place.project() {
                PlaceProj::Tokio {
                    entry,
                    later,
                    counts,
                    flags,
                } => return tokio_entry::poll(entry, later, flags, counts, cx),
                PlaceProj::InSet {
                    deadline,
                    request,
                    filed_at,
                    own,
                    last_waker,
                    counts,
                    flags,
                } => (*deadline, request, filed_at, own, last_waker, counts, flags),
            };
        if *flags & COMPLETED == 0 {
            let fired = match own {
                Some(entry) => entry.as_mut().poll_fired(counts, cx),
                None => Fired::from(in_set::poll(request, own, deadline, filed_at, counts, cx)),
            };
            match fired {
                Fired::No => return Poll::Pending,
                Fired::Yes => *flags |= COMPLETED,
                Fired::YesBudgetSpent => {
                    // tokio's own poll of the entry spent it; its entry keeps the
                    // waker (no `last_waker`: the `Sleep` has an entry of its own).
                    *flags |= COMPLETED;
                    return Poll::Ready(());
                }
            }
        } else if let Some(own) = own {
            // Completed: as tokio's `Ready` poll, the entry keeps this waker.
            own.as_mut().keep_waker(cx);
        }
        // As tokio's `Sleep::poll`: a unit of the task's budget per `Ready`; when the
        // budget is spent, `Pending` with the task woken to yield. Asked only on the
        // way out: a pending poll yields anyway (tokio's also wakes the task then,
        // to register at its next poll; ours has filed already).
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        // As tokio's entry, keep the waker of this poll (see `last_waker`).
        if own.is_none()
            && !last_waker
                .as_ref()
                .is_some_and(|last| last.will_wake(cx.waker()))
        {
            *last_waker = Some(cx.waker().clone());
        }
        Poll::Ready(())
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("Sleep");
        f.field("deadline", &self.deadline());
        match &self.place {
            Place::Tokio { entry, .. } => f.field("tokio_entry_armed_at", &entry.deadline()),
            Place::InSet {
                request,
                filed_at,
                own,
                ..
            } => f
                .field(
                    "filed_at",
                    &request
                        .is_filed()
                        .then(|| crate::time_base::from_nanos(*filed_at)),
                )
                .field("own_entry", &own.is_some()),
        };
        f.field("is_elapsed", &self.is_elapsed()).finish()
    }
}
