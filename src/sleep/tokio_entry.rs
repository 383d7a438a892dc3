//! A `Sleep` on tokio's own entry: what a `Sleep` made on a runtime whose timers no
//! second worker contends for holds (a current-thread runtime: see
//! `request_sets::thread_sets::takes_tokio_entry`), and one made on a multi-thread
//! runtime by a thread whose `Sleep`s mostly fire (`request_sets::sleep_fate`).
//! tokio's path there is an uncontended lock and an O(1) wheel insert, which no
//! deadline set beats, and a deadline that fires costs tokio's driver its work
//! whatever holds it, so the entry is tokio's own, inline, polled with the caller's
//! waker, and every call is tokio's, but one: a reset to a later deadline while the
//! entry waits is a store.
//!
//! The lazy rule: the entry stays armed at its `deadline()` (`armed`), and the
//! `Sleep`'s deadline may be later by `later` nanoseconds. The entry fires at
//! `armed` and wakes the task; the poll that finds it fired before the deadline
//! re-arms it there (tokio's reset, which keeps the entry's waker). Every other
//! reset is tokio's own: the first (tokio registers the entry there, as at the first
//! poll), earlier (tokio moves the entry, and wakes at once if that has passed), and
//! any reset once the entry fired (tokio re-registers it with the waker of its last
//! poll, so the task is woken at the new deadline without polling again). The same
//! deadline again is no move at all. Used away from home, later resets are tokio's
//! too: the home runtime's paused clock does not wait for such a poller. Home is
//! judged at the first later reset, from the caller's context: a current-thread
//! runtime's; for a `Sleep` made where `Sleep`s fire (`FOR_FIRES`), any multi-thread
//! runtime's too (not a plain thread's), as its home's clock is the real one (tokio
//! pauses only a current-thread runtime's), whose entry fires with no poller's help.
//! One slip is left there, on a thread that is not pinned and moves between runtimes
//! (a plain thread's next `block_on`, a blocking thread's, a worker's inside
//! `block_in_place`): a thread whose `Sleep`s fired in a multi-thread runtime and
//! whose next ones are made in a paused current-thread runtime's context makes up
//! to 31 of them `FOR_FIRES` before its first runtime check there (one fresh `Sleep`
//! in 32 looks its runtime up) corrects it. Such a `Sleep`, sent to a multi-thread
//! runtime and reset later there, keeps the lazy store, and its paused home may run
//! past the new deadline before the poll re-arms it (late by that clock, never
//! early).
//!
//! `is_elapsed` answers from tokio's entry, and where the deadline moved later than
//! a fired entry (nothing re-arms it until a poll), from the clock: tokio's
//! `Instant::now()`, true from the deadline itself. Two differences from tokio's
//! remain there, both within a deadline's tick or off its runtime: tokio's reads
//! `true` only from its next 1 ms tick, so for a deadline off that grid ours can read
//! `true` up to a tick earlier, and the poll in that window re-arms the entry and is
//! pending (the future itself is never early: only the entry's fire completes it);
//! and the clock read is the caller's runtime's, as the entry's own runtime is out of
//! reach without a handle of it, which tokio's path does not pay for.

use super::{Counts, COMPLETED, REGISTERED};
use crate::request_sets::sleep_fate;
use crate::time_base::nanos_after;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// `AWAY` is known (judged at the first later reset that could be a store).
const AWAY_KNOWN: u8 = super::AWAY_KNOWN;
/// Used away from home (see [`away`]).
const AWAY: u8 = super::AWAY;
/// Made instead of a filing in a multi-thread runtime's set.
const FOR_FIRES: u8 = super::FOR_FIRES;
/// Its first fire was counted in the thread's fate.
const FIRE_COUNTED: u8 = super::FIRE_COUNTED;

/// The entry enters tokio's driver for the first time: a `Sleep` made for fires
/// counts in its thread's fate (as a filing in the set would).
#[inline(always)]
fn first_registration(flags: u8) {
    if flags & (REGISTERED | FOR_FIRES) == FOR_FIRES {
        sleep_fate::filed();
    }
}

/// The entry fired at the deadline: the `Sleep` completed (repeated `Ready` polls are
/// not new fires; a `Sleep` made for fires counts its first in its thread's fate).
#[inline(always)]
fn completed(flags: &mut u8, counts: &mut TokioCounts) {
    if *flags & COMPLETED == 0 {
        *flags |= COMPLETED;
        counts.fired();
        if *flags & (FOR_FIRES | FIRE_COUNTED) == FOR_FIRES {
            *flags |= FIRE_COUNTED;
            sleep_fate::fired();
        }
    }
}

/// The counts on tokio's entry: `u16`s, so that a `Sleep` there stays within 128
/// bytes.
pub(super) type TokioCounts = Counts<u16>;

