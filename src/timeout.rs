//! `timeout`, `timeout_at`, `Timeout`: drop-ins for tokio's per-request deadlines
//! that register no runtime timer entry of their own (see `crate::request_sets`).

use crate::error::Elapsed;
use crate::request_sets::{Filing, Request};
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
#[inline]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    let request = Request::current();
    let deadline = Instant::now().checked_add(duration);
    Timeout::new(future.into_future(), deadline, request)
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
#[inline]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    Timeout::new(future.into_future(), Some(deadline), Request::current())
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
        // `None`: never (an overflowing duration). Turned into the time base's
        // nanoseconds at the first pending poll: a request answered at its first poll
        // never needs them.
        deadline: Option<Instant>,
        // `deadline` in the time base's nanoseconds, once filed.
        at: u64,
        // The deadline set of the thread and runtime it was made in, and where the
        // deadline is filed there, from the first pending poll on.
        request: Request,
        // Its own tokio entry, once its runtime shut down (see `# Shutdown`).
        fallback: Option<Pin<Box<tokio::time::Sleep>>>,
    }
}

impl<F> Timeout<F> {
    #[inline]
    fn new(value: F, deadline: Option<Instant>, request: Request) -> Self {
        Self {
            value,
            deadline,
            at: crate::core::NEVER,
            request,
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
            me.request.give_back(); // answered: the slot goes back now
            return Poll::Ready(Ok(value));
        }
        let Some(deadline) = *me.deadline else {
            return Poll::Pending;
        };
        if !passed(deadline, me.at, me.request, me.fallback, cx) {
            return Poll::Pending;
        }
        me.request.give_back();
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
    deadline: Instant,
    at: &mut u64,
    request: &mut Request,
    fallback: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
) -> bool {
    if request.is_filed() && !request.is_void() {
        return request.poll_passed(*at, cx.waker());
    }
    first_pending_poll(deadline, at, request, fallback, cx)
}

/// [`passed`] before the deadline is filed, or once its runtime shut down.
#[inline(never)]
fn first_pending_poll(
    deadline: Instant,
    at: &mut u64,
    request: &mut Request,
    fallback: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
) -> bool {
    if *at == crate::core::NEVER {
        // Once: a saturated deadline is kept as such, never converted again.
        *at = to_nanos(deadline).min(crate::core::SATURATED);
    }
    let at = *at;
    if at >= crate::core::SATURATED {
        return false; // never: nothing to file, nothing to wake
    }
    if !request.is_filed() && fallback.is_none() {
        // The first pending poll: file in the set it was bound to when made, whose
        // runtime's clock judges it. Filing a deadline earlier than the set's entry
        // services the set, which reads that clock and expires what has passed, this
        // deadline included; a later one is covered by the armed entry.
        match request.file(at, cx.waker()) {
            Filing::Filed => return false,
            Filing::Passed => return true,
            Filing::Void => {}
        }
    }
    // Its runtime shut down.
    request.give_back();
    shut_down(at, request.runtime(), fallback, cx)
}

/// A timer whose runtime shut down, polled: tokio's panic from outside that runtime
/// (tokio's timer panics once its driver is down); from inside it (its tasks and
/// blocking threads while it shuts down), a tokio entry of its own at the deadline,
/// so that it behaves as tokio's does there, up to tokio's own panic once the driver
/// is down.
#[cold]
pub(crate) fn shut_down(
    deadline: u64,
    runtime: tokio::runtime::Id,
    fallback: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
) -> bool {
    let entry = match fallback {
        Some(entry) => entry,
        None => {
            if crate::entry::polled_away_from(runtime) {
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
            .field("deadline", &self.deadline)
            .finish()
    }
}
