//! Unit tests of the runtime layer's set lifecycle (what integration tests cannot
//! see: the sets themselves).

use super::*;
// The whole room's lifecycle, driven through its upper layers.
use crate::request_sets::{runtime_life::RuntimeLife, thread_sets, Filing, Request};
use crate::time_base::TICK_NANOS;
use std::task::Poll;
use std::time::Duration;

/// Runs `f` on a new thread (whose thread-local sets start empty and go when it
/// exits), and returns what it returns.
fn on_a_thread_of_its_own<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(|| {
        thread_sets::prefer_sets(true);
        f()
    })
    .join()
    .unwrap()
}

/// A paused current-thread runtime (also the room's other unit tests'), whose
/// timers made on this thread take the deadline sets (these tests are the sets').
pub(in crate::request_sets) fn paused() -> tokio::runtime::Runtime {
    thread_sets::prefer_sets(true);
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
            let bound = thread_sets::current();
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
            let bound = thread_sets::current();
            crate::sleep(Duration::from_millis(1)).await;
            (bound.set().unwrap(), bound.generation)
        });
        assert_eq!(thread_sets::owned_here(), 1);
        drop(first);
        assert!(!set.is_open(generation), "closed when its runtime went");
        let second = paused();
        second.block_on(async {
            let bound = thread_sets::current();
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
            let bound = thread_sets::current();
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
            let bound = thread_sets::current();
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
            let bound = thread_sets::current();
            (bound.set().unwrap(), bound.generation)
        });
        let gone_life =
            gone.block_on(async { RuntimeLife::of(&tokio::runtime::Handle::current()) });
        drop(gone);
        let live = paused();
        live.block_on(async {
            let id = tokio::runtime::Handle::current().id();
            thread_sets::stand_in(old_set, old_generation, id, gone_life);
            let bound = thread_sets::current();
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
        let bound = rt.block_on(async { thread_sets::current() });
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
fn the_set_learns_its_runtimes_driver_and_tick_boundaries_at_its_first_re_arm() {
    // A paused runtime's driver starts where its clock starts: its tick boundaries
    // are that instant plus whole milliseconds.
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let start = crate::time_base::to_nanos(tokio::time::Instant::now());
            let made = crate::timeout(Duration::from_secs(5), std::future::pending::<()>());
            let set = thread_sets::current().set().unwrap();
            let learnt = || {
                set.shared.state().with(|locked| {
                    (
                        locked.extra.grid,
                        locked.extra.keeps_waker,
                        locked.extra.probed,
                    )
                })
            };
            // Bound by the timer's making, which registers nothing with the driver
            // (as tokio's does not): nothing learnt yet, and the lock-free copies say
            // "unknown".
            assert_eq!(learnt(), (None, false, false));
            assert_eq!(set.tick_end(start), None);
            assert!(!set.keeps_waker());
            // Its first pending poll files it, and the entry's first re-arm learns.
            let mut made = std::pin::pin!(made);
            assert!(made
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending());
            // A current-thread runtime always has tokio's default driver (whatever
            // the build's cfg): its reset keeps the entry's waker, and its grid is
            // learnt.
            let (offset, keeps_waker, probed) = learnt();
            assert!(probed && keeps_waker);
            assert_eq!(offset, Some(start % TICK_NANOS));
            assert!(set.keeps_waker());
            assert!(
                !set.shared.state().with(|locked| locked.extra.deferring),
                "tokio's default driver: the set is serviced in its entry's wake"
            );
            assert_eq!(set.tick_end(start + 1), Some(start + TICK_NANOS));
            let tick_end = |at| set.shared.state().with(|locked| locked.extra.tick_end(at));
            assert_eq!(tick_end(start), Some(start));
            assert_eq!(tick_end(start + 1), Some(start + TICK_NANOS));
            assert_eq!(tick_end(start + TICK_NANOS), Some(start + TICK_NANOS));
            assert_eq!(tick_end(start - 1), Some(start));
        });
    });
}

