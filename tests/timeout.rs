//! `timeout` / `timeout_at`, and a fresh `sleep` per request raced in a `select!`: a
//! wake-driven paused-clock differential against tokio's, and the lifecycle cases (answered or dropped never wake, runtimes in
//! turn and interleaved on one thread, shutdown with timeouts pending).

mod common;

use common::{ms, paused_runtime, CountingWaker, Rng};
use proptest::prelude::*;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{self, Instant};

/// (deadline, answered?, instant it resolved), per request and side.
type Outcomes = Arc<Mutex<Vec<Option<(bool, Instant)>>>>;

#[derive(Clone, Copy, Debug)]
struct Request {
    /// The timeout, µs.
    timeout_us: u64,
    /// When the inner future completes, µs after the start (`None`: never).
    answer_us: Option<u64>,
    /// When the request starts, µs after the run's start.
    start_us: u64,
}

fn request(whole_ms: bool) -> impl Strategy<Value = Request> {
    let us = move |max_ms: u64| {
        if whole_ms {
            (0..max_ms).prop_map(|ms| ms * 1_000).boxed()
        } else {
            (0..max_ms * 1_000).boxed()
        }
    };
    (us(60), prop::option::weighted(0.7, us(80)), us(40)).prop_map(
        |(timeout_us, answer_us, start_us)| Request {
            timeout_us,
            answer_us,
            start_us,
        },
    )
}

/// Spawns one task per request for one side; each waits for its start, then awaits
/// `timeout(inner)` and records how and when it resolved.
macro_rules! spawn_side {
    ($timeout:path, $requests:expr, $origin:expr, $out:expr) => {
        for (i, r) in $requests.iter().copied().enumerate() {
            let out = $out.clone();
            let origin = $origin;
            tokio::spawn(async move {
                time::sleep_until(origin + Duration::from_micros(r.start_us)).await;
                let inner = async move {
                    match r.answer_us {
                        Some(at) => time::sleep_until(origin + Duration::from_micros(at)).await,
                        None => std::future::pending().await,
                    }
                };
                let answered = $timeout(Duration::from_micros(r.timeout_us), inner)
                    .await
                    .is_ok();
                out.lock().unwrap()[i] = Some((answered, Instant::now()));
            });
        }
    };
}

/// A fresh lazy `sleep` raced against the request in a `select!`, the request
/// polled first (as a timeout polls it).
async fn lazy_sleep_race<F: Future>(deadline: Duration, request: F) -> Result<F::Output, ()> {
    tokio::select! {
        biased;
        answer = request => Ok(answer),
        () = lazy_deadline::sleep(deadline) => Err(()),
    }
}

/// The same with a fresh tokio `sleep`.
async fn tokio_sleep_race<F: Future>(deadline: Duration, request: F) -> Result<F::Output, ()> {
    tokio::select! {
        biased;
        answer = request => Ok(answer),
        () = tokio::time::sleep(deadline) => Err(()),
    }
}

/// Which deadline each request runs under, on both sides.
#[derive(Clone, Copy, Debug)]
enum Under {
    Timeout,
    FreshSleep,
}

fn run(requests: Vec<Request>, step_us: u64, exact: bool) -> Result<(), TestCaseError> {
    run_under(Under::Timeout, requests, step_us, exact)
}

fn run_under(
    under: Under,
    requests: Vec<Request>,
    step_us: u64,
    exact: bool,
) -> Result<(), TestCaseError> {
    // Under a watchdog: a poll that spins (a service that never settles) fails the
    // case by name instead of hanging the suite.
    common::watchdog("a case of the timeout differential", LIMIT, move || {
        run_case(under, requests, step_us, exact)
    })
}

/// A case may take this long (it takes milliseconds).
const LIMIT: Duration = Duration::from_secs(60);

