//! `SlotTimer` + `SlotHandle` + `KindSet` under the paused clock, plus a real-time
//! multi-thread run where a handle sets deadlines from another thread.

mod common;

use common::{ms, poll_once, poll_with, CountingWaker};
use futures::StreamExt;
use lazy_deadline::{timer_kinds, KindSet, SlotTimer, TimerKind};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;
use tokio::time::{self, Instant};

timer_kinds! {
    /// The kinds of a TCP-like connection.
    #[allow(dead_code)]
    pub enum Tcp {
        /// Retransmission.
        Rto,
        /// Tail loss probe.
        Tlp,
        /// Zero-window probe.
        Probe0,
        /// Delayed ACK.
        DelAck,
        /// Keepalive.
        Keepalive,
    }
}

fn kinds(set: KindSet<Tcp>) -> Vec<Tcp> {
    set.iter().collect()
}

fn poll_timer(timer: &mut SlotTimer<Tcp>) -> Poll<KindSet<Tcp>> {
    let fut = timer.expired();
    tokio::pin!(fut);
    poll_once(fut.as_mut())
}

#[tokio::test(start_paused = true)]
async fn earliest_kind_first_then_the_next() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::Rto, start + ms(200));
    timer.set(Tcp::Tlp, start + ms(20));
    assert_eq!(timer.next_deadline(), Some((Tcp::Tlp, start + ms(20))));
    assert_eq!(kinds(timer.expired().await), [Tcp::Tlp]);
    assert_eq!(Instant::now(), start + ms(20));
    assert_eq!(
        timer.deadline(Tcp::Tlp),
        None,
        "reported kinds are disarmed"
    );
    assert_eq!(kinds(timer.expired().await), [Tcp::Rto]);
    assert_eq!(Instant::now(), start + ms(200));
    assert_eq!(timer.next_deadline(), None);
}

#[tokio::test(start_paused = true)]
async fn per_packet_tlp_and_rto_never_fire_while_traffic_flows() {
    let mut timer = SlotTimer::<Tcp>::new();
    let mut last_packet = Instant::now();
    for _ in 0..500 {
        let now = Instant::now();
        timer.set(Tcp::Tlp, now + ms(20));
        timer.set(Tcp::Rto, now + ms(200));
        last_packet = now;
        assert!(poll_timer(&mut timer).is_pending());
        time::advance(ms(1)).await;
    }
    assert!(poll_timer(&mut timer).is_pending());
    assert_eq!(kinds(timer.expired().await), [Tcp::Tlp]);
    assert_eq!(Instant::now(), last_packet + ms(20));
    let stats = timer.stats();
    // One re-arm per 20 ms period of traffic (plus the first arming).
    assert!(stats.registrations <= 500 / 20 + 2, "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn equal_deadlines_are_reported_together() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::DelAck, start + ms(5));
    timer.set(Tcp::Probe0, start + ms(5));
    timer.set(Tcp::Keepalive, start + ms(6));
    let set = timer.expired().await;
    assert_eq!(kinds(set), [Tcp::Probe0, Tcp::DelAck]);
    assert_eq!(set.len(), 2);
    assert_eq!(format!("{set:?}"), "{Probe0, DelAck}");
}

#[tokio::test(start_paused = true)]
async fn cancelled_kind_is_never_reported() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::Tlp, start + ms(20));
    timer.set(Tcp::Rto, start + ms(50));
    assert!(poll_timer(&mut timer).is_pending());
    timer.cancel(Tcp::Tlp);
    assert_eq!(timer.deadline(Tcp::Tlp), None);
    assert_eq!(kinds(timer.expired().await), [Tcp::Rto]);
    assert_eq!(Instant::now(), start + ms(50));
}

#[tokio::test(start_paused = true)]
async fn earlier_set_after_arming_takes_effect() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::Rto, start + ms(200));
    assert!(poll_timer(&mut timer).is_pending());
    timer.set(Tcp::DelAck, start + ms(1));
    assert_eq!(kinds(timer.expired().await), [Tcp::DelAck]);
    assert_eq!(Instant::now(), start + ms(1));
}

