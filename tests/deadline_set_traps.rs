//! The traps of a per-thread deadline set, each in the smallest shape that shows it,
//! each under a watchdog: these bugs hang (a spin inside a poll, a wake never sent)
//! rather than give a wrong answer, so a regression must fail here by name.

mod common;

use common::{ms, paused_runtime, watchdog};
use std::future::{pending, Future};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_secs(30);

/// A sleep and a timeout complete exactly at their deadline's instant: the set's
/// entry is armed for the first deadline of an unarmed set, and a deadline equal to
/// the passed mark counts as passed.
#[test]
fn timers_on_an_idle_set_complete_exactly_at_their_deadline() {
    watchdog("a sleep and a timeout on an idle set", LIMIT, || {
        paused_runtime().block_on(async {
            for _ in 0..3 {
                let start = Instant::now();
                lazy_deadline::sleep(ms(10)).await;
                assert_eq!(start.elapsed(), ms(10));
                let start = Instant::now();
                assert!(lazy_deadline::timeout(ms(7), pending::<()>())
                    .await
                    .is_err());
                assert_eq!(start.elapsed(), ms(7));
            }
        })
    });
}

/// tokio's `timeout_is_not_exhausted_by_future`: an inner future that is always ready
/// spends the task's budget; the deadline is still checked, outside it.
#[test]
fn a_timeout_elapses_when_its_future_spends_the_budget() {
    watchdog("a timeout whose future spends the budget", LIMIT, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let busy = async {
                    let mut byte = [0u8; 1];
                    loop {
                        let _ = tokio::io::empty().read(&mut byte).await;
                    }
                };
                assert!(lazy_deadline::timeout(ms(1), busy).await.is_err());
            })
    });
}

/// A multi-thread runtime's `block_on` that has spent its budget files an earlier
/// deadline: the set polls its entry outside that budget (else tokio's poll neither
/// registers nor reports the fire, and the service never settles).
#[test]
fn a_filing_from_a_task_that_spent_its_budget_settles() {
    watchdog("a filing after the budget was spent", LIMIT, || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                for _ in 0..3 {
                    let mut byte = [0u8; 1];
                    while tokio::task::coop::has_budget_remaining() {
                        let _ = tokio::io::empty().read(&mut byte).await;
                    }
                    let start = std::time::Instant::now();
                    let mut sleep = std::pin::pin!(lazy_deadline::sleep(ms(5)));
                    // Filed in this same turn, with the budget spent.
                    std::future::poll_fn(|cx| {
                        let _ = sleep.as_mut().poll(cx);
                        std::task::Poll::Ready(())
                    })
                    .await;
                    sleep.await;
                    assert!(start.elapsed() >= ms(5));
                }
            })
    });
}

/// 2,000 deadlines within one millisecond tick expire together, at the instant
/// tokio's expire (the tick), and none early.
#[test]
fn deadlines_that_share_a_tick_expire_together() {
    watchdog("a burst of deadlines in one tick", LIMIT, || {
        paused_runtime().block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..2_000u64)
                .map(|i| {
                    let deadline = start + ms(10) + Duration::from_nanos(i * 400);
                    tokio::spawn(async move {
                        let _ = lazy_deadline::timeout_at(deadline, pending::<()>()).await;
                        (deadline, Instant::now())
                    })
                })
                .collect();
            let peer = tokio::spawn(async move {
                tokio::time::sleep_until(start + ms(10) + Duration::from_nanos(1_999 * 400)).await;
                Instant::now()
            });
            let peer_at = peer.await.unwrap();
            for task in tasks {
                let (deadline, at) = task.await.unwrap();
                assert!(at >= deadline, "early");
                assert!(at <= peer_at, "after tokio's");
            }
        })
    });
}

/// A `Sleep` that waits is reset earlier (a deadline pulled in by a message, as a
/// retransmission timer is): it is woken at the new deadline, driven only by its
/// wakes (a task awaiting it in a `select!`).
#[test]
fn a_waiting_sleep_reset_earlier_is_woken_at_the_new_deadline() {
    watchdog("a waiting Sleep reset earlier", LIMIT, || {
        paused_runtime().block_on(async {
            let start = Instant::now();
            let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
            let waiter = tokio::spawn(async move {
                let sleep = lazy_deadline::sleep(ms(100));
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        () = &mut sleep => return Instant::now() - start,
                        Some(()) = rx.recv() => sleep.as_mut().reset(start + ms(30)),
                    }
                }
            });
            tokio::time::sleep(ms(10)).await;
            tx.send(()).await.unwrap();
            assert_eq!(waiter.await.unwrap(), ms(30));
        })
    });
}
