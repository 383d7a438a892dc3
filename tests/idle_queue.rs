//! `IdleQueue<T>`: one test per semantic of its contract, under the paused clock.

mod common;

use common::{ms, poll_once, poll_with, CountingWaker};
use futures::StreamExt;
use lazy_deadline::{Expired, IdleQueue, Key};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::time::{advance, Instant};

fn poll_queue<T>(queue: &mut IdleQueue<T>) -> Poll<Expired<T>> {
    poll_once(pin!(queue.expired()))
}

/// Everything the queue yields without the clock moving.
fn drain_now<T>(queue: &mut IdleQueue<T>) -> Vec<Expired<T>> {
    let mut out = Vec::new();
    while let Poll::Ready(expired) = poll_queue(queue) {
        out.push(expired);
    }
    out
}

// 1. Never early, not later than tokio (the random differential is in
//    tests/idle_queue_differential.rs).

#[tokio::test(start_paused = true)]
async fn expires_exactly_at_last_activity_plus_timeout() {
    let mut queue = IdleQueue::new(ms(100));
    let start = Instant::now();
    let key = queue.insert("a");
    advance(ms(40)).await;
    queue.touch(key);
    let expired = queue.expired().await;
    assert_eq!(start.elapsed(), ms(140));
    assert_eq!(expired.key(), key);
    assert_eq!(expired.deadline(), start + ms(140));
    assert_eq!(expired.into_inner(), "a");
    assert!(queue.is_empty());
}

// 2. Touch is a store: no registration, at most one re-file per key per period.

#[tokio::test(start_paused = true)]
async fn touches_do_no_runtime_work_and_refile_once_per_period() {
    let mut queue = IdleQueue::new(ms(1_000));
    let keys: Vec<Key> = (0..100).map(|i| queue.insert(i)).collect();
    assert!(poll_queue(&mut queue).is_pending()); // arms the one entry
    let armed = queue.stats();
    assert_eq!(armed.registrations, 1);
    // Ten seconds of continuous traffic: every key every 10 ms.
    for _ in 0..1_000 {
        advance(ms(10)).await;
        let now = Instant::now();
        for &key in &keys {
            assert!(queue.touch_at(key, now));
        }
        assert!(poll_queue(&mut queue).is_pending());
    }
    // One re-file per key per period (10 periods), never one per touch (100,000).
    assert!(queue.refiles() <= 100 * 11, "{} re-files", queue.refiles());
    assert!(queue.refiles() >= 100 * 9, "{} re-files", queue.refiles());
    // Runtime work follows the earliest check time, not the touches.
    assert!(queue.stats().registrations <= 12, "{:?}", queue.stats());
    assert_eq!(queue.len(), 100);
}

// 3. Shortening is eager; a zero timeout is due on the next poll.

#[tokio::test(start_paused = true)]
async fn shortening_takes_effect_at_once() {
    let mut queue = IdleQueue::new(ms(10_000));
    let start = Instant::now();
    let key = queue.insert(1);
    assert!(poll_queue(&mut queue).is_pending()); // filed and armed at 10 s
    advance(ms(50)).await;
    assert!(queue.set_timeout(key, ms(20))); // deadline 20 ms: already past
    let expired = queue.expired().await;
    assert_eq!(start.elapsed(), ms(50));
    assert_eq!(expired.deadline(), start + ms(20));

    let key = queue.insert(2);
    assert!(poll_queue(&mut queue).is_pending());
    queue.set_timeout(key, ms(30));
    assert_eq!(queue.expired().await.deadline(), start + ms(80));
    assert_eq!(Instant::now(), start + ms(80));
}

#[tokio::test(start_paused = true)]
async fn zero_timeout_is_due_on_the_next_poll() {
    let mut queue = IdleQueue::new(ms(100));
    queue.insert_with_timeout('z', Duration::ZERO);
    assert!(matches!(poll_queue(&mut queue), Poll::Ready(e) if *e.get_ref() == 'z'));
    let key = queue.insert('y');
    queue.set_timeout(key, Duration::ZERO);
    assert!(matches!(poll_queue(&mut queue), Poll::Ready(e) if e.key() == key));
}

// 4. Entries due in the same poll come out in deadline order.

#[tokio::test(start_paused = true)]
async fn due_together_comes_out_in_deadline_order() {
    let mut queue = IdleQueue::new(ms(100));
    let start = Instant::now();
    let mut keys = Vec::new();
    for i in 0..50u64 {
        // Filed at 100 ms each; touched so that deadlines are scrambled.
        let key = queue.insert(i);
        queue.touch_at(key, start + ms((i * 37) % 50));
        keys.push(key);
    }
    advance(ms(500)).await;
    let deadlines: Vec<Instant> = drain_now(&mut queue).iter().map(|e| e.deadline()).collect();
    assert_eq!(deadlines.len(), 50);
    assert!(deadlines.windows(2).all(|w| w[0] <= w[1]), "{deadlines:?}");
}

// 5. Exactly once; removed never; touched-after-due is re-filed; stale keys.

