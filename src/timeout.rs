//! `timeout`, `timeout_at`, `Timeout`: drop-ins for tokio's per-request deadlines
//! that register no runtime timer entry of their own (see `crate::deadline_set`).

use crate::deadline_set::{Bound, FileResult, Filing};
use crate::error::Elapsed;
use crate::time_base::to_nanos;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Requires `future` to complete within `duration`; the lazy counterpart of
/// [`tokio::time::timeout`], with the same behaviour, but no runtime timer entry
/// of its own: its deadline is filed in a set that this thread keeps for the
/// current runtime, whose one entry serves every request's deadline. Like tokio's,
/// it belongs to that runtime from here on, wherever it is awaited.
///
/// The deadline is fixed here (`Instant::now() + duration`; one that overflows never
/// elapses). The future is polled first, so one that is ready gives `Ok` even past
/// the deadline. The deadline is still checked when the future spent the task's
/// cooperative budget.
///
/// # Panics
///
/// Like tokio's: outside a tokio runtime, or in a runtime without the time driver
/// (here, at the caller). A poll that finds it waiting after its runtime shut down,
/// from outside that runtime, panics with tokio's message too (see
/// [`Timeout`]'s `# Shutdown`).
///
/// # Cancel safety
///
/// Dropping the `Timeout` drops the future and gives back its place in the deadline
/// set; it never wakes the task afterwards.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio::sync::oneshot;
///
/// let (tx, rx) = oneshot::channel::<u32>();
/// tokio::spawn(async move {
///     tokio::time::sleep(Duration::from_millis(10)).await;
///     tx.send(42).unwrap();
/// });
/// // Answered in time.
/// assert_eq!(lazy_deadline::timeout(Duration::from_secs(5), rx).await, Ok(Ok(42)));
/// // Never answered: elapsed after 5 s.
/// let never = std::future::pending::<()>();
/// assert!(lazy_deadline::timeout(Duration::from_secs(5), never).await.is_err());
/// # }
/// ```
#[track_caller]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let bound = Bound::current();
    let deadline = Instant::now().checked_add(duration);
    Timeout::new(future.into_future(), deadline, bound)
}

/// Requires `future` to complete before `deadline`; the lazy counterpart of
/// [`tokio::time::timeout_at`]. See [`timeout`].
///
/// # Panics
///
/// As [`timeout`].
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// let deadline = Instant::now() + Duration::from_millis(100);
/// let slow = tokio::time::sleep(Duration::from_secs(1));
/// assert!(lazy_deadline::timeout_at(deadline, slow).await.is_err());
/// assert_eq!(Instant::now(), deadline);
/// # }
/// ```
#[track_caller]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    Timeout::new(future.into_future(), Some(deadline), Bound::current())
}

pin_project! {
    /// Future returned by [`timeout`] and [`timeout_at`]: the future's output, or
    /// [`Elapsed`] if the deadline passed first. A drop-in for
    /// [`tokio::time::Timeout`].
    ///
    /// # Precision
    ///
    /// Bound to the runtime it was made in, as tokio's is: never early by that
    /// runtime's clock (paused or not), wherever it is awaited (another task, a plain
    /// executor, a blocking thread, another or a nested runtime's `block_on`), and no
    /// later than a `tokio::time::Sleep` at the same deadline: the deadline set's
    /// entry fires at the earliest filed deadline's tick. Under a paused clock with
    /// whole-millisecond deadlines, at the same virtual instant as tokio's.
    ///
    /// # Shutdown
    ///
    /// When its runtime shuts down, a `Timeout` that is waiting is woken, as tokio's
    /// driver wakes its timers. Polled then from outside that runtime, it panics
    /// with tokio's message, as tokio's does; polled from inside it (a task or a
    /// blocking thread of the runtime while it shuts down), it carries on as a
    /// `tokio::time::Timeout` would, on a timer entry of its own.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Timeout<F> {
        #[pin]
        value: F,
        // Nanoseconds of the time base; `None`: never (an overflowing duration).
        deadline: Option<u64>,
        // The deadline set of the thread and runtime it was made in.
        bound: Bound,
        // Where the deadline is filed, from the first pending poll on.
        filing: Option<Filing>,
        // Its own tokio entry, once its runtime shut down (see `# Shutdown`).
        fallback: Option<Pin<Box<tokio::time::Sleep>>>,
    }
}

