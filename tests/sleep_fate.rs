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
                // The first window (32 filings) all fired: tokio's entry, whose
                // `Sleep`s count as the set's did (every window all fired).
                assert_eq!(fired_sleeps(1024).await, 1024, "all on tokio's entry");
                // Cancelled: a window with no fire in it, and the sets come back at
                // its end (the last of these 32).
                assert_eq!(cancelled_sleeps(32).await, 32);
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

/// Fired and cancelled `Sleep`s in turn, one of each (half cancelled) after the
/// verdict went to tokio's entry, at either phase against the windows: the sets come
/// back within a window or two, whatever the pattern (every `Sleep` counts, not a
/// periodic sample that a pattern could keep landing on the fired ones).
#[test]
fn a_thread_on_tokio_entry_goes_back_to_the_sets_whatever_the_pattern() {
    for phase in 0..2 {
        watchdog("half cancelled, in turn", LIMIT, move || {
            one_worker().block_on(async move {
                tokio::spawn(async move {
                    fired_sleeps(32 + phase).await;
                    assert_eq!(fired_sleeps(1).await, 1, "the verdict holds");
                    for _ in 0..64 {
                        fired_sleeps(1).await;
                        cancelled_sleeps(1).await;
                    }
                    assert_eq!(
                        fired_sleeps(1).await + cancelled_sleeps(1).await,
                        0,
                        "phase {phase}: half cancelled, back on the sets"
                    );
                })
                .await
                .unwrap();
            });
        });
    }
}

/// `Sleep`s whose deadline has passed at their first poll count as fired too (a
/// `sleep_until` of a past instant), and `prefer_sets` takes a thread whose verdict
/// is tokio's entry back to the sets at once.
#[test]
fn sleeps_passed_at_their_first_poll_count_as_fired_and_prefer_sets_overrides() {
    watchdog("passed at the first poll", LIMIT, || {
        one_worker().block_on(async {
            tokio::spawn(async {
                for _ in 0..32 {
                    let sleep = lazy_deadline::sleep_until(Instant::now() - ms(1));
                    assert!(!on_tokio_entry(&sleep));
                    sleep.await;
                }
                let sleep = lazy_deadline::sleep_until(Instant::now() + ms(1));
                assert!(on_tokio_entry(&sleep), "passed ones count as fired");
                drop(sleep);
                lazy_deadline::__private::prefer_sets(true);
                let sleep = lazy_deadline::sleep(ms(1));
                lazy_deadline::__private::prefer_sets(false);
                assert!(!on_tokio_entry(&sleep), "the sets preferred: at once");
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
                for until in [false, true] {
                    let sleep = if until {
                        lazy_deadline::sleep_until(Instant::now() + ms(5))
                    } else {
                        lazy_deadline::sleep(ms(5))
                    };
                    assert!(on_tokio_entry(&sleep));
                    let mut sleep = std::pin::pin!(sleep);
                    poll_pending_once(sleep.as_mut()).await;
                    let mut deadline = Instant::now();
                    for i in 1..=100u64 {
                        deadline = Instant::now() + ms(10) + Duration::from_micros(i);
                        sleep.as_mut().reset(deadline);
                    }
                    let stats = sleep.stats();
                    assert_eq!(
                        stats.registrations, 1,
                        "until {until}: later resets are stores"
                    );
                    sleep.as_mut().await;
                    assert!(Instant::now() >= deadline, "completed before its deadline");
                    let stats = sleep.stats();
                    assert_eq!(stats.registrations, 2, "re-armed once, at the fire");
                    assert_eq!(stats.entry_fires, 2, "{stats:?}");
                }
                // Reset later from a plain thread (no runtime's context): tokio's own
                // reset, as for any `Sleep` polled away from every runtime.
                let mut sleep = Box::pin(lazy_deadline::sleep(ms(50)));
                assert!(on_tokio_entry(&sleep));
                poll_pending_once(sleep.as_mut()).await;
                let later = Instant::now() + ms(60);
                let sleep = std::thread::spawn(move || {
                    sleep.as_mut().reset(later);
                    sleep
                })
                .join()
                .unwrap();
                assert_eq!(
                    sleep.stats().registrations,
                    2,
                    "a plain thread's later reset"
                );
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
                    // More than a check's span (32): none of them binds to B.
                    for _ in 0..40 {
                        let sleep = lazy_deadline::sleep(ms(20));
                        assert!(!on_tokio_entry(&sleep), "a pinned thread's sleep in B");
                    }
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
/// current-thread runtime's context (a plain thread's next `block_on`), where its
/// `Sleep`s still mostly fire: from its first runtime check there (one fresh `Sleep`
/// in 32 looks its runtime up) its `Sleep`s are that runtime's as on any thread, so
/// a later reset from outside it (another runtime's context) is tokio's own reset:
/// that runtime's paused clock does not wait for this poller. Without the check, or
/// without forgetting the verdict there, they would keep the multi-thread path, and
/// such a later reset would be a store.
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
            for i in 0..200 {
                // Three fired for each one reset from away: the verdict would hold.
                for _ in 0..3 {
                    lazy_deadline::sleep(ms(1)).await;
                }
                let sleep = lazy_deadline::sleep(ms(10));
                assert!(on_tokio_entry(&sleep));
                let mut sleep = std::pin::pin!(sleep);
                poll_pending_once(sleep.as_mut()).await;
                let later = Instant::now() + ms(20);
                {
                    let _away = multi.enter();
                    sleep.as_mut().reset(later);
                }
                if i >= 8 {
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
