//! `lazy_deadline::Sleep` behaves like `tokio::time::Sleep` in the cases tokio's own
//! sleep tests care about, under the paused clock.

mod common;

use common::{ms, poll_once};
use lazy_deadline::{sleep, sleep_until};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Wake, Waker};
use std::time::Duration;
use tokio::time::{self, Instant};

/// A hang's bound: each test takes milliseconds.
const LIMIT: Duration = Duration::from_secs(60);

/// `#[tokio::test(start_paused = true)]` under a watchdog: the test's body runs on a
/// paused current-thread runtime, and a lost wake (which parks that runtime for
/// good) fails the test by name within `LIMIT` instead of hanging the suite.
macro_rules! paused_test {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            common::watchdog(stringify!($name), LIMIT, || {
                common::paused_runtime().block_on(async $body)
            })
        }
    };
}

paused_test! {
async fn zero_duration_is_ready_at_once() {
    let start = Instant::now();
    sleep(Duration::ZERO).await;
    assert_eq!(Instant::now(), start);
}
}

paused_test! {
async fn past_deadline_is_ready_at_once() {
    let start = Instant::now();
    sleep_until(start - ms(10)).await;
    assert_eq!(Instant::now(), start);
}
}

paused_test! {
async fn completes_at_the_deadline_not_before() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    time::advance(ms(9)).await;
    assert!(poll_once(s.as_mut()).is_pending());
    assert!(!s.is_elapsed());
    time::advance(ms(1)).await;
    assert!(poll_once(s.as_mut()).is_ready());
    assert!(s.is_elapsed());
    assert_eq!(s.deadline(), start + ms(10));
}
}

paused_test! {
async fn sub_millisecond_sleep_waits_like_tokio() {
    let start = Instant::now();
    let ours = sleep(Duration::from_micros(300));
    let theirs = time::sleep(Duration::from_micros(300));
    tokio::pin!(ours, theirs);
    assert!(poll_once(ours.as_mut()).is_pending());
    assert!(poll_once(theirs.as_mut()).is_pending());
    time::advance(Duration::from_micros(299)).await;
    assert!(poll_once(ours.as_mut()).is_pending());
    theirs.as_mut().await;
    let tokio_done = Instant::now();
    ours.as_mut().await;
    assert_eq!(Instant::now(), tokio_done);
    assert!(tokio_done >= start + Duration::from_micros(300));
}
}

paused_test! {
async fn reset_later_before_fire_waits_for_the_new_deadline() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset(start + ms(30));
    time::advance(ms(10)).await;
    assert!(poll_once(s.as_mut()).is_pending());
    time::advance(ms(19)).await;
    assert!(poll_once(s.as_mut()).is_pending());
    time::advance(ms(1)).await;
    assert!(poll_once(s.as_mut()).is_ready());
    assert_eq!(s.deadline(), start + ms(30));
}
}

paused_test! {
async fn reset_earlier_takes_effect_at_once() {
    let start = Instant::now();
    let s = sleep(ms(100));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset(start + ms(5));
    s.as_mut().await; // auto-advance: must not wait for 100 ms
    assert_eq!(Instant::now(), start + ms(5));
}
}

paused_test! {
async fn reset_after_fire_rearms() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    s.as_mut().await;
    assert!(s.is_elapsed());
    // The later-only shortcut must not apply to a fired timer.
    s.as_mut().reset(start + ms(50));
    assert!(!s.is_elapsed());
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().await;
    assert_eq!(Instant::now(), start + ms(50));
}
}

paused_test! {
async fn reset_to_the_past_completes() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset(start - ms(5));
    s.as_mut().await;
    assert_eq!(Instant::now(), start);
}
}

