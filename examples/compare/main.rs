//! The headline table: lazy-deadline against tokio::time, side by side, same process.
//!
//! ```text
//! cargo run --release --example compare            # full run, well under a minute
//! cargo run --release --example compare -- --quick # CI smoke run, a few seconds
//! cargo run --release --example compare -- --multi-thread # hot paths on a 2-worker runtime
//! cargo run --release --example compare -- --duration 3  # sized to ~3 s where it can be
//! ```
//!
//! `--duration S` picks the full run when it fits in S seconds (about 10 s here) and
//! the quick one otherwise; the quick run is as short as the rows can be and still
//! measure something (a few seconds), so a smaller S runs over it, and says so.
//!
//! Each row times a plain loop of the real operation for ours and for the peer,
//! alternating the two in every run, and prints the median ns/op of the runs. These
//! are wall-clock figures on a shared machine: read ratios, not absolutes. The
//! criterion suite in `benches/` has the statistics.

// The criterion suites' helpers and hand-written peers, so both measure the same code.
#[path = "../../benches/common/mod.rs"]
mod common;
mod keyed;
mod table;
mod ticker;

use common::peers::{packets, KernelStyle, Peer, QuinnStyle, SlotBatch, TwoSleeps};
use common::{
    poll_once, registered_lazy_sleep, registered_sleep, registered_slot_timer, Rng, Tcp, IDLE,
    PACKET, RTO, TLP,
};
use lazy_deadline::{IdleQueue, IdleTimeout, Key, SlotTimer};
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;
use table::Bench;
use tokio::time::Instant;
use tokio_util::time::DelayQueue;

/// The many-keys rows: one task owning this many idle timeouts.
const QUEUE_KEYS: usize = 100_000;
const QUEUE_TIMEOUT: Duration = Duration::from_secs(30);

fn main() {
    let duration = std::env::args()
        .skip_while(|a| a != "--duration")
        .nth(1)
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0);
    // The full run takes about 10 s on this project's machine.
    let quick = std::env::args().any(|a| a == "--quick") || duration.is_some_and(|s| s < 15.0);
    let mut bench = Bench {
        runs: if quick { 5 } else { 9 },
        scale: if quick { 20 } else { 1 },
        min_iters: 1_000,
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
    rt.block_on(async {
        hot_paths(&mut bench);
        pending_polls(&mut bench);
    });
    if !multi {
        driver_wakes(&mut bench);
    }
    bench.print();
    println!();
    driver_work(if quick { 100 } else { 1_000 });
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
    if let Some(limit) = duration {
        if started.elapsed().as_secs_f64() > limit {
            println!(
                "(--duration {limit} is shorter than the quick run: it cannot shrink further)"
            );
        }
    }
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
    );

    // 3. Earlier deadlines: the lazy path cannot help; ours pays tokio's reset of the
    // set's entry, plus the set's lock to move the filing.
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
    );

    // A keepalive ticker postponed on every message (examples/compare/ticker.rs).
    ticker::keepalive(bench, base);

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
    );
    bench.pair(
        section,
        "one packet",
        2_000_000,
        ("two Sleeps, each reset later", two_sleeps()),
        (ours, slot_batch()),
    );
    bench.pair(
        section,
        "one packet",
        2_000_000,
        ("quinn-style table + 1 Sleep", quinn_style()),
        (ours, slot_batch()),
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
    );

    bench.pair(
        "per-request deadline",
        "timeout(5 s, request): new, poll once, drop",
        200_000,
        ("tokio::time::timeout", |n| {
            for _ in 0..n {
                let fut =
                    tokio::time::timeout(Duration::from_secs(5), std::future::pending::<()>());
                let _ = poll_once(std::pin::pin!(fut));
            }
        }),
        ("lazy_deadline::timeout", |n| {
            for _ in 0..n {
                let fut =
                    lazy_deadline::timeout(Duration::from_secs(5), std::future::pending::<()>());
                let _ = poll_once(std::pin::pin!(fut));
            }
        }),
    );

    bench.pair(
        "per-request deadline",
        "sleep(5 s): new, poll once, drop",
        200_000,
        ("tokio::time::sleep", |n| {
            for _ in 0..n {
                let _ = poll_once(std::pin::pin!(tokio::time::sleep(Duration::from_secs(5))));
            }
        }),
        ("lazy_deadline::sleep", |n| {
            for _ in 0..n {
                let _ = poll_once(std::pin::pin!(lazy_deadline::sleep(Duration::from_secs(5))));
            }
        }),
    );

    // 7. Many keys in one task: touch a random key's idle timeout per packet.
    let mut queue = IdleQueue::with_capacity(QUEUE_TIMEOUT, QUEUE_KEYS);
    let keys: Vec<Key> = (0..QUEUE_KEYS as u32).map(|i| queue.insert(i)).collect();
    let _ = poll_once(std::pin::pin!(queue.expired()));
    let mut delay = DelayQueue::with_capacity(QUEUE_KEYS);
    let delay_keys: Vec<_> = (0..QUEUE_KEYS as u32)
        .map(|i| delay.insert_at(i, base + QUEUE_TIMEOUT))
        .collect();
    let (mut rng_t, mut rng_o) = (Rng::new(7), Rng::new(7));
    let (mut now_t, mut now_o) = (base, base);
    bench.min_iters = 1_000_000;
    bench.pair(
        "many keys in one task (100k idle timeouts)",
        "touch a random key per packet",
        1_000_000,
        ("DelayQueue::reset_at(now + t)", |n| {
            for _ in 0..n {
                now_t += PACKET;
                let key = &delay_keys[rng_t.below(QUEUE_KEYS as u64) as usize];
                delay.reset_at(key, black_box(now_t) + QUEUE_TIMEOUT);
            }
        }),
        ("IdleQueue::touch_at(now)", |n| {
            for _ in 0..n {
                now_o += PACKET;
                let key = keys[rng_o.below(QUEUE_KEYS as u64) as usize];
                queue.touch_at(key, black_box(now_o));
            }
        }),
    );
    drop((queue, keys, delay, delay_keys));
    keyed::drop_ins(bench, base, QUEUE_KEYS, QUEUE_TIMEOUT);
    bench.min_iters = 1_000;
}

