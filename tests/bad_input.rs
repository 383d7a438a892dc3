//! The bad-input and lifecycle table of `docs/guarantees.md`, one test per row (paused clock
//! unless a second runtime's real clock is the point).

mod common;

use common::{ms, poll_once, poll_with, CountingWaker};
use lazy_deadline::{timer_kinds, IdleTimeout, SlotTimer};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Duration;
use tokio::time::{self, Instant};

timer_kinds! {
    enum Kind { A, B }
}

const YEARS_10: Duration = Duration::from_secs(86_400 * 365 * 10);

#[tokio::test(start_paused = true)]
async fn duration_max_everywhere_saturates_and_never_fires() {
    let sleep = lazy_deadline::sleep(Duration::MAX);
    let mut idle = IdleTimeout::new(Duration::MAX);
    let mut slots = SlotTimer::<Kind>::new();
    slots.set_after(Kind::A, Duration::MAX);
    slots.handle().set_after(Kind::B, Duration::MAX);
    idle.handle().set_timeout(Duration::MAX);
    idle.set_timeout(Duration::MAX);
    tokio::pin!(sleep);
    time::advance(YEARS_10).await;
    assert!(poll_once(sleep.as_mut()).is_pending());
    assert!(poll_once(Pin::new(&mut idle)).is_pending());
    assert!(poll_once(std::pin::pin!(slots.expired())).is_pending());
    assert!(idle.deadline() > Instant::now() + YEARS_10);
    assert!(slots.deadline(Kind::A).unwrap() > Instant::now() + YEARS_10);
}

#[tokio::test(start_paused = true)]
async fn duration_zero_everywhere_is_due_at_once() {
    let start = Instant::now();
    lazy_deadline::sleep(Duration::ZERO).await;
    IdleTimeout::new(Duration::ZERO).await;
    let mut idle = IdleTimeout::new(Duration::from_secs(60));
    idle.set_timeout(Duration::ZERO);
    (&mut idle).await;
    let mut slots = SlotTimer::<Kind>::new();
    slots.set_after(Kind::A, Duration::ZERO);
    slots.handle().set_after(Kind::B, Duration::ZERO);
    assert_eq!(slots.expired().await.len(), 2);
    assert_eq!(Instant::now(), start, "nothing waited");
}

#[tokio::test(start_paused = true)]
async fn instants_in_the_past_are_due_at_once() {
    let start = Instant::now();
    let long_ago = start
        .checked_sub(Duration::from_secs(3 * 86_400))
        .unwrap_or(start);
    lazy_deadline::sleep_until(long_ago).await;
    let mut slots = SlotTimer::<Kind>::new();
    slots.set(Kind::A, long_ago);
    slots.handle().set(Kind::B, start - ms(1));
    assert_eq!(slots.expired().await.len(), 2);
    let s = lazy_deadline::sleep(ms(10));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset(long_ago);
    s.await;
    assert_eq!(Instant::now(), start);
}

#[tokio::test(start_paused = true)]
async fn instants_far_in_the_future_saturate() {
    let far = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4));
    let Some(far) = far else { return }; // the platform cannot even name it
    let sleep = lazy_deadline::sleep_until(far);
    tokio::pin!(sleep);
    assert!(poll_once(sleep.as_mut()).is_pending());
    assert_eq!(
        sleep.deadline(),
        far,
        "the deadline is kept exactly as given"
    );
    let mut slots = SlotTimer::<Kind>::new();
    slots.set(Kind::A, far);
    slots.handle().set(Kind::B, far);
    let mut idle = IdleTimeout::new(ms(1));
    idle.touch_at(far);
    idle.handle().touch_at(far);
    time::advance(YEARS_10).await;
    assert!(poll_once(sleep.as_mut()).is_pending());
    assert!(poll_once(std::pin::pin!(slots.expired())).is_pending());
    assert!(poll_once(Pin::new(&mut idle)).is_pending());
}

#[tokio::test(start_paused = true)]
async fn older_touch_at_is_ignored_from_owner_and_handle() {
    let idle = IdleTimeout::new(ms(10));
    let now = Instant::now();
    let long_ago = now.checked_sub(Duration::from_secs(86_400)).unwrap_or(now);
    idle.touch_at(long_ago);
    idle.handle().touch_at(long_ago);
    assert_eq!(idle.last_activity(), now);
}

#[tokio::test(start_paused = true)]
async fn handles_used_after_their_timer_is_dropped() {
    let idle = IdleTimeout::new(ms(10));
    let activity = idle.handle();
    let slots = SlotTimer::<Kind>::new();
    let setter = slots.handle();
    drop((idle, slots));
    activity.touch();
    activity.set_timeout(Duration::ZERO);
    setter.set_after(Kind::A, Duration::ZERO);
    setter.cancel(Kind::B);
    let _ = (activity.clone(), setter.clone());
}

