//! `Interval`: a drop-in for `tokio::time::Interval` on the lazy [`Sleep`], so a
//! ticker postponed on every message (`reset`) costs a store.

use crate::sleep::{sleep_until, Sleep};
use crate::stats::Stats;
use crate::time_base::FAR_FUTURE;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// How late a tick may be polled and still count as on time (tokio's threshold):
/// past it, [`MissedTickBehavior`] decides the next tick.
const LATE: Duration = Duration::from_millis(5);

/// Ticks every `period`, the first tick at once; the lazy counterpart of
/// [`tokio::time::interval`].
///
/// Equivalent to `interval_at(Instant::now(), period)`. A `period` longer than about
/// 30 years is capped there, as tokio caps it.
///
/// # Panics
///
/// If `period` is zero (tokio's message: "`period` must be non-zero."), and like
/// tokio's `interval` outside a tokio runtime or in one without the time driver. The
/// panic points at the caller.
///
/// # Examples
///
/// A heartbeat every 10 s:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let start = Instant::now();
/// let mut heartbeat = lazy_deadline::interval(Duration::from_secs(10));
/// heartbeat.tick().await; // the first tick completes at once
/// heartbeat.tick().await;
/// assert_eq!(start.elapsed(), Duration::from_secs(10));
/// # }
/// ```
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "`period` must be non-zero.");
    // `sleep(0)`: the first tick now, by the clock of the runtime the interval
    // belongs to (a pinned thread may be in another runtime's context).
    Interval {
        delay: Box::pin(crate::sleep(Duration::ZERO)),
        period: period.min(FAR_FUTURE),
        missed_tick_behavior: MissedTickBehavior::default(),
    }
}

/// Ticks every `period`, the first tick at `start`; the lazy counterpart of
/// [`tokio::time::interval_at`].
///
/// # Panics
///
/// As [`interval`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let start = Instant::now() + Duration::from_millis(50);
/// let mut ticker = lazy_deadline::interval_at(start, Duration::from_millis(10));
/// assert_eq!(ticker.tick().await, start);
/// assert_eq!(ticker.tick().await, start + Duration::from_millis(10));
/// # }
/// ```
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "`period` must be non-zero.");
    Interval {
        delay: Box::pin(sleep_until(start)),
        period: period.min(FAR_FUTURE),
        missed_tick_behavior: MissedTickBehavior::default(),
    }
}

/// What an [`Interval`] does when a tick is polled more than 5 ms after it was due
/// (the task was busy or the runtime stalled); the same choices as
/// [`tokio::time::MissedTickBehavior`], with the same default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissedTickBehavior {
    /// Tick as fast as possible until caught up: the ticks keep the schedule
    /// `start + n * period`. The default, as in tokio.
    #[default]
    Burst,
    /// The next tick is `period` after the late one was polled: the schedule moves.
    Delay,
    /// Skip the missed ticks: the next tick is the next multiple of `period` on the
    /// original schedule.
    Skip,
}

impl MissedTickBehavior {
    /// The tick after one due at `due` and polled late, at `now`.
    fn next_tick(self, due: Instant, now: Instant, period: Duration) -> Instant {
        match self {
            Self::Burst => due + period,
            Self::Delay => now + period,
            Self::Skip => {
                // `now - due` and `period` are both under ~584 years whenever
                // `Instant` arithmetic worked, so the remainder fits in u64; tokio
                // panics (with this message) where it would not.
                let behind = (now - due).as_nanos() % period.as_nanos();
                let behind = u64::try_from(behind)
                    .expect("too much time has elapsed since the interval was supposed to tick");
                now + (period - Duration::from_nanos(behind))
            }
        }
    }
}

