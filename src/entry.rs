//! `RuntimeEntry`: the one runtime timer entry a timer owns, and everything the
//! adapters do with it, in one place.
//!
//! Every adapter with shared state (`IdleTimeout`, `SlotTimer`, `IdleQueue`) owns one
//! `tokio::time::Sleep` and needs the same things around it: the lazy re-arm decision
//! ([`LazyEntry`]), the registration counters, which waker its shared slot holds (so
//! an unchanged waker skips the lock), which runtime owns the entry (whose clock
//! decides "due", and whether the poller is away from it), arming, and a poll with
//! the shared state's waker that records the fire. Each adapter then reads as its
//! decision plus its core.
//!
//! The lazy [`Sleep`](crate::Sleep) does not use it, on purpose: it is a drop-in for
//! `tokio::time::Sleep`, and the first place its deadline lives is either tokio's
//! own entry, inline and polled with the caller's waker (on a runtime whose timers
//! no second worker contends for: `sleep::tokio_entry`), or its thread's deadline
//! set (`sleep::in_set`), which it leaves, at its first reset the set would pay its
//! lock for, for a boxed entry of its own polled through an `EntrySignal`
//! (`sleep::own_entry`). [`Timeout`](crate::Timeout) holds tokio's entry inline or
//! a filing in the set. Each applies the same rules as the adapters here (first-poll
//! arming, the entry as the only witness, eager re-arming away from home) on its own
//! fields.

use crate::core::{LazyEntry, Step};
use crate::stats::Stats;
use crate::sync::{entry_waker, Arc, EntryWake, WakerMemo};
use crate::time_base::{from_nanos, now_nanos};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::time::Instant;

/// The shared state an owner polls its entry with, and what must happen right
/// before that poll (an `EntrySignal` lowers its fired flag there; see
/// `core::signal`).
pub(crate) trait EntryWaker: EntryWake {
    /// Called right before the entry is polled, with no early return in between.
    fn before_entry_poll(&self) {}
}

impl EntryWaker for crate::core::signal::EntrySignal {
    fn before_entry_poll(&self) {
        self.clear_entry_fired();
    }
}

impl EntryWaker for crate::core::slots::SlotShared {}

/// Whether the current context is outside the runtime `owner` (another runtime, a
/// plain executor, no runtime at all). Out of line: asked only on a new waker.
#[inline(never)]
pub(crate) fn polled_away_from(owner: tokio::runtime::Id) -> bool {
    !tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() == owner)
}

