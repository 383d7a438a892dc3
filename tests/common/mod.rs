//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

/// How many panics the shutdowns of `rounds` two-worker runtimes (on tokio's
/// per-worker timer if `alt_timer`) saw with ours (`lazy`) or tokio's timers: panics
/// out of a task's drop (caught there) and any other on the runtime's threads (which
/// tokio would swallow; counted by a panic hook). Each runtime has tasks that wait
/// forever, half of them on an hour-long timer (its entry is woken at shutdown; its
/// drop gives its place back) and half on nothing; each task's `Drop` guard then
/// makes a `timeout` and a `sleep` and drops them unpolled, as a guard's `Drop` might
/// (on a worker that made no timer before, that is its first).
pub fn panics_of_timers_at_shutdown(alt_timer: bool, lazy: bool, rounds: usize) -> usize {
    /// The runtime's threads' name, which the panic hook counts panics of.
    const NAME: &str = "timers-at-shutdown";
    let runtime = || {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2).thread_name(NAME).enable_all();
        #[cfg(tokio_unstable)]
        if alt_timer {
            builder.enable_alt_timer();
        }
        #[cfg(not(tokio_unstable))]
        assert!(
            !alt_timer,
            "tokio's per-worker timer needs --cfg tokio_unstable"
        );
        builder.build().unwrap()
    };
    /// Makes two timers when dropped.
    struct MakesTimersWhenDropped(bool);
    impl Drop for MakesTimersWhenDropped {
        fn drop(&mut self) {
            if self.0 {
                drop(lazy_deadline::timeout(ms(10), async {}));
                drop(lazy_deadline::sleep(ms(10)));
            } else {
                drop(tokio::time::timeout(ms(10), async {}));
                drop(tokio::time::sleep(ms(10)));
            }
        }
    }
    /// A task's future, whose drop's panics are counted (tokio would swallow them).
    struct CountsPanicsAtDrop<F> {
        future: Option<Pin<Box<F>>>,
        panics: Arc<AtomicUsize>,
    }
    impl<F: Future> Future for CountsPanicsAtDrop<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.future
                .as_mut()
                .expect("polled after drop")
                .as_mut()
                .poll(cx)
        }
    }
    impl<F> Drop for CountsPanicsAtDrop<F> {
        fn drop(&mut self) {
            let future = self.future.take();
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(future))).is_err() {
                // Relaxed: read after the runtime's drop joined its workers.
                self.panics.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let panics = Arc::new(AtomicUsize::new(0));
    let (outside, inside) = panics_on_threads_named(NAME, || {
        for _ in 0..rounds {
            let runtime = runtime();
            runtime.block_on(async {
                for task in 0..4 {
                    let future = async move {
                        let _guard = MakesTimersWhenDropped(lazy);
                        if task % 2 == 0 {
                            let hour = Duration::from_secs(3600);
                            if lazy {
                                lazy_deadline::sleep(hour).await;
                            } else {
                                tokio::time::sleep(hour).await;
                            }
                        }
                        std::future::pending::<()>().await;
                    };
                    tokio::spawn(CountsPanicsAtDrop {
                        future: Some(Box::pin(future)),
                        panics: panics.clone(),
                    });
                }
                tokio::time::sleep(ms(3)).await;
            });
            drop(runtime);
        }
    });
    // A panic that a task's drop caught was counted on its thread by the hook too.
    let uncaught = outside + inside;
    uncaught.max(panics.load(Ordering::Relaxed))
}

/// Timers made at the shutdowns of `rounds` two-worker runtimes (on tokio's per-worker
/// timer if `alt_timer`) panic no more with ours than with tokio's, which never do
/// (see [`panics_of_timers_at_shutdown`]).
pub fn assert_no_panics_of_timers_at_shutdown(alt_timer: bool, rounds: usize) {
    let tokios = panics_of_timers_at_shutdown(alt_timer, false, rounds);
    assert_eq!(tokios, 0, "tokio's own panicked");
    let ours = panics_of_timers_at_shutdown(alt_timer, true, rounds);
    assert_eq!(
        ours, 0,
        "ours panicked {ours} times where tokio's never did"
    );
}

std::thread_local! {
    /// Inside a task's poll, as a runtime's `on_before_task_poll` and
    /// `on_after_task_poll` hooks (tokio_unstable) mark it: `tokio::task::try_id`
    /// cannot tell, since tokio runs each worker as a task of its blocking pool.
    pub static IN_A_TASK_POLL: Cell<bool> = const { Cell::new(false) };
}

/// The panics on threads named `name` (a runtime's, by its builder's `thread_name`)
/// while `run` runs: outside any task's poll (tokio's driver, its shutdown), and
/// inside one (as [`IN_A_TASK_POLL`] marks them: on a runtime without the poll
/// hooks, every panic counts as outside). Counted by a panic hook, so caught panics
/// count too.
pub fn panics_on_threads_named(name: &'static str, run: impl FnOnce()) -> (usize, usize) {
    /// Per name: panics outside a task, inside one.
    static COUNTS: Mutex<Vec<(&str, usize, usize)>> = Mutex::new(Vec::new());
    static HOOK: std::sync::Once = std::sync::Once::new();
    let counts = || {
        COUNTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(thread) = std::thread::current().name() {
                let in_task = IN_A_TASK_POLL.with(Cell::get);
                for (name, outside, inside) in counts().iter_mut() {
                    if *name == thread {
                        *if in_task { inside } else { outside } += 1;
                    }
                }
            }
            previous(info);
        }));
    });
    counts().push((name, 0, 0));
    run();
    let mut counts = counts();
    let at = counts.iter().position(|(n, _, _)| *n == name).unwrap();
    let (_, outside, inside) = counts.swap_remove(at);
    (outside, inside)
}
