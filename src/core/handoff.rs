//! `HandOff<S>`: state behind a mutex, with a "service it" signal that may come from
//! any thread, including from inside the lock holder's own call.
//!
//! A deadline set owns one tokio `Sleep` and services its deadlines when that entry
//! fires, through the entry's waker, on whatever thread turns tokio's driver. The
//! same waker is also called synchronously *inside* `Sleep::reset` when the new
//! deadline has already passed, that is, while the set's own code holds the set's
//! lock. A waker that waited for the lock would deadlock there.
//!
//! So the holder marks the calls into tokio that may signal ([`in_call`]); nothing
//! else it does under the lock calls out. A signal that finds the lock held and the
//! holder inside such a call only raises `again`, and the holder, when the call
//! returns, sees it and services the state itself. A signal that finds the lock held
//! and the holder *not* inside such a call waits for the lock: that holder is on
//! another thread (this thread's own calls into tokio are all marked) and never
//! waits for anything while it holds the lock. So the per-request path, a plain
//! [`with`], is the lock and nothing more: no flag, no fence.
//!
//! Why no signal is lost (Dekker on `in_call` and `again`): the signaller stores
//! `again`, fences, then loads `in_call`; the holder clears `in_call`, fences, then
//! takes `again`. With a SeqCst fence on both sides, at least one sees the other's
//! write: either the holder sees `again` (and services), or the signaller sees the
//! call over (and waits for the lock, and services). `loom-tests/tests/handoff.rs`
//! checks it.
//!
//! [`in_call`]: HandOff::in_call
//! [`with`]: HandOff::with

use crate::sync::{fence, AtomicBool, Mutex, Ordering};

/// State `S` behind a mutex, serviced on demand from any thread.
#[derive(Debug)]
pub struct HandOff<S> {
    state: Mutex<S>,
    /// The holder is inside a call that may signal synchronously.
    in_call: AtomicBool,
    /// A signal came while the holder was inside such a call; it services again.
    again: AtomicBool,
}

impl<S> HandOff<S> {
    /// `state`, with nothing pending.
    pub fn new(state: S) -> Self {
        Self {
            state: Mutex::new(state),
            in_call: AtomicBool::new(false),
            again: AtomicBool::new(false),
        }
    }

    /// Runs `f` on the state under the lock. `f` must not call out to code that may
    /// signal this hand-off except through [`in_call`](Self::in_call).
    pub fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.lock())
    }

    /// For the lock holder: runs `call` (which may signal this hand-off, on this
    /// thread or from another), and returns its result and whether a signal came
    /// meanwhile that counts on the holder: if so, the holder services the state
    /// before it unlocks.
    pub fn in_call<R>(&self, call: impl FnOnce() -> R) -> (R, bool) {
        // Relaxed: a signaller that misses this store waits for the lock, which is
        // correct too. Plain stores: only the holder writes `in_call`.
        self.in_call.store(true, Ordering::Relaxed);
        let result = call();
        // Relaxed, then a SeqCst fence before loading `again`: the holder's half of
        // the Dekker pair of the module docs (the fences order it, one barrier).
        self.in_call.store(false, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // Relaxed: after the fence, as above. Loaded first: the common case finds it
        // down and skips the RMW; the holder takes it (an RMW, so a signal raised
        // meanwhile is not overwritten), and a later signal raises it anew.
        let again = self.again.load(Ordering::Relaxed) && self.again.swap(false, Ordering::Relaxed);
        (result, again)
    }

    /// Asks for `service` to run on the state: now (waiting for the lock if another
    /// thread holds it outside a call), or, when the holder is inside an
    /// [`in_call`](Self::in_call), by the holder. `Some` with the service's result
    /// when it ran here (act on it after the lock, which is released by then).
    pub fn signal<D>(&self, service: impl FnOnce(&mut S) -> D) -> Option<D> {
        if let Some(mut state) = self.try_lock() {
            return Some(service(&mut state));
        }
        // SeqCst, then a SeqCst fence before loading `in_call`: the signaller's half
        // of the Dekker pair of the module docs. A swap: see `in_call`.
        self.again.swap(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // SeqCst: as above.
        if self.in_call.load(Ordering::SeqCst) {
            return None; // the holder sees `again` when its call returns
        }
        // The holder is another thread outside a call: it unlocks soon, never
        // waiting on us.
        Some(service(&mut self.lock()))
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
    fn a_signal_from_inside_the_holders_call_is_handed_to_the_holder() {
        let handoff = HandOff::new(0u32);
        let serviced = handoff.with(|count| {
            let (ran, again) = handoff.in_call(|| handoff.signal(|count: &mut u32| *count += 1));
            assert!(ran.is_none(), "not serviced under the holder's lock");
            assert!(again, "the holder is told to service");
            *count
        });
        assert_eq!(serviced, 0);
        let (_, again) = handoff.with(|_| handoff.in_call(|| ()));
        assert!(!again, "the flag was taken");
    }

    #[test]
    fn a_signal_with_the_lock_free_is_serviced_at_once() {
        let handoff = HandOff::new(Vec::<u32>::new());
        let len = handoff.signal(|v: &mut Vec<u32>| {
            v.push(1);
            v.len()
        });
        assert_eq!(len, Some(1));
        // Released by then: taking it again does not deadlock.
        assert_eq!(handoff.with(|v| v.len()), 1);
    }

    #[test]
    fn a_signal_from_another_thread_waits_for_a_holder_outside_a_call() {
        let handoff = std::sync::Arc::new(HandOff::new(0u32));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let other = handoff.clone();
        let waiting = handoff.with(|count| {
            let thread = std::thread::spawn(move || {
                started_tx.send(()).unwrap();
                other.signal(|count: &mut u32| {
                    *count += 1;
                    *count
                })
            });
            started_rx.recv().unwrap();
            *count += 10; // still held: the signal waits for it
            thread
        });
        assert_eq!(
            waiting.join().unwrap(),
            Some(11),
            "serviced after the holder"
        );
    }
}