/// The `Sleep`'s deadline: `later` past where the entry is armed.
#[inline]
pub(super) fn deadline(entry: &tokio::time::Sleep, later: u64) -> Instant {
    if later == 0 {
        return entry.deadline();
    }
    entry.deadline() + Duration::from_nanos(later)
}

/// A poll: tokio's, after re-arming an entry that fired before the deadline.
#[inline]
pub(super) fn poll(
    mut entry: Pin<&mut tokio::time::Sleep>,
    later: &mut u64,
    flags: &mut u8,
    counts: &mut TokioCounts,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if *flags & REGISTERED == 0 {
        first_registration(*flags);
        *flags |= REGISTERED; // tokio's first poll registers the entry
        counts.registered();
    } else if *later != 0 && entry.is_elapsed() {
        // Re-armed, never completed by a clock read: the poller's clock may be
        // another runtime's (only the entry's fire witnesses its own runtime's).
        rearm(entry.as_mut(), later, counts);
    }
    // At most twice: the second time the entry is armed at the deadline.
    for _ in 0..2 {
        if entry.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if *later == 0 {
            completed(flags, counts);
            return Poll::Ready(());
        }
        // It fired at `armed` between the check above and this poll (its driver
        // runs on another thread): re-arm at the deadline and poll again, which
        // registers this waker there (or finds it passed).
        rearm(entry.as_mut(), later, counts);
    }
    Poll::Pending
}

/// The entry fired at `armed`, before the deadline (`later` past it): re-arm there.
fn rearm(entry: Pin<&mut tokio::time::Sleep>, later: &mut u64, counts: &mut TokioCounts) {
    let target = deadline(&entry, *later);
    *later = 0;
    counts.fired();
    counts.registered();
    entry.reset(target);
}

/// A reset to `target` (see the module docs).
#[inline]
pub(super) fn reset(
    entry: Pin<&mut tokio::time::Sleep>,
    later: &mut u64,
    target: Instant,
    flags: &mut u8,
    counts: &mut TokioCounts,
) {
    let armed = entry.deadline();
    if *flags & REGISTERED != 0 {
        if target == armed {
            *later = 0; // the entry is armed there already (the same deadline: no move)
            return;
        }
        if target > armed && !entry.is_elapsed() && !away(flags) {
            // Later while the entry waits: it fires at `armed`, and the poll that sees
            // it re-arms at the deadline (a gap too large for `later` is tokio's reset).
            if let Some(gap) = nanos_after(armed, target) {
                *later = gap;
                return;
            }
        }
    } else if target == armed {
        // Not in tokio's driver yet, and the same deadline: tokio's reset registers,
        // as the first poll would.
        first_registration(*flags);
        *flags |= REGISTERED;
        counts.registered();
        entry.reset(target);
        return;
    }
    first_registration(*flags);
    *flags = (*flags & !COMPLETED) | REGISTERED;
    *later = 0;
    counts.registered();
    entry.reset(target);
}

/// A reset that registers nothing, after the `Sleep` completed (`Interval`'s after a
/// tick): a store; the next poll finds the entry fired before the deadline and
/// re-arms it there.
#[inline]
pub(super) fn reset_unregistered(
    entry: Pin<&mut tokio::time::Sleep>,
    later: &mut u64,
    target: Instant,
    flags: &mut u8,
) {
    let armed = entry.deadline();
    *flags &= !COMPLETED;
    match nanos_after(armed, target) {
        Some(gap) => *later = gap,
        None => {
            // Not later than where the entry fired (or too far for `later`): tokio's
            // reset, as `Interval`'s first tick of a zero period needs nothing else.
            *later = 0;
            entry.reset(target);
        }
    }
}

/// `Sleep::is_elapsed` (see the module docs).
#[inline]
pub(super) fn is_elapsed(entry: &tokio::time::Sleep, later: u64) -> bool {
    entry.is_elapsed() && (later == 0 || deadline(entry, later) <= Instant::now())
}

/// Whether the `Sleep` is used away from home (judged once, at its first reset that
/// could be a store): there, later resets are tokio's own, as a paused home clock
/// need not wait for this poller to re-arm. Home is a current-thread runtime's
/// context; for a `Sleep` made instead of a filing in a multi-thread runtime's set
/// (`FOR_FIRES`), a multi-thread runtime's too: its home clock is the real one,
/// which tokio never pauses there, so its entry fires with no poller's help.
#[inline]
fn away(flags: &mut u8) -> bool {
    if *flags & AWAY_KNOWN == 0 {
        *flags |= AWAY_KNOWN;
        let at_home = tokio::runtime::Handle::try_current().is_ok_and(|h| {
            h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
                || *flags & FOR_FIRES != 0
        });
        if !at_home {
            *flags |= AWAY;
        }
    }
    *flags & AWAY != 0
}