#[test]
fn a_rebound_set_knows_nothing_of_its_last_bindings_driver() {
    // A set that learnt its driver, back in the pool with its runtime, then bound to
    // another runtime (by hand here, so that no other test's thread takes it from the
    // pool first): until its entry's first re-arm there, its lock-free copies say
    // "unknown", never the last binding's values (a stale "keeps the waker" would
    // lose wakes on tokio's per-worker timer; a stale grid, fire a move late).
    on_a_thread_of_its_own(|| {
        let first = paused();
        let set = first.block_on(async {
            let made = crate::timeout(Duration::from_secs(5), std::future::pending::<()>());
            let mut made = std::pin::pin!(made);
            let mut cx = Context::from_waker(Waker::noop());
            assert!(made.as_mut().poll(&mut cx).is_pending());
            let set = thread_sets::current().set().unwrap();
            assert!(set.keeps_waker(), "learnt at the first re-arm");
            set
        });
        drop(first);
        let second = paused();
        second.block_on(async {
            POOL.lock()
                .unwrap()
                .retain(|pooled| !std::ptr::eq(*pooled, set));
            let entry = TokioEntry {
                sleep: Some(Box::pin(tokio::time::sleep_until(
                    tokio::time::Instant::now(),
                ))),
                runtime: Some(tokio::runtime::Handle::current().id()),
                holder: Holder::Orphans,
                ..TokioEntry::unbound()
            };
            let (_, generation, _) = set.bind_as(entry, false);
            assert!(!set.keeps_waker(), "the last binding's driver");
            let now = crate::time_base::to_nanos(tokio::time::Instant::now());
            assert_eq!(set.tick_end(now + 1), None, "the last binding's grid");
            set.close(generation);
        });
    });
}

