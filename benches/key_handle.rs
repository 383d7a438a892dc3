//! Group 10: touching a key owned by another task (`KeyHandle`), against an
//! `IdleTimeout` per key touched through its `ActivityHandle`, a channel message to
//! the owner per touch, and a flag per key that the owner sweeps.
//!
//! - `key_handle_touch/*/{1k,100k,1M}` (criterion): one touch of a uniformly random
//!   key's handle. The channel row sends `(key, now)` on a tokio unbounded channel
//!   and the owner's side receives and applies it (`IdleQueue::touch_at`) in the same
//!   iteration: the whole cost of the pattern on one core.
//! - `sessions` (printed, one run): 100k sessions on a 2-worker runtime, touched by
//!   session tasks while the owner waits for expiries, against one `IdleTimeout` per
//!   session awaited by its own task: runtime timer registrations and CPU per touch.

mod common;

use common::*;
use criterion::{criterion_group, BenchmarkId, Criterion};
use lazy_deadline::{IdleQueue, IdleTimeout, KeyHandle};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const TIMEOUT: Duration = Duration::from_secs(30);
const SIZES: [(usize, &str); 3] = [(1_000, "1k"), (100_000, "100k"), (1_000_000, "1M")];

fn touch(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group("key_handle_touch");
    group.sample_size(20);
    for (n, label) in SIZES {
        let base = Instant::now();
        let mut queue = IdleQueue::with_capacity(TIMEOUT, n);
        let handles: Vec<KeyHandle> = (0..n as u32)
            .map(|i| {
                let key = queue.insert(i);
                queue.handle(key).unwrap()
            })
            .collect();
        let (mut rng, mut now) = (Rng::new(5), base);
        group.bench_with_input(
            BenchmarkId::new("key_handle_touch_at", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += PACKET;
                    black_box(handles[rng.below(n as u64) as usize].touch_at(black_box(now)))
                })
            },
        );
        drop((queue, handles));

        let timers: Vec<IdleTimeout> = (0..n).map(|_| IdleTimeout::new(TIMEOUT)).collect();
        let handles: Vec<_> = timers.iter().map(IdleTimeout::handle).collect();
        let (mut rng, mut now) = (Rng::new(5), base);
        group.bench_with_input(
            BenchmarkId::new("activity_handle_per_key", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    now += PACKET;
                    handles[rng.below(n as u64) as usize].touch_at(black_box(now));
                })
            },
        );
        drop((timers, handles));

        let mut queue = IdleQueue::with_capacity(TIMEOUT, n);
        let keys: Vec<_> = (0..n as u32).map(|i| queue.insert(i)).collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (mut rng, mut now) = (Rng::new(5), base);
        group.bench_with_input(BenchmarkId::new("channel_to_owner", label), &n, |b, &n| {
            b.iter(|| {
                now += PACKET;
                tx.send((rng.below(n as u64) as usize, black_box(now)))
                    .unwrap();
                if let Ok((key, at)) = rx.try_recv() {
                    queue.touch_at(keys[key], at);
                }
            })
        });
        drop((queue, keys, tx, rx));

        let flags: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
        let mut rng = Rng::new(5);
        group.bench_with_input(BenchmarkId::new("flag_per_key", label), &n, |b, &n| {
            b.iter(|| flags[rng.below(n as u64) as usize].store(true, Ordering::Relaxed))
        });
        // The sweep the flag pattern needs once per interval, over every key.
        let started = std::time::Instant::now();
        let live = flags
            .iter()
            .filter(|f| f.swap(false, Ordering::Relaxed))
            .count();
        let sweep_ms = started.elapsed().as_secs_f64() * 1e3;
        record_value(&format!("key_handle/flag_sweep_ms/{label}"), sweep_ms);
        println!(
            "flag_per_key/{label}: one sweep over {n} keys takes {:.2} ms ({live} flagged)",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    group.finish();
}

/// User + system CPU time of this process (Linux, 10 ms resolution).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum());
    Duration::from_millis(ticks * 10)
}

/// `TASKS` session tasks touching random sessions through `touch(index, now)` (256
/// per clock reading, then a yield) for `run`, then `stop` is raised. Returns the
/// touches made and the process CPU time they took.
async fn touch_sessions(
    run: Duration,
    stop: &Arc<AtomicBool>,
    touch: impl Fn(usize, Instant) + Send + Sync + 'static,
) -> (u64, Duration) {
    let touch = Arc::new(touch);
    let touches = Arc::new(AtomicU64::new(0));
    let cpu_start = cpu_time();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (touch, stop, touches) = (touch.clone(), stop.clone(), touches.clone());
            tokio::spawn(async move {
                let mut rng = Rng::new(t as u64 + 1);
                let mut count = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    for _ in 0..256 {
                        touch(rng.below(SESSIONS as u64) as usize, now);
                    }
                    count += 256;
                    tokio::task::yield_now().await;
                }
                touches.fetch_add(count, Ordering::Relaxed);
            })
        })
        .collect();
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    (touches.load(Ordering::Relaxed), cpu_time() - cpu_start)
}

