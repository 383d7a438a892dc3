//! A `Sleep` whose deadline is filed in its thread's deadline set (see
//! `crate::request_sets`): its polls, and the resets that the set serves itself or
//! that move it to an entry of its own (`own_entry`).

use super::own_entry::{Fired, OwnEntry};
use super::Counts;
use crate::request_sets::{sleep_fate, Filing, Request};
use crate::time_base::to_nanos;
use std::pin::Pin;
use std::task::{Context, Waker};
use tokio::time::Instant;

/// A poll in the set: whether the deadline has passed. The first poll (or the first
/// since a reset found the filing expired) files once, at the final deadline,
/// whatever the resets before it said (tokio registers on reset or first poll). A
/// filing that expired before the deadline (it moved later since) files the rest.
/// Once the runtime shut down, the `Sleep` carries on as tokio's would (see
/// [`shut_down`]).
#[inline]
pub(super) fn poll(
    request: &mut Request,
    own: &mut Option<Pin<Box<OwnEntry>>>,
    deadline: Instant,
    filed_at: &mut u64,
    counts: &mut Counts,
    cx: &mut Context<'_>,
) -> bool {
    let passed = if request.is_filed() {
        if request.is_void() {
            None
        } else if !request.poll_passed(*filed_at, cx.waker()) {
            return false; // the set wakes this waker when the filing expires
        } else {
            expired(request, deadline, filed_at, counts, cx.waker())
        }
    } else {
        let at = to_nanos(deadline);
        counts.registered();
        *filed_at = at;
        sleep_fate::filed();
        filed(request.file(at, cx.waker()), counts)
    };
    match passed {
        Some(passed) => {
            if passed {
                sleep_fate::fired();
            }
            passed
        }
        None => shut_down(request, own, deadline, cx),
    }
}

/// The filing expired: whether the deadline has passed too (`None`: its runtime
/// shut down). If the deadline moved later since it was filed, files the rest.
fn expired(
    request: &mut Request,
    deadline: Instant,
    filed_at: &mut u64,
    counts: &mut Counts,
    waker: &Waker,
) -> Option<bool> {
    counts.fired();
    let at = to_nanos(deadline);
    if request.has_passed(at) {
        return Some(true);
    }
    counts.registered();
    *filed_at = at;
    filed(request.refile(at, Some(waker))?, counts)
}

/// What a filing came to: whether the deadline has passed (`None`: its runtime shut
/// down).
fn filed(filing: Filing, counts: &mut Counts) -> Option<bool> {
    match filing {
        Filing::Filed => Some(false),
        Filing::Passed => {
            counts.fired();
            Some(true)
        }
        Filing::Void => None,
    }
}

/// A `Sleep` whose runtime shut down, polled: tokio's panic from outside that
/// runtime; from inside it, an entry of its own at the deadline (see `Sleep`'s
/// `# Shutdown`).
#[cold]
fn shut_down(
    request: &mut Request,
    own: &mut Option<Pin<Box<OwnEntry>>>,
    deadline: Instant,
    cx: &mut Context<'_>,
) -> bool {
    request.give_back();
    if crate::entry::polled_away_from(request.runtime()) {
        panic!("A Tokio 1.x context was found, but it is being shutdown.");
    }
    let mut entry = OwnEntry::fallback(deadline);
    let passed = entry.as_mut().poll_fired(&mut Counts::default(), cx) != Fired::No;
    *own = Some(entry);
    passed
}

/// Whether this thread runs in the `Sleep`'s runtime, where an entry of its own can
/// be made (a `tokio::time::Sleep` belongs to the runtime it is made in).
fn at_home(request: &Request) -> bool {
    !crate::entry::polled_away_from(request.runtime())
}

/// A reset of a completed `Sleep` to `deadline` (`at` in the time base), `waker`
/// that of its last poll: tokio re-registers its entry with that waker, so that the
/// task is woken at the new deadline (inside the reset if it has passed) without
/// polling again. A completed `Sleep` reset is a limiter's or a ticker's timer: at
/// home it leaves the set for an entry of its own, armed with that waker. Away from
/// home it files in the set now with it; if that has passed already, or the runtime
/// shut down, nothing is filed and `waker` is woken now (its next poll files afresh
/// and completes, or learns of the shutdown).
#[inline(never)]
pub(super) fn reset_completed(
    request: &mut Request,
    own: &mut Option<Pin<Box<OwnEntry>>>,
    deadline: Instant,
    at: u64,
    filed_at: &mut u64,
    counts: &mut Counts,
    last_waker: &mut Option<Waker>,
) {
    let Some(waker) = last_waker else {
        return;
    };
    if !request.is_void() && at_home(request) {
        request.give_back();
        // The entry keeps it from now on.
        leave(
            request,
            own,
            deadline,
            at,
            filed_at,
            counts,
            last_waker.take(),
        );
        return;
    }
    match request.refile(at, Some(waker)) {
        Some(Filing::Filed) => {
            *filed_at = at;
            counts.registered();
        }
        Some(Filing::Passed | Filing::Void) | None => waker.wake_by_ref(),
    }
}

/// `Sleep::reset_unregistered` of a completed `Sleep` in the set: a ticker's timer
/// (`Interval` re-arms its `Sleep` so after each tick, as tokio's does). At home it
/// leaves the set for an entry of its own that enters tokio's driver at its next
/// poll, as tokio's `reset_without_timer` leaves tokio's entry; each later tick is
/// then that entry's fire and lazy re-arm, not a service round of the set and a new
/// filing under its lock. Away from home, or once its runtime shut down, it stays in
/// the set: the next poll files at the new deadline, or learns of the shutdown.
#[inline(never)]
pub(super) fn leave_unregistered(
    request: &mut Request,
    own: &mut Option<Pin<Box<OwnEntry>>>,
    deadline: Instant,
    counts: &mut Counts,
) {
    if request.is_void() || !at_home(request) {
        return;
    }
    request.give_back();
    *own = Some(OwnEntry::unregistered(deadline, request.keeps_waker()));
    counts.registered();
}

/// A reset that cannot wait for the filing to expire: earlier across the filing's
/// tick, or later away from home. An earlier one at home leaves the set for an entry
/// of its own, armed with the waker the filing held (the task is woken at the new
/// deadline as the filing would have woken it). Otherwise the filing moves to `at`
/// now, with the waker it holds; if the filing expired already, nothing is filed
/// now: the poll its expiry asked for files at `at`.
#[inline(never)]
pub(super) fn move_now(
    request: &mut Request,
    own: &mut Option<Pin<Box<OwnEntry>>>,
    deadline: Instant,
    at: u64,
    filed_at: &mut u64,
    counts: &mut Counts,
) {
    if at < *filed_at && !request.is_void() && at_home(request) {
        let waker = request.withdraw();
        leave(request, own, deadline, at, filed_at, counts, waker);
        return;
    }
    match request.refile(at, None) {
        Some(Filing::Filed) => {
            *filed_at = at;
            counts.registered();
        }
        // Passed, or its runtime shut down: the next poll files afresh, and learns.
        Some(Filing::Passed | Filing::Void) | None => {}
    }
}

/// Leaves the set (the filing given back already) for an entry of its own armed at
/// `deadline`, registered with `waker` if there is one.
fn leave(
    request: &Request,
    own: &mut Option<Pin<Box<OwnEntry>>>,
    deadline: Instant,
    at: u64,
    filed_at: &mut u64,
    counts: &mut Counts,
    waker: Option<Waker>,
) {
    *own = Some(OwnEntry::armed(deadline, waker, request.keeps_waker()));
    *filed_at = at;
    counts.registered();
}
