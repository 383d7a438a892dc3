//! Memory stays flat under millions of answered requests with long deadlines: a
//! request answered in time gives its place in the deadline set back at once, not
//! at its deadline an hour later. Its own test binary: it counts the allocator's
//! live bytes.

mod common;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn live() -> usize {
    let stats = Region::new(GLOBAL).initial();
    stats.bytes_allocated - stats.bytes_deallocated
}

/// Pending once (so the timeout files its deadline), then ready.
async fn answered_after_one_turn() {
    let mut turned = false;
    std::future::poll_fn(|cx| {
        if turned {
            std::task::Poll::Ready(())
        } else {
            turned = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}

#[test]
fn two_million_answered_requests_under_hour_long_deadlines_keep_memory_flat() {
    const HOUR: Duration = Duration::from_secs(3600);
    common::paused_runtime().block_on(async {
        // Ten requests in flight at a time, each answered after its first pending poll.
        let round = || async {
            let mut batch = Vec::with_capacity(10);
            for _ in 0..10 {
                batch.push(lazy_deadline::timeout(HOUR, answered_after_one_turn()));
            }
            for request in batch {
                assert!(request.await.is_ok());
            }
        };
        for _ in 0..10_000 {
            round().await; // warm-up: the set, its slab and heap reach their size
        }
        let before = live();
        for _ in 0..200_000 {
            round().await; // two million requests
        }
        let grown = live().saturating_sub(before);
        assert!(
            grown < 64 * 1024,
            "memory grew by {grown} bytes over two million answered requests"
        );
    });
}
