//! Touching one `IdleQueue` key from other tasks and threads (`KeyHandle`).
//!
//! A key that has handles owns a [`RemoteActivity`]: one `AtomicU64` holding the
//! latest activity recorded through its handles, or [`LEFT`] once the entry has left
//! the queue. Keys without handles hold `None` in its place (one word), and the
//! owner's own touch path never looks at it.
//!
//! # Protocol
//!
//! Every access is a read-modify-write on that one word (or a load the following RMW
//! re-checks), so all of them sit in its single modification order, and `Relaxed`
//! suffices: the word publishes nothing but itself.
//!
//! - **Handle touch**: `fetch_max(at)`. The previous value says whether the entry was
//!   still there: [`LEFT`] (the maximum) absorbs every touch and reads back as "gone".
//! - **Owner, when the key's check time comes up** ([`confirm_expiry`]): load the
//!   handles' activity; if it moves the deadline past the check, fold it into the
//!   owner's own `last_activity` and re-file (not expired). Otherwise claim the
//!   expiry with a CAS from exactly the value it judged by to [`LEFT`]. A touch that
//!   lands before the CAS makes it fail: the owner folds the new value in and judges
//!   again (at most a bounded number of times, then it re-files, which is never
//!   early). A touch after the CAS reads [`LEFT`] and returns `false`. So a touch
//!   either keeps the key alive or comes after its `Expired`: never both, never lost.
//! - **Owner removes or clears**: `swap(LEFT)`; later touches return `false`.
//!
//! A touch older than the last activity changes nothing and still returns `true` for
//! a live entry, like the owner's `touch_at`.

use super::keyed::{Idle, Timing};
use super::SATURATED;
use crate::sync::{Arc, AtomicU64, Ordering::Relaxed};

/// What the word holds once the entry has left the queue.
pub const LEFT: u64 = u64::MAX;

/// How many times the owner re-judges a key whose handles keep touching during its
/// expiry claim before it re-files it instead (bounded work per record).
const CLAIM_ROUNDS: usize = 4;

/// The handles' side of one key: their latest activity, or [`LEFT`].
#[derive(Debug)]
pub struct RemoteActivity {
    activity: AtomicU64,
}

impl RemoteActivity {
    /// No activity through handles yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            activity: AtomicU64::new(0),
        })
    }

    /// A handle's touch at `at`: one RMW. `false` if the entry has left.
    #[inline]
    pub fn touch_at(&self, at: u64) -> bool {
        // Clamped below LEFT so that no instant, however far, reads as "gone".
        // Relaxed: a single-word protocol (module docs).
        self.activity.fetch_max(at.min(SATURATED), Relaxed) != LEFT
    }

    /// The latest activity recorded through handles (0: none), [`LEFT`] if gone.
    #[inline]
    pub fn load(&self) -> u64 {
        // Relaxed: a snapshot; decisions are taken by the CAS in `confirm_expiry`.
        self.activity.load(Relaxed)
    }

    /// The entry left the queue (removed, cleared, or expired by the owner's
    /// claim): later touches return `false`.
    pub fn leave(&self) {
        // Relaxed: see the module docs.
        self.activity.swap(LEFT, Relaxed);
    }
}

/// The owner's decision for a key whose record came up with its deadline witnessed
/// (`timing.deadline() <= check`): `true` if it expires (and its handles now see it
/// gone), `false` if its handles moved it later (folded into `timing`, which the
/// caller then re-files at the new deadline).
pub fn confirm_expiry(remote: Option<&RemoteActivity>, timing: &mut Idle, check: u64) -> bool {
    let Some(remote) = remote else {
        return true;
    };
    let mut seen = remote.load();
    for _ in 0..CLAIM_ROUNDS {
        if seen == LEFT {
            // Only the owner leaves, and it does not judge a key it removed.
            return true;
        }
        if seen > timing.last_activity {
            timing.last_activity = seen;
        }
        if timing.deadline() > check {
            return false;
        }
        // Relaxed: the CAS is ordered with every touch by the word's modification
        // order; it fails if any touch landed since `seen` (module docs).
        match remote
            .activity
            .compare_exchange(seen, LEFT, Relaxed, Relaxed)
        {
            Ok(_) => return true,
            Err(current) => seen = current,
        }
    }
    // Handles keep touching while the owner judges: take the latest value and
    // re-file (never early); the record comes up again within the caller's work
    // bound, or at the next poll.
    if seen != LEFT && seen > timing.last_activity {
        timing.last_activity = seen;
    }
    false
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    fn idle(last_activity: u64) -> Idle {
        Idle {
            last_activity,
            timeout: 100,
        }
    }

    #[test]
    fn without_handles_the_owner_decides_alone() {
        let mut timing = idle(0);
        assert!(confirm_expiry(None, &mut timing, 100));
    }

    #[test]
    fn a_handle_touch_keeps_the_key_and_is_folded_in() {
        let remote = RemoteActivity::new();
        assert!(remote.touch_at(50));
        let mut timing = idle(0);
        assert!(!confirm_expiry(Some(&remote), &mut timing, 100));
        assert_eq!(timing.last_activity, 50);
        assert!(confirm_expiry(Some(&remote), &mut timing, 150));
        assert!(!remote.touch_at(200), "expired: the handle sees it gone");
    }

    #[test]
    fn older_touches_change_nothing_and_far_ones_never_read_as_gone() {
        let remote = RemoteActivity::new();
        assert!(remote.touch_at(u64::MAX));
        assert_eq!(remote.load(), SATURATED);
        assert!(remote.touch_at(3));
        remote.leave();
        assert!(!remote.touch_at(5));
        assert_eq!(remote.load(), LEFT);
    }
}
