//! A `Sleep`'s own runtime entry: where a `Sleep` goes from the deadline set at its
//! first reset that the set would pay its lock for (earlier across ticks, or after
//! it completed), and what carries it on once its runtime shut down.
//!
//! The lazy rule on one `tokio::time::Sleep`: the entry is armed at `armed`, the
//! deadline may be later (`target`). A later reset is a store (the entry fires at
//! `armed`, and the poll that sees it re-arms at the target); any other one is
//! tokio's own reset (which, within the armed driver tick, is tokio's own in-place
//! extension). A reset of a completed `Sleep` is tokio's reset, so that the entry
//! wakes the waker of the last poll at the new deadline, as tokio's does. Everything
//! is judged on `Instant`s: nothing here converts to the time base.
//!
//! tokio's entry is polled with the waker of an [`EntrySignal`] (as the crate's
//! other timers poll theirs: `crate::entry`), whose slot holds the task's waker: the
//! entry's fire raises the signal's flag and wakes the task. So the entry keeps the
//! same waker across polls and resets (tokio's default driver keeps it across a
//! reset), and a pending poll by the same task is the signal's memo compare and a
//! read of its flag, with no call into tokio, also right after a reset: a fire just
//! before a reset (which took the signal's waker out of the entry) has raised the
//! flag, and the next poll registers again. On tokio's per-worker timer a reset makes
//! a new entry, with no waker: the poll after a reset registers there.

use super::Counts;
use crate::core::signal::EntrySignal;
use crate::core::MAX_ROUNDS;
use crate::sync::{entry_waker, Arc, WakerMemo};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use tokio::time::Instant;

pin_project! {
    /// See the module docs.
    pub(super) struct OwnEntry {
        #[pin]
        sleep: tokio::time::Sleep,
        // The `Sleep`'s deadline (at or after `armed`).
        target: Instant,
        // Where the entry is armed.
        armed: Instant,
        // What the entry wakes (see the module docs), its waker, and which task
        // waker its slot holds.
        signal: Arc<EntrySignal>,
        signal_waker: Waker,
        memo: WakerMemo,
        // The entry holds the signal's waker (polled since it was made, and no reset
        // since made a new one); a fire since is the signal's flag.
        registered: bool,
        // Whether tokio's reset keeps the entry's waker (its default driver).
        keeps_waker: bool,
        // The entry of a `Sleep` whose runtime shut down: a plain `tokio::time::Sleep`
        // from then on (every reset and poll is tokio's own).
        fallback: bool,
    }
}

impl OwnEntry {
    /// An entry armed at `deadline` in tokio's driver, made in the current runtime
    /// (the `Sleep`'s: the caller checked), registered with `waker` if there is one
    /// (as tokio's reset keeps the entry's waker, so the task is woken at the new
    /// deadline without polling again; at once if it has passed). `keeps_waker`: see
    /// the field.
    pub fn armed(deadline: Instant, waker: Option<Waker>, keeps_waker: bool) -> Pin<Box<Self>> {
        let mut entry = Self::new(deadline, keeps_waker, false);
        let me = entry.as_mut().project();
        match waker {
            Some(waker) => {
                me.signal.register(&waker, me.memo);
                if poll_entry(me.signal, me.signal_waker, me.sleep) {
                    waker.wake(); // passed already: tokio wakes inside the reset
                }
                *me.registered = true;
            }
            // No waker (the filing's was spent on its fire): registered in the
            // driver all the same, as tokio's reset of a registered entry is, so that
            // `is_elapsed` reads as tokio's right after a reset into the past (a
            // tokio `Sleep` that was never polled nor reset is not in the driver).
            None => me.sleep.reset(deadline),
        }
        entry
    }

    /// An entry at `deadline` that enters tokio's driver at its first poll, as
    /// tokio's `reset_without_timer` leaves tokio's own (made in the current runtime,
    /// the `Sleep`'s: the caller checked). `keeps_waker`: see the field.
    pub fn unregistered(deadline: Instant, keeps_waker: bool) -> Pin<Box<Self>> {
        Self::new(deadline, keeps_waker, false)
    }

    /// The entry of a `Sleep` whose runtime shut down, polled from inside that
    /// runtime (see `Sleep`'s `# Shutdown`).
    pub fn fallback(deadline: Instant) -> Pin<Box<Self>> {
        Self::new(deadline, false, true)
    }

    fn new(deadline: Instant, keeps_waker: bool, fallback: bool) -> Pin<Box<Self>> {
        let signal = Arc::new(EntrySignal::new());
        Box::pin(Self {
            sleep: tokio::time::sleep_until(deadline),
            target: deadline,
            armed: deadline,
            signal_waker: entry_waker(&signal),
            signal,
            memo: WakerMemo::default(),
            registered: false,
            keeps_waker,
            fallback,
        })
    }