/// A waker that drops the timer it belongs to when woken.
struct DropOnWake<T>(Arc<Mutex<Option<T>>>);
impl<T: Send + 'static> Wake for DropOnWake<T> {
    fn wake(self: Arc<Self>) {
        self.0.lock().unwrap().take();
    }
}

#[tokio::test(start_paused = true)]
async fn timers_dropped_inside_their_waker() {
    // IdleTimeout, woken by a handle shortening its timeout.
    let idle = Arc::new(Mutex::new(Some(IdleTimeout::new(Duration::from_secs(60)))));
    let waker = Waker::from(Arc::new(DropOnWake(idle.clone())));
    let handle = {
        let mut guard = idle.lock().unwrap();
        let timer = guard.as_mut().unwrap();
        assert!(poll_with(Pin::new(&mut *timer), &waker).is_pending());
        timer.handle()
    };
    handle.set_timeout(ms(1)); // wakes: the waker drops the timer
    assert!(idle.lock().unwrap().is_none());

    // SlotTimer, woken by a handle setting an earlier deadline, then by its entry.
    let slots = Arc::new(Mutex::new(Some(SlotTimer::<Kind>::new())));
    let waker = Waker::from(Arc::new(DropOnWake(slots.clone())));
    let handle = {
        let mut guard = slots.lock().unwrap();
        let timer = guard.as_mut().unwrap();
        timer.set_after(Kind::A, Duration::from_secs(60));
        assert!(poll_with(std::pin::pin!(timer.expired()), &waker).is_pending());
        timer.handle()
    };
    handle.set_after(Kind::B, ms(1));
    assert!(slots.lock().unwrap().is_none());

    // Sleep, woken by the driver when its entry fires.
    let sleep = Arc::new(Mutex::new(Some(Box::pin(lazy_deadline::sleep(ms(5))))));
    let waker = Waker::from(Arc::new(DropOnWake(sleep.clone())));
    {
        let mut guard = sleep.lock().unwrap();
        assert!(poll_with(guard.as_mut().unwrap().as_mut(), &waker).is_pending());
    }
    time::advance(ms(5)).await;
    assert!(sleep.lock().unwrap().is_none());
}

#[test]
fn timer_created_in_one_runtime_polled_in_another() {
    // Real time on purpose: each runtime has its own clock. The timer stays bound to
    // the runtime it was created in (as tokio's own Sleep does), whose driver runs on
    // its own worker threads, while a second runtime polls it.
    let home = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let (sleep, mut idle, mut slots) = {
        let _inside = home.enter();
        let mut slots = SlotTimer::<Kind>::new();
        slots.set_after(Kind::A, ms(15));
        (
            Box::pin(lazy_deadline::sleep(ms(15))),
            IdleTimeout::new(ms(15)),
            slots,
        )
    };
    let away = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let start = std::time::Instant::now();
    away.block_on(async {
        sleep.await;
        (&mut idle).await;
        assert!(slots.expired().await.contains(Kind::A));
    });
    assert!(start.elapsed() >= ms(15));
}

#[test]
fn runtime_shut_down_while_timers_are_pending() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (sleep, idle, slots, (counter, waker)) = rt.block_on(async {
        let mut sleep = Box::pin(lazy_deadline::sleep(Duration::from_secs(60)));
        let mut idle = IdleTimeout::new(Duration::from_secs(60));
        let mut slots = SlotTimer::<Kind>::new();
        slots.set_after(Kind::A, Duration::from_secs(60));
        let wakes = CountingWaker::new();
        assert!(poll_with(sleep.as_mut(), &wakes.1).is_pending());
        assert!(poll_with(Pin::new(&mut idle), &wakes.1).is_pending());
        assert!(poll_with(std::pin::pin!(slots.expired()), &wakes.1).is_pending());
        (sleep, idle, slots, wakes)
    });
    let (activity, setter) = (idle.handle(), slots.handle());
    drop(rt); // shutdown with all three registered
    activity.touch();
    setter.set_after(Kind::B, ms(1));
    drop((sleep, idle, slots, waker));
    let _ = counter.wakes();
}

#[test]
fn a_sleep_polled_after_its_runtime_shut_down_panics_as_tokios_does() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (mut filed, mut unpolled, mut theirs) = rt.block_on(async {
        let mut filed = Box::pin(lazy_deadline::sleep(Duration::from_secs(60)));
        assert!(poll_once(filed.as_mut()).is_pending());
        let unpolled = Box::pin(lazy_deadline::sleep(Duration::from_secs(60)));
        let theirs = Box::pin(tokio::time::sleep(Duration::from_secs(60)));
        (filed, unpolled, theirs)
    });
    drop(rt);
    let message = |result: std::thread::Result<_>| {
        let panic = result.expect_err("a poll after shutdown panics");
        panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    };
    let tokio_says = message(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || poll_once(theirs.as_mut()),
    )));
    let filed_says = message(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || poll_once(filed.as_mut()),
    )));
    let unpolled_says = message(std::panic::catch_unwind(std::panic::AssertUnwindSafe(
        || poll_once(unpolled.as_mut()),
    )));
    assert!(tokio_says.contains("being shutdown"), "{tokio_says}");
    assert_eq!(filed_says, tokio_says);
    assert_eq!(unpolled_says, tokio_says);
    drop((filed, unpolled, theirs));
}

