//! The runtime-independent core: shared state and the lazy re-arm decision.
//!
//! Nothing here reads a clock or touches tokio. Times are `u64` nanoseconds from the
//! process-wide base (see `time_base`), and `now` is always an argument, so the same
//! code runs under tokio, under unit tests with a hand-moved clock, and under loom
//! (`--cfg lazy_deadline_loom`, through `crate::sync`).
//!
//! # The lazy rule
//!
//! Each timer owns one runtime entry (a `tokio::time::Sleep`), and that entry is the
//! only witness the core trusts that time has passed: "due" is judged by the clock of
//! the runtime that owns the entry, never by whatever clock the polling context
//! happens to read (another runtime's paused clock, a plain executor). [`LazyEntry`]
//! remembers where the entry is armed and the latest deadline at which it fired (the
//! *witnessed* time: the owning runtime's clock is known to have passed it), and
//! decides, for a target deadline, what the adapter must do:
//!
//! - the target is at or before the witnessed time: **fire** (no clock read);
//! - the target is later than or equal to a live armed entry: **wait**; the entry
//!   fires at or before the target and the decision is taken again then. This is why
//!   a move to a later deadline costs a store;
//! - otherwise (nothing armed, the entry already fired, or the target moved
//!   *earlier*): **arm** at the target and let the runtime judge it. A target already
//!   in the past fires at once (tokio fires an entry whose tick has elapsed inside the
//!   registration), so the price of trusting only the entry is one registration, and
//!   only on a path that is about to fire. Never firing on a clock read is also what
//!   keeps the SCTP traps away: the later-only shortcut applies only to a live entry.
//!
//! Deadlines at or above [`SATURATED`] (the time base saturates about 584 years after
//! the first use) are "never": they are armed at tokio's far future and never fire,
//! even under a clock that has itself saturated.
//!
//! # Invariants the loom models check
//!
//! - `activity`: last activity never moves backwards under concurrent touches; a touch
//!   that happened before the owner's decision is seen by it; a shortened timeout is
//!   either seen by the owner's poll or wakes the owner afterwards.
//! - `slots`: a deadline a handle sets earlier than what the owner arms is either seen
//!   by the owner's collection or wakes the owner (Dekker store/fence/load on both
//!   sides); each set is reported at most once, a cancelled one never.

pub mod activity;
pub mod deadline_set;
pub mod deferred;
pub mod grid;
pub mod handoff;
pub mod keyed;
pub mod lanes;
pub mod owner_view;
pub mod remote;
pub mod service;
pub mod shared_set;
pub mod signal;
pub mod slots;

/// "No deadline": an unset slot, or an entry that is not armed.
pub const NEVER: u64 = u64::MAX;

/// Deadlines at or above this are saturated: never due, whatever the clock says.
/// Real deadlines are clamped to it.
pub const SATURATED: u64 = NEVER - 1;

/// How many decide-arm-poll rounds an adapter runs inside one poll before it yields
/// (waking itself). A round only repeats when the entry fired at once, so two or three
/// suffice; the bound is there so that no interleaving turns a poll into a spin.
pub const MAX_ROUNDS: usize = 8;

/// What the adapter does next with its runtime timer entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The target deadline has been witnessed: resolve now.
    Fire,
    /// (Re-)arm the runtime entry at this deadline, then poll it.
    Arm(u64),
    /// Leave the entry as it is: it fires at or before the target.
    Wait,
}

/// The lazy re-arm decision for one runtime entry, in nanoseconds of the time base.
/// Where the entry is armed ([`NEVER`]: not armed, or fired), the latest deadline at
/// which it fired, and whether the poller is away from the entry's runtime.
///
/// # Away from the owning runtime
///
/// Lazy re-arming needs the owner's poll between the entry's fire and the later
/// deadline. Inside the owning runtime that poll comes before the runtime's clock can
/// move on. Polled from another thread's runtime or a plain executor, it may not: a
/// paused runtime auto-advances to its next timer as soon as its own tasks are idle,
/// which can be long past the later deadline before the other thread re-arms. So an
/// entry whose poller is away is *eager*: a later target re-arms at once, as
/// `tokio::time::Sleep::reset` would, and [`horizon`](Self::horizon) reads
/// [`NEVER`] so that fast paths hand every change to the slow path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LazyEntry {
    armed: u64,
    witnessed: u64,
    /// `u64::MAX` when eager (away), 0 at home: `horizon` ORs it in, one
    /// instruction on every fast path instead of a branch.
    away_mask: u64,
}

