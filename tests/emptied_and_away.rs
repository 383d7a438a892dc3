//! Regression tests for what a line-by-line review of the keyed queues found: a lost
//! wake in an emptied `DelayQueue` (and `DelayMap`), early fires when one waker polls
//! a timer at home and then from elsewhere, and a queue whose home runtime was
//! dropped. Each test drives the timer by its wakes: it polls only when woken, so a
//! lost wake shows as a hang (caught by a guard timeout), not as a passing poll.

mod common;

use common::{ms, CountingWaker};
use futures::FutureExt;
use lazy_deadline::{timer_kinds, DelayMap, DelayQueue, IdleQueue, SlotTimer};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{advance, Instant};

/// A consumer task that treats "empty" as "wait": it polls the shared queue only
/// when woken, and sends each expired value with the (paused) instant it came out.
fn spawn_consumer(
    queue: Arc<Mutex<DelayQueue<u32>>>,
) -> tokio::sync::mpsc::UnboundedReceiver<(u32, Instant)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let value = std::future::poll_fn(|cx| match queue.lock().unwrap().poll_expired(cx) {
                Poll::Ready(Some(expired)) => Poll::Ready(expired.into_inner()),
                // Empty: wait for an insert to wake us, as with tokio-util's queue.
                Poll::Ready(None) | Poll::Pending => Poll::Pending,
            })
            .await;
            if tx.send((value, Instant::now())).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for the next value, failing the test instead of hanging on a lost wake.