#[test]
fn deadlines_filed_in_decreasing_order_within_a_tick_rearm_once() {
    // As a runtime that defers yielded tasks wakes them: each filing earlier than the
    // last, all within one tick. One re-arm, and all fire at that tick.
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let set = thread_sets::current().set().unwrap();
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
            assert!(rearms <= 2, "{rearms} re-arms for 64 deadlines in one tick");
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

/// A waker that counts its wakes.
fn counting_waker() -> (Arc<std::sync::atomic::AtomicUsize>, Waker) {
    struct Count(Arc<std::sync::atomic::AtomicUsize>);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    (count.clone(), Waker::from(Arc::new(Count(count))))
}

#[test]
fn a_service_tasks_wakes_schedule_one_task_per_run_or_serve_outside_the_runtime() {
    // The deferring waker's hand-over, by hand, on a paused current-thread runtime
    // (whose entry itself services in its wake: no task may run after the wake).
    on_a_thread_of_its_own(|| {
        let rt = paused();
        // Made in the runtime and polled only from outside it: the set's entry is
        // armed away from home, so the set never learns its driver.
        let (set, mut sleep) = {
            let _inside = rt.enter();
            let set = thread_sets::current().set().expect("a set");
            (set, Box::pin(crate::sleep(Duration::from_millis(10))))
        };
        let (woken, waker) = counting_waker();
        let woken = || woken.load(std::sync::atomic::Ordering::SeqCst);
        let mut cx = Context::from_waker(&waker);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        let (deferring, probed) = set
            .shared
            .state()
            .with(|locked| (locked.extra.deferring, locked.extra.probed));
        assert!(!probed, "armed away from home: nothing learnt");
        assert!(
            !deferring,
            "a current-thread runtime's entry services in its wake"
        );
        let deferring = service_task::waker(set, set.shared.generation(), rt.handle().id());
        let alive = || rt.metrics().num_alive_tasks();
        let base = alive();
        let wake_inside = || {
            let _inside = rt.enter();
            deferring.wake_by_ref();
        };
        wake_inside();
        wake_inside();
        assert_eq!(alive(), base + 1, "one task per run of wakes");
        rt.block_on(tokio::task::yield_now());
        assert_eq!(alive(), base, "the task ran");
        wake_inside();
        assert_eq!(
            alive(),
            base + 1,
            "a wake after the task began schedules another"
        );
        let rounds = || {
            set.shared
                .state()
                .with(|locked| locked.extra.service_rounds)
        };
        let before = rounds();
        rt.block_on(tokio::task::yield_now());
        assert!(rounds() > before, "the task serviced the set");
        let before = rounds();
        std::thread::scope(|scope| {
            scope.spawn(|| deferring.wake_by_ref());
        });
        assert_eq!(alive(), base, "outside any runtime no task is spawned");
        assert!(
            rounds() > before,
            "outside any runtime the wake serves itself"
        );
        wake_inside();
        assert_eq!(
            alive(),
            base + 1,
            "and began, so the next wake schedules a task"
        );
        rt.block_on(tokio::task::yield_now());
        // Inside another runtime's context the wake serves itself too: a task
        // spawned there would belong to that runtime, and if it went before
        // polling it, the hand-over would stay claimed for good.
        let other = paused();
        let before = rounds();
        {
            let _inside_other = other.enter();
            deferring.wake_by_ref();
        }
        assert_eq!(
            other.metrics().num_alive_tasks(),
            0,
            "nothing spawned on it"
        );
        assert!(rounds() > before, "served in the wake");
        drop(other);
        wake_inside();
        assert_eq!(alive(), base + 1, "the next wake at home schedules a task");
        rt.block_on(tokio::task::yield_now());
        assert_eq!(woken(), 0, "nothing due yet");
        // The driver fires the entry: serviced inside its wake, before `block_on`
        // returns (a task spawned there would wait for the next `block_on`).
        rt.block_on(async { tokio::time::advance(Duration::from_millis(10)).await });
        assert_eq!(woken(), 1, "woken by the driver's turn");
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
    });
}

#[test]
fn an_unlearnt_set_of_a_multi_thread_runtime_is_serviced_by_a_task_of_it() {
    // Timers made in the runtime, polled only from a plain thread: the set has not
    // learnt its driver, which may be tokio's per-worker timer, so its entry's wakes
    // schedule a task of the runtime that services the set. A service that
    // re-arms nothing learns nothing either, so each fire here goes through a task:
    // the second needs the first task to have begun. Real time (a multi-thread
    // runtime's clock cannot be paused); bounded by a watchdog.
    on_a_thread_of_its_own(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let set = {
            let _inside = rt.enter();
            thread_sets::current().set().expect("a set")
        };
        let learnt = || {
            set.shared
                .state()
                .with(|locked| (locked.extra.deferring, locked.extra.probed))
        };
        let (woken, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        for fire in 1..=2 {
            let mut sleep = {
                let _inside = rt.enter();
                Box::pin(crate::sleep(Duration::from_millis(1)))
            };
            assert!(sleep.as_mut().poll(&mut cx).is_pending());
            assert_eq!(
                learnt(),
                (true, false),
                "unlearnt: its wakes schedule a task"
            );
            while woken.load(std::sync::atomic::Ordering::SeqCst) < fire {
                assert!(
                    std::time::Instant::now() < give_up,
                    "fire {fire} never serviced"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(sleep.as_mut().poll(&mut cx).is_ready());
        }
        // A re-arm at home learns tokio's default driver: serviced in the wake now.
        rt.block_on(async {
            let mut later = Box::pin(crate::sleep(Duration::from_secs(3600)));
            assert!(later
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending());
        });
        let (deferring, probed) = learnt();
        assert!(probed && !deferring, "the default driver, learnt");
    });
}

#[test]
fn a_new_waker_that_finds_the_set_closed_is_woken_and_not_stored() {
    // The poll read "open", then the runtime's sentinel closed the set (waking the
    // slot's old waker), then the poll swaps its new waker in: nothing would ever
    // wake it there. It is woken at once instead, and its next poll sees the close.
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let mut filing = Request::current();
            let bound = filing.bound();
            let (set, generation) = (bound.set().unwrap(), bound.generation);
            let deadline = now_nanos() + 3_600_000_000_000;
            let (old_wakes, old) = counting_waker();
            assert_eq!(filing.file(deadline, &old), Filing::Filed);
            set.close(generation);
            assert_eq!(old_wakes.load(std::sync::atomic::Ordering::SeqCst), 1);
            let (new_wakes, new) = counting_waker();
            assert!(
                !filing.poll_passed(deadline, &new),
                "never passed by a close"
            );
            assert_eq!(
                new_wakes.load(std::sync::atomic::Ordering::SeqCst),
                1,
                "the new waker was stored in a closed set, and never woken"
            );
            assert!(filing.is_void(), "its next poll sees the close");
        });
    });
}

