//! Not a loom model: the waker-memo bug reproduced through the public API, on a
//! paused runtime. It needs a hand-made `RawWaker` (`unsafe`), which the library's
//! own tests may not use; see `support/moving_waker.rs`.
//!
//! The owner polls with task A's waker, whose clone sits at another address; A's
//! waker goes away and task B's waker is made at the same address; the owner polls
//! with B's. A memo of the caller's address would let B's poll skip registering, and
//! a handle's shortening would wake A. It must wake B.
#![cfg(not(lazy_deadline_loom))]

#[path = "support/moving_waker.rs"]
mod moving_waker;

use lazy_deadline::{timer_kinds, IdleTimeout, SlotTimer};
use moving_waker::MovingWaker;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;
use tokio::time::Instant;

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn idle_timeout_wakes_the_task_that_polled_last() {
    paused().block_on(async {
        let mut idle = IdleTimeout::new(Duration::from_secs(10));
        let handle = idle.handle();
        let task = MovingWaker::new();
        assert!(Pin::new(&mut idle)
            .poll(&mut Context::from_waker(&task.waker()))
            .is_pending());
        let task_b = task.reuse_address_for_another_task();
        assert!(Pin::new(&mut idle)
            .poll(&mut Context::from_waker(&task_b.waker()))
            .is_pending());
        handle.set_timeout(Duration::ZERO);
        assert_eq!(task_b.wakes(), 1, "the shortening woke the old task");
    });
}

timer_kinds! {
    enum Kind { Rto, Ack }
}

#[test]
fn slot_timer_wakes_the_task_that_polled_last() {
    paused().block_on(async {
        let mut timer = SlotTimer::<Kind>::new();
        timer.set_after(Kind::Rto, Duration::from_secs(10));
        let handle = timer.handle();
        let task = MovingWaker::new();
        assert!(timer
            .poll_expired(&mut Context::from_waker(&task.waker()))
            .is_pending());
        let task_b = task.reuse_address_for_another_task();
        assert!(timer
            .poll_expired(&mut Context::from_waker(&task_b.waker()))
            .is_pending());
        handle.set_after(Kind::Ack, Duration::from_millis(1));
        assert_eq!(
            task_b.wakes(),
            1,
            "the handle's earlier set woke the old task"
        );
    });
}

/// Polled pending, reset earlier across ticks (ours: an entry of its own), polled by
/// task A, then by task B whose waker sits at A's old address; the wakes B gets
/// once the deadline passes.
async fn wakes_of_the_last_poller<S: Future<Output = ()>>(
    mut sleep: Pin<&mut S>,
    reset_earlier: impl FnOnce(Pin<&mut S>),
) -> usize {
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    reset_earlier(sleep.as_mut());
    let task = MovingWaker::new();
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&task.waker()))
        .is_pending());
    let task_b = task.reuse_address_for_another_task();
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&task_b.waker()))
        .is_pending());
    tokio::time::advance(Duration::from_millis(100)).await;
    task_b.wakes()
}

#[test]
fn sleep_on_an_entry_of_its_own_wakes_the_task_that_polled_last() {
    paused().block_on(async {
        let start = Instant::now();
        let theirs = tokio::time::sleep_until(start + Duration::from_millis(500));
        tokio::pin!(theirs);
        let tokio_wakes =
            wakes_of_the_last_poller(theirs, |s| s.reset(start + Duration::from_millis(100))).await;
        assert_eq!(tokio_wakes, 1, "tokio's own behaviour changed");

        let start = Instant::now();
        let ours = lazy_deadline::sleep_until(start + Duration::from_millis(500));
        tokio::pin!(ours);
        let our_wakes =
            wakes_of_the_last_poller(ours, |s| s.reset(start + Duration::from_millis(100))).await;
        assert_eq!(
            our_wakes, 1,
            "the fire woke the old task, not the one that polled last"
        );
    });
}
