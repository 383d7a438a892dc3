//! Group 6: a 2-worker runtime, 10,000 tasks in ping-pong pairs over channels, each
//! re-arming its timers on every message. Messages per second, tokio vs ours.
//! "tcp": TLP + RTO per message (two tokio `Sleep`s vs one `SlotTimer`).
//! "idle": an idle timeout per message (tokio `Sleep::reset` vs `IdleTimeout`).

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lazy_deadline::{IdleTimeout, SlotTimer};
use std::time::Duration;
use tokio::sync::mpsc::{channel, Receiver, Sender};
use tokio::time::Instant;

const PAIRS: usize = 5_000;
const ROUNDS: u32 = 10;

#[derive(Clone, Copy)]
enum Peer {
    TokioTcp,
    LazyTcp,
    TokioIdle,
    LazyIdle,
}

/// One task of a pair: handles `ROUNDS` messages, re-arming its timers on each.
async fn task(peer: Peer, mut rx: Receiver<u32>, tx: Sender<u32>, starts: bool) {
    if starts && tx.send(0).await.is_err() {
        return;
    }
    // A timer may fire while a task waits for its partner (10,000 tasks on 2
    // workers): both peers then re-arm it and carry on, as a stack would.
    let mut handled = 0;
    match peer {
        Peer::TokioTcp => {
            let (mut tlp, mut rto) = (
                Box::pin(tokio::time::sleep(TLP)),
                Box::pin(tokio::time::sleep(RTO)),
            );
            while handled < ROUNDS {
                let v = tokio::select! {
                    v = rx.recv() => v,
                    () = &mut tlp => { tlp.as_mut().reset(Instant::now() + TLP); continue }
                    () = &mut rto => { rto.as_mut().reset(Instant::now() + RTO); continue }
                };
                let Some(v) = v else { return };
                let now = Instant::now();
                tlp.as_mut().reset(now + TLP);
                rto.as_mut().reset(now + RTO);
                handled += 1;
                if tx.send(v + 1).await.is_err() {
                    return;
                }
            }
        }
        Peer::LazyTcp => {
            let mut timers = SlotTimer::<Tcp>::new();
            let mut batch = timers.batch_at(Instant::now());
            batch.set_after(Tcp::Tlp, TLP);
            batch.set_after(Tcp::Rto, RTO);
            while handled < ROUNDS {
                let v = tokio::select! {
                    v = rx.recv() => v,
                    expired = timers.expired() => {
                        let mut batch = timers.batch_at(Instant::now());
                        for kind in expired {
                            batch.set_after(kind, if kind == Tcp::Tlp { TLP } else { RTO });
                        }
                        continue;
                    }
                };
                let Some(v) = v else { return };
                let mut batch = timers.batch_at(Instant::now());
                batch.set_after(Tcp::Tlp, TLP);
                batch.set_after(Tcp::Rto, RTO);
                handled += 1;
                if tx.send(v + 1).await.is_err() {
                    return;
                }
            }
        }
        Peer::TokioIdle => {
            let mut idle = Box::pin(tokio::time::sleep(IDLE));
            while handled < ROUNDS {
                let v = tokio::select! {
                    v = rx.recv() => v,
                    () = &mut idle => { idle.as_mut().reset(Instant::now() + IDLE); continue }
                };
                let Some(v) = v else { return };
                idle.as_mut().reset(Instant::now() + IDLE);
                handled += 1;
                if tx.send(v + 1).await.is_err() {
                    return;
                }
            }
        }
        Peer::LazyIdle => {
            let mut idle = IdleTimeout::new(IDLE);
            while handled < ROUNDS {
                let v = tokio::select! {
                    v = rx.recv() => v,
                    () = &mut idle => { idle.touch(); continue }
                };
                let Some(v) = v else { return };
                idle.touch();
                handled += 1;
                if tx.send(v + 1).await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn workload(peer: Peer) {
    let mut tasks = Vec::with_capacity(PAIRS * 2);
    for _ in 0..PAIRS {
        let (a_tx, a_rx) = channel(1);
        let (b_tx, b_rx) = channel(1);
        tasks.push(tokio::spawn(task(peer, a_rx, b_tx, true)));
        tasks.push(tokio::spawn(task(peer, b_rx, a_tx, false)));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn multi_thread_messages(c: &mut Criterion) {
    let rt = multi_thread(2);
    let mut group = c.benchmark_group("multi_thread_messages");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements((PAIRS * 2) as u64 * ROUNDS as u64));
    for (name, peer) in [
        ("tcp/tokio_two_sleeps", Peer::TokioTcp),
        ("tcp/lazy_slot_timer", Peer::LazyTcp),
        ("idle/tokio_sleep_reset", Peer::TokioIdle),
        ("idle/lazy_idle_timeout", Peer::LazyIdle),
    ] {
        group.bench_function(name, |b| b.to_async(&rt).iter(|| workload(peer)));
    }
    group.finish();
}

criterion_group! { name = benches; config = config(); targets = multi_thread_messages }
criterion_main!(benches);