impl Default for LazyEntry {
    fn default() -> Self {
        Self::new()
    }
}

impl LazyEntry {
    /// An entry that was never armed and has witnessed nothing.
    pub const fn new() -> Self {
        Self {
            armed: NEVER,
            witnessed: 0,
            away_mask: 0,
        }
    }

    /// Says whether the poller is away from the entry's runtime (see the type docs).
    /// Adapters set it when the poll's waker changes: one waker is one task, and a
    /// task does not move between runtimes.
    #[inline]
    pub fn set_away(&mut self, away: bool) {
        self.away_mask = if away { u64::MAX } else { 0 };
    }

    /// Whether the poller is away from the entry's runtime.
    #[inline]
    pub fn is_away(&self) -> bool {
        self.away_mask != 0
    }

    /// Whether the adapter should poll its runtime entry (only a live, armed one).
    #[inline]
    pub fn is_armed(&self) -> bool {
        self.armed != NEVER
    }

    /// Until when nothing needs re-evaluating absent news: the armed deadline, or
    /// [`NEVER`] when the entry is not armed or the poller is away (then any change
    /// needs evaluating, to re-arm eagerly). Fast paths compare a deadline with it:
    /// at or above it, there is nothing to do.
    #[inline]
    pub fn horizon(&self) -> u64 {
        self.armed | self.away_mask
    }

    /// The latest time the owning runtime's clock is known to have passed (0 until
    /// the entry first fires). Everything at or before it is due.
    #[inline]
    pub fn witnessed(&self) -> u64 {
        self.witnessed
    }

    /// Decides what to do for `target` (`None`: nothing to wait for). Reads no clock.
    /// On [`Step::Arm`] the entry is taken as armed at that deadline: the adapter must
    /// arm it.
    #[inline]
    pub fn step(&mut self, target: Option<u64>) -> Step {
        let Some(target) = target else {
            return Step::Wait;
        };
        let target = target.min(SATURATED);
        // `armed | !away_mask` is `u64::MAX` at home (any later target waits) and
        // `armed` away (only an exact match waits): no branch for it on the pending path.
        if target >= self.armed
            && self.armed > self.witnessed
            && target <= self.armed | !self.away_mask
        {
            // A live entry armed no later than the target fires first. (One armed at
            // or before the witnessed time is spent news: re-arm it for the target.)
            // Away from the entry's runtime only an exact match waits (type docs).
            Step::Wait
        } else if target <= self.witnessed {
            Step::Fire
        } else {
            // Never armed, fired, or moved earlier: the runtime judges it.
            self.armed = target;
            Step::Arm(target)
        }
    }

    /// Like [`step`](Self::step), for an owner that keeps its entry at exactly the
    /// target (`DelayQueue`): a later target re-arms too, so a consumer that keeps
    /// polling is never woken before the final deadline. Only an entry already armed
    /// at the target waits.
    #[inline]
    pub fn step_exact(&mut self, target: Option<u64>) -> Step {
        let Some(target) = target else {
            return Step::Wait;
        };
        let target = target.min(SATURATED);
        if target == self.armed && self.armed > self.witnessed {
            Step::Wait
        } else if target <= self.witnessed {
            Step::Fire
        } else {
            self.armed = target;
            Step::Arm(target)
        }
    }

    /// The runtime entry fired (its poll returned ready): its clock has passed the
    /// armed deadline. A saturated deadline (tokio's far future) witnesses nothing.
    #[inline]
    pub fn fired(&mut self) {
        if self.armed < SATURATED {
            self.witness(self.armed);
        }
        self.armed = NEVER;
    }

