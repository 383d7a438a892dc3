//! lazy-deadline's own checks of tower's timers once `.ci/client_suites.py` made them
//! ours. tower's suite passes even when `Sleep::reset` does nothing (its rate
//! limiter's tests do not look at when calls go through); these do, on a paused
//! clock, to the millisecond.

use std::convert::Infallible;
use std::time::Duration;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Two calls per 100 ms: each period's calls go through at its start, no earlier and
/// no later (the limiter's one `Sleep` is reset to each period's end).
#[tokio::test(start_paused = true)]
async fn the_rate_limiter_lets_each_periods_calls_through_at_its_start() {
    let mut svc = ServiceBuilder::new()
        .rate_limit(2, ms(100))
        .service_fn(|n: u32| async move { Ok::<_, Infallible>(n) });
    let start = Instant::now();
    let mut at = Vec::new();
    for n in 0..8 {
        assert_eq!(svc.ready().await.unwrap().call(n).await.unwrap(), n);
        at.push((Instant::now() - start).as_millis());
    }
    assert_eq!(at, [0, 0, 100, 100, 200, 200, 300, 300]);
}

/// A 50 ms timeout: calls that answer by then get their answer (the response is
/// polled first, so a tie goes to it), later ones elapse at 50 ms exactly.
#[tokio::test(start_paused = true)]
async fn the_timeout_elapses_at_its_deadline_and_not_before() {
    let mut svc = ServiceBuilder::new()
        .timeout(ms(50))
        .service_fn(|d: u64| async move {
            tokio::time::sleep(ms(d)).await;
            Ok::<_, Infallible>(d)
        });
    for d in [0, 10, 49, 50, 51, 200] {
        let start = Instant::now();
        let outcome = svc.ready().await.unwrap().call(d).await;
        let took = Instant::now() - start;
        if d <= 50 {
            assert_eq!(outcome.unwrap(), d);
            assert_eq!(took, ms(d));
        } else {
            assert!(outcome.is_err(), "{d} ms elapsed");
            assert_eq!(took, ms(50), "{d} ms");
        }
    }
}

/// The retry backoff's sleeps (an exponential backoff of 10 ms, then 20 ms, ...).
#[cfg(feature = "retry")]
#[tokio::test(start_paused = true)]
async fn the_backoff_sleeps_for_what_it_says() {
    use tower::retry::backoff::{Backoff, ExponentialBackoffMaker, MakeBackoff};
    let mut maker = ExponentialBackoffMaker::new(ms(10), ms(1_000), 0.0, tower::util::rng::HasherRng::default())
        .unwrap();
    let mut backoff = maker.make_backoff();
    for expected in [10, 20, 40] {
        let start = Instant::now();
        backoff.next_backoff().await;
        assert_eq!(Instant::now() - start, ms(expected));
    }
}