/// 40 years: past tokio's own stand-in for "never" (now + 30 years).
const YEARS_40: Duration = Duration::from_secs(86_400 * 365 * 40);

#[tokio::test(start_paused = true)]
async fn a_saturated_deadline_read_out_and_given_back_stays_never() {
    use futures::FutureExt;
    // DelayQueue: `reset_at(deadline(&key))` of a `Duration::MAX` entry.
    let mut queue = lazy_deadline::DelayQueue::new();
    let key = queue.insert(1u8, Duration::MAX);
    let never = queue.deadline(&key);
    queue.reset_at(&key, never);
    assert_eq!(queue.deadline(&key), never, "the same instant, still never");
    // DelayMap, the same way.
    let mut map = lazy_deadline::DelayMap::new();
    map.insert(1u8, (), Duration::MAX);
    assert!(map.reset_at(&1, map.deadline(&1).unwrap()));
    // SlotTimer: a kind set at its own saturated deadline.
    let mut slots = SlotTimer::<Kind>::new();
    slots.set_after(Kind::A, Duration::MAX);
    let (_, deadline) = slots.next_deadline().unwrap();
    slots.set(Kind::A, deadline);
    // IdleTimeout: touched at the deadline it reports.
    let mut idle = IdleTimeout::new(Duration::MAX);
    let deadline = idle.deadline();
    idle.touch_at(deadline);
    // Polled, then again after the paused clock ran past tokio's far future:
    // nothing fires either time.
    for run_past_far_future in [false, true] {
        if run_past_far_future {
            time::advance(YEARS_40).await;
        }
        assert!(std::future::poll_fn(|cx| queue.poll_expired(cx))
            .now_or_never()
            .is_none());
        assert!(map.expired().now_or_never().is_none());
        assert!(slots.expired().now_or_never().is_none());
        assert!(poll_once(Pin::new(&mut idle)).is_pending());
    }
    assert!(
        queue.deadline(&key) > Instant::now(),
        "never stays ahead of the clock"
    );
}

#[tokio::test(start_paused = true)]
async fn interval_duration_max_and_far_instants_saturate() {
    use futures::FutureExt;
    // `Duration::MAX` periods and resets are capped at ~30 years, as tokio caps them.
    let mut interval = lazy_deadline::interval(Duration::MAX);
    assert_eq!(interval.period(), Duration::from_secs(86_400 * 365 * 30));
    interval.tick().await; // the first tick is at once
    interval.reset();
    interval.reset_after(Duration::MAX);
    assert!(interval.tick().now_or_never().is_none());
    time::advance(YEARS_10).await;
    assert!(interval.tick().now_or_never().is_none());
    // An instant as far ahead as the platform can name.
    let far = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4));
    if let Some(far) = far {
        interval.reset_at(far);
        assert!(interval.tick().now_or_never().is_none());
        let mut from_far = lazy_deadline::interval_at(far, Duration::MAX);
        assert!(from_far.tick().now_or_never().is_none());
    }
    // Missed ticks of a 30-year period after a stall: the Skip arithmetic holds.
    let mut skip = lazy_deadline::interval(ms(1));
    skip.set_missed_tick_behavior(lazy_deadline::MissedTickBehavior::Skip);
    skip.tick().await;
    time::advance(YEARS_10).await;
    skip.tick().await;
    let next = skip.tick().await;
    assert!(next > Instant::now() - ms(1));
}

#[test]
#[should_panic(expected = "`period` must be non-zero.")]
fn interval_with_a_zero_period_panics_as_tokios_does() {
    let rt = common::paused_runtime();
    let _inside = rt.enter();
    let _ = lazy_deadline::interval(Duration::ZERO);
}

#[test]
fn a_sleep_polled_while_its_runtime_shuts_down_is_pending_not_a_panic() {
    // Workers still polling their tasks while the runtime drops others (a quinn
    // connection's timer during shutdown): tokio's time driver is still up then, so
    // tokio's `Sleep` is pending, and so must ours be.
    let panicked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..20 {
        let rt = common::two_workers();
        rt.block_on(async {
            for _ in 0..64 {
                let panicked = panicked.clone();
                tokio::spawn(async move {
                    let mut sleep = Box::pin(lazy_deadline::sleep(Duration::from_secs(3600)));
                    loop {
                        let poll = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            poll_once(sleep.as_mut()).is_pending()
                        }));
                        if !matches!(poll, Ok(true)) {
                            // Relaxed: read after the runtime is gone.
                            panicked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                        tokio::task::yield_now().await;
                    }
                });
            }
            tokio::task::yield_now().await;
        });
        drop(rt);
    }
    assert_eq!(
        panicked.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "polls that panicked"
    );
}
