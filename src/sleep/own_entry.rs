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
//! A pending poll by the task whose waker the entry holds, of an entry that has not
//! fired, is answered without calling into tokio: the entry wakes that waker when it
//! fires. Which waker that is: `registered`, the clone this entry was polled with
//! (kept here, so that its identity stays its own: a dropped waker's address reused
//! by another task's never passes for it). It is forgotten whenever the entry may
//! have lost it: it fired (tokio takes the waker to wake it), or tokio's reset ran
//! (the driver may have fired the entry on another thread just before it, and a reset
//! re-registers an entry without restoring the waker; tokio's per-worker timer makes
//! a new entry, with none). The poll after that registers again.

use super::Counts;
use crate::core::MAX_ROUNDS;
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
        // The waker the entry holds a clone of, while it surely does.
        registered: Option<Waker>,
        // The entry of a `Sleep` whose runtime shut down: a plain `tokio::time::Sleep`
        // from then on (every reset and poll is tokio's own).
        fallback: bool,
    }
}

impl OwnEntry {
    /// An entry armed at `deadline`, made in the current runtime (the `Sleep`'s: the
    /// caller checked), registered with `waker` if there is one (as tokio's reset
    /// keeps the entry's waker, so the task is woken at the new deadline without
    /// polling again; at once if it has passed).
    pub fn armed(deadline: Instant, waker: Option<Waker>) -> Pin<Box<Self>> {
        let mut entry = Box::pin(Self {
            sleep: tokio::time::sleep_until(deadline),
            target: deadline,
            armed: deadline,
            registered: None,
            fallback: false,
        });
        if let Some(waker) = waker {
            let me = entry.as_mut().project();
            let polled = std::pin::pin!(tokio::task::unconstrained(me.sleep));
            match polled.poll(&mut Context::from_waker(&waker)) {
                Poll::Pending => *me.registered = Some(waker),
                Poll::Ready(()) => waker.wake(),
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
            registered: None,
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
        if me
            .registered
            .as_ref()
            .is_some_and(|kept| kept.will_wake(cx.waker()))
            && !me.sleep.is_elapsed()
        {
            // The entry holds this waker and has not fired: it wakes it when it
            // does. (If it fires meanwhile, on the driver's thread, it has already
            // taken this waker to wake it: the task polls again.)
            return false;
        }
        for _ in 0..MAX_ROUNDS {
            if !poll_entry(me.registered, me.sleep.as_mut(), cx) {
                return false;
            }
            counts.fired();
            if *me.target <= *me.armed {
                return true;
            }
            // The deadline moved later since the entry was armed: re-arm there. The
            // entry holds the waker just registered (it has fired: the driver does not
            // fire it again before this reset puts it back), but the per-worker timer
            // makes a new entry on reset: the next round polls it.
            me.sleep.as_mut().reset(*me.target);
            *me.armed = *me.target;
            counts.registered();
        }
        cx.waker().wake_by_ref();
        false
    }

    /// A `Sleep` that completed is polled again: as tokio's `Ready` poll, the entry
    /// keeps this waker (a reset then wakes it).
    pub fn keep_waker(self: Pin<&mut Self>, cx: &mut Context<'_>) {
        let me = self.project();
        let _ = poll_entry(me.registered, me.sleep, cx);
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
        // See the module docs: the next poll registers again.
        *me.registered = None;
        me.sleep.reset(deadline);
        *me.armed = deadline;
        counts.registered();
    }
}

/// Polls tokio's entry `sleep` (outside the task's budget: the caller spends it on
/// `Ready`) with the kept clone of `cx`'s waker (`registered`), which the entry then
/// holds. Whether it fired.
fn poll_entry(
    registered: &mut Option<Waker>,
    sleep: Pin<&mut tokio::time::Sleep>,
    cx: &Context<'_>,
) -> bool {
    if !registered
        .as_ref()
        .is_some_and(|kept| kept.will_wake(cx.waker()))
    {
        *registered = Some(cx.waker().clone());
    }
    let waker = registered.as_ref().expect("just kept");
    let entry = std::pin::pin!(tokio::task::unconstrained(sleep));
    // tokio registers the waker first, whatever the poll reports.
    entry.poll(&mut Context::from_waker(waker)).is_ready()
}
