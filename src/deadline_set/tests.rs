//! Unit tests of the runtime layer's set lifecycle (what integration tests cannot
//! see: the sets themselves).

use super::*;
use crate::time_base::TICK_NANOS;
use std::task::Poll;
use std::time::Duration;

/// Runs `f` on a new thread (whose thread-local sets start empty and go when it
/// exits), and returns what it returns.
fn on_a_thread_of_its_own<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().unwrap()
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn a_set_that_held_a_burst_of_requests_keeps_little_once_they_are_answered() {
    on_a_thread_of_its_own(|| {
        let rt = paused();
        rt.block_on(async {
            let bound = Bound::current();
            let set = bound.set().expect("a set");
            let mut cx = Context::from_waker(Waker::noop());
            let mut pending: Vec<_> = (0..200_000)
                .map(|_| {
                    Box::pin(crate::timeout(
                        Duration::from_secs(5),
                        std::future::pending::<()>(),
                    ))
                })
                .collect();
            for timeout in &mut pending {
                assert!(timeout.as_mut().poll(&mut cx).is_pending());
            }
            let at_peak = set.heap_bytes();
            assert!(at_peak > 4_000_000, "{at_peak} bytes at the peak");
            drop(pending);
            // One more request: the set works, and keeps a few kilobytes.
            let mut one = Box::pin(crate::sleep(Duration::from_secs(1)));
            assert_eq!(one.as_mut().poll(&mut cx), Poll::Pending);
            let after = set.heap_bytes();
            assert!(after <= 64 * 1024, "{after} bytes after the burst");
        });
    });
}

#[test]
fn a_gone_runtimes_set_leaves_the_thread_at_its_next_miss_and_is_reused() {
    on_a_thread_of_its_own(|| {
        let first = paused();
        let (set, generation) = first.block_on(async {
            let bound = Bound::current();
            crate::sleep(Duration::from_millis(1)).await;
            (bound.set().unwrap(), bound.generation)
        });
        assert_eq!(thread_sets::owned_here(), 1);
        drop(first);
        assert!(!set.is_open(generation), "closed when its runtime went");
        let second = paused();
        second.block_on(async {
            let bound = Bound::current();
            assert_eq!(thread_sets::owned_here(), 1, "the gone set left the list");
            crate::sleep(Duration::from_millis(1)).await;
            assert!(bound.set().unwrap().is_open(bound.generation));
        });
        drop(second);
    });
}

#[test]
fn a_set_holds_nothing_of_its_runtime_once_the_runtime_is_gone() {
    on_a_thread_of_its_own(|| {
        let rt = paused();
        let set = rt.block_on(async {
            let bound = Bound::current();
            // A fired entry (the set's own, polled after it fired) and a pending one.
            crate::sleep(Duration::from_millis(1)).await;
            let _pending = Box::pin(crate::sleep(Duration::from_secs(9)));
            bound.set().unwrap()
        });
        drop(rt);
        set.shared.state().with(|locked| {
            assert!(
                locked.extra.sleep.is_none(),
                "the entry (and the runtime's handle) went"
            );
            assert!(locked.extra.waker.is_none());
        });
    });
}

#[test]
fn deadlines_that_share_a_tick_expire_in_one_service_with_one_or_two_rearms() {
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let bound = Bound::current();
            let set = bound.set().unwrap();
            let start = tokio::time::Instant::now();
            let mut cx = Context::from_waker(Waker::noop());
            // 2,000 deadlines within one millisecond tick, filed in reverse order
            // (so that every filing beats the last) and then in order.
            let mut timeouts: Vec<_> = (0..2_000u64)
                .map(|i| {
                    let at = start + Duration::from_millis(10) + Duration::from_nanos(i * 400);
                    Box::pin(crate::timeout_at(at, std::future::pending::<()>()))
                })
                .collect();
            for timeout in timeouts.iter_mut() {
                assert!(timeout.as_mut().poll(&mut cx).is_pending());
            }
            let before = set.entry_resets();
            tokio::time::sleep(Duration::from_millis(11)).await;
            let rearms = set.entry_resets() - before;
            // Outside the task's budget: each `Ready` spends a unit of it.
            let ready = tokio::task::unconstrained(async {
                let mut cx = Context::from_waker(Waker::noop());
                timeouts
                    .iter_mut()
                    .filter_map(|t| t.as_mut().poll(&mut cx).is_ready().then_some(()))
                    .count()
            })
            .await;
            assert_eq!(ready, 2_000, "all expired");
            // One probe of the tick's latest deadline; no re-arm per deadline.
            assert!(rearms <= 3, "{rearms} re-arms of the entry for one tick");
        });
    });
}