fn run_case(
    under: Under,
    requests: Vec<Request>,
    step_us: u64,
    exact: bool,
) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let origin = Instant::now();
        let n = requests.len();
        let (ours, peer): (Outcomes, Outcomes) = (
            Arc::new(Mutex::new(vec![None; n])),
            Arc::new(Mutex::new(vec![None; n])),
        );
        match under {
            Under::Timeout => {
                spawn_side!(lazy_deadline::timeout, requests, origin, ours);
                spawn_side!(tokio::time::timeout, requests, origin, peer);
            }
            Under::FreshSleep => {
                spawn_side!(lazy_sleep_race, requests, origin, ours);
                spawn_side!(tokio_sleep_race, requests, origin, peer);
            }
        }
        // Every start, answer and deadline is within 200 ms.
        while Instant::now() < origin + ms(200) {
            time::advance(Duration::from_micros(step_us)).await;
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }
        let (ours, peer) = (ours.lock().unwrap(), peer.lock().unwrap());
        for (i, r) in requests.iter().enumerate() {
            let deadline = origin + Duration::from_micros(r.start_us + r.timeout_us);
            let (Some((ours_ok, ours_at)), Some((peer_ok, peer_at))) = (ours[i], peer[i]) else {
                return Err(TestCaseError::fail(format!(
                    "request {i} {r:?} never resolved: ours {:?}",
                    ours[i]
                )));
            };
            let show = |at: Instant| at - origin;
            prop_assert!(
                ours_at <= peer_at,
                "request {} {:?}: ours resolved at +{:?}, after tokio's +{:?}",
                i,
                r,
                show(ours_at),
                show(peer_at)
            );
            if !ours_ok {
                prop_assert!(
                    ours_at >= deadline,
                    "request {} {:?}: elapsed at +{:?}, before its deadline",
                    i,
                    r,
                    show(ours_at)
                );
            } else {
                prop_assert!(
                    peer_ok && ours_at == peer_at,
                    "request {} {:?}: ours answered at +{:?}, tokio {:?} at +{:?}",
                    i,
                    r,
                    show(ours_at),
                    peer_ok,
                    show(peer_at)
                );
            }
            if exact {
                prop_assert_eq!(
                    (ours_ok, ours_at),
                    (peer_ok, peer_at),
                    "request {} {:?} on whole milliseconds",
                    i,
                    r
                );
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::proptest_cases()))]

    #[test]
    fn timeout_resolves_as_tokios_on_whole_milliseconds(
        requests in prop::collection::vec(request(true), 1..24),
    ) {
        run(requests, 1_000, true)?;
    }

    #[test]
    fn timeout_is_never_early_and_never_after_tokio_off_the_grid(
        requests in prop::collection::vec(request(false), 1..24),
        step_us in 50u64..1_500,
    ) {
        run(requests, step_us, false)?;
    }

    #[test]
    fn a_fresh_sleep_per_request_resolves_as_tokios_on_whole_milliseconds(
        requests in prop::collection::vec(request(true), 1..24),
    ) {
        run_under(Under::FreshSleep, requests, 1_000, true)?;
    }

    #[test]
    fn a_fresh_sleep_per_request_is_never_early_and_never_after_tokio_off_the_grid(
        requests in prop::collection::vec(request(false), 1..24),
        step_us in 50u64..1_500,
    ) {
        run_under(Under::FreshSleep, requests, step_us, false)?;
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_answered_or_dropped_timeout_never_wakes_its_task_afterwards() {
    let (count, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    // Dropped while pending.
    let mut dropped = Box::pin(lazy_deadline::timeout(ms(10), std::future::pending::<()>()));
    assert!(dropped.as_mut().poll(&mut cx).is_pending());
    drop(dropped);
    // Answered while pending, then kept around.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut answered = Box::pin(lazy_deadline::timeout(ms(10), rx));
    assert!(answered.as_mut().poll(&mut cx).is_pending());
    tx.send(()).unwrap();
    let woken_by_answer = count.wakes();
    assert!(matches!(
        answered.as_mut().poll(&mut cx),
        Poll::Ready(Ok(Ok(())))
    ));
    time::advance(ms(50)).await;
    assert_eq!(
        count.wakes(),
        woken_by_answer,
        "woken after it was answered or dropped"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_overflowing_duration_never_elapses_and_a_past_deadline_elapses_at_once() {
    let never = lazy_deadline::timeout(Duration::MAX, std::future::pending::<()>());
    let mut never = pin!(never);
    assert!(futures::poll!(never.as_mut()).is_pending());
    time::advance(Duration::from_secs(86_400 * 365 * 40)).await;
    assert!(futures::poll!(never.as_mut()).is_pending());
    let past = lazy_deadline::timeout_at(Instant::now() - ms(5), std::future::pending::<()>());
    assert!(past.await.is_err());
    // A ready future wins even past its deadline (it is polled first).
    let ready = lazy_deadline::timeout_at(Instant::now() - ms(5), async { 7 });
    assert_eq!(ready.await, Ok(7));
}

/// A paused and a real-time current-thread runtime, to use in turn on this thread,
/// and a waker that counts its wakes.
fn paused_and_real() -> (
    tokio::runtime::Runtime,
    tokio::runtime::Runtime,
    (Arc<CountingWaker>, std::task::Waker),
) {
    let real = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    (paused_runtime(), real, CountingWaker::new())
}

#[test]
fn two_runtimes_on_one_thread_each_judge_their_own_deadlines() {
    // Under a watchdog: a lost wake fails by name instead of hanging the suite.
    common::watchdog("two runtimes on one thread", LIMIT, || {
        let (paused, real, (count, waker)) = paused_and_real();
        let mut cx = Context::from_waker(&waker);
        // Filed in the paused runtime's set, one hour out by its clock.
        #[allow(clippy::async_yields_async)] // the pending timeout is carried out, on purpose
        let mut in_paused = paused.block_on(async {
            let mut t = Box::pin(lazy_deadline::timeout(
                Duration::from_secs(3600),
                std::future::pending::<()>(),
            ));
            assert!(t.as_mut().poll(&mut cx).is_pending());
            t
        });
        // The real runtime's clock runs on; its own 5 ms timeout elapses in real time,
        // while the paused one's stays pending.
        real.block_on(async {
            let elapsed = lazy_deadline::timeout(ms(5), std::future::pending::<()>()).await;
            assert!(elapsed.is_err());
            assert!(
                in_paused.as_mut().poll(&mut cx).is_pending(),
                "judged by another runtime's clock"
            );
        });
        // The paused runtime jumps an hour: its deadline passes by its clock.
        paused.block_on(async {
            time::advance(Duration::from_secs(3600)).await;
            assert!(count.wakes() >= 1, "not woken by its runtime's entry");
            assert!(matches!(
                in_paused.as_mut().poll(&mut cx),
                Poll::Ready(Err(_))
            ));
        });
    });
}

#[test]
fn a_sleep_is_judged_by_the_runtime_it_was_made_in_wherever_it_is_polled() {
    // Under a watchdog: a lost wake fails by name instead of hanging the suite.
    common::watchdog(
        "a sleep judged by the runtime it was made in",
        LIMIT,
        || {
            let (paused, real, (count, waker)) = paused_and_real();
            let mut cx = Context::from_waker(&waker);
            // Made in the paused runtime, one hour out by its clock, not polled there.
            let mut made_paused = {
                let _inside = paused.enter();
                Box::pin(lazy_deadline::sleep(Duration::from_secs(3600)))
            };
            // First polled inside the real runtime, whose clock runs on: still the paused
            // runtime's deadline, as with tokio's `Sleep`.
            real.block_on(async {
                assert!(made_paused.as_mut().poll(&mut cx).is_pending());
                lazy_deadline::sleep(ms(5)).await;
                assert!(
                    made_paused.as_mut().poll(&mut cx).is_pending(),
                    "judged by the poller's clock"
                );
            });
            paused.block_on(async {
                time::advance(Duration::from_secs(3600)).await;
                assert!(count.wakes() >= 1, "not woken by its runtime's entry");
                assert!(made_paused.as_mut().poll(&mut cx).is_ready());
            });
        },
    );
}

#[test]
fn runtimes_in_turn_on_one_thread_and_shutdown_with_timeouts_pending() {
    for round in 0..5u64 {
        // Paused current-thread and real-time two-worker runtimes in turn.
        let rt = if round % 2 == 0 {
            paused_runtime()
        } else {
            common::two_workers()
        };
        rt.block_on(async {
            for i in 0..200u64 {
                tokio::spawn(lazy_deadline::timeout(
                    Duration::from_secs(60 + i),
                    std::future::pending::<()>(),
                ));
            }
            let quick = lazy_deadline::timeout(ms(2), std::future::pending::<()>()).await;
            assert!(quick.is_err());
        });
        // Dropped with 200 timeouts pending on its workers' sets: no panic, no hang.
        drop(rt);
    }
}

#[test]
fn tasks_that_move_between_workers_and_drops_on_other_threads() {
    // Real time on two workers: requests answered in time, elapsed, and dropped from
    // other threads and from blocking threads that then exit.
    let rt = common::two_workers_short_lived_blocking(ms(10));
    let early = Arc::new(Mutex::new(Vec::new()));
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..64u64 {
            let early = early.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::new(t + 1);
                for _ in 0..40 {
                    let timeout = Duration::from_micros(200 + rng.below(3_000));
                    let answer = Duration::from_micros(rng.below(4_000));
                    let started = Instant::now();
                    let result = lazy_deadline::timeout(timeout, tokio::time::sleep(answer)).await;
                    if result.is_err() && started.elapsed() < timeout {
                        early.lock().unwrap().push((timeout, started.elapsed()));
                    }
                    tokio::task::yield_now().await; // let the task move
                }
            }));
        }
        // Futures polled once here, then dropped on another thread.
        for _ in 0..200 {
            let mut pending =
                Box::pin(lazy_deadline::timeout(ms(50), std::future::pending::<()>()));
            assert!(futures::poll!(pending.as_mut()).is_pending());
            std::thread::spawn(move || drop(pending)).join().unwrap();
        }
        // Timeouts on blocking threads (their sets outlive the threads).
        let handle = tokio::runtime::Handle::current();
        let blocking: Vec<_> = (0..8)
            .map(|_| {
                let handle = handle.clone();
                tokio::task::spawn_blocking(move || {
                    handle
                        .block_on(lazy_deadline::timeout(ms(1), std::future::pending::<()>()))
                        .is_err()
                })
            })
            .collect();
        for task in blocking {
            assert!(task.await.unwrap());
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    assert!(
        early.lock().unwrap().is_empty(),
        "elapsed early: {:?}",
        early.lock().unwrap()
    );
}
