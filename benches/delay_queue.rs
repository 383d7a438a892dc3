//! Group 9: the `DelayQueue` drop-in and `DelayMap`, against tokio-util's
//! `DelayQueue` and delay_map's `HashMapDelay` (a `HashMap` beside a tokio-util
//! `DelayQueue`, the pair many crates write by hand), at 1k / 100k / 1M resident keys.
//!
//! Criterion groups (one random key per iteration, uniformly):
//! - `delay_queue_reset_later/*`: `reset_at` to a deadline later than the key's.
//! - `delay_queue_reset_earlier/*`: `reset_at` to one earlier than the key's.
//! - `delay_queue_insert_remove/*`: `insert_at` + `remove` with the keys resident
//!   (per-request timeouts).
//! - `delay_map_reset/*`: a message from a random peer keyed by its own `u64` id:
//!   `DelayMap::reset`, `HashMapDelay::update_timeout`, a hand-written `HashMap<u64,
//!   Key>` + `DelayQueue::reset` (what the pair costs without delay_map), and the floor
//!   of one hash lookup plus one clock read.
//! - `delay_map_insert_remove/*`.
//!
//! After the groups, one run each (printed): 1M entries due together (total and the
//! longest single poll) and resident heap bytes per entry.

mod common;

use common::*;
use criterion::{criterion_group, BenchmarkId, Criterion};
use delay_map::HashMapDelay;
use lazy_deadline::DelayMap;
use std::collections::HashMap;
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

type Peer = tokio_util::time::DelayQueue<u32>;
type Ours = lazy_deadline::DelayQueue<u32>;

const TIMEOUT: Duration = Duration::from_secs(30);
const SIZES: [(usize, &str); 3] = [(1_000, "1k"), (100_000, "100k"), (1_000_000, "1M")];

fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

fn filled_ours(n: usize, base: Instant) -> (Ours, Vec<lazy_deadline::delay_queue::Key>) {
    let mut queue = Ours::with_capacity(n);
    let keys = (0..n as u32)
        .map(|i| queue.insert_at(i, base + TIMEOUT))
        .collect();
    let _ = queue.poll_expired(&mut noop_cx());
    (queue, keys)
}

fn filled_peer(n: usize, base: Instant) -> (Peer, Vec<tokio_util::time::delay_queue::Key>) {
    let mut queue = Peer::with_capacity(n);
    let keys = (0..n as u32)
        .map(|i| queue.insert_at(i, base + TIMEOUT))
        .collect();
    let _ = queue.poll_expired(&mut noop_cx());
    (queue, keys)
}

/// `reset_at` later (`step` > 0) or earlier (`step` < 0) than each key's deadline.
fn resets(c: &mut Criterion, group_name: &str, later: bool) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group(group_name);
    group.sample_size(20);
    // Later: deadlines climb from 30 s; earlier: they fall from an hour.
    let start = if later {
        TIMEOUT
    } else {
        Duration::from_secs(3600)
    };
    let next = move |base: Instant, i: &mut u64| {
        *i += 1;
        let offset = Duration::from_nanos(*i * 1_000);
        if later {
            base + start + offset
        } else {
            base + start - offset
        }
    };
    for (n, label) in SIZES {
        let base = Instant::now();
        let (mut ours, keys) = filled_ours(n, base);
        if !later {
            for key in &keys {
                ours.reset_at(key, base + start);
            }
        }
        let (mut rng, mut i) = (Rng::new(7), 0u64);
        group.bench_with_input(BenchmarkId::new("lazy_delay_queue", label), &n, |b, &n| {
            b.iter(|| {
                let when = next(base, &mut i);
                ours.reset_at(&keys[rng.below(n as u64) as usize], black_box(when));
            })
        });
        drop((ours, keys));
        let (mut peer, keys) = filled_peer(n, base);
        if !later {
            for key in &keys {
                peer.reset_at(key, base + start);
            }
        }
        let (mut rng, mut i) = (Rng::new(7), 0u64);
        group.bench_with_input(
            BenchmarkId::new("tokio_util_delay_queue", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    let when = next(base, &mut i);
                    peer.reset_at(&keys[rng.below(n as u64) as usize], black_box(when));
                })
            },
        );
        drop((peer, keys));
        // The floor of a later reset: a store into a record of our slot's size,
        // reached through a table of keys as every row above reaches its entry.
        let mut table = vec![(base, 0u64); n];
        let slots: Vec<u32> = (0..n as u32).collect();
        let (mut rng, mut i) = (Rng::new(7), 0u64);
        group.bench_with_input(
            BenchmarkId::new("floor_store_via_key", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    let when = next(base, &mut i);
                    let slot = slots[rng.below(n as u64) as usize] as usize;
                    table[black_box(slot)].0 = black_box(when);
                })
            },
        );
    }
    group.finish();
}

