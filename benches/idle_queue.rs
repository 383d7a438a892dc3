//! Group 8: many idle timeouts in one task. `IdleQueue` against tokio-util's
//! `DelayQueue` (and our drop-in of it), one tokio `Sleep` per key, the
//! `HashMap<u64, Instant>` sweep pattern, and the plain-memory floor.
//!
//! - `idle_queue_touch_storm/*/{1k,10k,100k,1M}` (criterion): one touch of a uniformly
//!   random key, deadline `now + 30 s` from a `now` both sides compute the same way.
//!   Two floors: a compare-and-store into records of our entry's size, and the same
//!   reached through a table of keys, as every other row reaches its entry.
//! - Steady traffic, mass expiry and memory (printed after the criterion groups, one
//!   run each; `IDLE_QUEUE_STEADY_SECONDS` shortens the steady run, default 120).

mod common;

use common::*;
use criterion::{criterion_group, BenchmarkId, Criterion};
use lazy_deadline::IdleQueue;
use std::collections::HashMap;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::time::DelayQueue;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The size of one `IdleQueue` entry with `T = u32` plus its heap record, so the floor
/// touches records as large as ours.
const RECORD_WORDS: usize = 5;

/// One touch-storm row over a queue with tokio-util's `DelayQueue` API: `n` keys
/// inserted 30 s out, then a random key reset to `now + 30 s` per iteration.
macro_rules! delay_queue_row {
    ($group:expr, $name:expr, $queue:ty, $n:expr, $label:expr, $base:expr) => {{
        let mut delay = <$queue>::with_capacity($n);
        let keys: Vec<_> = (0..$n as u32)
            .map(|i| delay.insert_at(i, $base + TIMEOUT))
            .collect();
        let _ = delay.poll_expired(&mut Context::from_waker(Waker::noop()));
        let (mut rng, mut now) = (Rng::new(3), $base);
        $group.bench_with_input(BenchmarkId::new($name, $label), &$n, |b, &n| {
            b.iter(|| {
                now += PACKET;
                delay.reset_at(
                    &keys[rng.below(n as u64) as usize],
                    black_box(now) + TIMEOUT,
                );
            })
        });
    }};
}

fn touch_storm(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group("idle_queue_touch_storm");
    group.sample_size(20);
    for n in [1_000usize, 10_000, 100_000, 1_000_000] {
        let base = Instant::now();
        let label = match n {
            1_000 => "1k",
            10_000 => "10k",
            100_000 => "100k",
            _ => "1M",
        };

        let mut queue = IdleQueue::with_capacity(TIMEOUT, n);
        let keys: Vec<_> = (0..n as u32).map(|i| queue.insert(i)).collect();
        let _ = poll_once(pin!(queue.expired()));
        let (mut rng, mut now) = (Rng::new(3), base);
        group.bench_with_input(
            BenchmarkId::new("idle_queue_touch_at", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += PACKET;
                    queue.touch_at(keys[rng.below(n as u64) as usize], black_box(now));
                })
            },
        );
        drop((queue, keys));

        // tokio-util's queue and our drop-in, through the same calls.
        delay_queue_row!(group, "delay_queue_reset", DelayQueue<u32>, n, label, base);
        delay_queue_row!(
            group,
            "lazy_delay_queue_reset",
            lazy_deadline::DelayQueue<u32>,
            n,
            label,
            base
        );

        let mut sleeps: Vec<_> = (0..n).map(|_| registered_sleep(base + TIMEOUT)).collect();
        let (mut rng, mut now) = (Rng::new(3), base);
        group.bench_with_input(
            BenchmarkId::new("tokio_sleep_per_key", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += PACKET;
                    sleeps[rng.below(n as u64) as usize]
                        .as_mut()
                        .reset(black_box(now) + TIMEOUT);
                })
            },
        );
        drop(sleeps);

        let mut map: HashMap<u64, Instant> = (0..n as u64).map(|k| (k, base)).collect();
        let (mut rng, mut now) = (Rng::new(3), base);
        group.bench_with_input(BenchmarkId::new("hashmap_store", label), &n, |b, &n| {
            b.iter(|| {
                now += PACKET;
                if let Some(last) = map.get_mut(&rng.below(n as u64)) {
                    *last = black_box(now);
                }
            })
        });
        drop(map);

        // The floor: index, compare and store the caller's `now` into records of our
        // entry's size (the same `Instant` arithmetic as every row above).
        let mut records = vec![(base, [0u64; RECORD_WORDS - 2]); n];
        let (mut rng, mut now) = (Rng::new(3), base);
        group.bench_with_input(
            BenchmarkId::new("floor_compare_store", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += PACKET;
                    let record = &mut records[rng.below(n as u64) as usize];
                    if black_box(now) > record.0 {
                        record.0 = now;
                    }
                })
            },
        );

        // The floor plus the indirection every row above pays: the caller's table of
        // keys (8 B each, randomly indexed; at 1M keys 8 MB, mostly cache misses).
        let key_table: Vec<u64> = (0..n as u64).collect();
        let (mut rng, mut now) = (Rng::new(3), base);
        group.bench_with_input(
            BenchmarkId::new("floor_via_key_table", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += PACKET;
                    let index = key_table[rng.below(n as u64) as usize] as usize;
                    let record = &mut records[index];
                    if black_box(now) > record.0 {
                        record.0 = now;
                    }
                })
            },
        );
        drop((records, key_table));
    }
    group.finish();
}

