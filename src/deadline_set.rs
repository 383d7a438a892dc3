//! `DeadlineSet`: the per-request deadlines of one thread for one runtime, behind one
//! tokio timer entry. What [`Timeout`](crate::Timeout) and [`Sleep`](crate::Sleep)
//! file their deadlines in, instead of registering a runtime timer entry each.
//!
//! Each thread keeps one set per runtime it makes timers in (a thread-local list,
//! usually of one). A request files its deadline at its first pending poll: under
//! the set's lock, a slab store and a heap push (`core::deadline_set`); its later
//! polls read the set's passed mark without the lock (`core::shared_set`). Since
//! `now + d` grows on a thread, a new deadline is rarely earlier than what the set's
//! entry is armed at, so filing seldom touches tokio. The entry moves when it fires
//! (or a deadline beats it), and that fire comes through the set's own waker from
//! tokio's driver, whichever thread turns it: a busy or blocked worker does not delay
//! its requests' deadlines. A request answered in time cancels its filing (its slot is
//! reused at once); one that moved to another thread cancels through the set it filed
//! in, whose lock only that thread's requests share.
//!
//! The set's lock is held by its own code while it re-arms the entry, and tokio wakes
//! the entry's waker synchronously inside `Sleep::reset` when the new deadline has
//! passed, so the waker must not wait for the lock then: those calls are marked, and
//! a signal during one is handed to the holder (`core::handoff`, loom-checked).

use crate::core::deadline_set::Filed;
use crate::core::shared_set::{Locked, Placed, SharedSet};
use crate::core::{MAX_ROUNDS, NEVER};
use crate::runtime_life::RuntimeLife;
use crate::sync::WakerMemo;
use crate::time_base::{from_nanos, now_nanos, TICK_NANOS};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

thread_local! {
    /// This thread's sets, one per runtime it filed deadlines in.
    static SETS: RefCell<Vec<Arc<DeadlineSet>>> = const { RefCell::new(Vec::new()) };
}

/// See the module docs.
pub(crate) struct DeadlineSet {
    runtime: tokio::runtime::Id,
    life: RuntimeLife,
    shared: SharedSet<Entry>,
}

/// The set's one runtime timer entry, beside its deadlines under the lock.
struct Entry {
    /// Made with the set, in its runtime; registered only while `armed`.
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// Where it is armed (`NEVER`: not armed, or fired and not re-armed).
    armed: u64,
}

type SetState = Locked<Entry>;

/// What a service leaves to do after the lock: the expired requests' wakers, and
/// whether to service again.
type Serviced = (Vec<Waker>, bool);

/// A request's deadline filed in a set.
pub(crate) struct Filing {
    set: Arc<DeadlineSet>,
    filed: Filed,
    /// Which waker the slot holds, so an unchanged waker skips the lock.
    memo: WakerMemo,
}

impl DeadlineSet {
    /// This thread's set for the current runtime (made on first use).
    ///
    /// # Panics
    ///
    /// tokio's own panic outside a runtime, or in one without the time driver.
    #[track_caller]
    pub fn current() -> Arc<Self> {
        let handle = tokio::runtime::Handle::current();
        let id = handle.id();
        let found = SETS.with(|sets| {
            let sets = sets.borrow();
            sets.iter().find(|set| set.runtime == id).cloned()
        });
        if let Some(set) = found {
            return set;
        }
        // A miss (the first deadline of this runtime on this thread): made out here,
        // not in a closure, so a missing time driver panics at the caller.
        let set = Arc::new(Self {
            runtime: id,
            life: RuntimeLife::of(&handle),
            shared: SharedSet::new(Entry {
                // In this runtime, so that a missing time driver panics here.
                sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
                armed: NEVER,
            }),
        });
        SETS.with(|sets| {
            let mut sets = sets.borrow_mut();
            // Runtime ids are never reused, so a live runtime never finds a gone set:
            // drop those only on a miss, off the per-request path.
            sets.retain(|set| !set.life.is_gone());
            sets.push(set.clone());
        });
        set
    }

    /// Whether the set's runtime has shut down (its deadlines are nobody's now).
    pub fn is_gone(&self) -> bool {
        self.life.is_gone()
    }

    /// Files `deadline` for the task of `waker` in this set (the `Arc` moves into
    /// the filing); arms the entry if it is the earliest.
    pub fn file_in(self: Arc<Self>, deadline: u64, waker: &Waker) -> Filing {
        let (placed, _) = self.place(deadline, None, Some(waker));
        let (filed, memo) = placed.expect("a waker was given");
        Filing {
            set: self,
            filed,
            memo,
        }
    }

    /// Under one lock: cancels `previous` and files `deadline` (see
    /// `SharedSet::place`); a deadline earlier than the entry moves it now.
    fn place(
        self: &Arc<Self>,
        deadline: u64,
        previous: Option<Filed>,
        waker: Option<&Waker>,
    ) -> (Option<Placed>, Option<Waker>) {
        let (placed, replaced, serviced) = self.shared.place(deadline, previous, waker, |state| {
            (deadline < state.extra.armed).then(|| self.service(state))
        });
        if let Some(serviced) = serviced.flatten() {
            self.after_service(serviced);
        }
        (placed, replaced)
    }

