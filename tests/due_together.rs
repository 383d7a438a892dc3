//! Everything due at one instant comes out together: all of it that is due by the
//! owning runtime's clock at that poll, with no extra registration or driver turn in
//! between (semantic 4). Deadlines set by the owner and by handles, zero and past
//! ones mixed, beside staggered and saturated ones that must stay.

mod common;

use common::poll_once;
use lazy_deadline::{IdleQueue, KindSet, SlotTimer, TimerKind};
use std::task::Poll;
use std::time::Duration;
use tokio::time::{advance, Instant};

/// A hand-written kind with the maximum of 64 members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct K(u8);

impl TimerKind for K {
    const COUNT: usize = 64;
    fn index(self) -> usize {
        self.0 as usize
    }
    fn from_index(index: usize) -> Self {
        K(index as u8)
    }
}

fn poll_timer(timer: &mut SlotTimer<K>) -> Poll<KindSet<K>> {
    poll_once(std::pin::pin!(timer.expired()))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn slot_timer_reports_every_due_kind_in_one_set() {
    let mut timer = SlotTimer::<K>::new();
    let handle = timer.handle();
    let start = Instant::now();
    // 16 staggered kinds (32..48) from 100 ms on, 16 (48..64) never in practice.
    for i in 32..48u8 {
        timer.set(K(i), start + Duration::from_millis(100 + u64::from(i)));
    }
    for i in 48..64u8 {
        timer.set_after(K(i), Duration::MAX);
    }
    assert!(poll_timer(&mut timer).is_pending()); // armed at the first staggered one
    advance(Duration::from_millis(64)).await;
    let now = Instant::now();
    // 32 due ones: even by the owner, odd by the handle; zero delays and deadlines up
    // to 64 ms in the past.
    for i in 0..32u8 {
        let past = now - Duration::from_millis(u64::from(i) * 2);
        match (i % 2 == 0, i % 4 < 2) {
            (true, true) => timer.set_after(K(i), Duration::ZERO),
            (true, false) => timer.set(K(i), past),
            (false, true) => handle.set_after(K(i), Duration::ZERO),
            (false, false) => handle.set(K(i), past),
        }
    }
    let before = timer.stats();
    let Poll::Ready(expired) = poll_timer(&mut timer) else {
        panic!("32 kinds due and nothing reported");
    };
    let reported: Vec<u8> = expired.iter().map(|k| k.0).collect();
    assert_eq!(reported, (0..32).collect::<Vec<_>>(), "not all in one set");
    assert!(
        timer.stats().registrations <= before.registrations + 1,
        "registered {} times for one report",
        timer.stats().registrations - before.registrations
    );
    // The staggered and saturated kinds stay, and come out at their own time.
    assert_eq!(
        timer.next_deadline(),
        Some((K(32), start + Duration::from_millis(132)))
    );
    assert!(poll_timer(&mut timer).is_pending());
    let next = timer.expired().await;
    assert_eq!(next.iter().collect::<Vec<_>>(), [K(32)]);
    assert_eq!(Instant::now(), start + Duration::from_millis(132));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn idle_queue_yields_every_due_entry_without_a_driver_turn() {
    let mut queue = IdleQueue::new(Duration::from_secs(30));
    for i in 100..116u32 {
        queue.insert_with_timeout(i, Duration::from_millis(100 + u64::from(i)));
    }
    queue.insert_with_timeout(999, Duration::MAX);
    let mut due = Vec::new();
    for i in 0..32u32 {
        due.push(queue.insert(i));
    }
    assert!(poll_once(std::pin::pin!(queue.expired())).is_pending());
    advance(Duration::from_millis(64)).await;
    // Zero timeouts and timeouts shortened into the past, mixed.
    for (i, &key) in due.iter().enumerate() {
        let timeout = if i % 2 == 0 { 0 } else { i as u64 * 2 };
        assert!(queue.set_timeout(key, Duration::from_millis(timeout)));
    }
    let before = queue.stats();
    let mut out = Vec::new();
    while let Poll::Ready(expired) = poll_once(std::pin::pin!(queue.expired())) {
        out.push(*expired.get_ref());
    }
    out.sort_unstable();
    assert_eq!(
        out,
        (0..32).collect::<Vec<_>>(),
        "not all without a driver turn"
    );
    assert!(
        queue.stats().registrations <= before.registrations + 1,
        "registered {} times while draining",
        queue.stats().registrations - before.registrations
    );
    assert_eq!(queue.len(), 17);
}