/// 100k keys, 30 s timeout, uniformly random touches at `TOUCHES_PER_SECOND` of
/// simulated time under the paused clock, the queue polled once per simulated ms.
fn steady_traffic() {
    const KEYS: usize = 100_000;
    const TOUCHES_PER_MS: usize = 1_000;
    let seconds: u64 = std::env::var("IDLE_QUEUE_STEADY_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    println!(
        "\nsteady traffic: {KEYS} keys, 30 s timeout, {} touches per simulated second, {seconds} s simulated",
        TOUCHES_PER_MS * 1_000
    );
    let run = |id: &str, name: &str, f: &mut dyn FnMut(Instant, &mut Rng, bool) -> u64| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (elapsed, work) = rt.block_on(async {
            let mut rng = Rng::new(9);
            let start = std::time::Instant::now();
            let mut work = 0;
            for ms in 0..seconds * 1_000 {
                tokio::time::advance(Duration::from_millis(1)).await;
                work = f(Instant::now(), &mut rng, ms % 1_000 == 999);
            }
            (start.elapsed(), work)
        });
        println!(
            "  {name:<44} {:>8.2} s CPU  ({:.1} ns per touch)  {work}",
            elapsed.as_secs_f64(),
            elapsed.as_nanos() as f64 / (seconds * 1_000 * TOUCHES_PER_MS as u64) as f64
        );
        record_value(
            &format!("idle_queue/steady/{id}/cpu_s"),
            elapsed.as_secs_f64(),
        );
        elapsed
    };

    let baseline = run(
        "baseline",
        "baseline: clock advance + random keys only",
        &mut |_, rng, _| {
            for _ in 0..TOUCHES_PER_MS {
                black_box(rng.below(KEYS as u64));
            }
            0
        },
    );

    let mut queue: Option<(IdleQueue<u32>, Vec<_>)> = None;
    let ours = run(
        "idle_queue",
        "IdleQueue::touch_at + poll",
        &mut |now, rng, _| {
            let (queue, keys) = queue.get_or_insert_with(|| {
                let mut q = IdleQueue::with_capacity(TIMEOUT, KEYS);
                let keys: Vec<_> = (0..KEYS as u32).map(|i| q.insert(i)).collect();
                (q, keys)
            });
            for _ in 0..TOUCHES_PER_MS {
                queue.touch_at(keys[rng.below(KEYS as u64) as usize], now);
            }
            while poll_once(pin!(queue.expired())).is_ready() {}
            0
        },
    );
    let (q, _) = queue.take().unwrap();
    println!(
        "    re-files {} ({:.0}/s; bound keys/timeout = {:.0}/s), registrations {}, entry fires {}",
        q.refiles(),
        q.refiles() as f64 / seconds as f64,
        KEYS as f64 / TIMEOUT.as_secs_f64(),
        q.stats().registrations,
        q.stats().entry_fires
    );
    for (what, value) in [
        ("refiles", q.refiles()),
        ("registrations", q.stats().registrations),
        ("seconds", seconds),
        ("keys", KEYS as u64),
        ("timeout_s", TIMEOUT.as_secs()),
        ("touches", seconds * 1_000 * TOUCHES_PER_MS as u64),
    ] {
        record_value(&format!("idle_queue/steady/{what}"), value);
    }
    drop(q);

    let mut delay: Option<(DelayQueue<u32>, Vec<_>)> = None;
    let theirs = run(
        "delay_queue",
        "DelayQueue::reset_at + poll",
        &mut |now, rng, _| {
            let (delay, keys) = delay.get_or_insert_with(|| {
                let mut d = DelayQueue::with_capacity(KEYS);
                let keys: Vec<_> = (0..KEYS as u32)
                    .map(|i| d.insert_at(i, Instant::now() + TIMEOUT))
                    .collect();
                (d, keys)
            });
            for _ in 0..TOUCHES_PER_MS {
                delay.reset_at(&keys[rng.below(KEYS as u64) as usize], now + TIMEOUT);
            }
            let mut cx = Context::from_waker(Waker::noop());
            while let Poll::Ready(Some(_)) = delay.poll_expired(&mut cx) {}
            0
        },
    );
    drop(delay);

    let mut map: Option<HashMap<u64, Instant>> = None;
    let sweep = run(
        "hashmap_sweep",
        "HashMap store + sweep every 1 s",
        &mut |now, rng, sweep_now| {
            let map = map.get_or_insert_with(|| (0..KEYS as u64).map(|k| (k, now)).collect());
            for _ in 0..TOUCHES_PER_MS {
                if let Some(last) = map.get_mut(&rng.below(KEYS as u64)) {
                    *last = now;
                }
            }
            if sweep_now {
                map.retain(|_, last| now.duration_since(*last) < TIMEOUT);
            }
            0
        },
    );
    let net = |d: Duration| d.saturating_sub(baseline).as_secs_f64();
    println!(
        "  net of the baseline: IdleQueue {:.2} s, DelayQueue {:.2} s ({:.1}x), sweep {:.2} s ({:.1}x)",
        net(ours),
        net(theirs),
        net(theirs) / net(ours),
        net(sweep),
        net(sweep) / net(ours)
    );
}

