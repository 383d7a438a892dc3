//! `Sleep::is_elapsed` and `poll` read as tokio's after every sequence of resets,
//! polls and clock advances, unpolled included, on both places a `Sleep`'s deadline
//! can live: tokio's own entry (a current-thread runtime's timers) and the deadline
//! sets (forced with the crate's test hook, as on a multi-thread runtime).
//!
//! Random sequences on a paused clock that moves in whole milliseconds (as tokio's
//! driver ticks), with deadlines on and off the millisecond grid: after every step,
//! ours and a `tokio::time::Sleep` given the same calls must agree on `is_elapsed()`,
//! and on the poll's answer where the step polls.

mod common;

use common::{ms, poll_with, watchdog, CountingWaker, Rng};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug)]
enum Step {
    /// Reset both to now + this many microseconds (negative: in the past).
    Reset(i64),
    /// Reset both to the deadline they have.
    ResetSame,
    /// Poll both (each with a waker of its own).
    Poll,
    /// Advance the paused clock by whole milliseconds.
    Advance(u64),
}

fn step(rng: &mut Rng) -> Step {
    match rng.below(10) {
        0..=2 => {
            let us = rng.below(12_000) as i64 - 2_000;
            // Half of them on the millisecond grid.
            Step::Reset(if rng.below(2) == 0 {
                us / 1_000 * 1_000
            } else {
                us
            })
        }
        3 => Step::ResetSame,
        4..=6 => Step::Poll,
        _ => Step::Advance(rng.below(4)),
    }
}

fn at(now: Instant, us: i64) -> Instant {
    if us >= 0 {
        now + Duration::from_micros(us as u64)
    } else {
        now - Duration::from_micros(us.unsigned_abs())
    }
}

/// Runs `cases` random sequences; `sets`: the deadline sets instead of tokio's entry.
fn run(cases: u64, sets: bool) {
    lazy_deadline::__private::prefer_sets(sets);
    for seed in 0..cases {
        let mut rng = Rng::new(seed + if sets { 1 << 32 } else { 0 });
        let steps: Vec<Step> = (0..24).map(|_| step(&mut rng)).collect();
        let runtime = common::paused_runtime();
        runtime.block_on(async {
            let first = Instant::now() + Duration::from_micros(rng.below(5_000));
            let ours = lazy_deadline::sleep_until(first);
            let theirs = tokio::time::sleep_until(first);
            tokio::pin!(ours, theirs);
            let (_, our_waker) = CountingWaker::new();
            let (_, their_waker) = CountingWaker::new();
            for (i, &step) in steps.iter().enumerate() {
                let mut polled = None;
                match step {
                    Step::Reset(us) => {
                        let deadline = at(Instant::now(), us);
                        ours.as_mut().reset(deadline);
                        theirs.as_mut().reset(deadline);
                    }
                    Step::ResetSame => {
                        let deadline = theirs.deadline();
                        ours.as_mut().reset(deadline);
                        theirs.as_mut().reset(deadline);
                    }
                    Step::Poll => {
                        polled = Some((
                            poll_with(ours.as_mut(), &our_waker).is_ready(),
                            poll_with(theirs.as_mut(), &their_waker).is_ready(),
                        ));
                    }
                    Step::Advance(n) => tokio::time::advance(ms(n)).await,
                }
                let context = || format!("seed {seed} (sets: {sets}), step {i} of {steps:?}");
                if let Some((ours_ready, theirs_ready)) = polled {
                    assert_eq!(ours_ready, theirs_ready, "poll: {}", context());
                }
                assert_eq!(
                    ours.is_elapsed(),
                    theirs.is_elapsed(),
                    "is_elapsed: {}",
                    context()
                );
                assert_eq!(ours.deadline(), theirs.deadline(), "{}", context());
            }
        });
    }
    lazy_deadline::__private::prefer_sets(false);
}

#[test]
fn on_tokios_entry_is_elapsed_and_poll_read_as_tokios() {
    watchdog(
        "tokio's entry differential",
        Duration::from_secs(120),
        || run(1_500, false),
    );
}

#[test]
fn in_the_deadline_sets_is_elapsed_and_poll_read_as_tokios() {
    watchdog(
        "deadline sets differential",
        Duration::from_secs(120),
        || run(1_500, true),
    );
}

/// The review's sequence, on one `Sleep`: it completes at its deadline, is reset
/// later, then earlier but still in the future, and the clock reaches that deadline:
/// unpolled, it is elapsed, as tokio's.
#[test]
fn completed_then_later_then_earlier_is_elapsed_when_the_clock_gets_there() {
    common::in_both_places(|sets| async move {
        let start = Instant::now();
        let ours = lazy_deadline::sleep_until(start + ms(10));
        tokio::pin!(ours);
        ours.as_mut().await;
        ours.as_mut().reset(Instant::now() + ms(100));
        ours.as_mut().reset(Instant::now() + ms(20));
        assert!(!ours.is_elapsed(), "sets: {sets}");
        tokio::time::advance(ms(20)).await;
        assert!(ours.is_elapsed(), "sets: {sets}");
    });
}

/// A `Sleep` reset later while it waits, never polled again: once the clock passes
/// the new deadline it is elapsed (a task that checks `is_elapsed()` while other work
/// wakes it sees the deadline pass), and not before.
#[test]
fn reset_later_and_unpolled_is_elapsed_once_the_new_deadline_passed() {
    common::in_both_places(|sets| async move {
        let start = Instant::now();
        let ours = lazy_deadline::sleep_until(start + ms(10));
        tokio::pin!(ours);
        let (_, waker) = CountingWaker::new();
        assert!(poll_with(ours.as_mut(), &waker).is_pending());
        ours.as_mut().reset(start + ms(30));
        tokio::time::advance(ms(10)).await;
        assert!(!ours.is_elapsed(), "sets: {sets}");
        tokio::time::advance(ms(19)).await;
        assert!(!ours.is_elapsed(), "sets: {sets}");
        tokio::time::advance(ms(1)).await;
        assert!(ours.is_elapsed(), "sets: {sets}");
    });
}

/// A completed `Sleep` reset again and again to the deadline it has, and polled:
/// the same deadline is no move, so nothing is registered again.
#[test]
fn the_same_deadline_again_after_completion_registers_nothing() {
    common::in_both_places(|sets| async move {
        let ours = lazy_deadline::sleep(ms(5));
        tokio::pin!(ours);
        ours.as_mut().await;
        let registered = ours.stats().registrations;
        let deadline = ours.deadline();
        for _ in 0..1_000 {
            ours.as_mut().reset(deadline);
            ours.as_mut().await;
        }
        assert_eq!(ours.stats().registrations, registered, "sets: {sets}");
        assert!(ours.is_elapsed());
    });
}