paused_test! {
async fn resets_before_first_poll_arm_once_at_the_final_deadline() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    // The SCTP "never started" trap: resets before the first poll, earlier or later.
    s.as_mut().reset(start + ms(40));
    s.as_mut().reset(start + ms(5));
    s.as_mut().reset(start + ms(20));
    s.as_mut().await;
    assert_eq!(Instant::now(), start + ms(20));
    if format!("{s:?}").contains("tokio_entry") {
        // On tokio's own entry (a current-thread runtime's `Sleep`): tokio registers
        // at a reset before the first poll; ours does at most that (here: the first
        // reset, the earlier one, and the re-arm after the later one, a store).
        assert!(s.stats().registrations <= 3, "{:?}", s.stats());
    } else {
        assert_eq!(s.stats().registrations, 1);
    }
}
}

paused_test! {
async fn many_later_resets_cost_one_rearm() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    for i in 1..=1000 {
        s.as_mut().reset(start + ms(10) + Duration::from_micros(i));
    }
    s.as_mut().await;
    assert_eq!(Instant::now(), start + ms(11));
    // First arming, then one re-arm for the remainder.
    assert_eq!(s.stats().registrations, 2);
}
}

paused_test! {
async fn duration_max_saturates_and_never_fires() {
    let s = sleep(Duration::MAX);
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    time::advance(Duration::from_secs(86_400 * 365 * 10)).await;
    assert!(poll_once(s.as_mut()).is_pending());
}
}

paused_test! {
async fn huge_duration_in_select_does_not_win() {
    // tokio issue 5183: u64::MAX / 10 seconds must not overflow or fire.
    let long = sleep(Duration::from_secs(u64::MAX / 10));
    tokio::select! {
        () = long => panic!("a practically infinite sleep fired"),
        () = sleep(ms(50)) => {}
    }
}
}

paused_test! {
async fn far_future_does_not_fire_after_years() {
    let start = Instant::now();
    let s = sleep_until(start + Duration::from_secs(86_400 * 365 * 20));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    for _ in 0..10 {
        time::advance(Duration::from_secs(86_400 * 365)).await;
        assert!(poll_once(s.as_mut()).is_pending());
    }
}
}

paused_test! {
async fn dropped_from_inside_its_own_waker() {
    type Slot = Arc<Mutex<Option<std::pin::Pin<Box<lazy_deadline::Sleep>>>>>;
    struct DropOnWake(Slot);
    impl Wake for DropOnWake {
        fn wake(self: Arc<Self>) {
            self.0.lock().unwrap().take();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.lock().unwrap().take();
        }
    }
    let slot: Slot = Arc::new(Mutex::new(Some(Box::pin(sleep(ms(10))))));
    let waker = Waker::from(Arc::new(DropOnWake(slot.clone())));
    {
        let mut guard = slot.lock().unwrap();
        let fut = guard.as_mut().unwrap().as_mut();
        assert!(common::poll_with(fut, &waker).is_pending());
    }
    time::advance(ms(10)).await;
    assert!(slot.lock().unwrap().is_none(), "the wake dropped the sleep");
}
}

paused_test! {
async fn is_unpin_only_when_boxed_and_debug_prints() {
    let s = Box::pin(sleep(ms(1)));
    let text = format!("{s:?}");
    assert!(text.contains("deadline"), "{text}");
    s.await;
}
}

paused_test! {
async fn completed_sleep_stays_ready() {
    let s = sleep(ms(1));
    tokio::pin!(s);
    s.as_mut().await;
    assert_eq!(poll_once(s.as_mut()), Poll::Ready(()));
    assert_eq!(poll_once(s.as_mut()), Poll::Ready(()));
    assert_eq!(s.stats().entry_fires, 1, "repeated polls are not new fires");
}
}

/// Both `Sleep`s, for the side-by-side tests below.
trait AnySleep: std::future::Future<Output = ()> {
    fn reset_to(self: std::pin::Pin<&mut Self>, deadline: Instant);
}

impl AnySleep for lazy_deadline::Sleep {
    fn reset_to(self: std::pin::Pin<&mut Self>, deadline: Instant) {
        self.reset(deadline);
    }
}

impl AnySleep for tokio::time::Sleep {
    fn reset_to(self: std::pin::Pin<&mut Self>, deadline: Instant) {
        self.reset(deadline);
    }
}

