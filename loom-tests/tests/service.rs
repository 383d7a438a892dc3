//! loom model of a deadline set's service loop (`src/core/service.rs`) against a
//! stand-in for its tokio entry: the entry fires on the driver's thread while the
//! set's owner, holding the lock, is inside a call into the entry (filing an earlier
//! deadline re-arms it). The fire is handed to the holder through the hand-off, and
//! the holder's loop must act on it: a fire ignored there is a deadline never
//! expired, since the holder's next reset re-arms the entry and forgets it fired.
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::service::Serviced;
use lazy_deadline::core::shared_set::{FileOutcome, SharedSet};
use loom::thread;
use std::sync::Arc;
use support::set_entry::{Driver, StubEntry};
use support::WakeFlag;

const LATE: u64 = 10;
const EARLY: u64 = 5;

fn file_and_service(
    set: &SharedSet<StubEntry>,
    generation: u64,
    deadline: u64,
    waker: &std::task::Waker,
    view: &mut lazy_deadline::core::deadline_set::OwnerView,
) -> bool {
    // The runtime layer's re-arm after a filing, as it ships.
    let (outcome, replaced, serviced) =
        set.file(generation, deadline, waker, Some(view), |locked| {
            set.rearm(locked, deadline)
        });
    drop(replaced);
    let serviced: Option<Serviced> = serviced.flatten();
    if let Some(serviced) = serviced {
        set.after_service(serviced);
    }
    match outcome {
        FileOutcome::Filed(..) => false,
        FileOutcome::Passed => true, // the set had seen it pass already
        FileOutcome::Void => panic!("the set is open"),
    }
}

/// The driver passes time `LATE` and fires the entry (armed at `LATE`) while the
/// owner files a request due at `EARLY`, which re-arms the entry under the lock:
/// both requests are woken, whichever way the fire reaches the service.
#[test]
fn a_fire_handed_to_the_holder_mid_call_expires_every_due_request() {
    loom::model(|| {
        let (driver, entry) = Driver::new();
        let set = Arc::new(SharedSet::new(entry));
        driver.wakes(&set);
        let (generation, mut view) = set
            .state()
            .with(|locked| (set.open(locked), locked.core.owner_view()));
        let (late_flag, late) = WakeFlag::new();
        assert!(!file_and_service(&set, generation, LATE, &late, &mut view));
        let fire = {
            let driver = driver.clone();
            thread::spawn(move || driver.turn(LATE))
        };
        let (early_flag, early) = WakeFlag::new();
        let early_passed = file_and_service(&set, generation, EARLY, &early, &mut view);
        fire.join().unwrap();
        assert!(
            late_flag.woken(),
            "the request due at the fire was never woken"
        );
        assert!(
            early_passed || early_flag.woken(),
            "the earlier request was never woken"
        );
        assert!(set.has_passed(LATE));
    });
}
