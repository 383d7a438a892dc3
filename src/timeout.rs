//! `timeout`, `timeout_at`, `Timeout`: drop-ins for tokio's per-request deadlines
//! that register no runtime timer entry of their own (see `crate::deadline_set`).

use crate::deadline_set::{DeadlineSet, Filing};
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
/// runtime, whose one entry serves every request's deadline.
///
/// The deadline is fixed here (`Instant::now() + duration`; one that overflows never
/// elapses). The future is polled first, so one that is ready gives `Ok` even past
/// the deadline. The deadline is still checked when the future spent the task's
/// cooperative budget.
///
/// # Panics
///
/// Like tokio's: outside a tokio runtime (here, or at the first poll for a timeout
/// made outside any task), or, at its first pending poll, in a runtime without the
/// time driver.
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
    assert_in_runtime();
    let deadline = Instant::now().checked_add(duration);
    Timeout::new(future.into_future(), deadline)
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
    assert_in_runtime();
    Timeout::new(future.into_future(), Some(deadline))
}

/// tokio's panic outside a runtime, where it is cheap to tell: inside a task there
/// is always a runtime (one TLS read); elsewhere (a `block_on` future, a plain
/// thread) ask for the handle.
#[track_caller]
fn assert_in_runtime() {
    if tokio::task::try_id().is_none() {
        drop(tokio::runtime::Handle::current());
    }
}

pin_project! {
    /// Future returned by [`timeout`] and [`timeout_at`]: the future's output, or
    /// [`Elapsed`] if the deadline passed first. A drop-in for
    /// [`tokio::time::Timeout`].
    ///
    /// # Precision
    ///
    /// Never early by the clock of the runtime it is first polled pending in (in
    /// practice the runtime it was made in; tokio's is bound to the latter), and no
    /// later than a `tokio::time::Sleep` at the same deadline: the deadline set's
    /// entry fires at the earliest filed deadline's tick. Under a paused clock with
    /// whole-millisecond deadlines, at the same virtual instant as tokio's.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct Timeout<F> {
        #[pin]
        value: F,
        // Nanoseconds of the time base; `None`: never (an overflowing duration).
        deadline: Option<u64>,
        // Where the deadline is filed, from the first pending poll on.
        filing: Option<Filing>,
    }
}

impl<F> Timeout<F> {
    fn new(value: F, deadline: Option<Instant>) -> Self {
        let deadline = deadline
            .map(to_nanos)
            .filter(|&at| at < crate::core::SATURATED);
        Self {
            value,
            deadline,
            filing: None,
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
        if !passed(deadline, me.filing, cx) {
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
fn passed(deadline: u64, filing: &mut Option<Filing>, cx: &mut Context<'_>) -> bool {
    if let Some(filed) = filing.as_mut().filter(|filed| !filed.is_void()) {
        return filed.poll_passed(deadline, cx.waker());
    }
    // The first pending poll (or the runtime it was filed in shut down): this
    // thread's set for the current runtime, whose clock judges it from now on.
    // Filing a deadline earlier than the set's entry services the set, which reads
    // that clock and expires what has passed, this deadline included; a later one
    // is covered by the armed entry. Either way no clock read of our own here.
    let filed = DeadlineSet::current().file_in(deadline, cx.waker());
    let passed = filed.has_passed(deadline);
    *filing = Some(filed);
    passed
}

impl<F: fmt::Debug> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("value", &self.value)
            .field("deadline", &self.deadline.map(crate::time_base::from_nanos))
            .finish()
    }
}