/// What a hand-written future sees when it resets its completed sleep and returns
/// `Pending` without polling the sleep again (a limiter, a ticker): the wakes its
/// waker got right after a reset into the past, and at a later deadline; and whether
/// each sleep then resolves.
async fn completed_reset_wakes<S: AnySleep>(make: impl FnOnce(Instant) -> S) -> Vec<usize> {
    let (count, waker) = common::CountingWaker::new();
    let start = Instant::now();
    let sleep = make(start + ms(5));
    tokio::pin!(sleep);
    let mut seen = Vec::new();
    assert!(common::poll_with(sleep.as_mut(), &waker).is_pending());
    time::advance(ms(5)).await;
    seen.push(count.wakes()); // the fire
    assert!(common::poll_with(sleep.as_mut(), &waker).is_ready());
    // Into the past: tokio wakes the waker it kept, inside the reset.
    sleep.as_mut().reset_to(start + ms(1));
    seen.push(count.wakes());
    assert!(common::poll_with(sleep.as_mut(), &waker).is_ready());
    // Later, and not polled: tokio's entry wakes the kept waker at the deadline.
    sleep.as_mut().reset_to(Instant::now() + ms(10));
    time::advance(ms(9)).await;
    seen.push(count.wakes());
    time::advance(ms(1)).await;
    seen.push(count.wakes());
    assert!(common::poll_with(sleep.as_mut(), &waker).is_ready());
    seen
}

paused_test! {
async fn a_completed_sleep_reset_wakes_its_last_waker_as_tokios_does() {
    let tokio = completed_reset_wakes(time::sleep_until).await;
    let ours = completed_reset_wakes(sleep_until).await;
    assert_eq!(tokio, [1, 2, 2, 3], "tokio's own behaviour changed");
    assert_eq!(ours, tokio);
}
}

/// A pending sleep moved earlier (across ticks, then within one) and later, never
/// polled in between: the wakes its waker gets, at the instants tokio's gets them.
async fn pending_reset_wakes<S: AnySleep>(
    make: impl FnOnce(Instant) -> S,
) -> Vec<(usize, Duration)> {
    let (count, waker) = common::CountingWaker::new();
    let start = Instant::now();
    let sleep = make(start + ms(100));
    tokio::pin!(sleep);
    let mut seen = Vec::new();
    assert!(common::poll_with(sleep.as_mut(), &waker).is_pending());
    // Earlier across ticks: woken at the new deadline, not polled before.
    sleep.as_mut().reset_to(start + ms(20));
    // Earlier within that tick, then later within the run: stores for ours.
    sleep
        .as_mut()
        .reset_to(start + ms(20) - Duration::from_micros(300));
    time::advance(ms(19)).await;
    seen.push((count.wakes(), start.elapsed()));
    time::advance(ms(1)).await;
    seen.push((count.wakes(), start.elapsed()));
    assert!(common::poll_with(sleep.as_mut(), &waker).is_ready());
    // Completed, then later: woken at the new deadline, not polled before.
    sleep.as_mut().reset_to(start + ms(40));
    sleep.as_mut().reset_to(start + ms(45));
    time::advance(ms(24)).await;
    seen.push((count.wakes(), start.elapsed()));
    time::advance(ms(1)).await;
    seen.push((count.wakes(), start.elapsed()));
    assert!(common::poll_with(sleep.as_mut(), &waker).is_ready());
    seen
}