/// 1M keys due at the same instant, drained through the stream: total time and the
/// longest single poll.
fn mass_expiry() {
    const KEYS: u32 = 1_000_000;
    println!("\nmass expiry: {KEYS} keys due together, drained one poll at a time");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let _inside = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let report = |id: &str, name: &str, total: Duration, longest: Duration, yielded: u32| {
        record_drain(&format!("idle_queue/mass_expiry/{id}"), total, longest);
        println!(
            "  {name:<12} total {:>7.1} ms ({:.0} ns per entry), longest poll {:>7.1} µs, yielded {yielded}",
            total.as_secs_f64() * 1e3,
            total.as_nanos() as f64 / f64::from(KEYS),
            longest.as_secs_f64() * 1e6
        );
    };

    let mut queue = IdleQueue::with_capacity(TIMEOUT, KEYS as usize);
    for i in 0..KEYS {
        queue.insert(i);
    }
    rt.block_on(tokio::time::advance(TIMEOUT));
    let (mut longest, mut yielded) = (Duration::ZERO, 0);
    let start = std::time::Instant::now();
    while yielded < KEYS {
        let poll_start = std::time::Instant::now();
        let ready = queue.poll_expired(&mut cx).is_ready();
        longest = longest.max(poll_start.elapsed());
        yielded += u32::from(ready);
    }
    report("idle_queue", "IdleQueue", start.elapsed(), longest, yielded);
    drop(queue);

    let mut delay = DelayQueue::with_capacity(KEYS as usize);
    let deadline = Instant::now() + TIMEOUT;
    for i in 0..KEYS {
        delay.insert_at(i, deadline);
    }
    rt.block_on(tokio::time::advance(TIMEOUT));
    let (mut longest, mut yielded) = (Duration::ZERO, 0);
    let start = std::time::Instant::now();
    while yielded < KEYS {
        let poll_start = std::time::Instant::now();
        let ready = matches!(delay.poll_expired(&mut cx), Poll::Ready(Some(_)));
        longest = longest.max(poll_start.elapsed());
        yielded += u32::from(ready);
    }
    report(
        "delay_queue",
        "DelayQueue",
        start.elapsed(),
        longest,
        yielded,
    );
}

