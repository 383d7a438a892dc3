//! hyper integration (feature `hyper`): a [`hyper::rt::Timer`] whose sleeps are lazy
//! [`Sleep`]s and whose `reset` works in place.
//!
//! hyper arms a timer per connection for header reads, keep-alive and HTTP/2 pings,
//! and moves it through [`Timer::reset`](hyper::rt::Timer::reset). The trait's
//! default `reset` replaces the sleep with a new one; [`LazyTimer`] resets ours in
//! place (a store when the deadline moves later) and replaces only a sleep that is
//! not ours, so a reset is never silently dropped.
//!
//! ```
//! use lazy_deadline::hyper::LazyTimer;
//! use std::time::Duration;
//!
//! // The one-line swap on a server (`hyper_util::rt::TokioTimer::new()` before):
//! let mut http1 = hyper::server::conn::http1::Builder::new();
//! http1.timer(LazyTimer).header_read_timeout(Duration::from_secs(10));
//! ```

use crate::Sleep;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// A [`hyper::rt::Timer`] for tokio whose sleeps are lazy [`Sleep`]s.
///
/// `sleep` and `sleep_until` return a [`Sleep`]; `reset` resets one of ours in place
/// and replaces a foreign sleep with one of ours at the new deadline; `now` reads
/// tokio's clock (so a paused runtime's time is hyper's time too). Use it inside a
/// tokio runtime with the time driver enabled.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use hyper::rt::Timer;
/// use lazy_deadline::hyper::LazyTimer;
/// use std::time::Duration;
///
/// let timer = LazyTimer;
/// let start = timer.now();
/// let mut sleep = timer.sleep(Duration::from_secs(1));
/// // In place: no new sleep, and a later deadline is a store.
/// timer.reset(&mut sleep, start + Duration::from_secs(5));
/// sleep.await;
/// assert_eq!(timer.now() - start, Duration::from_secs(5));
/// # }
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct LazyTimer;

impl hyper::rt::Timer for LazyTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(crate::sleep(duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(crate::sleep_until(deadline.into()))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<Sleep>() {
            Some(ours) => ours.reset(new_deadline.into()),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// hyper's sleep interface on a lazy [`Sleep`] (it is `Send + Sync` and a
/// `Future<Output = ()>` already).
impl hyper::rt::Sleep for Sleep {}