#[test]
fn a_pinned_thread_whose_runtime_is_gone_binds_as_an_unpinned_one_and_lets_the_runtime_go() {
    // A thread pinned to a runtime that shut down (a blocking thread after
    // `shutdown_background`) carries on in a runtime of its own: its timers are that
    // runtime's, as on an unpinned thread, and the pin (the gone runtime's handle)
    // is dropped at its first timer. Both with a timer made before the shutdown and
    // without.
    for timer_before in [false, true] {
        on_a_thread_of_its_own(move || {
            let gone = paused();
            {
                let _entered = gone.enter();
                thread_sets::pin_to_current();
            }
            if timer_before {
                gone.block_on(crate::sleep(Duration::from_millis(1)));
            }
            assert!(thread_sets::is_pinned());
            drop(gone);
            let own = paused();
            own.block_on(async {
                let start = tokio::time::Instant::now();
                crate::sleep(Duration::from_millis(5)).await;
                assert_eq!(start.elapsed(), Duration::from_millis(5));
                let late = crate::timeout(Duration::from_millis(5), std::future::pending::<()>());
                assert!(late.await.is_err());
                let bound = thread_sets::current();
                assert_eq!(bound.runtime(), tokio::runtime::Handle::current().id());
            });
            assert!(
                !thread_sets::is_pinned(),
                "the gone runtime's handle is kept"
            );
        });
    }
}

#[test]
fn a_timer_of_a_gone_runtime_never_files_in_its_sets_next_binding() {
    // A timer made before its runtime shut down and polled after its set went back
    // to the pool and was bound again, to another runtime: the set is open, but in
    // another binding. The timer must see its own runtime gone (tokio's panic from
    // outside it), never file in the other runtime's set and resolve by its clock.
    on_a_thread_of_its_own(|| {
        let first = paused();
        let (old, mut stale) = first.block_on(async {
            let bound = thread_sets::current();
            let stale = Box::pin(crate::timeout(
                Duration::from_secs(1),
                std::future::pending::<()>(),
            ));
            (bound.set().unwrap(), stale)
        });
        drop(first);
        let second = paused();
        second.block_on(async {
            // This thread's next miss lets the gone set go (back to the pool).
            let bound = thread_sets::current();
            if !bound.set().is_some_and(|set| std::ptr::eq(set, old)) {
                // Another thread took it first: bind it here by hand.
                POOL.lock()
                    .unwrap()
                    .retain(|pooled| !std::ptr::eq(*pooled, old));
                let life = RuntimeLife::of(&tokio::runtime::Handle::current());
                let mut sleep = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
                let (keeps_waker, grid) = probe_driver(&mut sleep);
                let entry = TokioEntry {
                    sleep: Some(sleep),
                    keeps_waker,
                    grid,
                    probed: true,
                    runtime: Some(tokio::runtime::Handle::current().id()),
                    holder: Holder::Orphans,
                    ..TokioEntry::unbound()
                };
                let (_, generation, _) = old.bind_as(entry, false);
                assert!(life.record_binding((old, generation), false), "bound");
            }
            assert!(old.shared.is_open(old.shared.generation()), "rebound, open");
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                stale.as_mut().poll(&mut Context::from_waker(Waker::noop()))
            }));
            let panic = polled.expect_err("filed in another runtime's set");
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            assert!(message.contains("being shutdown"), "{message}");
        });
    });
}

