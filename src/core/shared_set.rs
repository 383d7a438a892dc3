//! `SharedSet<X>`: a deadline set's data as threads share it. A [`SetCore`] behind a
//! [`HandOff`] (with `X`, what the runtime layer keeps beside it: tokio's entry), the
//! *passed mark* (every deadline at or before it has passed by the set's runtime
//! clock) and the set's *life* (which binding it is in, and whether that binding's
//! runtime shut down).
//!
//! The paths and what they cost:
//!
//! - **File** (a request's first pending poll): the lock, a lane append, and, only
//!   when the deadline beats the entry, a re-arm. The owner thread's filings take an
//!   owner slot, whose state word it may later write without the lock; other
//!   threads' take remote slots.
//! - **Poll while pending**: one atomic load of the passed mark, and a compare of
//!   the waker's identity with the one the slot holds. A new waker takes the lock.
//! - **Answer** (the request completed, the future is dropped): on the owner
//!   thread, a load and a store on the slot's state word (`OwnerView::cancel`); the
//!   slot goes back at the owner's next lock. Elsewhere, the lock.
//! - **Fire** (the entry's waker, on whatever thread turns tokio's driver): the
//!   lock, through the hand-off (`core::service`).
//!
//! Why a lock-free poll loses no wake: a service raises the mark and expires the
//! requests under it in the same lock hold, and wakes them after. A poll that reads
//! the mark below its deadline either keeps the waker the slot holds (which that
//! expiry wakes) or takes the lock to swap it, and under the lock finds its slot
//! still pending (the expiry to come wakes the new waker) or already expired
//! (answered "passed"). `loom-tests/tests/deadline_set.rs` checks it, and the owner's
//! lock-free answer racing a fire.
//!
//! # Life
//!
//! A set is *bound* to one thread and runtime at a time, under a generation number;
//! whoever holds a set keeps the generation it was bound under, and a set whose
//! generation moved on, or whose runtime shut down (*closed*), is void to it. Closing
//! wakes every pending request, so that its future observes the shutdown.

use super::deadline_set::{Filed, OwnerView, SetCore};
use super::handoff::HandOff;
use crate::sync::{AtomicU64, Ordering, WakerMemo};
use std::task::Waker;

/// The `life` word's closed bit (the generation is above it).
const CLOSED: u64 = 1;

/// See the module docs.
#[derive(Debug)]
pub struct SharedSet<X> {
    passed: AtomicU64,
    life: AtomicU64,
    state: HandOff<Locked<X>>,
}

/// What the set's lock guards.
#[derive(Debug)]
pub struct Locked<X> {
    /// The requests' deadlines and wakers.
    pub core: SetCore,
    /// Where the runtime entry is armed (`NEVER`: not armed). Invariant: when armed,
    /// the entry holds the set's waker (polled since it last fired: a poll registers
    /// whatever it reports, and a reset keeps the waker), or it fired since and that
    /// fire's wake has a service coming, which polls it. One exception, at the end
    /// of a runtime whose timer wakes every entry as it shuts down: the runtime
    /// layer may report that wake as no fire, or lose its entry to the driver's
    /// shutdown, and leave `armed` set with nothing to fire; the runtime's end then
    /// closes the set, which wakes every request.
    pub armed: u64,
    /// What the runtime layer keeps under the same lock (tokio's entry).
    pub extra: X,
}

/// What a cancel gives back, to drop after the lock and outside the thread's list
/// (a waker's drop may run code that reaches the same set).
#[derive(Debug)]
#[must_use = "dropped after the lock"]
#[allow(dead_code)] // held only to be dropped by the caller
pub struct Cancelled {
    /// The waker the request's slot held, if the slot gave it up.
    pub waker: Option<Waker>,
    /// Wakers that answered requests' slots kept, let go of once nothing is filed.
    pub let_go: Vec<Waker>,
}

/// Wakers a move or withdrawal under the lock lets go of, to drop after it.
#[derive(Debug, Default)]
#[allow(dead_code)] // held only to be dropped by the caller
pub struct Dropped {
    /// The given-back filing's waker, if its slot gave it up.
    given_back: Option<Waker>,
    /// Another task's waker in the slot a new filing reused.
    replaced: Option<Waker>,
    /// Wakers answered requests' slots kept, let go of once the owner had no
    /// request pending (the given-back filing was its last).
    let_go: Vec<Waker>,
}

