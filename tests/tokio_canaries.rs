//! Canaries: the tokio behaviours this crate relies on beyond what tokio documents,
//! each checked on tokio's own `Sleep`, so that a tokio release that changes one
//! fails here by name (CI runs this file on the oldest tokio `Cargo.toml` allows and
//! on the newest) instead of as a lost or early fire in a user's program.
//!
//! - The deadline sets re-arm their entry without polling it: tokio's default driver
//!   keeps the waker an entry was last polled with across a reset.
//! - A reset into a tick the driver has passed fires the entry inside the reset, and
//!   wakes that waker before the reset returns (the sets hand that wake to the lock
//!   holder, and learn the driver's tick boundaries from it).
//! - The driver fires a deadline at the first millisecond tick at or after it,
//!   counted from when the driver was built (the sets' same-tick rules).
//! - Under `tokio_unstable`, the per-worker timer makes a new entry on reset, which
//!   holds no waker until polled (the sets probe for it: `tests/alt_timer.rs`).

mod common;

use common::{ms, poll_with, CountingWaker};
use std::time::Duration;
use tokio::time::{self, Instant};

#[tokio::test(start_paused = true)]
async fn a_tokio_sleep_keeps_its_waker_across_a_reset() {
    let (count, waker) = CountingWaker::new();
    let start = Instant::now();
    let sleep = time::sleep_until(start + ms(100));
    tokio::pin!(sleep);
    assert!(poll_with(sleep.as_mut(), &waker).is_pending());
    // Earlier and later, never polled again: the entry still wakes that waker.
    sleep.as_mut().reset(start + ms(10));
    sleep.as_mut().reset(start + ms(20));
    sleep.as_mut().reset(start + ms(5));
    time::advance(ms(4)).await;
    assert_eq!(count.wakes(), 0, "woken before the deadline");
    time::advance(ms(1)).await;
    assert_eq!(
        count.wakes(),
        1,
        "tokio no longer keeps an entry's waker across a reset"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tokio_sleep_reset_into_a_passed_tick_wakes_inside_the_reset() {
    let (count, waker) = CountingWaker::new();
    let start = Instant::now();
    let sleep = time::sleep_until(start + ms(100));
    tokio::pin!(sleep);
    assert!(poll_with(sleep.as_mut(), &waker).is_pending());
    time::advance(ms(10)).await;
    sleep.as_mut().reset(start + ms(3));
    assert_eq!(
        count.wakes(),
        1,
        "tokio no longer fires an entry inside a reset into a passed tick"
    );
    assert!(sleep.is_elapsed());
}

#[tokio::test(start_paused = true)]
async fn the_tokio_driver_fires_deadlines_at_the_millisecond_ticks_from_its_start() {
    let start = Instant::now();
    let within = time::sleep_until(start + Duration::from_micros(10_300));
    let at_tick = time::sleep_until(start + ms(11));
    tokio::pin!(within, at_tick);
    let (count, waker) = CountingWaker::new();
    assert!(poll_with(within.as_mut(), &waker).is_pending());
    assert!(poll_with(at_tick.as_mut(), &waker).is_pending());
    // 10.3 ms fires at the 11 ms tick, with the deadline on it: not at 10.3 ms.
    time::advance(Duration::from_micros(10_500)).await;
    assert_eq!(
        count.wakes(),
        0,
        "tokio fires between its millisecond ticks"
    );
    time::advance(Duration::from_micros(500)).await;
    assert_eq!(
        count.wakes(),
        2,
        "tokio's ticks moved off the millisecond grid"
    );
    // A reset to a deadline a nanosecond past the last processed tick does not fire
    // inside the reset; one on it does: the boundary the sets learn.
    within
        .as_mut()
        .reset(start + ms(11) + Duration::from_nanos(1));
    assert!(
        !within.is_elapsed(),
        "a deadline past the processed tick fired"
    );
    within.as_mut().reset(start + ms(11));
    assert!(
        within.is_elapsed(),
        "a deadline on the processed tick did not fire"
    );
}
