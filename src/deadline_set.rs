//! `DeadlineSet`: the per-request deadlines of one thread for one runtime, behind one
//! tokio timer entry. What [`Timeout`](crate::Timeout) files its deadline in, instead
//! of registering a runtime timer entry of its own.
//!
//! Each thread keeps one set per runtime it polls timeouts in (a thread-local list,
//! usually of one). A request files its deadline at its first pending poll: under
//! the set's lock, a slab store and a heap push (`core::deadline_set`). Since
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
//! passed, so the waker never takes the lock: it hands the work to whoever holds it
//! (`core::handoff`, loom-checked).

use crate::core::deadline_set::{Filed, SetCore};
use crate::core::handoff::HandOff;
use crate::core::{MAX_ROUNDS, NEVER};
use crate::runtime_life::RuntimeLife;
use crate::sync::WakerMemo;
use crate::time_base::{from_nanos, now_nanos, TICK_NANOS};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Every deadline at or before this has passed by the runtime's clock. Written
    /// under the lock before the expired requests are woken; read without it.
    passed: AtomicU64,
    state: HandOff<SetState>,
}

struct SetState {
    core: SetCore,
    /// Made with the set, in its runtime; registered only while `armed`.
    entry: Pin<Box<tokio::time::Sleep>>,
    /// Where the entry is armed (`NEVER`: not armed, or fired and not re-armed).
    armed: u64,
}

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
        SETS.with(|sets| {
            let mut sets = sets.borrow_mut();
            // Runtime ids are never reused, so a live runtime never finds a gone set:
            // drop those only on a miss, off the per-request path.
            if let Some(set) = sets.iter().find(|set| set.runtime == id) {
                return set.clone();
            }
            sets.retain(|set| !set.life.is_gone());
            let set = Arc::new(Self {
                runtime: id,
                life: RuntimeLife::of(&handle),
                passed: AtomicU64::new(0),
                state: HandOff::new(SetState {
                    core: SetCore::default(),
                    // In this runtime, so that a missing time driver panics here.
                    entry: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
                    armed: NEVER,
                }),
            });
            sets.push(set.clone());
            set
        })
    }

    /// Whether the set's runtime has shut down (its deadlines are nobody's now).
    pub fn is_gone(&self) -> bool {
        self.life.is_gone()
    }

    /// Files `deadline` for the task of `waker`; arms the entry if it is the earliest.
    pub fn file(self: &Arc<Self>, deadline: u64, waker: &Waker) -> Filing {
        let (filed, memo, wake) = self.state.with(
            |state| {
                let filed = state.core.file(deadline, waker);
                // The clone the slot holds, not the caller's waker (see `WakerSlot`).
                let memo = state
                    .core
                    .stored_waker(filed)
                    .map_or_else(WakerMemo::default, WakerMemo::of);
                // Earlier than the entry (or nothing armed): move it now.
                let wake = if deadline < state.armed {
                    self.service(state)
                } else {
                    Vec::new()
                };
                (filed, memo, wake)
            },
            |state| self.service(state),
            wake_all,
        );
        wake_all(wake);
        Filing {
            set: self.clone(),
            filed,
            memo,
        }
    }

    /// Whether `deadline` has passed by the set's runtime clock, as far as the set's
    /// entry has seen.
    fn has_passed(&self, deadline: u64) -> bool {
        // Acquire: pairs with the Release store in `service`, made before the
        // expired requests' wakers are woken, so a woken poll sees it.
        deadline <= self.passed.load(Ordering::Acquire)
    }

    /// Under the lock: polls the entry (it fired: its deadline has passed), takes the
    /// home clock where this thread runs the set's runtime, expires what is due, and
    /// re-arms the entry at the earliest deadline left. Returns the wakers to wake
    /// once the lock is released.
    fn service(self: &Arc<Self>, state: &mut SetState) -> Vec<Waker> {
        let mut wake = Vec::new();
        if self.life.is_gone() {
            // Shutdown fired the entry; no clock passed anything.
            return wake;
        }
        let set_waker = Waker::from(self.clone());
        let mut cx = Context::from_waker(&set_waker);
        for _ in 0..MAX_ROUNDS {
            let mut passed = 0;
            if state.armed != NEVER {
                // Outside the polling task's budget: when it is spent, tokio's poll
                // neither registers nor reports the fire.
                let entry = std::pin::pin!(tokio::task::unconstrained(state.entry.as_mut()));
                if entry.poll(&mut cx).is_ready() {
                    passed = state.armed;
                    state.armed = NEVER;
                }
            }
            if let Some(now) = self.home_clock() {
                // Only what is a whole tick behind the clock: tokio fires a deadline at
                // its next millisecond tick, and a reply completing in that same tick
                // must win, as with tokio's `timeout` (the future is polled first when
                // the entry fires). Newer deadlines wait for the entry.
                passed = passed.max(now.saturating_sub(TICK_NANOS));
            }
            // Release: see `has_passed`. Monotonic: only this locked code writes it.
            if passed > self.passed.load(Ordering::Relaxed) {
                self.passed.store(passed, Ordering::Release);
            }
            let next = state.core.expire(passed, &mut wake);
            if next == NEVER || (state.armed != NEVER && state.armed <= next) {
                // Nothing left, or the entry already fires first (a cancelled
                // earliest request: the entry fires early once and re-arms then).
                return wake;
            }
            state.entry.as_mut().reset(from_nanos(next));
            state.armed = next;
            // Loop to register the entry with the set's waker (the poll above); if
            // `next` has passed too, that poll reports the fire at once.
        }
        // Still firing at once after every round: let the next drain go on.
        set_waker.wake_by_ref();
        wake
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
    /// to whoever holds the lock.
    fn wake_by_ref(self: &Arc<Self>) {
        self.state.signal(|state| self.service(state), wake_all);
    }
}

impl Filing {
    /// Whether the filed deadline has passed; registers `waker` if it changed.
    pub fn poll_passed(&mut self, deadline: u64, waker: &Waker) -> bool {
        if self.set.has_passed(deadline) {
            return true;
        }
        if self.memo == WakerMemo::of(waker) {
            return false; // the fire wakes the waker the slot holds
        }
        let set = &self.set;
        let filed = self.filed;
        let (memo, replaced) = set.state.with(
            |state| match state.core.update_waker(filed, waker) {
                Some(replaced) => {
                    let stored = state.core.stored_waker(filed);
                    (stored.map(WakerMemo::of), replaced)
                }
                None => (None, None),
            },
            |state| set.service(state),
            wake_all,
        );
        drop(replaced); // outside the lock: a waker's drop may reach this set
        if let Some(memo) = memo {
            self.memo = memo;
            false
        } else {
            // Expired between the check above and the lock.
            true
        }
    }

    /// Whether the filed deadline has passed, as far as the set has seen (no waker
    /// registration).
    pub fn has_passed(&self, deadline: u64) -> bool {
        self.set.has_passed(deadline)
    }

    /// Whether the set's runtime shut down: the filing is void.
    pub fn is_void(&self) -> bool {
        self.set.is_gone()
    }
}

impl Drop for Filing {
    /// Answered, elapsed or dropped: give the slot back (a no-op if it expired).
    fn drop(&mut self) {
        let set = &self.set;
        let filed = self.filed;
        let waker = set.state.with(
            |state| state.core.cancel(filed),
            |state| set.service(state),
            wake_all,
        );
        drop(waker); // outside the lock
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}
