//! Wake-driven paused-clock differential: `lazy_deadline::Interval` against
//! `tokio::time::Interval`. Each ticker is owned by a task running the loop a
//! protocol task runs (`select!` over its ticker and its messages), polled only
//! when woken; both receive the same random operations at the same instants:
//! resets of every kind (later, earlier, now, into the past), missed-tick behaviour
//! changes, stalls of the owner (a busy task that misses ticks) and clock advances
//! on and off the millisecond grid. Both must tick the same instants (the value
//! `tick` returns) at the same virtual instants, including every burst, delay and
//! skip after a stall.

mod common;

use common::paused_runtime;
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{self, Instant};

#[derive(Clone, Copy, Debug)]
enum Behavior {
    Burst,
    Delay,
    Skip,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Reset,
    ResetImmediately,
    ResetAfterUs(u64),
    /// Microseconds from now; negative: in the past.
    ResetAtUs(i64),
    Behavior(Behavior),
    /// The owner is busy for this long (microseconds) and polls nothing.
    StallUs(u64),
    /// Moves the clock: whole milliseconds one at a time, or microseconds at once.
    Advance(u64, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Reset),
        1 => Just(Op::ResetImmediately),
        2 => prop_oneof![(0u64..60).prop_map(|ms| ms * 1_000), 0u64..60_000].prop_map(Op::ResetAfterUs),
        2 => prop_oneof![(-20i64..60).prop_map(|ms| ms * 1_000), -20_000i64..60_000].prop_map(Op::ResetAtUs),
        1 => prop_oneof![Just(Behavior::Burst), Just(Behavior::Delay), Just(Behavior::Skip)].prop_map(Op::Behavior),
        1 => prop_oneof![(0u64..80).prop_map(|ms| ms * 1_000), 0u64..80_000].prop_map(Op::StallUs),
        6 => prop_oneof![
            (0u64..40).prop_map(|ms| Op::Advance(ms, true)),
            (0u64..40_000).prop_map(|us| Op::Advance(us, false)),
        ],
    ]
}

/// What one side saw: (tick value, instant it was observed), in order.
type Ticks = Arc<Mutex<Vec<(Instant, Instant)>>>;

/// The owner loop, for either interval type (they share every method name).
macro_rules! spawn_owner {
    ($interval:expr, $behavior:path, $rx:expr, $ticks:expr) => {{
        let mut interval = $interval;
        let mut rx: mpsc::UnboundedReceiver<Op> = $rx;
        let ticks: Ticks = $ticks;
        tokio::spawn(async move {
            use $behavior as B;
            loop {
                tokio::select! {
                    biased;
                    op = rx.recv() => match op {
                        None => return,
                        Some(Op::Reset) => interval.reset(),
                        Some(Op::ResetImmediately) => interval.reset_immediately(),
                        Some(Op::ResetAfterUs(us)) => interval.reset_after(Duration::from_micros(us)),
                        Some(Op::ResetAtUs(us)) => {
                            let now = Instant::now();
                            let at = if us >= 0 {
                                now + Duration::from_micros(us as u64)
                            } else {
                                now - Duration::from_micros(us.unsigned_abs())
                            };
                            interval.reset_at(at);
                        }
                        Some(Op::Behavior(b)) => interval.set_missed_tick_behavior(match b {
                            Behavior::Burst => B::Burst,
                            Behavior::Delay => B::Delay,
                            Behavior::Skip => B::Skip,
                        }),
                        Some(Op::StallUs(us)) => time::sleep(Duration::from_micros(us)).await,
                        Some(Op::Advance(..)) => {}
                    },
                    due = interval.tick() => ticks.lock().unwrap().push((due, Instant::now())),
                }
            }
        })
    }};
}

fn run(period_us: u64, start_us: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let origin = Instant::now();
        let period = Duration::from_micros(period_us);
        let start = origin + Duration::from_micros(start_us);
        let (ours_ticks, tokio_ticks): (Ticks, Ticks) = Default::default();
        let (ours_tx, ours_rx) = mpsc::unbounded_channel();
        let (tokio_tx, tokio_rx) = mpsc::unbounded_channel();
        let ours = spawn_owner!(
            lazy_deadline::interval_at(start, period),
            lazy_deadline::MissedTickBehavior,
            ours_rx,
            ours_ticks.clone()
        );
        let peer = spawn_owner!(
            time::interval_at(start, period),
            tokio::time::MissedTickBehavior,
            tokio_rx,
            tokio_ticks.clone()
        );
        let settle = || async {
            for _ in 0..6 {
                tokio::task::yield_now().await;
            }
        };
        settle().await;
        for op in ops.into_iter().chain([Op::Advance(200, true)]) {
            match op {
                Op::Advance(n, true) => {
                    for _ in 0..n {
                        time::advance(Duration::from_millis(1)).await;
                        settle().await;
                    }
                }
                Op::Advance(us, false) => time::advance(Duration::from_micros(us)).await,
                op => {
                    ours_tx.send(op).unwrap();
                    tokio_tx.send(op).unwrap();
                }
            }
            settle().await;
            let (ours, peer) = (ours_ticks.lock().unwrap(), tokio_ticks.lock().unwrap());
            if *ours != *peer {
                // The first difference only: a burst can be thousands of ticks.
                let at = ours
                    .iter()
                    .zip(peer.iter())
                    .take_while(|(a, b)| a == b)
                    .count();
                let show = |ticks: &[(Instant, Instant)]| -> Vec<(Duration, Duration)> {
                    let end = ticks.len().min(at + 3);
                    ticks[at.min(end)..end]
                        .iter()
                        .map(|&(due, at)| (due - origin, at - origin))
                        .collect()
                };
                return Err(TestCaseError::fail(format!(
                    "after {op:?} at +{:?}: from tick {at} on, ours ticked {:?} ({} in all), \
                     tokio {:?} ({} in all) (due, observed)",
                    Instant::now() - origin,
                    show(&ours),
                    ours.len(),
                    show(&peer),
                    peer.len()
                )));
            }
        }
        drop((ours_tx, tokio_tx));
        ours.await.unwrap();
        peer.await.unwrap();
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn interval_ticks_as_tokio_does(
        period_us in prop_oneof![(1u64..50).prop_map(|ms| ms * 1_000), 200u64..50_000],
        start_us in prop_oneof![Just(0u64), (0u64..20).prop_map(|ms| ms * 1_000), 0u64..20_000],
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run(period_us, start_us, ops)?;
    }
}

