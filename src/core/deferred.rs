//! A deadline set's service run by a task rather than inside the wake that asks for
//! it: what a set does on tokio's per-worker timer (`enable_alt_timer`, unstable),
//! and on any multi-thread runtime until it has learnt its driver.
//!
//! Why: that timer wakes entries from its worker's park and, at the runtime's end,
//! from the worker's shutdown (every entry at once, before the runtime drops its
//! tasks). A service run inside such a wake re-arms the set's entry, which on that
//! timer registers a new entry; at shutdown that registration panics inside tokio
//! ("being shutdown"), and the panic would leave tokio's shutdown. tokio's own
//! timers register only from their task's poll, and a task is never polled once its
//! runtime shuts down. So the set's wake only schedules a task that services the
//! set: in a running runtime it is polled soon after (and its re-arm registers from
//! a worker, as tokio's own timers do); at shutdown it is dropped unpolled, and the
//! runtime's end closes the set and wakes its requests.
//!
//! The protocol here is the hand-over between the wakes and that task: at most one
//! task scheduled and not begun yet, and no fire left unserviced. A wake that finds
//! a task scheduled leaves its fire to it; the task *begins* (lowers the flag with a
//! read-modify-write) before it services, so that a fire claimed before that is seen
//! by its service, and a fire after it schedules a task of its own (at worst one
//! service more, never one less). Modelled in `loom-tests/tests/deferred.rs`.

use crate::sync::{AtomicBool, Ordering};

/// See the module docs.
#[derive(Debug)]
pub struct DeferredService {
    /// A task that services the set is scheduled and has not begun.
    scheduled: AtomicBool,
}

impl Default for DeferredService {
    fn default() -> Self {
        Self {
            scheduled: AtomicBool::new(false),
        }
    }
}

impl DeferredService {
    /// A fire to service: `true` if the caller must schedule a task that runs the
    /// service through [`serve`](Self::serve) (and, if it cannot, serve itself);
    /// `false` if a task scheduled earlier has not begun yet, and will see this
    /// fire.
    #[inline]
    pub fn claim(&self) -> bool {
        // Release: publishes the fire this wake saw to the `begin` that reads this
        // `true` (or a later claim's: each read-modify-write continues the release
        // sequence). A `false` read schedules a task, which the spawn orders after.
        !self.scheduled.swap(true, Ordering::Release)
    }

    /// Runs `service` as the scheduled task (or the caller that could not schedule
    /// one): begins first, so that every fire claimed before is seen by it.
    #[inline]
    pub fn serve<R>(&self, service: impl FnOnce() -> R) -> R {
        self.begin();
        service()
    }

    /// Begins: every fire claimed before this is seen by the service after it.
    #[inline]
    fn begin(&self) {
        // Acquire: reads a claim's `true` and with it the fires claimed so far; a
        // read-modify-write, so that a claim's `true` is never overwritten unread
        // (a plain store could follow it in the flag's order).
        self.scheduled.swap(false, Ordering::Acquire);
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_task_per_run_of_fires_until_it_begins() {
        let deferred = DeferredService::default();
        assert!(deferred.claim(), "the first fire schedules a task");
        assert!(!deferred.claim(), "a second fire leaves it to that task");
        assert!(
            deferred.serve(|| deferred.claim()),
            "a fire once the task began schedules another"
        );
    }
}
