//! A good tokio citizen: never early by the clock of the runtime that owns the entry,
//! no unbounded loop inside a poll, the cooperative budget spent on ready paths, a
//! saturated clock never turning "far future" into "due", and `Sleep::is_elapsed`
//! answering like tokio's before the first poll.
//!
//! Cases 1 and 2 need a runtime whose clock runs on its own while the timer is polled
//! from elsewhere, so their "home" runtime runs in real time (tens of milliseconds).
//! Everything that could hang runs under a watchdog, so a regression fails the test
//! instead of hanging the suite.

mod common;

use common::{block_on_plain, ms, paused_runtime, poll_once};
use lazy_deadline::{timer_kinds, IdleTimeout, SlotTimer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::time::Instant;

timer_kinds! {
    enum Kind { A, B }
}

/// Runs `f` on its own thread and fails if it has not returned within `limit`.
fn with_watchdog<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .expect("did not return in time: a poll that spins or never completes")
}

/// A real-time runtime whose driver turns on its own worker thread.
fn home() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap()
}

const HOME_DEADLINE: Duration = Duration::from_millis(60);

/// Real time from `created` (taken before the timer was made) until `wait` returns.
fn real_elapsed(created: std::time::Instant, wait: impl FnOnce() + Send + 'static) -> Duration {
    with_watchdog(Duration::from_secs(20), move || {
        wait();
        created.elapsed()
    })
}

/// A `SlotTimer` created on `home` with `kind` due `HOME_DEADLINE` from now.
fn slot_timer_on(home: &tokio::runtime::Runtime, kind: Kind) -> SlotTimer<Kind> {
    let _guard = home.enter();
    let mut timer = SlotTimer::<Kind>::new();
    timer.set_after(kind, HOME_DEADLINE);
    timer
}

// 1. `SlotTimer::expired()` polled from a paused runtime or a plain executor must wait
//    for the home runtime's entry instead of spinning inside one poll.

#[test]
fn slot_timer_polled_from_a_paused_runtime_does_not_spin() {
    let home = home();
    let created = std::time::Instant::now();
    let mut timer = slot_timer_on(&home, Kind::A);
    let took = real_elapsed(created, move || {
        let away = paused_runtime();
        let expired = away.block_on(timer.expired());
        assert_eq!(expired.iter().collect::<Vec<_>>(), [Kind::A]);
        drop(home);
    });
    assert!(took >= HOME_DEADLINE, "reported after {took:?}");
}

#[test]
fn slot_timer_polled_from_a_plain_thread_after_a_paused_jump_does_not_spin() {
    let home = home();
    let created = std::time::Instant::now();
    let away = paused_runtime();
    // The away runtime's clock jumps an hour ahead of home's.
    away.block_on(tokio::time::advance(Duration::from_secs(3600)));
    let mut timer = slot_timer_on(&home, Kind::A);
    let took = real_elapsed(created, move || {
        let _in_away = away.enter();
        let expired = block_on_plain(timer.expired());
        assert_eq!(expired.iter().collect::<Vec<_>>(), [Kind::A]);
        drop(home);
    });
    assert!(took >= HOME_DEADLINE, "reported after {took:?}");
}

// 2. Never early by the owning runtime's clock, when polled from a paused runtime that
//    is an hour ahead.

fn poll_in_a_runtime_an_hour_ahead(wait: impl std::future::Future<Output = ()> + Send + 'static) {
    let away = paused_runtime();
    away.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        wait.await;
    });
}

#[test]
fn idle_timeout_is_not_early_by_its_own_runtime_clock() {
    let home = home();
    let created = std::time::Instant::now();
    let idle = {
        let _guard = home.enter();
        IdleTimeout::new(HOME_DEADLINE)
    };
    let took = real_elapsed(created, move || {
        poll_in_a_runtime_an_hour_ahead(idle);
        drop(home);
    });
    assert!(took >= HOME_DEADLINE, "resolved after {took:?}");
}

#[test]
fn slot_timer_is_not_early_by_its_own_runtime_clock() {
    let home = home();
    let created = std::time::Instant::now();
    let mut timer = slot_timer_on(&home, Kind::B);
    let took = real_elapsed(created, move || {
        poll_in_a_runtime_an_hour_ahead(async move {
            assert!(timer.expired().await.contains(Kind::B));
        });
        drop(home);
    });
    assert!(took >= HOME_DEADLINE, "reported after {took:?}");
}

