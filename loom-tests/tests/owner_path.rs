//! loom models of a deadline set's owner path (`src/core/deadline_set.rs`,
//! `src/core/owner_view.rs`, `src/core/shared_set.rs`, `src/core/service.rs`): what
//! the owner thread does to its slots' state words without the lock, a filing moved
//! in place, the lean re-arm of the set's entry, and a poll with a new waker racing
//! the runtime's shutdown. Each model runs the real code against the fire (a service
//! on the driver's thread) or the close, and checks the outcome a task sees: woken
//! when its deadline passed, never woken once answered, never before its deadline.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::deadline_set::{Filed, OwnerView};
use lazy_deadline::core::service::Serviced;
use lazy_deadline::core::shared_set::{FileOutcome, SharedSet};
use lazy_deadline::sync::WakerMemo;
use loom::thread;
use std::sync::Arc;
use std::task::Waker;
use support::set_entry::{Driver, StubEntry};
use support::WakeFlag;

const EARLY: u64 = 5;
const NOW: u64 = 7;
const LATE: u64 = 10;

/// An open set (generation returned) and the owner's view of it.
fn open_set<X>(extra: X) -> (Arc<SharedSet<X>>, u64, OwnerView) {
    let set = Arc::new(SharedSet::new(extra));
    let (generation, view) = set
        .state()
        .with(|locked| (set.open(locked), locked.core.owner_view()));
    (set, generation, view)
}