/// Resident bytes per key at 1M keys (`T = ()`), every structure built before any
/// is dropped so the deltas are fresh pages.
fn memory() {
    const KEYS: usize = 1_000_000;
    let rt = current_thread();
    let _inside = rt.enter();
    println!("\nmemory: resident bytes per key at {KEYS} keys, T = ()");
    let measure = |id: &str, name: &str, build: &mut dyn FnMut() -> Box<dyn std::any::Any>| {
        let before = rss_bytes().unwrap_or(0);
        let built = build();
        let after = rss_bytes().unwrap_or(0);
        let per_key = after.saturating_sub(before) as f64 / KEYS as f64;
        println!("  {name:<48} {per_key:>6.1} B");
        record_value(&format!("idle_queue/memory/{id}/bytes_per_key"), per_key);
        (built, per_key)
    };
    let ours = measure(
        "idle_queue",
        "IdleQueue<()> (keys kept in a Vec<Key>)",
        &mut || {
            let mut q = IdleQueue::with_capacity(TIMEOUT, KEYS);
            let keys: Vec<_> = (0..KEYS).map(|_| q.insert(())).collect();
            Box::new((q, keys))
        },
    );
    let theirs = measure(
        "delay_queue",
        "DelayQueue<()> (keys kept in a Vec<Key>)",
        &mut || {
            let mut d = DelayQueue::with_capacity(KEYS);
            let keys: Vec<_> = (0..KEYS).map(|_| d.insert((), TIMEOUT)).collect();
            Box::new((d, keys))
        },
    );
    let side = measure(
        "delay_queue_side_map",
        "DelayQueue<()> + HashMap<u64, delay_queue::Key>",
        &mut || {
            let mut d = DelayQueue::with_capacity(KEYS);
            let map: HashMap<u64, _> = (0..KEYS as u64)
                .map(|k| (k, d.insert((), TIMEOUT)))
                .collect();
            Box::new((d, map))
        },
    );
    println!(
        "  ratio DelayQueue / IdleQueue: {:.2}x; with the side map {:.2}x",
        theirs.1 / ours.1,
        side.1 / ours.1
    );
}

criterion_group! { name = benches; config = config(); targets = touch_storm }

fn main() {
    // A name filter (`cargo bench --bench idle_queue -- touch`) runs only criterion.
    let everything = !std::env::args().skip(1).any(|arg| !arg.starts_with('-'));
    // Memory first: once a large structure has been freed, the allocator keeps its
    // pages and later resident-size deltas would read zero.
    if everything {
        memory();
    }
    benches();
    if everything {
        steady_traffic();
        mass_expiry();
    }
    Criterion::default().configure_from_args().final_summary();
}