#[tokio::test(start_paused = true)]
async fn handle_on_another_task_sets_an_earlier_deadline() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::Keepalive, start + Duration::from_secs(7200));
    let (counter, waker) = CountingWaker::new();
    {
        let fut = timer.expired();
        tokio::pin!(fut);
        assert!(poll_with(fut.as_mut(), &waker).is_pending());
    }
    let handle = timer.handle();
    handle.set(Tcp::Rto, start + ms(300)); // earlier than armed: wakes
    assert_eq!(counter.wakes(), 1);
    tokio::spawn(async move {
        time::sleep(ms(10)).await;
        handle.set_after(Tcp::DelAck, ms(5));
        handle.set(Tcp::Keepalive, Instant::now() + Duration::from_secs(3600));
    })
    .await
    .unwrap();
    assert_eq!(kinds(timer.expired().await), [Tcp::DelAck]);
    assert_eq!(Instant::now(), start + ms(15));
    assert_eq!(kinds(timer.expired().await), [Tcp::Rto]);
    assert_eq!(Instant::now(), start + ms(300));
}

/// A pending poll does not poll the runtime entry (the entry fires through a waker
/// of the timer's own), so the fire must reach whichever waker polled last, also one
/// that only ever took the fast path: a timer moved to another task.
#[tokio::test(start_paused = true)]
async fn the_fire_wakes_the_last_poller_not_the_first() {
    let mut timers = SlotTimer::<Tcp>::new();
    timers.set_after(Tcp::Rto, ms(50));
    let (first, first_waker) = CountingWaker::new();
    let (last, last_waker) = CountingWaker::new();
    assert!(poll_with(pin!(timers.expired()), &first_waker).is_pending()); // arms
    assert!(poll_with(pin!(timers.expired()), &last_waker).is_pending()); // fast path
    time::advance(ms(49)).await;
    assert_eq!((first.wakes(), last.wakes()), (0, 0), "woken early");
    time::advance(ms(1)).await;
    assert_eq!((first.wakes(), last.wakes()), (0, 1));
    let expired = poll_with(pin!(timers.expired()), &last_waker);
    assert!(matches!(expired, Poll::Ready(set) if kinds(set) == [Tcp::Rto]));
    assert_eq!(timers.stats().registrations, 1);
}

#[tokio::test(start_paused = true)]
async fn handle_set_later_than_armed_wakes_nobody() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::Tlp, start + ms(20));
    let (counter, waker) = CountingWaker::new();
    {
        let fut = timer.expired();
        tokio::pin!(fut);
        assert!(poll_with(fut.as_mut(), &waker).is_pending());
    }
    let handle = timer.handle();
    for i in 0..100 {
        handle.set(Tcp::Rto, start + ms(200 + i));
        handle.cancel(Tcp::Keepalive);
    }
    assert_eq!(counter.wakes(), 0);
}

#[tokio::test(start_paused = true)]
async fn expired_future_is_cancel_safe_in_select() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::Tlp, start + ms(10));
    timer.set(Tcp::Rto, start + ms(10));
    let mut seen = Vec::new();
    let mut ticks = 0;
    while seen.len() < 2 {
        tokio::select! {
            set = timer.expired() => seen.extend(set),
            () = time::sleep(ms(3)) => ticks += 1, // drops the expired() future
        }
    }
    assert_eq!(seen, [Tcp::Rto, Tcp::Tlp]);
    assert_eq!(ticks, 3);
    assert_eq!(Instant::now(), start + ms(10));
}

#[tokio::test(start_paused = true)]
async fn works_as_a_stream_that_never_ends() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set(Tcp::DelAck, start + ms(1));
    timer.set(Tcp::Tlp, start + ms(2));
    assert_eq!(kinds(timer.next().await.unwrap()), [Tcp::DelAck]);
    assert_eq!(kinds(timer.next().await.unwrap()), [Tcp::Tlp]);
    assert_eq!(futures::Stream::size_hint(&timer), (usize::MAX, None));
    // Nothing set: pending, not ended.
    let next = timer.next();
    tokio::pin!(next);
    assert!(poll_once(next.as_mut()).is_pending());
}

#[tokio::test(start_paused = true)]
async fn duration_max_and_past_deadlines() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    timer.set_after(Tcp::Keepalive, Duration::MAX);
    timer.set(Tcp::Probe0, start + Duration::from_secs(u64::MAX / 4));
    assert!(timer.deadline(Tcp::Keepalive).is_some());
    assert!(poll_timer(&mut timer).is_pending());
    time::advance(Duration::from_secs(86_400 * 365 * 10)).await;
    assert!(poll_timer(&mut timer).is_pending());
    timer.set(Tcp::Rto, start - ms(5));
    timer
        .handle()
        .set(Tcp::Tlp, start - Duration::from_secs(86_400));
    assert_eq!(kinds(timer.expired().await), [Tcp::Rto, Tcp::Tlp]);
}

