//! What a deadline set's owner thread writes without the set's lock: the *state
//! words* of its slots (pending, fired, cancelled, free, with the filing's ticket),
//! and its [`OwnerView`], through which it answers (cancels) its requests with a load
//! and a store and gives their slots back at its next lock.
//!
//! The protocol, and why it needs no read-modify-write on the owner's side: a slot is
//! the owner's from its filing until the owner gives it back under the lock, so no
//! other request can be in it when the owner's store lands. The only other writer is
//! the fire, under the lock, with a compare-exchange from pending to fired: it either
//! sees the owner's "cancelled" (and skips the request) or claims the slot first and
//! wakes the task once more, which is tokio's own outcome when a timer is dropped as
//! its driver fires it (the driver takes the waker under its lock and wakes it after).
//! `loom-tests/tests/deadline_set.rs` checks it.

use crate::sync::{Arc, AtomicU32, AtomicU64, Ordering};

/// `Filed::index` bit of a remote slot.
pub(crate) const REMOTE: u32 = 1 << 31;

/// The state word's tag (low two bits; the ticket is above them).
pub(crate) const TAG_FREE: u64 = 0;
pub(crate) const TAG_PENDING: u64 = 1;
pub(crate) const TAG_FIRED: u64 = 2;
pub(crate) const TAG_CANCELLED: u64 = 3;

/// The state word of ticket `ticket` with `tag`.
#[inline]
pub(crate) const fn word(ticket: u64, tag: u64) -> u64 {
    (ticket << 2) | tag
}

/// Answered requests an owner holds before it takes the lock to give their slots
/// back, when no filing of its own takes the lock first.
pub const RECLAIM_BATCH: usize = 64;

/// Where a request's deadline is filed: its slot, and the ticket it was filed under
/// (unique for the life of the set, so a stale `Filed` never reaches a later request
/// in the same slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filed {
    pub(crate) index: u32,
    pub(crate) ticket: u64,
}

impl Filed {
    /// Whether it sits in a remote slot (filed from a thread other than the set's
    /// owner): everything about it goes through the lock.
    #[inline]
    pub fn is_remote(self) -> bool {
        self.index & REMOTE != 0
    }

    /// Its slot's position among the slots of its kind.
    #[inline]
    pub(crate) fn slot(self) -> usize {
        (self.index & !REMOTE) as usize
    }
}

/// The owner's slots' state words, shared with the lock holder. Replaced (grown,
/// never shrunk) only by the owner thread, under the lock.
#[derive(Debug)]
pub struct StateWords {
    words: Box<[AtomicU64]>,
    /// Requests in the owner's slots answered under the lock from other threads
    /// since the owner last looked (it takes them off its `OwnerView::live`).
    remote_answers: AtomicU32,
}

impl StateWords {
    /// `len` words, the first ones copied from `copy_from`.
    pub(crate) fn with_len(len: usize, copy_from: Option<&StateWords>) -> Self {
        let words = (0..len)
            .map(|i| {
                // Relaxed: copied under the lock, by the owner (the only thread that
                // writes these without it), so nothing races the copy.
                let value = copy_from
                    .and_then(|old| old.words.get(i))
                    .map_or(TAG_FREE, |w| w.load(Ordering::Relaxed));
                AtomicU64::new(value)
            })
            .collect();
        // Relaxed: under the lock, and the owner reads it with a swap.
        let remote_answers =
            AtomicU32::new(copy_from.map_or(0, |old| old.remote_answers.load(Ordering::Relaxed)));
        Self {
            words,
            remote_answers,
        }
    }

    /// An owner slot's request was answered under the lock (see `remote_answers`).
    pub(crate) fn answered_remotely(&self) {
        // Relaxed: a count the owner only uses as a hint of when to take the lock.
        self.remote_answers.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    #[inline]
    pub(crate) fn get(&self, index: usize) -> &AtomicU64 {
        &self.words[index]
    }
}

/// What the owner thread keeps of its set outside the lock: its handle on the state
/// words (the same array as the set's, replaced together under the lock) and the
/// requests it answered since its last lock, whose slots it gives back then.
#[derive(Debug)]
pub struct OwnerView {
    pub(crate) states: Arc<StateWords>,
    pub(crate) to_reclaim: Vec<Filed>,
    /// Requests filed in the owner's slots through this view and not answered yet
    /// (a hint: a filing moved or cancelled under the lock is not taken off). When
    /// it comes to zero, the owner takes the lock to give its answered slots back
    /// and, if the set has nothing filed any more, to let go of the wakers they kept
    /// (a kept waker keeps its finished task's memory).
    pub(crate) live: u32,
}

impl OwnerView {
    /// A view on `states`, nothing answered yet.
    pub(crate) fn new(states: Arc<StateWords>) -> Self {
        Self {
            states,
            to_reclaim: Vec::new(),
            live: 0,
        }
    }

    /// The owner answers a request filed in one of its slots: marks it cancelled
    /// unless it already fired, and gives its slot back at the next lock. Returns
    /// whether that should be now (see [`RECLAIM_BATCH`], and `live`).
    /// A load and a store, no lock and no read-modify-write (see the module docs).
    #[inline]
    pub fn cancel(&mut self, filed: Filed) -> bool {
        debug_assert!(!filed.is_remote());
        let state = self.states.get(filed.slot());
        // Relaxed: the word is only compared and replaced; the fire re-reads it under
        // the lock with a compare-exchange, and the reclaim reads it under the lock
        // after the owner's own release of that lock.
        if state.load(Ordering::Relaxed) == word(filed.ticket, TAG_PENDING) {
            state.store(word(filed.ticket, TAG_CANCELLED), Ordering::Relaxed);
        }
        self.to_reclaim.push(filed);
        // Relaxed: a hint (see `live`); a plain load unless another thread answered
        // one of the owner's requests since.
        if self.states.remote_answers.load(Ordering::Relaxed) != 0 {
            let remote = self.states.remote_answers.swap(0, Ordering::Relaxed);
            self.live = self.live.saturating_sub(remote);
        }
        self.live = self.live.saturating_sub(1);
        self.to_reclaim.len() >= RECLAIM_BATCH || self.live == 0
    }

    /// Whether this view's state words are `states`.
    pub(crate) fn is_on(&self, states: &Arc<StateWords>) -> bool {
        Arc::ptr_eq(&self.states, states)
    }
}
