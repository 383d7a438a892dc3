//! loom models of the activity timer's shared state (`IdleTimeout` + `ActivityHandle`).
//! Run with `RUSTFLAGS="--cfg lazy_deadline_loom"`; see `loom-tests/README.md`.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::activity::ActivityShared;
use lazy_deadline::core::{LazyEntry, Step};
use lazy_deadline::sync::WakerMemo;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use support::{EntryStub, WakeFlag};

/// Concurrent `touch_at` from two handles never moves last activity backwards: each
/// toucher reads back at least its own time, and the end state is the maximum.
#[test]
fn concurrent_touches_never_move_backwards() {
    loom::model(|| {
        let shared = ActivityShared::new(0, 100);
        let touchers: Vec<_> = [7u64, 5]
            .into_iter()
            .map(|at| {
                let shared = shared.clone();
                thread::spawn(move || {
                    shared.touch_at(at);
                    assert!(shared.handle_activity() >= at, "touch {at} lost");
                })
            })
            .collect();
        for t in touchers {
            t.join().unwrap();
        }
        assert_eq!(shared.handle_activity(), 7);
    });
}

/// A touch that happened before the owner's decision (published through a flag) is
/// seen by it: the owner never fires for a deadline the touch moved past `now`.
#[test]
fn touch_before_decision_prevents_firing() {
    loom::model(|| {
        // Created at 0 with a timeout of 10; the owner decides at now = 12.
        let shared = ActivityShared::new(0, 10);
        let touched = Arc::new(AtomicBool::new(false));
        let toucher = {
            let (shared, touched) = (shared.clone(), touched.clone());
            thread::spawn(move || {
                shared.touch_at(5);
                // Release/Acquire only to create the happens-before the model needs.
                touched.store(true, Ordering::Release);
            })
        };
        let saw_touch = touched.load(Ordering::Acquire);
        let (_flag, waker) = WakeFlag::new();
        let mut entry = LazyEntry::new();
        let mut memo = WakerMemo::default();
        let step = {
            entry.witness(12);
            shared.poll_step(&waker, &mut memo, 0, &mut entry, || false)
        };
        if saw_touch {
            assert_eq!(
                step,
                Step::Arm(15),
                "fired despite a touch that happened before"
            );
        } else {
            assert!(matches!(step, Step::Fire | Step::Arm(15)));
        }
        toucher.join().unwrap();
    });
}

/// `set_timeout` shortening from a handle while the owner polls: the owner's poll sees
/// the new timeout, or the owner is woken afterwards (no lost wake-up).
#[test]
fn shortening_is_seen_or_wakes() {
    loom::model(|| {
        let shared = ActivityShared::new(0, 1_000);
        let (flag, waker) = WakeFlag::new();
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || shared.set_timeout(10))
        };
        let mut entry = LazyEntry::new();
        let mut memo = WakerMemo::default();
        let step = shared.poll_step(&waker, &mut memo, 0, &mut entry, || false);
        handle.join().unwrap();
        let saw_short = step == Step::Arm(10);
        assert!(
            saw_short || flag.woken(),
            "armed at {step:?}, never woken: the shorter timeout is lost"
        );
    });
}

/// The owner's registration skip (same waker as it stored last) against a handle that
/// shortens twice: each shortening wakes, and a wake leaves the waker in the slot, so
/// the second wake is not lost though the owner never registers again. The owner
/// polls again after every wake, as a task does.
#[test]
fn registration_skip_never_loses_a_wake() {
    loom::model(|| {
        let shared = ActivityShared::new(0, 1_000);
        let (flag, waker) = WakeFlag::new();
        let mut entry = LazyEntry::new();
        let mut memo = WakerMemo::default();
        assert_eq!(
            shared.poll_step(&waker, &mut memo, 0, &mut entry, || false),
            Step::Arm(1_000)
        );
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.set_timeout(500);
                shared.set_timeout(20);
            })
        };
        let wakes_before = flag.count();
        let step = shared.poll_step(&waker, &mut memo, 0, &mut entry, || false);
        handle.join().unwrap();
        if step != Step::Arm(20) {
            // This poll missed the final timeout: a wake must have come after it began.
            assert!(
                flag.count() > wakes_before,
                "missed 20 and never woken again ({step:?})"
            );
            let again = shared.poll_step(&waker, &mut memo, 0, &mut entry, || false);
            assert_eq!(again, Step::Arm(20));
        }
    });
}