#[tokio::test(start_paused = true)]
async fn each_expiry_once_and_removed_never() {
    let mut queue = IdleQueue::new(ms(100));
    let a = queue.insert('a');
    let b = queue.insert('b');
    let c = queue.insert('c');
    assert_eq!(queue.remove(b), Some('b'));
    advance(ms(100)).await;
    // Due but not yet yielded: a touch now re-files `c` instead of yielding it.
    assert!(queue.touch(c));
    let out: Vec<char> = drain_now(&mut queue)
        .into_iter()
        .map(Expired::into_inner)
        .collect();
    assert_eq!(out, ['a']);
    advance(ms(100)).await;
    let out: Vec<Key> = drain_now(&mut queue).iter().map(Expired::key).collect();
    assert_eq!(out, [c]);
    advance(ms(1_000)).await;
    assert!(drain_now(&mut queue).is_empty());
    // Stale keys: false / None, and never another entry in the same slot.
    let d = queue.insert('d');
    for stale in [a, b, c] {
        assert!(!queue.touch(stale));
        assert!(!queue.touch_at(stale, Instant::now()));
        assert!(!queue.set_timeout(stale, ms(1)));
        assert!(!queue.contains(stale));
        assert_eq!(queue.get(stale), None);
        assert_eq!(queue.get_mut(stale), None);
        assert_eq!(queue.remove(stale), None);
        assert_eq!(queue.deadline(stale), None);
    }
    assert_eq!(queue.get(d), Some(&'d'));
    // An older touch on a live key: true, and nothing changes.
    let last = queue.last_activity(d).unwrap();
    assert!(queue.touch_at(d, last - ms(50)));
    assert_eq!(queue.last_activity(d), Some(last));
}

// 6. Cancel safety: the losing branch of `select!` loses nothing.

#[tokio::test(start_paused = true)]
async fn dropped_expired_future_loses_nothing() {
    let mut queue = IdleQueue::new(ms(100));
    let keys: Vec<Key> = (0..10).map(|i| queue.insert(i)).collect();
    let mut seen = Vec::new();
    let mut ticks = tokio::time::interval(ms(7));
    while seen.len() < 10 {
        tokio::select! {
            expired = queue.expired() => seen.push(expired.key()),
            _ = ticks.tick() => {}
        }
    }
    assert_eq!(seen, keys);
}

// 7. Empty queue: Pending, never Ready(None); an insert is seen by the next poll.

#[tokio::test(start_paused = true)]
async fn empty_queue_is_pending_and_sees_the_next_insert() {
    let mut queue: IdleQueue<u8> = IdleQueue::new(ms(10));
    assert!(poll_queue(&mut queue).is_pending());
    let next = tokio::time::timeout(ms(1_000), queue.next()).await;
    assert!(next.is_err(), "an empty queue never ends");
    let key = queue.insert(7);
    let start = Instant::now();
    assert_eq!(queue.next().await.map(|e| e.key()), Some(key));
    assert_eq!(start.elapsed(), ms(10));
}

#[tokio::test(start_paused = true)]
async fn select_loop_sees_inserts_from_another_branch() {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(8);
    tokio::spawn(async move {
        for i in 0..5 {
            tokio::time::sleep(ms(30)).await;
            tx.send(i).await.unwrap();
        }
    });
    let mut queue = IdleQueue::new(ms(50));
    let start = Instant::now();
    let mut expired_at = Vec::new();
    while expired_at.len() < 5 {
        tokio::select! {
            Some(i) = rx.recv() => { queue.insert(i); }
            expired = queue.expired() => expired_at.push((*expired.get_ref(), start.elapsed())),
        }
    }
    let expected: Vec<(u32, Duration)> =
        (0..5).map(|i| (i, ms(30 * (i as u64 + 1) + 50))).collect();
    assert_eq!(expired_at, expected);
}

// 8. One runtime entry, moved earlier only when needed.

#[tokio::test(start_paused = true)]
async fn one_entry_armed_at_the_earliest_check() {
    let mut queue = IdleQueue::new(ms(1_000));
    queue.insert(0);
    assert!(poll_queue(&mut queue).is_pending());
    assert_eq!(queue.stats().registrations, 1);
    // Later inserts: no registration.
    for i in 1..1_000 {
        advance(Duration::from_micros(100)).await;
        queue.insert(i);
        assert!(poll_queue(&mut queue).is_pending());
    }
    assert_eq!(queue.stats().registrations, 1);
    // An earlier one (shorter timeout) moves the entry once.
    queue.insert_with_timeout(9_999, ms(10));
    assert!(poll_queue(&mut queue).is_pending());
    assert_eq!(queue.stats().registrations, 2);
}

// 9. Cooperative: a mass expiry does not starve the runtime.