/// The kernel-style row where one timer's earlier reset beats the driver's next wake:
/// tokio then wakes its driver (an eventfd write on a runtime with IO enabled) on
/// every packet until the runtime turns. Built on its own runtime with IO enabled, as
/// a network stack's runtime is. Costs one real wait of TLP + 5 ms.
fn driver_wakes(bench: &mut Bench) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let base = Instant::now();
        let mut kernel = KernelStyle::new(base);
        let mut ours = SlotBatch::new(base);
        // One packet moves the Sleep's deadline to RTO, but tokio leaves its wheel
        // entry at TLP (a later reset is lazy in the driver too). Waiting past TLP lets
        // the driver fire that entry, find the deadline moved, re-file it at RTO and
        // take RTO as its next wake: from then on every TLP reset is earlier than the
        // driver's next wake. The runtime does not turn during the row, and packets
        // 10 ns apart keep `now + TLP` below RTO for every run.
        kernel.packet(base);
        ours.packet(base);
        tokio::time::sleep(TLP + Duration::from_millis(5)).await;
        let start = Instant::now();
        const SPACING: Duration = Duration::from_nanos(10);
        let (mut now_t, mut now_o) = (start, start);
        bench.pair(
            "TCP per packet (TLP + RTO)",
            "one packet, earlier reset wakes the driver",
            100_000,
            ("kernel-style: 1 Sleep, 2 resets", |n| {
                for _ in 0..n {
                    now_t += SPACING;
                    kernel.packet(black_box(now_t));
                }
            }),
            ("SlotTimer batch_at(now) x2", |n| {
                for _ in 0..n {
                    now_o += SPACING;
                    ours.packet(black_box(now_o));
                }
            }),
        );
    });
}

/// One turn of a `select!` loop over a timer that is not due: a poll that returns
/// `Pending`, with the same waker each time, as one task's loop polls it.
fn pending_polls(bench: &mut Bench) {
    let far = Instant::now() + Duration::from_secs(3600);
    let mut theirs = registered_sleep(far);
    let mut lazy = registered_lazy_sleep(far);
    let mut idle = IdleTimeout::new(Duration::from_secs(3600));
    let _ = poll_once(Pin::new(&mut idle));
    let mut timers = registered_slot_timer(Instant::now());
    pending_row(bench, theirs.as_mut(), "lazy Sleep", || {
        poll_once(lazy.as_mut()).is_pending()
    });
    pending_row(bench, theirs.as_mut(), "IdleTimeout", || {
        poll_once(Pin::new(&mut idle)).is_pending()
    });
    pending_row(bench, theirs.as_mut(), "SlotTimer (5 kinds)", || {
        poll_once(std::pin::pin!(timers.expired())).is_pending()
    });
    // Many keys in one task: the queue's own pending poll, 1,000 keys each.
    let mut delay_queue = DelayQueue::new();
    let mut queue = IdleQueue::new(QUEUE_TIMEOUT);
    for i in 0..1_000u32 {
        delay_queue.insert(i, QUEUE_TIMEOUT);
        queue.insert(i);
    }
    let waker = std::task::Waker::noop();
    let _ = delay_queue.poll_expired(&mut std::task::Context::from_waker(waker));
    let _ = poll_once(std::pin::pin!(queue.expired()));
    bench.pair(
        "poll a timer that is not due (a select! loop's turn)",
        "poll returning Pending, 1,000 keys",
        2_000_000,
        ("DelayQueue::poll_expired", |n| {
            let mut cx = std::task::Context::from_waker(waker);
            for _ in 0..n {
                black_box(delay_queue.poll_expired(&mut cx).is_pending());
            }
        }),
        ("IdleQueue::expired", |n| {
            for _ in 0..n {
                black_box(poll_once(std::pin::pin!(queue.expired())).is_pending());
            }
        }),
    );
}

