//! `HandOff<S>`: state behind a mutex, with a "service it" signal that may come from
//! any thread, including from inside the lock holder's own call.
//!
//! A deadline set owns one tokio `Sleep` and services its deadlines when that entry
//! fires, through the entry's waker, on whatever thread turns tokio's driver. The
//! same waker is also called synchronously *inside* `Sleep::reset` when the new
//! deadline has already passed, that is, while the set's own code holds the set's
//! lock. A waker that took the lock would deadlock there. So the signal never
//! waits: it raises `pending` and tries the lock; if the lock is held, whoever holds
//! it services the state right after it unlocks (every unlock goes through
//! [`drain`](HandOff::drain)).
//!
//! Why no signal is lost (Dekker on `pending` and the lock word): the signaller
//! stores `pending`, fences, then tries the lock; the holder unlocks, fences, then
//! loads `pending`. With a SeqCst fence on both sides, at least one of them sees the
//! other's write: either the signaller takes the lock (and services), or the holder
//! sees `pending` (and services). `loom-tests/tests/handoff.rs` checks it.

use crate::sync::{fence, AtomicBool, Mutex, Ordering};

/// State `S` behind a mutex, serviced on demand from any thread.
#[derive(Debug)]
pub struct HandOff<S> {
    state: Mutex<S>,
    /// A service was asked for and has not run since.
    pending: AtomicBool,
}

impl<S> HandOff<S> {
    /// `state`, with nothing pending.
    pub fn new(state: S) -> Self {
        Self {
            state: Mutex::new(state),
            pending: AtomicBool::new(false),
        }
    }

    /// Runs `f` on the state under the lock, then any service signalled meanwhile
    /// (see [`drain`](Self::drain)).
    pub fn with<R, D>(
        &self,
        f: impl FnOnce(&mut S) -> R,
        service: impl FnMut(&mut S) -> D,
        after: impl FnMut(D),
    ) -> R {
        let result = {
            let mut state = self.lock();
            f(&mut state)
        };
        self.drain(service, after);
        result
    }

    /// Asks for `service` to run on the state: now if the lock is free, else by
    /// whoever holds it, right after it unlocks. Never blocks.
    pub fn signal<D>(&self, service: impl FnMut(&mut S) -> D, after: impl FnMut(D)) {
        // SeqCst: the store half of the Dekker pair (module docs); the fence in
        // `drain` orders it before the try-lock. A swap, not a store: another
        // thread's swap may be clearing the flag at the same time, and loom orders
        // two RMWs correctly where it may misplace a plain store (loom-tests/README).
        self.pending.swap(true, Ordering::SeqCst);
        self.drain(service, after);
    }

    /// While a service is pending, takes the lock if it is free and runs `service`
    /// (then `after` on its result, outside the lock). Returns as soon as the lock
    /// is held by someone else: that holder drains after it unlocks.
    pub fn drain<D>(&self, mut service: impl FnMut(&mut S) -> D, mut after: impl FnMut(D)) {
        loop {
            // SeqCst fence: the unlock (or the signal's store) before it and the
            // load of `pending` after it form the Dekker pair of the module docs.
            fence(Ordering::SeqCst);
            if !self.pending.load(Ordering::SeqCst) {
                return;
            }
            let Some(mut state) = self.try_lock() else {
                return; // the holder sees `pending` after it unlocks
            };
            // SeqCst: whoever clears it services; a signal after this swap raises it
            // again and is drained by the next turn of this loop.
            if !self.pending.swap(false, Ordering::SeqCst) {
                // Another thread serviced it between our load and our lock. A signal
                // that failed its try-lock while we held the lock counts on us to
                // look again after unlocking: loop, do not return.
                drop(state);
                continue;
            }
            let done = service(&mut state);
            drop(state);
            after(done);
        }
    }

    fn lock(&self) -> impl std::ops::DerefMut<Target = S> + '_ {
        #[cfg(not(lazy_deadline_loom))]
        let guard = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        #[cfg(lazy_deadline_loom)]
        let guard = self.state.lock().unwrap();
        guard
    }

    fn try_lock(&self) -> Option<impl std::ops::DerefMut<Target = S> + '_> {
        #[cfg(not(lazy_deadline_loom))]
        let guard = match self.state.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poison)) => Some(poison.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        #[cfg(lazy_deadline_loom)]
        let guard = self.state.try_lock().ok();
        guard
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_signal_while_the_lock_is_held_is_serviced_when_it_is_released() {
        let handoff = HandOff::new(0u32);
        let serviced = handoff.with(
            |count| {
                // Inside the holder's call: the signal cannot take the lock.
                handoff.signal(|count: &mut u32| *count += 1, |()| {});
                *count
            },
            |count| *count += 1,
            |()| {},
        );
        assert_eq!(serviced, 0, "not serviced under the holder's lock");
        assert_eq!(*handoff.lock(), 1, "serviced right after the unlock, once");
    }

    #[test]
    fn a_signal_with_the_lock_free_is_serviced_at_once_and_after_runs_unlocked() {
        let handoff = HandOff::new(Vec::<u32>::new());
        let mut seen = Vec::new();
        handoff.signal(
            |v: &mut Vec<u32>| {
                v.push(1);
                v.len()
            },
            |len| {
                // Outside the lock: taking it again must not deadlock.
                seen.push((len, handoff.lock().len()));
            },
        );
        assert_eq!(seen, [(1, 1)]);
    }
}
