//! `KeyHandle`: an `IdleQueue` key touched from other tasks and threads.

mod common;

use common::{ms, Rng};
use lazy_deadline::{IdleQueue, KeyHandle};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{sleep, Instant};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn handle_touches_keep_the_key_alive_and_count_at_its_check_time() {
    let mut queue = IdleQueue::new(ms(100));
    let busy = queue.insert("busy");
    let quiet = queue.insert("quiet");
    let handle = queue.handle(busy).unwrap();
    let start = Instant::now();
    let toucher = tokio::spawn(async move {
        for _ in 0..20 {
            sleep(ms(20)).await;
            assert!(handle.touch());
        }
    });
    let first = queue.expired().await;
    assert_eq!(first.into_inner(), "quiet");
    assert_eq!(start.elapsed(), ms(100));
    let second = queue.expired().await;
    assert_eq!(second.into_inner(), "busy");
    // Last touch at 400 ms, then 100 ms idle.
    assert_eq!(start.elapsed(), ms(500));
    toucher.await.unwrap();
    // One registration per check time, however many touches.
    assert!(queue.stats().registrations <= 8, "{:?}", queue.stats());
    let _ = quiet;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_and_last_activity_include_handle_touches() {
    let mut queue = IdleQueue::new(ms(100));
    let key = queue.insert(());
    let handle = queue.handle(key).unwrap();
    let later = Instant::now() + ms(30);
    assert!(handle.touch_at(later));
    assert!(
        handle.touch_at(later - ms(20)),
        "older: ignored, still live"
    );
    assert_eq!(queue.last_activity(key), Some(later));
    assert_eq!(queue.deadline(key), Some(later + ms(100)));
    assert!(handle.touch_at(Instant::now() + Duration::from_secs(1 << 40)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_handle_of_an_entry_that_left_returns_false_and_changes_nothing() {
    let mut queue = IdleQueue::new(ms(100));
    let old = queue.insert(1);
    let handle = queue.handle(old).unwrap();
    let same = queue.handle(old).unwrap();
    assert_eq!(queue.remove(old), Some(1));
    assert!(!handle.touch());
    assert!(!same.touch());
    let new = queue.insert(2); // reuses the slot
    let deadline = queue.deadline(new).unwrap();
    assert!(!handle.touch_at(Instant::now() + ms(500)));
    assert_eq!(
        queue.deadline(new),
        Some(deadline),
        "the new entry is untouched"
    );
    assert!(queue.handle(old).is_none(), "a stale key has no handle");
    // Expiry, clear and drop tell handles too.
    let expiring = queue.handle(new).unwrap();
    assert_eq!(queue.expired().await.into_inner(), 2);
    assert!(!expiring.touch());
    let cleared = queue.insert(3);
    let cleared = queue.handle(cleared).unwrap();
    queue.clear();
    assert!(!cleared.touch());
    let dropped = queue.insert(4);
    let dropped = queue.handle(dropped).unwrap();
    drop(queue);
    assert!(!dropped.touch());
}

#[test]
fn handles_are_send_sync_static_and_debug() {
    fn traits<T: Send + Sync + 'static + Clone + std::fmt::Debug>() {}
    traits::<KeyHandle>();
}

/// OS threads touch random keys through their handles while the owner drains in
/// real time: every key expires exactly once, and never before its last successful
/// touch plus its timeout. (Real threads and real time: what it checks is the race
/// between a touch and the owner's expiry claim.)
#[test]
fn hammering_handles_while_the_owner_drains() {
    const KEYS: usize = 2_000;
    const TIMEOUT: Duration = Duration::from_millis(20);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let (mut queue, handles) = rt.block_on(async {
        let mut queue = IdleQueue::with_capacity(TIMEOUT, KEYS);
        let handles: Vec<KeyHandle> = (0..KEYS)
            .map(|i| {
                let key = queue.insert(i);
                queue.handle(key).unwrap()
            })
            .collect();
        (queue, Arc::new(handles))
    });
    let base = std::time::Instant::now();
    let last_touch: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2u64)
        .map(|seed| {
            let (handles, last_touch, stop) = (handles.clone(), last_touch.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed + 1);
                let mut touches = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.below(KEYS as u64) as usize;
                    let at = std::time::Instant::now();
                    if handles[k].touch_at(Instant::from_std(at)) {
                        let nanos = at.duration_since(base).as_nanos() as u64;
                        last_touch[k].fetch_max(nanos, Ordering::Relaxed);
                    }
                    touches += 1;
                }
                touches
            })
        })
        .collect();
    let deadlines = rt.block_on(async {
        let mut seen = vec![None; KEYS];
        let stopper = {
            let stop = stop.clone();
            tokio::spawn(async move {
                sleep(ms(150)).await;
                stop.store(true, Ordering::Relaxed);
            })
        };
        for _ in 0..KEYS {
            let expired = queue.expired().await;
            let i = *expired.get_ref();
            assert!(seen[i].is_none(), "key {i} expired twice");
            assert!(Instant::now() >= expired.deadline(), "key {i} early");
            seen[i] = Some(expired.deadline());
        }
        stopper.await.unwrap();
        assert!(queue.is_empty());
        seen
    });
    let touches: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(touches > 0);
    for (i, deadline) in deadlines.into_iter().enumerate() {
        let deadline = deadline.expect("expired once");
        let last = last_touch[i].load(Ordering::Relaxed);
        if last > 0 {
            let touched = Instant::from_std(base + Duration::from_nanos(last));
            assert!(
                deadline >= touched + TIMEOUT,
                "key {i} expired at {:?} before its last touch + timeout",
                (touched + TIMEOUT) - deadline
            );
        }
    }
    // Every handle sees its entry gone.
    assert!(handles.iter().all(|h| !h.touch()));
}
