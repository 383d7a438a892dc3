//! Real-time accuracy: lateness of 1,000 timers with deadlines 1 to 50 ms out, ours
//! against tokio, each timer reaching its final deadline the way it would in a
//! protocol stack. Real time on purpose: lateness only shows with a running clock.
//!
//! ```text
//! cargo run --release --example accuracy [-- --rounds N | --duration S]
//! ```
//!
//! Prints p50 / p99 / max lateness per flavour. Exits non-zero if any timer of ours
//! resolved before its deadline (a correctness failure); lateness is reported, not
//! asserted (shared machines stall).

// Machine-readable figures for benches/report.py (a no-op unless it asks for them).
#[path = "../benches/common/record.rs"]
mod record;

use lazy_deadline::{timer_kinds, IdleTimeout, SlotTimer};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

timer_kinds! {
    /// Two kinds: the one that fires and one that must not.
    enum Kind { Tlp, Rto }
}

const TIMERS: u64 = 1_000;

#[derive(Clone, Copy, Debug)]
enum Flavour {
    /// tokio `sleep_until(deadline)`: the baseline.
    TokioSleep,
    /// tokio `Sleep` registered at half the deadline, then reset to it.
    TokioReset,
    /// Our `Sleep` registered at half the deadline, then reset to it (a store; the
    /// entry fires early and re-arms for the remainder).
    LazySleep,
    /// `IdleTimeout` armed for half, then activity at the half-way point.
    IdleTimeout,
    /// `SlotTimer` with TLP set at half, then moved to the deadline.
    SlotTimer,
}

/// Waits for one timer of `flavour` with `deadline`; returns when it resolved.
async fn one(flavour: Flavour, start: Instant, deadline: Instant) -> Instant {
    let half = start + (deadline - start) / 2;
    match flavour {
        Flavour::TokioSleep => tokio::time::sleep_until(deadline).await,
        Flavour::TokioReset => {
            let mut sleep = Box::pin(tokio::time::sleep_until(half));
            poll_once(sleep.as_mut()).await;
            sleep.as_mut().reset(deadline);
            sleep.await;
        }
        Flavour::LazySleep => {
            let mut sleep = Box::pin(lazy_deadline::sleep_until(half));
            poll_once(sleep.as_mut()).await;
            sleep.as_mut().reset(deadline);
            sleep.await;
        }
        Flavour::IdleTimeout => {
            let mut idle = IdleTimeout::new(half - start);
            poll_once(Pin::new(&mut idle)).await;
            idle.touch_at(half);
            idle.await;
        }
        Flavour::SlotTimer => {
            let mut timers = SlotTimer::<Kind>::new();
            timers.set(Kind::Tlp, half);
            timers.set(Kind::Rto, deadline + Duration::from_millis(200));
            poll_once(Box::pin(timers.expired())).await;
            timers.set(Kind::Tlp, deadline);
            let expired = timers.expired().await;
            assert!(expired.contains(Kind::Tlp) && !expired.contains(Kind::Rto));
        }
    }
    Instant::now()
}

/// Polls a future once (registering its timer), whatever the outcome.
async fn poll_once<F: Future + Unpin>(mut fut: F) {
    poll_fn(|cx| {
        let _ = Pin::new(&mut fut).poll(cx);
        Poll::Ready(())
    })
    .await
}

/// Lateness in microseconds of `TIMERS` timers (negative: early).
async fn round(flavour: Flavour, seed: u64) -> Vec<i64> {
    let start = Instant::now() + Duration::from_millis(2);
    let mut rng = seed | 1;
    let mut set = JoinSet::new();
    for _ in 0..TIMERS {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let deadline = start + Duration::from_micros(1_000 + rng % 49_000);
        set.spawn(async move {
            let done = one(flavour, start, deadline).await;
            if done >= deadline {
                (done - deadline).as_micros() as i64
            } else {
                -((deadline - done).as_micros() as i64) - 1
            }
        });
    }
    set.join_all().await
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn arg(name: &str) -> Option<f64> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|n| n.is_finite() && *n >= 0.0)
}

fn main() {
    // `--duration S` runs as many rounds as fit in S seconds (at least one; a round
    // takes about 0.3 s); `--rounds N` fixes the count; the default is 5 rounds.
    let duration = arg("--duration").map(Duration::from_secs_f64);
    let max_rounds = match (arg("--rounds"), duration) {
        (Some(n), _) => (n as u32).max(1),
        (None, Some(_)) => u32::MAX,
        (None, None) => 5,
    };
    let started = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let flavours = [
        Flavour::TokioSleep,
        Flavour::TokioReset,
        Flavour::LazySleep,
        Flavour::IdleTimeout,
        Flavour::SlotTimer,
    ];
    // Flavours take turns within each round, so a noisy moment of the machine hits
    // them alike; p99 is taken per round and the median round reported.
    let mut samples: Vec<Vec<i64>> = vec![Vec::new(); flavours.len()];
    let mut p99s: Vec<Vec<i64>> = vec![Vec::new(); flavours.len()];
    let mut rounds = 0;
    while rounds < max_rounds
        && (rounds == 0
            || duration.is_none_or(|d| started.elapsed() + started.elapsed() / rounds < d))
    {
        let r = rounds;
        rounds += 1;
        for (i, &flavour) in flavours.iter().enumerate() {
            let mut lateness = rt.block_on(round(flavour, 0x9E37_79B9 + u64::from(r)));
            lateness.sort_unstable();
            p99s[i].push(percentile(&lateness, 0.99));
            samples[i].extend(lateness);
        }
    }
    println!(
        "lateness of {TIMERS} timers x {rounds} rounds, deadlines 1-50 ms, 2-worker runtime (µs):"
    );
    println!(
        "{:<14} {:>8} {:>8} {:>12} {:>8}",
        "flavour", "min", "p50", "p99 (median", "max"
    );
    println!(
        "{:<14} {:>8} {:>8} {:>12} {:>8}",
        "", "", "", "of rounds)", ""
    );
    record::record_value("accuracy/rounds", rounds);
    record::record_value("accuracy/timers", TIMERS);
    let mut early = 0;
    let (mut tokio_p99, mut worst_ours_p99) = (0, 0);
    for (i, &flavour) in flavours.iter().enumerate() {
        let all = &mut samples[i];
        all.sort_unstable();
        let p99 = median(p99s[i].clone());
        let key = format!("accuracy/{flavour:?}");
        for (what, value) in [
            ("min_us", all[0]),
            ("p50_us", percentile(all, 0.5)),
            ("p99_us", p99),
            ("max_us", all[all.len() - 1]),
        ] {
            record::record_value(&format!("{key}/{what}"), value);
        }
        println!(
            "{:<14} {:>8} {:>8} {:>12} {:>8}",
            format!("{flavour:?}"),
            all[0],
            percentile(all, 0.5),
            p99,
            all[all.len() - 1]
        );
        match flavour {
            Flavour::TokioSleep => tokio_p99 = p99,
            Flavour::TokioReset => {}
            _ => {
                worst_ours_p99 = worst_ours_p99.max(p99);
                early += all.iter().filter(|&&l| l < 0).count();
            }
        }
    }
    println!(
        "worst p99 of ours minus tokio's: {:+.2} ms (reported, not asserted)",
        (worst_ours_p99 - tokio_p99) as f64 / 1000.0
    );
    if early > 0 {
        eprintln!("FAIL: {early} timers of ours resolved before their deadline");
        std::process::exit(1);
    }
    println!("never early: ok");
}
