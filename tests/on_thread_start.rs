//! `lazy_deadline::on_thread_start`: a runtime's threads pinned to it make timers
//! with no runtime lookup, bound to that runtime, including where the hook's docs say
//! it differs from tokio (another runtime's context on a pinned thread).

mod common;

use common::{ms, watchdog};
use std::future::pending;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn pinned(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(2)
        .thread_keep_alive(ms(5))
        .enable_all()
        .on_thread_start(lazy_deadline::on_thread_start)
        .build()
        .unwrap()
}

#[test]
fn timers_on_a_pinned_runtimes_threads_keep_their_semantics() {
    watchdog("timers on pinned threads", LIMIT, || {
        let rt = pinned(2);
        rt.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    tokio::spawn(async move {
                        for _ in 0..20 {
                            let start = std::time::Instant::now();
                            let d = ms(1 + (i % 3));
                            assert!(lazy_deadline::timeout(d, pending::<()>()).await.is_err());
                            assert!(start.elapsed() >= d, "never early");
                            assert_eq!(lazy_deadline::timeout(d, async { i }).await, Ok(i));
                            lazy_deadline::sleep(ms(1)).await;
                            tokio::task::yield_now().await;
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            // Blocking threads are the runtime's too (and come and go).
            for _ in 0..3 {
                let handle = tokio::runtime::Handle::current();
                tokio::task::spawn_blocking(move || {
                    handle.block_on(async {
                        let start = std::time::Instant::now();
                        lazy_deadline::sleep(ms(2)).await;
                        assert!(start.elapsed() >= ms(2));
                    })
                })
                .await
                .unwrap();
                tokio::time::sleep(ms(20)).await; // the idle blocking thread exits
            }
        });
        drop(rt);
    });
}

#[test]
fn a_pinned_thread_in_another_runtimes_context_binds_timers_to_its_own_runtime() {
    // The documented difference: on a blocking thread of pinned runtime A (real
    // clock), a timer made inside paused runtime B's `block_on` belongs to A, so it
    // waits for A's real 50 ms, and B's paused clock, which has no timer of its own to
    // jump to, stays where it is. (Unpinned, like tokio's, it would be B's: B's
    // clock would jump 50 ms at once.)
    let waited = watchdog("a pinned thread inside another runtime", LIMIT, || {
        let a = pinned(1);
        a.block_on(async {
            tokio::task::spawn_blocking(|| {
                let b = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .start_paused(true)
                    .build()
                    .unwrap();
                let real = std::time::Instant::now();
                let paused = b.block_on(async {
                    let start = tokio::time::Instant::now();
                    lazy_deadline::sleep(ms(50)).await;
                    start.elapsed()
                });
                (real.elapsed(), paused)
            })
            .await
            .unwrap()
        })
    });
    let (real, paused) = waited;
    assert!(
        real >= ms(50),
        "judged by the pinned runtime's real clock: {real:?}"
    );
    assert_eq!(
        paused,
        Duration::ZERO,
        "B's paused clock had no timer of its own to jump to"
    );
}

/// The same, with B's paused clock an hour ahead of A's: a pinned thread's timer is
/// A's, so its deadline is A's clock plus the duration (tokio's `Instant::now()`
/// there reads B's clock, and a deadline taken from it would be an hour late by A's).
/// Each kind waits A's 50 ms, never less, and completes (within the watchdog's limit,
/// not an hour).
#[test]
fn a_pinned_threads_timers_inside_another_runtime_take_their_deadline_from_its_own_clock() {
    let waited = watchdog(
        "a pinned thread inside a runtime an hour ahead",
        LIMIT,
        || {
            let a = pinned(1);
            a.block_on(async {
                tokio::task::spawn_blocking(|| {
                    common::paused_runtime().block_on(async {
                        tokio::time::advance(Duration::from_secs(3600)).await;
                        let mut waited = Vec::new();
                        let real = std::time::Instant::now();
                        lazy_deadline::sleep(ms(50)).await;
                        waited.push(("sleep", real.elapsed()));
                        let real = std::time::Instant::now();
                        let elapsed = lazy_deadline::timeout(ms(50), pending::<()>()).await;
                        assert!(elapsed.is_err());
                        waited.push(("timeout", real.elapsed()));
                        let real = std::time::Instant::now();
                        let mut ticker = lazy_deadline::interval(ms(50));
                        ticker.tick().await;
                        ticker.tick().await;
                        waited.push(("interval's second tick", real.elapsed()));
                        waited
                    })
                })
                .await
                .unwrap()
            })
        },
    );
    for (kind, real) in waited {
        assert!(real >= ms(50), "{kind}: early by A's clock: {real:?}");
    }
}

#[test]
fn a_runtime_without_the_time_driver_still_panics_with_tokios_message() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(lazy_deadline::on_thread_start)
        .build()
        .unwrap();
    let made =
        rt.block_on(async { tokio::spawn(async { drop(lazy_deadline::sleep(ms(1))) }).await });
    let panic = made.expect_err("no time driver").into_panic();
    let message = common::panic_message(&*panic);
    assert!(message.contains("timers are disabled"), "{message}");
}

