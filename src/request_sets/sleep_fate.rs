//! Whether this thread's fresh `Sleep`s mostly fire: then, on a multi-thread runtime,
//! they take tokio's own entry instead of the thread's deadline set.
//!
//! The sets win where a deadline is cancelled before it fires (a `sleep` that loses
//! its `select!`, a per-request deadline): filing it and giving it back stay on the
//! thread, where tokio's entry takes its driver's one lock, which every worker
//! shares, twice. A deadline that fires costs the set more than tokio's entry: its
//! one entry is re-armed in tokio's driver for it all the same, and the set's own
//! filing, expiry and wake come on top (a retry's backoff, a poll loop's pause,
//! a ticker's first tick). So each thread keeps a window of its `Sleep`s' first
//! filings and of their fires in the set: when at least three in four of a window's
//! filings fired, its fresh `Sleep`s take tokio's own entry (as on a current-thread
//! runtime, with the lazy later reset), and one in [`SAMPLE`] of them still goes
//! through the set, so that the next windows see when that changes. `Timeout`s keep
//! the sets: a request's deadline is there to be cancelled.
//!
//! Per thread rather than per set: a thread serves one runtime's tasks at a time,
//! and the counts stay on the thread (no shared line is written).

use std::cell::Cell;

/// Filings per window: the decision is taken again at the end of each.
const WINDOW: u8 = 32;
/// While fresh `Sleep`s take tokio's entry, one in this many is filed in the set all
/// the same, so that the windows go on.
const SAMPLE: u8 = 32;

#[derive(Clone, Copy, Default)]
struct Fate {
    /// First filings of `Sleep`s in this window.
    filed: u8,
    /// Fires of filed `Sleep`s in this window (saturating at `WINDOW`: a fire of a
    /// `Sleep` filed in an earlier window counts here).
    fired: u8,
    /// The last window's verdict: fresh `Sleep`s take tokio's entry.
    tokio_entry: bool,
    /// Fresh `Sleep`s made since the last sample went through the set.
    since_sample: u8,
}

thread_local! {
    static FATE: Cell<Fate> = const {
        Cell::new(Fate { filed: 0, fired: 0, tokio_entry: false, since_sample: 0 })
    };
}

/// A `Sleep` filed its deadline in a set for the first time (its first poll).
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

/// A filed `Sleep` completed: its deadline passed in the set.
#[inline]
pub(crate) fn fired() {
    let _ = FATE.try_with(|cell| {
        let mut fate = cell.get();
        fate.fired = fate.fired.saturating_add(1).min(WINDOW);
        cell.set(fate);
    });
}

/// Whether a fresh `Sleep` made here now takes tokio's own entry, with no runtime
/// lookup, because this thread's `Sleep`s mostly fire in a multi-thread runtime's
/// deadline sets (never where the sets are preferred: see [`filed`]). Ask
/// `thread_sets::takes_tokio_entry` first.
///
/// tokio binds the entry to the current runtime, as its own `sleep` does. A thread
/// pinned to its runtime (`thread_sets::pin_to_current`) makes its timers that
/// runtime's wherever it is: it takes tokio's entry only inside that runtime's
/// context (a runtime lookup: pinned threads skip the set's). A thread that moved to
/// a current-thread runtime's context learns it at its next lookup, at most one
/// sample later, and forgets the verdict there (`thread_sets::learn_tokio_entry`).
#[inline(always)]
pub(crate) fn fresh_sleep_takes_tokio_entry() -> bool {
    // One thread-local byte on the sets' path; the rest only where sleeps fire.
    sleeps_fire() && fresh_sleep_takes_tokio_entry_now()
}

/// [`fresh_sleep_takes_tokio_entry`] on a thread whose `Sleep`s fire.
#[inline(never)]
fn fresh_sleep_takes_tokio_entry_now() -> bool {
    if !takes_tokio_entry() {
        return false; // the sample: through the lookup and the set
    }
    match super::thread_sets::last_pinned_runtime() {
        Some(runtime) => {
            tokio::runtime::Handle::try_current().is_ok_and(|handle| handle.id() == runtime)
        }
        None => true,
    }
}

/// Whether the last window's `Sleep`s mostly fired (one thread-local read: the
/// sets' path asks only this).
#[inline(always)]
fn sleeps_fire() -> bool {
    FATE.with(|cell| cell.get().tokio_entry)
}

/// Whether a fresh `Sleep` made now on a multi-thread runtime takes tokio's own entry
/// by the verdict (see the module docs): [`sleeps_fire`], but one in [`SAMPLE`].
#[inline]
fn takes_tokio_entry() -> bool {
    FATE.try_with(|cell| {
        let mut fate = cell.get();
        if !fate.tokio_entry {
            return false;
        }
        fate.since_sample += 1;
        let sample = fate.since_sample >= SAMPLE;
        if sample {
            fate.since_sample = 0;
        }
        cell.set(fate);
        !sample
    })
    .unwrap_or(false)
}

/// Starts the thread's windows afresh, on the sets (`prefer_sets` changed).
pub(crate) fn forget() {
    let _ = FATE.try_with(|cell| cell.set(Fate::default()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset() {
        FATE.with(|cell| cell.set(Fate::default()));
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
    fn three_in_four_fired_take_tokio_entry_and_one_in_32_still_samples_the_set() {
        reset();
        assert!(!takes_tokio_entry(), "a fresh thread takes the sets");
        window(WINDOW * 3 / 4 - 1);
        assert!(!takes_tokio_entry(), "fewer than three in four fired");
        window(WINDOW * 3 / 4);
        let taken = (0..320).filter(|_| takes_tokio_entry()).count();
        assert_eq!(taken, 310, "one in 32 goes through the set");
        window(WINDOW / 2);
        assert!(!takes_tokio_entry(), "half cancelled: back to the sets");
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
        assert!(takes_tokio_entry());
        // The window's counts restarted: no fires carried over.
        window(0);
        assert!(!takes_tokio_entry());
    }
}
