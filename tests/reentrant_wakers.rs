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

// The deadline sets (`timeout`, `sleep`): a task of a hand-written executor owns its
// future through its waker (`Arc<Task>`), and that future holds a timeout filed in
// the same set. When the set lets go of the task's waker (a slot that kept it for the
// next request, a slot given back after a burst, the set cleared or closed), the
// task's last reference may go with it, and its timeout's drop reaches the set: a
// waker dropped under the set's lock, or inside the thread's list of sets, would hang
// (or panic) there.

/// A task whose future (and the timeout in it) goes with its last waker.
struct Task {
    future: std::sync::Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {}
}

impl Drop for Task {
    fn drop(&mut self) {
        // The future first (its timeout's drop reaches the set), then the flag.
        drop(self.future.lock().unwrap().take());
        self.dropped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A waker of a task owning a timeout already filed on this thread (polled once):
/// the waker is the task's last reference once the caller drops its handle. Also the
/// flag its drop raises.
fn task_owning_a_filed_timeout() -> (Waker, Arc<std::sync::atomic::AtomicBool>) {
    // These cases are the deadline sets' (a current-thread runtime's timers are
    // tokio's own entries otherwise): this thread's timers take the sets.
    lazy_deadline::__private::prefer_sets(true);
    let mut victim = Box::pin(lazy_deadline::timeout(
        Duration::from_secs(3600),
        std::future::pending::<()>(),
    ));
    assert!(victim
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = Arc::new(Task {
        future: std::sync::Mutex::new(Some(Box::pin(async move {
            let _victim = victim;
            std::future::pending::<()>().await
        }))),
        dropped: dropped.clone(),
    });
    (Waker::from(task), dropped)
}

type Timeouts = Vec<Pin<Box<lazy_deadline::Timeout<std::future::Pending<()>>>>>;

/// `n` timeouts filed on this thread, the one at `evil_at` with the task's waker
/// (the others with a no-op one), so that its slot keeps the task's waker.
fn burst_with_the_task_at(n: usize, evil_at: usize, evil: &Waker) -> Timeouts {
    (0..n)
        .map(|i| {
            let mut timeout = Box::pin(lazy_deadline::timeout(
                Duration::from_secs(3600),
                std::future::pending::<()>(),
            ));
            let waker = if i == evil_at { evil } else { Waker::noop() };
            assert!(timeout
                .as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending());
            timeout
        })
        .collect()
}

/// Answers (drops) the timeouts from the last down to `keep`, leaving the first
/// `keep` in flight: the shape that lets a set give back a burst's last slots.
fn answer_down_to(timeouts: &mut Timeouts, keep: usize) {
    while timeouts.len() > keep {
        drop(timeouts.pop());
    }
}

fn paused_here() -> tokio::runtime::Runtime {
    paused()
}

#[test]
fn a_burst_given_back_drops_a_kept_task_waker_outside_the_sets_lock() {
    // 300 requests on one thread, the task's waker in the last slot, then answered
    // from the last down to 44: the slots past the busy ones are given back.
    for (n, evil_at) in [(300, 299), (300, 255), (600, 599), (2_000, 1_999)] {
        with_watchdog(move || {
            let rt = paused_here();
            rt.block_on(async move {
                let (evil, dropped) = task_owning_a_filed_timeout();
                let mut timeouts = burst_with_the_task_at(n, evil_at, &evil);
                drop(evil);
                answer_down_to(&mut timeouts, 44);
                drop(timeouts);
                // The set works on, and a kept waker goes at the latest with its set.
                assert_eq!(
                    lazy_deadline::timeout(Duration::from_millis(5), async { 7 }).await,
                    Ok(7)
                );
                lazy_deadline::sleep(Duration::from_millis(5)).await;
                let _ = dropped;
            });
        });
    }
}

#[test]
fn a_thread_exiting_with_a_kept_task_waker_lets_it_go_outside_the_sets_lock() {
    // The thread's sets are let go when it exits, with 255 answers not yet given
    // back: giving them back must not drop the task's waker under the set's lock.
    for evil_at in [299, 255, 100] {
        with_watchdog(move || {
            let rt = Arc::new(paused());
            let handle = rt.handle().clone();
            let (kept, dropped) = std::thread::spawn(move || {
                let _entered = handle.enter();
                let (evil, dropped) = task_owning_a_filed_timeout();
                let mut timeouts = burst_with_the_task_at(300, evil_at, &evil);
                drop(evil);
                answer_down_to(&mut timeouts, 45);
                (timeouts, dropped) // the rest is dropped on the test's thread
            })
            .join()
            .expect("the thread exits");
            drop(kept);
            // The runtime's shutdown closes the set, letting go of what it kept.
            drop(rt);
            assert!(
                dropped.load(std::sync::atomic::Ordering::SeqCst),
                "the task outlived its runtime: the set kept its waker"
            );
        });
    }
}

#[test]
fn a_gone_runtimes_set_let_go_at_the_next_miss_drops_a_kept_task_waker_outside_its_lock() {
    // The thread's next timer in another runtime lets go of the gone runtime's set
    // (prune), which gives back its answered slots and goes back to the pool.
    with_watchdog(|| {
        std::thread::spawn(|| {
            let first = paused();
            let (timeouts, dropped) = first.block_on(async {
                let (evil, dropped) = task_owning_a_filed_timeout();
                let mut timeouts = burst_with_the_task_at(300, 299, &evil);
                drop(evil);
                answer_down_to(&mut timeouts, 45);
                (timeouts, dropped)
            });
            drop(first);
            assert!(
                dropped.load(std::sync::atomic::Ordering::SeqCst),
                "the close let go of the kept waker"
            );
            drop(timeouts);
            let second = paused();
            second.block_on(async {
                lazy_deadline::sleep(Duration::from_millis(5)).await;
            });
        })
        .join()
        .expect("no panic");
    });
}

#[test]
fn a_set_cleared_for_the_pool_drops_its_kept_wakers_outside_its_lock() {
    // A set whose runtime is gone goes back to the pool with its last filing; the
    // wakers its slots kept go then. Here such a waker's task makes a timer of its
    // own when it goes (in another runtime, on the same thread): that reaches the
    // thread's sets and the pool again.
    with_watchdog(|| {
        std::thread::spawn(|| {
            let other = paused();
            let other_handle = other.handle().clone();
            let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let task = Arc::new(Task {
                future: std::sync::Mutex::new(Some(Box::pin(MakesATimerOnDrop(other_handle)))),
                dropped: dropped.clone(),
            });
            let first = paused();
            let last = first.block_on(async {
                let evil = Waker::from(task);
                // Answered: its slot keeps the task's waker.
                let answered = burst_with_the_task_at(3, 1, &evil);
                drop(evil);
                drop(answered);
                // One request still in flight holds the set after the runtime goes.
                burst_with_the_task_at(1, 1, Waker::noop())
            });
            drop(first);
            drop(last); // the set's last filing: it is cleared for the pool
            assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
            other.block_on(async { lazy_deadline::sleep(Duration::from_millis(5)).await });
        })
        .join()
        .expect("no panic");
    });
}

/// A future whose drop makes and polls a timer in the runtime of its handle.
struct MakesATimerOnDrop(tokio::runtime::Handle);

impl Future for MakesATimerOnDrop {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Pending
    }
}

impl Drop for MakesATimerOnDrop {
    fn drop(&mut self) {
        let _entered = self.0.enter();
        let mut timeout = Box::pin(lazy_deadline::timeout(
            Duration::from_secs(1),
            std::future::pending::<()>(),
        ));
        let _ = timeout
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
    }
}
