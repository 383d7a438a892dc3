//! Whether this thread's fresh `Sleep`s mostly fire: then, on a multi-thread runtime,
//! they take tokio's own entry instead of the thread's deadline set.
//!
//! The sets win where a deadline is cancelled before it fires (a `sleep` that loses
//! its `select!`, a per-request deadline): filing it and giving it back stay on the
//! thread, where tokio's entry takes its driver's one lock, which every worker
//! shares, twice. A deadline that fires costs the set more than tokio's entry: its
//! one entry is re-armed in tokio's driver for it all the same, and the set's own
//! filing, expiry and wake come on top (a retry's backoff, a poll loop's pause,
//! a ticker's first tick). So each thread keeps a window of its fresh `Sleep`s'
//! first registrations (a filing in the set, or tokio's entry entering its driver)
//! and of their first fires, wherever they live: when at least three in four of a
//! window's fired, its fresh `Sleep`s take tokio's own entry (as on a current-thread
//! runtime, with the lazy later reset), and when fewer do, the set again. Every
//! `Sleep` counts, in either place, so no pattern of fired and cancelled ones can
//! hide from the count. `Timeout`s keep the sets: a request's deadline is there to
//! be cancelled.
//!
//! Per thread rather than per set: a thread serves one runtime's tasks at a time,
//! and the counts stay on the thread (no shared line is written). A `Sleep` counts
//! on the thread that polls it, usually the one that made it. The counts are
//! approximate where that helps nothing: a fire counts in the window it comes in
//! (at most a window's worth), and a filing that a reset found already passed files
//! again.

use std::cell::Cell;

/// Registrations per window: the decision is taken again at the end of each.
const WINDOW: u8 = 32;
/// While fresh `Sleep`s take tokio's entry with no lookup, one in this many looks
/// its runtime up all the same, so that a thread that moved to a current-thread
/// runtime's context learns it (and forgets the verdict: see [`forget`]).
const CHECK: u8 = 32;

#[derive(Clone, Copy, Default)]
struct Fate {
    /// First registrations of fresh `Sleep`s in this window.
    filed: u8,
    /// First fires of such `Sleep`s in this window (saturating at `WINDOW`: a fire
    /// of a `Sleep` registered in an earlier window counts here).
    fired: u8,
    /// The last window's verdict: fresh `Sleep`s take tokio's entry.
    tokio_entry: bool,
    /// Fresh `Sleep`s made with no lookup since the last one that looked up.
    since_check: u8,
}

thread_local! {
    static FATE: Cell<Fate> = const {
        Cell::new(Fate { filed: 0, fired: 0, tokio_entry: false, since_check: 0 })
    };
}

/// A fresh `Sleep` registered its deadline for the first time: filed in its set, or
/// its entry (made for fires: `FOR_FIRES`) entered tokio's driver.
#[inline]
pub(crate) fn filed() {
    let _ = FATE.try_with(|cell| {
        let mut fate = cell.get();
        fate.filed += 1;
        if fate.filed >= WINDOW {
            // Three in four fired: tokio's entry costs these less (unless the sets
            // are preferred: the crate's tests of the sets).
            fate.tokio_entry = u32::from(fate.fired) * 4 >= u32::from(fate.filed) * 3
                && !super::thread_sets::sets_preferred();
            fate.filed = 0;
            fate.fired = 0;
        }
        cell.set(fate);
    });
}

/// A fresh `Sleep` counted by [`filed`] completed for the first time.
#[inline]
pub(crate) fn fired() {
    let _ = FATE.try_with(|cell| {
        let mut fate = cell.get();
        fate.fired = fate.fired.saturating_add(1).min(WINDOW);
        cell.set(fate);
    });
}

/// Whether the last window's `Sleep`s mostly fired (one thread-local read: the
/// sets' path asks only this). Never where the sets are preferred: see [`filed`].
#[inline(always)]
pub(crate) fn sleeps_fire() -> bool {
    FATE.with(|cell| cell.get().tokio_entry)
}

