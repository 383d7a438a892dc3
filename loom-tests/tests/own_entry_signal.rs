//! loom models of a `Sleep`'s entry of its own polled through its signal
//! (`sleep::own_entry`'s signal mode) against the entry firing on the driver's
//! thread (another worker of a multi-thread runtime). tokio's entry cannot run
//! under loom, so the owner's poll below follows `OwnEntry::poll_fired` step by step
//! over the crate's real [`EntrySignal`] and a stand-in entry with tokio's guarantee
//! (a poll sees the fire, or the fire calls the waker it registered). Every model
//! asserts the task's side of it: a poll that reports "not fired" is followed by a
//! wake of the waker it was made with, and the poll after that wake reports the fire.
//!
//! What they guard is the signal and the waker slot (`core::signal`, `sync`) under
//! that sequence of steps: the steps are a copy, so a slip in `own_entry.rs` itself
//! (its reads reordered) is for the runtime suites (`tests/own_entry.rs`) to catch.
//! Keep `Owner::poll` in step with `OwnEntry::poll_fired` when either changes.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::signal::EntrySignal;
use lazy_deadline::sync::WakerMemo;
use loom::sync::Arc;
use loom::thread;
use std::task::Waker;
use support::{EntryStub, WakeFlag};

/// The owner's side: the signal, whether the entry holds the signal's waker, and
/// the memo of the task's waker in the signal's slot.
struct Owner {
    signal: Arc<EntrySignal>,
    entry: Arc<EntryStub>,
    registered: bool,
    memo: WakerMemo,
}

impl Owner {
    /// `OwnEntry::poll_fired` in signal mode, the deadline where the entry is armed:
    /// the task's waker into the signal's slot, then the flag and the entry's state;
    /// if neither says fired and the entry holds the signal's waker, pending without
    /// a call into the entry; else the flag lowered, then the entry polled (it
    /// registers the signal's waker).
    fn poll(&mut self, task: &Waker) -> bool {
        self.signal.register(task, &mut self.memo);
        if self.registered && !self.signal.entry_has_fired() && !self.entry.has_fired() {
            return false;
        }
        self.signal.clear_entry_fired();
        let fired = self.entry.poll();
        self.registered = true;
        fired
    }
}

/// What the owner did before the racing poll.
enum Before {
    /// Nothing: the entry is new and holds no waker yet.
    Nothing,
    /// Polled it with this waker (pending): the entry holds the signal's waker.
    Polled(Waker),
    /// The same, and the entry fired since, a fire no poll has consumed, then was
    /// re-armed by a reset: the fire took the signal's waker out of the entry and
    /// tokio's reset puts none back, while the owner still counts it registered
    /// (`OwnEntry::reset` on a driver that keeps wakers). Only the raised flag sends
    /// the next poll to the entry, which registers there again.
    PolledThenFired(Waker),
}

/// Runs the owner's poll with `task` against the entry's fire on another thread,
/// after `before`, and asserts the task's side (see the module docs).
fn race(before: Before, task: (std::sync::Arc<WakeFlag>, Waker)) {
    let signal = Arc::new(EntrySignal::new());
    let entry = Arc::new(match before {
        Before::Nothing | Before::PolledThenFired(_) => EntryStub::unregistered(),
        Before::Polled(_) => EntryStub::registered(),
    });
    let mut owner = Owner {
        signal: signal.clone(),
        entry: entry.clone(),
        registered: !matches!(before, Before::Nothing),
        memo: WakerMemo::default(),
    };
    if let Before::Polled(earlier) | Before::PolledThenFired(earlier) = &before {
        owner.signal.register(earlier, &mut owner.memo);
    }
    if let Before::PolledThenFired(_) = before {
        owner.signal.entry_fired();
    }
    let driver = {
        let (signal, entry) = (signal.clone(), entry.clone());
        thread::spawn(move || entry.fire(|| signal.entry_fired()))
    };
    let (flag, waker) = task;
    let woken_before = flag.count();
    let fired = owner.poll(&waker);
    driver.join().unwrap();
    if !fired {
        assert!(
            flag.count() > woken_before,
            "the poll said not fired and the fire never woke its task"
        );
        assert!(
            owner.poll(&waker),
            "the poll after the fire's wake missed it"
        );
    }
}

/// The entry holds the signal's waker (polled before, not fired); the task polls
/// again with the same waker (the memo: no lock) while the entry fires.
#[test]
fn a_fire_racing_a_pending_poll_with_the_same_waker_is_seen_or_wakes_the_task() {
    loom::model(|| {
        let task = WakeFlag::new();
        race(Before::Polled(task.1.clone()), task);
    });
}

/// As above, but another task polls it (the slot's waker changes under its lock).
#[test]
fn a_fire_racing_a_pending_poll_by_another_task_wakes_that_task() {
    loom::model(|| {
        let (_first, first) = WakeFlag::new();
        race(Before::Polled(first), WakeFlag::new());
    });
}

/// The entry does not hold the signal's waker yet (never polled, or tokio's
/// per-worker timer made a new entry at a reset): the poll lowers the flag and
/// polls the entry while it fires.
#[test]
fn a_fire_racing_the_first_poll_of_a_new_entry_is_seen_or_wakes_the_task() {
    loom::model(|| race(Before::Nothing, WakeFlag::new()));
}

/// A fire the owner has not consumed yet left the flag raised, and a reset re-armed
/// the entry without a waker: only the flag takes the poll down the slow path, which
/// lowers it and polls the re-armed entry while it fires again.
#[test]
fn a_stale_flag_lowered_while_the_rearmed_entry_fires_loses_no_wake() {
    loom::model(|| {
        let task = WakeFlag::new();
        race(Before::PolledThenFired(task.1.clone()), task);
    });
}
