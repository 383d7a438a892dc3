//! `Place`: where a `Sleep`'s deadline lives (tokio's own entry, or its thread's
//! deadline set), and the `Sleep`'s flags.

use super::counts::Counts;
use super::own_entry::OwnEntry;
use super::tokio_entry::TokioCounts;
use crate::core::NEVER;
use crate::request_sets::{Bound, Request};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::Waker;
use tokio::time::Instant;

pin_project! {
    /// Where a `Sleep`'s deadline lives.
    #[project = PlaceProj]
    pub(super) enum Place {
        // A `tokio::time::Sleep` of its own, made with it: on a runtime whose timers
        // no second worker contends for (see the type's docs). Armed at its
        // `deadline()`; the `Sleep`'s deadline is there or later (`tokio_entry`).
        Tokio {
            #[pin]
            entry: tokio::time::Sleep,
            // How far past `entry.deadline()` the deadline is, in nanoseconds: a
            // later reset stored while the entry waits (see `tokio_entry`).
            later: u64,
            counts: TokioCounts,
            // `AWAY_KNOWN`, `AWAY`, `REGISTERED`, `COMPLETED`.
            flags: u8,
        },
        InSet {
            // The deadline exactly as the caller gave it (in the time base's
            // nanoseconds only where needed: a `Sleep` dropped unpolled never
            // converts it).
            deadline: Instant,
            // The deadline set that judges it (its thread's set for the runtime it
            // was made in), and where its deadline is filed there, from the first
            // poll on.
            request: Request,
            // Where the filing stands. Invariant once filed: the filing expires no
            // later than the deadline's driver tick (at or before the deadline, or
            // within its tick), or it has expired and is re-filed at the deadline by
            // the next poll.
            filed_at: u64,
            // Its own tokio entry, once it left the set (see the docs above) or its
            // runtime shut down (see `# Shutdown`).
            own: Option<Pin<Box<OwnEntry>>>,
            // The waker of its last `Ready` poll. tokio's entry keeps the waker it was
            // last polled with, and a reset of a completed `Sleep` re-registers the
            // entry with it: the task is woken at the new deadline (inside the reset
            // if that has passed) without polling again. An entry of its own keeps it
            // as tokio's does.
            last_waker: Option<Waker>,
            counts: Counts,
            // `RESET_UNPOLLED`, `COMPLETED`, `AWAY_KNOWN`, `AWAY`.
            flags: u8,
        },
    }
}

impl Place {
    /// tokio's own entry at `deadline`, bound to the current runtime as tokio's
    /// `sleep_until` binds its own (and with tokio's panic where it panics).
    #[track_caller]
    #[inline(always)]
    pub(super) fn tokio(deadline: Instant) -> Self {
        Place::Tokio {
            entry: tokio::time::sleep_until(deadline),
            later: 0,
            counts: TokioCounts::default(),
            flags: 0,
        }
    }

    /// tokio's own entry at `deadline`, made by a thread whose `Sleep`s mostly fire
    /// in a multi-thread runtime's sets (see `request_sets::sleep_fate`): `FOR_FIRES`
    /// tells `tokio_entry`'s away rule that its runtime's clock is presumably the
    /// real one.
    #[track_caller]
    #[inline(always)]
    pub(super) fn tokio_for_fires(deadline: Instant) -> Self {
        Place::Tokio {
            entry: tokio::time::sleep_until(deadline),
            later: 0,
            counts: TokioCounts::default(),
            flags: FOR_FIRES,
        }
    }

    /// In `bound`'s set at `deadline`, filed at the first poll.
    #[inline]
    pub(super) fn in_set(deadline: Instant, bound: Bound) -> Self {
        Place::InSet {
            deadline,
            request: Request::bound_to(bound),
            filed_at: NEVER,
            own: None,
            last_waker: None,
            counts: Counts::default(),
            flags: 0,
        }
    }
}

/// Reset before the first poll (tokio registers on `reset`; `is_elapsed` answers as
/// if we had).
pub(super) const RESET_UNPOLLED: u8 = 1;
/// Resolved at `deadline`; cleared by `reset`. Repeated polls stop here.
pub(super) const COMPLETED: u8 = 2;
/// `AWAY` is known: judged at the first reset to a later deadline after the first
/// poll, so a `Sleep` that is never moved later never asks.
pub(super) const AWAY_KNOWN: u8 = 4;
/// Used outside the runtime it was made in: later resets take effect at once (see
/// the type's `# Precision`).
pub(super) const AWAY: u8 = 8;
/// On tokio's own entry: the entry is in tokio's driver (polled or reset), as
/// tokio's `registered`.
pub(super) const REGISTERED: u8 = 16;
/// On tokio's own entry: made instead of a filing, by a thread whose `Sleep`s mostly
/// fire in a multi-thread runtime's deadline sets (see `Place::tokio_for_fires`).
pub(super) const FOR_FIRES: u8 = 32;
/// On tokio's own entry made for fires: its first fire was counted in the thread's
/// fate (`request_sets::sleep_fate`); later ones, after resets, are not.
pub(super) const FIRE_COUNTED: u8 = 64;
