//! A `Sleep` on tokio's own entry: what a `Sleep` made on a runtime whose timers no
//! second worker contends for holds (a current-thread runtime: see
//! `request_sets::thread_sets::takes_tokio_entry`). tokio's path there is an
//! uncontended lock and an O(1) wheel insert, which no deadline set beats, so the
//! entry is tokio's own, inline, polled with the caller's waker, and every call is
//! tokio's, but one: a reset to a later deadline while the entry waits is a store.
//!
//! The lazy rule: the entry stays armed at its `deadline()` (`armed`), and the
//! `Sleep`'s deadline may be later. The entry fires at `armed` and wakes the task;
//! the poll that finds it fired before the deadline re-arms it there (tokio's reset,
//! which keeps the entry's waker). Every other reset is tokio's own: earlier (tokio
//! moves the entry, and wakes at once if that has passed), and any reset once the
//! entry fired (tokio re-registers it with the waker of its last poll, so the task is
//! woken at the new deadline without polling again). The same deadline again is no
//! move at all.
//!
//! Resets before the first poll are stores too: the first poll arms the entry once,
//! at the final deadline, as tokio's first poll registers it.
//!
//! `is_elapsed` answers from tokio's entry where the entry is armed at the deadline;
//! where the deadline is not in tokio's driver (reset before the first poll, or moved
//! later after the entry fired at `armed`), from the clock, as the entry would once
//! re-armed: tokio's `Instant::now()`, the clock of the runtime the caller is in.

use super::{away, Counts, COMPLETED, REGISTERED, RESET_UNPOLLED};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::runtime::Id;
use tokio::time::Instant;

/// A poll: tokio's, after arming the entry at the deadline where it is not there
/// (the first poll after resets that were stores, or a fire at an earlier `armed`).
#[inline]
pub(super) fn poll(
    mut entry: Pin<&mut tokio::time::Sleep>,
    deadline: Instant,
    flags: &mut u8,
    counts: &mut Counts,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if *flags & REGISTERED == 0 {
        // The first poll: tokio registers here (after resets that were stores, at
        // their final deadline).
        *flags |= REGISTERED;
        counts.registered();
        if deadline != entry.deadline() {
            entry.as_mut().reset(deadline);
        }
    } else if deadline != entry.deadline() && entry.is_elapsed() {
        // Fired at `armed`; the deadline moved later since (a store): re-arm there.
        counts.fired();
        counts.registered();
        entry.as_mut().reset(deadline);
    }
    // At most twice: the second time the entry is armed at the deadline.
    for _ in 0..2 {
        if entry.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if deadline == entry.deadline() {
            if *flags & COMPLETED == 0 {
                // Repeated `Ready` polls are not new fires.
                *flags |= COMPLETED;
                counts.fired();
            }
            return Poll::Ready(());
        }
        // It fired at `armed` between the check above and this poll (its driver runs
        // on another thread): re-arm at the deadline and poll again, which registers
        // this waker there (or finds it passed).
        counts.fired();
        counts.registered();
        entry.as_mut().reset(deadline);
    }
    Poll::Pending
}

/// A reset to `deadline` (stored by the caller), `flags` as they are after it;
/// `home`: the runtime it was made in.
#[inline]
pub(super) fn reset(
    entry: Pin<&mut tokio::time::Sleep>,
    deadline: Instant,
    flags: &mut u8,
    home: Id,
    counts: &mut Counts,
) {
    if *flags & REGISTERED == 0 {
        return; // the first poll arms it, at the final deadline
    }
    let armed = entry.deadline();
    if deadline == armed || (deadline > armed && !entry.is_elapsed() && !away(flags, home)) {
        // The same deadline: no move. Later while the entry waits (at home: see
        // `Sleep`'s `# Precision`): it fires at `armed`, and the poll that sees it
        // re-arms at the deadline.
        return;
    }
    counts.registered();
    entry.reset(deadline);
}

/// `Sleep::is_elapsed` (see the module docs).
#[inline]
pub(super) fn is_elapsed(entry: &tokio::time::Sleep, deadline: Instant, flags: u8) -> bool {
    if flags & REGISTERED == 0 {
        // Not in tokio's driver: tokio's would be if it was reset (tokio registers on
        // reset), and elapsed once the deadline passed.
        return flags & RESET_UNPOLLED != 0 && deadline <= Instant::now();
    }
    entry.is_elapsed() && (deadline == entry.deadline() || deadline <= Instant::now())
}
