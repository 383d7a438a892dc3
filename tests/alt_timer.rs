//! The four types' core behaviours on tokio's per-worker timer (`enable_alt_timer`,
//! tokio_unstable), where `Sleep::reset` is drop + new entry. CI runs this file with
//! `RUSTFLAGS="--cfg tokio_unstable"`; without that cfg it compiles to nothing.
//!
//! Real time on purpose: the per-worker timer only exists on a multi-thread runtime,
//! and tokio's paused clock only on a current-thread one. Deadlines are tens of
//! milliseconds, so the file runs in well under a second; only "never early" and
//! "resolves at all" are asserted, never how late (shared machines stall).
#![cfg(tokio_unstable)]

mod common;

use common::poll_once;
use futures::StreamExt;
use lazy_deadline::{timer_kinds, IdleQueue, IdleTimeout, SlotTimer};
use std::time::Duration;
use tokio::time::{timeout, Instant};

timer_kinds! {
    enum Tcp { Rto, Tlp }
}

const SHORT: Duration = Duration::from_millis(20);
const LONG: Duration = Duration::from_millis(60);
/// Generous: a timer that has not resolved by then never will.
const HANG: Duration = Duration::from_secs(10);

fn alt_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_alt_timer()
        .build()
        .unwrap()
}

#[test]
fn sleep_reset_later_waits_for_the_final_deadline() {
    alt_runtime().block_on(async {
        let start = Instant::now();
        let sleep = lazy_deadline::sleep(SHORT);
        tokio::pin!(sleep);
        // Registered at SHORT, then moved later: the entry fires early and re-arms.
        assert!(poll_once(sleep.as_mut()).is_pending());
        sleep.as_mut().reset(start + LONG);
        timeout(HANG, sleep.as_mut()).await.expect("resolves");
        assert!(Instant::now() >= start + LONG);
        assert!(sleep.is_elapsed());
    });
}

#[test]
fn sleep_reset_earlier_resolves_at_the_earlier_deadline() {
    alt_runtime().block_on(async {
        let start = Instant::now();
        let sleep = lazy_deadline::sleep(Duration::from_secs(3600));
        tokio::pin!(sleep);
        assert!(poll_once(sleep.as_mut()).is_pending());
        sleep.as_mut().reset(start + SHORT);
        timeout(HANG, sleep.as_mut()).await.expect("moved earlier");
        assert!(Instant::now() >= start + SHORT);
    });
}

#[test]
fn idle_timeout_waits_for_quiet_after_touches_from_another_task() {
    alt_runtime().block_on(async {
        let mut idle = IdleTimeout::new(SHORT);
        let handle = idle.handle();
        let toucher = tokio::spawn(async move {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                handle.touch();
            }
        });
        timeout(HANG, &mut idle).await.expect("resolves");
        toucher.await.unwrap();
        // Never early: at least the timeout after the last recorded activity.
        assert!(Instant::now() >= idle.last_activity() + SHORT);
        assert!(idle.is_elapsed());
    });
}

#[test]
fn slot_timer_reports_each_kind_at_its_deadline_and_once() {
    alt_runtime().block_on(async {
        let mut timers = SlotTimer::<Tcp>::new();
        let start = Instant::now();
        timers.set(Tcp::Tlp, start + SHORT);
        timers.set(Tcp::Rto, start + LONG);
        let first = timeout(HANG, timers.expired()).await.expect("TLP");
        assert_eq!(first.iter().collect::<Vec<_>>(), [Tcp::Tlp]);
        assert!(Instant::now() >= start + SHORT);
        let second = timeout(HANG, timers.expired()).await.expect("RTO");
        assert_eq!(second.iter().collect::<Vec<_>>(), [Tcp::Rto]);
        assert!(Instant::now() >= start + LONG);
        assert_eq!(timers.next_deadline(), None);
    });
}

#[test]
fn slot_handle_moves_a_kind_earlier_from_another_thread() {
    alt_runtime().block_on(async {
        let mut timers = SlotTimer::<Tcp>::new();
        let start = Instant::now();
        timers.set(Tcp::Rto, start + Duration::from_secs(3600));
        let handle = timers.handle();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            handle.set(Tcp::Rto, Instant::now() + SHORT);
        });
        let expired = timeout(HANG, timers.expired())
            .await
            .expect("moved earlier");
        assert!(expired.contains(Tcp::Rto));
        assert!(Instant::now() >= start + SHORT);
    });
}