    /// Records that the owning runtime's clock has passed `at` (tests and models use
    /// it to stand in for an entry that fired at `at`).
    #[inline]
    pub fn witness(&mut self, at: u64) {
        self.witnessed = self.witnessed.max(at.min(SATURATED - 1));
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    #[test]
    fn first_step_arms_even_when_the_target_looks_past() {
        let mut e = LazyEntry::new();
        assert_eq!(e.step(Some(10)), Step::Arm(10));
        assert_eq!(e.horizon(), 10);
        // Nothing witnessed yet: only the entry may say 10 has passed.
        let mut e = LazyEntry::new();
        assert_eq!(e.step(Some(0)), Step::Fire);
    }

    #[test]
    fn later_target_on_a_live_entry_is_free() {
        let mut e = LazyEntry::new();
        e.step(Some(10));
        assert_eq!(e.step(Some(50)), Step::Wait);
        assert_eq!(e.step(Some(10)), Step::Wait);
    }

    #[test]
    fn earlier_target_rearms_at_once() {
        let mut e = LazyEntry::new();
        e.step(Some(10));
        assert_eq!(e.step(Some(7)), Step::Arm(7));
        assert_eq!(e.step(Some(3)), Step::Arm(3));
    }

    #[test]
    fn fired_entry_fires_witnessed_targets_and_rearms_for_the_remainder() {
        let mut e = LazyEntry::new();
        e.step(Some(10));
        e.fired();
        assert!(!e.is_armed());
        assert_eq!(e.witnessed(), 10);
        assert_eq!(e.step(Some(10)), Step::Fire);
        assert_eq!(e.step(Some(9)), Step::Fire);
        assert_eq!(e.step(Some(25)), Step::Arm(25));
        assert_eq!(e.horizon(), 25);
    }

    #[test]
    fn witness_only_moves_forward() {
        let mut e = LazyEntry::new();
        e.step(Some(20));
        e.fired();
        e.step(Some(15)); // moved earlier after firing at 20: 15 <= 20 fires
        assert_eq!(e.witnessed(), 20);
        e.witness(5);
        assert_eq!(e.witnessed(), 20);
    }

    #[test]
    fn saturated_targets_never_fire() {
        let mut e = LazyEntry::new();
        e.witness(u64::MAX);
        assert_eq!(e.step(Some(u64::MAX)), Step::Arm(SATURATED));
        e.fired(); // tokio's far future fired: witnesses nothing new
        assert!(e.witnessed() < SATURATED);
        assert_eq!(e.step(Some(SATURATED)), Step::Arm(SATURATED));
    }

    #[test]
    fn away_from_the_owning_runtime_later_targets_rearm_at_once() {
        let mut e = LazyEntry::new();
        e.step(Some(10));
        e.set_away(true);
        assert_eq!(e.horizon(), NEVER, "every change takes the slow path");
        assert_eq!(e.step(Some(10)), Step::Wait);
        assert_eq!(e.step(Some(15)), Step::Arm(15));
        assert_eq!(e.step(Some(7)), Step::Arm(7));
        e.set_away(false);
        assert_eq!(e.horizon(), 7);
        assert_eq!(
            e.step(Some(50)),
            Step::Wait,
            "at home, later is a store again"
        );
    }

    #[test]
    fn exact_steps_follow_the_target_both_ways() {
        let mut e = LazyEntry::new();
        assert_eq!(e.step_exact(Some(10)), Step::Arm(10));
        assert_eq!(e.step_exact(Some(10)), Step::Wait);
        assert_eq!(
            e.step_exact(Some(30)),
            Step::Arm(30),
            "later moves the entry"
        );
        assert_eq!(e.step_exact(Some(20)), Step::Arm(20));
        e.fired();
        assert_eq!(e.step_exact(Some(20)), Step::Fire);
        assert_eq!(e.step_exact(None), Step::Wait);
    }

    #[test]
    fn nothing_to_wait_for() {
        let mut e = LazyEntry::new();
        assert_eq!(e.step(None), Step::Wait);
        assert!(!e.is_armed());
    }
}

/// Helpers for the core's unit tests.
#[cfg(all(test, not(lazy_deadline_loom)))]
pub(crate) mod tests_support {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    /// Counts the wakes it gets.
    pub struct Counter(AtomicUsize);

    impl Counter {
        pub fn wakes(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker that counts its wakes.
    pub fn counting_waker() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        (counter.clone(), Waker::from(counter))
    }
}
