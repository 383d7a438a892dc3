//! `Interval`: a keepalive ticker postponed on every message (`reset_at` to one
//! period after the message, no clock read in the loop; `reset`, which reads the
//! clock, as users call it), and the pending `poll_tick` of a `select!` loop's turn;
//! tokio's `Interval` against ours, each registered with the driver first.

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use tokio::time::Instant;

const KEEPALIVE: Duration = Duration::from_secs(15);

/// A ticker that has ticked once and been polled pending: its next tick registered.
macro_rules! armed {
    ($make:path) => {{
        let mut ticker = $make(KEEPALIVE);
        for _ in 0..2 {
            let _ = poll_once(std::pin::pin!(ticker.tick()));
        }
        ticker
    }};
}

fn keepalive(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group("interval/reset_at_later");
    let mut theirs = armed!(tokio::time::interval);
    let mut i = 0u32;
    group.bench_function("tokio", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            theirs.reset_at(black_box(base + PACKET * i) + KEEPALIVE);
        })
    });
    let mut ours = armed!(lazy_deadline::interval);
    let mut i = 0u32;
    group.bench_function("lazy", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            ours.reset_at(black_box(base + PACKET * i) + KEEPALIVE);
        })
    });
    group.finish();

    let mut group = c.benchmark_group("interval/reset");
    let mut theirs = armed!(tokio::time::interval);
    group.bench_function("tokio", |b| b.iter(|| theirs.reset()));
    let mut ours = armed!(lazy_deadline::interval);
    group.bench_function("lazy", |b| b.iter(|| ours.reset()));
    group.finish();

    let mut group = c.benchmark_group("interval/poll_tick_pending");
    let mut theirs = armed!(tokio::time::interval);
    group.bench_function("tokio", |b| {
        b.iter(|| black_box(poll_once(std::pin::pin!(theirs.tick())).is_pending()))
    });
    let mut ours = armed!(lazy_deadline::interval);
    group.bench_function("lazy", |b| {
        b.iter(|| black_box(poll_once(std::pin::pin!(ours.tick())).is_pending()))
    });
    group.finish();
}

criterion_group! { name = benches; config = config(); targets = keepalive }
criterion_main!(benches);