    /// Whether the deadline has passed: as far as the entry has seen where it is
    /// armed at the deadline; where the entry fired before a deadline that moved
    /// later since (nothing re-arms it until a poll), by the clock, as the re-armed
    /// entry would once that passed.
    pub fn is_elapsed(&self) -> bool {
        self.sleep.is_elapsed() && (self.target <= self.armed || self.target <= Instant::now())
    }

    /// Whether the deadline has passed (the entry fired at or after it): re-arms at
    /// the target when the entry fired before it (the deadline moved later). Bounded:
    /// after `MAX_ROUNDS` fires in one poll, it yields (waking itself).
    #[inline]
    pub fn poll_fired(self: Pin<&mut Self>, counts: &mut Counts, cx: &mut Context<'_>) -> bool {
        let mut me = self.project();
        if *me.fallback {
            // Outside the task's budget: the caller spends it on `Ready`.
            let entry = std::pin::pin!(tokio::task::unconstrained(me.sleep));
            return entry.poll(cx).is_ready();
        }
        // The task's waker into the signal's slot first (a lock only when it
        // changed), then the flag: a fire after this wakes that waker.
        me.signal.register(cx.waker(), me.memo);
        if *me.registered && !me.signal.entry_has_fired() && !me.sleep.is_elapsed() {
            // The entry holds the signal's waker and has not fired (neither by the
            // flag nor by tokio's state, which also covers a fire this poll did not
            // see through the flag: one an earlier poll reported): its fire raises
            // the flag and wakes the task.
            return false;
        }
        if *me.target > *me.armed && me.sleep.is_elapsed() {
            // The entry fired at `armed` (an earlier poll saw it: a ticker's previous
            // tick) and the deadline has moved on since: re-arm it there without
            // polling the spent entry again.
            me.sleep.as_mut().reset(*me.target);
            *me.armed = *me.target;
            counts.registered();
        }
        for _ in 0..MAX_ROUNDS {
            let fired = poll_entry(me.signal, me.signal_waker, me.sleep.as_mut());
            *me.registered = true;
            if !fired {
                return false;
            }
            counts.fired();
            if *me.target <= *me.armed {
                return true;
            }
            // The deadline moved later since the entry was armed: re-arm there.
            me.sleep.as_mut().reset(*me.target);
            *me.armed = *me.target;
            counts.registered();
        }
        cx.waker().wake_by_ref();
        false
    }

    /// A `Sleep` that completed is polled again: as tokio's `Ready` poll, the entry
    /// wakes this task at a reset's new deadline (the signal's slot holds its waker).
    pub fn keep_waker(self: Pin<&mut Self>, cx: &mut Context<'_>) {
        let me = self.project();
        if *me.fallback {
            let entry = std::pin::pin!(tokio::task::unconstrained(me.sleep));
            let _ = entry.poll(cx);
            return;
        }
        me.signal.register(cx.waker(), me.memo);
    }

    /// The deadline moves to `deadline` with nothing registered (see
    /// `Sleep::reset_unregistered`): the poll that finds the entry fired before it
    /// re-arms there. (A fallback entry has no such move: tokio's reset.)
    pub fn retarget(self: Pin<&mut Self>, deadline: Instant) {
        let me = self.project();
        if *me.fallback {
            me.sleep.reset(deadline);
            return;
        }
        *me.target = deadline;
    }

    /// The `Sleep` was reset to `deadline`; `completed`: it had completed; `away`:
    /// it is used outside its runtime (later resets take effect at once there, as the
    /// set's do).
    #[inline]
    pub fn reset(
        self: Pin<&mut Self>,
        deadline: Instant,
        completed: bool,
        away: impl FnOnce() -> bool,
        counts: &mut Counts,
    ) {
        let me = self.project();
        if *me.fallback {
            me.sleep.reset(deadline);
            return;
        }
        *me.target = deadline;
        if !completed && deadline >= *me.armed && (deadline == *me.armed || !away()) {
            return; // the entry fires at `armed`, and its poll re-arms at the target
        }
        me.sleep.reset(deadline);
        *me.armed = deadline;
        counts.registered();
        // tokio's default driver keeps the signal's waker across the reset (see the
        // module docs); its per-worker timer made a new entry, with none.
        *me.registered &= *me.keeps_waker;
    }
}

/// Polls tokio's entry `sleep` with the signal's waker (outside the task's budget:
/// the caller spends it on `Ready`), the signal's flag lowered first (a fire after
/// this raises it again). Whether it fired.
fn poll_entry(
    signal: &EntrySignal,
    signal_waker: &Waker,
    sleep: Pin<&mut tokio::time::Sleep>,
) -> bool {
    signal.clear_entry_fired();
    let entry = std::pin::pin!(tokio::task::unconstrained(sleep));
    // tokio registers the waker first, whatever the poll reports; it is the same
    // waker every time, so tokio clones nothing.
    entry
        .poll(&mut Context::from_waker(signal_waker))
        .is_ready()
}
