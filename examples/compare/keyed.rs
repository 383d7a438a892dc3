//! The keyed drop-ins' rows of the headline table (see `main.rs`).

use crate::common::{Rng, PACKET};
use crate::table::Bench;
use lazy_deadline::{IdleQueue, Key};
use std::hint::black_box;
use std::task::{Context, Waker};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::time::DelayQueue;

/// The drop-in keyed timers at 100k keys: `DelayQueue` in place of tokio-util's,
/// `DelayMap` in place of a `HashMap` + `DelayQueue` pair, and an `IdleQueue` key
/// touched through a `KeyHandle` in place of a message to the owner.
pub fn drop_ins(bench: &mut Bench, base: Instant, keys_n: usize, timeout: Duration) {
    let section = "many keys in one task (100k keys), drop-ins";
    let mut peer = DelayQueue::with_capacity(keys_n);
    let peer_keys: Vec<_> = (0..keys_n as u32)
        .map(|i| peer.insert_at(i, base + timeout))
        .collect();
    let mut ours = lazy_deadline::DelayQueue::with_capacity(keys_n);
    let our_keys: Vec<_> = (0..keys_n as u32)
        .map(|i| ours.insert_at(i, base + timeout))
        .collect();
    let _ = peer.poll_expired(&mut Context::from_waker(Waker::noop()));
    let _ = ours.poll_expired(&mut Context::from_waker(Waker::noop()));
    let (mut rng_t, mut rng_o) = (Rng::new(9), Rng::new(9));
    let (mut now_t, mut now_o) = (base, base);
    bench.pair(
        section,
        "reset a random key later",
        1_000_000,
        ("tokio-util DelayQueue::reset_at", |n| {
            for _ in 0..n {
                now_t += PACKET;
                let key = &peer_keys[rng_t.below(keys_n as u64) as usize];
                peer.reset_at(key, black_box(now_t) + timeout);
            }
        }),
        ("lazy DelayQueue::reset_at", |n| {
            for _ in 0..n {
                now_o += PACKET;
                let key = &our_keys[rng_o.below(keys_n as u64) as usize];
                ours.reset_at(key, black_box(now_o) + timeout);
            }
        }),
    );
    drop((peer, peer_keys, ours, our_keys));

    let mut pair_queue = DelayQueue::with_capacity(keys_n);
    let pair_index: std::collections::HashMap<u64, _> = (0..keys_n as u64)
        .map(|id| (id, pair_queue.insert_at(id, base + timeout)))
        .collect();
    let mut map = lazy_deadline::DelayMap::with_capacity(keys_n);
    for id in 0..keys_n as u64 {
        map.insert_at(id, (), base + timeout);
    }
    let (mut rng_t, mut rng_o) = (Rng::new(9), Rng::new(9));
    let (mut now_t, mut now_o) = (base, base);
    bench.pair(
        section,
        "a message from a random peer (own id)",
        1_000_000,
        ("HashMap + DelayQueue::reset_at", |n| {
            for _ in 0..n {
                now_t += PACKET;
                if let Some(key) = pair_index.get(&rng_t.below(keys_n as u64)) {
                    pair_queue.reset_at(key, black_box(now_t) + timeout);
                }
            }
        }),
        ("DelayMap::reset_at", |n| {
            for _ in 0..n {
                now_o += PACKET;
                map.reset_at(&rng_o.below(keys_n as u64), black_box(now_o) + timeout);
            }
        }),
    );
    drop((pair_queue, pair_index, map));

    let mut queue = IdleQueue::with_capacity(timeout, keys_n);
    let keys: Vec<Key> = (0..keys_n as u32).map(|i| queue.insert(i)).collect();
    let handles: Vec<_> = keys.iter().map(|&k| queue.handle(k).unwrap()).collect();
    let mut owner = IdleQueue::with_capacity(timeout, keys_n);
    let owner_keys: Vec<Key> = (0..keys_n as u32).map(|i| owner.insert(i)).collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let (mut rng_t, mut rng_o) = (Rng::new(9), Rng::new(9));
    let (mut now_t, mut now_o) = (base, base);
    bench.pair(
        section,
        "touch a key from the task that sees its traffic",
        1_000_000,
        ("channel message, owner applies it", |n| {
            for _ in 0..n {
                now_t += PACKET;
                tx.send((rng_t.below(keys_n as u64) as usize, black_box(now_t)))
                    .unwrap();
                if let Ok((key, at)) = rx.try_recv() {
                    owner.touch_at(owner_keys[key], at);
                }
            }
        }),
        ("KeyHandle::touch_at", |n| {
            for _ in 0..n {
                now_o += PACKET;
                handles[rng_o.below(keys_n as u64) as usize].touch_at(black_box(now_o));
            }
        }),
    );
}
