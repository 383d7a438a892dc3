//! On a runtime whose timers no second worker contends for (a current-thread
//! runtime), `timeout` and a fresh `sleep` take tokio's own entry: no deadline set is
//! bound there, so nothing of the sets' bookkeeping (a set's binding, its driver
//! probe) can move a paused clock or panic where tokio's timer would not.

mod common;

use common::{ms, poll_once, watchdog};
use std::time::Duration;
use tokio::time::Instant;

/// A second thread in a paused runtime's context (`Handle::enter`) makes and polls
/// timers while the runtime's own thread is parked waiting for it: the runtime's
/// clock moves at most to those timers' deadlines (as tokio's own timers move it:
/// an idle paused runtime jumps to its next timer). A deadline set bound there
/// probed its driver with an entry an hour ahead, and an idle paused runtime jumped
/// its clock there.
#[test]
fn timers_made_from_another_thread_never_move_a_paused_clock() {
    watchdog(
        "paused clock vs another thread's timers",
        Duration::from_secs(120),
        || {
            for round in 0..200 {
                let runtime = common::paused_runtime();
                let handle = runtime.handle().clone();
                runtime.block_on(async move {
                    let start = Instant::now();
                    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                    std::thread::spawn(move || {
                        let _inside = handle.enter();
                        let request = lazy_deadline::timeout(ms(100), std::future::pending::<()>());
                        tokio::pin!(request);
                        let _ = poll_once(request.as_mut());
                        let sleep = lazy_deadline::sleep(ms(100));
                        tokio::pin!(sleep);
                        let _ = poll_once(sleep.as_mut());
                        let _ = done_tx.send(());
                    });
                    done_rx.await.unwrap();
                    // Each timer's deadline is 100 ms from the clock it was made at, and
                    // the clock may have jumped to the first before the second was made.
                    let moved = Instant::now() - start;
                    assert!(
                        moved <= ms(200),
                        "round {round}: the paused clock moved by {moved:?}"
                    );
                });
            }
        },
    );
}

/// A `timeout` made in a task's `Drop` while its current-thread runtime shuts down
/// (its tasks dropped) does not panic, as tokio's does not: tokio's entry is only
/// made, and registers nothing until polled.
#[test]
fn a_timeout_made_while_the_runtime_drops_its_tasks_does_not_panic() {
    struct MakesATimerWhenDropped;
    impl Drop for MakesATimerWhenDropped {
        fn drop(&mut self) {
            let made = lazy_deadline::timeout(ms(10), async {});
            drop(made);
            drop(lazy_deadline::sleep(ms(10)));
        }
    }
    for _ in 0..200 {
        let runtime = common::paused_runtime();
        runtime.block_on(async {
            tokio::spawn(async {
                let _guard = MakesATimerWhenDropped;
                std::future::pending::<()>().await;
            });
            tokio::task::yield_now().await;
        });
        drop(runtime);
    }
}

/// A thread that made timers on a current-thread runtime and then makes them in a
/// multi-thread runtime's context takes that runtime's deadline sets again within a
/// bounded number of timers (the thread's hint is checked again), and every timer on
/// the way works.
#[test]
fn a_thread_that_moves_to_a_multi_thread_runtime_takes_its_sets_again() {
    watchdog("hint back to the sets", Duration::from_secs(60), || {
        let current = common::paused_runtime();
        current.block_on(async {
            lazy_deadline::sleep(ms(1)).await;
        });
        let multi = common::two_workers();
        multi.block_on(async {
            let mut in_a_set = 0;
            // Cancelled ones (polled once, then dropped, as a `select!` drops the
            // branch that lost): where a thread's sleeps mostly fire, a multi-thread
            // runtime's take tokio's entry too (tests/sleep_fate.rs).
            for _ in 0..600 {
                let sleep = lazy_deadline::sleep(Duration::from_secs(3600));
                if format!("{sleep:?}").contains("filed_at") {
                    in_a_set += 1;
                }
                let mut sleep = std::pin::pin!(sleep);
                std::future::poll_fn(|cx| {
                    assert!(std::future::Future::poll(sleep.as_mut(), cx).is_pending());
                    std::task::Poll::Ready(())
                })
                .await;
            }
            assert!(
                in_a_set >= 600 - 256,
                "only {in_a_set} of 600 timers took the sets after the move"
            );
        });
        // And back: the current-thread runtime's timers are tokio's own again.
        current.block_on(async {
            let sleep = lazy_deadline::sleep(ms(1));
            assert!(format!("{sleep:?}").contains("tokio_entry"), "{sleep:?}");
            sleep.await;
        });
    });
}

/// A blocking thread of a current-thread runtime pinned by `on_thread_start` takes
/// tokio's entry, and lets go of the pin (and so of the runtime's handle) at its
/// first timer: nothing of the runtime is kept by the thread once it is gone.
#[test]
fn a_pinned_thread_of_a_current_thread_runtime_keeps_no_handle() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .on_thread_start(lazy_deadline::on_thread_start)
        .build()
        .unwrap();
    let weak = runtime.block_on(async {
        tokio::task::spawn_blocking(|| {
            let sleep = lazy_deadline::sleep(ms(1));
            assert!(format!("{sleep:?}").contains("tokio_entry"), "{sleep:?}");
            tokio::runtime::Handle::current().block_on(sleep);
        })
        .await
        .unwrap();
        tokio::runtime::Handle::current().id()
    });
    let _ = weak;
    // The blocking thread lingers (keep-alive) holding nothing of the runtime: the
    // runtime's drop returns (a kept handle of its own would keep its driver).
    drop(runtime);
}
