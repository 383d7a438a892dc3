//! A `Sleep`'s own runtime entry: where a `Sleep` goes from the deadline set at its
//! first reset that the set would pay its lock for (earlier across ticks, or after
//! it completed), and what carries it on once its runtime shut down.
//!
//! The lazy rule on one `tokio::time::Sleep`: the entry is armed at `armed`, the
//! deadline may be later (`target`). A later reset is a store (the entry fires at
//! `armed`, and the poll that sees it re-arms at the target); any other one is
//! tokio's own reset (which, within the armed driver tick, is tokio's own store). A
//! reset of a completed `Sleep` is tokio's reset, so that the entry wakes the waker
//! of the last poll at the new deadline, as tokio's does. Everything is judged on
//! `Instant`s: nothing here converts to the time base.
//!
//! A pending poll with the waker the entry holds (its memo) and an entry that has
//! not fired is answered without calling into tokio: the entry wakes that waker when
//! it fires. The memo is dropped whenever the entry may have lost the waker: it fired
//! (tokio takes the waker to wake it), or a reset made a new entry (tokio's
//! per-worker timer does).

use super::Counts;
use crate::core::MAX_ROUNDS;
use crate::sync::WakerMemo;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
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
        // Which waker the entry holds, while it holds one we know of.
        memo: WakerMemo,
        // Whether tokio's reset keeps the entry's waker (its default driver).
        keeps_waker: bool,
        // The entry of a `Sleep` whose runtime shut down: a plain `tokio::time::Sleep`
        // from then on (every reset and poll is tokio's own).
        fallback: bool,
    }
}

impl OwnEntry {
    /// An entry armed at `deadline` (`at` in the time base), made in the current
    /// runtime (the `Sleep`'s: the caller checked), registered with `waker` if there
    /// is one (as tokio's reset keeps the entry's waker, so the task is woken at the
    /// new deadline without polling again; at once if it has passed).
    pub fn armed(deadline: Instant, waker: Option<&Waker>, keeps_waker: bool) -> Pin<Box<Self>> {
        let mut entry = Box::pin(Self {
            sleep: tokio::time::sleep_until(deadline),
            target: deadline,
            armed: deadline,
            memo: WakerMemo::default(),
            keeps_waker,
            fallback: false,
        });
        if let Some(waker) = waker {
            let me = entry.as_mut().project();
            let polled = std::pin::pin!(tokio::task::unconstrained(me.sleep));
            match polled.poll(&mut Context::from_waker(waker)) {
                Poll::Pending => *me.memo = WakerMemo::of(waker),
                Poll::Ready(()) => waker.wake_by_ref(),
            }
        }
        entry
    }

    /// The entry of a `Sleep` whose runtime shut down, polled from inside that
    /// runtime (see `Sleep`'s `# Shutdown`).
    pub fn fallback(deadline: Instant) -> Pin<Box<Self>> {
        Box::pin(Self {
            sleep: tokio::time::sleep_until(deadline),
            target: deadline,
            armed: deadline,
            memo: WakerMemo::default(),
            keeps_waker: false,
            fallback: true,
        })
    }

    /// Whether the deadline has passed, as far as the entry has seen.
    pub fn is_elapsed(&self) -> bool {
        self.sleep.is_elapsed() && self.target <= self.armed
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
        let waker = WakerMemo::of(cx.waker());
        if *me.memo == waker && !me.sleep.is_elapsed() {
            return false; // the entry wakes this waker when it fires
        }
        for _ in 0..MAX_ROUNDS {
            let entry = std::pin::pin!(tokio::task::unconstrained(me.sleep.as_mut()));
            // tokio registers the waker first, whatever the poll reports.
            let fired = entry.poll(cx).is_ready();
            *me.memo = waker;
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
            if !*me.keeps_waker {
                *me.memo = WakerMemo::default();
            }
        }
        cx.waker().wake_by_ref();
        false
    }

    /// A `Sleep` that completed is polled again: as tokio's `Ready` poll, the entry
    /// keeps this waker (a reset then wakes it).
    pub fn keep_waker(self: Pin<&mut Self>, cx: &mut Context<'_>) {
        let me = self.project();
        let entry = std::pin::pin!(tokio::task::unconstrained(me.sleep));
        let _ = entry.poll(cx);
        *me.memo = WakerMemo::of(cx.waker());
    }

    /// The deadline moves to `deadline` with nothing registered (see
    /// `Sleep::reset_unregistered`): the poll that finds the entry fired before it
    /// re-arms there.
    pub fn retarget(self: Pin<&mut Self>, deadline: Instant) {
        let me = self.project();
        if *me.fallback {
            // tokio's `reset_without_timer` is private: a reset is what a plain
            // `Sleep` offers (it registers the entry; its waker stays as it was).
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
        // The entry may have fired since it was polled (tokio took the waker then):
        // the next poll registers again.
        if me.sleep.is_elapsed() || !*me.keeps_waker {
            *me.memo = WakerMemo::default();
        }
        me.sleep.reset(deadline);
        *me.armed = deadline;
        counts.registered();
    }
}
