//! The headline table: lazy-deadline against tokio::time, side by side, same process.
//!
//! ```text
//! cargo run --release --example compare            # full run, well under a minute
//! cargo run --release --example compare -- --quick # CI smoke run, a few seconds
//! cargo run --release --example compare -- --multi-thread # hot paths on a 2-worker runtime
//! ```
//!
//! Each row times a plain loop of the real operation for ours and for the peer,
//! alternating the two in every run, and prints the median ns/op of the runs. These
//! are wall-clock figures on a shared machine: read ratios, not absolutes. The
//! criterion suite in `benches/` has the statistics.

// The criterion suites' helpers and hand-written peers, so both measure the same code.
#[path = "../benches/common/mod.rs"]
mod common;

use common::peers::{packets, KernelStyle, QuinnStyle, SlotBatch, TwoSleeps};
use common::{poll_once, registered_slot_timer, Tcp, IDLE, PACKET, RTO, TLP};
use lazy_deadline::{IdleTimeout, SlotTimer};
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

struct Bench {
    runs: usize,
    scale: u64,
    rows: Vec<Row>,
}

struct Row {
    section: &'static str,
    workload: &'static str,
    peer: &'static str,
    peer_ns: f64,
    ours: &'static str,
    ours_ns: f64,
    goal: &'static str,
}

