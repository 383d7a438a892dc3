//! Group 4: a per-request deadline. A fresh `tokio::time::timeout` (create, poll,
//! drop), ours (its deadline filed in the thread's deadline set), pingora-timeout's
//! `fast_timeout` and `tokio_timeout`, a `timeout` whose future is ready at its
//! first poll (tokio's and ours), a fresh `sleep` (tokio's and ours: ours files in
//! the same set), and one `Sleep` reused across requests with `reset`.

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::future::pending;
use std::hint::black_box;
use std::pin::pin;
use std::time::Duration;
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(5);

fn per_request(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group("per_request");
    group.bench_function("tokio_timeout_new_poll_drop", |b| {
        b.iter(|| {
            let fut = tokio::time::timeout(black_box(DEADLINE), pending::<()>());
            let _ = poll_once(pin!(fut));
        })
    });
    group.bench_function("pingora_fast_timeout_new_poll_drop", |b| {
        b.iter(|| {
            let fut =
                pingora_timeout::fast_timeout::fast_timeout(black_box(DEADLINE), pending::<()>());
            let _ = poll_once(pin!(fut));
        })
    });
    group.bench_function("pingora_tokio_timeout_new_poll_drop", |b| {
        b.iter(|| {
            let fut = pingora_timeout::tokio_timeout(black_box(DEADLINE), pending::<()>());
            let _ = poll_once(pin!(fut));
        })
    });
    group.bench_function("lazy_timeout_new_poll_drop", |b| {
        b.iter(|| {
            let fut = lazy_deadline::timeout(black_box(DEADLINE), pending::<()>());
            let _ = poll_once(pin!(fut));
        })
    });
    // Answered at the first poll: nothing is filed, the deadline is only computed.
    group.bench_function("tokio_timeout_ready_new_poll_drop", |b| {
        b.iter(|| {
            let fut = tokio::time::timeout(black_box(DEADLINE), std::future::ready(()));
            let _ = poll_once(pin!(fut));
        })
    });
    group.bench_function("lazy_timeout_ready_new_poll_drop", |b| {
        b.iter(|| {
            let fut = lazy_deadline::timeout(black_box(DEADLINE), std::future::ready(()));
            let _ = poll_once(pin!(fut));
        })
    });
    group.bench_function("tokio_sleep_new_poll_drop", |b| {
        b.iter(|| {
            let fut = tokio::time::sleep(black_box(DEADLINE));
            let _ = poll_once(pin!(fut));
        })
    });
    group.bench_function("lazy_sleep_new_poll_drop", |b| {
        b.iter(|| {
            let fut = lazy_deadline::sleep(black_box(DEADLINE));
            let _ = poll_once(pin!(fut));
        })
    });
    let base = Instant::now();
    let mut reused = registered_lazy_sleep(base + DEADLINE);
    let mut now = base;
    group.bench_function("lazy_sleep_reused_reset_poll", |b| {
        b.iter(|| {
            now += PACKET;
            reused.as_mut().reset(black_box(now) + DEADLINE);
            let _ = poll_once(reused.as_mut());
        })
    });
    let mut reused = registered_sleep(base + DEADLINE);
    let mut now = base;
    group.bench_function("tokio_sleep_reused_reset_poll", |b| {
        b.iter(|| {
            now += PACKET;
            reused.as_mut().reset(black_box(now) + DEADLINE);
            let _ = poll_once(reused.as_mut());
        })
    });
    group.finish();
}

/// What a `select!` loop pays per iteration for a timer that is not due: one poll
/// returning `Pending` (same waker each time).
fn poll_pending(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group("poll_pending");
    let mut tokio_sleep = registered_sleep(base + DEADLINE);
    group.bench_function("tokio_sleep", |b| {
        b.iter(|| poll_once(tokio_sleep.as_mut()))
    });
    let mut lazy_sleep = registered_lazy_sleep(base + DEADLINE);
    group.bench_function("lazy_sleep", |b| b.iter(|| poll_once(lazy_sleep.as_mut())));
    let mut idle = lazy_deadline::IdleTimeout::new(DEADLINE);
    group.bench_function("idle_timeout", |b| {
        b.iter(|| poll_once(std::pin::Pin::new(&mut idle)))
    });
    let mut timers = registered_slot_timer(base);
    group.bench_function("slot_timer", |b| {
        b.iter(|| poll_once(pin!(timers.expired())))
    });
    group.finish();
}

criterion_group! { name = benches; config = config(); targets = per_request, poll_pending }
criterion_main!(benches);
