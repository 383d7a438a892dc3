//! The runtime-independent core: shared state and the lazy re-arm decision.
//!
//! Nothing here reads a clock or touches tokio. Times are `u64` nanoseconds from the
//! process-wide base (see `time_base`), and `now` is always an argument, so the same
//! code runs under tokio, under unit tests with a hand-moved clock, and under loom
//! (`--cfg lazy_deadline_loom`, through `crate::sync`).
//!
//! # The lazy rule
//!
//! Each timer owns one runtime entry. [`LazyEntry`] remembers where that entry is
//! armed and decides, for a target deadline, what the adapter must do:
//!
//! - the target has passed: **fire**;
//! - the target is *earlier* than the armed entry, or nothing is armed, or the entry
//!   already fired: **arm** at the target (the SCTP "never started" and "shortening"
//!   traps: the later-only shortcut applies only to an entry that is armed and live);
//! - otherwise **wait**: the entry fires at or before the target, and the decision is
//!   taken again then. This is why a move to a later deadline costs a store.
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
pub mod slots;

/// "No deadline": an unset slot. Real deadlines saturate one below it.
pub const NEVER: u64 = u64::MAX;

/// What the adapter does next with its runtime timer entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// The target deadline has passed: resolve now.
    Fire,
    /// (Re-)arm the runtime entry at this deadline, then poll it.
    Arm(T),
    /// Leave the entry as it is: it fires at or before the target.
    Wait,
}

/// Where the runtime entry stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState<T> {
    /// Never armed (or disarmed): polling the entry would register it.
    Idle,
    /// Armed at this deadline and not yet fired.
    Armed(T),
    /// Fired at (or after) this deadline; the clock has reached it.
    Fired(T),
}

/// The lazy re-arm decision for one runtime entry. `T` is the time type: `u64`
/// nanoseconds for the shared types, `tokio::time::Instant` would do as well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LazyEntry<T> {
    state: EntryState<T>,
}

impl<T: Ord + Copy> Default for LazyEntry<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Ord + Copy> LazyEntry<T> {
    /// An entry that was never armed.
    pub const fn new() -> Self {
        Self {
            state: EntryState::Idle,
        }
    }

    /// Where the entry stands.
    pub fn state(&self) -> EntryState<T> {
        self.state
    }

    /// Whether the adapter should poll its runtime entry (only a live, armed one).
    pub fn is_armed(&self) -> bool {
        matches!(self.state, EntryState::Armed(_))
    }

    /// Decides what to do for `target` (`None`: nothing to wait for). `now` is called
    /// only when the decision needs the clock, so the common "later deadline, entry
    /// still armed" case reads no clock at all. On [`Step::Arm`] the entry is taken
    /// as armed at that deadline: the adapter must arm it.
    pub fn step(&mut self, target: Option<T>, now: impl FnOnce() -> T) -> Step<T> {
        let Some(target) = target else {
            return Step::Wait;
        };
        let step = match self.state {
            // Live entry armed no later than the target: it will fire first.
            EntryState::Armed(armed) if target >= armed => Step::Wait,
            // The entry fired at `armed`, so the clock is past it: no read needed.
            EntryState::Fired(armed) if target <= armed => Step::Fire,
            // Never armed, moved earlier, or fired and moved later: ask the clock.
            _ if target <= now() => Step::Fire,
            _ => Step::Arm(target),
        };
        if let Step::Arm(at) = step {
            self.state = EntryState::Armed(at);
        }
        step
    }

    /// The runtime entry fired (its poll returned ready).
    pub fn fired(&mut self) {
        if let EntryState::Armed(at) = self.state {
            self.state = EntryState::Fired(at);
        }
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    fn no_clock() -> u64 {
        panic!("this decision must not read the clock")
    }

    #[test]
    fn first_arm_reads_the_clock_and_arms() {
        let mut e = LazyEntry::new();
        assert_eq!(e.step(Some(10), || 5), Step::Arm(10));
        assert_eq!(e.state(), EntryState::Armed(10));
    }

    #[test]
    fn never_armed_and_already_due_fires_without_arming() {
        let mut e = LazyEntry::new();
        assert_eq!(e.step(Some(10), || 10), Step::Fire);
        assert_eq!(e.state(), EntryState::Idle);
    }

    #[test]
    fn later_target_on_a_live_entry_is_free() {
        let mut e = LazyEntry::new();
        e.step(Some(10), || 0);
        assert_eq!(e.step(Some(50), no_clock), Step::Wait);
        assert_eq!(e.step(Some(10), no_clock), Step::Wait);
    }

    #[test]
    fn earlier_target_rearms_at_once() {
        let mut e = LazyEntry::new();
        e.step(Some(10), || 0);
        assert_eq!(e.step(Some(7), || 1), Step::Arm(7));
        assert_eq!(e.step(Some(3), || 4), Step::Fire);
    }

    #[test]
    fn fired_entry_rearms_for_the_remainder() {
        let mut e = LazyEntry::new();
        e.step(Some(10), || 0);
        e.fired();
        assert_eq!(e.step(Some(10), no_clock), Step::Fire);
        assert_eq!(e.step(Some(9), no_clock), Step::Fire);
        assert_eq!(e.step(Some(25), || 11), Step::Arm(25));
        assert_eq!(e.state(), EntryState::Armed(25));
    }

    #[test]
    fn fired_then_later_but_already_due_fires() {
        let mut e = LazyEntry::new();
        e.step(Some(10), || 0);
        e.fired();
        assert_eq!(e.step(Some(12), || 12), Step::Fire);
    }

    #[test]
    fn nothing_to_wait_for() {
        let mut e: LazyEntry<u64> = LazyEntry::new();
        assert_eq!(e.step(None, no_clock), Step::Wait);
        assert!(!e.is_armed());
    }
}
