//! On tokio's per-worker timer, a deadline set's fires are serviced by a task of the
//! set's runtime, not inside the wake (the reasons and the hand-over:
//! `core::deferred`). What that costs there: per fire, a task spawned and polled (a
//! run of fires before it is polled shares one), beside tokio's wake of the set's
//! entry; the requests' wakes then come from a task on a worker, as tokio's own
//! timers' wakes come from its driver.

use super::deadline_set::SetWaker;
use std::sync::Arc;

/// The set's entry fired (`waker`: its binding's waker): a task of the binding's
/// runtime services the set, unless one is scheduled and has not begun. Outside
/// that runtime's context (no task can be spawned from here), the set is serviced
/// here. Out of line: only that timer's fires come here, and the default driver's
/// wake stays as lean as it was.
#[cold]
#[inline(never)]
pub(super) fn schedule(waker: &Arc<SetWaker>) {
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
async fn service(waker: Arc<SetWaker>) {
    waker.deferred.serve(|| {
        if waker.set.is_open(waker.generation) {
            waker.set.shared.signal();
        }
    });
}
