//! The deadline set's service: what runs, under the set's lock, when its runtime
//! entry fires or a filing beats it. Here rather than in the runtime layer so that
//! loom runs the very loop that ships, against a stand-in entry ([`SetEntry`]).
//!
//! A round polls the entry (tokio wakes the set's waker inside that call when the
//! entry fired meanwhile; the hand-off turns that into `again`, and the round
//! repeats), takes what has passed (the armed deadline when the entry fired, and
//! what is a whole tick behind the set's runtime clock when this thread runs in that
//! runtime), expires it, and re-arms the entry at the earliest deadline left.
//!
//! **Tick-mates.** tokio fires a deadline at the first millisecond tick at or after
//! it, so the deadlines that share the armed one's tick fire with it. The set learns
//! which of them tokio has passed by *probing*: it arms the entry at the latest
//! filed deadline that could share the tick (before the set's clock, or within a
//! tick of the fire) and polls it; if it fired at once, tokio's driver is past that
//! tick and everything up to it expires in this round. A burst of requests due in
//! one tick costs one service round and one or two re-arms of the entry, not one
//! per request.

use super::shared_set::{Locked, SharedSet};
use super::{MAX_ROUNDS, NEVER};
use std::task::Waker;

/// tokio's timer tick: its driver fires a deadline at the tick after it. What a
/// clock reading may declare passed is therefore only what is a whole tick behind
/// it; newer deadlines wait for the entry.
pub const TICK_NANOS: u64 = 1_000_000;

/// What the service needs of the runtime entry.
pub trait SetEntry {
    /// Polls the entry with the set's waker (outside the polling task's budget);
    /// `true` if it has fired. May wake the set's waker from inside.
    fn poll_fired(&mut self) -> bool;
    /// Re-arms the entry at `at`. May wake the set's waker from inside (tokio fires
    /// an entry whose tick has passed inside the reset).
    fn reset(&mut self, at: u64);
    /// The set's runtime clock, if this thread runs inside that runtime (whose
    /// clock then judges "passed"); `None` elsewhere.
    fn home_now(&mut self) -> Option<u64>;
    /// The end of the driver's tick that holds `at` (the tick boundary at or after
    /// it: everything up to it fires together), when the set knows its runtime's tick
    /// boundaries; `None` otherwise.
    fn tick_end(&self, at: u64) -> Option<u64> {
        let _ = at;
        None
    }
    /// Whether a reset keeps the waker the entry was last polled with (and wakes it
    /// from inside the reset when the new deadline has passed), so that a re-arm
    /// needs no poll. tokio's default driver does; its per-worker timer (unstable)
    /// makes a new entry on reset, which holds no waker until polled.
    fn keeps_waker_across_reset(&self) -> bool {
        false
    }
}

/// What a service leaves to do after the lock: the expired requests' wakers, and
/// whether to service again (the entry kept firing at once for `MAX_ROUNDS` rounds).
/// (The third: kept wakers the service let go of, to drop after the lock.)
pub type Serviced = (Vec<Waker>, bool, Vec<Waker>);