fn reset_later(c: &mut Criterion) {
    resets(c, "delay_queue_reset_later", true);
}

fn reset_earlier(c: &mut Criterion) {
    resets(c, "delay_queue_reset_earlier", false);
}

fn insert_remove(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group("delay_queue_insert_remove");
    group.sample_size(20);
    for (n, label) in SIZES {
        let base = Instant::now();
        let (mut ours, keys) = filled_ours(n, base);
        let mut now = base;
        group.bench_with_input(BenchmarkId::new("lazy_delay_queue", label), &n, |b, _| {
            b.iter(|| {
                now += PACKET;
                let key = ours.insert_at(1, black_box(now) + TIMEOUT);
                black_box(ours.remove(&key));
            })
        });
        drop((ours, keys));
        let (mut peer, keys) = filled_peer(n, base);
        let mut now = base;
        group.bench_with_input(
            BenchmarkId::new("tokio_util_delay_queue", label),
            &n,
            |b, _| {
                b.iter(|| {
                    now += PACKET;
                    let key = peer.insert_at(1, black_box(now) + TIMEOUT);
                    black_box(peer.remove(&key));
                })
            },
        );
        drop((peer, keys));
    }
    group.finish();
}

/// A `HashMap<u64, Key>` beside a `DelayQueue` of type `$queue` (both queues have the
/// same API), reset per message through the map.
macro_rules! hand_written_pair {
    ($group:expr, $name:expr, $queue:ty, $n:expr, $label:expr) => {{
        let n = $n;
        let mut queue = <$queue>::with_capacity(n);
        let index: HashMap<u64, _> = (0..n as u64)
            .map(|id| (id, queue.insert(id as u32, TIMEOUT)))
            .collect();
        let _ = queue.poll_expired(&mut noop_cx());
        let mut rng = Rng::new(11);
        $group.bench_with_input(BenchmarkId::new($name, $label), &n, |b, &n| {
            b.iter(|| {
                if let Some(key) = index.get(&rng.below(n as u64)) {
                    queue.reset(key, TIMEOUT);
                }
            })
        });
    }};
}

fn delay_map_reset(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group("delay_map_reset");
    group.sample_size(20);
    for (n, label) in SIZES {
        let mut ours = DelayMap::with_capacity(n);
        for id in 0..n as u64 {
            ours.insert(id, (), TIMEOUT);
        }
        let _ = ours.poll_expired(&mut noop_cx());
        let mut rng = Rng::new(11);
        group.bench_with_input(BenchmarkId::new("lazy_delay_map", label), &n, |b, &n| {
            b.iter(|| black_box(ours.reset(&rng.below(n as u64), TIMEOUT)))
        });
        drop(ours);

        let mut peer = HashMapDelay::with_capacity(TIMEOUT, n);
        for id in 0..n as u64 {
            peer.insert(id, ());
        }
        let _ = peer.poll_expired(&mut noop_cx());
        let mut rng = Rng::new(11);
        group.bench_with_input(
            BenchmarkId::new("delay_map_hashmapdelay", label),
            &n,
            |b, &n| b.iter(|| black_box(peer.update_timeout(&rng.below(n as u64), TIMEOUT))),
        );
        drop(peer);

        // The hand-written pair, with tokio-util's queue and with ours.
        hand_written_pair!(group, "hashmap_plus_tokio_util", Peer, n, label);
        hand_written_pair!(group, "hashmap_plus_lazy_delay_queue", Ours, n, label);

        // The floor: one hash lookup and one clock read, storing the deadline.
        let mut map: HashMap<u64, Instant> = (0..n as u64).map(|id| (id, Instant::now())).collect();
        let mut rng = Rng::new(11);
        group.bench_with_input(
            BenchmarkId::new("floor_lookup_and_clock", label),
            &n,
            |b, &n| {
                b.iter(|| {
                    if let Some(at) = map.get_mut(&rng.below(n as u64)) {
                        *at = black_box(Instant::now() + TIMEOUT);
                    }
                })
            },
        );
    }
    group.finish();
}

