//! Lazily re-armed timers for tokio protocol stacks.
//!
//! Re-arming a timer on every packet is one of the classic hot-path costs of network
//! stacks. Linux SCTP and TCP both hit it and fixed it the same way: record a
//! timestamp on the hot path, leave the one timer armed, and re-evaluate when it
//! fires. This crate brings that technique to tokio: **the hot path never touches the
//! runtime's timer wheel.** A packet, an ACK, a read or a write stores a timestamp;
//! the one runtime timer entry is re-armed when it fires and finds that the deadline
//! moved, or at once when a deadline moves *earlier* than what is armed.
//!
//! | type | for | hot path |
//! |---|---|---|
//! | [`Sleep`] ([`sleep`], [`sleep_until`]) | drop-in for `tokio::time::Sleep` | `reset` later: a field store |
//! | [`Interval`] ([`interval`], [`interval_at`], [`MissedTickBehavior`]) | drop-in for `tokio::time::Interval`: keepalive and heartbeat tickers | `reset` later: a field store |
//! | [`timeout`], [`timeout_at`] ([`Timeout`], [`error::Elapsed`]) | drop-in for `tokio::time::timeout`: a deadline per request | no runtime timer entry per request: filed in the thread's deadline set |
//! | [`IdleTimeout`] + [`ActivityHandle`] | idle/keepalive/heartbeat timeouts | `touch_at`: a field store; from a handle one `fetch_max` |
//! | [`SlotTimer`] + [`SlotHandle`] ([`timer_kinds!`]) | RTO/TLP/PROBE0/delayed-ACK/keepalive on one entry | `set` later: a store and a compare |
//! | [`IdleQueue`] ([`Key`], [`Expired`]) | many idle timeouts owned by one task: sessions, pooled connections | `touch_at`: a generation check and a store |
//! | [`KeyHandle`] ([`IdleQueue::handle`]) | touching an [`IdleQueue`] key from the task that sees its traffic | `touch_at`: one atomic RMW on that key's word |
//! | [`DelayQueue`] ([`delay_queue::Key`], [`delay_queue::Expired`]) | drop-in for tokio-util's `DelayQueue` | `reset_at` later: a generation check and a store |
//! | [`DelayMap`] | deadlines keyed by your own key, in place of a `HashMap` + `DelayQueue` pair | `reset` later: one hash lookup and a store |
//!
//! [`time`] mirrors `tokio::time` item for item (ours where the crate has a drop-in,
//! tokio's re-exported elsewhere), so one line swaps a codebase:
//! `use tokio::time::{...}` becomes `use lazy_deadline::time::{...}`.
//!
//! The crate builds on tokio 1.49 and later; CI runs its tests, tokio's own
//! `tokio::time` suites and canaries of the tokio behaviour it relies on beyond
//! tokio's docs on tokio 1.49.0 and on the newest release it locks.
//!
//! # Guarantees
//!
//! - **Never early**: nothing resolves before its deadline by the clock of the
//!   runtime that owns the timer's entry (paused clock included), also when the timer
//!   is polled from another runtime or a plain executor: the entry, a
//!   `tokio::time::Sleep`, is the witness that time has passed ([`Sleep`],
//!   [`Interval`] and [`timeout`] share one per thread and runtime, whose set also
//!   reads that runtime's clock on its own threads, a whole tick behind).
//! - **Not later than tokio**: every timer resolves no later than a
//!   `tokio::time::Sleep` with the same final deadline; under `tokio::time::pause()`
//!   with whole-millisecond deadlines, at the same virtual instant.
//! - **Earlier works at once**, from the owner or a handle on another thread.
//! - **A good tokio citizen**: no unbounded loop inside a poll, and ready paths spend
//!   the task's cooperative budget where tokio's `Sleep::poll` does, so a loop over a
//!   ready timer still lets the other tasks run.
//! - **Cheap to poll while not due**: [`IdleTimeout`], [`SlotTimer`] and [`IdleQueue`]
//!   poll their runtime entry with a waker of their own, so the entry's fire is
//!   recorded in the timer and a pending poll (a `select!` loop's turn) is only the
//!   timer's own state check, cheaper than polling a `tokio::time::Sleep`. A fresh
//!   lazy [`Sleep`] has no entry of its own: a pending poll reads its deadline set's
//!   passed mark and compares the waker it filed; one that moved to an entry of its
//!   own (reset earlier across ticks, or after it completed) compares the waker that
//!   entry holds and reads whether it fired, without calling into tokio.
//! - **Bad input saturates like tokio**: `Duration::MAX`, deadlines in the past, far
//!   future instants and zero timeouts never panic or overflow; a saturated clock or
//!   deadline never turns "far future" into "due". The panics are tokio's own (no
//!   runtime, or no time driver; reported at the caller's location), and these,
//!   each documented where it can happen: `Vec`'s capacity overflow when a
//!   `with_capacity` or `reserve` asks for more than memory can address; a keyed
//!   queue asked to hold more than `u32::MAX - 1` entries at once; a hand-written
//!   [`TimerKind`] whose `COUNT` is outside `1..=64` or whose `index` is not below
//!   it; and [`DelayQueue`]'s `remove`, `reset_at`, `reset` and `deadline` on a key
//!   that is not in the queue, as tokio-util's do.
//! - **A lifecycle as tokio's**: a timer belongs to the runtime it is made in and can be
//!   awaited anywhere, judged by that runtime's clock; when the runtime shuts down,
//!   whatever waits on its timers is woken (and a poll from outside it gets tokio's
//!   panic), `drop(runtime)` never waits on them, and nothing the crate keeps holds a
//!   gone runtime (its driver, its file descriptors).
//! - No `unsafe` code.
//!
//! The whole list, with what every kind of bad input does and how the tests check
//! it, is the [`guarantees`] page.
//!
//! # Features
//!
//! All off by default; the default build depends on tokio, futures,
//! pin-project-lite and hashbrown only.
//!
//! - `quinn`: [`quinn::LazyRuntime`](crate::quinn), a `quinn::Runtime` whose
//!   connection timers are lazy [`Sleep`]s (`Arc::new(LazyRuntime)` where
//!   `Arc::new(quinn::TokioRuntime)` was), and `quinn::AsyncTimer` for [`Sleep`].
//! - `hyper`: [`hyper::LazyTimer`](crate::hyper), a `hyper::rt::Timer` with an
//!   in-place `reset` (`.timer(LazyTimer)` where `.timer(TokioTimer::new())` was), and
//!   `hyper::rt::Sleep` for [`Sleep`].
//! - `tower`: [`tower::TimeoutLayer`](crate::tower), tower 0.5's timeout layer whose
//!   per-call deadline is our [`timeout`] (`lazy_deadline::tower::TimeoutLayer::new(d)`
//!   where `tower::timeout::TimeoutLayer::new(d)` was); the error is tower's own
//!   `Elapsed`.
//!
//! # Pinning a runtime's threads
//!
//! Each timer looks its runtime up when it is made, as tokio's does (a reference
//! count that every worker of a multi-thread runtime writes). A runtime built with
//! `.on_thread_start(lazy_deadline::on_thread_start)` spares the timers made on its own
//! threads that lookup; [`on_thread_start`] says what else that changes.
//!
//! # Examples
//!
//! [`Sleep`] as a drop-in, reset on every message:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::time::Duration;
//! use tokio::time::Instant;
//!
//! let deadline = lazy_deadline::sleep(Duration::from_millis(500));
//! tokio::pin!(deadline);
//! for _message in 0..1_000 {
//!     // Later than what is armed: a store, no driver work.
//!     deadline.as_mut().reset(Instant::now() + Duration::from_millis(500));
//! }
//! deadline.as_mut().await;
//! assert!(deadline.stats().registrations <= 2);
//! # }
//! ```
//!
//! [`timeout`] as a drop-in, a deadline per request:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use lazy_deadline::error::Elapsed;
//! use std::time::Duration;
//!
//! async fn call(n: u64) -> u64 {
//!     tokio::time::sleep(Duration::from_millis(n)).await;
//!     n
//! }
//! // Each pending request files its deadline in this thread's set for the runtime:
//! // no runtime timer entry (and no lock all workers share) per request.
//! assert_eq!(lazy_deadline::timeout(Duration::from_millis(50), call(10)).await, Ok(10));
//! let late: Result<u64, Elapsed> = lazy_deadline::timeout(Duration::from_millis(50), call(90)).await;
//! assert!(late.is_err());
//! # }
//! ```
//!
//! [`Interval`] as a drop-in, a keepalive ticker postponed on every message:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::time::Duration;
//!
//! let mut keepalive = lazy_deadline::interval(Duration::from_secs(15));
//! keepalive.tick().await; // the first tick completes at once
//! for _message in 0..1_000 {
//!     keepalive.reset(); // later than the armed tick: a store
//! }
//! keepalive.tick().await; // 15 s after the last message
//! # }
//! ```
//!
//! [`IdleTimeout`] with activity from another task:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use lazy_deadline::IdleTimeout;
//! use std::time::Duration;
//!
//! let mut idle = IdleTimeout::new(Duration::from_secs(30));
//! let reader = idle.handle();
//! tokio::spawn(async move {
//!     for _ in 0..5 {
//!         tokio::time::sleep(Duration::from_secs(1)).await;
//!         reader.touch();
//!     }
//! });
//! (&mut idle).await; // resolves 30 s after the last touch
//! assert!(idle.is_elapsed());
//! # }
//! ```
//!
//! [`SlotTimer`] carrying a TCP connection's timers on one runtime entry:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use lazy_deadline::{timer_kinds, SlotTimer};
//! use std::time::Duration;
//! use tokio::time::Instant;
//!
//! timer_kinds! {
//!     /// The timers of one connection.
//!     pub enum Tcp { Rto, Tlp, Probe0, DelAck, Keepalive }
//! }
//!
//! let mut timers = SlotTimer::<Tcp>::new();
//! let start = Instant::now();
//! for _segment in 0..100 {
//!     // One clock reading per segment; both sets are stores.
//!     let mut batch = timers.batch_at(Instant::now());
//!     batch.set_after(Tcp::Tlp, Duration::from_millis(20));
//!     batch.set_after(Tcp::Rto, Duration::from_millis(200));
//! }
//! assert_eq!(timers.expired().await.iter().collect::<Vec<_>>(), [Tcp::Tlp]);
//! assert_eq!(start.elapsed(), Duration::from_millis(20));
//! # }
//! ```
//!
//! [`DelayQueue`] where tokio-util's was, with a reset per message:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use futures::StreamExt;
//! use lazy_deadline::{delay_queue, DelayQueue};
//! use std::time::Duration;
//!
//! let mut queue = DelayQueue::new();
//! let key: delay_queue::Key = queue.insert("conn-1", Duration::from_secs(5));
//! for _message in 0..1_000 {
//!     queue.reset(&key, Duration::from_secs(5)); // later: a store
//! }
//! assert_eq!(queue.next().await.unwrap().into_inner(), "conn-1");
//! assert!(queue.next().await.is_none()); // empty: the stream ends
//! # }
//! ```
//!
//! [`DelayMap`] keyed by a peer id:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use lazy_deadline::DelayMap;
//! use std::time::Duration;
//!
//! let mut peers = DelayMap::new();
//! peers.insert(42u64, "peer-42", Duration::from_secs(10));
//! assert!(peers.reset(&42, Duration::from_secs(20)));
//! assert!(!peers.reset(&7, Duration::from_secs(20))); // unknown: false, no panic
//! assert_eq!(peers.expired().await, Some((42, "peer-42")));
//! # }
//! ```
//!
//! [`KeyHandle`]: an [`IdleQueue`] key touched from another task:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use lazy_deadline::IdleQueue;
//! use std::time::Duration;
//!
//! let mut sessions = IdleQueue::new(Duration::from_secs(30));
//! let key = sessions.insert("session");
//! let handle = sessions.handle(key).unwrap();
//! tokio::spawn(async move { assert!(handle.touch()) }).await.unwrap();
//! assert!(sessions.contains(key));
//! # }
//! ```
//!
//! [`IdleQueue`] holding a session table in one task, touched per datagram:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use lazy_deadline::IdleQueue;
//! use std::time::Duration;
//! use tokio::time::Instant;
//!
//! let mut sessions = IdleQueue::new(Duration::from_secs(30));
//! let busy = sessions.insert("10.0.0.1:5000");
//! let quiet = sessions.insert("10.0.0.2:5000");
//! for _ in 0..40 {
//!     tokio::time::sleep(Duration::from_secs(1)).await;
//!     sessions.touch_at(busy, Instant::now()); // a store: no timer work per datagram
//! }
//! let expired = sessions.expired().await; // the quiet one, 30 s after its insert
//! assert_eq!(expired.key(), quiet);
//! assert_eq!(expired.into_inner(), "10.0.0.2:5000");
//! assert!(sessions.contains(busy));
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(lazy_deadline_loom)]
pub mod core;
#[cfg(not(lazy_deadline_loom))]
mod core;

