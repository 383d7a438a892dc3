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
//!
//! That hop (the signal's flag and slot between tokio's fire and the task) pays only
//! where pending polls outnumber fires (a `select!` loop that polls the `Sleep` at
//! every turn). A ticker's or a rate limiter's `Sleep` is polled about once per fire:
//! there the entry is polled *directly*, with the task's own waker and inside the
//! task's budget, as tokio's own `Sleep` is, so the fire wakes the task itself. The
//! mode is chosen at each fire, by the pending polls since the last one (at most one:
//! direct).

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
    #[project = OwnEntryProj]
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
        // Polled directly with the task's waker, no signal (see the module docs).
        direct: bool,
        // Pending polls since the entry last fired (counted up to 2), which choose
        // `direct` at the next fire.
        pending_polls: u8,
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
            direct: false,
            pending_polls: 0,
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
    pub fn poll_fired(self: Pin<&mut Self>, counts: &mut Counts, cx: &mut Context<'_>) -> Fired {
        let mut me = self.project();
        if *me.fallback {
            // Outside the task's budget: the caller spends it on `Ready`.
            let entry = std::pin::pin!(tokio::task::unconstrained(me.sleep));
            return Fired::from(entry.poll(cx).is_ready());
        }
        if *me.direct {
            return poll_direct(me, counts, cx);
        }
        // The task's waker into the signal's slot first (a lock only when it
        // changed), then the flag: a fire after this wakes that waker.
        me.signal.register(cx.waker(), me.memo);
        if *me.registered && !me.signal.entry_has_fired() && !me.sleep.is_elapsed() {
            // The entry holds the signal's waker and has not fired (neither by the
            // flag nor by tokio's state, which also covers a fire this poll did not
            // see through the flag: one an earlier poll reported): its fire raises
            // the flag and wakes the task.
            note_pending(me.pending_polls);
            return Fired::No;
        }
        if *me.target > *me.armed && me.sleep.is_elapsed() {
            // The entry fired at `armed` (an earlier poll saw it: a ticker's previous
            // tick) and the deadline has moved on since: re-arm it there without
            // polling the spent entry again.
            rearm_at_target(me.sleep.as_mut(), *me.target, me.armed, counts);
        }
        for _ in 0..MAX_ROUNDS {
            let fired = poll_entry(me.signal, me.signal_waker, me.sleep.as_mut());
            *me.registered = true;
            if !fired {
                note_pending(me.pending_polls);
                return Fired::No;
            }
            counts.fired();
            if *me.target <= *me.armed {
                choose_mode(me.direct, me.pending_polls, me.registered);
                return Fired::Yes;
            }
            // The deadline moved later since the entry was armed: re-arm there.
            rearm_at_target(me.sleep.as_mut(), *me.target, me.armed, counts);
        }
        cx.waker().wake_by_ref();
        Fired::No
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
        if *me.direct {
            // The entry keeps this waker, as tokio's does at a `Ready` poll (outside
            // the budget: the caller spends it).
            let entry = std::pin::pin!(tokio::task::unconstrained(me.sleep));
            let _ = entry.poll(cx);
            return;
        }
        me.signal.register(cx.waker(), me.memo);
        if !*me.registered {
            // tokio's entry holds another waker (the task's, polled directly before
            // the entry left direct mode): the signal's into it, so that a reset's
            // fire wakes this task.
            let _ = poll_entry(me.signal, me.signal_waker, me.sleep);
            *me.registered = true;
        }
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

/// What a poll of the entry found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fired {
    /// Not yet: the fire wakes the task.
    No,
    /// The deadline has passed; the caller spends a unit of the task's budget.
    Yes,
    /// The deadline has passed, and tokio's own poll spent the task's budget unit.
    YesBudgetSpent,
}

impl From<bool> for Fired {
    fn from(fired: bool) -> Self {
        if fired {
            Fired::Yes
        } else {
            Fired::No
        }
    }
}

/// A pending poll, counted up to 2 (all that `choose_mode` asks).
#[inline(always)]
fn note_pending(pending_polls: &mut u8) {
    if *pending_polls < 2 {
        *pending_polls += 1;
    }
}

/// At a fire: poll the entry directly from now on if the task polled it pending at
/// most once since the last fire (a ticker's, a limiter's), else through the signal
/// (whose memo spares tokio's poll at each pending poll). Leaving direct mode, the
/// entry holds the task's waker, not the signal's: `registered` goes, so that the
/// next poll registers the signal.
#[inline]
fn choose_mode(direct: &mut bool, pending_polls: &mut u8, registered: &mut bool) {
    *direct = *pending_polls <= 1;
    *pending_polls = 0;
    if *direct {
        *registered = false;
    }
}

/// [`OwnEntry::poll_fired`] in direct mode: tokio's own poll with the task's waker,
/// inside the task's budget (as tokio's `Sleep` polls), after re-arming an entry that
/// fired before the deadline.
#[inline]
fn poll_direct(me: OwnEntryProj<'_>, counts: &mut Counts, cx: &mut Context<'_>) -> Fired {
    let mut sleep = me.sleep;
    if *me.target > *me.armed && sleep.is_elapsed() {
        rearm_at_target(sleep.as_mut(), *me.target, me.armed, counts);
    }
    if sleep.as_mut().poll(cx).is_pending() {
        // Pending, or the budget is spent (tokio then woke the task to yield).
        note_pending(me.pending_polls);
        return Fired::No;
    }
    counts.fired();
    if *me.target <= *me.armed {
        choose_mode(me.direct, me.pending_polls, me.registered);
        return Fired::YesBudgetSpent;
    }
    // It fired at `armed` between the check above and the poll (its driver runs on
    // another thread), before the deadline, which moved later: re-arm there and poll
    // again, outside the budget (its unit went on that fire), which registers this
    // waker there or finds it passed (a re-armed entry fires at the deadline: no
    // further round).
    rearm_at_target(sleep.as_mut(), *me.target, me.armed, counts);
    let entry = std::pin::pin!(tokio::task::unconstrained(sleep.as_mut()));
    if entry.poll(cx).is_pending() {
        return Fired::No;
    }
    counts.fired();
    choose_mode(me.direct, me.pending_polls, me.registered);
    Fired::YesBudgetSpent
}

/// The entry fired at `armed`, before the deadline `target` (it moved later since):
/// tokio's reset re-arms it there.
#[inline]
fn rearm_at_target(
    sleep: Pin<&mut tokio::time::Sleep>,
    target: Instant,
    armed: &mut Instant,
    counts: &mut Counts,
) {
    sleep.reset(target);
    *armed = target;
    counts.registered();
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