/// A handle touching and lengthening the timeout while the owner drops the timer: no
/// panic, no leak (loom checks its `Arc`s), and the owner's registered waker is
/// released by the drop, not kept alive by the handle.
#[test]
fn owner_dropped_while_handles_touch() {
    loom::model(|| {
        let shared = ActivityShared::new(0, 100);
        let (flag, waker) = WakeFlag::new();
        let mut entry = LazyEntry::new();
        let mut memo = WakerMemo::default();
        shared.poll_step(&waker, &mut memo, 0, &mut entry, || false);
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.touch_at(50);
                shared.set_timeout(500); // longer: no wake
                shared
            })
        };
        shared.owner_dropped();
        drop(shared);
        let last = handle.join().unwrap();
        assert_eq!(
            std::sync::Arc::strong_count(&flag),
            2,
            "the handle keeps the owner's waker"
        );
        assert!(!flag.woken());
        drop(last);
    });
}

/// The owner polls again after a wake, as a task does, while a handle touches and
/// then shortens: if it was not woken, its first poll already saw the shortening;
/// if it was, the next poll arms at the final deadline (or keeps an earlier entry).
#[test]
fn repeated_polls_converge() {
    loom::model(|| {
        let shared = ActivityShared::new(0, 100);
        let (flag, waker) = WakeFlag::new();
        let mut entry = LazyEntry::new();
        let mut memo = WakerMemo::default();
        assert_eq!(
            shared.poll_step(&waker, &mut memo, 0, &mut entry, || false),
            Step::Arm(100)
        );
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.touch_at(30);
                shared.set_timeout(20);
            })
        };
        let first = {
            entry.witness(10);
            shared.poll_step(&waker, &mut memo, 0, &mut entry, || false)
        };
        handle.join().unwrap();
        if !flag.woken() {
            assert!(
                matches!(first, Step::Arm(50) | Step::Arm(20)),
                "lost: {first:?}"
            );
        } else {
            let second = {
                entry.witness(10);
                shared.poll_step(&waker, &mut memo, 0, &mut entry, || false)
            };
            match second {
                Step::Arm(50) => {}
                Step::Wait => assert!(matches!(first, Step::Arm(50) | Step::Arm(20))),
                other => panic!("after the wake the owner decided {other:?}"),
            }
        }
    });
}

/// The owner's pending fast path does not poll its runtime entry: the entry is
/// polled with a waker that raises `entry_fired` and wakes the owner. The fire races
/// the owner's poll (which clears the flag before polling the entry): the owner sees
/// the fire in this poll, or is woken and sees it in the next. The owner polls as
/// `IdleTimeout::poll` does.
#[test]
fn entry_fire_races_owner_poll() {
    loom::model(|| {
        let shared = ActivityShared::new(0, 1_000);
        let (flag, waker) = WakeFlag::new();
        let mut lazy = LazyEntry::new();
        let mut memo = WakerMemo::default();
        assert_eq!(
            shared.poll_step(&waker, &mut memo, 0, &mut lazy, || false),
            Step::Arm(1_000)
        );
        let entry = Arc::new(EntryStub::registered());
        let driver = {
            let (shared, entry) = (shared.clone(), entry.clone());
            thread::spawn(move || entry.fire(|| shared.entry_fired()))
        };
        let mut poll = || {
            assert_eq!(
                shared.poll_step(&waker, &mut memo, 0, &mut lazy, || false),
                Step::Wait
            );
            shared.entry_has_fired() && {
                shared.clear_entry_fired();
                entry.poll()
            }
        };
        let wakes_before = flag.count();
        let seen = poll();
        driver.join().unwrap();
        if !seen {
            assert!(
                flag.count() > wakes_before,
                "the entry fired, nobody was told"
            );
            assert!(poll(), "woken, but the poll still misses the fire");
        }
    });
}
