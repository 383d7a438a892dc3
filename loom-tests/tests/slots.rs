//! loom models of the multi-slot timer's shared state (`SlotTimer` + `SlotHandle`).
//! Run with `RUSTFLAGS="--cfg lazy_deadline_loom"`; see `loom-tests/README.md`.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::slots::SlotShared;
use lazy_deadline::core::NEVER;
use lazy_deadline::sync::{WakerMemo, WakerSlot};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use support::{EntryStub, WakeFlag};

/// A handle sets a deadline earlier than what the owner is about to arm, while the
/// owner collects and publishes `armed`: the owner's armed deadline ends up no later
/// than the new one, or the owner is woken (Dekker store/fence/load on both sides).
///
/// The dangerous case needs a *stale small* `armed`: the entry was armed at 10 for
/// kind 0, the owner collects kind 0 at 10 and is about to arm at kind 2's 100, and
/// the handle, reading the old `armed` = 10, thinks 50 needs no wake.
#[test]
fn handle_set_earlier_races_owner_arming() {
    loom::model(|| {
        let shared = SlotShared::new(3);
        shared.store_owner(0, 10);
        shared.store_owner(2, 100);
        let (flag, waker) = WakeFlag::new();
        shared.register(&waker, &mut WakerMemo::default());
        assert_eq!(shared.collect(0).next, 10);
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || shared.set_remote(1, 50))
        };
        shared.register(&waker, &mut WakerMemo::default());
        let collected = shared.collect(10);
        handle.join().unwrap();
        assert_eq!(collected.expired, 0b001);
        assert!(
            collected.next <= 50 || flag.woken(),
            "armed at {} and not woken: the earlier deadline would fire late",
            collected.next
        );
    });
}

/// The owner's fast path (register, read `armed`, compare with its entry) against a
/// handle setting an earlier deadline. The second poll is by the same task, so its
/// registration is skipped (same waker as stored): the owner notices, or is woken.
#[test]
fn handle_set_earlier_races_owner_fast_path() {
    loom::model(|| {
        let shared = SlotShared::new(2);
        shared.store_owner(0, 100);
        let (flag, waker) = WakeFlag::new();
        let mut memo = WakerMemo::default();
        shared.register(&waker, &mut memo);
        assert_eq!(shared.collect(0).next, 100); // the entry is armed at 100
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || shared.set_remote(1, 50))
        };
        shared.register(&waker, &mut memo);
        let noticed = shared.armed() < 100;
        handle.join().unwrap();
        assert!(noticed || flag.woken(), "earlier deadline missed");
    });
}

/// A handle moves an already-set kind earlier than what the owner armed: the
/// replaced value was later, so the check must run and wake the owner.
#[test]
fn handle_moves_a_kind_earlier() {
    loom::model(|| {
        let shared = SlotShared::new(1);
        shared.store_owner(0, 100);
        let (flag, waker) = WakeFlag::new();
        shared.register(&waker, &mut WakerMemo::default());
        assert_eq!(shared.collect(0).next, 100);
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || shared.set_remote(0, 50))
        };
        shared.register(&waker, &mut WakerMemo::default());
        let noticed = shared.armed() < 100;
        handle.join().unwrap();
        assert!(noticed || flag.woken(), "moved earlier without a wake");
    });
}

/// Two handles race on one kind (50, then a re-set to 60 that may skip the check
/// because it is not earlier than the value it replaced) while the owner collects a
/// due kind and re-arms: the owner ends up armed no later than the kind's final
/// deadline, or is woken.
#[test]
fn skipped_check_on_later_reset_is_safe() {
    loom::model(|| {
        let shared = SlotShared::new(3);
        shared.store_owner(1, 10);
        shared.store_owner(2, 100);
        let (flag, waker) = WakeFlag::new();
        shared.register(&waker, &mut WakerMemo::default());
        assert_eq!(shared.collect(0).next, 10);
        let setters: Vec<_> = [50u64, 60]
            .into_iter()
            .map(|at| {
                let shared = shared.clone();
                thread::spawn(move || shared.set_remote(0, at))
            })
            .collect();
        shared.register(&waker, &mut WakerMemo::default());
        let collected = shared.collect(10);
        for s in setters {
            s.join().unwrap();
        }
        let final_deadline = shared.deadline(0);
        assert!(
            collected.next <= final_deadline || flag.woken(),
            "armed at {} for a kind due at {final_deadline}, not woken",
            collected.next
        );
    });
}

