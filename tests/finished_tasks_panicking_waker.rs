//! A user's waker that panics when dropped, kept by a deadline set's slot after its
//! request was answered, stops nothing at the runtime's shutdown: every set of the
//! runtime closes and wakes its waiters, and tokio's own timers are woken too.
//! (tokio drops such a waker with its timer, where the panic belongs; a set that
//! kept it drops it last, after it woke its waiters.)

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// A waker whose last reference panics when dropped (once armed).
struct PanicsOnDrop(AtomicBool);
impl Wake for PanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if self.0.load(Ordering::SeqCst) && !std::thread::panicking() {
            panic!("a user's waker panicked in drop");
        }
    }
}

/// Tells `ready` after its first poll, then polls `inner`.
struct Announce<F> {
    inner: Pin<Box<F>>,
    ready: Option<mpsc::Sender<()>>,
}
impl<F: Future> Future for Announce<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let out = self.inner.as_mut().poll(cx);
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(());
        }
        out
    }
}

/// On a thread of its own (so in a deadline set of its own), inside `handle`'s
/// context: waits on `timer` from a plain executor, and reports whether the wait
/// ended (woken at the shutdown: tokio's shutdown panic, caught).
fn waiter<F: Future + 'static>(
    handle: tokio::runtime::Handle,
    timer: impl FnOnce() -> F + Send + 'static,
    with_a_panicking_kept_waker: bool,
) -> (mpsc::Receiver<()>, mpsc::Receiver<()>) {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _inside = handle.enter();
        let mut waiting = Announce {
            inner: Box::pin(timer()),
            ready: Some(ready_tx),
        };
        // Filed first: this thread's request pending while another is answered.
        assert!(common::poll_once(waiting.inner.as_mut()).is_pending());
        if with_a_panicking_kept_waker {
            // A request of this thread's set answered (dropped) while the wait
            // below is pending: its slot keeps the waker, the only one left.
            let inner = Arc::new(PanicsOnDrop(AtomicBool::new(false)));
            let waker = Waker::from(inner.clone());
            let mut doomed = Box::pin(lazy_deadline::timeout(
                Duration::from_secs(3_600),
                std::future::pending::<()>(),
            ));
            assert!(doomed
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            drop(doomed);
            inner.0.store(true, Ordering::SeqCst);
            drop(waker);
            drop(inner);
        }
        let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            common::block_on_plain(waiting);
        }));
        let _ = ended;
        let _ = done_tx.send(());
    });
    (ready_rx, done_rx)
}

#[test]
fn a_waker_that_panics_in_drop_stops_no_shutdown() {
    common::watchdog(
        "shutdown with a panicking kept waker",
        Duration::from_secs(60),
        || {
            let runtime = common::two_workers();
            let handle = runtime.handle().clone();
            let timeout =
                || lazy_deadline::timeout(Duration::from_secs(3_600), std::future::pending::<()>());
            let tokio_sleep = || tokio::time::sleep(Duration::from_secs(3_600));
            let waiters = [
                waiter(handle.clone(), timeout, true),
                waiter(handle.clone(), timeout, false),
            ];
            let tokio_waiter = waiter(handle.clone(), tokio_sleep, false);
            for (ready, _) in waiters.iter().chain([&tokio_waiter]) {
                ready.recv().unwrap();
            }
            drop(handle);
            // The panic may surface here, as it would from tokio's own drop of such
            // a waker; the shutdown itself must complete.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(runtime)));
            for (i, (_, done)) in waiters.iter().enumerate() {
                assert!(
                    done.recv_timeout(Duration::from_secs(20)).is_ok(),
                    "the waiter of set {i} was not woken at the shutdown"
                );
            }
            assert!(
                tokio_waiter.1.recv_timeout(Duration::from_secs(20)).is_ok(),
                "tokio's own timer was not woken at the shutdown"
            );
        },
    );
}
