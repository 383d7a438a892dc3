//! Outside a runtime our constructors panic like tokio's, at the caller's location.
//! One test per binary: it installs a panic hook.

use std::panic;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

#[test]
fn constructors_panic_at_the_callers_location_outside_a_runtime() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    panic::set_hook(Box::new(move |info| {
        let file = info
            .location()
            .map(|l| l.file().to_owned())
            .unwrap_or_default();
        sink.lock().unwrap().push(file);
    }));
    let attempts: [fn(); 9] = [
        || drop(lazy_deadline::sleep(Duration::from_millis(1))),
        || drop(lazy_deadline::sleep_until(tokio::time::Instant::now())),
        || drop(lazy_deadline::IdleTimeout::new(Duration::from_millis(1))),
        || {
            lazy_deadline::timer_kinds! { enum K { A } }
            drop(lazy_deadline::SlotTimer::<K>::new())
        },
        || {
            drop(lazy_deadline::IdleQueue::<u8>::new(Duration::from_millis(
                1,
            )))
        },
        // The queues are built without a runtime; their first poll panics.
        || {
            let mut queue = lazy_deadline::DelayQueue::<u8>::new();
            let _ = queue.poll_expired(&mut Context::from_waker(Waker::noop()));
        },
        || {
            let mut map = lazy_deadline::DelayMap::<u8, u8>::new();
            let _ = map.poll_expired(&mut Context::from_waker(Waker::noop()));
        },
        || drop(lazy_deadline::timeout(Duration::from_millis(1), async {})),
        || {
            drop(lazy_deadline::timeout_at(
                tokio::time::Instant::now(),
                async {},
            ))
        },
    ];
    for attempt in attempts {
        assert!(panic::catch_unwind(attempt).is_err());
    }
    // A runtime without the time driver panics too.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(panic::catch_unwind(
        || rt.block_on(async { drop(lazy_deadline::sleep(Duration::from_millis(1))) })
    )
    .is_err());
    let _ = panic::take_hook();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 10);
    for file in seen.iter() {
        assert!(
            file.ends_with("outside_runtime.rs"),
            "panic reported at {file}"
        );
    }
}

#[test]
fn handles_work_without_a_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let handle = {
        let _inside = rt.enter();
        lazy_deadline::IdleTimeout::new(Duration::from_secs(1)).handle()
    };
    drop(rt);
    // No runtime at all now: touching reads the system clock and must not panic.
    handle.touch();
    handle.set_timeout(Duration::ZERO);
}
