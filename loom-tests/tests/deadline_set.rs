//! loom models of a deadline set's cross-thread paths (`src/core/shared_set.rs`,
//! `src/core/deadline_set.rs`: the data `DeadlineSet` and every `Timeout` / `Sleep`
//! share): the fire (a service on the driver's thread raising the passed mark and
//! expiring under the lock) racing a request's lock-free poll, a poll with a new
//! waker (the task moved, or the `Timeout` is polled from another thread), the
//! owner's lock-free answer, an answer from another thread, and the runtime's
//! shutdown closing the set while a request is filed.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::deadline_set::{Filed, OwnerView};
use lazy_deadline::core::shared_set::{FileOutcome, SharedSet};
use lazy_deadline::sync::WakerMemo;
use loom::sync::Arc;
use loom::thread;
use std::task::Waker;
use support::WakeFlag;

const DEADLINE: u64 = 10;

/// An open set (generation returned) and the owner's view of it.
fn open_set() -> (Arc<SharedSet<()>>, u64, OwnerView) {
    let set = Arc::new(SharedSet::new(()));
    let (generation, view) = set
        .state()
        .with(|locked| (set.open(locked), locked.core.owner_view()));
    (set, generation, view)
}

/// Files `deadline` for `waker`, by the owner (`view`) or from another thread.
fn file(
    set: &SharedSet<()>,
    generation: u64,
    deadline: u64,
    waker: &Waker,
    view: Option<&mut OwnerView>,
) -> (Filed, WakerMemo) {
    match set.file(generation, deadline, waker, view, |_| ()).0 {
        FileOutcome::Filed(filed, memo) => (filed, memo),
        other => panic!("not filed: {other:?}"),
    }
}

/// The set's current binding.
fn generation_of(set: &SharedSet<()>) -> u64 {
    set.generation()
}

/// A set with one request filed at `DEADLINE` for `waker` by its owner.
fn filed_for(waker: &Waker) -> (Arc<SharedSet<()>>, Filed, WakerMemo, OwnerView) {
    let (set, generation, mut view) = open_set();
    let (filed, memo) = file(&set, generation, DEADLINE, waker, Some(&mut view));
    (set, filed, memo, view)
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
        let (set, filed, mut memo, _view) = filed_for(&waker);
        assert_eq!(
            memo,
            WakerMemo::of(&waker),
            "the clone stored is the same waker"
        );
        let fire = spawn_fire(&set);
        let passed = set.poll_passed(generation_of(&set), filed, DEADLINE, &mut memo, &waker);
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
        let (set, filed, mut memo, _view) = filed_for(&old);
        let (flag, new) = WakeFlag::new();
        let fire = spawn_fire(&set);
        let passed = set.poll_passed(generation_of(&set), filed, DEADLINE, &mut memo, &new);
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
        let (set, filed, mut memo, _view) = filed_for(&old);
        let fire = spawn_fire(&set);
        let poller = {
            let set = set.clone();
            thread::spawn(move || {
                let (flag, new) = WakeFlag::new();
                let passed = set.poll_passed(generation_of(&set), filed, DEADLINE, &mut memo, &new);
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
/// entry fires: the slot is freed exactly once and woken at most once, and a stale
/// cancel never frees the request that reuses the slot.
#[test]
fn a_cancel_from_another_thread_racing_the_fire_frees_the_slot_once() {
    loom::model(|| {
        let (flag, waker) = WakeFlag::new();
        let (set, filed, _, mut view) = filed_for(&waker);
        let fire = spawn_fire(&set);
        let canceller = {
            let set = set.clone();
            thread::spawn(move || drop(set.cancel(filed, None)))
        };
        fire.join().unwrap();
        canceller.join().unwrap();
        assert!(flag.count() <= 1, "woken twice");
        set.state().with(|locked| {
            assert_eq!(locked.core.filings(), 0, "the slot is still taken");
        });
        // A new request reuses the freed slot, and the stale filing cannot touch it.
        let (flag2, waker2) = WakeFlag::new();
        let generation = set.generation();
        let (again, _) = file(&set, generation, DEADLINE + 5, &waker2, Some(&mut view));
        drop(set.cancel(filed, None));
        set.state().with(|locked| {
            assert!(
                locked.core.is_pending(again),
                "a stale cancel freed a new request"
            );
        });
        assert!(!flag2.woken());
    });
}

/// The owner answers its request without the lock (a load and a store on the slot's
/// state word) while the entry fires on the driver's thread: woken at most once,
/// the slot given back exactly once at the owner's next lock, and the request
/// filed in it next is never lost or woken for the old one.
#[test]
fn the_owners_lock_free_answer_racing_the_fire_gives_the_slot_back_once() {
    loom::model(|| {
        let (flag, waker) = WakeFlag::new();
        let (set, filed, _, mut view) = filed_for(&waker);
        let fire = spawn_fire(&set);
        drop(set.cancel(filed, Some(&mut view)));
        fire.join().unwrap();
        assert!(flag.count() <= 1, "woken twice");
        // The owner's next filing gives the slot back and may take it again.
        let (flag2, waker2) = WakeFlag::new();
        let generation = set.generation();
        let (next, _) = file(&set, generation, DEADLINE + 5, &waker2, Some(&mut view));
        set.state().with(|locked| {
            assert_eq!(locked.core.filings(), 1, "given back once");
            assert!(locked.core.is_pending(next));
        });
        // The next fire covers it and wakes it, once.
        let mut wake = Vec::new();
        set.state()
            .with(|locked| set.expire(locked, DEADLINE + 5, &mut wake));
        assert_eq!(wake.len(), 1, "the new request fires once");
        for waker in wake {
            waker.wake();
        }
        assert_eq!(flag2.count(), 1);
    });
}

/// The runtime shuts down (its sentinel closes the set on another thread) while the
/// owner files a request: the filing is refused as void, or it is filed and the
/// close wakes it. Never filed and forgotten.
#[test]
fn a_close_racing_a_filing_refuses_it_or_wakes_it() {
    loom::model(|| {
        let (set, generation, mut view) = open_set();
        let closer = {
            let set = set.clone();
            thread::spawn(move || {
                let (mut wake, mut kept) = (Vec::new(), Vec::new());
                set.state()
                    .with(|locked| set.close(locked, &mut wake, &mut kept));
                drop(kept);
                for waker in wake {
                    waker.wake();
                }
            })
        };
        let (flag, waker) = WakeFlag::new();
        let outcome = set
            .file(generation, DEADLINE, &waker, Some(&mut view), |_| ())
            .0;
        closer.join().unwrap();
        match outcome {
            FileOutcome::Void => {}
            FileOutcome::Filed(..) => assert!(flag.woken(), "filed, and the close never woke it"),
            FileOutcome::Passed => panic!("nothing has passed"),
        }
        assert!(!set.is_open(generation));
    });
}
