//! `DelayQueue`: what the lazy technique changes, and one regression test per
//! historic bug of tokio-util's queue, written from the bug's description (tokio-util's
//! own suite runs against ours in CI: `.ci/tokio_util_suite.py`).

mod common;

use common::{ms, CountingWaker};
use futures::StreamExt;
use lazy_deadline::{delay_queue, DelayQueue};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{advance, sleep, Instant};

fn poll<T>(queue: &mut DelayQueue<T>, waker: &Waker) -> Poll<Option<delay_queue::Expired<T>>> {
    queue.poll_expired(&mut Context::from_waker(waker))
}

fn ready<T>(queue: &mut DelayQueue<T>) -> Option<T> {
    match poll(queue, Waker::noop()) {
        Poll::Ready(item) => item.map(delay_queue::Expired::into_inner),
        Poll::Pending => panic!("pending"),
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_later_reset_is_a_store_and_a_polling_consumer_is_not_woken_early() {
    let (count, waker) = CountingWaker::new();
    let mut queue = DelayQueue::new();
    let start = Instant::now();
    let key = queue.insert_at("conn", start + ms(100));
    assert!(poll(&mut queue, &waker).is_pending());
    let registrations = queue.stats().registrations;
    for i in 1..=1_000u64 {
        queue.reset_at(&key, start + ms(100) + Duration::from_micros(i * 100));
    }
    assert_eq!(
        queue.stats().registrations,
        registrations,
        "resets are stores"
    );
    assert_eq!(count.wakes(), 0);
    // The consumer polls again (a select! loop's next turn): the entry moves.
    assert!(poll(&mut queue, &waker).is_pending());
    sleep(ms(150)).await;
    assert_eq!(count.wakes(), 0, "woken before the final deadline");
    sleep(ms(50)).await;
    assert_eq!(count.wakes(), 1);
    assert_eq!(ready(&mut queue), Some("conn"));
    assert!(Instant::now() >= start + ms(200));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_consumer_that_does_not_poll_sees_one_wake_at_the_old_deadline() {
    let (count, waker) = CountingWaker::new();
    let mut queue = DelayQueue::new();
    let start = Instant::now();
    let key = queue.insert_at(1u8, start + ms(100));
    assert!(poll(&mut queue, &waker).is_pending());
    queue.reset_at(&key, start + ms(300));
    sleep(ms(250)).await;
    assert_eq!(count.wakes(), 1, "the lazy re-check at the old deadline");
    assert!(poll(&mut queue, &waker).is_pending());
    sleep(ms(50)).await;
    assert_eq!(count.wakes(), 2);
    assert_eq!(ready(&mut queue), Some(1));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadlines_are_exactly_what_was_given() {
    let mut queue = DelayQueue::new();
    let when = Instant::now() + Duration::from_nanos(1_234_567);
    let key = queue.insert_at('x', when);
    assert_eq!(queue.deadline(&key), when);
    sleep(ms(2)).await;
    let expired = queue.next().await.unwrap();
    assert_eq!(expired.deadline(), when);
    assert_eq!(expired.key(), key);
}

#[test]
fn needs_no_runtime_until_the_first_poll() {
    let mut queue: DelayQueue<u32> = DelayQueue::with_capacity(8);
    let key = queue.insert(7, ms(10));
    queue.reset(&key, ms(20));
    assert_eq!(queue.len(), 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    assert_eq!(rt.block_on(queue.next()).map(|e| e.into_inner()), Some(7));
    // Without a runtime the first poll panics, as tokio-util's does.
    let mut unpolled: DelayQueue<u32> = DelayQueue::new();
    unpolled.insert(1, ms(1));
    assert!(catch_unwind(AssertUnwindSafe(|| poll(&mut unpolled, Waker::noop()))).is_err());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn stale_keys_never_reach_a_later_entry() {
    let mut queue = DelayQueue::new();
    let old = queue.insert("first", ms(1));
    sleep(ms(2)).await;
    assert_eq!(ready(&mut queue), Some("first"));
    let new = queue.insert("second", ms(10));
    assert_ne!(old, new);
    assert!(queue.try_remove(&old).is_none());
    assert!(!queue.contains(&old));
    for attempt in [
        Box::new(|q: &mut DelayQueue<&str>| {
            let _ = q.remove(&old);
        }) as Box<dyn Fn(&mut _)>,
        Box::new(|q: &mut DelayQueue<&str>| q.reset_at(&old, Instant::now())),
        Box::new(|q: &mut DelayQueue<&str>| {
            let _ = q.deadline(&old);
        }),
    ] {
        let err = catch_unwind(AssertUnwindSafe(|| attempt(&mut queue))).unwrap_err();
        let message = err.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(message.contains("not in this DelayQueue"), "{message}");
    }
    assert_eq!(queue.get(&new), Some(&"second"));
    assert_eq!(queue.len(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn bad_input_saturates() {
    let mut queue = DelayQueue::new();
    let never = queue.insert("never", Duration::MAX);
    let far = queue.insert_at("far", Instant::now() + Duration::from_secs(1 << 40));
    queue.reset(&far, Duration::MAX);
    let past = queue.insert_at("past", Instant::now() - ms(5));
    let zero = queue.insert("zero", Duration::ZERO);
    assert!(queue.deadline(&never) > Instant::now() + Duration::from_secs(86_400 * 365));
    let mut out = vec![ready(&mut queue).unwrap(), ready(&mut queue).unwrap()];
    out.sort_unstable();
    assert_eq!(out, ["past", "zero"]);
    assert!(poll(&mut queue, Waker::noop()).is_pending());
    advance(Duration::from_secs(86_400 * 365 * 10)).await;
    assert!(
        poll(&mut queue, Waker::noop()).is_pending(),
        "saturated is never"
    );
    let _ = (past, zero);
}

// Regressions, each from the description of a tokio issue about tokio-util's queue.

/// tokio #849, #868: a reset could panic or lose the wake-up.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_849_868_resets_never_panic_or_lose_the_wake() {
    let (count, waker) = CountingWaker::new();
    let mut queue = DelayQueue::new();
    let start = Instant::now();
    let key = queue.insert_at((), start + ms(200));
    assert!(poll(&mut queue, &waker).is_pending());
    queue.reset_at(&key, start + ms(50));
    queue.reset_at(&key, start + ms(40));
    sleep(ms(40)).await;
    assert!(count.wakes() >= 1);
    assert_eq!(ready(&mut queue), Some(()));
}

/// tokio #854: an entry inserted later but due sooner than the armed one was missed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_854_a_later_insert_that_is_due_sooner_is_seen() {
    let mut queue = DelayQueue::new();
    queue.insert("late", ms(10_000));
    assert!(poll(&mut queue, Waker::noop()).is_pending());
    queue.insert("soon", ms(600));
    let start = Instant::now();
    assert_eq!(queue.next().await.unwrap().into_inner(), "soon");
    assert_eq!(start.elapsed(), ms(600));
}

/// tokio #1700: an insert after an expiry postponed every other entry.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_1700_an_insert_after_an_expiry_postpones_nothing() {
    let mut queue = DelayQueue::new();
    let start = Instant::now();
    queue.insert_at('a', start + ms(10));
    queue.insert_at('b', start + ms(20));
    assert_eq!(queue.next().await.unwrap().into_inner(), 'a');
    queue.insert_at('c', start + ms(1_000));
    assert_eq!(queue.next().await.unwrap().into_inner(), 'b');
    assert_eq!(Instant::now(), start + ms(20));
}

/// tokio #3270: resetting or removing an entry that is due but not yet polled
/// panicked.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_3270_reset_and_remove_of_due_entries() {
    let mut queue = DelayQueue::new();
    let a = queue.insert('a', ms(10));
    let b = queue.insert('b', ms(10));
    assert!(poll(&mut queue, Waker::noop()).is_pending());
    sleep(ms(20)).await;
    queue.reset(&a, ms(30));
    assert_eq!(queue.remove(&b).into_inner(), 'b');
    assert!(poll(&mut queue, Waker::noop()).is_pending());
    let start = Instant::now();
    assert_eq!(queue.next().await.unwrap().into_inner(), 'a');
    assert_eq!(start.elapsed(), ms(30));
}

/// tokio #5536: a queue alive for 2^36 ms (about 2.2 years) panicked on insert.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_5536_no_horizon_after_two_years() {
    let mut queue = DelayQueue::new();
    for _ in 0..2 {
        advance(ms(1 << 35)).await;
        queue.insert(0, Duration::ZERO);
        assert_eq!(queue.next().await.map(|e| e.into_inner()), Some(0));
    }
    queue.insert(1, ms(1));
    queue.insert(2, Duration::from_secs(1 << 37));
    assert_eq!(queue.next().await.map(|e| e.into_inner()), Some(1));
}

/// tokio #6751: removing the last entry of a polled queue did not wake it.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_6751_removing_the_last_entry_wakes() {
    let (count, waker) = CountingWaker::new();
    let mut queue = DelayQueue::new();
    let key = queue.insert((), ms(1_000));
    assert!(poll(&mut queue, &waker).is_pending());
    queue.remove(&key);
    assert_eq!(count.wakes(), 1);
    assert!(matches!(poll(&mut queue, &waker), Poll::Ready(None)));
    // And clear() of a non-empty queue.
    queue.insert((), ms(1_000));
    assert!(poll(&mut queue, &waker).is_pending());
    queue.clear();
    assert_eq!(count.wakes(), 2);
    assert!(matches!(poll(&mut queue, &waker), Poll::Ready(None)));
}

/// tokio #8274: a reset into the past of a pending queue was never woken.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn issue_8274_a_reset_into_the_past_wakes() {
    let (count, waker) = CountingWaker::new();
    let mut queue = DelayQueue::new();
    let key = queue.insert("x", ms(10_000));
    assert!(poll(&mut queue, &waker).is_pending());
    queue.reset_at(&key, Instant::now() - ms(100));
    assert_eq!(count.wakes(), 1);
    assert!(matches!(poll(&mut queue, &waker), Poll::Ready(Some(_))));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_stream_ends_when_empty_and_resumes_after_an_insert() {
    let mut queue = DelayQueue::new();
    assert!(queue.next().await.is_none());
    let (count, waker) = CountingWaker::new();
    assert!(matches!(poll(&mut queue, &waker), Poll::Ready(None)));
    queue.insert(5, ms(5));
    assert_eq!(
        count.wakes(),
        1,
        "an insert into a polled empty queue wakes it"
    );
    assert_eq!(queue.next().await.map(|e| e.into_inner()), Some(5));
    assert!(queue.next().await.is_none());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn due_together_in_deadline_order_within_the_coop_budget() {
    let mut queue = DelayQueue::with_capacity(1_000);
    let start = Instant::now();
    for i in (0..1_000u64).rev() {
        queue.insert_at(i, start + Duration::from_micros(i));
    }
    sleep(ms(2)).await;
    let mut out = Vec::new();
    let mut pendings = 0;
    while out.len() < 1_000 {
        match poll(&mut queue, Waker::noop()) {
            Poll::Ready(Some(e)) => out.push(e.into_inner()),
            Poll::Ready(None) => break,
            Poll::Pending => {
                pendings += 1;
                tokio::task::yield_now().await;
            }
        }
    }
    assert_eq!(out, (0..1_000).collect::<Vec<_>>());
    assert!(pendings >= 1, "a 1,000-entry drain never ran out of budget");
}

#[test]
fn types_have_the_promised_traits() {
    fn check<T: Send + Sync + Unpin + Default + std::fmt::Debug>() {}
    check::<DelayQueue<u32>>();
    fn key<K: Copy + std::fmt::Debug + Eq + std::hash::Hash + Send + Sync>() {}
    key::<delay_queue::Key>();
    fn expired<E: std::fmt::Debug + Send>() {}
    expired::<delay_queue::Expired<u32>>();
}

/// Polls tokio-util's queue once with a no-op waker; `Some(Some(v))` when it yields.
fn peer_ready<T>(queue: &mut tokio_util::time::DelayQueue<T>) -> Option<Option<T>> {
    match queue.poll_expired(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(item) => Some(item.map(|expired| expired.into_inner())),
        Poll::Pending => None,
    }
}

/// Like `peer_ready`, for ours.
fn ours_ready<T>(queue: &mut DelayQueue<T>) -> Option<Option<T>> {
    match poll(queue, Waker::noop()) {
        Poll::Ready(item) => Some(item.map(delay_queue::Expired::into_inner)),
        Poll::Pending => None,
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_off_grid_deadline_waits_for_its_tick_as_in_tokio_util() {
    // The home clock declares due only what is a whole tick behind it: tokio fires a
    // deadline at its next millisecond tick, and tokio-util's own suite asserts
    // `Pending` at the exact deadline when the clock is off that grid. The reset
    // moves the deadline earlier, so the poll takes the path that reads the clock.
    advance(Duration::from_micros(300)).await;
    let now = Instant::now();
    let mut ours = DelayQueue::new();
    let mut peer = tokio_util::time::DelayQueue::new();
    let key = ours.insert_at(1, now + ms(10));
    let peer_key = peer.insert_at(1, now + ms(10));
    assert_eq!((ours_ready(&mut ours), peer_ready(&mut peer)), (None, None));
    advance(ms(5)).await; // 0.3 ms past a tick
    ours.reset_at(&key, Instant::now());
    peer.reset_at(&peer_key, Instant::now());
    assert_eq!((ours_ready(&mut ours), peer_ready(&mut peer)), (None, None));
    advance(Duration::from_micros(700)).await; // the deadline's tick
    assert_eq!(
        (ours_ready(&mut ours), peer_ready(&mut peer)),
        (Some(Some(1)), Some(Some(1)))
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_entry_due_at_the_last_look_at_the_clock_comes_out_at_once_as_in_tokio_util() {
    // tokio-util files an insert no later than the time its wheel last saw as
    // expired at once; ours counts what its previous look at the home clock saw as
    // passed (without that, off the grid, it would wait for the next tick).
    advance(Duration::from_micros(1)).await;
    let mut ours = DelayQueue::new();
    let mut peer = tokio_util::time::DelayQueue::new();
    assert_eq!(
        (ours_ready(&mut ours), peer_ready(&mut peer)),
        (Some(None), Some(None))
    );
    let now = Instant::now();
    ours.insert_at(0, now);
    peer.insert_at(0, now);
    assert_eq!(
        (ours_ready(&mut ours), peer_ready(&mut peer)),
        (Some(Some(0)), Some(Some(0)))
    );
}