/// Whether a fresh `Sleep` made here now, on a thread whose `Sleep`s fire
/// ([`sleeps_fire`]), takes tokio's own entry with no runtime lookup (ask
/// `thread_sets::takes_tokio_entry` first; where this says no, the lookup asks
/// [`after_lookup`]).
///
/// tokio binds the entry to the current runtime, as its own `sleep` does. A thread
/// pinned to its runtime (`thread_sets::pin_to_current`) makes its timers that
/// runtime's wherever it is: it takes tokio's entry only inside that runtime's
/// context (a runtime lookup: pinned threads skip the set's). Another thread looks
/// its runtime up once in [`CHECK`]: one that moved to a current-thread runtime's
/// context learns it there and forgets the verdict (`thread_sets::learn_tokio_entry`).
#[inline(never)]
pub(crate) fn takes_tokio_entry_unlooked() -> bool {
    match super::thread_sets::last_pinned_runtime() {
        Some(runtime) => {
            tokio::runtime::Handle::try_current().is_ok_and(|handle| handle.id() == runtime)
        }
        None => !check_due(),
    }
}

/// Whether a fresh `Sleep` of a thread whose `Sleep`s fire, whose runtime lookup found
/// the thread's set for the current runtime (a multi-thread one), takes tokio's own
/// entry all the same: yes where the thread is not pinned (that lookup was the
/// runtime check of [`takes_tokio_entry_unlooked`]); a pinned thread's lookup finds
/// its own runtime's set wherever it is, and files there.
#[inline]
pub(crate) fn after_lookup() -> bool {
    super::thread_sets::last_pinned_runtime().is_none()
}

/// Whether this fresh `Sleep` looks its runtime up (one in [`CHECK`]).
#[inline]
fn check_due() -> bool {
    FATE.try_with(|cell| {
        let mut fate = cell.get();
        fate.since_check += 1;
        let due = fate.since_check >= CHECK;
        if due {
            fate.since_check = 0;
        }
        cell.set(fate);
        due
    })
    .unwrap_or(true)
}

/// Starts the thread's windows afresh, on the sets (`prefer_sets` changed, or the
/// thread's lookup found a current-thread runtime).
pub(crate) fn forget() {
    let _ = FATE.try_with(|cell| cell.set(Fate::default()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset() {
        FATE.with(|cell| cell.set(Fate::default()));
    }

    /// What `sleep` asks before any lookup.
    fn fresh_sleep_takes_tokio_entry() -> bool {
        sleeps_fire() && takes_tokio_entry_unlooked()
    }

    fn window(fired: u8) {
        for i in 0..WINDOW {
            if i < fired {
                super::fired();
            }
            filed();
        }
    }

    #[test]
    fn three_in_four_fired_take_tokio_entry_and_one_in_32_looks_its_runtime_up() {
        reset();
        assert!(
            !fresh_sleep_takes_tokio_entry(),
            "a fresh thread takes the sets"
        );
        window(WINDOW * 3 / 4 - 1);
        assert!(!sleeps_fire(), "fewer than three in four fired");
        window(WINDOW * 3 / 4);
        assert!(sleeps_fire());
        let taken = (0..320).filter(|_| fresh_sleep_takes_tokio_entry()).count();
        assert_eq!(taken, 310, "one in 32 looks its runtime up");
        assert!(
            sleeps_fire() && after_lookup(),
            "and takes tokio's entry after the lookup"
        );
        window(WINDOW / 2);
        assert!(
            !fresh_sleep_takes_tokio_entry(),
            "half cancelled: back to the sets"
        );
        assert!(!sleeps_fire());
    }

    #[test]
    fn the_sets_preferred_never_take_tokio_entry() {
        reset();
        super::super::thread_sets::prefer_sets(true);
        window(WINDOW);
        window(WINDOW);
        let preferred = sleeps_fire();
        super::super::thread_sets::prefer_sets(false);
        assert!(!preferred, "the crate's tests of the sets keep them");
        window(WINDOW);
        assert!(
            sleeps_fire(),
            "no longer preferred: the verdict counts again"
        );
    }

    #[test]
    fn fires_left_over_from_an_earlier_window_count_at_most_a_window() {
        reset();
        for _ in 0..200 {
            fired();
        }
        for _ in 0..WINDOW {
            filed();
        }
        assert!(sleeps_fire());
        // The window's counts restarted: no fires carried over.
        window(0);
        assert!(!sleeps_fire());
    }
}
