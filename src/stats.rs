//! Counters of the work a timer asked of the runtime.

/// How much work a timer has asked of tokio's timer driver so far.
///
/// Re-arming a runtime timer entry is the cost this crate exists to avoid, so every
/// timer counts it. Reading the counters is free; keeping them costs one increment
/// on the slow path, never on the hot path.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use lazy_deadline::IdleTimeout;
/// use std::time::Duration;
///
/// let mut idle = IdleTimeout::new(Duration::from_millis(50));
/// for _ in 0..1_000 {
///     idle.touch(); // a field store: no driver work
/// }
/// (&mut idle).await;
/// assert_eq!(idle.stats().registrations, 1);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stats {
    /// Times the timer (re-)registered its runtime timer entry (`Sleep::reset` on
    /// tokio's side), including the first arming; for [`Sleep`](crate::Sleep) and
    /// [`Interval`](crate::Interval), which have no entry of their own, times they
    /// filed their deadline in the thread's deadline set.
    pub registrations: u64,
    /// Times the runtime entry fired (for `Sleep` and `Interval`: the filing
    /// expired) and the timer re-evaluated its deadline.
    pub entry_fires: u64,
}