fn pending_row(
    bench: &mut Bench,
    mut theirs: Pin<&mut tokio::time::Sleep>,
    ours: &'static str,
    mut poll_ours: impl FnMut() -> bool,
) {
    bench.pair(
        "poll a timer that is not due (a select! loop's turn)",
        "poll returning Pending",
        2_000_000,
        ("tokio Sleep", |n| {
            for _ in 0..n {
                black_box(poll_once(theirs.as_mut()).is_pending());
            }
        }),
        (ours, |n| {
            for _ in 0..n {
                black_box(poll_ours());
            }
        }),
    );
}

/// Runtime timer registrations per second of traffic, counted under a paused clock:
/// 1,000,000 packets at 1 µs spacing (one virtual second), polling each millisecond.
/// A tokio `Sleep` reset per packet asks the driver for each packet; ours count
/// their registrations in `stats()`.
fn driver_work(queue_touches_per_ms: u32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (idle_regs, slot_regs) = rt.block_on(async {
        // (IdleTimeout and SlotTimer: 1 s of packets.)
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
    let (queue_regs, refiles) = idle_queue_work(&rt, queue_touches_per_ms);
    for (what, value) in [
        ("idle_timeout_registrations_per_s", idle_regs),
        ("slot_timer_registrations_per_s", slot_regs),
        ("idle_queue_registrations_per_s", queue_regs),
        ("idle_queue_refiles_per_s", refiles),
        (
            "idle_queue_touches_per_s",
            u64::from(queue_touches_per_ms) * 1_000,
        ),
    ] {
        common::record_value(&format!("compare/driver_work/{what}"), value);
    }
    println!("runtime timer work per second of traffic (1,000,000 packets at 1 µs, paused clock):");
    println!(
        "  idle timeout {} ms:            tokio Sleep::reset per packet 1,000,000 | IdleTimeout registrations {idle_regs}",
        IDLE.as_millis()
    );
    println!(
        "  TLP {} ms + RTO {} ms:        tokio Sleep::reset per packet 2,000,000 | SlotTimer registrations {slot_regs}",
        TLP.as_millis(),
        RTO.as_millis()
    );
    println!(
        "  {QUEUE_KEYS} keys, 30 s idle timeout, {} touches/s: DelayQueue::reset per touch {} | IdleQueue registrations {queue_regs}, re-files {refiles} (mean of 60 s)",
        queue_touches_per_ms * 1_000,
        queue_touches_per_ms * 1_000,
    );
}

/// Registrations and re-files per second of random-key touches (`touches_per_ms` per ms) in a
/// 100k-key `IdleQueue`, averaged over two timeout periods after one and a half of
/// warm-up: keys are all inserted at once, so their re-files come in one wave per
/// period and a one-second window would catch either a whole wave or none of it.
fn idle_queue_work(rt: &tokio::runtime::Runtime, touches_per_ms: u32) -> (u64, u64) {
    rt.block_on(async {
        let mut queue = IdleQueue::with_capacity(QUEUE_TIMEOUT, QUEUE_KEYS);
        let keys: Vec<Key> = (0..QUEUE_KEYS as u32).map(|i| queue.insert(i)).collect();
        let mut rng = Rng::new(5);
        let mut before = (0, 0);
        // The window starts half a period in, between two waves, and holds two waves.
        let period_ms = QUEUE_TIMEOUT.as_millis() as u64;
        for ms in 0..period_ms * 7 / 2 {
            if ms == period_ms * 3 / 2 {
                before = (queue.stats().registrations, queue.refiles());
            }
            let now = Instant::now();
            for _ in 0..touches_per_ms {
                queue.touch_at(keys[rng.below(QUEUE_KEYS as u64) as usize], now);
            }
            assert!(poll_once(std::pin::pin!(queue.expired())).is_pending());
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let seconds = 2 * QUEUE_TIMEOUT.as_secs();
        (
            (queue.stats().registrations - before.0) / seconds,
            (queue.refiles() - before.1) / seconds,
        )
    })
}

fn memory() {
    let sleep = std::mem::size_of::<tokio::time::Sleep>();
    let ours = SlotTimer::<Tcp>::memory_footprint();
    common::record_value("compare/memory/five_tokio_sleeps_bytes", 5 * sleep);
    common::record_value("compare/memory/slot_timer_bytes", ours);
    println!(
        "memory for 5 kinds of timer: five tokio::time::Sleep = {} B; one SlotTimer<5 kinds> = {ours} B incl. heap",
        5 * sleep
    );
}
