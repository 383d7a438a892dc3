//! The keepalive ticker's rows of the headline table (see `main.rs`): an `Interval`
//! postponed on every message, tokio's against ours, and its pending poll.

use crate::common::{poll_once, PACKET};
use crate::table::Bench;
use std::hint::black_box;
use std::time::Duration;
use tokio::time::Instant;

const KEEPALIVE: Duration = Duration::from_secs(15);

/// Both tickers have ticked once (the first tick is immediate) and been polled
/// pending, so their next tick is registered with the driver, as in a running
/// protocol task.
fn armed_pair() -> (tokio::time::Interval, lazy_deadline::Interval) {
    let mut theirs = tokio::time::interval(KEEPALIVE);
    let mut ours = lazy_deadline::interval(KEEPALIVE);
    for _ in 0..2 {
        let _ = poll_once(std::pin::pin!(theirs.tick()));
        let _ = poll_once(std::pin::pin!(ours.tick()));
    }
    (theirs, ours)
}

pub fn keepalive(bench: &mut Bench, base: Instant) {
    let section = "keepalive ticker (Interval) per message";
    let (mut theirs, mut ours) = armed_pair();
    bench.pair(
        section,
        "reset() on every message (reads the clock)",
        2_000_000,
        ("tokio Interval::reset", |n| {
            for _ in 0..n {
                theirs.reset();
            }
        }),
        ("lazy Interval::reset", |n| {
            for _ in 0..n {
                ours.reset();
            }
        }),
    );
    // The caller already read the clock for the message: no clock read in the row.
    let (mut theirs, mut ours) = armed_pair();
    let (mut now_t, mut now_o) = (base, base);
    bench.pair(
        section,
        "reset_at(now + period), one clock read per batch",
        2_000_000,
        ("tokio Interval::reset_at", |n| {
            for _ in 0..n {
                now_t += PACKET;
                theirs.reset_at(black_box(now_t) + KEEPALIVE);
            }
        }),
        ("lazy Interval::reset_at", |n| {
            for _ in 0..n {
                now_o += PACKET;
                ours.reset_at(black_box(now_o) + KEEPALIVE);
            }
        }),
    );
    let (mut theirs, mut ours) = armed_pair();
    bench.pair(
        "poll a timer that is not due (a select! loop's turn)",
        "Interval::poll_tick returning Pending",
        2_000_000,
        ("tokio Interval", |n| {
            for _ in 0..n {
                black_box(poll_once(std::pin::pin!(theirs.tick())).is_pending());
            }
        }),
        ("lazy Interval", |n| {
            for _ in 0..n {
                black_box(poll_once(std::pin::pin!(ours.tick())).is_pending());
            }
        }),
    );
}