impl<X: SetEntry> SharedSet<X> {
    /// Under the lock: see the module docs. Every call into the entry goes through
    /// `in_call`, so a fire that lands meanwhile (here or on another thread) counts
    /// on this holder, and the round repeats.
    pub fn service(&self, locked: &mut Locked<X>) -> Serviced {
        let mut wake = wake_buffer();
        if self.is_closed() {
            // The runtime shut down: the close woke every request; nothing passes.
            return (wake, false, Vec::new());
        }
        // One probe per service: a probe that did not fire moved the entry away from
        // the earliest deadline, and the round after it puts it back.
        let mut probed = false;
        for _ in 0..MAX_ROUNDS {
            let mut signalled = false;
            let mut passed = 0;
            let mut fired_at = None;
            if locked.armed != NEVER {
                let (fired, again) = self.state().in_call(|| locked.extra.poll_fired());
                signalled |= again;
                if fired {
                    fired_at = Some(locked.armed);
                    passed = locked.armed;
                    locked.armed = NEVER;
                }
            }
            let home = locked.extra.home_now();
            if let Some(now) = home {
                // Only what is a whole tick behind the clock: a reply completing in
                // the same tick as its deadline must win, as with tokio's `timeout`.
                passed = passed.max(now.saturating_sub(TICK_NANOS));
            }
            // The latest point that may share a tick tokio has passed.
            let bound = match (home, fired_at) {
                (Some(now), _) => now,
                (None, Some(at)) => locked
                    .extra
                    .tick_end(at)
                    .unwrap_or(at.saturating_add(TICK_NANOS - 1)),
                (None, None) => 0,
            };
            let probe = (!probed)
                .then(|| locked.core.latest_at_or_before(bound))
                .flatten()
                .filter(|&probe| probe > passed);
            if let Some(probe) = probe {
                probed = true;
                let (fired, again) = self.reset_and_poll(locked, probe);
                signalled |= again;
                if fired {
                    passed = probe;
                    locked.armed = NEVER;
                } else {
                    locked.armed = probe; // registered there, and polled
                }
            }
            let next = self.expire(locked, passed, &mut wake);
            let armed = locked.armed;
            if next == NEVER || (armed != NEVER && armed <= next) {
                // Nothing left, or the entry already fires first (a cancelled
                // earliest request: the entry fires early once and re-arms then).
                // Done, unless a fire came while the entry was called.
                if !signalled {
                    return (wake, false, locked.core.take_let_go());
                }
                continue;
            }
            let ((), _) = self.state().in_call(|| locked.extra.reset(next));
            locked.armed = next;
            // The next round polls it (registering the set's waker, so that the
            // invariant on `armed` holds); if `next` has passed too, or tokio fired
            // it inside the reset, that poll reports the fire.
        }
        (wake, true, locked.core.take_let_go())
    }

    /// Under the lock, after a filing at `deadline`: whether the entry must move
    /// (the service's work, returned), or already fires in time. It must move for a
    /// deadline earlier than where it is armed, unless both fall in the same tick of
    /// the driver, which fires them together anyway (deadlines filed in decreasing
    /// order within a tick, as a runtime that defers yielded tasks wakes them last
    /// first, then cost no driver work each).
    pub fn rearm(&self, locked: &mut Locked<X>, deadline: u64) -> Option<Serviced> {
        let armed = locked.armed;
        if deadline >= armed {
            return None;
        }
        let extra = &locked.extra;
        let same_tick = armed != NEVER
            && extra
                .tick_end(deadline)
                .is_some_and(|end| extra.tick_end(armed) == Some(end));
        if same_tick {
            return None;
        }
        // Lean: move the entry there. Nothing else can be due (every other pending
        // deadline is at or after the old armed point, which has not fired: a fire
        // there signals a service). An armed entry holds the set's waker (see
        // `Locked::armed`), which tokio keeps across a reset and wakes from inside it
        // when the new deadline has passed already: that wake, or one from the
        // driver meanwhile, comes back as a signal, and a whole service runs. No
        // poll, so no waker clone. An entry not armed may never have been polled,
        // and a driver that drops the waker on reset needs the poll: moved and
        // polled.
        let (fired, signalled) = if armed == NEVER || !locked.extra.keeps_waker_across_reset() {
            self.reset_and_poll(locked, deadline)
        } else {
            let ((), signalled) = self.state().in_call(|| locked.extra.reset(deadline));
            (false, signalled)
        };
        locked.armed = deadline;
        (fired || signalled).then(|| self.service(locked))
    }

    /// Moves the entry to `at` and polls it (registering the set's waker) in one
    /// call into tokio, so one pair of hand-off fences covers both: whether it fired,
    /// and whether a fire was signalled meanwhile.
    fn reset_and_poll(&self, locked: &mut Locked<X>, at: u64) -> (bool, bool) {
        self.state().in_call(|| {
            locked.extra.reset(at);
            locked.extra.poll_fired()
        })
    }

    /// After the lock: wakes the expired requests' tasks, and services again while
    /// the last service asked for it (through the hand-off: the lock may be taken).
    pub fn after_service(&self, (wake, mut more, let_go): Serviced) {
        wake_all(wake);
        drop(let_go);
        while more {
            match self.state().signal(|locked| self.service(locked)) {
                Some((wake, again, let_go)) => {
                    wake_all(wake);
                    drop(let_go);
                    more = again;
                }
                None => more = false, // the holder services
            }
        }
    }