impl<F> Timeout<F> {
    fn new(value: F, deadline: Option<Instant>, bound: Bound) -> Self {
        let deadline = deadline
            .map(to_nanos)
            .filter(|&at| at < crate::core::SATURATED);
        Self {
            value,
            deadline,
            bound,
            filing: None,
            fallback: None,
        }
    }

    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.value
    }

    /// The inner future, mutably.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.value
    }

    /// The inner future, by value (its deadline is given back).
    pub fn into_inner(self) -> F {
        self.value
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.project();
        let had_budget = tokio::task::coop::has_budget_remaining();
        if let Poll::Ready(value) = me.value.poll(cx) {
            *me.filing = None; // answered: the slot goes back now
            return Poll::Ready(Ok(value));
        }
        let Some(deadline) = *me.deadline else {
            return Poll::Pending;
        };
        if !passed(deadline, me.bound, me.filing, me.fallback, cx) {
            return Poll::Pending;
        }
        *me.filing = None;
        if had_budget && !tokio::task::coop::has_budget_remaining() {
            // The future spent the budget: tokio checks its deadline outside it.
            return Poll::Ready(Err(Elapsed::new()));
        }
        ready!(tokio::task::coop::poll_proceed(cx)).made_progress();
        Poll::Ready(Err(Elapsed::new()))
    }
}

/// Whether `deadline` has passed; files it at the first pending poll.
#[inline]
fn passed(
    deadline: u64,
    bound: &Bound,
    filing: &mut Option<Filing>,
    fallback: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
) -> bool {
    if let Some(filed) = filing.as_mut().filter(|filed| !filed.is_void()) {
        return filed.poll_passed(deadline, cx.waker());
    }
    if filing.is_none() && fallback.is_none() {
        // The first pending poll: file in the set it was bound to when made, whose
        // runtime's clock judges it. Filing a deadline earlier than the set's entry
        // services the set, which reads that clock and expires what has passed, this
        // deadline included; a later one is covered by the armed entry.
        match bound.file(deadline, cx.waker()) {
            FileResult::Filed(filed) => {
                *filing = Some(filed);
                return false;
            }
            FileResult::Passed => return true,
            FileResult::Void => {}
        }
    }
    // Its runtime shut down.
    *filing = None;
    shut_down(deadline, bound, fallback, cx)
}

/// A timer whose runtime shut down, polled: tokio's panic from outside that runtime
/// (tokio's timer panics once its driver is down); from inside it (its tasks and
/// blocking threads while it shuts down), a tokio entry of its own at the deadline,
/// so that it behaves as tokio's does there, up to tokio's own panic once the driver
/// is down.
#[cold]
pub(crate) fn shut_down(
    deadline: u64,
    bound: &Bound,
    fallback: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
) -> bool {
    let entry = match fallback {
        Some(entry) => entry,
        None => {
            if crate::entry::polled_away_from(bound.runtime()) {
                panic!("A Tokio 1.x context was found, but it is being shutdown.");
            }
            fallback.insert(Box::pin(tokio::time::sleep_until(
                crate::time_base::from_nanos(deadline),
            )))
        }
    };
    // Outside the task's budget: the caller spends it on `Ready`, as for the sets.
    let entry = std::pin::pin!(tokio::task::unconstrained(entry.as_mut()));
    entry.poll(cx).is_ready()
}

impl<F: fmt::Debug> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("value", &self.value)
            .field("deadline", &self.deadline.map(crate::time_base::from_nanos))
            .finish()
    }
}
