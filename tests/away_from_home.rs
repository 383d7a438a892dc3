//! "Not later than tokio" for a timer of a paused runtime polled from elsewhere.
//!
//! A lazy re-arm needs the owner's poll between the entry's fire and the later
//! deadline. A paused runtime does not wait for a poller on another thread: as soon as
//! its own tasks are idle it jumps to its next timer. So the harness below gives the
//! home runtime a sentinel timer 10 s out and moves a deadline from 100 ms to 150 ms
//! from a plain thread; tokio's `Sleep` (reset from that thread) completes on its
//! first wake, at 150 ms. A lazy timer that only re-arms on that wake would wake at
//! 100 ms, re-arm at 150 ms after the home clock had already jumped to 10 s, and
//! resolve at 10 s. Ours must behave like tokio's: the first wake finds it ready, by a
//! home clock at or past 150 ms (never early).
//!
//! The wake is read on the home runtime's own thread (its driver wakes the poller
//! while it fires the entry), so the check is on the home clock at the first wake,
//! not on how fast two threads race: the tests are deterministic.

use lazy_deadline::{timer_kinds, IdleQueue, IdleTimeout, SlotTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio::time::Instant;

const FIRST: Duration = Duration::from_millis(100);
const FINAL: Duration = Duration::from_millis(150);

/// Wakes the test's thread and records the clock (the home runtime's, as the
/// home driver's thread runs the wake) at the first wake.
struct Flag {
    woken: AtomicBool,
    start: Instant,
    first_wake: Mutex<Option<Duration>>,
    thread: std::thread::Thread,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let mut first = self.first_wake.lock().unwrap();
        if first.is_none() {
            *first = Some(Instant::now() - self.start);
        }
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// What a plain thread does with the timer under test.
trait Probe: Send + 'static {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()>;
    /// Moves the deadline from `start + FIRST` to `start + FINAL` the type's own way.
    fn move_later(&mut self, start: Instant);
}

/// Creates the timer on a paused runtime, polls it from a plain thread (armed at
/// `FIRST`), moves it later, polls again, then lets the home runtime run with a
/// sentinel 10 s out. Returns whether the poll after the first wake found it ready,
/// and the home clock's reading (from `start`) at that wake.
fn first_wake<P: Probe>(make: impl FnOnce(Instant) -> P) -> (bool, Duration) {
    let home = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (start, mut probe) = {
        let _inside = home.enter();
        let start = Instant::now();
        (start, make(start))
    };
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let (result_tx, result_rx) = mpsc::channel();
    let poller = std::thread::spawn(move || {
        let flag = Arc::new(Flag {
            woken: AtomicBool::new(false),
            start,
            first_wake: Mutex::new(None),
            thread: std::thread::current(),
        });
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(probe.poll(&mut cx).is_pending());
        probe.move_later(start);
        assert!(probe.poll(&mut cx).is_pending());
        result_tx.send(()).unwrap(); // now let the home runtime run
                                     // A watchdog: a lost wake fails here by name instead of hanging the suite.
        let limit = std::time::Instant::now() + Duration::from_secs(60);
        while !flag.woken.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < limit,
                "never woken after its move later (a lost wake)"
            );
            std::thread::park_timeout(Duration::from_millis(100));
        }
        let ready = probe.poll(&mut cx).is_ready();
        let at = flag.first_wake.lock().unwrap().expect("woken");
        let _ = done_tx.send(());
        (ready, at)
    });
    result_rx.recv().unwrap();
    home.block_on(async {
        tokio::select! {
            _ = done_rx => {}
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
    });
    poller.join().unwrap()
}

fn assert_like_tokio((ready, at): (bool, Duration)) {
    assert_eq!(
        at, FINAL,
        "first woken at {at:?} of the home clock (tokio: at {FINAL:?})"
    );
    assert!(ready, "not ready at the first wake, at {at:?}");
}

struct TokioSleep(Pin<Box<tokio::time::Sleep>>);
impl Probe for TokioSleep {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
    fn move_later(&mut self, start: Instant) {
        self.0.as_mut().reset(start + FINAL);
    }
}

#[test]
fn harness_tokio_sleep_is_ready_at_its_first_wake() {
    assert_like_tokio(first_wake(|start| {
        TokioSleep(Box::pin(tokio::time::sleep_until(start + FIRST)))
    }));
}

