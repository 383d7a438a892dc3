//! Shared helpers for the criterion suites: runtimes, registered timers, a PRNG.
#![allow(dead_code)]

pub mod peers;
pub mod record;

// Not every suite records figures; those that do call these directly.
#[allow(unused_imports)]
pub use record::{record, record_value};

use criterion::Criterion;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

lazy_deadline::timer_kinds! {
    /// The five timers of a TCP-like connection.
    pub enum Tcp {
        /// Retransmission timeout.
        Rto,
        /// Tail loss probe.
        Tlp,
        /// Zero-window probe.
        Probe0,
        /// Delayed ACK.
        DelAck,
        /// Keepalive.
        Keepalive,
    }
}

pub const TLP: Duration = Duration::from_millis(20);
pub const RTO: Duration = Duration::from_millis(200);
pub const IDLE: Duration = Duration::from_millis(100);
pub const PACKET: Duration = Duration::from_micros(1);

/// Records a mass-expiry drain for `benches/report/`: its total and its longest poll.
pub fn record_drain(key: &str, total: Duration, longest: Duration) {
    let total_ms = total.as_secs_f64() * 1e3;
    let longest_us = longest.as_secs_f64() * 1e6;
    record_value(&format!("{key}/total_ms"), total_ms);
    record_value(&format!("{key}/longest_us"), longest_us);
}

/// Criterion settings sized for a shared 2-core machine: the whole suite in minutes.
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .noise_threshold(0.05)
}

pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

pub fn multi_thread(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap()
}

/// Polls once with a no-op waker.
pub fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// A tokio `Sleep` registered with the driver, as inside a `select!` loop.
pub fn registered_sleep(deadline: Instant) -> Pin<Box<tokio::time::Sleep>> {
    let mut sleep = Box::pin(tokio::time::sleep_until(deadline));
    let _ = poll_once(sleep.as_mut());
    sleep
}

/// Our `Sleep`, registered.
pub fn registered_lazy_sleep(deadline: Instant) -> Pin<Box<lazy_deadline::Sleep>> {
    let mut sleep = Box::pin(lazy_deadline::sleep_until(deadline));
    let _ = poll_once(sleep.as_mut());
    sleep
}

/// A `SlotTimer` with a keepalive set, polled once so its entry is armed.
pub fn registered_slot_timer(base: Instant) -> lazy_deadline::SlotTimer<Tcp> {
    let mut timers = lazy_deadline::SlotTimer::<Tcp>::new();
    timers.set(Tcp::Keepalive, base + Duration::from_secs(7200));
    let _ = poll_once(std::pin::pin!(timers.expired()));
    timers
}

/// xorshift64*: deterministic, no extra dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Resident set size of this process in bytes (Linux), for bytes-per-connection.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
