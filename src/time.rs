//! `tokio::time`, item for item, with this crate's drop-ins where it has them: one
//! `use` line swaps a codebase.
//!
//! ```
//! // use tokio::time::{self, sleep, timeout, Duration, Instant};
//! use lazy_deadline::time::{self, sleep, timeout, Duration, Instant};
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let start = Instant::now();
//! sleep(Duration::from_millis(10)).await;
//! assert!(timeout(Duration::from_millis(5), std::future::pending::<()>()).await.is_err());
//! let mut ticker = time::interval(Duration::from_millis(10));
//! ticker.tick().await;
//! assert_eq!(start.elapsed(), Duration::from_millis(15));
//! # }
//! ```
//!
//! | item | here |
//! |---|---|
//! | [`sleep`], [`sleep_until`], [`Sleep`] | ours: no runtime timer entry per fresh `sleep`; a later reset is a store |
//! | [`timeout`], [`timeout_at`], [`Timeout`] | ours: no runtime timer entry per request |
//! | [`interval`], [`interval_at`], [`Interval`], [`MissedTickBehavior`] | ours: a later reset is a store |
//! | [`error::Elapsed`] | ours (tokio's cannot be built outside tokio): `Display`, `Error`, into `std::io::Error` as tokio's |
//! | [`error::Error`] | tokio's, re-exported (the timer driver's errors) |
//! | [`Instant`], [`Duration`] | tokio's and std's, re-exported: the same types |
//! | `pause`, `resume`, `advance` | tokio's, re-exported under this crate's `test-util` feature (which turns on tokio's): ours follow tokio's paused clock |
//!
//! A test (`tests/time_module.rs`) reads the `tokio::time` of the tokio this crate is
//! built with and checks that every public item of it has its counterpart here, so a
//! new tokio item cannot be missed silently.

pub use crate::interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use crate::sleep::{sleep, sleep_until, Sleep};
pub use crate::timeout::{timeout, timeout_at, Timeout};
pub use tokio::time::{Duration, Instant};

#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub use tokio::time::{advance, pause, resume};

/// `tokio::time::error`: our [`Elapsed`](error::Elapsed), tokio's
/// [`Error`](error::Error).
pub mod error {
    pub use crate::error::Elapsed;
    pub use tokio::time::error::Error;
}
