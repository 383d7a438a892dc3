//! Finding a timer driver's tick boundaries from outside it.
//!
//! tokio's driver fires a deadline `d` once it has processed the tick
//! `ceil((d - start) / 1 ms)`, `start` being when the driver was built: the deadlines
//! it has fired are exactly those at or before `start + k ms`, `k` the last tick it
//! processed, and a reset to a deadline it has passed fires the entry inside the
//! reset. So the last deadline whose reset fires at once is a tick boundary. A
//! deadline set finds one by halving the interval between a deadline that fires and
//! one that does not (about twenty resets of its own entry, once per binding), and
//! only ever uses it to spare a re-arm (a later fire in the same tick is the same
//! fire) and to choose where to probe: nothing expires on it alone.
//!
//! Here the search takes the driver as a function (`fires(at)`: reset the entry to
//! `at`, did it fire at once?), so that it is tested against a driver that turns
//! while it searches, as a multi-thread runtime's may.

use super::service::TICK_NANOS;

/// A tick boundary's offset within the millisecond (`at % TICK_NANOS` of every
/// boundary), found through `fires`, the clock being `now`; `None` when the driver
/// cannot be told (it moves too fast, or never fires).
///
/// The end is confirmed by two resets in a row (the boundary fires, a nanosecond
/// later does not). A driver only moves forward, so if it turned between those two,
/// the first would have had to fire under the older state and the second fail under
/// the newer one, which no point does: whatever the search converged to while the
/// driver moved, only a boundary passes.
pub fn find_boundary(now: u64, mut fires: impl FnMut(u64) -> bool) -> Option<u64> {
    // A deadline that does not fire (after the clock), then gallop back from it to
    // one that does (the driver may not have turned for a while).
    let mut late = now.saturating_add(TICK_NANOS);
    let mut step = TICK_NANOS;
    let mut early = loop {
        let at = late.saturating_sub(step);
        if fires(at) {
            break at;
        }
        if at == 0 {
            return None;
        }
        late = at;
        step = step.saturating_mul(2);
    };
    if fires(late) {
        return None; // moving too fast to tell
    }
    while late - early > 1 {
        let mid = early + (late - early) / 2;
        if fires(mid) {
            early = mid;
        } else {
            late = mid;
        }
    }
    let boundary = fires(early) && !fires(early + 1);
    boundary.then_some(early % TICK_NANOS)
}

/// The end of the tick that holds `at` (the first boundary at or after it) on a grid
/// whose boundaries are `offset` plus whole ticks. Saturates (a saturated deadline
/// has no tick).
#[inline]
pub fn tick_end(offset: u64, at: u64) -> u64 {
    let rem = (at % TICK_NANOS + TICK_NANOS - offset) % TICK_NANOS;
    if rem == 0 {
        at
    } else {
        at.saturating_add(TICK_NANOS - rem)
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    /// A driver that has processed every tick up to `processed` (its ticks end at a
    /// fixed offset plus whole milliseconds) and processes one more tick after each
    /// of the call numbers in `turns` (as a worker turning it meanwhile).
    struct MovingDriver {
        processed: u64,
        calls: usize,
        turns: Vec<usize>,
    }

    impl MovingDriver {
        fn fires(&mut self, at: u64) -> bool {
            self.calls += 1;
            let fired = at <= self.processed;
            if self.turns.contains(&self.calls) {
                self.processed += TICK_NANOS;
            }
            fired
        }
    }

    fn driver(offset: u64, turns: Vec<usize>) -> MovingDriver {
        // Built at `offset`, 7 ticks processed; the clock 0.4 ms into the next.
        MovingDriver {
            processed: offset + 7 * TICK_NANOS,
            calls: 0,
            turns,
        }
    }

    const NOW_INTO_TICK: u64 = 400_000;

    #[test]
    fn a_still_driver_gives_its_boundary() {
        for offset in [0, 1, 123_456, TICK_NANOS - 1] {
            let mut d = driver(offset, Vec::new());
            let now = d.processed + NOW_INTO_TICK;
            assert_eq!(find_boundary(now, |at| d.fires(at)), Some(offset));
        }
    }

    #[test]
    fn a_driver_that_turns_during_the_search_gives_its_boundary_or_nothing() {
        // One turn after any call of the search, or two: never a point that is not
        // a boundary (a wrong one would let a filing spare a move it needs).
        let offset = 345_678;
        let mut wrong = Vec::new();
        for first in 1..70 {
            for second in [None, Some(first + 1), Some(first + 5)] {
                let turns = std::iter::once(first).chain(second).collect();
                let mut d = driver(offset, turns);
                let now = d.processed + NOW_INTO_TICK;
                let found = find_boundary(now, |at| d.fires(at));
                if found.is_some_and(|found| found != offset) {
                    wrong.push((first, second, found));
                }
            }
        }
        assert!(wrong.is_empty(), "not a boundary: {wrong:?}");
    }

    #[test]
    fn a_driver_that_never_fires_gives_nothing() {
        assert_eq!(find_boundary(5 * TICK_NANOS, |_| false), None);
        assert_eq!(find_boundary(5 * TICK_NANOS, |_| true), None);
    }
}
