//! `RuntimeLife`: whether a tokio runtime has shut down, known without touching it,
//! and the deadline sets bound to it, closed when it goes.
//!
//! A runtime entry (a `tokio::time::Sleep`) belongs to the runtime it was made in.
//! Once that runtime has shut down, polling the entry panics (tokio's "being
//! shutdown") and its clock is nobody's truth any more. A queue built without a
//! runtime ([`DelayQueue`](crate::DelayQueue)) adopts the runtime of its first poll,
//! and must move to the runtime that polls it after that one is gone, as tokio-util's
//! queue does (it makes each new `Sleep` in the polling runtime).
//!
//! tokio has no public "has this runtime shut down?". It does drop every task when a
//! runtime shuts down, before it shuts its timer driver down, so each runtime gets
//! one sentinel task of ours that only waits; its drop marks the runtime gone and
//! closes the runtime's deadline sets (`deadline_set`): their waiting requests
//! are woken, and their entries, which hold the runtime's handle (its driver and
//! file descriptors), are dropped. The sentinel is spawned once per runtime, found
//! through a process-wide registry that a thread consults only when its own
//! one-entry cache misses (a thread's first timer in a runtime), so no path that runs
//! per operation touches the registry's lock.
//!
//! tokio documents that a runtime's id may be reused once the runtime is gone: the
//! registry forgets a runtime when its sentinel drops, so a later runtime with the
//! same id gets a record of its own, and a thread's cached record of the gone one
//! says "gone" and is never taken for it.
//!
//! The sentinel is visible as one idle task in the runtime's metrics.

use super::deadline_set::DeadlineSet;
use crate::core::deadline_set::OwnerView;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::runtime::Id;

/// The registry: one record per live runtime that has a sentinel.
static REGISTRY: Mutex<Option<HashMap<Id, Arc<Record>>>> = Mutex::new(None);

thread_local! {
    /// The last runtime this thread asked about, and its record.
    static LAST: RefCell<Option<(Id, Arc<Record>)>> = const { RefCell::new(None) };
}

/// A runtime's flag and the deadline sets bound to it.
#[derive(Debug)]
struct Record {
    gone: AtomicBool,
    sets: Mutex<Sets>,
}

/// A set and the generation it was bound to the runtime under.
pub(crate) type BoundSet = (&'static DeadlineSet, u64);

#[derive(Debug, Default)]
struct Sets {
    /// Every set bound to the runtime (some may have been rebound since: their
    /// generation tells).
    bound: Vec<BoundSet>,
    /// Sets of the runtime that no thread owns (their thread exited), for the next
    /// thread that needs one.
    orphans: Vec<BoundSet>,
}

/// Whether one runtime has shut down, and its sets.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeLife {
    record: Arc<Record>,
}

impl RuntimeLife {
    /// The life of the runtime `handle` belongs to (spawning its sentinel if it has
    /// none yet).
    pub fn of(handle: &tokio::runtime::Handle) -> Self {
        let id = handle.id();
        let cached = LAST
            .try_with(|last| match &*last.borrow() {
                Some((last_id, record)) if *last_id == id && !record.is_gone() => {
                    Some(record.clone())
                }
                _ => None,
            })
            .ok()
            .flatten();
        let record = cached.unwrap_or_else(|| {
            let record = registered(handle);
            // A thread whose locals are being destroyed just skips the cache.
            let _ = LAST.try_with(|last| *last.borrow_mut() = Some((id, record.clone())));
            record
        });
        Self { record }
    }

    /// Whether the runtime has shut down (its tasks were dropped).
    #[inline]
    pub fn is_gone(&self) -> bool {
        self.record.is_gone()
    }

    /// Records `set` as bound to the runtime, to be closed when it goes. `false`
    /// (nothing recorded) if it has gone already: the caller closes the set.
    fn add_set(&self, set: BoundSet) -> bool {
        let mut sets = self.record.lock_sets();
        // Under the record's lock, which the sentinel takes to mark the runtime gone:
        // either the set is in the list it closes, or this sees the mark.
        if self.is_gone() {
            return false;
        }
        sets.bound.push(set);
        true
    }

    /// A set of the runtime that no thread owns, taken out of the orphans (`adopt`),
    /// or left there for others to use as well (`!adopt`: a thread that cannot own
    /// one). `None` if there is none (or the runtime has gone).
    pub fn orphan(&self, adopt: bool) -> Option<BoundSet> {
        let mut sets = self.record.lock_sets();
        if self.is_gone() {
            return None;
        }
        // Sets rebound since they became orphans are not this runtime's any more.
        sets.orphans
            .retain(|&(set, generation)| set.is_open(generation));
        if adopt {
            sets.orphans.pop()
        } else {
            sets.orphans.last().copied()
        }
    }

