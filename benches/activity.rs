//! Group 2: activity per packet. tokio `Sleep::reset(now + t)` vs
//! `IdleTimeout::touch_at(now)` vs `ActivityHandle::touch_at` from another thread
//! while the owner waits in a runtime on its own thread.

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use lazy_deadline::IdleTimeout;
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

fn activity(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group("activity_per_packet");

    let mut sleep = registered_sleep(base + IDLE);
    let mut now = base;
    group.bench_function("tokio_reset_now_plus_t", |b| {
        b.iter(|| {
            now += PACKET;
            sleep.as_mut().reset(black_box(now) + IDLE);
        })
    });

    let mut idle = IdleTimeout::new(IDLE);
    let _ = poll_once(Pin::new(&mut idle));
    let mut now = base;
    group.bench_function("idle_timeout_touch_at", |b| {
        b.iter(|| {
            now += PACKET;
            idle.touch_at(black_box(now));
        })
    });

    // The owner waits on a runtime of its own thread; this thread touches.
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let owner = std::thread::spawn(move || {
        current_thread().block_on(async move {
            let mut idle = IdleTimeout::new(Duration::from_secs(3600));
            handle_tx.send(idle.handle()).unwrap();
            tokio::select! {
                () = &mut idle => panic!("an hour passed"),
                _ = stop_rx => {}
            }
        })
    });
    let handle = handle_rx.recv().unwrap();
    let mut now = Instant::now();
    group.bench_function("activity_handle_touch_at_cross_thread", |b| {
        b.iter(|| {
            now += PACKET;
            handle.touch_at(black_box(now));
        })
    });
    group.finish();
    stop_tx.send(()).unwrap();
    owner.join().unwrap();
}

criterion_group! { name = benches; config = config(); targets = activity }
criterion_main!(benches);
