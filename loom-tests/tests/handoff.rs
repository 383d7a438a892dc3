//! loom models of `HandOff` (`src/core/handoff.rs`), the protocol by which a
//! per-thread deadline set is serviced when its runtime entry fires: the entry's
//! waker (any thread, or the lock holder itself, inside `Sleep::reset`) services the
//! set under its lock, except while the holder is inside a call into the entry
//! (`in_call`): then it raises `again`, and the holder services when the call
//! returns.
#![cfg(lazy_deadline_loom)]

use lazy_deadline::core::handoff::HandOff;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The state records how many signals had been raised when it was last serviced.
struct Seen {
    signals_seen: usize,
    services: usize,
}

/// A hand-off, the count of signals raised so far, and the service that records it.
fn setup() -> (
    Arc<HandOff<Seen>>,
    Arc<AtomicUsize>,
    impl Fn(&mut Seen) + Clone + Send + 'static,
) {
    let handoff = Arc::new(HandOff::new(Seen {
        signals_seen: 0,
        services: 0,
    }));
    let raised = Arc::new(AtomicUsize::new(0));
    let service = {
        let raised = raised.clone();
        move |seen: &mut Seen| {
            // SeqCst: a test-only counter read under the lock.
            seen.signals_seen = raised.load(Ordering::SeqCst);
            seen.services += 1;
        }
    };
    (handoff, raised, service)
}

/// A thread that raises one more signal and signals it (the entry's fire on the
/// driver's thread).
fn spawn_signal(
    handoff: &Arc<HandOff<Seen>>,
    raised: &Arc<AtomicUsize>,
    service: impl Fn(&mut Seen) + Send + 'static,
) -> thread::JoinHandle<()> {
    let (handoff, raised) = (handoff.clone(), raised.clone());
    thread::spawn(move || {
        raised.fetch_add(1, Ordering::SeqCst);
        let _ = handoff.signal(|seen| service(seen));
    })
}

/// The holder's service as the deadline set runs it: a call into the entry, then a
/// service of its own if a signal counted on it meanwhile.
fn holder_call(handoff: &HandOff<Seen>, raised: &AtomicUsize, service: &impl Fn(&mut Seen)) {
    handoff.with(|seen| {
        // Work under the lock with an atomic in it (a waker's clone, say): without
        // one, loom never schedules another thread while the lock is held.
        raised.load(Ordering::SeqCst);
        let ((), again) = handoff.in_call(|| ());
        if again {
            service(seen);
        }
    });
}

fn assert_all_seen(handoff: &HandOff<Seen>, signals: usize) {
    handoff.with(|seen| {
        assert_eq!(seen.signals_seen, signals, "a signal was never serviced");
        assert!(seen.services >= 1);
    });
}

/// A fire on another thread while the owner is inside a call into the entry: it
/// is serviced after it was raised, by the holder when its call returns or by the
/// signaller once the lock is free. Never lost, never a deadlock.
#[test]
fn a_signal_racing_the_holders_call_is_serviced_after_it_was_raised() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        let signaller = spawn_signal(&handoff, &raised, service.clone());
        holder_call(&handoff, &raised, &service);
        signaller.join().unwrap();
        assert_all_seen(&handoff, 1);
    });
}

/// A fire on another thread while the owner files or cancels a request (a plain
/// `with`, no call into the entry): the signaller waits for the lock and services.
#[test]
fn a_signal_racing_a_plain_holder_waits_and_services() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        let signaller = spawn_signal(&handoff, &raised, service.clone());
        // Filing a request: an atomic under the lock (see `holder_call`).
        handoff.with(|seen| {
            raised.load(Ordering::SeqCst);
            seen.services
        });
        signaller.join().unwrap();
        assert_all_seen(&handoff, 1);
    });
}

/// Two fires (say, two runtimes' worth of driver threads, or a fire and a re-poll
/// request) racing the owner inside its call: both are seen by a later service.
#[test]
fn two_signals_racing_the_holders_call_are_both_serviced() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        let (a, b) = (
            spawn_signal(&handoff, &raised, service.clone()),
            spawn_signal(&handoff, &raised, service.clone()),
        );
        holder_call(&handoff, &raised, &service);
        a.join().unwrap();
        b.join().unwrap();
        assert_all_seen(&handoff, 2);
    });
}

/// The holder's own call signals (tokio wakes the entry's waker inside
/// `Sleep::reset` when the new deadline has passed): no deadlock, and the call
/// reports it so the holder services before it unlocks.
#[test]
fn a_signal_from_inside_the_holders_call_is_handed_to_the_holder() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        handoff.with(|seen| {
            let (ran, again) = handoff.in_call(|| {
                raised.fetch_add(1, Ordering::SeqCst);
                handoff.signal(|seen| service(seen))
            });
            assert!(ran.is_none(), "not serviced under the holder's lock");
            assert!(again, "the holder is told");
            service(seen);
        });
        assert_all_seen(&handoff, 1);
    });
}
