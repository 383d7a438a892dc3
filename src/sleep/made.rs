//! Where a fresh `Sleep` goes once the thread's hint says "look": tokio's own entry
//! where the thread's `Sleep`s mostly fire (`request_sets::sleep_fate`), or the
//! runtime looked up, and its set.

use super::{Place, Sleep};
use crate::request_sets::{sleep_fate, thread_sets, Bound};
use std::marker::PhantomPinned;
use std::time::Duration;
use tokio::time::Instant;

/// `sleep` past the thread's hint: tokio's own entry where this thread's `Sleep`s
/// mostly fire (no lookup), or the runtime looked up, and the deadline taken from its
/// clock (a pinned thread may be in another runtime's context, whose clock
/// `Instant::now()` reads).
#[track_caller]
#[inline(never)]
pub(super) fn sleep_looked_up(duration: Duration) -> Sleep {
    if sleep_fate::sleeps_fire() {
        // One thread-local byte on the sets' path; the rest in a call of its own.
        return sleep_where_sleeps_fire(duration);
    }
    let (bound, now) = thread_sets::current_or_tokio_and_now();
    in_place(bound, now + duration)
}

/// [`sleep_looked_up`] on a thread whose `Sleep`s mostly fire: tokio's own entry,
/// with no lookup but one in 32 (see `request_sets::sleep_fate`).
#[track_caller]
#[inline(never)]
fn sleep_where_sleeps_fire(duration: Duration) -> Sleep {
    if sleep_fate::takes_tokio_entry_unlooked() {
        return Sleep {
            place: Place::tokio_for_fires(Instant::now() + duration),
            _pinned: PhantomPinned,
        };
    }
    let (bound, now) = thread_sets::current_or_tokio_and_now();
    in_place_where_sleeps_fire(bound, now + duration)
}

/// `sleep_until` past the thread's hint: tokio's own entry where this thread's
/// `Sleep`s mostly fire (no lookup), or the runtime looked up.
#[track_caller]
#[inline(never)]
pub(super) fn sleep_until_looked_up(deadline: Instant) -> Sleep {
    if sleep_fate::sleeps_fire() {
        return sleep_until_where_sleeps_fire(deadline);
    }
    in_place(thread_sets::current_or_tokio(), deadline)
}

/// [`sleep_until_looked_up`] on a thread whose `Sleep`s mostly fire.
#[track_caller]
#[inline(never)]
fn sleep_until_where_sleeps_fire(deadline: Instant) -> Sleep {
    if sleep_fate::takes_tokio_entry_unlooked() {
        return Sleep {
            place: Place::tokio_for_fires(deadline),
            _pinned: PhantomPinned,
        };
    }
    in_place_where_sleeps_fire(thread_sets::current_or_tokio(), deadline)
}

/// [`in_place`] for the runtime check of a thread whose `Sleep`s mostly fire: its
/// lookup found the thread's set for the current runtime (a multi-thread one), so
/// tokio's own entry, unless the thread is pinned (its lookup finds its own
/// runtime's set wherever it is, and files there).
#[track_caller]
#[inline(always)]
fn in_place_where_sleeps_fire(bound: Option<Bound>, deadline: Instant) -> Sleep {
    match bound {
        Some(_) if sleep_fate::after_lookup() => Sleep {
            place: Place::tokio_for_fires(deadline),
            _pinned: PhantomPinned,
        },
        _ => in_place(bound, deadline),
    }
}

/// A `Sleep` at `deadline` in `bound`'s set, or on tokio's own entry (`None`).
#[track_caller]
#[inline(always)]
fn in_place(bound: Option<Bound>, deadline: Instant) -> Sleep {
    let place = match bound {
        Some(bound) => Place::in_set(deadline, bound),
        None => Place::tokio(deadline),
    };
    Sleep {
        place,
        _pinned: PhantomPinned,
    }
}
