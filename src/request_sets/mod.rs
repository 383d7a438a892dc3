//! The per-request deadline sets: where [`Timeout`](crate::Timeout) and
//! [`Sleep`](crate::Sleep) file their deadlines instead of registering a runtime timer
//! entry each, how a timer finds its set, and how a set lives and dies with its
//! runtime.
//!
//! # Layers
//!
//! Each file depends only on the ones above it:
//!
//! 1. `deadline_set`: one set, the per-request deadlines of one thread for one
//!    runtime behind one tokio timer entry; bound, closed and pooled, knowing nothing
//!    of threads or of how a runtime's end is learnt.
//! 2. `runtime_life`: whether a runtime has shut down (its sentinel task), the sets
//!    bound to it (closed when it goes) and its orphans.
//! 3. `thread_sets`: each thread's sets, one per runtime it makes timers in, found
//!    by runtime id without a lock.
//! 4. `request`: one timer's place in its set, what the timers hold.
//!
//! # Lifecycle rules
//!
//! - **Bound where made.** A timer is bound when it is made to the thread's set for
//!   the current runtime, in that binding's *generation*. That runtime's clock judges
//!   it wherever it is polled.
//! - **One owner.** A set is held by the thread that made it for the runtime (its
//!   owner, which answers its own requests without the lock), or by its runtime's
//!   orphans once that thread exits while the runtime lives; the runtime's next
//!   thread that needs a set adopts it. A thread that cannot own a set (its
//!   thread-locals are gone or busy) shares an orphan through the lock.
//! - **Closed with the runtime.** When a runtime shuts down, its sentinel task is
//!   dropped with its other tasks, before tokio shuts the timer driver down; the drop
//!   closes every set bound to the runtime: waiting requests are woken (and see
//!   tokio's shutdown panic at their next poll), and each set's entry, which holds
//!   the runtime's handle (driver, file descriptors), is dropped. A set that learns
//!   of the close before it is recorded (the runtime went during its binding) is
//!   abandoned the same way.
//! - **Never freed, pooled.** A closed set with no owner and no filing goes back to a
//!   process-wide pool, holding nothing of its runtime, and the next binding takes it
//!   under a new generation. So a timer reaches its set by a plain `&'static`
//!   reference, with no count to touch per request, and the memory kept is that of the
//!   most sets ever in use at once. A timer of an older generation is void: its
//!   binding's runtime is gone, and it never files into the set's new binding.
//! - **Nothing dropped under a lock.** Wakers, timers, tokio entries and runtime
//!   handles that a set lets go of are dropped after its lock and outside the
//!   thread's list, because their drop may run any code, including code that reaches
//!   the same set.
//! - **Pinned threads.** A thread pinned to its runtime
//!   ([`on_thread_start`](crate::on_thread_start)) skips the runtime lookup while that
//!   runtime lives, and binds as any other thread once it is found gone.

mod deadline_set;
mod request;
mod runtime_life;
mod service_task;
pub(crate) mod sleep_fate;
pub(crate) mod thread_sets;

pub(crate) use deadline_set::Bound;
pub(crate) use request::{Filing, Request};
pub(crate) use runtime_life::RuntimeLife;
pub(crate) use thread_sets::pin_to_current;

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests;