mod delay_map;
pub mod delay_queue;
mod entry;
pub mod error;
#[cfg(feature = "hyper")]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub mod hyper;
mod idle_queue;
mod idle_timeout;
mod interval;
mod key_handle;
mod kind;
mod memory;
#[cfg(feature = "quinn")]
#[cfg_attr(docsrs, doc(cfg(feature = "quinn")))]
pub mod quinn;
mod request_sets;
mod runtime_hooks;
mod sleep;
mod slot_timer;
mod stats;
#[cfg(lazy_deadline_loom)]
pub mod sync;
#[cfg(not(lazy_deadline_loom))]
mod sync;
pub mod time;
mod time_base;
mod timeout;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;

pub use delay_map::DelayMap;
pub use delay_queue::DelayQueue;
pub use idle_queue::{Expired, IdleQueue, Key};
pub use idle_timeout::{ActivityHandle, IdleTimeout};
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use key_handle::KeyHandle;
pub use kind::{Iter as KindSetIter, KindSet, TimerKind};
pub use runtime_hooks::on_thread_start;
pub use sleep::{sleep, sleep_until, Sleep};
pub use slot_timer::{SlotBatch, SlotHandle, SlotTimer};
pub use stats::Stats;
pub use timeout::{timeout, timeout_at, Timeout};

/// Not part of the API: hooks for the crate's own tests and benches.
#[doc(hidden)]
pub mod __private {
    pub use crate::request_sets::thread_sets::prefer_sets;
}

// The guarantees, the bad-input table and how the tests check them: one page in the
// repository (docs/guarantees.md) and on docs.rs, where the README does not reach.
#[doc = include_str!("../docs/guarantees.md")]
pub mod guarantees {}

/// The README's Rust example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
