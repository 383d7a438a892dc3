//! A lazy timer's lifecycle is tokio's: it belongs to the runtime it is made in and
//! can be awaited anywhere (another task, a plain executor, another runtime, a nested
//! runtime's `block_on`), judged by its own runtime's clock; when that runtime shuts
//! down, whatever waits on it is woken, a poll from outside the runtime gets tokio's
//! panic, and `drop(runtime)` never waits on our timers; a timer works inside a
//! thread-local's destructor. Each case runs beside tokio's own timer in the same
//! shape, and under a watchdog, so a lost wake fails with a name.

mod common;

use common::{block_on_plain, ms, panic_message, paused_runtime, watchdog};
use std::future::{pending, Future};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::mpsc;
use std::time::Duration;
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_secs(30);
const HOUR: Duration = Duration::from_secs(3600);
const SHUTDOWN: &str = "A Tokio 1.x context was found, but it is being shutdown.";

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A timer of kind `kind` (0: `sleep`, 1: `timeout` that must elapse) due after
/// `after`, made here (so in the current runtime), ours or tokio's.
fn timer(lazy: bool, kind: usize, after: Duration) -> BoxFuture {
    match (lazy, kind) {
        (true, 0) => Box::pin(lazy_deadline::sleep(after)),
        (true, _) => {
            let timeout = lazy_deadline::timeout(after, pending::<()>());
            Box::pin(async move { assert!(timeout.await.is_err()) })
        }
        (false, 0) => Box::pin(tokio::time::sleep(after)),
        (false, _) => {
            let timeout = tokio::time::timeout(after, pending::<()>());
            Box::pin(async move { assert!(timeout.await.is_err()) })
        }
    }
}

/// An hour-long timer of kind `kind`.
fn hour_long(lazy: bool, kind: usize) -> BoxFuture {
    timer(lazy, kind, HOUR)
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// What a waiter saw when its runtime shut down: `None` if it completed, else the
/// message of its panic.
type Outcome = Option<String>;

fn outcome_of(result: std::thread::Result<()>) -> Outcome {
    result.err().map(|panic| panic_message(&*panic))
}

/// A blocking thread of the runtime waits on an hour-long timer (`Handle::block_on`);
/// the runtime is dropped. Returns what the waiter saw; `drop` must return.
fn blocking_waiter_at_shutdown(lazy: bool, kind: usize) -> Outcome {
    watchdog(
        "drop(runtime) with a blocking thread waiting",
        LIMIT,
        move || {
            let rt = multi_thread();
            let handle = rt.handle().clone();
            let (started_tx, started_rx) = mpsc::channel();
            let (done_tx, done_rx) = mpsc::channel();
            rt.spawn_blocking(move || {
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    handle.block_on(async move {
                        let timer = hour_long(lazy, kind);
                        started_tx.send(()).unwrap();
                        timer.await;
                    })
                }));
                done_tx.send(outcome_of(result)).unwrap();
            });
            started_rx.recv().unwrap();
            std::thread::sleep(ms(20)); // let it park inside its timer
            drop(rt);
            done_rx.recv().unwrap()
        },
    )
}

#[test]
fn drop_runtime_returns_and_a_blocking_waiter_sees_what_tokios_sees() {
    for kind in 0..2 {
        let tokio = blocking_waiter_at_shutdown(false, kind);
        let ours = blocking_waiter_at_shutdown(true, kind);
        assert_eq!(ours, tokio, "kind {kind}");
        assert_eq!(
            tokio.as_deref(),
            Some(SHUTDOWN),
            "kind {kind}: tokio's panic"
        );
    }
}

/// A plain executor thread awaits an hour-long timer made in a task of the runtime;
/// the runtime is dropped. Returns what the waiter saw.
fn plain_waiter_at_shutdown(lazy: bool, kind: usize) -> Outcome {
    watchdog(
        "a plain executor waiting when its timer's runtime drops",
        LIMIT,
        move || {
            let rt = multi_thread();
            // Made inside a task of the runtime, and handed out of it.
            let (made_tx, made_rx) = mpsc::channel();
            rt.block_on(async move {
                tokio::spawn(async move { made_tx.send(hour_long(lazy, kind)).unwrap() })
                    .await
                    .unwrap()
            });
            let timer = made_rx.recv().unwrap();
            let (started_tx, started_rx) = mpsc::channel();
            let waiter = std::thread::spawn(move || {
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    block_on_plain(async move {
                        let mut timer = timer;
                        // Pending once, then say so.
                        std::future::poll_fn(|cx| {
                            assert!(timer.as_mut().poll(cx).is_pending());
                            std::task::Poll::Ready(())
                        })
                        .await;
                        started_tx.send(()).unwrap();
                        timer.await;
                    })
                }));
                outcome_of(result)
            });
            started_rx.recv().unwrap();
            drop(rt);
            waiter.join().unwrap()
        },
    )
}

