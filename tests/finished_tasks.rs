//! Nothing of a finished task is kept: once every request is answered or has
//! elapsed, the memory the crate's timers keep is within a few KB of what tokio's
//! keep, whatever the size of the tasks' futures (a kept task waker keeps its task's
//! cell, the future inline). Its own test binary: it installs a counting global allocator.

mod common;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn live() -> isize {
    let stats = Region::new(GLOBAL).initial();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize
}

/// Pending at its first poll (it wakes its task), ready at its second.
struct PendingOnce(bool);
impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

const TASKS: usize = 256;
/// The requests' deadline (all are answered long before it).
const DEADLINE: Duration = Duration::from_millis(50);
/// The size of each task's future (held across the request), large and small. Large
/// stays under the size past which tokio boxes a spawned future apart from its task
/// cell (2 KiB in debug builds, 16 KiB in release): inline, the cell holds it.
const BIG: usize = 1_536;
const SMALL: usize = 16;

/// Runs `TASKS` tasks at once, each with a future of `N` bytes and one request
/// under `ours`' or tokio's `timeout`, until all are answered (or, if `expire`, all
/// elapsed) and joined.
async fn burst<const N: usize>(ours: bool, expire: bool) {
    // Every request stays pending until all are filed: each takes a slot of its own.
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let barrier = barrier.clone();
            // Expiring, spread over 32 ticks: each service wakes a few, as a server's
            // steady trickle of timeouts does.
            let spread = Duration::from_millis(i as u64 % 32);
            tokio::spawn(async move {
                let big = [7u8; N];
                if expire {
                    // Each request elapses: its waker goes through a service's list.
                    if ours {
                        lazy_deadline::timeout(DEADLINE + spread, std::future::pending::<()>())
                            .await
                            .unwrap_err();
                    } else {
                        tokio::time::timeout(DEADLINE + spread, std::future::pending::<()>())
                            .await
                            .unwrap_err();
                    }
                } else if ours {
                    lazy_deadline::timeout(DEADLINE, barrier.wait())
                        .await
                        .unwrap();
                } else {
                    tokio::time::timeout(DEADLINE, barrier.wait())
                        .await
                        .unwrap();
                }
                std::hint::black_box(&big);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// How much more memory is live once a burst of tasks with `N`-byte futures is over
/// (all answered and joined) than before it, on a fresh two-worker runtime (the
/// deadline sets' runtime: a current-thread runtime's timers are tokio's own
/// entries) whose timers have been used once already.
fn kept_after_a_burst<const N: usize>(ours: bool, expire: bool) -> isize {
    let runtime = common::two_workers();
    runtime.block_on(async {
        tokio::spawn(async move {
            let _ = lazy_deadline::timeout(Duration::from_secs(5), PendingOnce(false)).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), PendingOnce(false)).await;
        })
        .await
        .unwrap();
    });
    let before = live();
    runtime.block_on(burst::<N>(ours, expire));
    // Real time (a multi-thread runtime has no paused clock): past the requests'
    // deadline, whose expiry gives back what the workers' own answers have not yet
    // (a request answered on another worker than the one it was filed on).
    std::thread::sleep(DEADLINE + Duration::from_millis(100));
    let kept = live() - before;
    drop(runtime);
    kept
}

// One test function: the counter is process-wide, so nothing may run beside it.
#[test]
fn a_finished_task_is_not_kept_by_the_deadline_sets() {
    let tokio_big = kept_after_a_burst::<BIG>(false, false);
    let ours_small = kept_after_a_burst::<SMALL>(true, false);
    let ours_big = kept_after_a_burst::<BIG>(true, false);
    let (tokio_expired, ours_expired_small, ours_expired_big) = (
        kept_after_a_burst::<BIG>(false, true),
        kept_after_a_burst::<SMALL>(true, true),
        kept_after_a_burst::<BIG>(true, true),
    );

    // What the sets keep after a burst (slots, lanes) must not grow with the tasks'
    // futures: nothing of a finished task is kept. Kept cells would be TASKS * BIG
    // (384 KiB); the runtimes' own structures move the figures by tens of KiB.
    assert!(
        ours_big - ours_small <= (TASKS * BIG / 3) as isize,
        "after every request was answered, ours keeps {ours_big} B with {BIG} B futures \
         and {ours_small} B with {SMALL} B ones ({TASKS} tasks; tokio's: {tokio_big} B)"
    );
    // The same when every request elapses, a few per tick: each expired request's
    // waker passes through a service's list of wakers, whose room the thread keeps
    // (emptied) for its next service. Measured here: within about 1 KiB whatever the
    // futures' size; a list kept with its wakers in it, 27-250 KiB (the exact check
    // of that list is `core::service`'s unit test).
    assert!(
        ours_expired_big - ours_expired_small <= (TASKS * BIG / 8) as isize,
        "after every request elapsed, ours keeps {ours_expired_big} B with {BIG} B futures \
         and {ours_expired_small} B with {SMALL} B ones ({TASKS} tasks; tokio's: {tokio_expired} B)"
    );
    // The sets' own slots after a burst of TASKS at once (owner slots are kept for
    // the thread's next burst).
    assert!(
        ours_big <= tokio_big + 256 * 1024,
        "ours keeps {ours_big} B after the burst, tokio's {tokio_big} B"
    );
}