impl Bench {
    /// Times `peer` and `ours` (each runs `iters` operations) alternately, `runs`
    /// times, and records the median ns/op of each.
    #[allow(clippy::too_many_arguments)]
    fn pair(
        &mut self,
        section: &'static str,
        workload: &'static str,
        iters: u64,
        (peer, mut peer_fn): (&'static str, impl FnMut(u64)),
        (ours, mut ours_fn): (&'static str, impl FnMut(u64)),
        goal: &'static str,
    ) {
        let iters = (iters / self.scale).max(1_000);
        peer_fn(iters / 10); // warm up caches and lazily built state
        ours_fn(iters / 10);
        let (mut peer_runs, mut ours_runs) = (Vec::new(), Vec::new());
        for _ in 0..self.runs {
            peer_runs.push(time_ns(iters, &mut peer_fn));
            ours_runs.push(time_ns(iters, &mut ours_fn));
        }
        self.rows.push(Row {
            section,
            workload,
            peer,
            peer_ns: median(peer_runs),
            ours,
            ours_ns: median(ours_runs),
            goal,
        });
    }

    fn print(&self) {
        println!(
            "{:<44} {:<26} {:>9} {:<28} {:>9} {:>8}  goal",
            "workload", "peer", "ns/op", "ours", "ns/op", "ratio"
        );
        let mut section = "";
        for row in &self.rows {
            if row.section != section {
                section = row.section;
                println!("-- {section}");
            }
            println!(
                "{:<44} {:<26} {:>9.1} {:<28} {:>9.1} {:>7.1}x  {}",
                row.workload,
                row.peer,
                row.peer_ns,
                row.ours,
                row.ours_ns,
                row.peer_ns / row.ours_ns,
                row.goal
            );
        }
    }
}

fn time_ns(iters: u64, f: &mut impl FnMut(u64)) -> f64 {
    let start = std::time::Instant::now();
    f(iters);
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut bench = Bench {
        runs: if quick { 5 } else { 9 },
        scale: if quick { 20 } else { 1 },
        rows: Vec::new(),
    };
    let started = std::time::Instant::now();
    let multi = std::env::args().any(|a| a == "--multi-thread");
    let rt = if multi {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
    }
    .unwrap();
    rt.block_on(async { hot_paths(&mut bench) });
    bench.print();
    println!();
    driver_work();
    memory();
    println!(
        "\n{} runtime; {} runs per row, median; total {:.1} s{}",
        if multi {
            "multi-thread (2 workers)"
        } else {
            "current-thread"
        },
        bench.runs,
        started.elapsed().as_secs_f64(),
        if quick { " (quick mode)" } else { "" }
    );
}

/// Rows timed with a running clock inside a current-thread runtime. Deadlines are
/// computed from a base instant plus an offset per "packet", the same for both sides,
/// so no row pays for a clock read.
fn hot_paths(bench: &mut Bench) {
    let base = Instant::now();

    // 1. Reset to a later deadline.
    let theirs = tokio::time::sleep_until(base + Duration::from_secs(1));
    let ours = lazy_deadline::sleep_until(base + Duration::from_secs(1));
    tokio::pin!(theirs, ours);
    let _ = poll_once(theirs.as_mut());
    let _ = poll_once(ours.as_mut());
    let mut at_t = base + Duration::from_secs(1);
    let mut at_o = at_t;
    bench.pair(
        "Sleep::reset",
        "reset to a later deadline",
        2_000_000,
        ("tokio Sleep::reset", |n| {
            for _ in 0..n {
                at_t += Duration::from_nanos(100);
                theirs.as_mut().reset(black_box(at_t));
            }
        }),
        ("lazy Sleep::reset", |n| {
            for _ in 0..n {
                at_o += Duration::from_nanos(100);
                ours.as_mut().reset(black_box(at_o));
            }
        }),
        ">= 3x",
    );

    // 2. Alternating two deadlines 180 ms apart (TLP-then-RTO on one timer).
    let mut now_t = base;
    let mut now_o = base;
    bench.pair(
        "Sleep::reset",
        "reset alternating 20 ms / 200 ms",
        500_000,
        ("tokio Sleep::reset", |n| {
            for i in 0..n {
                now_t += PACKET;
                let d = if i % 2 == 0 { TLP } else { RTO };
                theirs.as_mut().reset(black_box(now_t + d));
            }
        }),
        ("lazy Sleep::reset", |n| {
            for i in 0..n {
                now_o += PACKET;
                let d = if i % 2 == 0 { TLP } else { RTO };
                ours.as_mut().reset(black_box(now_o + d));
            }
        }),
        "-",
    );

    // 3. Earlier deadlines: the lazy path cannot help, ours pays tokio's cost.
    let far = base + Duration::from_secs(3600);
    let earlier_t = tokio::time::sleep_until(far);
    let earlier_o = lazy_deadline::sleep_until(far);
    tokio::pin!(earlier_t, earlier_o);
    let _ = poll_once(earlier_t.as_mut());
    let _ = poll_once(earlier_o.as_mut());
    let (mut back_t, mut back_o) = (far, far);
    bench.pair(
        "Sleep::reset",
        "reset to an earlier deadline (1 ms earlier)",
        200_000,
        ("tokio Sleep::reset", |n| {
            for _ in 0..n {
                back_t -= Duration::from_millis(1);
                earlier_t.as_mut().reset(black_box(back_t));
            }
        }),
        ("lazy Sleep::reset", |n| {
            for _ in 0..n {
                back_o -= Duration::from_millis(1);
                earlier_o.as_mut().reset(black_box(back_o));
            }
        }),
        "~1x (no lazy gain)",
    );

    // 4. Idle timeout per packet.
    let idle_tokio = tokio::time::sleep_until(base + IDLE);
    tokio::pin!(idle_tokio);
    let _ = poll_once(idle_tokio.as_mut());
    let mut idle = IdleTimeout::new(IDLE);
    let _ = poll_once(Pin::new(&mut idle));
    let handle = idle.handle();
    let (mut now_t, mut now_o, mut now_h) = (base, base, base);
    bench.pair(
        "activity per packet",
        "idle timeout, one packet",
        2_000_000,
        ("tokio reset(now + t)", |n| {
            for _ in 0..n {
                now_t += PACKET;
                idle_tokio.as_mut().reset(black_box(now_t) + IDLE);
            }
        }),
        ("IdleTimeout::touch_at(now)", |n| {
            for _ in 0..n {
                now_o += PACKET;
                idle.touch_at(black_box(now_o));
            }
        }),
        ">= 3x",
    );
    bench.pair(
        "activity per packet",
        "idle timeout, one packet, from a handle",
        2_000_000,
        ("tokio reset(now + t)", |n| {
            for _ in 0..n {
                now_t += PACKET;
                idle_tokio.as_mut().reset(black_box(now_t) + IDLE);
            }
        }),
        ("ActivityHandle::touch_at", |n| {
            for _ in 0..n {
                now_h += PACKET;
                handle.touch_at(black_box(now_h));
            }
        }),
        "-",
    );

    // 5. TCP per packet: arm TLP (now + 20 ms) and RTO (now + 200 ms). Every row
    // gets fresh, registered timers and its own packet clock.
    // The peers are in benches/common/peers.rs, shared with the criterion suite.
    let kernel_style = || packets(base, KernelStyle::new(base));
    let two_sleeps = || packets(base, TwoSleeps::new(base));
    let quinn_style = || packets(base, QuinnStyle::new(base));
    let slot_batch = || packets(base, SlotBatch::new(base));
    let section = "TCP per packet (TLP + RTO)";
    let ours = "SlotTimer batch_at(now) x2";
    bench.pair(
        section,
        "one packet",
        300_000,
        ("kernel-style: 1 Sleep, 2 resets", kernel_style()),
        (ours, slot_batch()),
        ">= 50x",
    );
    bench.pair(
        section,
        "one packet",
        2_000_000,
        ("two Sleeps, each reset later", two_sleeps()),
        (ours, slot_batch()),
        ">= 3x",
    );
    bench.pair(
        section,
        "one packet",
        2_000_000,
        ("quinn-style table + 1 Sleep", quinn_style()),
        (ours, slot_batch()),
        ">= 3x",
    );
    let (mut timers, mut now) = (registered_slot_timer(base), base);
    bench.pair(
        section,
        "one packet, Instant deadlines",
        2_000_000,
        ("quinn-style table + 1 Sleep", quinn_style()),
        ("SlotTimer::set(now + d) x2", move |n| {
            for _ in 0..n {
                now += PACKET;
                let at = black_box(now);
                timers.set(Tcp::Tlp, at + TLP);
                timers.set(Tcp::Rto, at + RTO);
            }
        }),
        "-",
    );
    let timers = registered_slot_timer(base);
    let (handle, mut now) = (timers.handle(), base);
    bench.pair(
        section,
        "one packet, from another task's handle",
        2_000_000,
        ("two Sleeps, each reset later", two_sleeps()),
        ("SlotHandle::set(now + d) x2", move |n| {
            for _ in 0..n {
                now += PACKET;
                let at = black_box(now);
                handle.set(Tcp::Tlp, at + TLP);
                handle.set(Tcp::Rto, at + RTO);
            }
        }),
        "-",
    );
    drop(timers);

    // 6. Per-request deadline: a fresh tokio timeout per request vs one reused Sleep.
    let reused = lazy_deadline::sleep_until(base + Duration::from_secs(5));
    tokio::pin!(reused);
    let _ = poll_once(reused.as_mut());
    let mut req = base;
    bench.pair(
        "per-request deadline",
        "arm 5 s, poll once, give up",
        200_000,
        ("tokio::time::timeout new+poll+drop", |n| {
            for _ in 0..n {
                let fut =
                    tokio::time::timeout(Duration::from_secs(5), std::future::pending::<()>());
                let _ = poll_once(std::pin::pin!(fut));
            }
        }),
        ("lazy Sleep reused: reset+poll", |n| {
            for _ in 0..n {
                req += PACKET;
                reused
                    .as_mut()
                    .reset(black_box(req) + Duration::from_secs(5));
                let _ = poll_once(reused.as_mut());
            }
        }),
        ">= 10x",
    );
}

/// Runtime timer registrations per second of traffic, counted under a paused clock:
/// 1,000,000 packets at 1 µs spacing (one virtual second), polling each millisecond.
/// A tokio `Sleep` reset per packet asks the driver for each packet; ours count
/// their registrations in `stats()`.
fn driver_work() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (idle_regs, slot_regs) = rt.block_on(async {
        let mut idle = IdleTimeout::new(IDLE);
        let mut timers = SlotTimer::<Tcp>::new();
        for _ in 0..1_000 {
            let ms_start = Instant::now();
            for us in 0..1_000 {
                let now = ms_start + PACKET * us;
                idle.touch_at(now);
                timers.set(Tcp::Tlp, now + TLP);
                timers.set(Tcp::Rto, now + RTO);
            }
            assert!(poll_once(Pin::new(&mut idle)).is_pending());
            assert!(poll_once(std::pin::pin!(timers.expired())).is_pending());
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        (idle.stats().registrations, timers.stats().registrations)
    });
    println!("driver work per second of traffic (1,000,000 packets at 1 µs, paused clock):");
    println!(
        "  idle timeout {:>3} ms: tokio Sleep::reset per packet 1,000,000 | IdleTimeout registrations {:>4}  (goal <= {} per second)",
        IDLE.as_millis(),
        idle_regs,
        1000 / IDLE.as_millis() + 1
    );
    println!(
        "  TLP {} ms + RTO {} ms: tokio resets per packet 2,000,000     | SlotTimer registrations   {:>4}  (goal <= {} per second)",
        TLP.as_millis(),
        RTO.as_millis(),
        slot_regs,
        1000 / TLP.as_millis() + 1
    );
}

fn memory() {
    let sleep = std::mem::size_of::<tokio::time::Sleep>();
    let ours = SlotTimer::<Tcp>::memory_footprint();
    println!("memory for 5 kinds: one tokio::time::Sleep = {sleep} B; SlotTimer<5 kinds> = {ours} B incl. heap (goal <= {} B); five Sleeps = {} B",
        sleep + 128, 5 * sleep);
}