/// A ticker: a drop-in for [`tokio::time::Interval`] whose resets to a later instant
/// are stores.
///
/// Protocol code postpones its keepalive or heartbeat ticker on every message
/// (`interval.reset()` per packet). tokio's `Interval` resets its `Sleep` each time:
/// a CAS in the timer driver at best, the driver's lock when it moves earlier. This
/// one ticks on the crate's lazy [`Sleep`]: a reset to a later instant only records
/// it, and the runtime entry is moved when it fires at the old instant (after the
/// first tick the `Sleep` has a tokio entry of its own, made once, in the runtime the
/// interval was created in; polled from elsewhere it stays in that runtime's
/// deadline set). Ticks,
/// missed-tick handling and panics are tokio's (its own `tests/time_interval.rs`
/// runs against this type in CI).
///
/// # Precision
///
/// A tick completes when a `tokio::time::Sleep` at the same instant would: never
/// early by the clock of the runtime that created the interval, and on whole
/// milliseconds of a paused clock at the same virtual instant as tokio's `Interval`.
/// A postponed ticker whose task does not poll in between is woken once at the old
/// instant (the lazy re-check), then at the new one.
///
/// # Cancel safety
///
/// [`tick`](Interval::tick) is cancel safe: a tick is consumed only by the poll that
/// returns it, so in a `select!` loop a tick that is not returned is still there on
/// the next iteration.
///
/// # Examples
///
/// A keepalive that is sent only after 15 s without traffic:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio::sync::mpsc;
///
/// let (tx, mut rx) = mpsc::channel::<&str>(8);
/// tokio::spawn(async move {
///     for _ in 0..3 {
///         tokio::time::sleep(Duration::from_secs(10)).await;
///         tx.send("message").await.unwrap();
///     }
/// });
/// let start = tokio::time::Instant::now();
/// let mut keepalive = lazy_deadline::interval(Duration::from_secs(15));
/// keepalive.tick().await; // the first tick is immediate
/// loop {
///     tokio::select! {
///         Some(_message) = rx.recv() => keepalive.reset(), // a store
///         _ = keepalive.tick() => break, // send a keepalive
///     }
/// }
/// // 15 s after the last message, at 30 s.
/// assert_eq!(start.elapsed(), Duration::from_secs(45));
/// # }
/// ```
#[derive(Debug)]
pub struct Interval {
    /// Boxed so that `Interval` is `Unpin`, as tokio's is.
    delay: Pin<Box<Sleep>>,
    period: Duration,
    missed_tick_behavior: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick and returns the instant it was due at. The first tick
    /// completes at the interval's start.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: see the type's docs.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: `Ready` with the instant it was due at, or `Pending`
    /// with the waker registered. The waker is registered only when `Pending` is
    /// returned, as in tokio.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        ready!(self.delay.as_mut().poll(cx));
        let due = self.delay.deadline();
        let now = Instant::now();
        let next = if now > due + LATE {
            self.missed_tick_behavior.next_tick(due, now, self.period)
        } else {
            due + self.period
        };
        // As tokio's `reset_without_timer`: a store, and nothing registered (the
        // waker is registered only when `Pending` is returned); the next poll files.
        self.delay.as_mut().reset_unregistered(next);
        Poll::Ready(due)
    }

    /// Postpones the next tick to one `period` from now. A store when that is later
    /// than the armed tick, which it is whenever the ticker is postponed on traffic.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use tokio::time::Instant;
    ///
    /// let mut idle = lazy_deadline::interval(Duration::from_millis(100));
    /// idle.tick().await;
    /// let start = Instant::now();
    /// for _ in 0..5 {
    ///     tokio::time::sleep(Duration::from_millis(60)).await;
    ///     idle.reset(); // traffic: push the tick back
    /// }
    /// idle.tick().await;
    /// assert_eq!(start.elapsed(), Duration::from_millis(400));
    /// # }
    /// ```
    pub fn reset(&mut self) {
        self.delay.as_mut().reset(Instant::now() + self.period);
    }

    /// Makes the next tick due now (it completes on the next poll).
    pub fn reset_immediately(&mut self) {
        self.delay.as_mut().reset(Instant::now());
    }

    /// Moves the next tick to `after` from now (capped at about 30 years, as tokio
    /// caps it).
    pub fn reset_after(&mut self, after: Duration) {
        self.delay
            .as_mut()
            .reset(Instant::now() + after.min(FAR_FUTURE));
    }

    /// Moves the next tick to `deadline`; later ticks follow every `period` from it.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.delay.as_mut().reset(deadline);
    }

    /// What happens when ticks are missed.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed_tick_behavior
    }

    /// Sets what happens when ticks are missed.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed_tick_behavior = behavior;
    }

    /// The period (capped at about 30 years).
    pub fn period(&self) -> Duration {
        self.period
    }

    /// How much driver work the ticker has caused so far (its lazy `Sleep`'s).
    pub fn stats(&self) -> Stats {
        self.delay.stats()
    }
}