/// A pending poll does not poll the runtime entry (the entry fires through a waker
/// of the queue's own), so the fire must reach whichever waker polled last: a queue
/// moved to another task.
#[tokio::test(start_paused = true)]
async fn the_fire_wakes_the_last_poller_not_the_first() {
    let mut queue = IdleQueue::new(ms(50));
    let key = queue.insert(());
    let (first, first_waker) = CountingWaker::new();
    let (last, last_waker) = CountingWaker::new();
    assert!(poll_with(pin!(queue.expired()), &first_waker).is_pending()); // arms
    assert!(poll_with(pin!(queue.expired()), &last_waker).is_pending()); // fast path
    advance(ms(49)).await;
    assert_eq!((first.wakes(), last.wakes()), (0, 0), "woken early");
    advance(ms(1)).await;
    assert_eq!((first.wakes(), last.wakes()), (0, 1));
    let expired = poll_with(pin!(queue.expired()), &last_waker);
    assert!(matches!(expired, Poll::Ready(e) if e.key() == key));
    assert_eq!(queue.stats().registrations, 1);
}

/// The entry's fire is kept in a flag until the entry is polled: a poll that stops
/// at tokio's exhausted coop budget before reaching the entry must not drop it.
#[tokio::test(start_paused = true)]
async fn a_fire_met_with_no_budget_left_is_kept_for_the_next_poll() {
    let mut queue = IdleQueue::new(ms(10));
    let key = queue.insert(());
    assert!(poll_queue(&mut queue).is_pending()); // arms the entry
    advance(ms(10)).await; // the entry fires: the flag is up
    let mut spent = false;
    let expired = tokio::time::timeout(
        ms(1_000),
        std::future::poll_fn(|cx| {
            if !spent {
                spent = true;
                // Spend the task's whole budget, then poll the queue in that turn.
                while let Poll::Ready(restore) = tokio::task::coop::poll_proceed(cx) {
                    restore.made_progress();
                }
                assert!(queue.poll_expired(cx).is_pending(), "no budget: pending");
                return Poll::Pending; // the budget check woke this task
            }
            queue.poll_expired(cx)
        }),
    )
    .await
    .expect("the fire was dropped with the budget");
    assert_eq!(expired.key(), key);
}

#[tokio::test(start_paused = true)]
async fn mass_expiry_drains_within_the_coop_budget() {
    let mut queue = IdleQueue::with_capacity(ms(10), 1_000_000);
    for i in 0..1_000_000u32 {
        queue.insert(i);
    }
    advance(ms(10)).await;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
    let mut drained = 0usize;
    while !ran.load(Ordering::SeqCst) {
        queue.expired().await;
        drained += 1;
        assert!(drained < 1_000, "drained {drained} without yielding");
    }
    while drained < 1_000_000 {
        queue.expired().await;
        drained += 1;
    }
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn refiling_a_million_keys_is_spread_over_polls() {
    let mut queue = IdleQueue::with_capacity(ms(10), 1_000_000);
    let keys: Vec<Key> = (0..1_000_000u32).map(|i| queue.insert(i)).collect();
    advance(ms(5)).await;
    let now = Instant::now();
    for &key in &keys {
        queue.touch_at(key, now);
    }
    advance(ms(5)).await;
    // All million records surface at once, all touched: bounded work per poll.
    let mut pending_polls = 0;
    while queue.refiles() < 1_000_000 {
        assert!(poll_queue(&mut queue).is_pending());
        pending_polls += 1;
        assert!(pending_polls < 10_000);
    }
    assert!(pending_polls >= 1_000_000 / 1_024, "{pending_polls} polls");
    assert!(queue.expired().await.deadline() == now + ms(10));
}

// 10. Bad input.

#[tokio::test(start_paused = true)]
async fn bad_input_saturates_and_never_panics() {
    let mut queue = IdleQueue::new(Duration::MAX);
    let never = queue.insert("never");
    assert_eq!(queue.timeout(never), Some(Duration::from_nanos(u64::MAX)));
    assert!(queue.deadline(never).unwrap() > Instant::now() + Duration::from_secs(86_400 * 365));
    let future = queue.insert_with_timeout("future", ms(10));
    let later = Instant::now() + Duration::from_secs(86_400 * 365 * 100);
    assert!(queue.touch_at(future, later)); // taken as given
    assert_eq!(queue.last_activity(future), Some(later));
    advance(Duration::from_secs(86_400 * 365)).await;
    assert!(drain_now(&mut queue).is_empty());
    assert!(queue.set_timeout(never, Duration::ZERO));
    assert_eq!(drain_now(&mut queue).len(), 1);
    // A million entries, then clear.
    let mut big = IdleQueue::new(ms(10));
    let keys: Vec<Key> = (0..1_000_000u32).map(|i| big.insert(i)).collect();
    assert_eq!(big.len(), 1_000_000);
    big.clear();
    assert!(big.is_empty());
    assert!(!big.touch(keys[0]));
    advance(ms(20)).await;
    assert!(poll_queue(&mut big).is_pending());
}

#[test]
fn queue_is_send_and_unpin_and_debug() {
    fn check<Q: Send + Unpin + std::fmt::Debug>() {}
    check::<IdleQueue<String>>();
    check::<IdleQueue<std::marker::PhantomPinned>>();
    fn expired<E: std::fmt::Debug + Send>() {}
    expired::<Expired<String>>();
}

#[test]
#[should_panic(expected = "no reactor")]
fn new_outside_a_runtime_panics_like_tokio() {
    let _queue: IdleQueue<()> = IdleQueue::new(ms(1));
}