    /// The entry fired (or tokio asks for a re-poll): service the set now, or hand it
    /// to the holder inside its call into the entry.
    pub fn signal(&self) {
        if let Some(serviced) = self.state().signal(|locked| self.service(locked)) {
            self.after_service(serviced);
        }
    }
}

/// Wakes each waker (after the lock); the emptied buffer becomes the thread's spare
/// (see [`wake_buffer`]).
pub fn wake_all(mut wakers: Vec<Waker>) {
    for waker in wakers.drain(..) {
        waker.wake();
    }
    recycle(wakers);
}

/// How many wakers' room a thread's spare buffer may keep: a fire's one or two, a
/// small tick's few; a burst's larger buffer is freed, so that it keeps no memory.
const SPARE_CAPACITY: usize = 64;

#[cfg(not(lazy_deadline_loom))]
std::thread_local! {
    /// The thread's spare buffer for a service's wakers (empty, its room kept).
    static SPARE: std::cell::Cell<Vec<Waker>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An empty buffer for a service's wakers: the thread's spare, whose room the last
/// service on this thread left, so that a fire allocates nothing (a `Vec` of its
/// own per service cost an allocation, a grow and a free on every fire: about 145
/// instructions of a `sleep`'s fire through the sets). A thread whose locals are
/// gone (or a loom model) gets a new one.
#[inline]
fn wake_buffer() -> Vec<Waker> {
    #[cfg(not(lazy_deadline_loom))]
    {
        SPARE.try_with(std::cell::Cell::take).unwrap_or_default()
    }
    #[cfg(lazy_deadline_loom)]
    {
        Vec::new()
    }
}

/// Keeps an emptied buffer as the thread's spare (see [`wake_buffer`]), unless it is
/// larger than [`SPARE_CAPACITY`] or has no room at all.
#[inline]
fn recycle(wakers: Vec<Waker>) {
    debug_assert!(wakers.is_empty());
    if wakers.capacity() == 0 || wakers.capacity() > SPARE_CAPACITY {
        return;
    }
    #[cfg(not(lazy_deadline_loom))]
    {
        // A spare already there (a wake above serviced a set on this thread
        // meanwhile) is dropped: one is enough.
        let _ = SPARE.try_with(|spare| drop(spare.replace(wakers)));
    }
    #[cfg(lazy_deadline_loom)]
    drop(wakers);
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    /// Counts its wakes.
    #[derive(Default)]
    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            // Relaxed: read on this thread.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn wakers(n: usize) -> (Arc<Counted>, Vec<Waker>) {
        let counted = Arc::new(Counted::default());
        let mut buffer = wake_buffer();
        buffer.extend((0..n).map(|_| Waker::from(counted.clone())));
        (counted, buffer)
    }

    #[test]
    fn wake_all_wakes_each_waker_once_and_keeps_none() {
        for n in [1, 2, SPARE_CAPACITY, SPARE_CAPACITY + 1] {
            let (counted, buffer) = wakers(n);
            wake_all(buffer);
            assert_eq!(counted.0.load(Ordering::Relaxed), n);
            assert_eq!(Arc::strong_count(&counted), 1, "no waker kept by the spare");
        }
    }

    #[test]
    fn a_service_buffer_reuses_the_room_of_the_last_one_up_to_the_spare_capacity() {
        drop(wake_buffer()); // this thread's spare, if any, gone
        let (_, buffer) = wakers(2);
        let room = buffer.capacity();
        wake_all(buffer);
        let next = wake_buffer();
        assert!(next.is_empty());
        assert_eq!(next.capacity(), room, "the spare's room is reused");
        assert_eq!(wake_buffer().capacity(), 0, "one spare per thread, taken");
        drop(next);

        // Room for exactly the spare's capacity is kept; a burst's larger one is not:
        // the thread keeps no burst's memory.
        for (room, kept) in [(SPARE_CAPACITY, true), (SPARE_CAPACITY + 1, false)] {
            let counted = Arc::new(Counted::default());
            let mut buffer = Vec::with_capacity(room);
            buffer.extend((0..room).map(|_| Waker::from(counted.clone())));
            assert_eq!(buffer.capacity(), room);
            wake_all(buffer);
            let expected = if kept { room } else { 0 };
            assert_eq!(wake_buffer().capacity(), expected, "room for {room}");
        }
    }
}