/// Under the lock: gives `filed` back for a filing that moves or leaves the set, as
/// an answer does (the owner's lock-free word and its reclaim, or the lock path),
/// letting go of the kept wakers if that was the last pending request.
fn give_back<X>(locked: &mut Locked<X>, filed: Filed, view: Option<&mut OwnerView>) -> Dropped {
    match view {
        Some(view) if !filed.is_remote() => {
            let let_go = if view.cancel(filed) {
                locked.core.reclaim_and_let_go(view)
            } else {
                locked.core.reclaim(view);
                Vec::new()
            };
            Dropped {
                let_go,
                ..Dropped::default()
            }
        }
        _ => {
            let (given_back, let_go) = locked.core.answer_locked(filed);
            Dropped {
                given_back,
                let_go,
                ..Dropped::default()
            }
        }
    }
}

/// What a new waker's swap under the lock came to.
enum Swap {
    /// Stored (the memo of what the slot holds now), with the waker it replaced.
    Stored(Option<WakerMemo>, Option<Waker>),
    /// The request expired meanwhile.
    Expired,
    /// The binding is closed: nothing stored.
    Void,
}

/// What filing a deadline came to.
#[derive(Debug, PartialEq, Eq)]
pub enum FileOutcome {
    /// Filed: where, and the memo of the waker its slot holds.
    Filed(Filed, WakerMemo),
    /// The deadline has passed already (nothing filed).
    Passed,
    /// The set is no longer in the binding filed for, or its runtime shut down.
    Void,
}

impl<X> SharedSet<X> {
    /// An empty set, nothing passed, in no binding yet (closed, generation 0).
    pub fn new(extra: X) -> Self {
        Self {
            passed: AtomicU64::new(0),
            life: AtomicU64::new(CLOSED),
            state: HandOff::new(Locked {
                core: SetCore::default(),
                armed: super::NEVER,
                extra,
            }),
        }
    }

    /// The lock, and the hand-off of services to its holder.
    pub fn state(&self) -> &HandOff<Locked<X>> {
        &self.state
    }

    /// Under the lock: starts a new binding (a set coming out of the pool, empty),
    /// with nothing passed. Returns its generation.
    pub fn open(&self, locked: &mut Locked<X>) -> u64 {
        debug_assert_eq!(locked.core.filings(), 0);
        // Relaxed: the word is written only under the lock; readers outside it take
        // it as a hint (see `is_open`).
        let generation = (self.life.load(Ordering::Relaxed) >> 1) + 1;
        // Relaxed: a new binding's requests are filed under the lock, after this.
        self.passed.store(0, Ordering::Relaxed);
        self.life.store(generation << 1, Ordering::Relaxed);
        locked.armed = super::NEVER;
        generation
    }

    /// Under the lock: the binding's runtime shut down. Every pending request's
    /// waker goes to `wake` (wake them after the lock), the wakers answered requests'
    /// slots kept go to `drop_later` (drop them after the lock); nothing is filed any
    /// more, and no waker is stored any more (see [`poll_passed`](Self::poll_passed)).
    pub fn close(
        &self,
        locked: &mut Locked<X>,
        wake: &mut Vec<Waker>,
        drop_later: &mut Vec<Waker>,
    ) {
        // Relaxed: see `open`. A request woken here learns of the close through the
        // wake, which orders this store before its poll.
        self.life.store(
            self.life.load(Ordering::Relaxed) | CLOSED,
            Ordering::Relaxed,
        );
        locked.core.close(wake, drop_later);
        locked.armed = super::NEVER;
    }

    /// The current binding's generation (exact under the lock).
    pub fn generation(&self) -> u64 {
        // Relaxed: see `open`.
        self.life.load(Ordering::Relaxed) >> 1
    }

    /// Under the lock: the binding is over (its runtime shut down and nothing holds
    /// the set): the generation moves on, closed, so that nothing of the old binding
    /// (a late call, a stale waker) takes the set for its own, and the set waits for
    /// its next [`open`](Self::open).
    pub fn retire(&self, locked: &mut Locked<X>) {
        debug_assert_eq!(locked.core.filings(), 0);
        // Relaxed: see `open`.
        let generation = (self.life.load(Ordering::Relaxed) >> 1) + 1;
        self.life
            .store((generation << 1) | CLOSED, Ordering::Relaxed);
        locked.armed = super::NEVER;
    }