async fn next_value(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(u32, Instant)>,
) -> (u32, Instant) {
    tokio::time::timeout(Duration::from_secs(3600), rx.recv())
        .await
        .expect("the consumer was never woken: a lost wake")
        .expect("the consumer ended")
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_insert_after_the_last_entry_came_out_by_the_clock_wakes_the_consumer() {
    let queue = Arc::new(Mutex::new(DelayQueue::new()));
    let mut rx = spawn_consumer(queue.clone());
    let start = Instant::now();
    queue.lock().unwrap().insert(1, ms(10));
    tokio::task::yield_now().await; // the consumer arms the entry at +10 ms
                                    // Past the deadline by more than a tick: the entry comes out by the home clock.
    advance(ms(20)).await;
    assert_eq!(next_value(&mut rx).await, (1, start + ms(20)));
    // The queue is empty and the consumer waits; insert at and after the old deadline.
    tokio::task::yield_now().await;
    let inserted = Instant::now();
    queue.lock().unwrap().insert(2, ms(10));
    let (value, at) = next_value(&mut rx).await;
    assert_eq!((value, at), (2, inserted + ms(10)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_insert_after_the_entry_fired_into_an_emptied_queue_wakes_the_consumer() {
    for empty_by_clear in [false, true] {
        let queue = Arc::new(Mutex::new(DelayQueue::new()));
        let mut rx = spawn_consumer(queue.clone());
        let key = queue.lock().unwrap().insert(1, ms(10));
        tokio::task::yield_now().await; // armed at +10 ms
        if empty_by_clear {
            queue.lock().unwrap().clear();
        } else {
            queue.lock().unwrap().remove(&key);
        }
        // The runtime entry fires while the queue is empty.
        advance(ms(15)).await;
        tokio::task::yield_now().await;
        let inserted = Instant::now();
        queue.lock().unwrap().insert_at(2, inserted + ms(10));
        assert_eq!(next_value(&mut rx).await, (2, inserted + ms(10)));
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_emptied_delay_map_wakes_its_consumer_on_insert() {
    let map = Arc::new(Mutex::new(DelayMap::new()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let consumer = map.clone();
    tokio::spawn(async move {
        loop {
            let key = std::future::poll_fn(|cx| match consumer.lock().unwrap().poll_expired(cx) {
                Poll::Ready(Some((key, ()))) => Poll::Ready(key),
                Poll::Ready(None) | Poll::Pending => Poll::Pending,
            })
            .await;
            if tx.send((key, Instant::now())).is_err() {
                return;
            }
        }
    });
    let start = Instant::now();
    map.lock().unwrap().insert(1u32, (), ms(10));
    tokio::task::yield_now().await;
    advance(ms(20)).await;
    assert_eq!(next_value(&mut rx).await, (1, start + ms(20)));
    tokio::task::yield_now().await;
    let inserted = Instant::now();
    map.lock().unwrap().insert(2, (), ms(10));
    assert_eq!(next_value(&mut rx).await, (2, inserted + ms(10)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_emptied_idle_queue_sees_its_next_insert_on_time() {
    // IdleQueue never ends and its owner's inserts are seen on the owner's next poll;
    // what must hold is that an entry inserted after the queue drained comes out on
    // time for a task driven by its wakes.
    let (count, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    let mut queue = IdleQueue::new(ms(10));
    queue.insert(1u32);
    assert!(queue.poll_expired(&mut cx).is_pending());
    advance(ms(20)).await;
    assert!(count.wakes() >= 1);
    assert!(matches!(queue.poll_expired(&mut cx), Poll::Ready(e) if *e.get_ref() == 1));
    assert!(queue.poll_expired(&mut cx).is_pending());
    let inserted = Instant::now();
    queue.insert(2);
    assert!(queue.poll_expired(&mut cx).is_pending());
    let wakes = count.wakes();
    advance(ms(9)).await;
    assert_eq!(count.wakes(), wakes, "woken before the deadline");
    advance(ms(1)).await;
    assert!(count.wakes() > wakes, "not woken at the deadline");
    assert!(matches!(queue.poll_expired(&mut cx), Poll::Ready(e) if *e.get_ref() == 2));
    assert_eq!(Instant::now(), inserted + ms(10));
}

/// A second paused runtime whose clock is already 100 ms ahead of the first's.
fn runtime_ahead() -> tokio::runtime::Runtime {
    let ahead = common::paused_runtime();
    ahead.block_on(advance(ms(100)));
    ahead
}

timer_kinds! {
    enum Probe { Rto }
}

/// Polls with `futures`' no-op waker, the one `now_or_never` uses everywhere: the
/// same waker at home and elsewhere, so a timer cannot learn from a waker change
/// that it moved.
fn poll_noop<T>(poll: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
    poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

#[test]
fn one_waker_at_home_then_in_another_runtime_is_never_early() {
    let home = common::paused_runtime();
    let elsewhere = runtime_ahead();
    let start = home.block_on(async { Instant::now() });

    // Each timer is armed at home for +60 ms, then moved earlier to +40 ms from the
    // other runtime, whose clock is already 100 ms past the home clock: the move
    // takes the slow path, which reads a clock.
    let mut queue = DelayQueue::new();
    let key = home.block_on(async {
        let key = queue.insert_at(1u8, start + ms(60));
        assert!(poll_noop(|cx| queue.poll_expired(cx)).is_pending());
        key
    });
    elsewhere.block_on(async {
        queue.reset_at(&key, start + ms(40));
        assert!(
            poll_noop(|cx| queue.poll_expired(cx)).is_pending(),
            "DelayQueue yielded by another runtime's clock"
        );
    });

    let mut map = DelayMap::new();
    home.block_on(async {
        map.insert_at(1u8, (), start + ms(60));
        assert!(poll_noop(|cx| map.poll_expired(cx)).is_pending());
    });
    elsewhere.block_on(async {
        map.reset_at(&1, start + ms(40));
        assert!(
            poll_noop(|cx| map.poll_expired(cx)).is_pending(),
            "DelayMap yielded by another runtime's clock"
        );
    });

    let (mut idle, key) = home.block_on(async {
        let mut idle = IdleQueue::new(ms(60));
        let key = idle.insert(1u8);
        assert!(poll_noop(|cx| idle.poll_expired(cx)).is_pending());
        (idle, key)
    });
    elsewhere.block_on(async {
        idle.set_timeout(key, ms(40));
        assert!(
            poll_noop(|cx| idle.poll_expired(cx)).is_pending(),
            "IdleQueue yielded by another runtime's clock"
        );
    });

    let mut slots = home.block_on(async {
        let mut slots = SlotTimer::<Probe>::new();
        slots.set(Probe::Rto, start + ms(60));
        assert!(poll_noop(|cx| slots.poll_expired(cx)).is_pending());
        slots
    });
    elsewhere.block_on(async {
        slots.set(Probe::Rto, start + ms(40));
        assert!(
            poll_noop(|cx| slots.poll_expired(cx)).is_pending(),
            "SlotTimer fired by another runtime's clock"
        );
    });

    // Back home, the clock there decides again: due once it passes +40 ms.
    home.block_on(async {
        advance(ms(39)).await;
        assert!(poll_noop(|cx| queue.poll_expired(cx)).is_pending());
        assert!(poll_noop(|cx| slots.poll_expired(cx)).is_pending());
        advance(ms(2)).await;
        assert!(matches!(
            poll_noop(|cx| queue.poll_expired(cx)),
            Poll::Ready(Some(_))
        ));
        assert!(matches!(
            poll_noop(|cx| map.poll_expired(cx)),
            Poll::Ready(Some(_))
        ));
        assert!(poll_noop(|cx| idle.poll_expired(cx)).is_ready());
        assert!(poll_noop(|cx| slots.poll_expired(cx)).is_ready());
    });
}

#[test]
fn one_waker_at_home_then_on_a_plain_thread_is_never_early() {
    // A paused runtime's clock stands still, so the plain thread's (real) clock is
    // ahead of it by however long the test has run; a deadline 1 ms out is "due" by
    // it after a short spin. Both polls use the same no-op waker.
    let home = common::paused_runtime();
    let start = home.block_on(async { Instant::now() });
    let mut queue = DelayQueue::new();
    let key = home.block_on(async {
        let key = queue.insert_at(1u8, start + ms(60));
        assert!(poll_noop(|cx| queue.poll_expired(cx)).is_pending());
        key
    });
    let (mut idle, idle_key) = home.block_on(async {
        let mut idle = IdleQueue::new(ms(60));
        let key = idle.insert(1u8);
        assert!(poll_noop(|cx| idle.poll_expired(cx)).is_pending());
        (idle, key)
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            let spin = std::time::Instant::now();
            while spin.elapsed() < ms(3) {
                std::hint::spin_loop();
            }
            queue.reset_at(&key, start + ms(1));
            assert!(
                poll_noop(|cx| queue.poll_expired(cx)).is_pending(),
                "DelayQueue yielded by a plain thread's clock"
            );
            idle.set_timeout(idle_key, ms(1));
            assert!(
                poll_noop(|cx| idle.poll_expired(cx)).is_pending(),
                "IdleQueue yielded by a plain thread's clock"
            );
        });
    });
}

#[test]
fn a_queue_whose_home_runtime_was_dropped_is_judged_by_the_runtime_that_polls_it() {
    let mut queue = DelayQueue::new();
    let first = common::paused_runtime();
    first.block_on(async {
        queue.insert(0u8, ms(5));
        assert_eq!(queue.next_expired().await, Some(0));
        // This runtime's clock runs an hour ahead of the next one's, and what it
        // witnessed must not carry over.
        advance(Duration::from_secs(3600)).await;
        queue.insert(8u8, ms(1));
        assert_eq!(queue.next_expired().await, Some(8));
        // Leave the runtime entry armed far ahead.
        queue.insert(9u8, Duration::from_secs(3600));
        assert!(std::future::poll_fn(|cx| queue.poll_expired(cx))
            .now_or_never()
            .is_none());
        queue.clear();
    });
    drop(first);
    let second = common::paused_runtime();
    second.block_on(async {
        let start = Instant::now();
        queue.insert(1u8, ms(10));
        assert_eq!(queue.next_expired().await, Some(1));
        let took = start.elapsed();
        assert!(
            took >= ms(10),
            "came out {took:?} after its insert, before its 10 ms"
        );
        assert!(
            took <= ms(11),
            "came out {took:?} after its insert, later than tokio"
        );
    });
}

trait NextExpired<T> {
    async fn next_expired(&mut self) -> Option<T>;
}

impl<T> NextExpired<T> for DelayQueue<T> {
    async fn next_expired(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_expired(cx))
            .await
            .map(|expired| expired.into_inner())
    }
}