    /// Under the lock: polls the entry (it fired: its deadline has passed), takes the
    /// home clock where this thread runs the set's runtime, expires what is due, and
    /// re-arms the entry at the earliest deadline left. Returns the wakers to wake
    /// once the lock is released, and whether to service again then (the entry kept
    /// firing at once for `MAX_ROUNDS` rounds).
    ///
    /// Every call into the entry goes through `in_call`: tokio may wake the set's
    /// waker inside it (a reset to a passed deadline), and a fire on another thread
    /// meanwhile counts on this holder too. Either way the round repeats.
    fn service(self: &Arc<Self>, state: &mut SetState) -> Serviced {
        let mut wake = Vec::new();
        if self.life.is_gone() {
            // Shutdown fired the entry; no clock passed anything.
            return (wake, false);
        }
        let set_waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&set_waker);
        for _ in 0..MAX_ROUNDS {
            let mut passed = 0;
            let mut signalled = false;
            if state.extra.armed != NEVER {
                // Outside the polling task's budget: when it is spent, tokio's poll
                // neither registers nor reports the fire.
                let entry = std::pin::pin!(tokio::task::unconstrained(state.extra.sleep.as_mut()));
                let (fired, again) = self
                    .shared
                    .state()
                    .in_call(|| entry.poll(&mut cx).is_ready());
                signalled = again;
                if fired {
                    passed = state.extra.armed;
                    state.extra.armed = NEVER;
                }
            }
            if let Some(now) = self.home_clock() {
                // Only what is a whole tick behind the clock: tokio fires a deadline at
                // its next millisecond tick, and a reply completing in that same tick
                // must win, as with tokio's `timeout` (the future is polled first when
                // the entry fires). Newer deadlines wait for the entry.
                passed = passed.max(now.saturating_sub(TICK_NANOS));
            }
            let next = self.shared.expire(state, passed, &mut wake);
            let armed = state.extra.armed;
            if next == NEVER || (armed != NEVER && armed <= next) {
                // Nothing left, or the entry already fires first (a cancelled
                // earliest request: the entry fires early once and re-arms then).
                // Done, unless a fire came while the entry was polled.
                if !signalled {
                    return (wake, false);
                }
                continue;
            }
            let entry = state.extra.sleep.as_mut();
            let _ = self
                .shared
                .state()
                .in_call(|| entry.reset(from_nanos(next)));
            state.extra.armed = next;
            // Loop to register the entry with the set's waker (the poll above); if
            // `next` has passed too, or tokio fired it inside the reset, that poll
            // reports the fire.
        }
        // Still firing at once after every round: service again after the lock.
        (wake, true)
    }

    /// After the lock: wakes the expired requests' tasks, and services again while
    /// the last service asked for it.
    fn after_service(self: &Arc<Self>, (wake, mut more): Serviced) {
        wake_all(wake);
        while more {
            match self.shared.state().signal(|state| self.service(state)) {
                Some((wake, again)) => {
                    wake_all(wake);
                    more = again;
                }
                None => more = false, // the holder services
            }
        }
    }

    /// The set's runtime clock, if this thread runs inside that runtime (a cancel
    /// from a plain thread or another runtime services the set too, and must not
    /// read its own clock as the set's).
    fn home_clock(&self) -> Option<u64> {
        (!crate::entry::polled_away_from(self.runtime)).then(now_nanos)
    }
}

impl Wake for DeadlineSet {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// The entry fired (or tokio asks for a re-poll): service the set now, or hand it
    /// to the holder inside its call into the entry.
    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(serviced) = self.shared.state().signal(|state| self.service(state)) {
            self.after_service(serviced);
        }
    }
}

impl Filing {
    /// Whether the filed deadline has passed; registers `waker` if it changed.
    pub fn poll_passed(&mut self, deadline: u64, waker: &Waker) -> bool {
        self.set
            .shared
            .poll_passed(self.filed, deadline, &mut self.memo, waker)
    }

    /// Whether the filed deadline has passed, as far as the set has seen (no waker
    /// registration).
    pub fn has_passed(&self, deadline: u64) -> bool {
        self.set.shared.has_passed(deadline)
    }

    /// Moves the filing to `deadline` under one lock, with `waker` or else the waker
    /// the slot holds. `false` if neither is there (the filing expired and no waker
    /// was given): nothing is filed then.
    pub fn refile(&mut self, deadline: u64, waker: Option<&Waker>) -> bool {
        let (placed, replaced) = self.set.place(deadline, Some(self.filed), waker);
        drop(replaced); // outside the lock: a waker's drop may reach this set
        match placed {
            Some((filed, memo)) => {
                self.filed = filed;
                self.memo = memo;
                true
            }
            None => false,
        }
    }

    /// Whether the current context is outside the set's runtime (another runtime, a
    /// plain thread). A runtime-handle lookup: out of line, asked once per timer.
    pub fn is_away(&self) -> bool {
        crate::entry::polled_away_from(self.set.runtime)
    }

    /// Whether the set's runtime shut down: the filing is void.
    pub fn is_void(&self) -> bool {
        self.set.is_gone()
    }

    /// Whether this poll comes after the set's runtime shut down, from outside it.
    /// While it shuts down, its workers still poll the tasks it has not dropped yet
    /// and its time driver is still up (tokio's `Sleep` is pending then); a poll from
    /// inside it is that, never "after".
    pub fn polled_after_shutdown(&self) -> bool {
        self.is_void() && self.is_away()
    }
}

impl Drop for Filing {
    /// Answered, elapsed or dropped: give the slot back (a no-op if it expired).
    fn drop(&mut self) {
        self.set.shared.cancel(self.filed);
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}
