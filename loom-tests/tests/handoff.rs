//! loom models of `HandOff` (`src/core/handoff.rs`), the protocol by which a
//! per-thread deadline set is serviced when its runtime entry fires: the entry's
//! waker (any thread, or the lock holder itself, inside `Sleep::reset`) never takes
//! the lock; it raises `pending` and the lock holder services after it unlocks.
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
    impl FnMut(&mut Seen) + Clone + Send + 'static,
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

/// A thread that raises one more signal and signals it.
fn spawn_signal(
    handoff: &Arc<HandOff<Seen>>,
    raised: &Arc<AtomicUsize>,
    service: impl FnMut(&mut Seen) + Send + 'static,
) -> thread::JoinHandle<()> {
    let (handoff, raised) = (handoff.clone(), raised.clone());
    thread::spawn(move || {
        raised.fetch_add(1, Ordering::SeqCst);
        handoff.signal(service, |()| {});
    })
}

/// A signal raised while another thread holds the lock (filing a request, or
/// cancelling one) is serviced after it: by the holder when it unlocks, or by the
/// signaller if the lock was free. Never lost, whatever the interleaving.
#[test]
fn a_signal_racing_the_lock_holder_is_serviced_after_it_was_raised() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        let signaller = spawn_signal(&handoff, &raised, service.clone());
        // The owner files a request: holds the lock for a while.
        handoff.with(|seen| seen.services, service.clone(), |()| {});
        signaller.join().unwrap();
        handoff.with(
            |seen| {
                assert_eq!(seen.signals_seen, 1, "a signal was never serviced");
                assert!(seen.services >= 1);
            },
            service,
            |()| {},
        );
    });
}

/// Two signallers (the entry firing on the driver's thread while a cancel from
/// another thread services the set) and the owner holding the lock: both signals
/// are seen by a service that ran after them.
#[test]
fn two_signals_racing_the_owner_are_both_serviced() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        let (a, b) = (
            spawn_signal(&handoff, &raised, service.clone()),
            spawn_signal(&handoff, &raised, service.clone()),
        );
        handoff.with(|_| (), service.clone(), |()| {});
        a.join().unwrap();
        b.join().unwrap();
        handoff.with(
            |seen| assert_eq!(seen.signals_seen, 2, "a signal was never serviced"),
            service,
            |()| {},
        );
    });
}

/// Three signallers and no owner: one that finds the flag already cleared by
/// another's service must still look again after it unlocks, or a signal that
/// failed its try-lock meanwhile is lost.
#[test]
fn three_signallers_each_seen_by_a_later_service() {
    loom::model(|| {
        let (handoff, raised, service) = setup();
        let threads = [
            spawn_signal(&handoff, &raised, service.clone()),
            spawn_signal(&handoff, &raised, service.clone()),
        ];
        raised.fetch_add(1, Ordering::SeqCst);
        handoff.signal(service.clone(), |()| {});
        for thread in threads {
            thread.join().unwrap();
        }
        handoff.with(
            |seen| assert_eq!(seen.signals_seen, 3, "a signal was never serviced"),
            service,
            |()| {},
        );
    });
}

/// The holder's own call signals (tokio wakes the entry's waker inside
/// `Sleep::reset` when the new deadline has passed): no deadlock, and the service
/// runs once the holder unlocks, before `with` returns.
#[test]
fn a_signal_from_inside_the_holder_is_serviced_after_its_unlock() {
    loom::model(|| {
        let handoff = HandOff::new(Seen {
            signals_seen: 0,
            services: 0,
        });
        let service = |seen: &mut Seen| seen.services += 1;
        handoff.with(
            |seen| {
                handoff.signal(service, |()| {});
                assert_eq!(seen.services, 0, "not under the holder's lock");
            },
            service,
            |()| {},
        );
        handoff.with(|seen| assert_eq!(seen.services, 1), service, |()| {});
    });
}