paused_test! {
async fn a_pending_sleep_moved_earlier_wakes_at_the_new_deadline_as_tokios_does() {
    let tokio = pending_reset_wakes(time::sleep_until).await;
    let ours = pending_reset_wakes(sleep_until).await;
    // Woken at each new deadline (not polled in between), never before the first
    // one. After the resets to 40 ms and 45 ms, tokio's entry re-registered at 40 ms
    // may wake the task there, before 45 ms (it varies from run to run); ours, armed at
    // 40 ms, does (the lazy re-check): a spurious wake, never a late one.
    for (name, seen) in [("tokio", &tokio), ("ours", &ours)] {
        let counts: Vec<usize> = seen.iter().map(|&(n, _)| n).collect();
        assert_eq!(counts[..2], [0, 1], "{name}: {seen:?}");
        assert!(
            counts[3] >= 2,
            "{name}: not woken at the last deadline: {seen:?}"
        );
    }
    for (ours, tokio) in ours.iter().zip(&tokio) {
        assert!(
            ours.0 >= tokio.0,
            "ours woken after tokio's: {ours:?} {tokio:?}"
        );
    }
}
}

paused_test! {
/// A `Sleep` that left its deadline set for an entry of its own keeps a later reset a
/// store: one registration for a thousand of them, and it still fires at the last.
/// (The sets, as on a multi-thread runtime: forced here for the paused clock.)
async fn a_sleep_on_an_entry_of_its_own_keeps_later_resets_stores() {
    lazy_deadline::__private::prefer_sets(true);
    let start = Instant::now();
    let sleep = sleep_until(start + ms(500));
    tokio::pin!(sleep);
    assert!(poll_once(sleep.as_mut()).is_pending());
    sleep.as_mut().reset(start + ms(100)); // earlier across ticks: its own entry now
    assert!(format!("{:?}", sleep).contains("own_entry: true"));
    let before = sleep.stats().registrations;
    for i in 1..=1_000u64 {
        sleep
            .as_mut()
            .reset(start + ms(100) + Duration::from_micros(i * 100));
    }
    assert_eq!(
        sleep.stats().registrations,
        before,
        "later resets are stores"
    );
    sleep.as_mut().await;
    assert_eq!(start.elapsed(), ms(200));
}
}

/// A `Sleep` whose deadline fired (its task woken) and that is reset later before
/// its task polls it: woken at the new deadline, as tokio's (ours on an entry of its
/// own: the poll after the reset registers the waker again, since the entry lost it
/// when it fired).
async fn reset_after_fire_before_poll<S: AnySleep>(make: impl FnOnce(Instant) -> S) -> Vec<usize> {
    let (count, waker) = common::CountingWaker::new();
    let start = Instant::now();
    let sleep = make(start + ms(100));
    tokio::pin!(sleep);
    assert!(common::poll_with(sleep.as_mut(), &waker).is_pending());
    sleep.as_mut().reset_to(start + ms(10)); // ours: an entry of its own now
    assert!(common::poll_with(sleep.as_mut(), &waker).is_pending());
    time::advance(ms(10)).await; // fires: the task is woken, and does not poll
    let mut seen = vec![count.wakes()];
    sleep.as_mut().reset_to(start + ms(30));
    assert!(common::poll_with(sleep.as_mut(), &waker).is_pending());
    time::advance(ms(20)).await;
    seen.push(count.wakes());
    assert!(common::poll_with(sleep.as_mut(), &waker).is_ready());
    seen
}

paused_test! {
async fn a_sleep_reset_after_its_fire_and_before_its_poll_is_woken_at_the_new_deadline() {
    let tokio = reset_after_fire_before_poll(time::sleep_until).await;
    let ours = reset_after_fire_before_poll(sleep_until).await;
    assert_eq!(tokio, [1, 2], "tokio's own behaviour changed");
    assert_eq!(ours, tokio);
}
}

paused_test! {
/// Moved into the past across ticks (ours: an entry of its own, which fires at once
/// as it is made): the next poll is `Ready`, as tokio's.
async fn a_sleep_reset_into_the_past_across_ticks_is_ready_at_its_next_poll() {
    let start = Instant::now();
    let s = sleep(ms(10));
    tokio::pin!(s);
    assert!(poll_once(s.as_mut()).is_pending());
    time::advance(ms(5)).await;
    s.as_mut().reset(start + ms(2));
    assert!(
        poll_once(s.as_mut()).is_ready(),
        "moved into the past, not ready"
    );
}
}