/// A slot cancelled and re-set by a handle while the owner collects expired kinds:
/// the re-set is never lost, and no set is reported twice. The first collection runs
/// at 12, when the original deadline (10) is due and the re-set one (15) is not.
#[test]
fn cancel_and_reset_race_collection() {
    loom::model(|| {
        let shared = SlotShared::new(1);
        shared.store_owner(0, 10);
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.cancel_remote(0);
                shared.set_remote(0, 15);
            })
        };
        let (_flag, waker) = WakeFlag::new();
        shared.register(&waker, &mut WakerMemo::default());
        let first = shared.collect(12).expired;
        handle.join().unwrap();
        let second = shared.collect(20).expired;
        // 10 was reported before the cancel, or never; 15 exactly once, and only
        // once due.
        assert!(first <= 1);
        assert_eq!(second, 1, "the re-set deadline was lost");
        assert_eq!(shared.deadline(0), NEVER);
    });
}

/// A cancel racing with two collections (one before the deadline, one after): the
/// set is reported at most once, and once the cancel has happened (joined) nothing
/// is reported: the owner never writes back a value it read before the cancel.
#[test]
fn cancel_races_collection() {
    loom::model(|| {
        let shared = SlotShared::new(1);
        shared.store_owner(0, 10);
        let cancelled = Arc::new(AtomicBool::new(false));
        let handle = {
            let (shared, cancelled) = (shared.clone(), cancelled.clone());
            thread::spawn(move || {
                shared.cancel_remote(0);
                // Release/Acquire only to give the model its happens-before edge.
                cancelled.store(true, Ordering::Release);
            })
        };
        let early = shared.collect(5).expired;
        let cancel_happened_before = cancelled.load(Ordering::Acquire);
        let due = shared.collect(12).expired;
        handle.join().unwrap();
        let after = shared.collect(20).expired;
        assert_eq!(early, 0, "reported before its deadline");
        if cancel_happened_before {
            assert_eq!(due, 0, "reported after a cancel that happened before");
        }
        assert!(due <= 1);
        assert_eq!(after, 0, "a cancelled deadline was reported");
    });
}

/// Two handles set different kinds at once while the owner collects: each is
/// reported exactly once across that collection and the next.
#[test]
fn two_handles_set_different_kinds() {
    loom::model(|| {
        let shared = SlotShared::new(2);
        let (_flag, waker) = WakeFlag::new();
        shared.register(&waker, &mut WakerMemo::default());
        let handles: Vec<_> = [(0usize, 5u64), (1, 6)]
            .into_iter()
            .map(|(index, at)| {
                let shared = shared.clone();
                thread::spawn(move || shared.set_remote(index, at))
            })
            .collect();
        let first = shared.collect(10).expired;
        for h in handles {
            h.join().unwrap();
        }
        let second = shared.collect(10).expired;
        assert_eq!(first & second, 0, "reported twice");
        assert_eq!(first | second, 0b11, "a set was lost");
    });
}

