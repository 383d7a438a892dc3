//! loom models of the owner's waker slot (`WakerSlot` in `src/sync.rs`) with wakers
//! that are not the one stable `Arc` waker the other models use: a waker whose clones
//! move to a new address (which `RawWaker`'s contract allows), an address reused by
//! another task's waker, and a waker whose `Drop` wakes through the same slot.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::slots::SlotShared;
use lazy_deadline::sync::{WakerMemo, WakerSlot};
use loom::sync::Arc;
use loom::thread;
use std::task::{Wake, Waker};
use support::MovingWaker;

/// The owner polls with task A's waker, whose clones live at fresh addresses; task
/// A's waker goes away and task B's waker takes its address (what an allocator may
/// do); the owner polls with B's. A wake racing the second registration may reach
/// either task, but once the owner has registered B's waker, the slot must wake B:
/// the memo has to describe what the slot holds (A's clone), not the address the
/// caller passed, or B's poll skips the store and B is never woken.
#[test]
fn a_reused_waker_address_never_passes_for_the_old_task() {
    loom::model(|| {
        let slot = Arc::new(WakerSlot::new());
        let task_a = MovingWaker::new();
        let mut memo = WakerMemo::default();
        slot.register(&task_a.waker(), &mut memo);
        let waker_b = task_a.reuse_address_for_another_task();
        let racing = {
            let slot = slot.clone();
            thread::spawn(move || slot.wake())
        };
        slot.register(&waker_b.waker(), &mut memo);
        racing.join().unwrap();
        let before = waker_b.wakes();
        slot.wake();
        assert_eq!(
            waker_b.wakes(),
            before + 1,
            "the slot still wakes the task that used to own the address"
        );
    });
}

/// A waker whose `Drop` moves the same timer earlier through a handle, which wakes
/// through the owner's slot. Replacing that waker (the owner polls from another
/// task) drops it; dropping it under the slot's lock re-locks the mutex on the same
/// thread, which loom reports as a deadlock. A handle on another thread sets
/// concurrently, so the lock is also contended.
#[test]
fn a_replaced_waker_is_dropped_outside_the_lock() {
    struct SetsOnDrop(Arc<SlotShared>);
    impl Wake for SetsOnDrop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    impl Drop for SetsOnDrop {
        fn drop(&mut self) {
            self.0.set_remote(0, 5);
        }
    }
    loom::model(|| {
        let shared = SlotShared::new(2);
        shared.store_owner(1, 100);
        let mut memo = WakerMemo::default();
        {
            let evil = Waker::from(std::sync::Arc::new(SetsOnDrop(shared.clone())));
            shared.register(&evil, &mut memo);
        }
        assert_eq!(shared.collect(0).next, 100);
        let handle = {
            let shared = shared.clone();
            thread::spawn(move || shared.set_remote(1, 50))
        };
        let (_flag, next_task) = support::WakeFlag::new();
        // Replaces (and drops) the evil waker: its drop sets kind 0 earlier.
        shared.register(&next_task, &mut memo);
        handle.join().unwrap();
        assert!(shared.armed() <= 50, "an earlier set was lost");
        assert_eq!(shared.collect(60).expired, 0b11);
        shared.owner_dropped();
    });
}
