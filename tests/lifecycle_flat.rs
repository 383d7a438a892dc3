//! The deadline sets' lifecycle, measured: runtimes built and dropped in turn,
//! blocking threads that come and go, and a burst of requests answered, leave the
//! process's file descriptors and live heap bytes where they were, as tokio's own
//! timers do.
//!
//! Each test re-runs itself alone in a child process under `ulimit -n 256` (the
//! figures are process-wide, and a leak of a runtime's two descriptors per runtime
//! then also fails as tokio's "Too many open files" long before the end), counting
//! live bytes with a counting allocator and open descriptors in `/proc/self/fd`.
//! The parent only waits, under a watchdog, and reports the child's output.

mod common;

use common::ms;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::future::{pending, Future};
use std::process::Command;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Set in the child process.
const CHILD: &str = "LAZY_DEADLINE_LIFECYCLE_CHILD";

/// Runs test `name` again in a child process, alone, under `ulimit -n 256`; `true`
/// when this is that child (run the test's body), `false` in the parent (done).
fn in_child(name: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && exec \"$0\" --exact {name} --test-threads=1 --nocapture"
        ))
        .arg(exe)
        .env(CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let started = Instant::now();
    // The watchdog: a child that hangs (a lost wake in a drop) fails with a name.
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(240) {
            let _ = child.kill();
            panic!("{name}: the child still ran after 240 s (a hang)");
        }
        std::thread::sleep(ms(20));
    }
    let out = child.wait_with_output().expect("output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "{name} failed in its child process:\n{text}"
    );
    assert!(
        text.contains("1 passed"),
        "{name} did not run in the child:\n{text}"
    );
    false
}

/// Descriptors open in this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// Heap bytes allocated and not freed.
fn live_bytes() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64 + stats.bytes_reallocated as i64
}

/// Every lazy timer, as a test that uses them would: a sleep that fires (the set's
/// entry fires), a timeout that elapses and one answered, an interval's ticks, and
/// timers still waiting in tasks and on a blocking thread when the runtime drops.
async fn use_every_timer() {
    lazy_deadline::sleep(ms(1)).await;
    assert!(lazy_deadline::timeout(ms(1), pending::<()>())
        .await
        .is_err());
    assert_eq!(lazy_deadline::timeout(ms(50), async { 7 }).await, Ok(7));
    let mut interval = lazy_deadline::interval(ms(1));
    interval.tick().await;
    interval.tick().await;
    tokio::spawn(lazy_deadline::sleep(Duration::from_secs(3600)));
    tokio::spawn(lazy_deadline::timeout(
        Duration::from_secs(3600),
        pending::<()>(),
    ));
    tokio::task::yield_now().await;
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime (no descriptors left?)")
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime (no descriptors left?)")
}

/// One runtime of each kind, built, used, dropped.
fn cycle() {
    let rt = current_thread();
    rt.block_on(use_every_timer());
    drop(rt);
    let rt = multi_thread();
    rt.block_on(use_every_timer());
    let handle = rt.handle().clone();
    // A blocking thread with a timer of its own, exiting with the runtime.
    rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            handle.block_on(lazy_deadline::sleep(ms(1)));
        })
        .await
        .unwrap();
    });
    drop(rt);
}

#[test]
fn thousands_of_runtimes_in_turn_keep_descriptors_and_memory_flat() {
    if !in_child("thousands_of_runtimes_in_turn_keep_descriptors_and_memory_flat") {
        return;
    }
    for _ in 0..50 {
        cycle();
    }
    let (fds, bytes) = (open_fds(), live_bytes());
    const CYCLES: usize = 1_000; // 2,000 runtimes
    for i in 0..CYCLES {
        cycle();
        assert_eq!(
            open_fds(),
            fds,
            "descriptors grew after {} runtimes",
            2 * (i + 1)
        );
    }
    let grown = live_bytes() - bytes;
    println!(
        "2,000 runtimes: descriptors {fds} -> {}, live bytes grew by {grown}",
        open_fds()
    );
    assert!(
        grown <= 64 * 1024,
        "live bytes grew by {grown} over 2,000 runtimes"
    );
}