#[tokio::test(start_paused = true)]
async fn reported_kind_set_again_is_reported_again() {
    let mut timer = SlotTimer::<Tcp>::new();
    for round in 1..=3u64 {
        timer.set_after(Tcp::Rto, ms(10 * round));
        assert_eq!(kinds(timer.expired().await), [Tcp::Rto]);
    }
}

#[tokio::test(start_paused = true)]
async fn cancel_and_reset_between_fire_and_poll() {
    let start = Instant::now();
    let mut timer = SlotTimer::<Tcp>::new();
    let handle = timer.handle();
    timer.set(Tcp::Rto, start + ms(10));
    assert!(poll_timer(&mut timer).is_pending());
    time::advance(ms(10)).await; // the entry fires; nobody polled yet
    handle.cancel(Tcp::Rto);
    handle.set(Tcp::Rto, start + ms(30)); // re-set later before the poll
    assert!(
        poll_timer(&mut timer).is_pending(),
        "the old deadline is gone"
    );
    assert_eq!(kinds(timer.expired().await), [Tcp::Rto]);
    assert_eq!(Instant::now(), start + ms(30));
    assert!(poll_timer(&mut timer).is_pending(), "reported once");
}

#[test]
fn kind_set_basics() {
    let mut set = KindSet::<Tcp>::new();
    assert!(set.is_empty());
    assert!(set.insert(Tcp::Keepalive));
    assert!(!set.insert(Tcp::Keepalive));
    assert!(set.insert(Tcp::Rto));
    assert_eq!(set.len(), 2);
    assert!(set.remove(Tcp::Rto));
    assert_eq!((&set).into_iter().collect::<Vec<_>>(), [Tcp::Keepalive]);
    assert_eq!(set, [Tcp::Keepalive].into_iter().collect());
    assert_eq!(KindSet::<Tcp>::default(), KindSet::new());
    assert_eq!(Tcp::COUNT, 5);
    for i in 0..Tcp::COUNT {
        assert_eq!(Tcp::from_index(i).index(), i);
    }
}

#[test]
fn types_have_the_promised_traits() {
    fn send_sync<T: Send + Sync>() {}
    fn unpin<T: Unpin>() {}
    fn send<T: Send>() {}
    send_sync::<lazy_deadline::SlotHandle<Tcp>>();
    unpin::<SlotTimer<Tcp>>();
    send::<SlotTimer<Tcp>>();
}

/// Real time on purpose: a handle on another thread sets deadlines (earlier and later
/// than what is armed); every set that is not overwritten is reported exactly once,
/// never early.
#[test]
fn real_time_handle_sets_are_reported_once_never_early() {
    timer_kinds! { enum K { A, B, C, D } }
    let rt = common::two_workers();
    rt.block_on(async {
        let mut timer = SlotTimer::<K>::new();
        let handle = timer.handle();
        // Each kind is set once per round; rounds are 40 ms apart, deadlines within
        // 1..30 ms, so no set overwrites an unreported one.
        let rounds = 5u64;
        let setter = std::thread::spawn(move || {
            let mut rng = common::Rng::new(7);
            let mut expected = Vec::new();
            for round in 0..rounds {
                for kind in [K::D, K::C, K::B, K::A] {
                    let at = Instant::now() + ms(1 + rng.below(29));
                    handle.set(kind, at);
                    expected.push((round, kind, at));
                }
                std::thread::sleep(ms(40));
            }
            expected
        });
        let mut reports: Vec<(K, Instant)> = Vec::new();
        let deadline = Instant::now() + ms(40 * rounds + 500);
        while reports.len() < (rounds * 4) as usize && Instant::now() < deadline {
            tokio::select! {
                set = timer.expired() => {
                    let now = Instant::now();
                    reports.extend(set.iter().map(|k| (k, now)));
                }
                () = time::sleep_until(deadline) => break,
            }
        }
        let expected = setter.join().unwrap();
        assert_eq!(
            reports.len(),
            expected.len(),
            "lost or duplicated: {reports:?}"
        );
        for kind in [K::A, K::B, K::C, K::D] {
            let ours: Vec<Instant> = reports
                .iter()
                .filter(|r| r.0 == kind)
                .map(|r| r.1)
                .collect();
            let sets: Vec<Instant> = expected
                .iter()
                .filter(|e| e.1 == kind)
                .map(|e| e.2)
                .collect();
            assert_eq!(ours.len(), sets.len());
            for (reported, set) in ours.iter().zip(&sets) {
                assert!(reported >= set, "{kind:?} reported early");
            }
        }
    });
}
