//! `Request`: one timer's place in a deadline set, what [`Timeout`](crate::Timeout)
//! and [`Sleep`](crate::Sleep) hold. The set it is bound to (the thread's set for the
//! runtime it was made in: [`Bound`]), and once filed, where (its slot and ticket)
//! and which waker that slot holds. Plain data but for its drop, which gives the
//! filing back.
//!
//! One value rather than a binding and a separate filing, so that a timer carries
//! the set and its generation once (the futures that hold it stay small: a `select!`
//! moves them).

use super::deadline_set::{rearm, Bound};
use super::thread_sets;
use crate::core::deadline_set::Filed;
use crate::core::shared_set::FileOutcome;
use crate::sync::WakerMemo;
use std::task::Waker;
use tokio::runtime::Id;

/// "Not filed": no slot has ticket 0 (tickets start at 1).
const UNFILED: Filed = Filed {
    index: 0,
    ticket: 0,
};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Request {
    bound: Bound,
    /// Where it is filed ([`UNFILED`]: not filed, or given back).
    filed: Filed,
    /// Which waker the slot holds, so an unchanged waker skips the lock.
    memo: WakerMemo,
}

/// What filing a deadline came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Filing {
    /// Filed; its later polls go through [`Request::poll_passed`].
    Filed,
    /// The deadline has passed by the set's clock already (nothing is filed).
    Passed,
    /// The set's runtime has gone (see [`Request::is_void`]; nothing is filed).
    Void,
}

impl Request {
    /// Bound to the current thread's set for the current runtime, not filed.
    ///
    /// # Panics
    ///
    /// tokio's own panic outside a runtime, or in one without the time driver.
    #[cfg(all(test, not(lazy_deadline_loom)))]
    #[track_caller]
    pub fn current() -> Self {
        Self::bound_to(thread_sets::current())
    }

    /// Bound to `bound`'s set, not filed.
    #[inline(always)]
    pub fn bound_to(bound: Bound) -> Self {
        Self {
            bound,
            filed: UNFILED,
            memo: WakerMemo::default(),
        }
    }

    /// The runtime the timer belongs to.
    #[inline]
    pub fn runtime(&self) -> Id {
        self.bound.runtime
    }

    /// Whether it is filed (and not given back).
    #[inline]
    pub fn is_filed(&self) -> bool {
        self.filed.ticket != 0
    }

    /// Whether the set's runtime shut down (or had when the timer was made).
    #[inline]
    pub fn is_void(&self) -> bool {
        !self
            .bound
            .set
            .is_some_and(|set| set.is_open(self.bound.generation))
    }

    /// Whether `deadline` has passed, as far as the set has seen (no waker
    /// registration). `false` without a set.
    #[inline]
    pub fn has_passed(&self, deadline: u64) -> bool {
        self.bound
            .set
            .is_some_and(|set| set.shared.has_passed(deadline))
    }

    /// The end of the driver tick that holds `at`, if the set knows its runtime's
    /// ticks (see `DeadlineSet::tick_end`).
    #[inline]
    pub fn tick_end(&self, at: u64) -> Option<u64> {
        self.bound.set?.tick_end(at)
    }

    /// Whether the set's runtime's driver keeps an entry's waker across a reset
    /// (see `DeadlineSet::keeps_waker`; `false` without a set).
    #[inline]
    pub fn keeps_waker(&self) -> bool {
        self.bound.set.is_some_and(|set| set.keeps_waker())
    }

    /// Files `deadline` for the task of `waker` (not filed yet): in an owner slot on
    /// the set's own thread, else in a remote slot. A deadline earlier than the set's
    /// entry moves it, through a service that also expires what has passed, this one
    /// included: a deadline that service found passed is reported passed at once, so
    /// that a timer due already completes in this poll.
    pub fn file(&mut self, deadline: u64, waker: &Waker) -> Filing {
        debug_assert!(!self.is_filed());
        let Some(set) = self.bound.set else {
            return Filing::Void;
        };
        let generation = self.bound.generation;
        let (outcome, replaced, serviced) = thread_sets::with_view(set, generation, |view| {
            set.shared
                .file(generation, deadline, waker, view, |locked| {
                    rearm(set, locked, deadline)
                })
        });
        drop(replaced); // after the lock: a waker's drop may reach this set
        if let Some(serviced) = serviced.flatten() {
            set.shared.after_service(serviced);
        }
        self.settle(outcome, deadline)
    }

