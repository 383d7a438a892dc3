//! `IdleTimeout` + `ActivityHandle` under the paused clock (and one real-time test
//! with several threads touching).

mod common;

use common::{ms, poll_once, poll_with, CountingWaker};
use lazy_deadline::IdleTimeout;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{self, Instant};

fn pending(idle: &mut IdleTimeout) -> bool {
    poll_once(Pin::new(idle)).is_pending()
}

#[tokio::test(start_paused = true)]
async fn expires_only_after_timeout_of_silence() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(ms(100));
    assert!(pending(&mut idle));
    time::advance(ms(99)).await;
    assert!(pending(&mut idle));
    assert!(!idle.is_elapsed());
    time::advance(ms(1)).await;
    assert!(!pending(&mut idle));
    assert!(idle.is_elapsed());
    assert_eq!(idle.deadline(), start + ms(100));
}

#[tokio::test(start_paused = true)]
async fn activity_pushes_expiry_back_with_one_rearm_per_period() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(ms(50));
    assert!(pending(&mut idle));
    // 1 packet per ms for 1 s: the timer must not fire, and must not re-arm per packet.
    for _ in 0..1000 {
        time::advance(ms(1)).await;
        idle.touch();
        assert!(pending(&mut idle));
    }
    (&mut idle).await;
    assert_eq!(Instant::now(), start + ms(1050));
    let stats = idle.stats();
    // Re-armed once per 50 ms of traffic (plus the final wait), not once per packet.
    assert!(stats.registrations <= 1000 / 50 + 2, "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn touches_from_another_task_keep_it_alive() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(ms(30));
    let handle = idle.handle();
    tokio::spawn(async move {
        for _ in 0..10 {
            time::sleep(ms(20)).await;
            handle.touch();
        }
    });
    (&mut idle).await;
    assert_eq!(Instant::now(), start + ms(230));
}

#[tokio::test(start_paused = true)]
async fn older_touch_at_is_ignored() {
    let idle = IdleTimeout::new(ms(10));
    let handle = idle.handle();
    let now = Instant::now();
    idle.touch_at(now + ms(5));
    idle.touch_at(now + ms(1));
    assert_eq!(idle.last_activity(), now + ms(5));
    handle.touch_at(now + ms(7));
    handle.touch_at(now + ms(2));
    assert_eq!(idle.last_activity(), now + ms(7));
    idle.touch_at(now + ms(6)); // owner older than a handle's: changes nothing
    assert_eq!(idle.last_activity(), now + ms(7));
    assert_eq!(idle.deadline(), now + ms(17));
}

#[tokio::test(start_paused = true)]
async fn shortening_from_a_handle_wakes_and_takes_effect() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(Duration::from_secs(60));
    let handle = idle.handle();
    let (counter, waker) = CountingWaker::new();
    assert!(poll_with(Pin::new(&mut idle), &waker).is_pending());
    time::advance(ms(10)).await;
    handle.set_timeout(ms(30));
    assert_eq!(counter.wakes(), 1, "a shorter timeout wakes the owner");
    assert!(pending(&mut idle));
    (&mut idle).await;
    assert_eq!(Instant::now(), start + ms(30));
}

/// A pending poll does not poll the runtime entry (the entry fires through a waker
/// of the timer's own), so the fire must reach whichever waker polled last, also one
/// that only ever took the fast path: a timer moved to another task.
#[tokio::test(start_paused = true)]
async fn the_fire_wakes_the_last_poller_not_the_first() {
    let mut idle = IdleTimeout::new(ms(50));
    let (first, first_waker) = CountingWaker::new();
    let (last, last_waker) = CountingWaker::new();
    assert!(poll_with(Pin::new(&mut idle), &first_waker).is_pending()); // arms
    assert!(poll_with(Pin::new(&mut idle), &last_waker).is_pending()); // fast path
    time::advance(ms(49)).await;
    assert_eq!((first.wakes(), last.wakes()), (0, 0), "woken early");
    time::advance(ms(1)).await;
    assert_eq!((first.wakes(), last.wakes()), (0, 1));
    assert!(poll_with(Pin::new(&mut idle), &last_waker).is_ready());
    assert_eq!(idle.stats().registrations, 1);
}

/// The entry's fire is kept in a flag until the entry is polled: a poll that meets
/// tokio's exhausted coop budget (inside the entry's own poll) must not drop it.
#[tokio::test(start_paused = true)]
async fn a_fire_met_with_no_budget_left_is_kept_for_the_next_poll() {
    let mut idle = IdleTimeout::new(ms(10));
    assert!(pending(&mut idle)); // arms the entry
    time::advance(ms(10)).await; // the entry fires: the flag is up
    let mut spent = false;
    time::timeout(
        ms(1_000),
        std::future::poll_fn(|cx| {
            if !spent {
                spent = true;
                // Spend the task's whole budget, then poll the timer in that turn.
                while let std::task::Poll::Ready(restore) = tokio::task::coop::poll_proceed(cx) {
                    restore.made_progress();
                }
                assert!(
                    Pin::new(&mut idle).poll(cx).is_pending(),
                    "no budget: pending"
                );
                return std::task::Poll::Pending; // the budget check woke this task
            }
            Pin::new(&mut idle).poll(cx)
        }),
    )
    .await
    .expect("the fire was dropped with the budget");
}

