//! On tokio's per-worker timer (and on a multi-thread runtime until the set has
//! learnt its driver), a deadline set's fires are serviced by a task of the set's
//! runtime, not inside the wake (the reasons and the hand-over:
//! `core::deferred`). A set of a multi-thread runtime is bound with a
//! [`DeferringWaker`] as its entry's waker, and keeps it unless its entry's first
//! re-arm at home learns tokio's default driver (`TokioEntry::fit_waker`), which
//! gets the waker that services inside the wake, so that path makes no choice per
//! fire. A current-thread runtime always has the default driver, and may run no
//! task after the wake (its `block_on` may return): its sets service inside the
//! wake from the start. What the task costs: per fire, a task spawned and polled (a
//! run of fires before it is polled shares one), beside tokio's wake of the set's
//! entry; the requests' wakes then come from a task on a worker, as tokio's own
//! timers' wakes come from its driver.

use super::deadline_set::DeadlineSet;
use crate::core::deferred::DeferredService;
use std::sync::Arc;
use std::task::{Wake, Waker};
use tokio::runtime::Id;

/// The entry's waker where a task services the set, for binding `generation` of `set`
/// (of `runtime`). One per binding, so that what its wakes hand over is the
/// binding's own: a wake of a gone binding that races the check of its generation
/// claims nothing of the next one's.
struct DeferringWaker {
    set: &'static DeadlineSet,
    generation: u64,
    runtime: Id,
    /// The hand-over between the wakes and the task.
    deferred: DeferredService,
}

/// A [`DeferringWaker`] for binding `generation` of `set`, on `runtime`.
pub(super) fn waker(set: &'static DeadlineSet, generation: u64, runtime: Id) -> Waker {
    Waker::from(Arc::new(DeferringWaker {
        set,
        generation,
        runtime,
        deferred: DeferredService::default(),
    }))
}

impl Wake for DeferringWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.set.is_open(self.generation) {
            schedule(self);
        }
    }
}

/// The set's entry fired: a task of the binding's runtime services the set, unless
/// one is scheduled and has not begun. Outside that runtime's context (no task can
/// be spawned from here), the set is serviced here.
fn schedule(waker: &Arc<DeferringWaker>) {
    if !waker.deferred.claim() {
        return; // the task scheduled before sees this fire
    }
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.id() == waker.runtime => {
            // Dropped unpolled once the runtime shuts down (its end closes the set
            // and wakes the requests), and never registers anything from here.
            drop(handle.spawn(service(waker.clone())));
        }
        _ => waker.deferred.serve(|| waker.set.shared.signal()),
    }
}

/// The task: begins (every fire claimed before is seen now), then services the set
/// if it is still in the binding. It holds the binding's waker (a `&'static` set,
/// numbers and the hand-over: nothing of a task or a runtime).
async fn service(waker: Arc<DeferringWaker>) {
    waker.deferred.serve(|| {
        if waker.set.is_open(waker.generation) {
            waker.set.shared.signal();
        }
    });
}