/// Files `deadline` for `waker` by the owner (`view`) or from another thread.
fn file<X>(
    set: &SharedSet<X>,
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

/// The entry fires on the driver's thread: the service raises the mark to `up_to`
/// and expires under the lock, then wakes after it.
fn fire(set: &SharedSet<()>, up_to: u64) {
    let mut wake = Vec::new();
    set.state()
        .with(|locked| set.expire(locked, up_to, &mut wake));
    for waker in wake {
        waker.wake();
    }
}

/// One slot's state word, three writers: a request answered on another thread (its
/// `Timeout` moved there: the lock), the fire, and the owner filing the next request
/// in the slot that answer frees and answering it without the lock. A fire that
/// comes after an answer never wakes it (the owner gives its slot back later, at its
/// next lock: the word alone tells the fire), the live request is woken once, and
/// every slot is given back.
#[test]
fn the_owners_answer_the_fire_and_a_remote_cancel_share_a_state_word() {
    loom::model(|| {
        let (set, generation, mut view) = open_set(());
        let (moved_flag, moved_waker) = WakeFlag::new();
        let (moved, _) = file(&set, generation, EARLY, &moved_waker, Some(&mut view));
        let remote = {
            let set = set.clone();
            thread::spawn(move || drop(set.cancel(moved, None)))
        };
        let fire_early = {
            let set = set.clone();
            thread::spawn(move || fire(&set, EARLY))
        };
        // The owner files the next request (in the freed slot, if the cancel came
        // first) and answers it, lock-free, before its deadline's fire.
        let (answered_flag, answered_waker) = WakeFlag::new();
        let (answered, _) = file(&set, generation, LATE, &answered_waker, Some(&mut view));
        drop(set.cancel(answered, Some(&mut view)));
        let fire_late = {
            let set = set.clone();
            thread::spawn(move || fire(&set, LATE))
        };
        remote.join().unwrap();
        fire_early.join().unwrap();
        fire_late.join().unwrap();
        assert!(moved_flag.count() <= 1, "the moved request woken twice");
        assert_eq!(
            answered_flag.count(),
            0,
            "a request answered before the fire was woken"
        );
        // A live request in the owner's slots, then its fire.
        let (live_flag, live_waker) = WakeFlag::new();
        let (live, _) = file(&set, generation, LATE + 1, &live_waker, Some(&mut view));
        fire(&set, LATE + 1);
        assert_eq!(live_flag.count(), 1, "the live request was not woken once");
        drop(set.cancel(live, Some(&mut view)));
        set.flush(&mut view);
        set.state().with(|locked| {
            assert_eq!(locked.core.filings(), 0, "a slot was never given back");
            assert_eq!(locked.core.pending(), 0);
        });
    });
}

/// The owner moves its waiting request earlier (a `Sleep` reset earlier: in place,
/// same slot and waker, a new ticket) while the entry fires up to the new deadline:
/// either the move saw the mark pass it (the caller completes at once), or the fire
/// wakes the moved request, once; and it leaves no record behind.
#[test]
fn a_filing_moved_earlier_racing_the_fire_is_woken_or_seen_passed() {
    loom::model(|| {
        let (set, generation, mut view) = open_set(());
        let (flag, waker) = WakeFlag::new();
        let (filed, _) = file(&set, generation, LATE, &waker, Some(&mut view));
        let fire_early = {
            let set = set.clone();
            thread::spawn(move || fire(&set, EARLY))
        };
        let (moved, _, _) = set.refile(generation, filed, EARLY, None, Some(&mut view), |_| ());
        // As the runtime layer does right after a refile: a moved filing whose new
        // deadline the mark has passed completes now.
        let seen_passed = set.has_passed(EARLY);
        fire_early.join().unwrap();
        let Some(FileOutcome::Filed(moved, _)) = moved else {
            panic!("a pending filing moves in place: {moved:?}");
        };
        assert!(
            seen_passed || flag.woken(),
            "moved, not seen passed, and never woken"
        );
        assert!(flag.count() <= 1, "woken twice");
        fire(&set, LATE);
        assert!(flag.count() <= 1, "the old deadline fired it again");
        drop(set.cancel(moved, Some(&mut view)));
        set.flush(&mut view);
        set.state().with(|locked| {
            assert_eq!(
                locked.core.pending(),
                0,
                "a record of the move is still live"
            );
            assert_eq!(locked.core.filings(), 0);
        });
    });
}

/// Files `deadline` by the owner, with the runtime layer's re-arm (as it ships),
/// and runs the service it asks for. `true` if the set had seen it pass already.
fn file_and_rearm(
    set: &SharedSet<StubEntry>,
    generation: u64,
    deadline: u64,
    waker: &Waker,
    view: &mut OwnerView,
) -> bool {
    let (outcome, replaced, serviced) =
        set.file(generation, deadline, waker, Some(view), |locked| {
            set.rearm(locked, deadline)
        });
    drop(replaced);
    let serviced: Option<Serviced> = serviced.flatten();
    if let Some(serviced) = serviced {
        set.after_service(serviced);
    }
    matches!(outcome, FileOutcome::Passed)
}

/// The lean re-arm: a request due `EARLY` beats the entry armed at `LATE`, so the
/// entry is reset there without a poll (tokio keeps its waker), while the driver
/// passes `NOW` (between the two) on its thread. The early request is woken (by the
/// driver's fire, or by the fire inside the reset), and the late one is not: a fire
/// of the moved entry must expire only what it was moved to.
#[test]
fn the_lean_rearm_racing_the_driver_expires_only_what_has_passed() {
    loom::model(|| {
        let (driver, entry) = Driver::new();
        let (set, generation, mut view) = open_set(entry);
        driver.wakes(&set);
        let (late_flag, late) = WakeFlag::new();
        assert!(!file_and_rearm(&set, generation, LATE, &late, &mut view));
        let turn = {
            let driver = driver.clone();
            thread::spawn(move || driver.turn(NOW))
        };
        let (early_flag, early) = WakeFlag::new();
        let early_passed = file_and_rearm(&set, generation, EARLY, &early, &mut view);
        turn.join().unwrap();
        assert!(
            early_passed || early_flag.woken(),
            "the driver passed the early deadline, which was never woken"
        );
        assert!(!late_flag.woken(), "woken before its deadline");
        assert!(
            !set.has_passed(LATE),
            "the mark passed a deadline the driver did not"
        );
    });
}

/// A request polled with a new waker (its task moved) while its runtime shuts down
/// (the sentinel closes the set on another thread): the poll reads "open" first, as
/// the runtime layer does. Either the close comes first and the poll sees it, or the
/// new waker is woken (by the close, or at once when its swap finds the set closed),
/// so that the task polls again and sees the shutdown. Never stored in a closed set.
#[test]
fn a_new_waker_racing_the_close_is_woken_or_sees_it() {
    loom::model(|| {
        let (set, generation, mut view) = open_set(());
        let (_, old) = WakeFlag::new();
        let (filed, mut memo) = file(&set, generation, LATE, &old, Some(&mut view));
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
        let (flag, new) = WakeFlag::new();
        let polled = set.is_open(generation);
        let passed = polled && set.poll_passed(generation, filed, LATE, &mut memo, &new);
        closer.join().unwrap();
        assert!(!passed, "a close is not a deadline passing");
        assert!(
            !polled || flag.woken(),
            "the new waker was never woken: the task would wait for ever"
        );
    });
}

/// An expiry that finds nothing due sweeps the owner's answered slots (given back
/// here, under the lock, where the owner may never take its lock again) while the
/// owner answers without the lock and files its next request: every answered slot is
/// given back once, the next request is never given back with them (it stays
/// pending and is woken once at its deadline), and once nothing is filed no slot
/// keeps a finished task's waker.
#[test]
fn an_expiry_sweeping_answered_slots_races_the_owners_answer_and_next_filing() {
    loom::model(|| {
        let (set, generation, mut view) = open_set(());
        let (first_flag, first_waker) = WakeFlag::new();
        let (second_flag, second_waker) = WakeFlag::new();
        let (first, _) = file(&set, generation, LATE, &first_waker, Some(&mut view));
        let (second, _) = file(&set, generation, LATE, &second_waker, Some(&mut view));
        drop((first_waker, second_waker));
        // An expiry with nothing due (the service of an entry armed early), with
        // the kept wakers it lets go of dropped after the lock.
        let sweep = {
            let set = set.clone();
            thread::spawn(move || {
                let mut wake = Vec::new();
                let let_go = set.state().with(|locked| {
                    set.expire(locked, EARLY, &mut wake);
                    locked.core.take_let_go()
                });
                assert!(wake.is_empty(), "nothing was due");
                drop(let_go);
            })
        };
        drop(set.cancel(first, Some(&mut view)));
        let (next_flag, next_waker) = WakeFlag::new();
        let (next, _) = file(&set, generation, LATE + 1, &next_waker, Some(&mut view));
        drop(set.cancel(second, Some(&mut view)));
        sweep.join().unwrap();
        fire(&set, LATE + 1);
        assert_eq!(
            next_flag.count(),
            1,
            "the next request was not woken once (given back with the answered ones?)"
        );
        assert_eq!(first_flag.count() + second_flag.count(), 0);
        drop(set.cancel(next, Some(&mut view)));
        drop(next_waker);
        set.state().with(|locked| {
            assert_eq!(locked.core.filings(), 0, "a slot was never given back");
        });
        for (name, flag) in [
            ("first", &first_flag),
            ("second", &second_flag),
            ("next", &next_flag),
        ] {
            assert_eq!(
                Arc::strong_count(flag),
                1,
                "the {name} request's finished task is kept by the set"
            );
        }
    });
}