/// A timer's runtime entry and what the adapter knows about it.
pub(crate) struct RuntimeEntry {
    lazy: LazyEntry,
    /// Which waker the shared state's slot holds, so unchanged polls skip the lock.
    memo: WakerMemo,
    stats: Stats,
    /// The runtime the entry was created in: its clock is the truth about "due".
    owner: tokio::runtime::Id,
    /// Boxed so the owning timer is `Unpin`; polled only while `lazy` says armed.
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl RuntimeEntry {
    /// An unarmed entry on the current runtime.
    ///
    /// # Panics
    ///
    /// tokio's own panic outside a runtime or in one without the time driver, at the
    /// caller's location.
    #[track_caller]
    pub fn new() -> Self {
        // The sleep first, so that a missing runtime or time driver panics with
        // tokio's own message.
        let sleep = Box::pin(tokio::time::sleep_until(Instant::now()));
        Self {
            lazy: LazyEntry::new(),
            memo: WakerMemo::default(),
            stats: Stats::default(),
            owner: tokio::runtime::Handle::current().id(),
            sleep,
        }
    }

    /// Registers the poll's waker through `register` (the shared state's slot, which
    /// says whether it stored a new waker). On a new waker, learns whether this task
    /// runs inside the entry's runtime: one waker is one task, and a task stays on
    /// its runtime, so the answer holds until the waker changes.
    #[inline]
    pub fn register(&mut self, register: impl FnOnce(&mut WakerMemo) -> bool) {
        if register(&mut self.memo) {
            self.lazy.set_away(polled_away_from(self.owner));
        }
    }

    /// The memo, the decision, and the question [`register`](Self::register) asks on
    /// a new waker, for a core function that registers and decides in one (the
    /// activity timer's `poll_step`, which the loom models run as it ships).
    #[inline]
    pub fn parts(&mut self) -> (&mut WakerMemo, &mut LazyEntry, impl FnOnce() -> bool) {
        let owner = self.owner;
        (&mut self.memo, &mut self.lazy, move || {
            polled_away_from(owner)
        })
    }

    /// What to do for `target`; see [`LazyEntry::step`].
    #[inline]
    pub fn step(&mut self, target: Option<u64>) -> Step {
        self.lazy.step(target)
    }

    /// Whether the entry is armed and not yet seen to fire.
    #[inline]
    pub fn is_armed(&self) -> bool {
        self.lazy.is_armed()
    }

    /// Whether the last new waker was polled away from the entry's runtime.
    #[inline]
    pub fn is_away(&self) -> bool {
        self.lazy.is_away()
    }

    /// See [`LazyEntry::horizon`].
    #[inline]
    pub fn horizon(&self) -> u64 {
        self.lazy.horizon()
    }

    /// The latest time the owning runtime's clock is known to have passed.
    #[inline]
    pub fn witnessed(&self) -> u64 {
        self.lazy.witnessed()
    }

    /// Polled inside the owning runtime, its clock is the truth: take it as
    /// witnessed, so everything due by it comes out in this poll, with no runtime
    /// entry of its own. Elsewhere only the entry firing counts (the polling
    /// context's clock may be another runtime's). See [`home_clock`](Self::home_clock).
    #[inline]
    pub fn witness_home_clock(&mut self) {
        if let Some(now) = self.home_clock() {
            self.lazy.witness(now);
        }
    }

    /// The owning runtime's clock, if the poller runs inside it; `None` elsewhere.
    ///
    /// What [`register`](Self::register) learned from a new waker is not enough
    /// here: one waker can poll in several places (`futures`' no-op waker, std's
    /// `Waker::noop()`, a hand-written waker shared by two executors), so the timer
    /// may have moved without its waker changing. Reading the caller's clock as the
    /// home clock would then fire early, so the runtime is checked where the clock is
    /// read, on the slow path only; what it finds also updates where the poller is.
    #[inline(never)]
    pub fn home_clock(&mut self) -> Option<u64> {
        let away = polled_away_from(self.owner);
        self.lazy.set_away(away);
        (!away).then(now_nanos)
    }

    /// Records that the owning runtime's clock has passed `at` (read from
    /// [`home_clock`](Self::home_clock)).
    #[inline]
    pub fn witness(&mut self, at: u64) {
        self.lazy.witness(at);
    }

    /// What to do for `target`, keeping the entry at exactly it; see
    /// [`LazyEntry::step_exact`].
    #[inline]
    pub fn step_exact(&mut self, target: Option<u64>) -> Step {
        self.lazy.step_exact(target)
    }

    /// (Re-)arms the entry at `at`, as a [`Step::Arm`] asked.
    pub fn arm(&mut self, at: u64) {
        self.sleep.as_mut().reset(from_nanos(at));
        self.stats.registrations += 1;
    }

    /// Polls the entry with `shared`'s waker, so its fire runs `shared`'s `Wake`
    /// impl (which records it and wakes whichever task owns the timer by then), and
    /// records a fire seen here.
    pub fn poll<W: EntryWake>(&mut self, shared: &Arc<W>) -> Poll<()> {
        let waker = entry_waker(shared);
        let poll = self.sleep.as_mut().poll(&mut Context::from_waker(&waker));
        if poll.is_ready() {
            self.stats.entry_fires += 1;
            self.lazy.fired();
        }
        poll
    }

    /// Carries out `step` for an owner whose entry is polled with `shared`: arms the
    /// entry if asked, and polls it if armed. `true` when the owner should look
    /// again in this poll (the target is witnessed, or the entry fired); `false` when
    /// it is pending (the entry will wake it).
    pub fn carry_out<W: EntryWaker>(&mut self, step: Step, shared: &Arc<W>) -> bool {
        match step {
            Step::Fire => true,
            Step::Arm(at) => {
                self.arm(at);
                self.poll_after(shared).is_ready()
            }
            Step::Wait => self.is_armed() && self.poll_after(shared).is_ready(),
        }
    }

    fn poll_after<W: EntryWaker>(&mut self, shared: &Arc<W>) -> Poll<()> {
        shared.before_entry_poll();
        self.poll(shared)
    }

    /// The counters of driver work so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Bytes of the boxed tokio entry, for memory accounting.
    pub const fn boxed_size() -> usize {
        std::mem::size_of::<tokio::time::Sleep>()
    }
}
