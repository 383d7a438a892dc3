//! loom models of a deadline set's cross-thread paths (`src/core/shared_set.rs`, the
//! data `DeadlineSet` and every `Timeout` / `Sleep` share): the fire (a service on
//! the driver's thread raising the passed mark and expiring under the lock) racing
//! a request's lock-free poll, a poll with a new waker (the task moved, or the
//! `Timeout` is polled from another thread), and a cancel from another thread.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::deadline_set::Filed;
use lazy_deadline::core::shared_set::SharedSet;
use lazy_deadline::sync::WakerMemo;
use loom::sync::Arc;
use loom::thread;
use std::task::Waker;
use support::WakeFlag;

const DEADLINE: u64 = 10;

/// A set with one request filed at `DEADLINE` for `waker`.
fn filed_for(waker: &Waker) -> (Arc<SharedSet<()>>, Filed, WakerMemo) {
    let set = Arc::new(SharedSet::new(()));
    let (placed, _, _) = set.place(DEADLINE, None, Some(waker), |_| ());
    let (filed, memo) = placed.expect("filed with the waker given");
    (set, filed, memo)
}

/// The entry fires on the driver's thread: the service raises the mark to
/// `DEADLINE` and expires, under the lock, then wakes after it.
fn spawn_fire(set: &Arc<SharedSet<()>>) -> thread::JoinHandle<()> {
    let set = set.clone();
    thread::spawn(move || {
        let mut wake = Vec::new();
        set.state()
            .with(|locked| set.expire(locked, DEADLINE, &mut wake));
        for waker in wake {
            waker.wake();
        }
    })
}

/// A pending poll with the same waker reads only the mark: it sees the fire, or
/// the fire wakes the waker the slot holds. Never "pending" and never woken.
#[test]
fn a_lock_free_poll_racing_the_fire_sees_it_or_is_woken() {
    loom::model(|| {
        let (flag, waker) = WakeFlag::new();
        let (set, filed, mut memo) = filed_for(&waker);
        assert_eq!(
            memo,
            WakerMemo::of(&waker),
            "the clone stored is the same waker"
        );
        let fire = spawn_fire(&set);
        let passed = set.poll_passed(filed, DEADLINE, &mut memo, &waker);
        fire.join().unwrap();
        assert!(
            passed || flag.woken(),
            "pending, and the fire never woke it"
        );
    });
}

/// A poll with a new waker (the task moved) swaps it under the lock: the fire wakes
/// the new one, or the poll finds the slot expired and answers "passed".
#[test]
fn a_new_waker_racing_the_fire_is_woken_or_sees_it() {
    loom::model(|| {
        let (_, old) = WakeFlag::new();
        let (set, filed, mut memo) = filed_for(&old);
        let (flag, new) = WakeFlag::new();
        let fire = spawn_fire(&set);
        let passed = set.poll_passed(filed, DEADLINE, &mut memo, &new);
        fire.join().unwrap();
        assert!(
            passed || flag.woken(),
            "pending, and the new waker was never woken"
        );
    });
}

/// The `Timeout` polled from another thread while the entry fires on a third.
#[test]
fn a_poll_from_another_thread_racing_the_fire_is_woken_or_sees_it() {
    loom::model(|| {
        let (_, old) = WakeFlag::new();
        let (set, filed, mut memo) = filed_for(&old);
        let fire = spawn_fire(&set);
        let poller = {
            let set = set.clone();
            thread::spawn(move || {
                let (flag, new) = WakeFlag::new();
                let passed = set.poll_passed(filed, DEADLINE, &mut memo, &new);
                (passed, flag)
            })
        };
        fire.join().unwrap();
        let (passed, flag) = poller.join().unwrap();
        assert!(
            passed || flag.woken(),
            "pending, and its waker was never woken"
        );
    });
}

/// A request answered on another thread (its `Timeout` dropped there) while the
/// entry fires: the slot is freed exactly once and woken at most once.
#[test]
fn a_cancel_from_another_thread_racing_the_fire_frees_the_slot_once() {
    loom::model(|| {
        let (flag, waker) = WakeFlag::new();
        let (set, filed, _) = filed_for(&waker);
        drop(waker);
        let fire = spawn_fire(&set);
        let canceller = {
            let set = set.clone();
            thread::spawn(move || set.cancel(filed))
        };
        fire.join().unwrap();
        canceller.join().unwrap();
        assert!(flag.count() <= 1, "woken twice");
        set.state()
            .with(|locked| assert_eq!(locked.core.len(), 0, "the slot is still taken"));
        // A new request reuses the freed slot, and the stale filing cannot touch it.
        let (flag2, waker2) = WakeFlag::new();
        let (placed, _, _) = set.place(DEADLINE + 5, None, Some(&waker2), |_| ());
        assert!(placed.is_some());
        set.cancel(filed);
        set.state()
            .with(|locked| assert_eq!(locked.core.len(), 1, "a stale cancel freed a new request"));
        assert!(!flag2.woken());
    });
}