    /// A set from the pool bound to this runtime (`runtime`, its id) and recorded
    /// here, held by the calling thread (`thread`: with its owner view) or by the
    /// orphans. `None` if the runtime has gone (the set goes back).
    ///
    /// # Panics
    ///
    /// tokio's own, in a runtime without the time driver (at the caller).
    #[track_caller]
    pub fn bind_set(&self, runtime: Id, thread: bool) -> Option<(BoundSet, Option<OwnerView>)> {
        let (set, generation, view) = DeadlineSet::bind(runtime, thread);
        self.record_binding((set, generation), thread)
            .then_some(((set, generation), view))
    }

    /// Records a new binding of `set` to this runtime, as an orphan unless a
    /// `thread` holds it. `false` if the runtime went meanwhile: the set is
    /// abandoned (nobody will hold the binding).
    pub(super) fn record_binding(&self, (set, generation): BoundSet, thread: bool) -> bool {
        if !self.add_set((set, generation)) {
            set.abandon(generation);
            return false;
        }
        if !thread {
            self.add_orphan((set, generation));
        }
        true
    }

    /// The thread that owned `set` lets go of it: the runtime's next thread that
    /// needs a set adopts it while the runtime lives; else it goes back to the pool.
    pub fn release_owned(&self, (set, generation): BoundSet, view: OwnerView) {
        if set.release_owner(generation, view) {
            self.add_orphan((set, generation));
        }
    }

    /// Leaves `set` to the next thread of the runtime that needs one (its thread
    /// exited, or could not own it).
    fn add_orphan(&self, set: BoundSet) {
        let mut sets = self.record.lock_sets();
        if !self.is_gone() {
            sets.orphans.push(set);
        }
    }
}

impl Record {
    #[inline]
    fn is_gone(&self) -> bool {
        // Relaxed: a hint outside the record's lock (which orders it with `add_set`);
        // a set bound to a gone runtime learns of it from its close, under the set's
        // lock, and its waiting requests from the close's wake.
        self.gone.load(Ordering::Relaxed)
    }

    fn lock_sets(&self) -> MutexGuard<'_, Sets> {
        self.sets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The runtime's record from the registry, or a new one with its sentinel spawned.
fn registered(handle: &tokio::runtime::Handle) -> Arc<Record> {
    let id = handle.id();
    let record = {
        let mut registry = REGISTRY
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let map = registry.get_or_insert_with(HashMap::new);
        if let Some(record) = map.get(&id) {
            return record.clone();
        }
        let record = Arc::new(Record {
            gone: AtomicBool::new(false),
            sets: Mutex::new(Sets::default()),
        });
        map.insert(id, record.clone());
        record
    };
    // Spawned outside the lock. A runtime already shutting down drops the task at
    // once, which marks it gone right away: the truth.
    let sentinel = Sentinel {
        id,
        record: record.clone(),
    };
    drop(handle.spawn(async move {
        let _sentinel = sentinel;
        std::future::pending::<()>().await;
    }));
    record
}

/// Marks its runtime gone, and closes its sets, when the runtime drops it.
struct Sentinel {
    id: Id,
    record: Arc<Record>,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let sets = {
            let mut sets = self.record.lock_sets();
            // Relaxed: under the record's lock (see `add_set`), the only ordering
            // that needs it.
            self.record.gone.store(true, Ordering::Relaxed);
            std::mem::take(&mut *sets)
        };
        {
            let mut registry = REGISTRY
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(map) = registry.as_mut() {
                // Only this runtime's record: a runtime that reused the id after this
                // one went has a record of its own.
                if map
                    .get(&self.id)
                    .is_some_and(|record| Arc::ptr_eq(record, &self.record))
                {
                    map.remove(&self.id);
                }
            }
        }
        // The runtime's tasks are being dropped and its driver is still up: close
        // each set now (waking its requests, dropping its entry), before tokio shuts
        // the driver down and fires every entry.
        // A user's waker whose drop panics (kept by an answered request's slot) must
        // not stop the close of the other sets: each closes, and the first panic
        // goes on after all of them.
        let mut panic = None;
        for (set, generation) in sets.bound {
            let closed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                set.close(generation);
            }));
            if let Err(payload) = closed {
                panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
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
            Arc::ptr_eq(&life.record, &again.record),
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
        assert!(Arc::ptr_eq(&life.record, &other.record));
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

    #[test]
    fn a_gone_record_is_never_served_from_the_cache() {
        // The thread's one-entry cache keeps the record of the last runtime it asked
        // about; once that runtime is gone, asking again about a runtime with the
        // same id (tokio may reuse ids) must not hand the gone record back.
        let rt = runtime();
        let life = RuntimeLife::of(rt.handle());
        let id = rt.handle().id();
        drop(rt);
        assert!(life.is_gone());
        let cached = LAST.with(|last| last.borrow().as_ref().map(|(i, r)| (*i, r.clone())));
        let (cached_id, record) = cached.expect("cached");
        assert_eq!(cached_id, id);
        assert!(record.is_gone(), "the cache says gone: a lookup misses");
    }
}