/// The keepalive pattern as a fixed case: postponed on every message, it ticks
/// only after a quiet period.
#[test]
fn a_ticker_postponed_on_every_message_ticks_after_the_quiet_period() {
    let mut ops = Vec::new();
    for _ in 0..20 {
        ops.push(Op::Advance(7, true));
        ops.push(Op::Reset);
    }
    ops.push(Op::Advance(40, true));
    run(15_000, 0, ops).unwrap();
}

/// A burst of missed ticks with a sub-millisecond period: the same ticks, each
/// observed no later than tokio's and never before it is due. (Exact instants are
/// not compared here: with thousands of ticks due at once, how many fit in one turn
/// of the owner task decides which instant sees them, and ours is rescheduled at
/// least as soon as tokio's; the random cases keep periods of 200 µs and more.)
#[test]
fn a_burst_catches_up_no_later_than_tokio() {
    for period_us in [1, 10, 100] {
        paused_runtime().block_on(async move {
            let period = Duration::from_micros(period_us);
            let (ours_ticks, tokio_ticks): (Ticks, Ticks) = Default::default();
            let (ours_tx, ours_rx) = mpsc::unbounded_channel();
            let (tokio_tx, tokio_rx) = mpsc::unbounded_channel();
            let start = Instant::now();
            let ours_task = spawn_owner!(
                lazy_deadline::interval_at(start, period),
                lazy_deadline::MissedTickBehavior,
                ours_rx,
                ours_ticks.clone()
            );
            let peer_task = spawn_owner!(
                time::interval_at(start, period),
                tokio::time::MissedTickBehavior,
                tokio_rx,
                tokio_ticks.clone()
            );
            for _ in 0..20 {
                time::advance(Duration::from_millis(1)).await;
                for _ in 0..6 {
                    tokio::task::yield_now().await;
                }
            }
            let ours = std::mem::take(&mut *ours_ticks.lock().unwrap());
            let peer_seen = std::mem::take(&mut *tokio_ticks.lock().unwrap());
            assert!(
                ours.len() >= peer_seen.len(),
                "ours fell behind tokio's ticks"
            );
            for (i, (&(due, at), &(peer_due, peer_at))) in
                ours.iter().zip(peer_seen.iter()).enumerate()
            {
                assert_eq!(due, peer_due, "tick {i} of a {period_us} µs period");
                assert!(
                    at >= due && at <= peer_at,
                    "tick {i}: observed {at:?}, tokio {peer_at:?}"
                );
            }
            drop((ours_tx, tokio_tx));
            ours_task.await.unwrap();
            peer_task.await.unwrap();
        });
    }
}

/// An `Interval` made in a runtime and ticked on a plain thread: after its first tick
/// it stays in its runtime's deadline set (a ticker's `Sleep` leaves the set for an
/// entry of its own only at home, where that entry can be made), and keeps ticking
/// by that runtime's clock.
#[test]
fn an_interval_ticked_on_a_plain_thread_keeps_ticking_by_its_runtime() {
    let home = paused_runtime();
    let interval = {
        let _inside = home.enter();
        lazy_deadline::interval(Duration::from_millis(100))
    };
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let poller = std::thread::spawn(move || {
        let mut interval = interval;
        for _ in 0..3 {
            common::block_on_plain(std::future::poll_fn(|cx| interval.poll_tick(cx)));
        }
        let _ = done_tx.send(());
    });
    home.block_on(async {
        tokio::select! {
            _ = done_rx => {}
            // A paused clock may jump here while the plain thread is between ticks:
            // its next ticks are then due at once (a burst), never a hang.
            () = time::sleep(Duration::from_secs(10)) => {}
        }
    });
    poller.join().expect("the plain thread's ticks");
}
