//! `on_thread_start`: an opt-in hook for a runtime's builder that spares the timers
//! made on the runtime's own threads their runtime lookup.

/// A hook for [`tokio::runtime::Builder::on_thread_start`]: the threads the runtime
/// starts (its workers and blocking threads) are pinned to it, so that a timer made
/// on them ([`sleep`](crate::sleep), [`timeout`](crate::timeout),
/// [`interval`](crate::interval), ...) finds its deadline set with one thread-local
/// read, instead of looking the current runtime up (tokio's `Handle::current`, a
/// reference count that every worker touches: a contended cache line on a busy
/// multi-thread runtime).
///
/// What it changes, and when to leave it out: on a pinned thread, a timer belongs to
/// the thread's runtime even inside another runtime's context (another runtime's
/// `Handle::enter` or `block_on` on a blocking thread of this one), where an unpinned
/// timer, like tokio's, belongs to the runtime of that context. With real clocks the
/// two runtimes' clocks agree and nothing differs but which driver fires the timer;
/// with a paused clock in either runtime, the pinned thread's runtime judges it, and
/// the duration of a `sleep` or `timeout`, and an `interval`'s first tick, count from
/// that runtime's clock, not from the other context's (`tokio::time::Instant::now()`
/// there reads the other runtime's clock: an `Instant` computed from it, as for
/// `sleep_until`, is the caller's). What reads "now" later still reads the context's
/// clock there: an `Interval`'s missed-tick handling and its `reset`s,
/// `Sleep::is_elapsed` while its deadline moved later, and the hyper and quinn
/// adapters' `now()`.
///
/// A thread that outlives its runtime (a blocking thread after
/// `shutdown_background` or `shutdown_timeout`, carrying on in a runtime of its own or
/// in another's `Handle::enter`) lets go of the pin at its first timer after the
/// runtime is gone: that timer, and the thread's timers from then on, look the
/// current runtime up as on a thread without the hook, and the gone runtime's handle
/// (its driver, its file descriptors) is dropped then. While the runtime is shutting
/// down but its tasks are not yet dropped, a pinned thread's timers are still that
/// runtime's (woken at its shutdown, as its other timers are).
///
/// A current-thread runtime starts no thread for its `block_on`, so the hook only
/// covers its blocking threads.
///
/// # Panics
///
/// Outside a runtime, with tokio's message (as a hook of a runtime's builder, never).
/// A runtime without the time driver is no error here: its threads' timers panic when
/// they are made, with tokio's message, as they would without the hook.
///
/// # Examples
///
/// ```
/// let runtime = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(2)
///     .enable_all()
///     .on_thread_start(lazy_deadline::on_thread_start)
///     .build()
///     .unwrap();
/// runtime.block_on(async {
///     tokio::spawn(async {
///         // Made on a worker: no runtime lookup.
///         let answered = lazy_deadline::timeout(std::time::Duration::from_secs(5), async { 7 });
///         assert_eq!(answered.await, Ok(7));
///     })
///     .await
///     .unwrap();
/// });
/// ```
#[track_caller]
pub fn on_thread_start() {
    crate::request_sets::pin_to_current();
}
