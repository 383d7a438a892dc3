//! A waker whose `Drop` touches the timer it was registered with.
//!
//! The owner's waker slot drops the waker it replaces; if that drop ran under the
//! slot's lock, a `Drop` that moves the timer earlier through a handle (which wakes
//! through the same slot) would re-lock it on the same thread and hang. Each case runs
//! under a watchdog so a regression fails instead of hanging the suite.

use lazy_deadline::{timer_kinds, ActivityHandle, IdleTimeout, SlotHandle, SlotTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::{mpsc, Arc};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

/// Runs `f` on its own thread and fails if it has not returned within 20 s.
fn with_watchdog(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("deadlocked: a waker's drop re-entered the timer's waker slot");
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A waker that runs `on_drop` when its last clone goes.
struct OnDrop<F: Fn() + Send + Sync + 'static>(F);
impl<F: Fn() + Send + Sync + 'static> Wake for OnDrop<F> {
    fn wake(self: Arc<Self>) {}
}
impl<F: Fn() + Send + Sync + 'static> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

#[test]
fn idle_timeout_survives_a_waker_that_shortens_it_on_drop() {
    with_watchdog(|| {
        paused().block_on(async {
            let mut idle = IdleTimeout::new(Duration::from_secs(10));
            let handle: ActivityHandle = idle.handle();
            let evil = Waker::from(Arc::new(OnDrop(move || handle.set_timeout(Duration::ZERO))));
            assert!(Pin::new(&mut idle)
                .poll(&mut Context::from_waker(&evil))
                .is_pending());
            drop(evil); // the slot holds the last clone
                        // Replacing it drops it: its drop shortens the timeout, which wakes.
            let _ = Pin::new(&mut idle).poll(&mut Context::from_waker(Waker::noop()));
            // The shortened timeout took effect.
            (&mut idle).await;
            assert_eq!(idle.timeout(), Duration::ZERO);
        })
    });
}

timer_kinds! {
    enum Kind { Rto, Ack }
}

#[test]
fn slot_timer_survives_a_waker_that_sets_earlier_on_drop() {
    with_watchdog(|| {
        paused().block_on(async {
            let mut timer = SlotTimer::<Kind>::new();
            timer.set_after(Kind::Rto, Duration::from_secs(10));
            let handle: SlotHandle<Kind> = timer.handle();
            let evil = Waker::from(Arc::new(OnDrop(move || {
                handle.set_after(Kind::Ack, Duration::ZERO)
            })));
            assert!(timer
                .poll_expired(&mut Context::from_waker(&evil))
                .is_pending());
            drop(evil);
            // Replacing it drops it: its drop sets Ack due now, through the slot.
            let kinds = match timer.poll_expired(&mut Context::from_waker(Waker::noop())) {
                std::task::Poll::Ready(kinds) => kinds,
                std::task::Poll::Pending => timer.expired().await,
            };
            // The handle's earlier set is not lost either.
            assert_eq!(kinds.iter().collect::<Vec<_>>(), [Kind::Ack]);
            assert!(timer.deadline(Kind::Rto).is_some());
        })
    });
}

#[test]
fn dropping_the_timer_with_such_a_waker_registered_does_not_hang() {
    with_watchdog(|| {
        paused().block_on(async {
            let mut idle = IdleTimeout::new(Duration::from_secs(10));
            let handle = idle.handle();
            let evil = Waker::from(Arc::new(OnDrop(move || handle.set_timeout(Duration::ZERO))));
            let _ = Pin::new(&mut idle).poll(&mut Context::from_waker(&evil));
            drop(evil);
            drop(idle); // clears the slot: the waker's drop wakes through it
        })
    });
}
