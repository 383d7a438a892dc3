//! Resets at the edges: a later deadline off the driver's millisecond grid that the
//! timer's entry has not re-armed (its `is_elapsed` and its poll agree, and never go
//! back), a `Sleep` that leaves its deadline set as its thread's last filing (the set
//! keeps no finished task's waker), and instants far beyond tokio's wheel. Each on
//! tokio's own entry (a current-thread runtime's timers) and, where it applies, on
//! the deadline sets (forced with the crate's test hook).

mod common;

use common::{ms, poll_with, CountingWaker};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;
use tokio::time::Instant;

/// A `Sleep` reset later to a deadline between two driver ticks, the clock advanced
/// around that deadline, unpolled: `is_elapsed` is never `true` before the deadline
/// and always wherever tokio's is; the poll is never ready before the deadline (only
/// the entry's fire completes it) and never later than tokio's.
#[test]
fn an_off_grid_later_deadline_is_never_early_and_never_later_than_tokio() {
    common::in_both_places(|sets| async move {
        for advance_us in [1_000u64, 1_499, 1_500, 1_999, 2_000] {
            let start = Instant::now();
            let ours = lazy_deadline::sleep_until(start + ms(1));
            let theirs = tokio::time::sleep_until(start + ms(1));
            tokio::pin!(ours, theirs);
            let (_, w) = CountingWaker::new();
            assert!(poll_with(ours.as_mut(), &w).is_pending());
            assert!(poll_with(theirs.as_mut(), &w).is_pending());
            let target = start + Duration::from_micros(1_500);
            ours.as_mut().reset(target);
            theirs.as_mut().reset(target);
            tokio::time::advance(Duration::from_micros(advance_us)).await;
            let context = format!("sets: {sets}, advanced {advance_us} µs");
            let elapsed = ours.is_elapsed();
            assert!(!elapsed || Instant::now() >= target, "early: {context}");
            assert!(elapsed || !theirs.is_elapsed(), "behind tokio's: {context}");
            let ready = poll_with(ours.as_mut(), &w).is_ready();
            assert!(!ready || Instant::now() >= target, "early: {context}");
            let theirs_ready = poll_with(theirs.as_mut(), &w).is_ready();
            assert!(!theirs_ready || ready, "later than tokio's: {context}");
            // Settle both before the next round.
            ours.as_mut().await;
            theirs.as_mut().await;
        }
    });
}

struct Flag;
impl Wake for Flag {
    fn wake(self: Arc<Self>) {}
}

/// Runs `body` with a waker of its own on a current-thread runtime whose timers take
/// the deadline sets, and returns how many clones of that waker are still kept once
/// `body` is over (a set that keeps one keeps a finished task).
fn wakers_kept_after<F: std::future::Future<Output = ()>>(body: impl FnOnce(Waker) -> F) -> usize {
    lazy_deadline::__private::prefer_sets(true);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let flag = Arc::new(Flag);
    runtime.block_on(body(Waker::from(flag.clone())));
    let kept = Arc::strong_count(&flag) - 1;
    drop(runtime);
    lazy_deadline::__private::prefer_sets(false);
    kept
}

/// A `Sleep` in a deadline set reset earlier across ticks (it leaves the set for an
/// entry of its own: its filing is given back, the thread's last), completed and
/// dropped: the set keeps no waker of its task.
#[test]
fn a_sleep_that_leaves_its_set_as_the_last_filing_leaves_no_waker_there() {
    let kept = wakers_kept_after(|waker| async move {
        let mut sleep = Box::pin(lazy_deadline::sleep(ms(500)));
        assert!(poll_with(sleep.as_mut(), &waker).is_pending());
        sleep.as_mut().reset(Instant::now() + ms(2)); // earlier across ticks
        drop(waker);
        sleep.as_mut().await;
    });
    assert_eq!(kept, 0, "the set kept a finished task's waker");
}

/// A `timeout` in a deadline set answered by its future: the set keeps no waker of
/// its task.
#[test]
fn an_answered_timeout_leaves_no_waker_in_its_set() {
    let kept = wakers_kept_after(|waker| async move {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut request = Box::pin(lazy_deadline::timeout(ms(500), rx));
        assert!(poll_with(request.as_mut(), &waker).is_pending());
        tx.send(()).unwrap();
        assert!(poll_with(request.as_mut(), &waker).is_ready());
    });
    assert_eq!(kept, 0, "the set kept a finished task's waker");
}

/// Resets far beyond tokio's wheel (and beyond a `u64` of nanoseconds from the
/// armed deadline), and `Duration::MAX`: no panic, the deadline kept exactly.
#[test]
fn far_future_resets_keep_the_deadline_and_never_panic() {
    common::in_both_places(|_sets| async move {
        let sleep = lazy_deadline::sleep(ms(1));
        tokio::pin!(sleep);
        let (_, w) = CountingWaker::new();
        assert!(poll_with(sleep.as_mut(), &w).is_pending());
        let now = Instant::now();
        let far = now + Duration::from_secs(600 * 365 * 86_400);
        sleep.as_mut().reset(far);
        assert_eq!(sleep.deadline(), far);
        let nearer = now + Duration::from_secs(100 * 365 * 86_400);
        sleep.as_mut().reset(nearer);
        assert_eq!(sleep.deadline(), nearer);
        assert!(!sleep.is_elapsed());
        assert!(poll_with(sleep.as_mut(), &w).is_pending());
        let never = lazy_deadline::sleep(Duration::MAX);
        tokio::pin!(never);
        assert!(poll_with(never.as_mut(), &w).is_pending());
        let request = lazy_deadline::timeout(Duration::MAX, std::future::pending::<()>());
        tokio::pin!(request);
        assert!(poll_with(request.as_mut(), &w).is_pending());
    });
}
