//! Group 3: one TCP-like packet (arm TLP at now + 20 ms and RTO at now + 200 ms):
//! kernel-style one `Sleep`, two `Sleep`s, a quinn-style table with one `Sleep`,
//! `SlotTimer` (Instant deadlines and `batch_at`), and `SlotHandle`.

mod common;

use common::peers::{packets, KernelStyle, Peer, QuinnStyle, SlotBatch, TwoSleeps};
use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tokio::time::Instant;

/// One criterion function per peer: a packet per iteration, the clock 1 µs later each.
fn bench_peer<P: Peer>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    peer: P,
    base: Instant,
) {
    let mut packet = packets(base, peer);
    group.bench_function(name, |b| b.iter(|| packet(1)));
}

fn tcp(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group("tcp_packet");

    bench_peer(
        &mut group,
        "tokio_kernel_style_one_sleep",
        KernelStyle::new(base),
        base,
    );
    bench_peer(&mut group, "tokio_two_sleeps", TwoSleeps::new(base), base);
    bench_peer(
        &mut group,
        "tokio_quinn_style_table",
        QuinnStyle::new(base),
        base,
    );

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

    bench_peer(
        &mut group,
        "slot_timer_batch_at",
        SlotBatch::new(base),
        base,
    );

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