fn delay_map_insert_remove(c: &mut Criterion) {
    let rt = current_thread();
    let _inside = rt.enter();
    let mut group = c.benchmark_group("delay_map_insert_remove");
    group.sample_size(20);
    for (n, label) in SIZES {
        let mut ours = DelayMap::with_capacity(n);
        for id in 0..n as u64 {
            ours.insert(id, (), TIMEOUT);
        }
        let _ = ours.poll_expired(&mut noop_cx());
        let mut id = n as u64;
        group.bench_with_input(BenchmarkId::new("lazy_delay_map", label), &n, |b, _| {
            b.iter(|| {
                id += 1;
                ours.insert(id, (), TIMEOUT);
                black_box(ours.remove(&id));
            })
        });
        drop(ours);
        let mut peer = HashMapDelay::with_capacity(TIMEOUT, n);
        for id in 0..n as u64 {
            peer.insert(id, ());
        }
        let _ = peer.poll_expired(&mut noop_cx());
        let mut id = n as u64;
        group.bench_with_input(
            BenchmarkId::new("delay_map_hashmapdelay", label),
            &n,
            |b, _| {
                b.iter(|| {
                    id += 1;
                    peer.insert(id, ());
                    black_box(peer.remove(&id));
                })
            },
        );
    }
    group.finish();
}

/// 1M entries due together: total drain time and the longest single poll.
fn mass_expiry() {
    const N: usize = 1_000_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(tokio::task::unconstrained(async {
        let base = Instant::now();
        let drain = |poll: &mut dyn FnMut() -> Poll<bool>| {
            let (mut longest, mut count) = (Duration::ZERO, 0usize);
            let started = std::time::Instant::now();
            loop {
                let t = std::time::Instant::now();
                let out = poll();
                longest = longest.max(t.elapsed());
                match out {
                    Poll::Ready(true) => count += 1,
                    Poll::Ready(false) => break,
                    Poll::Pending => {}
                }
            }
            (started.elapsed(), longest, count)
        };
        let mut ours = Ours::with_capacity(N);
        for i in 0..N as u32 {
            ours.insert_at(i, base + Duration::from_micros(u64::from(i % 1000)));
        }
        let mut peer = Peer::with_capacity(N);
        for i in 0..N as u32 {
            peer.insert_at(i, base + Duration::from_micros(u64::from(i % 1000)));
        }
        tokio::time::advance(Duration::from_millis(5)).await;
        let (ours_total, ours_longest, n1) =
            drain(&mut || ours.poll_expired(&mut noop_cx()).map(|e| e.is_some()));
        let (peer_total, peer_longest, n2) =
            drain(&mut || peer.poll_expired(&mut noop_cx()).map(|e| e.is_some()));
        assert_eq!((n1, n2), (N, N));
        record_drain("delay_queue/mass_expiry/tokio_util", peer_total, peer_longest);
        record_drain("delay_queue/mass_expiry/ours", ours_total, ours_longest);
        println!(
            "mass expiry, 1M entries due together: total tokio-util {:.1} ms | ours {:.1} ms ({:.2}x); longest poll tokio-util {:.1} µs | ours {:.1} µs",
            peer_total.as_secs_f64() * 1e3,
            ours_total.as_secs_f64() * 1e3,
            peer_total.as_secs_f64() / ours_total.as_secs_f64(),
            peer_longest.as_secs_f64() * 1e6,
            ours_longest.as_secs_f64() * 1e6,
        );
        let mut map = DelayMap::with_capacity(N);
        for i in 0..N as u64 {
            map.insert(i, (), Duration::from_micros(i % 1000));
        }
        let mut hmd = HashMapDelay::with_capacity(Duration::from_micros(500), N);
        for i in 0..N as u64 {
            hmd.insert_at(i, (), Duration::from_micros(i % 1000));
        }
        tokio::time::advance(Duration::from_millis(5)).await;
        let (map_total, map_longest, _) =
            drain(&mut || map.poll_expired(&mut noop_cx()).map(|e| e.is_some()));
        let (hmd_total, hmd_longest, _) =
            drain(&mut || hmd.poll_expired(&mut noop_cx()).map(|e| e.is_some()));
        record_drain("delay_map/mass_expiry/hashmapdelay", hmd_total, hmd_longest);
        record_drain("delay_map/mass_expiry/ours", map_total, map_longest);
        println!(
            "mass expiry, 1M keys due together: total HashMapDelay {:.1} ms | DelayMap {:.1} ms ({:.2}x); longest poll HashMapDelay {:.1} µs | DelayMap {:.1} µs",
            hmd_total.as_secs_f64() * 1e3,
            map_total.as_secs_f64() * 1e3,
            hmd_total.as_secs_f64() / map_total.as_secs_f64(),
            hmd_longest.as_secs_f64() * 1e6,
            map_longest.as_secs_f64() * 1e6,
        );
    }));
}

