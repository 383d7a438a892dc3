//! Error types of the per-request deadlines, as `tokio::time::error`.

use std::fmt;

/// Returned by [`Timeout`](crate::Timeout) when its deadline elapsed before the
/// future completed: our counterpart of `tokio::time::error::Elapsed` (tokio's cannot
/// be built outside tokio). It converts into `std::io::Error` with kind `TimedOut`,
/// as tokio's does.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::error::Elapsed;
/// use std::time::Duration;
///
/// let result = lazy_deadline::timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
/// let elapsed: Elapsed = result.unwrap_err();
/// assert_eq!(elapsed.to_string(), "deadline has elapsed");
/// let io: std::io::Error = elapsed.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed(());

impl Elapsed {
    pub(crate) const fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(elapsed: Elapsed) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed)
    }
}
