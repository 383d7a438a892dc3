//! `timeout`, `timeout_at`, `Timeout`: drop-ins for tokio's per-request deadlines
//! that register no runtime timer entry of their own (see `crate::request_sets`).

use crate::error::Elapsed;
use crate::request_sets::thread_sets;
use crate::request_sets::{Bound, Filing, Request};
use crate::time_base::to_nanos;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Requires `future` to complete within `duration`; the lazy counterpart of
/// [`tokio::time::timeout`], with the same behaviour. On a multi-thread runtime it
/// has no runtime timer entry of its own: its deadline is filed in a set that this
/// thread keeps for the current runtime, whose one entry serves every request's
/// deadline, so requests on several workers do not contend for tokio's one driver
/// lock. On a current-thread runtime, where nothing contends for that lock and
/// tokio's path costs less than any set, its deadline is a `tokio::time::Sleep` of
/// its own, as tokio's is. Like tokio's, it belongs to the current runtime from
/// here on, wherever it is awaited.
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
#[inline(always)]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    if thread_sets::takes_tokio_entry() {
        if let Some(deadline) = Instant::now().checked_add(duration) {
            // One struct literal, so that tokio's entry is made in its final place.
            return Timeout {
                value: future.into_future(),
                delay: Delay::Tokio {
                    entry: tokio::time::sleep_until(deadline),
                },
            };
        }
        return Timeout::new(future.into_future(), Delay::tokio(None));
    }
    // Now by its runtime's clock (a pinned thread may be in another's context).
    let (bound, now) = thread_sets::current_or_tokio_and_now();
    let delay = match bound {
        Some(bound) => Delay::in_set(now.checked_add(duration), bound),
        None => Delay::tokio(now.checked_add(duration)),
    };
    Timeout::new(future.into_future(), delay)
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
#[inline(always)]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    if thread_sets::takes_tokio_entry() {
        return Timeout {
            value: future.into_future(),
            delay: Delay::Tokio {
                entry: tokio::time::sleep_until(deadline),
            },
        };
    }
    let delay = match thread_sets::current_or_tokio() {
        Some(bound) => Delay::in_set(Some(deadline), bound),
        None => Delay::tokio(Some(deadline)),
    };
    Timeout::new(future.into_future(), delay)
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
        #[pin]
        delay: Delay,
    }
}

pin_project! {
    /// Where a `Timeout`'s deadline lives.
    #[project = DelayProj]
    enum Delay {
        // A `tokio::time::Sleep` of its own, as tokio's `Timeout` has: on a runtime
        // whose timers no second worker contends for (see `timeout`'s `# Precision`).
        Tokio {
            #[pin]
            entry: tokio::time::Sleep,
        },
        // No entry: a deadline that never comes (an overflowing duration), or the
        // tokio entry let go of once the future answered (so that it never wakes the
        // task afterwards).
        Idle,
        // Filed in the thread's deadline set for its runtime.
        InSet {
            // `None`: never (an overflowing duration). Turned into the time base's
            // nanoseconds at the first pending poll: a request answered at its first
            // poll never needs them.
            deadline: Option<Instant>,
            // `deadline` in the time base's nanoseconds, once filed.
            at: u64,
            // The deadline set of the thread and runtime it was made in, and where
            // the deadline is filed there, from the first pending poll on.
            request: Request,
            // Its own tokio entry, once its runtime shut down (see `# Shutdown`).
            fallback: Option<Pin<Box<tokio::time::Sleep>>>,
        },
    }
}

impl Delay {
    /// tokio's own entry at `deadline` (`None`: an overflowing duration, tokio's far
    /// future), bound to the current runtime as tokio's `timeout` binds its own.
    #[track_caller]
    #[inline]
    fn tokio(deadline: Option<Instant>) -> Self {
        match deadline {
            Some(deadline) => Delay::Tokio {
                entry: tokio::time::sleep_until(deadline),
            },
            None => {
                // Never: no entry, but tokio's panic outside a runtime all the same.
                drop(tokio::runtime::Handle::current());
                Delay::Idle
            }
        }
    }

    /// Filed in `bound`'s set at the first pending poll.
    #[inline]
    fn in_set(deadline: Option<Instant>, bound: Bound) -> Self {
        Delay::InSet {
            deadline,
            at: crate::core::NEVER,
            request: Request::bound_to(bound),
            fallback: None,
        }
    }
}

impl<F> Timeout<F> {
    #[inline]
    fn new(value: F, delay: Delay) -> Self {
        Self { value, delay }
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
        let mut me = self.project();
        let had_budget = tokio::task::coop::has_budget_remaining();
        if let Poll::Ready(value) = me.value.poll(cx) {
            // Answered: the deadline goes now, so that it never wakes the task
            // afterwards (tokio's entry is let go of where tokio's `Timeout` lets go
            // of it at its drop; the set's slot goes back).
            match me.delay.as_mut().project() {
                // (A flag "polled" would spare this drop at an answer at the first
                // poll, but makes `Delay` larger than tokio's `Sleep`: a `Timeout`
                // past 128 bytes is moved by `memcpy`, which costs more.)
                DelayProj::Tokio { .. } => me.delay.set(Delay::Idle),
                DelayProj::InSet { request, .. } => request.give_back(),
                DelayProj::Idle => {}
            }
            return Poll::Ready(Ok(value));
        }
        let (deadline, at, request, fallback) = match me.delay.project() {
            DelayProj::Tokio { entry } => {
                // As tokio's `Timeout`: its `Sleep` spends the budget; when the future
                // spent it, the deadline is checked outside it.
                let elapsed = if had_budget && !tokio::task::coop::has_budget_remaining() {
                    let entry = std::pin::pin!(tokio::task::unconstrained(entry));
                    entry.poll(cx)
                } else {
                    entry.poll(cx)
                };
                return elapsed.map(|()| Err(Elapsed::new()));
            }
            DelayProj::Idle => return Poll::Pending,
            DelayProj::InSet {
                deadline,
                at,
                request,
                fallback,
            } => (deadline, at, request, fallback),
        };
        let Some(deadline) = *deadline else {
            return Poll::Pending;
        };
        if !passed(deadline, at, request, fallback, cx) {
            return Poll::Pending;
        }
        request.give_back();
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
            .field(
                "deadline",
                &match &self.delay {
                    Delay::Tokio { entry, .. } => Some(entry.deadline()),
                    Delay::Idle => None,
                    Delay::InSet { deadline, .. } => *deadline,
                },
            )
            .finish()
    }
}