#[test]
fn a_plain_executor_waiting_at_shutdown_is_woken_and_gets_tokios_panic() {
    for kind in 0..2 {
        let tokio = plain_waiter_at_shutdown(false, kind);
        let ours = plain_waiter_at_shutdown(true, kind);
        assert_eq!(ours, tokio, "kind {kind}");
        assert_eq!(tokio.as_deref(), Some(SHUTDOWN), "kind {kind}");
    }
}

/// A `LocalSet` driven by a plain executor on a thread that entered the runtime runs
/// a task waiting on an hour-long timer; the runtime is dropped.
fn local_set_waiter_at_shutdown(lazy: bool, kind: usize) -> Outcome {
    watchdog(
        "a LocalSet task waiting when the runtime drops",
        LIMIT,
        move || {
            let rt = multi_thread();
            let handle = rt.handle().clone();
            let (started_tx, started_rx) = mpsc::channel();
            let waiter = std::thread::spawn(move || {
                let _entered = handle.enter();
                let local = tokio::task::LocalSet::new();
                let task = local.spawn_local(async move {
                    let timer = hour_long(lazy, kind);
                    started_tx.send(()).unwrap();
                    timer.await;
                });
                let joined = block_on_plain(local.run_until(task));
                joined
                    .err()
                    .map(|error| panic_message(&*error.into_panic()))
            });
            started_rx.recv().unwrap();
            std::thread::sleep(ms(20));
            drop(rt);
            waiter.join().unwrap()
        },
    )
}

#[test]
fn a_local_set_waiting_at_shutdown_sees_what_tokios_sees() {
    for kind in 0..2 {
        let tokio = local_set_waiter_at_shutdown(false, kind);
        let ours = local_set_waiter_at_shutdown(true, kind);
        assert_eq!(ours, tokio, "kind {kind}");
        assert_eq!(tokio.as_deref(), Some(SHUTDOWN), "kind {kind}");
    }
}

/// A timer made in a task of paused runtime A, with a 100 ms deadline, awaited
/// elsewhere by `wait` while A's own task awaits the result (so that A idles and its
/// clock advances to its next timer): it completes at A's clock's deadline, exactly.
fn awaited_elsewhere(
    lazy: bool,
    kind: usize,
    wait: impl FnOnce(BoxFuture) + Send + 'static,
) -> Duration {
    watchdog(
        "a timer awaited away from the runtime it was made in",
        LIMIT,
        move || {
            paused_runtime().block_on(async move {
                let start = Instant::now();
                let timer = timer(lazy, kind, ms(100));
                let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    wait(timer);
                    done_tx.send(()).unwrap();
                });
                done_rx.await.unwrap();
                start.elapsed()
            })
        },
    )
}

#[test]
fn a_timer_made_in_a_task_completes_on_its_own_clock_on_a_plain_executor() {
    for kind in 0..2 {
        let ours = awaited_elsewhere(true, kind, block_on_plain);
        let tokio = awaited_elsewhere(false, kind, block_on_plain);
        assert_eq!((ours, tokio), (ms(100), ms(100)), "kind {kind}");
    }
}

#[test]
fn a_timer_made_in_a_paused_runtime_completes_on_its_own_clock_in_another_runtime() {
    let in_another_runtime = |timer: BoxFuture| {
        let other = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        other.block_on(timer);
    };
    for kind in 0..2 {
        let ours = awaited_elsewhere(true, kind, in_another_runtime);
        let tokio = awaited_elsewhere(false, kind, in_another_runtime);
        assert_eq!((ours, tokio), (ms(100), ms(100)), "kind {kind}");
    }
}

