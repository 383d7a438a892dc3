//! loom model of a keyed queue's "does this insert need a wake?" decision
//! (`EntrySignal::filing_needs_wake`) against the runtime entry firing on another
//! thread, with the consumer and the inserter on threads of their own, ordered only
//! by the lock the user holds around the queue (tokio-util's pattern: a task that
//! treats `Ready(None)` as "wait for an insert to wake me").
#![cfg(lazy_deadline_loom)]

mod support;

use lazy_deadline::core::signal::EntrySignal;
use lazy_deadline::sync::WakerMemo;
use loom::sync::{Arc, Mutex};
use loom::thread;
use support::WakeFlag;

/// The entry is armed at 10 and fires on the driver's thread; the consumer polls
/// the empty queue (registers, finds nothing: `Ready(None)` never looks at the
/// entry); the inserter files a deadline at 10, which the armed entry would cover if
/// it had not fired. Whatever the order, the consumer sees the entry in its poll or
/// is woken after it: the fire's wake, if the consumer had registered by then, else
/// the insert's, which must see the flag the fire raised.
#[test]
fn an_insert_after_the_entry_fired_wakes_a_consumer_that_found_the_queue_empty() {
    loom::model(|| {
        let signal = Arc::new(EntrySignal::new());
        let queue = Arc::new(Mutex::new(false)); // holds an entry?
        let (flag, waker) = WakeFlag::new();
        let driver = {
            let signal = signal.clone();
            thread::spawn(move || signal.entry_fired())
        };
        let consumer = {
            let (signal, queue) = (signal.clone(), queue.clone());
            thread::spawn(move || {
                let queue = queue.lock().unwrap();
                signal.register(&waker, &mut WakerMemo::default());
                *queue // saw the entry in this poll
            })
        };
        {
            let mut queue = queue.lock().unwrap();
            *queue = true;
            if signal.filing_needs_wake(10, 10) {
                signal.wake();
            }
        }
        driver.join().unwrap();
        let saw_it = consumer.join().unwrap();
        assert!(
            saw_it || flag.woken(),
            "the consumer found the queue empty and was never woken"
        );
    });
}

/// The entry armed no later than the deadline and not fired: no wake is needed
/// (its fire will come), and none is spent.
#[test]
fn an_insert_behind_a_live_entry_costs_no_wake() {
    loom::model(|| {
        let signal = EntrySignal::new();
        assert!(!signal.filing_needs_wake(10, 10));
        assert!(!signal.filing_needs_wake(11, 10));
        assert!(signal.filing_needs_wake(9, 10), "earlier than the entry");
        signal.entry_fired();
        assert!(signal.filing_needs_wake(11, 10), "the entry fired");
    });
}
