//! `SharedSet<X>`: a deadline set's data as threads share it. A [`SetCore`] behind a
//! [`HandOff`] (with `X`, what the runtime layer keeps beside it: tokio's entry), and
//! the *passed mark*: every deadline at or before it has passed by the set's
//! runtime clock. The mark is read without the lock, so a request's poll whose
//! deadline has not passed and whose waker is unchanged is one atomic load.
//!
//! Why a lock-free read loses no wake: a service raises the mark and expires the
//! requests under it in the same lock hold, and wakes them after. A poll that reads
//! the mark below its deadline either keeps the waker the slot holds (which that
//! expiry wakes) or takes the lock to swap it, and under the lock finds its slot
//! still pending (the expiry to come wakes the new waker) or already expired
//! (answered "passed"). `loom-tests/tests/deadline_set.rs` checks it.

use super::deadline_set::{Filed, SetCore};
use super::handoff::HandOff;
use crate::sync::{AtomicU64, Ordering, WakerMemo};
use std::task::Waker;

/// See the module docs.
#[derive(Debug)]
pub struct SharedSet<X> {
    passed: AtomicU64,
    state: HandOff<Locked<X>>,
}

/// What the set's lock guards.
#[derive(Debug)]
pub struct Locked<X> {
    /// The requests' deadlines and wakers.
    pub core: SetCore,
    /// What the runtime layer keeps under the same lock (tokio's entry).
    pub extra: X,
}

/// Where [`SharedSet::place`] filed a deadline, and the memo of the waker stored.
pub type Placed = (Filed, WakerMemo);

impl<X> SharedSet<X> {
    /// An empty set, nothing passed.
    pub fn new(extra: X) -> Self {
        Self {
            passed: AtomicU64::new(0),
            state: HandOff::new(Locked {
                core: SetCore::default(),
                extra,
            }),
        }
    }

    /// The lock, and the hand-off of services to its holder.
    pub fn state(&self) -> &HandOff<Locked<X>> {
        &self.state
    }

    /// Whether `deadline` has passed, as far as the set has seen.
    pub fn has_passed(&self, deadline: u64) -> bool {
        // Acquire: pairs with the Release in `expire`, made before the expired
        // requests' wakers are woken, so a woken poll sees it.
        deadline <= self.passed.load(Ordering::Acquire)
    }

    /// Under the lock: raises the mark to `passed` (it never moves back) and expires
    /// every request due by it, pushing their wakers to `wake` (wake them after the
    /// lock). Returns the earliest deadline still pending (`NEVER`: none).
    pub fn expire(&self, locked: &mut Locked<X>, passed: u64, wake: &mut Vec<Waker>) -> u64 {
        // Relaxed load: only this locked code writes the mark. Release store: see
        // `has_passed`; before the expiry, so no woken poll reads an older mark.
        if passed > self.passed.load(Ordering::Relaxed) {
            self.passed.store(passed, Ordering::Release);
        }
        locked.core.expire(passed, wake)
    }

    /// Under one lock: cancels `previous` (if still pending) and files `deadline`
    /// with `waker`, or else with `previous`'s own waker (moved, not cloned); then
    /// runs `then` on the locked state (the runtime layer's re-arm). The placement
    /// is `None` when there was no waker to file with (`previous` expired and none
    /// given); the waker replaced is returned to be dropped after the lock.
    pub fn place<R>(
        &self,
        deadline: u64,
        previous: Option<Filed>,
        waker: Option<&Waker>,
        then: impl FnOnce(&mut Locked<X>) -> R,
    ) -> (Option<Placed>, Option<Waker>, Option<R>) {
        self.state.with(|locked| {
            let old = previous.and_then(|filed| locked.core.cancel(filed));
            let (waker, replaced) = match (waker, old) {
                (Some(waker), old) => (waker.clone(), old),
                (None, Some(old)) => (old, None),
                (None, None) => return (None, None, None),
            };
            let filed = locked.core.file(deadline, waker);
            // The clone the slot holds, not the caller's waker (see `WakerSlot`).
            let memo = locked
                .core
                .stored_waker(filed)
                .map_or_else(WakerMemo::default, WakerMemo::of);
            let then = then(locked);
            (Some((filed, memo)), replaced, Some(then))
        })
    }

    /// Whether the request `filed` at `deadline` has passed; if not, makes sure the
    /// slot holds `waker` (`memo`: the one it holds, updated here).
    pub fn poll_passed(
        &self,
        filed: Filed,
        deadline: u64,
        memo: &mut WakerMemo,
        waker: &Waker,
    ) -> bool {
        if self.has_passed(deadline) {
            return true;
        }
        if *memo == WakerMemo::of(waker) {
            return false; // the expiry wakes the waker the slot holds
        }
        let (stored, replaced) =
            self.state
                .with(|locked| match locked.core.update_waker(filed, waker) {
                    Some(replaced) => {
                        let stored = locked.core.stored_waker(filed);
                        (stored.map(WakerMemo::of), replaced)
                    }
                    None => (None, None),
                });
        drop(replaced); // after the lock: a waker's drop may reach this set
        match stored {
            Some(stored) => {
                *memo = stored;
                false
            }
            None => true, // expired between the mark's read and the lock
        }
    }

    /// Gives the slot of `filed` back (nothing if it expired).
    pub fn cancel(&self, filed: Filed) {
        let waker = self.state.with(|locked| locked.core.cancel(filed));
        drop(waker); // after the lock
    }
}