/// The test-harness shape: a blocking thread of runtime A builds current-thread
/// runtimes in turn; a timer made there (A's context) is first polled inside one of
/// them, which nobody drives afterwards, and the timer is awaited on a plain
/// executor. It fires on A's clock, as tokio's does.
fn first_polled_in_a_nested_runtime(lazy: bool, kind: usize) -> Duration {
    watchdog(
        "a timer first polled in a nested runtime that is then dropped",
        LIMIT,
        move || {
            let a = multi_thread();
            a.block_on(async move {
                tokio::task::spawn_blocking(move || {
                    let started = std::time::Instant::now();
                    let mut timer = timer(lazy, kind, ms(60));
                    let nested = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    nested.block_on(std::future::poll_fn(|cx| {
                        assert!(timer.as_mut().poll(cx).is_pending());
                        std::task::Poll::Ready(())
                    }));
                    // The nested runtime stays, but nobody drives it any more.
                    block_on_plain(timer);
                    drop(nested);
                    started.elapsed()
                })
                .await
                .unwrap()
            })
        },
    )
}

#[test]
fn a_timer_first_polled_in_a_nested_runtime_fires_on_the_runtime_it_was_made_in() {
    for kind in 0..2 {
        let tokio = first_polled_in_a_nested_runtime(false, kind);
        let ours = first_polled_in_a_nested_runtime(true, kind);
        assert!(
            tokio >= ms(60) && ours >= ms(60),
            "kind {kind}: {ours:?}, {tokio:?}"
        );
    }
}

/// A thread-local whose destructor makes and awaits timers: on a runtime's handle,
/// or (`None`) on a paused current-thread runtime of its own with the deadline sets
/// preferred, so that a set's service runs on this thread while its locals are being
/// destroyed (after the thread's spare buffer for a service's wakers, registered
/// after this one, is gone).
struct TimersInDrop {
    handle: Option<tokio::runtime::Handle>,
    lazy: bool,
    done: mpsc::Sender<Outcome>,
}

impl Drop for TimersInDrop {
    fn drop(&mut self) {
        let lazy = self.lazy;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let timers = async move {
                if lazy {
                    lazy_deadline::sleep(ms(1)).await;
                    assert!(lazy_deadline::timeout(ms(1), pending::<()>())
                        .await
                        .is_err());
                } else {
                    tokio::time::sleep(ms(1)).await;
                    assert!(tokio::time::timeout(ms(1), pending::<()>()).await.is_err());
                }
            };
            match &self.handle {
                Some(handle) => handle.block_on(timers),
                None => {
                    lazy_deadline::__private::prefer_sets(lazy);
                    paused_runtime().block_on(timers)
                }
            }
        }));
        let _ = self.done.send(outcome_of(result));
    }
}

thread_local! {
    static IN_DROP: std::cell::RefCell<Option<TimersInDrop>> = const { std::cell::RefCell::new(None) };
}

/// A thread that registers `TimersInDrop` and uses our timers before (`ours_first`)
/// or after it, then exits: what the destructor saw.
fn timers_in_a_thread_local_destructor(lazy: bool, ours_first: bool) -> Outcome {
    watchdog(
        "timers made in a thread-local destructor",
        LIMIT,
        move || {
            let rt = multi_thread();
            let handle = rt.handle().clone();
            let (done_tx, done_rx) = mpsc::channel();
            std::thread::spawn(move || {
                // tokio's own context first, as any thread that uses a handle has it.
                handle.block_on(async {});
                let use_ours = || handle.block_on(async { lazy_deadline::sleep(ms(1)).await });
                if ours_first {
                    use_ours();
                }
                IN_DROP.with(|slot| {
                    *slot.borrow_mut() = Some(TimersInDrop {
                        handle: Some(handle.clone()),
                        lazy,
                        done: done_tx,
                    })
                });
                if !ours_first {
                    use_ours();
                }
            })
            .join()
            .unwrap();
            let outcome = done_rx.recv().unwrap();
            drop(rt);
            outcome
        },
    )
}

/// Timers made (not polled) in tasks' `Drop`s while a multi-thread runtime shuts
/// down: no panic, as tokio's never panic there (they register nothing until polled;
/// a worker's first timer of ours binds its deadline set, which registers nothing
/// either until its entry's first re-arm).
#[test]
fn timers_made_while_a_multi_thread_runtime_drops_its_tasks_never_panic() {
    common::assert_no_panics_of_timers_at_shutdown(false, 200);
}