/// The thread's set for a paused runtime, after `n` hour-long timeouts made on this
/// thread were filed, by their first poll, on the thread `poll_on` gives (this one,
/// or another: remote filings), then answered (dropped) on the thread `answer_on`
/// gives. Returns the set's bytes at the peak, after the answers, and after one
/// service round (the entry fires at the earliest deadline) and one more filing.
fn burst_answered(n: usize, poll_elsewhere: bool, answer_elsewhere: bool) -> [usize; 3] {
    on_a_thread_of_its_own(move || {
        paused().block_on(async move {
            let bound = thread_sets::current();
            let set = bound.set().unwrap();
            type Boxed = Pin<Box<crate::Timeout<std::future::Pending<()>>>>;
            let timeouts: Vec<Boxed> = (0..n)
                .map(|_| {
                    Box::pin(crate::timeout(
                        Duration::from_secs(3600),
                        std::future::pending::<()>(),
                    ))
                })
                .collect();
            let poll_all = |mut timeouts: Vec<Boxed>| {
                let mut cx = Context::from_waker(Waker::noop());
                for timeout in &mut timeouts {
                    assert!(timeout.as_mut().poll(&mut cx).is_pending());
                }
                timeouts
            };
            let timeouts = if poll_elsewhere {
                std::thread::spawn(move || poll_all(timeouts))
                    .join()
                    .unwrap()
            } else {
                poll_all(timeouts)
            };
            let peak = set.heap_bytes();
            if answer_elsewhere {
                std::thread::spawn(move || drop(timeouts)).join().unwrap();
            } else {
                drop(timeouts);
            }
            let answered = set.heap_bytes();
            // One service round: the entry, armed at the earliest (answered) deadline,
            // fires and finds nothing.
            tokio::time::sleep(Duration::from_secs(3601)).await;
            let mut one = Box::pin(crate::sleep(Duration::from_secs(1)));
            assert!(one
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending());
            [peak, answered, set.heap_bytes()]
        })
    })
}

#[test]
fn a_burst_answered_on_another_thread_gives_its_memory_back() {
    let [peak, _, after] = burst_answered(200_000, false, true);
    assert!(peak > 4_000_000, "{peak} bytes at the peak");
    assert!(
        after <= 64 * 1024,
        "{after} bytes kept after a burst answered elsewhere"
    );
}

#[test]
fn a_burst_filed_from_another_thread_gives_its_memory_back() {
    for answer_elsewhere in [true, false] {
        let [peak, _, after] = burst_answered(200_000, true, answer_elsewhere);
        assert!(peak > 4_000_000, "{peak} bytes at the peak");
        assert!(
            after <= 64 * 1024,
            "{after} bytes kept after a remote burst"
        );
    }
}

#[test]
fn a_remote_burst_that_expires_gives_its_memory_back() {
    // Filed from another thread (remote slots), never answered: they expire, and the
    // service that expires them gives back what they grew.
    on_a_thread_of_its_own(|| {
        paused().block_on(async {
            let set = thread_sets::current().set().unwrap();
            type Boxed = Pin<Box<crate::Timeout<std::future::Pending<()>>>>;
            let timeouts: Vec<Boxed> = (0..200_000)
                .map(|_| {
                    Box::pin(crate::timeout(
                        Duration::from_secs(60),
                        std::future::pending::<()>(),
                    ))
                })
                .collect();
            let timeouts = std::thread::spawn(move || {
                let mut timeouts = timeouts;
                let mut cx = Context::from_waker(Waker::noop());
                for timeout in &mut timeouts {
                    assert!(timeout.as_mut().poll(&mut cx).is_pending());
                }
                timeouts
            })
            .join()
            .unwrap();
            let peak = set.heap_bytes();
            assert!(peak > 4_000_000, "{peak} bytes at the peak");
            tokio::time::sleep(Duration::from_secs(61)).await;
            let after = set.heap_bytes();
            assert!(
                after <= 64 * 1024,
                "{after} bytes kept after a remote burst expired"
            );
            drop(timeouts);
        })
    });
}
