//! On tokio's per-worker timer, a deadline set's fires are serviced by a task of the
//! set's runtime, not inside the wake (the reasons and the hand-over:
//! `core::deferred`). What that costs there: per fire, a task spawned and polled (a
//! run of fires before it is polled shares one), beside tokio's wake of the set's
//! entry; the requests' wakes then come from a task on a worker, as tokio's own
//! timers' wakes come from its driver.

use super::deadline_set::DeadlineSet;
use tokio::runtime::Id;

/// The set's entry fired (binding `generation` of `runtime`): a task of `runtime`
/// services the set, unless one is scheduled and has not begun. Outside `runtime`'s
/// context (no task can be spawned from here), the set is serviced here. Out of
/// line: only that timer's fires come here, and the default driver's wake stays as
/// lean as it was.
#[cold]
#[inline(never)]
pub(super) fn schedule(set: &'static DeadlineSet, generation: u64, runtime: Id) {
    if !set.deferred.claim() {
        return; // the task scheduled before sees this fire
    }
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.id() == runtime => {
            // Dropped unpolled once the runtime shuts down (its end closes the set
            // and wakes the requests), and never registers anything from here.
            drop(handle.spawn(service(set, generation)));
        }
        _ => set.deferred.serve(|| set.shared.signal()),
    }
}

/// The task: begins (every fire claimed before is seen now), then services the set
/// if it is still in the binding.
async fn service(set: &'static DeadlineSet, generation: u64) {
    set.deferred.serve(|| {
        if set.is_open(generation) {
            set.shared.signal();
        }
    });
}