/// Resident bytes per entry at 100k entries: the process's RSS growth while one
/// structure is built, each in a fresh process of this same binary (a freed
/// structure's pages stay with the allocator and would hide the next one's).
fn memory() {
    let mut line = Vec::new();
    let probe = |which: &str| -> f64 {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("LAZY_DEADLINE_MEMORY_PROBE", which)
            .output()
            .expect("the memory probe runs");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(f64::NAN)
    };
    let peer = probe("tokio_util");
    let ours = probe("ours");
    let hmd = probe("hashmapdelay");
    let map = probe("delay_map");
    for (who, bytes) in [
        ("tokio_util", peer),
        ("ours", ours),
        ("hashmapdelay", hmd),
        ("delay_map", map),
    ] {
        record_value(&format!("delay_queue/memory/{who}/bytes_per_entry"), bytes);
    }
    line.push(format!(
        "resident bytes per entry (100k, u32 values, RSS growth): tokio-util DelayQueue {peer:.0} | ours {ours:.0} ({:.2}x); HashMapDelay<u64, ()> {hmd:.0} | DelayMap {map:.0} ({:.2}x)",
        ours / peer,
        map / hmd,
    ));
    println!("{}", line.join("\n"));
}

/// One structure of 100k entries in this process; prints its bytes per entry.
fn memory_probe(which: &str) {
    const N: usize = 100_000;
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let before = rss_bytes().unwrap_or(0);
    let held: Box<dyn std::any::Any> = match which {
        "tokio_util" => Box::new(filled_peer(N, base)),
        "ours" => Box::new(filled_ours(N, base)),
        "hashmapdelay" => {
            let mut m = HashMapDelay::new(TIMEOUT);
            for id in 0..N as u64 {
                m.insert(id, ());
            }
            Box::new(m)
        }
        _ => {
            let mut m = DelayMap::new();
            for id in 0..N as u64 {
                m.insert(id, (), TIMEOUT);
            }
            Box::new(m)
        }
    };
    let after = rss_bytes().unwrap_or(0);
    println!("{}", after.saturating_sub(before) as f64 / N as f64);
    drop(held);
}

criterion_group! {
    name = benches;
    config = config();
    targets = reset_later, reset_earlier, insert_remove, delay_map_reset, delay_map_insert_remove
}

fn main() {
    if let Ok(which) = std::env::var("LAZY_DEADLINE_MEMORY_PROBE") {
        memory_probe(&which);
        return;
    }
    // A name filter (`cargo bench --bench delay_queue -- reset`) runs only criterion;
    // LAZY_DEADLINE_PRINTED_ONLY=1 only the printed rows.
    if std::env::var_os("LAZY_DEADLINE_PRINTED_ONLY").is_some() {
        memory();
        mass_expiry();
        return;
    }
    let everything = !std::env::args().skip(1).any(|arg| !arg.starts_with('-'));
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
    if everything {
        memory();
        mass_expiry();
    }
}