#[test]
fn a_blocking_thread_that_outlives_its_pinned_runtime_makes_timers_in_its_own() {
    // A blocking task of a pinned runtime that outlives it (`shutdown_background`)
    // and carries on in a runtime of its own: its timers are that runtime's, as on a
    // thread without the hook (before, each was void and panicked with tokio's "being
    // shutdown"). With and without a timer made on the thread before the shutdown.
    for timer_before in [false, true] {
        let outcome = watchdog("a thread that outlived its runtime", LIMIT, move || {
            let rt = pinned(1);
            let (gone_tx, gone_rx) = std::sync::mpsc::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
            rt.spawn_blocking(move || {
                if timer_before {
                    tokio::runtime::Handle::current()
                        .block_on(async { lazy_deadline::sleep(ms(1)).await });
                }
                ready_tx.send(()).unwrap();
                gone_rx.recv().unwrap();
                let own = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .start_paused(true)
                    .build()
                    .unwrap();
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    own.block_on(async {
                        let start = tokio::time::Instant::now();
                        lazy_deadline::sleep(ms(5)).await;
                        let late = lazy_deadline::timeout(ms(5), pending::<()>()).await;
                        (start.elapsed(), late.is_err())
                    })
                }));
                let _ = done_tx.send(result.map_err(|panic| common::panic_message(&*panic)));
            });
            ready_rx.recv().unwrap();
            // A timer of the runtime, waited on from here: its runtime's shutdown
            // wakes it once tokio has dropped the runtime's tasks (the runtime is gone
            // then, not just asked to shut down).
            let mut watcher = {
                let _entered = rt.enter();
                Box::pin(lazy_deadline::sleep(ms(3_600_000)))
            };
            let (closed_tx, closed_rx) = std::sync::mpsc::channel();
            let waker = std::task::Waker::from(std::sync::Arc::new(SendOnWake(
                std::sync::Mutex::new(closed_tx),
            )));
            assert!(common::poll_with(watcher.as_mut(), &waker).is_pending());
            rt.shutdown_background();
            closed_rx.recv().unwrap();
            gone_tx.send(()).unwrap();
            done_rx.recv().unwrap()
        });
        assert_eq!(
            outcome,
            Ok((ms(10), true)),
            "timers of the thread's own runtime, by its paused clock"
        );
    }
}

/// A waker that sends on a channel when woken.
struct SendOnWake(std::sync::Mutex<std::sync::mpsc::Sender<()>>);

impl std::task::Wake for SendOnWake {
    fn wake(self: std::sync::Arc<Self>) {
        let _ = self.0.lock().unwrap().send(());
    }
}

/// A blocking thread of a paused current-thread runtime keeps its pin when the sets
/// are preferred (the crate's test hook; otherwise it lets go at its first timer):
/// its timer's deadline counts from that runtime's paused clock (an hour ahead of the
/// real one here), as tokio's does, not from the real clock.
#[test]
fn a_pinned_blocking_thread_of_a_paused_runtime_counts_from_its_paused_clock() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .on_thread_start(lazy_deadline::on_thread_start)
        .build()
        .unwrap();
    let (ours, tokios) = rt.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        tokio::task::spawn_blocking(|| {
            lazy_deadline::__private::prefer_sets(true);
            let now = tokio::time::Instant::now();
            let ours = lazy_deadline::sleep(ms(50)).deadline();
            let tokios = tokio::time::sleep(ms(50)).deadline();
            lazy_deadline::__private::prefer_sets(false);
            (
                ours.saturating_duration_since(now),
                tokios.saturating_duration_since(now),
            )
        })
        .await
        .unwrap()
    });
    assert_eq!(tokios, ms(50), "tokio's own");
    assert_eq!(ours, tokios);
}