#[test]
fn a_set_of_a_gone_runtime_is_never_taken_for_a_runtime_with_its_id() {
    // tokio may reuse a runtime's id once the runtime is gone. Stand the gone
    // runtime's set in this thread's list under the live runtime's id: the lookup
    // must see it is gone (its record says so) and never file there.
    on_a_thread_of_its_own(|| {
        let gone = paused();
        let (old_set, old_generation) = gone.block_on(async {
            let bound = Bound::current();
            (bound.set().unwrap(), bound.generation)
        });
        let gone_life = gone.block_on(async {
            crate::runtime_life::RuntimeLife::of(&tokio::runtime::Handle::current())
        });
        drop(gone);
        let live = paused();
        live.block_on(async {
            let id = tokio::runtime::Handle::current().id();
            thread_sets::stand_in(old_set, old_generation, id, gone_life);
            let bound = Bound::current();
            assert!(
                !std::ptr::eq(bound.set().unwrap(), old_set) || bound.generation != old_generation,
                "the gone runtime's set was taken"
            );
            crate::sleep(Duration::from_millis(1)).await; // and it works
        });
    });
}

#[test]
fn a_set_goes_back_to_the_pool_once_however_often_it_is_let_go() {
    let (set, generation) = on_a_thread_of_its_own(|| {
        let rt = paused();
        let bound = rt.block_on(async { Bound::current() });
        drop(rt); // closed; this thread still holds it until it exits
        (bound.set().unwrap(), bound.generation)
    });
    // The thread exited: pooled. Late calls of the old binding (a last filing's
    // release, a second close) must not pool it again.
    set.release(generation);
    set.close(generation);
    set.retire(generation);
    let copies = POOL
        .lock()
        .unwrap()
        .iter()
        .filter(|pooled| std::ptr::eq(**pooled, set))
        .count();
    assert!(
        copies <= 1,
        "pooled {copies} times: two bindings would share it"
    );
}

#[test]
fn the_set_learns_its_runtimes_tick_boundaries() {
    // A paused runtime's driver starts where its clock starts: its tick boundaries
    // are that instant plus whole milliseconds.
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let start = crate::time_base::to_nanos(tokio::time::Instant::now());
            let set = Bound::current().set().unwrap();
            let offset = set.shared.state().with(|locked| locked.extra.grid);
            if cfg!(tokio_unstable) {
                assert_eq!(offset, None);
                return;
            }
            assert_eq!(offset, Some(start % TICK_NANOS));
            let tick_end = |at| set.shared.state().with(|locked| locked.extra.tick_end(at));
            assert_eq!(tick_end(start), Some(start));
            assert_eq!(tick_end(start + 1), Some(start + TICK_NANOS));
            assert_eq!(tick_end(start + TICK_NANOS), Some(start + TICK_NANOS));
            assert_eq!(tick_end(start - 1), Some(start));
        });
    });
}

#[test]
fn deadlines_filed_in_decreasing_order_within_a_tick_rearm_once() {
    // As a runtime that defers yielded tasks wakes them: each filing earlier than the
    // last, all within one tick. One re-arm, and all fire at that tick.
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let set = Bound::current().set().unwrap();
            let start = tokio::time::Instant::now();
            let mut cx = Context::from_waker(Waker::noop());
            let before = set.entry_resets();
            let mut sleeps: Vec<_> = (0..64u64)
                .rev()
                .map(|i| {
                    Box::pin(crate::sleep_until(
                        start + Duration::from_millis(5) + Duration::from_micros(i * 10),
                    ))
                })
                .collect();
            for sleep in sleeps.iter_mut() {
                assert!(sleep.as_mut().poll(&mut cx).is_pending());
            }
            let rearms = set.entry_resets() - before;
            if !cfg!(tokio_unstable) {
                assert!(rearms <= 2, "{rearms} re-arms for 64 deadlines in one tick");
            }
            tokio::time::sleep(Duration::from_millis(6)).await;
            let ready = tokio::task::unconstrained(async {
                let mut cx = Context::from_waker(Waker::noop());
                sleeps
                    .iter_mut()
                    .filter_map(|s| s.as_mut().poll(&mut cx).is_ready().then_some(()))
                    .count()
            })
            .await;
            assert_eq!(ready, 64, "all fired by the tick after the last");
        });
    });
}