    /// Records what a filing at `deadline` came to (see [`file`](Self::file)).
    fn settle(&mut self, outcome: FileOutcome, deadline: u64) -> Filing {
        match outcome {
            FileOutcome::Filed(filed, memo) => {
                self.filed = filed;
                self.memo = memo;
                if self.has_passed(deadline) {
                    self.give_back();
                    return Filing::Passed;
                }
                Filing::Filed
            }
            FileOutcome::Passed => Filing::Passed,
            FileOutcome::Void => Filing::Void,
        }
    }

    /// Whether the filed deadline has passed; registers `waker` if it changed (or,
    /// if its runtime shut down meanwhile, wakes it so that its poll sees that).
    #[inline]
    pub fn poll_passed(&mut self, deadline: u64, waker: &Waker) -> bool {
        match self.bound.set {
            Some(set) if self.is_filed() => set.shared.poll_passed(
                self.bound.generation,
                self.filed,
                deadline,
                &mut self.memo,
                waker,
            ),
            _ => false,
        }
    }

    /// Moves the filing to `deadline` under one lock, with `waker` or else the waker
    /// the slot holds (the old filing is given back in every case). `None` when
    /// neither waker is there (the filing expired and no waker was given): nothing is
    /// filed then.
    pub fn refile(&mut self, deadline: u64, waker: Option<&Waker>) -> Option<Filing> {
        let (Some(set), true) = (self.bound.set, self.is_filed()) else {
            return waker.map(|waker| self.file(deadline, waker));
        };
        let generation = self.bound.generation;
        let previous = std::mem::replace(&mut self.filed, UNFILED);
        let (outcome, drop_later, serviced) = thread_sets::with_view(set, generation, |view| {
            set.shared
                .refile(generation, previous, deadline, waker, view, |locked| {
                    rearm(set, locked, deadline)
                })
        });
        drop(drop_later); // after the lock
        if let Some(serviced) = serviced.flatten() {
            set.shared.after_service(serviced);
        }
        self.release_if_closed();
        Some(self.settle(outcome?, deadline))
    }

    /// Gives the filing back and returns the waker its slot held while it was still
    /// pending, for a timer that leaves the set for an entry of its own (which must
    /// wake that task as the filing would have).
    pub fn withdraw(&mut self) -> Option<Waker> {
        let (Some(set), true) = (self.bound.set, self.is_filed()) else {
            return None;
        };
        let generation = self.bound.generation;
        let filed = std::mem::replace(&mut self.filed, UNFILED);
        let (waker, dropped) =
            thread_sets::with_view(set, generation, |view| set.shared.withdraw(filed, view));
        drop(dropped); // after the lock and the thread's list: it may run any code
        self.release_if_closed();
        waker
    }

    /// Answered, elapsed or dropped: gives the filing back, if there is one.
    #[inline]
    pub fn give_back(&mut self) {
        if self.is_filed() {
            self.give_back_filed();
        }
    }

    /// [`give_back`](Self::give_back) of a filed request.
    #[inline(never)]
    fn give_back_filed(&mut self) {
        let Some(set) = self.bound.set else {
            return;
        };
        let generation = self.bound.generation;
        let filed = std::mem::replace(&mut self.filed, UNFILED);
        let waker = thread_sets::with_view(set, generation, |view| set.shared.cancel(filed, view));
        drop(waker); // after the lock and the thread's list: it may run any code
        self.release_if_closed();
    }

    /// A filing of a closed set was given back: the set goes back to the pool with
    /// its last one.
    #[inline]
    fn release_if_closed(&self) {
        if let Some(set) = self.bound.set {
            if !set.is_open(self.bound.generation) {
                set.release(self.bound.generation);
            }
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        self.give_back();
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
impl Request {
    /// Its binding, for tests.
    pub(crate) fn bound(&self) -> Bound {
        self.bound
    }

    /// Whether its memo names `waker` (a pending poll with it skips the lock).
    pub(crate) fn remembers(&self, waker: &Waker) -> bool {
        self.memo == WakerMemo::of(waker)
    }
}
