//! On a multi-thread runtime, a thread whose `Sleep`s mostly fire makes its fresh
//! `Sleep`s on tokio's own entry (the deadline sets win only for the ones cancelled
//! before they fire), keeps sampling the set, and goes back to the sets once its
//! `Sleep`s are cancelled again. Everything a `Sleep` promises holds in both places.

mod common;

use common::{ms, watchdog};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_secs(60);

fn one_worker() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap()
}

/// Where a `Sleep` lives, from its `Debug`.
fn on_tokio_entry(sleep: &lazy_deadline::Sleep) -> bool {
    let shown = format!("{sleep:?}");
    assert!(
        shown.contains("tokio_entry") != shown.contains("filed_at"),
        "{shown}"
    );
    shown.contains("tokio_entry")
}

/// Polls `sleep` once with the task's waker, and asserts it is pending.
async fn poll_pending_once(mut sleep: Pin<&mut lazy_deadline::Sleep>) {
    std::future::poll_fn(|cx| {
        assert!(sleep.as_mut().poll(cx).is_pending());
        Poll::Ready(())
    })
    .await;
}

/// `n` fresh `Sleep`s awaited until they fire (due at once); how many of them were
/// made on tokio's entry.
async fn fired_sleeps(n: usize) -> usize {
    let mut on_tokio = 0;
    for _ in 0..n {
        let sleep = lazy_deadline::sleep(Duration::ZERO);
        on_tokio += usize::from(on_tokio_entry(&sleep));
        sleep.await;
    }
    on_tokio
}

/// `n` fresh `Sleep`s of an hour, each polled once (pending) and dropped, as a
/// `select!` drops the branch that lost; how many were made on tokio's entry.
async fn cancelled_sleeps(n: usize) -> usize {
    let mut on_tokio = 0;
    for _ in 0..n {
        let sleep = lazy_deadline::sleep(Duration::from_secs(3600));
        on_tokio += usize::from(on_tokio_entry(&sleep));
        let mut sleep = std::pin::pin!(sleep);
        poll_pending_once(sleep.as_mut()).await;
    }
    on_tokio
}

#[test]
fn sleeps_that_fire_take_tokio_entry_and_cancelled_ones_bring_the_sets_back() {
    watchdog("a thread's sleeps change fate", LIMIT, || {
        one_worker().block_on(async {
            tokio::spawn(async {
                assert_eq!(
                    fired_sleeps(32).await,
                    0,
                    "a fresh thread starts on the sets"
                );
                // The first window (32 filings) all fired: tokio's entry, but one in
                // 32 still goes through the set: the next window (32 samples, all
                // fired) keeps tokio's entry.
                assert_eq!(fired_sleeps(1024).await, 992, "one in 32 samples the set");
                // Cancelled: the samples fill a window with no fire in it, and the
                // sets come back at its end (the last of these).
                assert_eq!(cancelled_sleeps(1024).await, 992);
                assert_eq!(cancelled_sleeps(64).await, 0, "back on the sets");
                // Half fired, half cancelled: the sets stay.
                for _ in 0..4 {
                    fired_sleeps(8).await;
                    cancelled_sleeps(8).await;
                }
                assert_eq!(fired_sleeps(8).await, 0, "half cancelled: the sets stay");
            })
            .await
            .unwrap();
        });
    });
}

/// A `Sleep` on tokio's entry of a multi-thread runtime keeps the lazy later reset:
/// resets to later deadlines are stores, re-armed once when the entry fires, and it
/// completes at the last deadline, never before it.
#[test]
fn a_sleep_on_tokio_entry_of_a_multi_thread_runtime_keeps_later_resets_lazy() {
    watchdog("lazy later resets on tokio's entry", LIMIT, || {
        one_worker().block_on(async {
            tokio::spawn(async {
                fired_sleeps(32).await;
                let sleep = lazy_deadline::sleep(ms(5));
                assert!(on_tokio_entry(&sleep));
                let mut sleep = std::pin::pin!(sleep);
                poll_pending_once(sleep.as_mut()).await;
                let mut deadline = Instant::now();
                for i in 1..=100u64 {
                    deadline = Instant::now() + ms(10) + Duration::from_micros(i);
                    sleep.as_mut().reset(deadline);
                }
                assert_eq!(sleep.stats().registrations, 1, "later resets are stores");
                sleep.as_mut().await;
                assert!(Instant::now() >= deadline, "completed before its deadline");
                let stats = sleep.stats();
                assert_eq!(stats.registrations, 2, "re-armed once, at the fire");
                assert_eq!(stats.entry_fires, 2, "{stats:?}");
            })
            .await
            .unwrap();
        });
    });
}

/// A thread pinned to a multi-thread runtime whose `Sleep`s fire, making a `Sleep`
/// inside another runtime's context: it is its own runtime's (filed in its set, by
/// its clock), not an entry of the runtime whose context it is in, as tokio's entry
/// would be. Inside its own runtime's context, it takes tokio's entry.
#[test]
fn a_pinned_thread_inside_another_runtime_keeps_its_own_runtimes_sleeps() {
    watchdog("a pinned thread's fate", LIMIT, || {
        let a = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .on_thread_start(lazy_deadline::on_thread_start)
            .build()
            .unwrap();
        let (own, other) = a.block_on(async {
            tokio::task::spawn_blocking(|| {
                let own = tokio::runtime::Handle::current().block_on(async {
                    fired_sleeps(32).await;
                    fired_sleeps(1).await
                });
                let b = common::paused_runtime();
                let other = b.block_on(async {
                    let start = Instant::now();
                    let sleep = lazy_deadline::sleep(ms(20));
                    let on_tokio = on_tokio_entry(&sleep);
                    let real = std::time::Instant::now();
                    sleep.await;
                    assert_eq!(start.elapsed(), Duration::ZERO, "B's clock never moved");
                    assert!(real.elapsed() >= ms(20), "early by A's clock");
                    on_tokio
                });
                (own, other)
            })
            .await
            .unwrap()
        });
        assert_eq!(own, 1, "its own runtime's context: tokio's entry");
        assert!(!other, "another runtime's context: its own runtime's set");
    });
}

/// A thread whose `Sleep`s fired in a multi-thread runtime moves to a paused
/// current-thread runtime's context (a plain thread's next `block_on`): from its
/// first lookup there (at most one sample after the move) its `Sleep`s are that
/// runtime's as on any thread, so a later reset from outside it (another runtime's
/// context) is tokio's own reset: that runtime's paused clock does not wait for this
/// poller. Before the fix that forgets the verdict there, every `Sleep` past the
/// runtime's hint span took the multi-thread path, and its later reset was a store.
#[test]
fn a_thread_that_moves_to_a_current_thread_runtime_forgets_that_its_sleeps_fired() {
    watchdog("the verdict forgotten", LIMIT, || {
        let multi = one_worker();
        multi.block_on(async {
            fired_sleeps(64).await;
            assert_eq!(fired_sleeps(1).await, 1, "the verdict holds");
        });
        let current = common::paused_runtime();
        current.block_on(async {
            for i in 0..600 {
                let sleep = lazy_deadline::sleep(ms(10));
                assert!(on_tokio_entry(&sleep));
                let mut sleep = std::pin::pin!(sleep);
                poll_pending_once(sleep.as_mut()).await;
                let later = Instant::now() + ms(20);
                {
                    let _away = multi.enter();
                    sleep.as_mut().reset(later);
                }
                if i >= 32 {
                    assert_eq!(
                        sleep.stats().registrations,
                        2,
                        "sleep {i}: a later reset from away is tokio's own"
                    );
                }
            }
        });
    });
}
