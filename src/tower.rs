//! tower integration (feature `tower`): a timeout layer in the shape of tower 0.5's
//! `tower::timeout`, whose per-call deadline is our [`timeout`](crate::timeout)
//! (filed in the thread's deadline set) instead of a fresh `tokio::time::Sleep`, so a
//! call registers no runtime timer entry of its own.
//!
//! The swap is the import; the names, constructors, errors and traits are tower's:
//!
//! ```
//! use std::time::Duration;
//! // use tower::timeout::TimeoutLayer;
//! use lazy_deadline::tower::TimeoutLayer;
//!
//! let layer = TimeoutLayer::new(Duration::from_secs(30));
//! # let _: &dyn ::tower::Layer<(), Service = lazy_deadline::tower::Timeout<()>> = &layer;
//! ```
//!
//! # What is the same as tower's layer
//!
//! - The deadline is fixed in [`Service::call`] (now + the layer's duration) and the
//!   inner response future is polled first: a response that is ready wins even past
//!   the deadline.
//! - On expiry the error is tower's own [`tower::timeout::error::Elapsed`] in a
//!   [`tower::BoxError`], so code that downcasts to tower's type (`HandleErrorLayer`
//!   handlers, `err.is::<Elapsed>()`) keeps working. The inner service's errors, from
//!   `poll_ready` and from the response, are boxed and passed through as tower's are.
//! - Readiness is the inner service's: `poll_ready` is forwarded untouched.
//! - `Clone`, `Debug`, `Send` and `Sync` as tower's (the futures are `Send` when the
//!   inner future is).
//! - `call` panics outside a tokio runtime, as tower's does (through `tokio::time::sleep`).
//!
//! # What differs
//!
//! - When the inner future spent the task's cooperative budget, tower's `Sleep`
//!   returns `Pending` (and wakes the task) even past the deadline; ours still checks
//!   the deadline, as `tokio::time::timeout` does, so an elapsed call fails now rather
//!   than after a yield.
//! - The deadline is judged by the clock of the runtime the response future is first
//!   polled pending in (see [`Timeout`](crate::Timeout)'s precision notes).
//!
//! [`tower::timeout::error::Elapsed`]: ::tower::timeout::error::Elapsed
//! [`tower::BoxError`]: ::tower::BoxError

use ::tower::timeout::error::Elapsed;
use ::tower::{BoxError, Layer, Service};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

/// Applies a [`Timeout`] to the requests of a service: our counterpart of
/// `tower::timeout::TimeoutLayer`, with the same constructor.
///
/// # Examples
///
/// A service behind the layer, through tower's `ServiceBuilder`, with the expiry
/// recognised as tower's `Elapsed`:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::tower::TimeoutLayer;
/// use std::time::Duration;
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// let service = ServiceBuilder::new()
///     .layer(TimeoutLayer::new(Duration::from_secs(1)))
///     .service(service_fn(|delay_ms: u64| async move {
///         tokio::time::sleep(Duration::from_millis(delay_ms)).await;
///         Ok::<_, std::convert::Infallible>(delay_ms)
///     }));
///
/// assert_eq!(service.clone().oneshot(10).await.unwrap(), 10);
/// let err = service.oneshot(5_000).await.unwrap_err();
/// assert!(err.is::<tower::timeout::error::Elapsed>());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TimeoutLayer {
    timeout: Duration,
}

impl TimeoutLayer {
    /// A layer whose calls fail with tower's `Elapsed` after `timeout`.
    pub const fn new(timeout: Duration) -> Self {
        Self { timeout }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, service: S) -> Self::Service {
        Timeout::new(service, self.timeout)
    }
}

/// A service whose calls fail with tower's `Elapsed` when their response takes
/// longer than the timeout: our counterpart of `tower::timeout::Timeout`.
///
/// # Panics
///
/// [`Service::call`] panics outside a tokio runtime, or in one without the time
/// driver, as tower's does.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::tower::Timeout;
/// use std::time::Duration;
/// use tower::{service_fn, ServiceExt};
///
/// let slow = service_fn(|()| std::future::pending::<Result<(), std::io::Error>>());
/// let service = Timeout::new(slow, Duration::from_millis(100));
/// let start = tokio::time::Instant::now();
/// assert!(service.oneshot(()).await.unwrap_err().is::<tower::timeout::error::Elapsed>());
/// assert_eq!(start.elapsed(), Duration::from_millis(100));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Timeout<T> {
    inner: T,
    timeout: Duration,
}

impl<T> Timeout<T> {
    /// Wraps `inner` so that each call's response must come within `timeout`.
    pub const fn new(inner: T, timeout: Duration) -> Self {
        Self { inner, timeout }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// The inner service, by value.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[track_caller]
    fn call(&mut self, request: Request) -> Self::Future {
        let response = self.inner.call(request);
        ResponseFuture {
            response: crate::timeout(self.timeout, response),
        }
    }
}

pin_project! {
    /// The response future of [`Timeout`]: the inner response, or tower's
    /// `Elapsed` (boxed) if the deadline passed first. Cancel safe: dropping it
    /// drops the inner future and gives back the deadline's place in the set.
    #[derive(Debug)]
    pub struct ResponseFuture<T> {
        #[pin]
        response: crate::Timeout<T>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().response.poll(cx)) {
            Ok(answer) => answer.map_err(Into::into),
            Err(_elapsed) => Err(Elapsed::new().into()),
        })
    }
}
