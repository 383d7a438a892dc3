//! Stress, in real time on purpose (bounded to a few seconds): a 4-worker runtime
//! with 1,000 `IdleTimeout`s and 1,000 `SlotTimer`s whose handles live on other tasks,
//! touching, setting earlier and later, and cancelling. A checker asserts that no
//! expiry is early, lost or duplicated, and that lateness stays under a generous
//! bound (shared CI machines stall); it prints the p50/p99 lateness it saw.

mod common;

use common::{ms, Rng};
use lazy_deadline::{timer_kinds, IdleTimeout, SlotTimer, TimerKind};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{sleep, Instant};

const TIMERS: u64 = 1_000;
/// Far above anything a healthy run shows; it only catches "never re-armed".
const LATENESS_BOUND: Duration = Duration::from_millis(500);

/// The two tests run one at a time: each is a 4-worker runtime on a 2-core machine,
/// and together they oversubscribe it twice over, which stretches the OS preemptions
/// that the 1 ms "touch preceded the decision" margin below has to absorb.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap()
}

fn report(what: &str, mut lateness: Vec<Duration>) {
    lateness.sort();
    let at = |p: f64| lateness[((lateness.len() - 1) as f64 * p) as usize];
    println!(
        "{what}: {} expiries, lateness p50 {:?}, p99 {:?}, max {:?}",
        lateness.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
    assert!(
        at(1.0) <= LATENESS_BOUND,
        "{what}: an expiry was {:?} late",
        at(1.0)
    );
}

#[test]
fn idle_timeouts_fire_once_after_the_last_touch() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let timeout = ms(30);
    let lateness = runtime().block_on(async move {
        let mut owners = Vec::new();
        for i in 0..TIMERS {
            // Half start with a long timeout that a handle shortens (a wake).
            let mut idle = IdleTimeout::new(if i % 2 == 0 {
                timeout
            } else {
                Duration::from_secs(5)
            });
            let handle = idle.handle();
            let toucher = tokio::spawn(async move {
                let mut rng = Rng::new(i + 1);
                handle.set_timeout(timeout);
                let until = Instant::now() + ms(50 + rng.below(150));
                let mut touches = vec![Instant::now()];
                while Instant::now() < until {
                    sleep(ms(1 + rng.below(9))).await;
                    let now = Instant::now();
                    handle.touch_at(now);
                    handle.touch_at(now - ms(rng.below(20))); // older: ignored
                    touches.push(now);
                }
                touches
            });
            owners.push(tokio::spawn(async move {
                (&mut idle).await;
                let fired = Instant::now();
                (fired, toucher.await.unwrap())
            }));
        }
        let mut lateness = Vec::new();
        for owner in owners {
            let (fired, touches) = owner.await.unwrap();
            // The last touch that certainly preceded the decision (1 ms of margin for
            // a touch racing the fire itself).
            let last = touches
                .iter()
                .copied()
                .filter(|&t| t + ms(1) <= fired)
                .max()
                .unwrap();
            assert!(
                fired >= last + timeout,
                "fired {:?} early",
                last + timeout - fired
            );
            lateness.push(fired - (last + timeout));
        }
        lateness
    });
    report("IdleTimeout", lateness);
}

timer_kinds! {
    enum Kind { Rto, Tlp, Probe0, DelAck, Keepalive }
}

#[test]
fn slot_timers_report_every_set_once_never_early() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lateness = runtime().block_on(async {
        let mut tasks = Vec::new();
        for i in 0..TIMERS {
            let mut timers = SlotTimer::<Kind>::new();
            let handle = timers.handle();
            let (report_tx, mut reports) = mpsc::unbounded_channel();
            let owner = tokio::spawn(async move {
                loop {
                    let expired = timers.expired().await;
                    let now = Instant::now();
                    for kind in expired {
                        if report_tx.send((kind, now)).is_err() {
                            return;
                        }
                    }
                }
            });
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::new(1_000 + i);
                let mut lateness = Vec::new();
                for _round in 0..3 {
                    // One synchronous burst: set each kind, move some earlier or
                    // later, cancel some. Deadlines are >= 20 ms out, so no value is
                    // due before the burst overwrites it.
                    let now = Instant::now();
                    let mut expected: HashMap<usize, Instant> = HashMap::new();
                    for index in 0..Kind::COUNT {
                        let kind = Kind::from_index(index);
                        let first = now + ms(20 + rng.below(40));
                        handle.set(kind, first);
                        let last = match rng.below(4) {
                            0 => { handle.cancel(kind); None }
                            1 => { let at = now + ms(20 + rng.below(10)); handle.set(kind, at); Some(at) } // earlier (or equal)
                            2 => { let at = first + ms(rng.below(30)); handle.set(kind, at); Some(at) } // later
                            _ => Some(first),
                        };
                        if let Some(at) = last {
                            expected.insert(index, at);
                        }
                    }
                    // Collect this round's reports: each expected kind exactly once.
                    let give_up = Instant::now() + ms(70) + LATENESS_BOUND * 2;
                    while !expected.is_empty() {
                        let (kind, at) = tokio::select! {
                            got = reports.recv() => got.expect("owner alive"),
                            () = tokio::time::sleep_until(give_up) => panic!("lost: {expected:?} never reported"),
                        };
                        let deadline = expected.remove(&kind.index()).unwrap_or_else(|| {
                            panic!("{kind:?} reported but not expected (duplicate or cancelled)")
                        });
                        assert!(at >= deadline, "{kind:?} reported {:?} early", deadline - at);
                        lateness.push(at - deadline);
                    }
                }
                // Nothing more may come: cancelled or already-reported kinds stay quiet.
                sleep(ms(100)).await;
                assert!(reports.try_recv().is_err(), "an extra report after the last round");
                owner.abort();
                lateness
            }));
        }
        let mut lateness = Vec::new();
        for t in tasks {
            lateness.extend(t.await.unwrap());
        }
        lateness
    });
    report("SlotTimer", lateness);
}