#[tokio::test(start_paused = true)]
async fn lengthening_is_lazy_and_wakes_nobody() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(ms(10));
    let (counter, waker) = CountingWaker::new();
    assert!(poll_with(Pin::new(&mut idle), &waker).is_pending());
    idle.handle().set_timeout(ms(40));
    assert_eq!(counter.wakes(), 0);
    (&mut idle).await;
    assert_eq!(Instant::now(), start + ms(40));
    assert_eq!(idle.stats().registrations, 2);
}

#[tokio::test(start_paused = true)]
async fn shortening_below_elapsed_time_fires_at_once() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(Duration::from_secs(10));
    assert!(pending(&mut idle));
    time::advance(ms(500)).await;
    idle.set_timeout(ms(100));
    assert!(!pending(&mut idle));
    assert_eq!(Instant::now(), start + ms(500));
}

#[tokio::test(start_paused = true)]
async fn stays_ready_until_new_activity_then_rearms() {
    let mut idle = IdleTimeout::new(ms(10));
    (&mut idle).await;
    assert!(!pending(&mut idle));
    assert!(!pending(&mut idle));
    let rearmed_at = Instant::now();
    idle.touch();
    assert!(pending(&mut idle));
    (&mut idle).await;
    assert_eq!(Instant::now(), rearmed_at + ms(10));
}

#[tokio::test(start_paused = true)]
async fn extreme_timeouts_saturate() {
    let mut forever = IdleTimeout::new(Duration::MAX);
    assert!(pending(&mut forever));
    assert_eq!(forever.timeout(), Duration::from_nanos(u64::MAX));
    time::advance(Duration::from_secs(86_400 * 365 * 10)).await;
    assert!(pending(&mut forever));
    forever.touch_at(Instant::now() + Duration::from_secs(86_400 * 365 * 50));
    assert!(pending(&mut forever));
    let _ = forever.deadline();

    let mut zero = IdleTimeout::new(Duration::ZERO);
    assert!(!pending(&mut zero));
    zero.handle().set_timeout(Duration::MAX);
    assert!(pending(&mut zero));
}

#[tokio::test(start_paused = true)]
async fn touch_in_the_future_is_taken_as_given() {
    let start = Instant::now();
    let mut idle = IdleTimeout::new(ms(10));
    idle.touch_at(start + ms(100));
    (&mut idle).await;
    assert_eq!(Instant::now(), start + ms(110));
}

#[tokio::test(start_paused = true)]
async fn handle_outlives_timer_harmlessly() {
    let idle = IdleTimeout::new(ms(10));
    let handle = idle.handle();
    let (_, waker) = CountingWaker::new();
    let mut idle = idle;
    assert!(poll_with(Pin::new(&mut idle), &waker).is_pending());
    drop(idle);
    handle.touch();
    handle.set_timeout(Duration::ZERO);
    let clone = handle.clone();
    assert!(format!("{clone:?}").contains("ActivityHandle"));
}

#[tokio::test(start_paused = true)]
async fn same_virtual_instant_as_tokio_after_rearms() {
    // The deadline moves later several times; the final expiry matches a tokio Sleep
    // reset to the same final deadline.
    let start = Instant::now();
    let mut idle = IdleTimeout::new(ms(20));
    let tokio_sleep = time::sleep(ms(20));
    tokio::pin!(tokio_sleep);
    assert!(pending(&mut idle));
    for step in [7u64, 13, 3, 19] {
        time::advance(ms(step)).await;
        let now = Instant::now();
        idle.touch_at(now);
        tokio_sleep.as_mut().reset(now + ms(20));
    }
    tokio_sleep.as_mut().await;
    let tokio_done = Instant::now();
    (&mut idle).await;
    assert_eq!(Instant::now(), tokio_done);
    assert_eq!(tokio_done, start + ms(42 + 20));
}

#[test]
fn types_are_send_and_handles_sync() {
    fn send<T: Send>() {}
    fn send_sync_static<T: Send + Sync + 'static>() {}
    fn unpin<T: Unpin>() {}
    send::<IdleTimeout>();
    unpin::<IdleTimeout>();
    send_sync_static::<lazy_deadline::ActivityHandle>();
}

/// Real time on purpose: threads touch through handles with the system clock running;
/// the timer must fire only after the last touch plus the timeout.
#[test]
fn real_time_many_handles_fire_after_the_last_touch() {
    let rt = common::two_workers();
    rt.block_on(async {
        let timeout = ms(40);
        let mut idle = IdleTimeout::new(timeout);
        let mut touchers = Vec::new();
        for t in 0..4u64 {
            let handle = idle.handle();
            touchers.push(tokio::spawn(async move {
                let until = Instant::now() + ms(150 + 10 * t);
                let mut last = Instant::now();
                while Instant::now() < until {
                    last = Instant::now();
                    handle.touch_at(last);
                    time::sleep(ms(1)).await;
                }
                last
            }));
        }
        (&mut idle).await;
        let fired = Instant::now();
        let mut last_touch = idle.last_activity();
        for t in touchers {
            last_touch = last_touch.max(t.await.unwrap());
        }
        assert!(
            fired >= last_touch + timeout,
            "fired {:?} early",
            last_touch + timeout - fired
        );
        // Generous: shared CI machines stall; this only catches "never re-armed".
        assert!(
            fired <= last_touch + timeout + ms(500),
            "fired {:?} late",
            fired - last_touch - timeout
        );
    });
}