const SESSIONS: usize = 100_000;
const TASKS: usize = 64;

/// 100k sessions on a 2-worker runtime for `secs` seconds of traffic.
fn sessions(secs: f64) {
    let rt = multi_thread(2);
    let run = Duration::from_secs_f64(secs);
    // Ours: one owner with one IdleQueue; session tasks touch through handles.
    let (registrations, touches, cpu) = rt.block_on(async {
        let mut queue = IdleQueue::with_capacity(TIMEOUT, SESSIONS);
        let handles: Arc<Vec<KeyHandle>> = Arc::new(
            (0..SESSIONS as u32)
                .map(|i| {
                    let key = queue.insert(i);
                    queue.handle(key).unwrap()
                })
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let owner = {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::select! {
                        _ = queue.expired() => {}
                        () = tokio::time::sleep(Duration::from_millis(10)) => {}
                    }
                }
                queue.stats().registrations
            })
        };
        let (touches, cpu) = touch_sessions(run, &stop, move |i, now| {
            handles[i].touch_at(now);
        })
        .await;
        (owner.await.unwrap(), touches, cpu)
    });
    // Peer: an IdleTimeout per session, each awaited by its own task, touched by the
    // session tasks through ActivityHandles (the lowest-cost per-session timer here).
    let (peer_registrations, peer_touches, peer_cpu) = rt.block_on(async {
        let mut handles = Vec::with_capacity(SESSIONS);
        let mut waiters = Vec::with_capacity(SESSIONS);
        let stop = Arc::new(tokio::sync::Notify::new());
        for _ in 0..SESSIONS {
            let mut idle = IdleTimeout::new(TIMEOUT);
            handles.push(idle.handle());
            let stop = stop.clone();
            waiters.push(tokio::spawn(async move {
                tokio::select! {
                    () = &mut idle => {}
                    () = stop.notified() => {}
                }
                idle.stats().registrations
            }));
        }
        let handles = Arc::new(handles);
        tokio::time::sleep(Duration::from_millis(100)).await; // every waiter polled once
        let flag = Arc::new(AtomicBool::new(false));
        let (touches, cpu) = touch_sessions(run, &flag, move |i, now| {
            handles[i].touch_at(now);
        })
        .await;
        stop.notify_waiters();
        let mut registrations = 0;
        for waiter in waiters {
            registrations += waiter.await.unwrap();
        }
        (registrations, touches, cpu)
    });
    let per = |cpu: Duration, n: u64| cpu.as_secs_f64() * 1e9 / n.max(1) as f64;
    for (who, regs, cpu_per_touch) in [
        (
            "idle_timeout_per_session",
            peer_registrations,
            per(peer_cpu, peer_touches),
        ),
        ("idle_queue_key_handle", registrations, per(cpu, touches)),
    ] {
        let key = format!("key_handle/sessions/{who}");
        record_value(&format!("{key}/registrations"), regs);
        record_value(&format!("{key}/cpu_ns_per_touch"), cpu_per_touch);
    }
    record_value("key_handle/sessions/seconds", secs);
    println!(
        "sessions: 100k on 2 workers, {secs:.0} s of touches from {TASKS} tasks: runtime timer registrations IdleTimeout per session {peer_registrations} | IdleQueue + KeyHandle {registrations} ({:.0}x fewer); CPU per touch {:.1} ns | {:.1} ns ({:.2}x)",
        peer_registrations as f64 / registrations.max(1) as f64,
        per(peer_cpu, peer_touches),
        per(cpu, touches),
        per(peer_cpu, peer_touches) / per(cpu, touches),
    );
}

criterion_group! { name = benches; config = config(); targets = touch }

fn main() {
    // A name filter (`cargo bench --bench key_handle -- touch`) runs only criterion.
    let everything = !std::env::args().skip(1).any(|arg| !arg.starts_with('-'));
    benches();
    Criterion::default().configure_from_args().final_summary();
    if everything {
        let secs = std::env::var("KEY_HANDLE_SESSIONS_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3.0);
        sessions(secs);
    }
}
