//! `RuntimeLife`: whether a tokio runtime has shut down, known without touching it.
//!
//! A runtime entry (a `tokio::time::Sleep`) belongs to the runtime it was made in.
//! Once that runtime has shut down, polling the entry panics (tokio's "being
//! shutdown") and its clock is nobody's truth any more. A queue built without a
//! runtime ([`DelayQueue`](crate::DelayQueue)) adopts the runtime of its first poll,
//! and must move to the runtime that polls it after that one is gone, as tokio-util's
//! queue does (it makes each new `Sleep` in the polling runtime).
//!
//! tokio has no public "has this runtime shut down?". It does drop every task when a
//! runtime shuts down, so each runtime gets one sentinel task of ours that only
//! waits; its drop marks the runtime gone. The sentinel is spawned once per runtime,
//! found through a process-wide registry that a thread consults only when its own
//! one-entry cache misses (the first queue a thread homes in a runtime), so no path
//! that runs per operation touches the registry's lock.
//!
//! The sentinel is visible as one idle task in the runtime's metrics.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::runtime::Id;

/// The registry: one flag per live runtime that has a sentinel.
static REGISTRY: Mutex<Option<HashMap<Id, Arc<AtomicBool>>>> = Mutex::new(None);

thread_local! {
    /// The last runtime this thread asked about, and its flag.
    static LAST: RefCell<Option<(Id, Arc<AtomicBool>)>> = const { RefCell::new(None) };
}

/// Whether one runtime has shut down.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeLife {
    gone: Arc<AtomicBool>,
}

impl RuntimeLife {
    /// The life of the runtime `handle` belongs to (spawning its sentinel if it has
    /// none yet).
    pub fn of(handle: &tokio::runtime::Handle) -> Self {
        let id = handle.id();
        let cached = LAST.with(|last| match &*last.borrow() {
            Some((last_id, gone)) if *last_id == id => Some(gone.clone()),
            _ => None,
        });
        let gone = cached.unwrap_or_else(|| {
            let gone = registered(handle);
            LAST.with(|last| *last.borrow_mut() = Some((id, gone.clone())));
            gone
        });
        Self { gone }
    }

    /// Whether the runtime has shut down (its tasks were dropped).
    #[inline]
    pub fn is_gone(&self) -> bool {
        // Relaxed: a runtime drops its tasks (and this sentinel) before it shuts its
        // timer driver down and fires every entry; that fire reaches the owner
        // through its waker slot (a mutex) before the poll that reads this, so a poll
        // that sees the fire sees the store. No other data is published through it.
        self.gone.load(Ordering::Relaxed)
    }
}

/// The runtime's flag from the registry, or a new one with its sentinel spawned.
fn registered(handle: &tokio::runtime::Handle) -> Arc<AtomicBool> {
    let id = handle.id();
    let gone = {
        let mut registry = REGISTRY
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let map = registry.get_or_insert_with(HashMap::new);
        if let Some(gone) = map.get(&id) {
            return gone.clone();
        }
        let gone = Arc::new(AtomicBool::new(false));
        map.insert(id, gone.clone());
        gone
    };
    // Spawned outside the lock. A runtime already shutting down drops the task at
    // once, which marks it gone right away: the truth.
    let sentinel = Sentinel {
        id,
        gone: gone.clone(),
    };
    drop(handle.spawn(async move {
        let _sentinel = sentinel;
        std::future::pending::<()>().await;
    }));
    gone
}

/// Marks its runtime gone when the runtime drops it.
struct Sentinel {
    id: Id,
    gone: Arc<AtomicBool>,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        // Relaxed: see `is_gone`.
        self.gone.store(true, Ordering::Relaxed);
        let mut registry = REGISTRY
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(map) = registry.as_mut() {
            map.remove(&self.id);
        }
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn a_runtime_is_gone_once_dropped_and_its_registry_entry_with_it() {
        let rt = runtime();
        let life = RuntimeLife::of(rt.handle());
        let again = RuntimeLife::of(rt.handle());
        assert!(
            Arc::ptr_eq(&life.gone, &again.gone),
            "one sentinel per runtime"
        );
        rt.block_on(tokio::task::yield_now());
        assert!(!life.is_gone());
        let id = rt.handle().id();
        drop(rt);
        assert!(life.is_gone());
        let registry = REGISTRY.lock().unwrap();
        assert!(!registry.as_ref().unwrap().contains_key(&id));
    }

    #[test]
    fn another_thread_finds_the_same_sentinel() {
        let rt = runtime();
        let life = RuntimeLife::of(rt.handle());
        let handle = rt.handle().clone();
        let other = std::thread::spawn(move || RuntimeLife::of(&handle))
            .join()
            .unwrap();
        assert!(Arc::ptr_eq(&life.gone, &other.gone));
        drop(rt);
        assert!(other.is_gone());
    }

    #[test]
    fn a_runtime_that_never_ran_its_sentinel_is_still_seen_to_go() {
        let rt = runtime();
        let life = RuntimeLife::of(rt.handle());
        drop(rt);
        assert!(life.is_gone());
    }
}