#[test]
fn reset_later_sleep_is_not_early_by_its_own_runtime_clock() {
    let home = home();
    let created = std::time::Instant::now();
    let mut sleep = {
        let _guard = home.enter();
        let mut sleep = Box::pin(lazy_deadline::sleep(HOME_DEADLINE / 3));
        assert!(poll_once(sleep.as_mut()).is_pending()); // armed at a third
        sleep.as_mut().reset(Instant::now() + HOME_DEADLINE); // later: a store
        sleep
    };
    let took = real_elapsed(created, move || {
        poll_in_a_runtime_an_hour_ahead(async move { sleep.as_mut().await });
        drop(home);
    });
    assert!(took >= HOME_DEADLINE, "resolved after {took:?}");
}

// 3. Ready paths spend the cooperative budget: a task looping on a ready timer lets
//    the other tasks of a current-thread runtime run, as with tokio's `Sleep`.

/// Runs `$setup`, then loops `$ready_again` (an await that is ready every time) on a
/// current-thread runtime and evaluates to after how many iterations a spawned task got
/// to run (`None`: not within 100,000).
macro_rules! iterations_before_other_task_runs {
    ($setup:stmt; $ready_again:expr) => {
        with_watchdog(Duration::from_secs(20), move || {
            paused_runtime().block_on(async move {
                let ran = Arc::new(AtomicBool::new(false));
                let flag = ran.clone();
                tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
                $setup
                for i in 0..100_000usize {
                    $ready_again;
                    if ran.load(Ordering::SeqCst) {
                        return Some(i);
                    }
                }
                None
            })
        })
    };
}

#[test]
fn tokio_sleep_yields_in_its_budget() {
    // The reference behaviour the three tests below hold ours to.
    let n = iterations_before_other_task_runs!(
        let mut sleep = Box::pin(tokio::time::sleep(Duration::ZERO));
        sleep.as_mut().await
    );
    assert!(matches!(n, Some(n) if n < 1_000), "{n:?}");
}

#[test]
fn completed_sleep_yields_in_its_budget() {
    let n = iterations_before_other_task_runs!(
        let mut sleep = Box::pin(lazy_deadline::sleep(Duration::ZERO));
        sleep.as_mut().await
    );
    assert!(matches!(n, Some(n) if n < 1_000), "{n:?}");
}

#[test]
fn elapsed_idle_timeout_yields_in_its_budget() {
    let n = iterations_before_other_task_runs!(
        let mut idle = IdleTimeout::new(Duration::ZERO);
        (&mut idle).await
    );
    assert!(matches!(n, Some(n) if n < 1_000), "{n:?}");
}

#[test]
fn past_slot_kind_yields_in_its_budget() {
    let n = iterations_before_other_task_runs!(
        let (mut timer, past) = (SlotTimer::<Kind>::new(), Instant::now());
        {
            timer.set(Kind::A, past);
            assert!(timer.expired().await.contains(Kind::A));
        }
    );
    assert!(matches!(n, Some(n) if n < 1_000), "{n:?}");
}

/// Ticks of a ready `Interval` (a burst after a stall) spend exactly one unit of
/// budget each, as tokio's do: the lazy `Sleep` under it re-arms for the next tick
/// and completes in the same poll, and that second entry poll must not cost a
/// second unit (it did: such a loop yielded every 64 ticks instead of 128).
#[test]
fn a_bursting_interval_spends_one_unit_per_tick_as_tokio_does() {
    fn ticks_per_budget(ours: bool) -> usize {
        paused_runtime().block_on(async move {
            let period = Duration::from_micros(1);
            let mut lazy = lazy_deadline::interval(period);
            let mut peer = tokio::time::interval(period);
            lazy.tick().await;
            peer.tick().await;
            tokio::time::advance(ms(2)).await;
            tokio::task::yield_now().await; // a fresh budget
            let mut ticks = 0;
            while tokio::task::coop::has_budget_remaining() && ticks < 1_000 {
                if ours {
                    lazy.tick().await;
                } else {
                    peer.tick().await;
                }
                ticks += 1;
            }
            ticks
        })
    }
    assert_eq!(ticks_per_budget(true), ticks_per_budget(false));
}

