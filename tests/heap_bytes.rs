//! `heap_bytes()` against what the allocator really handed out, for the queues and
//! their side tables. Its own test binary: it installs a counting global allocator.

mod common;

use lazy_deadline::{DelayMap, DelayQueue, IdleQueue};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes live now (a realloc counts its growth as allocated, its shrink as freed).
fn live() -> usize {
    let stats = Region::new(GLOBAL).initial();
    stats.bytes_allocated - stats.bytes_deallocated
}

/// `heap_bytes` must account for what growing the structure allocated, within a
/// small slack for allocator-size rounding the formula cannot see.
fn assert_accounts(what: &str, allocated: usize, reported: usize) {
    let slack = allocated / 100 + 64;
    assert!(
        allocated.abs_diff(reported) <= slack,
        "{what}: allocated {allocated} bytes, heap_bytes grew by {reported}"
    );
}

/// Its own `main` (`harness = false` in Cargo.toml): the counter is process-wide, and
/// libtest's main thread does its own bookkeeping (its table of running tests)
/// while a test runs, at a time the load decides, which a measured window caught
/// once (900 bytes) on a busy machine. Here nothing else runs in the process.
fn main() {
    heap_bytes_matches_the_allocator();
    println!("heap_bytes_matches_the_allocator: ok");
}

fn heap_bytes_matches_the_allocator() {
    let rt = common::paused_runtime();
    let _inside = rt.enter();

    // IdleQueue with 10,000 keys, every one with a handle.
    let mut queue = IdleQueue::new(Duration::from_secs(30));
    let mut keys = Vec::with_capacity(10_000);
    let mut handles = Vec::with_capacity(10_000);
    let (before, reported_before) = (live(), queue.heap_bytes());
    for i in 0..10_000u32 {
        keys.push(queue.insert(i));
    }
    let after_keys = live();
    assert_accounts(
        "IdleQueue",
        after_keys - before,
        queue.heap_bytes() - reported_before,
    );
    for &key in &keys {
        handles.push(queue.handle(key).unwrap());
    }
    let after_handles = live();
    assert_accounts(
        "IdleQueue with handles",
        after_handles - before,
        queue.heap_bytes() - reported_before,
    );
    assert!(
        after_handles - after_keys > 400_000,
        "10,000 handles allocate their words and side table"
    );
    drop(handles);
    drop(queue);

    // DelayQueue, then compacted after most entries left, then emptied.
    let (before, mut delay) = (live(), DelayQueue::new());
    let keys: Vec<_> = (0..20_000u32)
        .map(|i| delay.insert(i, Duration::from_secs(u64::from(i) + 1)))
        .collect();
    for key in &keys[..15_000] {
        delay.remove(key);
    }
    delay.compact();
    let keys_bytes = keys.capacity() * std::mem::size_of_val(&keys[0]);
    assert_accounts(
        "compacted DelayQueue",
        live() - before - keys_bytes,
        delay.heap_bytes(),
    );
    // Emptied and compacted again: nothing is held, the remap tables included.
    for key in &keys[15_000..] {
        delay.remove(key);
    }
    delay.compact();
    assert_eq!(delay.heap_bytes(), 0);
    assert_accounts("emptied DelayQueue", live() - before - keys_bytes, 0);
    drop(keys);
    drop(delay);

    // DelayMap: pairs, records and the index.
    let (before, mut map) = (live(), DelayMap::new());
    for i in 0..10_000u64 {
        map.insert(i, i, Duration::from_secs(i + 1));
    }
    assert_accounts("DelayMap", live() - before, map.heap_bytes());
}