    /// Whether the set is in binding `generation`, open. Outside the lock, a hint: a
    /// close is learnt for sure through the wake that follows it.
    #[inline]
    pub fn is_open(&self, generation: u64) -> bool {
        // Relaxed: see `close`.
        self.life.load(Ordering::Relaxed) == generation << 1
    }

    /// Whether the set is closed or in another binding than `generation`, under the
    /// lock (exact there).
    fn is_void(&self, generation: u64) -> bool {
        !self.is_open(generation)
    }

    /// Whether the current binding's runtime shut down (under the lock: exact).
    pub fn is_closed(&self) -> bool {
        // Relaxed: see `open`.
        self.life.load(Ordering::Relaxed) & CLOSED != 0
    }

    /// Whether `deadline` has passed, as far as the set has seen.
    #[inline]
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

    /// Under one lock: files `deadline` for the task of `waker` in binding
    /// `generation`, in an owner slot when `view` is the owner's (after giving back
    /// the slots the owner answered since its last lock), else in a remote slot;
    /// then runs `then` with the locked state (the runtime layer's re-arm). The
    /// waker replaced in the slot is returned, to drop after the lock.
    pub fn file<R>(
        &self,
        generation: u64,
        deadline: u64,
        waker: &Waker,
        view: Option<&mut OwnerView>,
        then: impl FnOnce(&mut Locked<X>) -> R,
    ) -> (FileOutcome, Option<Waker>, Option<R>) {
        self.state.with(|locked| {
            if self.is_void(generation) {
                return (FileOutcome::Void, None, None);
            }
            debug_assert!(view
                .as_ref()
                .is_none_or(|view| locked.core.is_viewed_by(view)));
            let placement = match view {
                Some(view) => {
                    locked.core.reclaim(view);
                    if self.has_passed(deadline) {
                        return (FileOutcome::Passed, None, None);
                    }
                    locked.core.file_owned(deadline, waker, view)
                }
                None => {
                    if self.has_passed(deadline) {
                        return (FileOutcome::Passed, None, None);
                    }
                    locked.core.file_remote(deadline, waker)
                }
            };
            let (filed, memo, replaced) = placement;
            let then = then(locked);
            (FileOutcome::Filed(filed, memo), replaced, Some(then))
        })
    }

    /// Under one lock: moves the request `previous` to `deadline`. With `waker` (a
    /// `Sleep` whose filing expired before its deadline, which moved later), the old
    /// filing is given back and a new one made for `waker`; without (a `Sleep` moved
    /// earlier while it waits), the filing moves in place, keeping its slot and the
    /// waker the slot holds (no clone), or, if it expired meanwhile, is given back and
    /// nothing is filed (`None`: the poll its expiry asked for files). Then runs
    /// `then` on the locked state (the runtime layer's re-arm). A waker to drop after
    /// the lock may come back.
    pub fn refile<R>(
        &self,
        generation: u64,
        previous: Filed,
        deadline: u64,
        waker: Option<&Waker>,
        mut view: Option<&mut OwnerView>,
        then: impl FnOnce(&mut Locked<X>) -> R,
    ) -> (Option<FileOutcome>, Dropped, Option<R>) {
        self.state.with(|locked| {
            let moved = match waker {
                None if !self.is_void(generation) => locked.core.move_filing(previous, deadline),
                _ => None,
            };
            if let Some(filed) = moved {
                let memo = locked
                    .core
                    .stored_waker(filed)
                    .map_or_else(WakerMemo::default, WakerMemo::of);
                let then = then(locked);
                return (
                    Some(FileOutcome::Filed(filed, memo)),
                    Dropped::default(),
                    Some(then),
                );
            }
            let mut dropped = give_back(locked, previous, view.as_deref_mut());
            let Some(waker) = waker else {
                let void = self.is_void(generation);
                return (void.then_some(FileOutcome::Void), dropped, None);
            };
            if self.is_void(generation) {
                return (Some(FileOutcome::Void), dropped, None);
            }
            if self.has_passed(deadline) {
                return (Some(FileOutcome::Passed), dropped, None);
            }
            let (filed, memo, replaced) = match view {
                Some(view) => locked.core.file_owned(deadline, waker, view),
                None => locked.core.file_remote(deadline, waker),
            };
            // A remote slot's waker is given back; an owner slot's is kept, and the
            // new filing may replace another task's in the slot it reuses.
            let then = then(locked);
            dropped.replaced = replaced;
            (Some(FileOutcome::Filed(filed, memo)), dropped, Some(then))
        })
    }