#[test]
fn a_dropped_runtime_gives_its_descriptors_back_at_once() {
    if !in_child("a_dropped_runtime_gives_its_descriptors_back_at_once") {
        return;
    }
    cycle(); // warm-up: thread-locals, the pool
    let fds = open_fds();
    let rt = multi_thread();
    rt.block_on(use_every_timer());
    assert!(open_fds() > fds, "a runtime holds descriptors");
    drop(rt);
    // No later runtime on this thread, no later timer: nothing of ours holds it.
    assert_eq!(open_fds(), fds, "descriptors still held after the drop");
}

#[test]
fn blocking_threads_that_come_and_go_leave_nothing_behind() {
    if !in_child("blocking_threads_that_come_and_go_leave_nothing_behind") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(4)
        .thread_keep_alive(ms(1))
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let round = move |handle: tokio::runtime::Handle| async move {
        let jobs: Vec<_> = (0..4)
            .map(|_| {
                let inner = handle.clone();
                tokio::task::spawn_blocking(move || {
                    inner.block_on(async {
                        lazy_deadline::sleep(ms(1)).await;
                        let _ = lazy_deadline::timeout(ms(1), pending::<()>()).await;
                    })
                })
            })
            .collect();
        for job in jobs {
            job.await.unwrap();
        }
        // Long enough for the idle blocking threads to exit.
        tokio::time::sleep(ms(15)).await;
    };
    rt.block_on(async {
        for _ in 0..20 {
            round(handle.clone()).await;
        }
    });
    let bytes = live_bytes();
    rt.block_on(async {
        for _ in 0..200 {
            round(handle.clone()).await;
        }
    });
    let grown = live_bytes() - bytes;
    println!("800 blocking threads: live bytes grew by {grown}");
    assert!(
        grown <= 64 * 1024,
        "live bytes grew by {grown} over 800 blocking threads"
    );
}

/// 200,000 requests in flight at once, then all answered: what stays.
fn burst(lazy: bool) -> i64 {
    let rt = current_thread();
    rt.block_on(async move {
        // Both kinds of timer made once in this runtime first (its set, tokio's
        // wheel), so that only what the burst leaves is counted.
        let _ = lazy_deadline::timeout(ms(1), async {}).await;
        let _ = tokio::time::timeout(ms(1), async {}).await;
        let before = live_bytes();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if lazy {
            let mut all: Vec<_> = (0..200_000)
                .map(|_| {
                    Box::pin(lazy_deadline::timeout(
                        Duration::from_secs(5),
                        pending::<()>(),
                    ))
                })
                .collect();
            for timeout in &mut all {
                assert!(timeout.as_mut().poll(&mut cx).is_pending());
            }
        } else {
            let mut all: Vec<_> = (0..200_000)
                .map(|_| {
                    Box::pin(tokio::time::timeout(
                        Duration::from_secs(5),
                        pending::<()>(),
                    ))
                })
                .collect();
            for timeout in &mut all {
                assert!(timeout.as_mut().poll(&mut cx).is_pending());
            }
        }
        // All answered (dropped); one more request afterwards.
        let _ = lazy_deadline::timeout(ms(1), async {}).await;
        let _ = tokio::time::timeout(ms(1), async {}).await;
        live_bytes() - before
    })
}

#[test]
fn a_burst_of_requests_answered_leaves_little_behind() {
    if !in_child("a_burst_of_requests_answered_leaves_little_behind") {
        return;
    }
    let _ = burst(true); // warm-up: the set and its pool exist from here on
    let ours = burst(true);
    let tokio = burst(false);
    println!("after 200,000 requests in flight at once, answered: ours keeps {ours} bytes, tokio keeps {tokio}");
    assert!(ours <= 64 * 1024, "ours keeps {ours} bytes after the burst");
}
