//! Group 5: scale. (a) 100,000 connections x 5 timers with random touches: tokio
//! `Sleep`s vs one `DelayQueue` vs `SlotTimer`s, ns per touch and resident bytes per
//! connection. (b) Does a touch get dearer as the number of timers grows (1k to 1M)?

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lazy_deadline::{IdleTimeout, SlotTimer, TimerKind};
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::time::DelayQueue;

const CONNECTIONS: usize = 100_000;
/// RTO, TLP, PROBE0, delayed ACK, keepalive.
const KIND_TIMEOUTS: [Duration; 5] = [
    RTO,
    TLP,
    Duration::from_millis(500),
    Duration::from_millis(40),
    Duration::from_secs(7200),
];

/// Builds something, returning it with the resident memory it added per connection.
fn measured<T>(id: &str, label: &str, build: impl FnOnce() -> T) -> T {
    let before = rss_bytes();
    let built = build();
    if let (Some(before), Some(after)) = (before, rss_bytes()) {
        let per_connection = after.saturating_sub(before) / CONNECTIONS as u64;
        record_value(
            &format!("scale/memory/{id}/bytes_per_connection"),
            per_connection,
        );
        eprintln!(
            "scale: {label}: {} bytes resident per connection ({CONNECTIONS} connections x 5 timers)",
            after.saturating_sub(before) / CONNECTIONS as u64
        );
    }
    built
}

fn connections(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    // Initial deadlines an hour out, so nothing expires while the rest is built.
    let first = base + Duration::from_secs(3600);
    // All three are built before any is dropped: a resident-size delta taken after a
    // drop would only show the allocator reusing freed pages.
    let mut sleeps = measured("tokio_sleeps", "tokio Sleep x5", || {
        (0..CONNECTIONS * 5)
            .map(|i| registered_sleep(first + KIND_TIMEOUTS[i % 5]))
            .collect::<Vec<_>>()
    });
    let (mut queue, keys) = measured("delay_queue", "DelayQueue (one queue)", || {
        let mut queue = DelayQueue::with_capacity(CONNECTIONS * 5);
        let keys: Vec<_> = (0..CONNECTIONS * 5)
            .map(|i| queue.insert_at(i as u32, first + KIND_TIMEOUTS[i % 5]))
            .collect();
        let waker = std::task::Waker::noop();
        assert!(queue
            .poll_expired(&mut std::task::Context::from_waker(waker))
            .is_pending());
        (queue, keys)
    });
    let mut timers = measured("slot_timers", "SlotTimer<5 kinds>", || {
        (0..CONNECTIONS)
            .map(|_| {
                let mut t = SlotTimer::<Tcp>::new();
                for (kind, timeout) in KIND_TIMEOUTS.iter().enumerate() {
                    t.set(Tcp::from_index(kind), first + *timeout);
                }
                let _ = poll_once(std::pin::pin!(t.expired()));
                t
            })
            .collect::<Vec<_>>()
    });

    let mut group = c.benchmark_group("scale_100k_connections_touch");
    group.sample_size(20);
    let (mut rng, mut now) = (Rng::new(1), first);
    group.bench_function("tokio_sleeps", |b| {
        b.iter(|| {
            now += PACKET;
            let (conn, kind) = (
                rng.below(CONNECTIONS as u64) as usize,
                rng.below(5) as usize,
            );
            sleeps[conn * 5 + kind]
                .as_mut()
                .reset(black_box(now) + KIND_TIMEOUTS[kind]);
        })
    });
    let (mut rng, mut now) = (Rng::new(1), first);
    group.bench_function("delay_queue", |b| {
        b.iter(|| {
            now += PACKET;
            let (conn, kind) = (
                rng.below(CONNECTIONS as u64) as usize,
                rng.below(5) as usize,
            );
            queue.reset_at(&keys[conn * 5 + kind], black_box(now) + KIND_TIMEOUTS[kind]);
        })
    });
    let (mut rng, mut now) = (Rng::new(1), first);
    group.bench_function("slot_timers", |b| {
        b.iter(|| {
            now += PACKET;
            let (conn, kind) = (
                rng.below(CONNECTIONS as u64) as usize,
                rng.below(5) as usize,
            );
            timers[conn].set(Tcp::from_index(kind), black_box(now) + KIND_TIMEOUTS[kind]);
        })
    });
    group.finish();
}

fn timer_count(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group("scale_touch_vs_timer_count");
    group.sample_size(20);
    for n in [1_000usize, 10_000, 100_000, 1_000_000] {
        let mut sleeps: Vec<_> = (0..n).map(|_| registered_sleep(base + IDLE)).collect();
        let (mut rng, mut now) = (Rng::new(2), base);
        group.bench_with_input(BenchmarkId::new("tokio_sleep_reset", n), &n, |b, &n| {
            b.iter(|| {
                now += PACKET;
                sleeps[rng.below(n as u64) as usize]
                    .as_mut()
                    .reset(black_box(now) + IDLE);
            })
        });
        drop(sleeps);
        let idles: Vec<IdleTimeout> = (0..n)
            .map(|_| {
                let mut idle = IdleTimeout::new(IDLE);
                let _ = poll_once(Pin::new(&mut idle));
                idle
            })
            .collect();
        let (mut rng, mut now) = (Rng::new(2), base);
        group.bench_with_input(BenchmarkId::new("idle_timeout_touch_at", n), &n, |b, &n| {
            b.iter(|| {
                now += PACKET;
                idles[rng.below(n as u64) as usize].touch_at(black_box(now));
            })
        });
        drop(idles);
        // The floor: the same random compare-then-store (touch_at's pattern) into plain
        // records of an IdleTimeout's size. Growth here is the memory hierarchy, not
        // anything about timers.
        let mut records = vec![[0u64; std::mem::size_of::<IdleTimeout>() / 8]; n];
        let (mut rng, mut now) = (Rng::new(2), 0u64);
        group.bench_with_input(
            BenchmarkId::new("floor_record_compare_store", n),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += 1;
                    let record = &mut records[rng.below(n as u64) as usize];
                    if black_box(now) > record[0] {
                        record[0] = now;
                    }
                })
            },
        );
        drop(records);
    }
    group.finish();
}

criterion_group! { name = benches; config = config(); targets = connections, timer_count }
criterion_main!(benches);
