//! Group 3: one TCP-like packet (arm TLP at now + 20 ms and RTO at now + 200 ms):
//! kernel-style one `Sleep`, two `Sleep`s, a quinn-style table with one `Sleep`,
//! `SlotTimer` (Instant deadlines and `batch_at`), and `SlotHandle`.

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tokio::time::Instant;

fn tcp(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group("tcp_packet");

    let mut kernel = registered_sleep(base + TLP);
    let mut now = base;
    group.bench_function("tokio_kernel_style_one_sleep", |b| {
        b.iter(|| {
            now += PACKET;
            let at = black_box(now);
            kernel.as_mut().reset(at + TLP);
            kernel.as_mut().reset(at + RTO);
        })
    });

    let (mut tlp, mut rto) = (registered_sleep(base + TLP), registered_sleep(base + RTO));
    let mut now = base;
    group.bench_function("tokio_two_sleeps", |b| {
        b.iter(|| {
            now += PACKET;
            let at = black_box(now);
            tlp.as_mut().reset(at + TLP);
            rto.as_mut().reset(at + RTO);
        })
    });

    let mut quinn = registered_sleep(base + TLP);
    let mut table: [Option<Instant>; 5] = [None; 5];
    let mut armed = base + TLP;
    let mut now = base;
    group.bench_function("tokio_quinn_style_table", |b| {
        b.iter(|| {
            now += PACKET;
            let at = black_box(now);
            table[Tcp::Tlp as usize] = Some(at + TLP);
            table[Tcp::Rto as usize] = Some(at + RTO);
            let next = table.iter().flatten().min().copied();
            if let Some(next) = next.filter(|&next| next != armed) {
                quinn.as_mut().reset(next);
                armed = next;
            }
        })
    });

    let mut timers = registered_slot_timer(base);
    let mut now = base;
    group.bench_function("slot_timer_set_instant", |b| {
        b.iter(|| {
            now += PACKET;
            let at = black_box(now);
            timers.set(Tcp::Tlp, at + TLP);
            timers.set(Tcp::Rto, at + RTO);
        })
    });

    let mut timers = registered_slot_timer(base);
    let mut now = base;
    group.bench_function("slot_timer_batch_at", |b| {
        b.iter(|| {
            now += PACKET;
            let mut batch = timers.batch_at(black_box(now));
            batch.set_after(Tcp::Tlp, TLP);
            batch.set_after(Tcp::Rto, RTO);
        })
    });

    let timers = registered_slot_timer(base);
    let handle = timers.handle();
    let mut now = base;
    group.bench_function("slot_handle_set", |b| {
        b.iter(|| {
            now += PACKET;
            let at = black_box(now);
            handle.set(Tcp::Tlp, at + TLP);
            handle.set(Tcp::Rto, at + RTO);
        })
    });
    group.finish();
    drop(timers);
}

criterion_group! { name = benches; config = config(); targets = tcp }
criterion_main!(benches);
