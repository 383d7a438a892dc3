//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A waker that counts its wakes.
#[derive(Default)]
pub struct CountingWaker(AtomicUsize);

impl CountingWaker {
    pub fn new() -> (Arc<Self>, Waker) {
        let me = Arc::new(Self::default());
        let waker = Waker::from(me.clone());
        (me, waker)
    }
    pub fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls once with a no-op waker.
pub fn poll_once<F: Future + ?Sized>(fut: Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls once with the given waker.
pub fn poll_with<F: Future + ?Sized>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

/// A paused current-thread runtime, for property tests that build one per case.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// A real-time runtime of two workers (the multi-thread tests' shape on a 2-core
/// machine).
pub fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// The same, whose blocking threads (at most four) exit after `keep_alive` idle, so
/// tests see timers on threads that are gone.
pub fn two_workers_short_lived_blocking(keep_alive: Duration) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .thread_keep_alive(keep_alive)
        .enable_time()
        .build()
        .unwrap()
}

/// A tiny deterministic PRNG (xorshift64*), so stress tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Runs `fut` to completion on the current thread without any tokio context of its
/// own (a plain executor: the waker unparks this thread).
pub fn block_on_plain<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// Where a differential test puts a deadline, relative to now.
#[derive(Clone, Copy, Debug)]
pub enum When {
    /// Whole milliseconds from now.
    Ms(u64),
    /// Microseconds from now (usually off the millisecond grid).
    Us(u64),
    /// Milliseconds before now.
    PastMs(u64),
}

impl When {
    pub fn at(self, now: tokio::time::Instant) -> tokio::time::Instant {
        match self {
            When::Ms(ms) => now + Duration::from_millis(ms),
            When::Us(us) => now + Duration::from_micros(us),
            When::PastMs(ms) => now - Duration::from_millis(ms),
        }
    }

    /// Whether a deadline made this way stays on the millisecond grid of `now`.
    pub fn on_grid(self) -> bool {
        !matches!(self, When::Us(_))
    }
}

/// Cases per property test: `PROPTEST_CASES`, else 2,000.
pub fn proptest_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Runs `f` on its own thread and fails, naming `what`, if it has not returned
/// within `limit`: a lost wake or a hang becomes a failure with a name instead of a
/// suite that never ends. A panic in `f` fails the caller with its message.
pub fn watchdog<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    // Once a watchdog of this process has fired, a thread still spins: the others
    // fail at once (a property test then shrinks in moments, not a limit per case).
    static FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if FIRED.load(std::sync::atomic::Ordering::SeqCst) {
        panic!("{what}: not run, an earlier case hung (see the first watchdog's failure)");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // `f` panicked: report its panic as this test's.
            match thread.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => unreachable!("sent nothing and returned"),
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            FIRED.store(true, std::sync::atomic::Ordering::SeqCst);
            panic!("{what}: still running after {limit:?} (a lost wake, or a hang)")
        }
    }
}

/// The message of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Runs `body` on a fresh paused current-thread runtime twice: once where the
/// crate's timers take tokio's own entry (such a runtime's), once through the
/// deadline sets (forced with the crate's test hook). `body` is told which.
pub fn in_both_places<F: Future<Output = ()>>(mut body: impl FnMut(bool) -> F) {
    for sets in [false, true] {
        lazy_deadline::__private::prefer_sets(sets);
        paused_runtime().block_on(body(sets));
        lazy_deadline::__private::prefer_sets(false);
    }
}