/// A completed `Sleep` polled again spends one unit of budget per `Ready`, as
/// tokio's does, wherever ours lives: on tokio's entry, in the deadline set, and on
/// an entry of its own in either mode (polled directly, as a ticker's is; through
/// its signal, as a `select!` loop's is). How many `Ready` polls one budget allows.
#[test]
fn a_completed_sleep_polled_again_spends_one_unit_per_ready_as_tokios_does() {
    /// `make` a `Sleep` 1 ms out, `before` it fires `pending` polls per fire for
    /// `fires` fires (resetting it after each), then count `Ready` polls.
    async fn readies_per_budget<S: std::future::Future<Output = ()>>(
        mut sleep: std::pin::Pin<&mut S>,
        reset: impl Fn(std::pin::Pin<&mut S>),
        fires: usize,
        pending: usize,
    ) -> usize {
        for fire in 0..=fires {
            if fire > 0 {
                reset(sleep.as_mut());
            }
            for _ in 0..pending {
                assert!(poll_once(sleep.as_mut()).is_pending());
            }
            tokio::time::advance(ms(1)).await;
            sleep.as_mut().await;
        }
        tokio::task::yield_now().await; // a fresh budget
        let mut readies = 0;
        while readies < 1_000 {
            let ready = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(sleep.as_mut().poll(cx).is_ready())
            })
            .await;
            if !ready {
                break;
            }
            readies += 1;
        }
        readies
    }
    let tokios = paused_runtime().block_on(async {
        let sleep = std::pin::pin!(tokio::time::sleep(ms(1)));
        let reset = |s: std::pin::Pin<&mut tokio::time::Sleep>| {
            s.reset(tokio::time::Instant::now() + ms(1))
        };
        readies_per_budget(sleep, reset, 0, 1).await
    });
    let reset =
        |s: std::pin::Pin<&mut lazy_deadline::Sleep>| s.reset(tokio::time::Instant::now() + ms(1));
    // (fires, pending polls per fire): a fresh one; a ticker's own entry (direct);
    // a loop's own entry (its signal).
    for (fires, pending) in [(0, 1), (3, 1), (3, 3)] {
        common::in_both_places(|sets| async move {
            let sleep = std::pin::pin!(lazy_deadline::sleep(ms(1)));
            let ours = readies_per_budget(sleep, reset, fires, pending).await;
            assert_eq!(
                ours, tokios,
                "{fires} fires, {pending} pending polls each (sets: {sets})"
            );
        });
    }
}

// 4. A clock past the time base's horizon (~584 years) saturates: "far future" stays
//    far, never "due at once".

const CENTURIES: Duration = Duration::from_secs(585 * 365 * 86_400);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn saturated_clock_does_not_make_an_idle_timeout_due() {
    tokio::time::advance(CENTURIES).await;
    let mut idle = IdleTimeout::new(ms(10));
    assert!(poll_once(std::pin::Pin::new(&mut idle)).is_pending());
    assert!(!idle.is_elapsed());
    tokio::time::advance(ms(5)).await;
    assert!(poll_once(std::pin::Pin::new(&mut idle)).is_pending());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn saturated_clock_does_not_make_a_slot_due() {
    tokio::time::advance(CENTURIES).await;
    let mut timer = SlotTimer::<Kind>::new();
    timer.set_after(Kind::A, ms(10));
    assert!(poll_once(std::pin::pin!(timer.expired())).is_pending());
    tokio::time::advance(ms(5)).await;
    assert!(poll_once(std::pin::pin!(timer.expired())).is_pending());
}

// 5. `Sleep::is_elapsed` before the first poll answers as tokio's does.

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn is_elapsed_before_the_first_poll_matches_tokio() {
    let start = Instant::now();
    let theirs = tokio::time::sleep(ms(100));
    let ours = lazy_deadline::sleep(ms(100));
    tokio::pin!(theirs, ours);
    assert_eq!(ours.is_elapsed(), theirs.is_elapsed(), "fresh");

    // Reset to the past, never polled.
    theirs.as_mut().reset(start);
    ours.as_mut().reset(start);
    tokio::task::yield_now().await;
    assert!(theirs.is_elapsed());
    assert_eq!(ours.is_elapsed(), theirs.is_elapsed(), "reset to the past");

    // Reset to the future, then the clock passes it, never polled.
    theirs.as_mut().reset(start + ms(50));
    ours.as_mut().reset(start + ms(50));
    assert_eq!(
        ours.is_elapsed(),
        theirs.is_elapsed(),
        "reset to the future"
    );
    tokio::time::advance(ms(60)).await;
    assert!(theirs.is_elapsed());
    assert_eq!(ours.is_elapsed(), theirs.is_elapsed(), "advanced past it");
}