    /// Under one lock: gives `filed` back and returns the waker its slot held while
    /// it was pending (a clone for an owner slot, which keeps its own), with the waker
    /// to drop after the lock, if any. For a timer that leaves the set for an entry of
    /// its own, which must wake that task as the filing would have.
    pub fn withdraw(&self, filed: Filed, view: Option<&mut OwnerView>) -> (Option<Waker>, Dropped) {
        self.state.with(|locked| {
            let waker = locked.core.stored_waker(filed).cloned();
            (waker, give_back(locked, filed, view))
        })
    }

    /// Whether the request `filed` at `deadline` in binding `generation` has passed;
    /// if not, makes sure the slot holds `waker` (`memo`: the one it holds, updated
    /// here). A new waker that finds the binding closed (its runtime shut down since
    /// the caller looked) is stored nowhere: it is woken at once, so that its poll
    /// comes back and sees the close.
    #[inline]
    pub fn poll_passed(
        &self,
        generation: u64,
        filed: Filed,
        deadline: u64,
        memo: &mut WakerMemo,
        waker: &Waker,
    ) -> bool {
        if self.has_passed(deadline) {
            return true;
        }
        if *memo == WakerMemo::of(waker) {
            return false; // the expiry (or the close) wakes the waker the slot holds
        }
        self.swap_waker(generation, filed, memo, waker)
    }

    /// The locked part of [`poll_passed`](Self::poll_passed): a new waker.
    #[inline(never)]
    fn swap_waker(
        &self,
        generation: u64,
        filed: Filed,
        memo: &mut WakerMemo,
        waker: &Waker,
    ) -> bool {
        let swapped = self.state.with(|locked| {
            if self.is_void(generation) {
                // Closed (or rebound): the close woke the slot's waker and nothing
                // services this binding again, so a waker stored now would never be
                // woken.
                return Swap::Void;
            }
            match locked.core.update_waker(filed, waker) {
                Some(replaced) => {
                    let stored = locked.core.stored_waker(filed).map(WakerMemo::of);
                    Swap::Stored(stored, replaced)
                }
                None => Swap::Expired,
            }
        });
        match swapped {
            Swap::Stored(stored, replaced) => {
                drop(replaced); // after the lock: a waker's drop may reach this set
                                // The poll's waker, not the stored clone's identity (see `fill`).
                *memo = stored.map_or_else(WakerMemo::default, |_| WakerMemo::of(waker));
                false
            }
            Swap::Expired => true, // expired between the mark's read and the lock
            Swap::Void => {
                waker.wake_by_ref();
                false
            }
        }
    }

    /// Answers (cancels) `filed`: lock-free through the owner's `view` for an owner
    /// slot, under the lock otherwise (a remote slot, or a filing that moved away
    /// from its owner thread). Returns the waker the slot gave up and, once nothing
    /// is filed, the wakers answered requests' slots kept, to drop after the
    /// caller's own borrows too (a waker's drop may run any code).
    #[inline]
    pub fn cancel(&self, filed: Filed, view: Option<&mut OwnerView>) -> Cancelled {
        match view {
            Some(view) if !filed.is_remote() => Cancelled {
                waker: None,
                let_go: if view.cancel(filed) {
                    self.flush(view)
                } else {
                    Vec::new()
                },
            },
            _ => {
                let (waker, let_go) = self.answer_locked(filed);
                Cancelled { waker, let_go }
            }
        }
    }

    #[inline(never)]
    fn answer_locked(&self, filed: Filed) -> (Option<Waker>, Vec<Waker>) {
        self.state.with(|locked| locked.core.answer_locked(filed))
    }

    /// Gives back the slots the owner answered since its last lock; once the owner
    /// has nothing pending, also the wakers its slots kept (returned, to drop after
    /// the lock).
    #[inline(never)]
    pub fn flush(&self, view: &mut OwnerView) -> Vec<Waker> {
        self.state.with(|locked| {
            if view.live == 0 {
                locked.core.reclaim_and_let_go(view)
            } else {
                locked.core.reclaim(view);
                Vec::new()
            }
        })
    }
}