/// The timer dropped while a handle sets and cancels: no panic, no leak of the
/// shared state (loom checks its `Arc`), and the owner's waker is released.
#[test]
fn owner_dropped_while_handles_set() {
    loom::model(|| {
        let shared = SlotShared::new(2);
        let (flag, waker) = WakeFlag::new();
        shared.register(&waker, &mut WakerMemo::default());
        shared.store_owner(0, 5);
        assert_eq!(shared.collect(0).next, 5);
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || {
                shared.set_remote(1, 50); // later than armed: no wake
                shared.cancel_remote(0);
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
        drop(last);
    });
}

/// The waker slot's register racing with a wake (the pattern every wake path here
/// uses): the owner either sees the data after registering, or the wake reaches it.
#[test]
fn register_racing_wake_is_delivered() {
    loom::model(|| {
        let data = Arc::new(AtomicBool::new(false));
        let slot = Arc::new(WakerSlot::new());
        let (flag, waker) = WakeFlag::new();
        let waker_thread = {
            let (data, slot) = (data.clone(), slot.clone());
            thread::spawn(move || {
                data.store(true, Ordering::Relaxed);
                slot.wake();
            })
        };
        slot.register(&waker, &mut WakerMemo::default());
        let seen = data.load(Ordering::Relaxed);
        waker_thread.join().unwrap();
        assert!(seen || flag.woken(), "wake lost");
    });
}

/// The owner's pending fast path no longer polls its runtime entry: the entry is
/// polled with a waker that lowers `armed` and wakes the owner (`entry_fired`). The
/// fire races the owner's poll, slow path included (a collection overwrites the
/// signal, then polls the entry): the owner sees the fire in this poll, or is woken
/// and sees it in the next. The owner polls as `SlotTimer::poll_expired` does.
#[test]
fn entry_fire_races_owner_poll() {
    loom::model(|| {
        let shared = SlotShared::new(2);
        shared.store_owner(0, 100);
        shared.store_owner(1, 300);
        let (flag, waker) = WakeFlag::new();
        let mut memo = WakerMemo::default();
        shared.register(&waker, &mut memo);
        let mut horizon = shared.collect(0).next; // the entry is armed at 100
        let entry = Arc::new(EntryStub::registered());
        let driver = {
            let (shared, entry) = (shared.clone(), entry.clone());
            thread::spawn(move || entry.fire(|| shared.entry_fired()))
        };
        // One owner poll: fast path, or collect (clock still before 100) and poll
        // the entry, which is still armed at 100 (the collection finds it next).
        let mut poll = |horizon: &mut u64| {
            shared.register(&waker, &mut memo);
            if shared.armed() >= *horizon {
                return false;
            }
            let collected = shared.collect(0);
            assert_eq!(collected.next, 100);
            *horizon = collected.next;
            entry.poll()
        };
        let wakes_before = flag.count();
        let seen = poll(&mut horizon);
        driver.join().unwrap();
        if !seen {
            assert!(
                flag.count() > wakes_before,
                "the entry fired, nobody was told"
            );
            assert!(
                poll(&mut horizon),
                "woken, but the poll still misses the fire"
            );
        }
    });
}

/// The owner's own sets (`store_owner`, and `lower_armed` for one earlier than its
/// entry) while a handle sets another kind, earlier than the entry (which lowers
/// `armed` too) or later (which does not). `lower_armed` is a plain store that may
/// overwrite the handle's lowered `armed`, which is safe only because any value below
/// the horizon sends the owner's next poll down the slow path, whose collection
/// rescans every slot. So after both, the owner's fast path must not skip, and its
/// collection must report what is due.
#[test]
fn owner_sets_race_a_handle_set() {
    for (handle_deadline, due) in [(10, 0b011), (200, 0b001)] {
        loom::model(move || {
            let shared = SlotShared::new(3);
            shared.store_owner(2, 100);
            let (_flag, waker) = WakeFlag::new();
            let mut memo = WakerMemo::default();
            shared.register(&waker, &mut memo);
            let horizon = shared.collect(0).next; // the entry is armed at 100
            let handle = {
                let shared = shared.clone();
                thread::spawn(move || shared.set_remote(1, handle_deadline))
            };
            // What `SlotTimer::set_nanos` does for a deadline earlier than the horizon.
            shared.store_owner(0, 20);
            if 20 < horizon {
                shared.lower_armed(20);
            }
            handle.join().unwrap();
            shared.register(&waker, &mut memo);
            assert!(
                shared.armed() < horizon,
                "the fast path would skip an earlier set"
            );
            assert_eq!(shared.collect(50).expired, due);
        });
    }
}