#[test]
fn idle_queue_expires_exactly_the_quiet_keys_in_deadline_order() {
    alt_runtime().block_on(async {
        let mut queue = IdleQueue::new(SHORT);
        let start = Instant::now();
        let busy = queue.insert("busy");
        let quiet: Vec<_> = (0..3).map(|i| queue.insert_with_timeout("quiet", SHORT * (3 - i))).collect();
        let mut seen = Vec::new();
        let mut last_deadline = start;
        while seen.len() < quiet.len() {
            tokio::select! {
                expired = queue.next() => {
                    let expired = expired.expect("the stream never ends");
                    assert!(Instant::now() >= expired.deadline(), "never early");
                    assert!(expired.deadline() >= last_deadline, "deadline order");
                    last_deadline = expired.deadline();
                    seen.push(expired.key());
                }
                _ = tokio::time::sleep(Duration::from_millis(5)) => {
                    assert!(queue.touch(busy));
                }
                _ = tokio::time::sleep_until(start + HANG) => panic!("the quiet keys never expired"),
            }
        }
        let mut expected = quiet.clone();
        expected.reverse(); // shortest timeout first
        assert_eq!(seen, expected);
        assert!(queue.contains(busy));
        assert!(Instant::now() >= start + SHORT * 3);
    });
}

/// Canary (see `tests/tokio_canaries.rs`): tokio's per-worker timer makes a new entry
/// on reset, which holds no waker until it is polled. The deadline sets probe for it
/// when they bind; if tokio changes it, this fails by name.
#[test]
fn the_per_worker_timer_makes_a_new_entry_without_a_waker_on_reset() {
    alt_runtime().block_on(async {
        tokio::spawn(async {
            let (count, waker) = common::CountingWaker::new();
            let sleep = tokio::time::sleep(Duration::from_secs(3600));
            tokio::pin!(sleep);
            assert!(common::poll_with(sleep.as_mut(), &waker).is_pending());
            sleep
                .as_mut()
                .reset(Instant::now() - Duration::from_millis(5));
            tokio::time::sleep(LONG).await;
            assert_eq!(
                count.wakes(),
                0,
                "tokio's per-worker timer now keeps the waker across a reset"
            );
        })
        .await
        .unwrap();
    });
}

/// A `Sleep` on an entry of its own (it left its deadline set at its first earlier
/// reset across ticks) moved earlier again: the per-worker timer's reset makes a new
/// entry, which the poll after it must register with.
#[test]
fn sleep_on_its_own_entry_moved_earlier_twice_resolves_at_the_last_deadline() {
    alt_runtime().block_on(async {
        let start = Instant::now();
        let mut sleep = Box::pin(lazy_deadline::sleep(Duration::from_secs(3600)));
        assert!(poll_once(sleep.as_mut()).is_pending());
        sleep.as_mut().reset(start + Duration::from_secs(60)); // an entry of its own
        assert!(poll_once(sleep.as_mut()).is_pending());
        sleep.as_mut().reset(start + SHORT); // tokio's reset of that entry
                                             // Awaited in a task of its own, so that only the sleep's wake completes it
                                             // (a guard around the sleep itself would poll it when the guard fires).
        let waiter = tokio::spawn(sleep);
        timeout(HANG, waiter)
            .await
            .expect("moved earlier twice: never woken")
            .unwrap();
        assert!(Instant::now() >= start + SHORT);
    });
}

/// Timers made (not polled) in tasks' `Drop`s while the runtime shuts down: tokio's
/// register nothing until polled, and never panic there; ours neither (a worker's
/// first timer binds its deadline set, which learns the driver only at its entry's
/// first re-arm, from a pending poll).
#[test]
fn timers_made_while_the_runtime_drops_its_tasks_panic_no_more_than_tokios() {
    common::assert_no_panics_of_timers_at_shutdown(true, 200);
}

/// A busy runtime on the per-worker timer dropped: 64 tasks each sleep 50-1,550 µs in
/// a loop beside an hour-long sleep, so that the workers' deadline sets have entries
/// armed, some due within the millisecond the worker had not turned yet when it shuts
/// down (its shutdown wakes them: fires by the clock, after which a set re-arms at
/// its next deadline on a driver that is down). tokio's own timers never panic there;
/// ours must not either (a panic inside tokio's shutdown aborts the process).
#[test]
fn a_busy_runtime_on_the_per_worker_timer_shuts_down_without_a_panic() {
    for round in 0..100u64 {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_alt_timer()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            for task in 0..64u64 {
                tokio::spawn(async move {
                    tokio::spawn(lazy_deadline::sleep(Duration::from_secs(3600)));
                    let mut random = common::Rng::new(task + 1);
                    loop {
                        let micros = 50 + random.below(1_500);
                        lazy_deadline::sleep(Duration::from_micros(micros)).await;
                    }
                });
            }
            tokio::time::sleep(Duration::from_millis(3 + round % 5)).await;
        });
        drop(runtime);
    }
}
