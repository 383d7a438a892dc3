//! Stress of the per-thread deadline sets, in real time on purpose (a few seconds):
//! runtimes of two workers built and dropped in turn, each with 2,000 tasks that
//! move between workers issuing requests under `timeout`, under a fresh `sleep` in a
//! `select!`, and under one `Sleep` reset per request (later and earlier); futures
//! polled once and dropped on other threads while their deadline fires; timeouts on
//! blocking threads that then exit. Checked: nothing elapses before its deadline,
//! nothing is lost (every task finishes, bounded), and lateness stays under a
//! generous bound (shared CI machines stall); it prints the p50/p99 lateness seen.

mod common;

use common::{ms, Rng};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const TASKS: u64 = 2_000;
const REQUESTS: u64 = 10;
/// Far above anything a healthy run shows; it only catches a lost re-arm.
const LATENESS_BOUND: Duration = Duration::from_millis(500);
/// The whole round, bounded: a lost wake shows as a hang.
const HANG: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Seen {
    /// (kind, deadline, elapsed at) of every deadline that fired before its time.
    early: Vec<(&'static str, Duration, Duration)>,
    /// How late each elapsed deadline resolved.
    lateness: Vec<Duration>,
}

impl Seen {
    fn elapsed(&mut self, kind: &'static str, deadline: Duration, took: Duration) {
        if took < deadline {
            self.early.push((kind, deadline, took));
        } else {
            self.lateness.push(took - deadline);
        }
    }
}

/// One task's requests: each answered after `answer` (a tokio sleep) or not, under
/// a deadline of one of the three kinds.
async fn requests(seed: u64, seen: Arc<Mutex<Seen>>) {
    let mut rng = Rng::new(seed);
    let mut reused = Box::pin(lazy_deadline::sleep(Duration::from_secs(3600)));
    for _ in 0..REQUESTS {
        let deadline = Duration::from_micros(300 + rng.below(3_000));
        let answer = Duration::from_micros(rng.below(4_000));
        let start = Instant::now();
        let (kind, elapsed) = match rng.below(3) {
            0 => (
                "timeout",
                lazy_deadline::timeout(deadline, tokio::time::sleep(answer))
                    .await
                    .is_err(),
            ),
            1 => tokio::select! {
                biased;
                () = tokio::time::sleep(answer) => ("fresh sleep", false),
                () = lazy_deadline::sleep(deadline) => ("fresh sleep", true),
            },
            _ => {
                // Reset per request: mostly later than the last, sometimes earlier.
                reused.as_mut().reset(start + deadline);
                tokio::select! {
                    biased;
                    () = tokio::time::sleep(answer) => ("reused sleep", false),
                    () = reused.as_mut() => ("reused sleep", true),
                }
            }
        };
        if elapsed {
            seen.lock()
                .unwrap()
                .elapsed(kind, deadline, start.elapsed());
        }
        tokio::task::yield_now().await; // let the task move between workers
    }
}

fn round(round: u64, seen: &Arc<Mutex<Seen>>) {
    let rt = common::two_workers_short_lived_blocking(ms(5));
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| tokio::spawn(requests(round * TASKS + t + 1, seen.clone())))
            .collect();
        // Polled once here, then dropped on another thread about when they fire.
        let mut rng = Rng::new(round + 7);
        let droppers: Vec<_> = (0..200)
            .map(|i| {
                let deadline = Duration::from_micros(500 + rng.below(1_500));
                let start = Instant::now();
                let mut pending = Box::pin(lazy_deadline::timeout(
                    deadline,
                    std::future::pending::<()>(),
                ));
                let mut sleep = Box::pin(lazy_deadline::sleep(deadline));
                let waker = std::task::Waker::noop();
                let mut cx = std::task::Context::from_waker(waker);
                // Usually pending; ready only if this thread was held up past the
                // deadline (busy workers, a slow build), and then never early.
                let ready = [
                    std::future::Future::poll(pending.as_mut(), &mut cx).is_ready(),
                    std::future::Future::poll(sleep.as_mut(), &mut cx).is_ready(),
                ];
                if ready.contains(&true) {
                    seen.lock()
                        .unwrap()
                        .elapsed("dropped", deadline, start.elapsed());
                }
                let after = Duration::from_micros(rng.below(2_500));
                std::thread::spawn(move || {
                    std::thread::sleep(after);
                    if i % 2 == 0 {
                        drop(pending);
                        drop(sleep);
                    } else {
                        drop(sleep);
                        drop(pending);
                    }
                })
            })
            .collect();
        // Timeouts on blocking threads (their sets outlive the threads).
        let handle = tokio::runtime::Handle::current();
        let blocking: Vec<_> = (0..8)
            .map(|_| {
                let handle = handle.clone();
                tokio::task::spawn_blocking(move || {
                    handle.block_on(async {
                        let start = Instant::now();
                        let result =
                            lazy_deadline::timeout(ms(2), std::future::pending::<()>()).await;
                        result.is_err() && start.elapsed() >= ms(2)
                    })
                })
            })
            .collect();
        let all = async {
            for task in tasks {
                task.await.unwrap();
            }
            for task in blocking {
                assert!(task.await.unwrap(), "a blocking thread's timeout was early");
            }
        };
        tokio::time::timeout(HANG, all)
            .await
            .expect("every request resolved (no lost wake)");
        for dropper in droppers {
            dropper.join().unwrap();
        }
    });
    // Dropped with the sets of its workers and blocking threads: no panic, no hang.
    drop(rt);
}

#[test]
fn thousands_of_tasks_on_runtimes_built_and_dropped_in_turn() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    for r in 0..3 {
        let seen = seen.clone();
        // A worker that died (a panic in a waker the driver called) takes the
        // runtime's timers with it, the round's own timeout included: the watchdog
        // names it.
        common::watchdog("a stress round", 2 * HANG, move || round(r, &seen));
    }
    let mut seen = seen.lock().unwrap();
    assert!(seen.early.is_empty(), "elapsed early: {:?}", seen.early);
    assert!(!seen.lateness.is_empty(), "some deadlines elapsed");
    seen.lateness.sort();
    let p = |q: f64| seen.lateness[((seen.lateness.len() - 1) as f64 * q) as usize];
    println!(
        "{} deadlines elapsed; lateness p50 {:?}, p99 {:?}, max {:?}",
        seen.lateness.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    );
    assert!(
        p(1.0) < LATENESS_BOUND,
        "a deadline resolved {:?} late",
        p(1.0)
    );
}