struct LazySleep(Pin<Box<lazy_deadline::Sleep>>);
impl Probe for LazySleep {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
    fn move_later(&mut self, start: Instant) {
        self.0.as_mut().reset(start + FINAL);
    }
}

#[test]
fn sleep_reset_later_away_from_home_is_not_later_than_tokio() {
    assert_like_tokio(first_wake(|start| {
        LazySleep(Box::pin(lazy_deadline::sleep_until(start + FIRST)))
    }));
}

/// A `Sleep` on an entry of its own (moved earlier across ticks at home), then moved
/// later from a plain thread.
#[test]
fn a_sleep_on_its_own_entry_reset_later_away_from_home_is_not_later_than_tokio() {
    // The own entry is a deadline set's way out (a multi-thread runtime's timers):
    // forced here for the paused clock.
    lazy_deadline::__private::prefer_sets(true);
    assert_like_tokio(first_wake(|start| {
        let mut sleep = Box::pin(lazy_deadline::sleep_until(start + Duration::from_secs(5)));
        assert!(sleep
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        sleep.as_mut().reset(start + FIRST); // at home: an entry of its own
        assert!(format!("{sleep:?}").contains("own_entry: true"));
        LazySleep(sleep)
    }));
}

struct Idle(IdleTimeout);
impl Probe for Idle {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
    fn move_later(&mut self, start: Instant) {
        self.0.touch_at(start + (FINAL - FIRST));
    }
}

#[test]
fn idle_timeout_touched_away_from_home_is_not_later_than_tokio() {
    assert_like_tokio(first_wake(|_| Idle(IdleTimeout::new(FIRST))));
}

timer_kinds! {
    enum Tcp { Rto, Keepalive }
}

struct Slots(SlotTimer<Tcp>);
impl Probe for Slots {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_expired(cx).map(|kinds| {
            assert_eq!(kinds.iter().collect::<Vec<_>>(), [Tcp::Rto]);
        })
    }
    fn move_later(&mut self, start: Instant) {
        self.0.set(Tcp::Rto, start + FINAL);
    }
}

#[test]
fn slot_timer_set_later_away_from_home_is_not_later_than_tokio() {
    assert_like_tokio(first_wake(|start| {
        let mut timer = SlotTimer::new();
        timer.set(Tcp::Rto, start + FIRST);
        timer.set(Tcp::Keepalive, start + Duration::from_secs(60));
        Slots(timer)
    }));
}

struct Queue(IdleQueue<u32>, lazy_deadline::Key);
impl Probe for Queue {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.0.poll_expired(cx).map(|expired| {
            assert_eq!(expired.into_inner(), 7);
        })
    }
    fn move_later(&mut self, start: Instant) {
        assert!(self.0.touch_at(self.1, start + (FINAL - FIRST)));
    }
}

#[test]
fn idle_queue_touched_away_from_home_is_not_later_than_tokio() {
    assert_like_tokio(first_wake(|_| {
        let mut queue = IdleQueue::new(FIRST);
        let key = queue.insert(7);
        queue.insert_with_timeout(8, Duration::from_secs(60));
        Queue(queue, key)
    }));
}

/// The queue was armed by a poll at home first, so the poll from the plain thread
/// finds its entry armed and takes the pending fast path: only the waker's change
/// can tell it that it is away now (its slow path, which also checks the runtime,
/// does not run before the touch).
#[test]
fn idle_queue_armed_at_home_then_touched_away_is_not_later_than_tokio() {
    assert_like_tokio(first_wake(|_| {
        let mut queue = IdleQueue::new(FIRST);
        let key = queue.insert(7);
        queue.insert_with_timeout(8, Duration::from_secs(60));
        let armed = queue.poll_expired(&mut Context::from_waker(Waker::noop()));
        assert!(armed.is_pending());
        Queue(queue, key)
    }));
}

/// At home the later move stays a store: the same sequence inside the owning
/// runtime registers once (tokio's reset would have re-armed).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn at_home_a_later_touch_is_still_a_store() {
    let mut idle = IdleTimeout::new(FIRST);
    let start = Instant::now();
    assert!(Pin::new(&mut idle)
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    idle.touch_at(start + (FINAL - FIRST));
    assert!(Pin::new(&mut idle)
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    assert_eq!(idle.stats().registrations, 1);
    (&mut idle).await;
    assert_eq!(Instant::now() - start, FINAL);
    assert_eq!(
        idle.stats().registrations,
        2,
        "re-armed once, when it fired"
    );
}