/// A timer made on a two-worker runtime (whose driver keeps turning) and first polled
/// inside a paused runtime whose clock is behind (built 50 ms of real time earlier),
/// once its deadline has passed by its own runtime's clock: its deadline set's first
/// filing comes from away, and the set's entry fires at once by the home clock. That
/// fire must count (the away clock says "early"): it completes as tokio's does.
/// Real time on purpose: the paused clock must lag a real one.
fn first_polled_behind(lazy: bool) -> Duration {
    watchdog("a first poll from behind", LIMIT, move || {
        let behind = paused_runtime();
        std::thread::sleep(ms(50));
        let home = common::two_workers();
        home.spawn(async {
            let mut turning = tokio::time::interval(ms(1));
            loop {
                turning.tick().await;
            }
        });
        let timer: BoxFuture = {
            let _home = home.enter();
            if lazy {
                Box::pin(lazy_deadline::sleep(ms(1)))
            } else {
                Box::pin(tokio::time::sleep(ms(1)))
            }
        };
        std::thread::sleep(ms(10));
        let start = std::time::Instant::now();
        behind.block_on(timer);
        start.elapsed()
    })
}

#[test]
fn a_timer_first_polled_behind_its_runtimes_clock_completes_as_tokios() {
    assert!(first_polled_behind(false) < LIMIT, "tokio's");
    assert!(first_polled_behind(true) < LIMIT, "ours");
}

#[test]
fn timers_work_inside_a_thread_local_destructor_as_tokios_do() {
    for ours_first in [false, true] {
        let tokio = timers_in_a_thread_local_destructor(false, ours_first);
        let ours = timers_in_a_thread_local_destructor(true, ours_first);
        assert_eq!(ours, tokio, "ours first: {ours_first}");
        assert_eq!(ours, None, "ours first: {ours_first}: they complete");
    }
}

/// A thread that registers `TimersInDrop` on a paused runtime of its own first, then
/// fires a deadline through the sets (so a set's service has used the thread's spare
/// buffer), then exits: what the destructor saw.
fn sets_fired_in_a_thread_local_destructor(lazy: bool) -> Outcome {
    watchdog(
        "a set's fire in a thread-local destructor",
        LIMIT,
        move || {
            let (done_tx, done_rx) = mpsc::channel();
            std::thread::spawn(move || {
                // tokio's own context first (destroyed after this thread's other locals),
                // as any thread that uses a runtime has it.
                paused_runtime().block_on(async {});
                IN_DROP.with(|slot| {
                    *slot.borrow_mut() = Some(TimersInDrop {
                        handle: None,
                        lazy,
                        done: done_tx,
                    })
                });
                lazy_deadline::__private::prefer_sets(true);
                paused_runtime().block_on(async {
                    assert!(lazy_deadline::timeout(ms(1), pending::<()>())
                        .await
                        .is_err());
                });
            })
            .join()
            .unwrap();
            done_rx.recv().unwrap()
        },
    )
}

#[test]
fn a_deadline_set_fires_inside_a_thread_local_destructor_as_tokios_timer_does() {
    let tokio = sets_fired_in_a_thread_local_destructor(false);
    let ours = sets_fired_in_a_thread_local_destructor(true);
    assert_eq!(ours, tokio);
    assert_eq!(ours, None, "it completes");
}

#[cfg(feature = "tower")]
#[test]
fn a_tower_response_future_made_in_a_task_completes_on_its_own_clock_elsewhere() {
    use tower::{Service, ServiceExt};
    let wait = |lazy: bool| {
        watchdog(
            "tower's response future awaited on a plain executor",
            LIMIT,
            move || {
                paused_runtime().block_on(async move {
                    let start = Instant::now();
                    let slow = tower::service_fn(|()| async {
                        pending::<()>().await;
                        Ok::<(), std::convert::Infallible>(())
                    });
                    let call: Pin<Box<dyn Future<Output = bool> + Send>> = if lazy {
                        let mut svc = lazy_deadline::tower::TimeoutLayer::new(ms(100)).layer(slow);
                        let call = svc.ready().await.unwrap().call(());
                        Box::pin(async move { call.await.is_err() })
                    } else {
                        let mut svc = tower::timeout::TimeoutLayer::new(ms(100)).layer(slow);
                        let call = svc.ready().await.unwrap().call(());
                        Box::pin(async move { call.await.is_err() })
                    };
                    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                    std::thread::spawn(move || done_tx.send(block_on_plain(call)).unwrap());
                    assert!(done_rx.await.unwrap(), "elapsed");
                    start.elapsed()
                })
            },
        )
    };
    use tower::Layer;
    assert_eq!((wait(true), wait(false)), (ms(100), ms(100)));
}
