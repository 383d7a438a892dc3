//! `DeadlineSet`: the per-request deadlines of one thread for one runtime, behind one
//! tokio timer entry. What [`Timeout`](crate::Timeout) and [`Sleep`](crate::Sleep)
//! file their deadlines in, instead of registering a runtime timer entry each.
//!
//! Each thread owns one set per runtime it makes timers in (`crate::thread_sets`). A
//! timer is *bound* to a set when it is made ([`Bound`]: the thread's set for the
//! current runtime, whose clock judges it wherever it is polled) and files its
//! deadline there at its first pending poll (`core::shared_set`: the lock and a lane
//! append). Its later polls read the set's passed mark without the lock; answering it
//! on the owner thread is a load and a store. The entry moves when it fires (or a
//! deadline beats it), and that fire comes through the set's own waker from tokio's
//! driver, whichever thread turns it (`core::service`): a busy or blocked worker does
//! not delay its requests' deadlines.
//!
//! **Lifecycle.** Sets are never freed: a set whose runtime shut down and whose
//! filings are all gone goes back to a process-wide pool, holding nothing of the
//! runtime, and the next thread and runtime that need a set take it from there, under
//! a new generation. So a timer reaches its set through a plain `&'static` reference,
//! with no reference count to touch per request, and the memory kept is that of the
//! most sets ever in use at once. The entry's waker holds the set by that reference
//! and its generation, never by a count, so the entry (which keeps the last waker it
//! was polled with) keeps nothing alive. When the runtime shuts down, its sentinel
//! (`crate::runtime_life`) closes the set: its waiting requests are woken, and the
//! entry, which holds the runtime's handle (driver, file descriptors), is dropped. A
//! set whose thread exits while its runtime lives is left to the runtime's next thread
//! that needs one.

use crate::core::deadline_set::{Filed, OwnerView};
use crate::core::grid::find_boundary;
use crate::core::service::{wake_all, SetEntry};
use crate::core::shared_set::{FileOutcome, Locked, SharedSet};
use crate::runtime_life::RuntimeLife;
use crate::sync::WakerMemo;
use crate::thread_sets;
use crate::time_base::{from_nanos, now_nanos, TICK_NANOS};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use tokio::runtime::Id;

/// Sets no binding uses, for the next one.
static POOL: Mutex<Vec<&'static DeadlineSet>> = Mutex::new(Vec::new());

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DeadlineSet {
    shared: SharedSet<TokioEntry>,
}

/// Who holds a set besides its filings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// Nobody: back in the pool once its filings are gone and its runtime too.
    Nobody,
    /// A thread's list: that thread is its owner.
    Thread,
    /// Its runtime's orphans (its thread exited).
    Orphans,
}

/// The set's runtime entry and binding, under the set's lock.
#[derive(Debug)]
struct TokioEntry {
    /// Made in the binding's runtime; `None` outside a binding and once closed.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The waker the entry is polled with (by reference and generation: see the
    /// module docs).
    waker: Option<Waker>,
    runtime: Option<Id>,
    life: Option<RuntimeLife>,
    holder: Holder,
    /// A tick boundary of the runtime's timer driver (any one: they are a
    /// millisecond apart), learnt when the set was bound; `None` if it could not be.
    grid: Option<u64>,
    /// Whether the entry keeps its waker across a reset (learnt when the set was
    /// bound: see `probe_driver`).
    keeps_waker: bool,
    /// How often the entry was re-armed (tokio's driver lock each time), for tests.
    #[cfg(test)]
    resets: u64,
}

/// The entry's waker: the set's service, while the set is in the same binding.
struct SetWaker {
    set: &'static DeadlineSet,
    generation: u64,
}

impl Wake for SetWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.set.shared.is_open(self.generation) {
            self.set.shared.signal();
        }
    }
}

impl TokioEntry {
    /// Outside any binding: no entry, no runtime, held by nobody.
    fn unbound() -> Self {
        Self {
            sleep: None,
            waker: None,
            runtime: None,
            life: None,
            holder: Holder::Nobody,
            grid: None,
            keeps_waker: false,
            #[cfg(test)]
            resets: 0,
        }
    }
}

/// What a set learns of its runtime's timer driver when it is bound, through its own
/// entry `sleep` (made in that runtime): whether a reset keeps the waker the entry
/// was last polled with and wakes it from inside the reset when the new deadline has
/// passed (tokio's default driver does; the per-worker timer of `tokio_unstable`
/// makes a new entry per reset, which holds no waker until polled), and, if so, a
/// tick boundary of the driver (`core::grid`). Asked at run time, per runtime: a
/// build may pass `--cfg tokio_unstable` to tokio and not to this crate, and only a
/// multi-thread runtime built with `enable_alt_timer` has that timer.
///
/// The entry is left fired (off the wheel), so that a paused clock has nothing new
/// to jump to.
fn probe_driver(sleep: &mut Pin<Box<tokio::time::Sleep>>) -> (bool, Option<u64>) {
    /// Far enough that no driver fires it during the probe: only the reset can.
    const FAR: u64 = 3_600_000_000_000;
    let woken = Arc::new(WokenFlag::default());
    let waker = Waker::from(woken.clone());
    sleep
        .as_mut()
        .reset(from_nanos(now_nanos().saturating_add(FAR)));
    // Outside the task's budget: a poll with the budget spent registers nothing.
    let entry = std::pin::pin!(tokio::task::unconstrained(sleep.as_mut()));
    let _ = entry.poll(&mut Context::from_waker(&waker));
    sleep.as_mut().reset(from_nanos(0));
    // Relaxed: set on this thread, inside the reset, if at all.
    let keeps_waker = woken.0.load(std::sync::atomic::Ordering::Relaxed);
    if !keeps_waker {
        return (false, None);
    }
    let grid = find_boundary(now_nanos(), |at| {
        sleep.as_mut().reset(from_nanos(at));
        sleep.is_elapsed()
    });
    sleep.as_mut().reset(from_nanos(0)); // leave the entry fired: off the wheel
    (true, grid)
}

/// A waker that records whether it was woken.
#[derive(Default)]
struct WokenFlag(std::sync::atomic::AtomicBool);

impl Wake for WokenFlag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Relaxed: read on the thread that woke it (see `probe_driver`).
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl SetEntry for TokioEntry {
    fn poll_fired(&mut self) -> bool {
        let (Some(sleep), Some(waker)) = (self.sleep.as_mut(), self.waker.as_ref()) else {
            return false;
        };
        // Outside the polling task's budget: when it is spent, tokio's poll neither
        // registers nor reports the fire.
        let entry = std::pin::pin!(tokio::task::unconstrained(sleep.as_mut()));
        entry.poll(&mut Context::from_waker(waker)).is_ready()
    }

    fn reset(&mut self, at: u64) {
        #[cfg(test)]
        {
            self.resets += 1;
        }
        if let Some(sleep) = self.sleep.as_mut() {
            sleep.as_mut().reset(from_nanos(at));
        }
    }

    fn home_now(&mut self) -> Option<u64> {
        // A cancel from a plain thread or another runtime services the set too, and
        // must not read its own clock as the set's.
        let runtime = self.runtime?;
        (!crate::entry::polled_away_from(runtime)).then(now_nanos)
    }

    fn keeps_waker_across_reset(&self) -> bool {
        // Learnt at binding (`probe_driver`): tokio's default driver re-registers
        // the entry in place, waker kept; its per-worker timer makes a new entry, and
        // the set polls it after each re-arm there.
        self.keeps_waker
    }

    fn tick_end(&self, at: u64) -> Option<u64> {
        let offset = self.grid?;
        // The first boundary at or after `at`: boundaries are `offset` plus whole
        // ticks. Saturates (a saturated deadline has no tick).
        let rem = (at % TICK_NANOS + TICK_NANOS - offset) % TICK_NANOS;
        Some(if rem == 0 {
            at
        } else {
            at.saturating_add(TICK_NANOS - rem)
        })
    }
}

impl DeadlineSet {
    fn new() -> Self {
        Self {
            shared: SharedSet::new(TokioEntry::unbound()),
        }
    }

    /// Whether the set is in binding `generation` and its runtime has not shut down.
    #[inline]
    pub fn is_open(&self, generation: u64) -> bool {
        self.shared.is_open(generation)
    }

    /// A set for the current runtime (`handle`'s) from the pool, bound to it and held
    /// by `holder` (a thread's list, or the orphans), with an owner view when that is
    /// a thread. `None` when the runtime has gone (the set goes back).
    ///
    /// # Panics
    ///
    /// tokio's own, in a runtime without the time driver (at the caller).
    #[track_caller]
    pub fn bind(
        life: &RuntimeLife,
        runtime: Id,
        thread: bool,
    ) -> Option<(&'static Self, u64, Option<OwnerView>)> {
        // The entry first, in this runtime: a missing time driver panics here, with
        // tokio's message, before anything is taken from the pool.
        let mut sleep = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
        let (keeps_waker, grid) = probe_driver(&mut sleep);
        let set = POOL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop()
            .unwrap_or_else(|| Box::leak(Box::new(Self::new())));
        let entry = TokioEntry {
            sleep: Some(sleep),
            waker: None,
            runtime: Some(runtime),
            life: Some(life.clone()),
            holder: if thread {
                Holder::Thread
            } else {
                Holder::Orphans
            },
            grid,
            keeps_waker,
            #[cfg(test)]
            resets: 0,
        };
        set.bind_as(entry, life, thread)
    }

    /// [`bind`](Self::bind) once the set is out of the pool: a new binding with
    /// `entry`, recorded in the runtime's `life`.
    fn bind_as(
        &'static self,
        mut entry: TokioEntry,
        life: &RuntimeLife,
        thread: bool,
    ) -> Option<(&'static Self, u64, Option<OwnerView>)> {
        let set = self;
        let (generation, view, unbound) = set.shared.state().with(|locked| {
            let generation = set.shared.open(locked);
            entry.waker = Some(Waker::from(Arc::new(SetWaker { set, generation })));
            let unbound = std::mem::replace(&mut locked.extra, entry);
            (
                generation,
                thread.then(|| locked.core.owner_view()),
                unbound,
            )
        });
        drop(unbound); // after the lock (it holds nothing; a rule without exceptions)
        if !life.add_set((set, generation)) {
            // The runtime went meanwhile: nobody will hold this binding.
            set.shared
                .state()
                .with(|locked| locked.extra.holder = Holder::Nobody);
            set.close(generation);
            return None;
        }
        if !thread {
            life.add_orphan((set, generation));
        }
        Some((set, generation, view))
    }

    /// A thread adopts an orphan of binding `generation`: `None` if it was closed
    /// meanwhile.
    pub fn adopt(&'static self, generation: u64) -> Option<OwnerView> {
        self.shared.state().with(|locked| {
            (self.is_open(generation) && locked.extra.holder == Holder::Orphans).then(|| {
                locked.extra.holder = Holder::Thread;
                locked.core.owner_view()
            })
        })
    }

    /// The runtime of binding `generation` shut down: wake its waiting requests and
    /// drop its entry (and with it the runtime's handle). Back to the pool if nothing
    /// holds the set any more.
    pub fn close(&'static self, generation: u64) {
        let (mut wake, mut kept) = (Vec::new(), Vec::new());
        let (entry, waker, idle) = self.shared.state().with(|locked| {
            if !self.is_open(generation) {
                return (None, None, false);
            }
            self.shared.close(locked, &mut wake, &mut kept);
            let idle = locked.extra.holder != Holder::Thread && locked.core.filings() == 0;
            (locked.extra.sleep.take(), locked.extra.waker.take(), idle)
        });
        // After the lock: tokio's entry takes its driver's lock to go, and a waker's
        // drop may run any code.
        drop(entry);
        drop(waker);
        drop(kept);
        wake_all(wake);
        if idle {
            self.retire(generation);
        }
    }

    /// The thread that owned binding `generation` lets go of it (it exited, or found
    /// the runtime gone): gives back what it answered, and leaves the set to its
    /// runtime's next thread, or to the pool once its runtime and filings are gone.
    pub fn release_owner(&'static self, generation: u64, mut view: OwnerView) {
        let (life, retire) = self.shared.state().with(|locked| {
            if self.shared.generation() != generation {
                return (None, false);
            }
            locked.core.reclaim(&mut view);
            if locked.extra.holder == Holder::Thread {
                locked.extra.holder = Holder::Nobody;
            }
            if self.is_open(generation) {
                locked.extra.holder = Holder::Orphans;
                (locked.extra.life.clone(), false)
            } else {
                (None, locked.core.filings() == 0)
            }
        });
        if let Some(life) = life {
            life.add_orphan((self, generation));
        } else if retire {
            self.retire(generation);
        }
    }

    /// A filing of binding `generation` went: back to the pool if it was the last
    /// thing holding a closed set.
    fn release(&'static self, generation: u64) {
        let retire = self.shared.state().with(|locked| {
            self.shared.generation() == generation
                && self.shared.is_closed()
                && locked.extra.holder != Holder::Thread
                && locked.core.filings() == 0
        });
        if retire {
            self.retire(generation);
        }
    }

    /// Back to the pool (closed, no filing, no owner): empty, holding nothing.
    fn retire(&'static self, generation: u64) {
        let (wakers, extra) = self.shared.state().with(|locked| {
            if self.shared.generation() != generation
                || !self.shared.is_closed()
                || locked.extra.holder == Holder::Thread
                || locked.core.filings() != 0
            {
                return (Vec::new(), None);
            }
            self.shared.retire(locked);
            let extra = std::mem::replace(&mut locked.extra, TokioEntry::unbound());
            (locked.core.clear(), Some(extra))
        });
        // Kept wakers and the binding's leftovers go after the lock.
        drop(wakers);
        if extra.is_some() {
            drop(extra);
            POOL.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(self);
        }
    }

    /// Bytes the set's collections hold, for the memory tests.
    #[cfg(all(test, not(lazy_deadline_loom)))]
    pub fn heap_bytes(&self) -> usize {
        self.shared.state().with(|locked| locked.core.heap_bytes())
    }

    /// How often the set's entry was re-armed so far, for tests.
    #[cfg(all(test, not(lazy_deadline_loom)))]
    pub fn entry_resets(&self) -> u64 {
        self.shared.state().with(|locked| locked.extra.resets)
    }
}

/// A timer's set: the thread's set for the runtime current where the timer was
/// made, and that binding's generation. Copied into each timer; plain data.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bound {
    /// `None`: the runtime had already gone when the timer was made.
    set: Option<&'static DeadlineSet>,
    generation: u64,
    runtime: Id,
}

/// What filing a deadline came to.
pub(crate) enum FileResult {
    /// Filed; its later polls go through the filing.
    Filed(Filing),
    /// The deadline has passed by the set's clock already.
    Passed,
    /// The set's runtime has gone (see [`Bound::is_void`]).
    Void,
}

/// A request's deadline filed in a set.
#[derive(Debug)]
pub(crate) struct Filing {
    set: &'static DeadlineSet,
    generation: u64,
    /// `None` once given back (by a refile that filed nothing).
    filed: Option<Filed>,
    /// Which waker the slot holds, so an unchanged waker skips the lock.
    memo: WakerMemo,
}

impl Bound {
    /// The current thread's set for the current runtime (made on first use).
    ///
    /// # Panics
    ///
    /// tokio's own panic outside a runtime, or in one without the time driver.
    #[track_caller]
    #[inline]
    pub fn current() -> Self {
        thread_sets::current()
    }

    pub(crate) fn new(set: Option<&'static DeadlineSet>, generation: u64, runtime: Id) -> Self {
        Self {
            set,
            generation,
            runtime,
        }
    }

    /// The runtime the timer belongs to.
    pub fn runtime(&self) -> Id {
        self.runtime
    }

    /// Whether it is `set` in binding `generation`.
    pub fn is_of(&self, set: &'static DeadlineSet, generation: u64) -> bool {
        self.set.is_some_and(|own| std::ptr::eq(own, set)) && self.generation == generation
    }

    /// Files `deadline` for the task of `waker`: in an owner slot on the set's own
    /// thread, else in a remote slot. A deadline earlier than the set's entry moves
    /// it, through a service that also expires what has passed, this one included.
    pub fn file(&self, deadline: u64, waker: &Waker) -> FileResult {
        let Some(set) = self.set else {
            return FileResult::Void;
        };
        let generation = self.generation;
        let (outcome, replaced, serviced) = thread_sets::with_view(set, generation, |view| {
            set.shared
                .file(generation, deadline, waker, view, |locked| {
                    rearm(set, locked, deadline)
                })
        });
        drop(replaced); // after the lock: a waker's drop may reach this set
        if let Some(serviced) = serviced.flatten() {
            set.shared.after_service(serviced);
        }
        FileResult::of(set, generation, outcome, deadline)
    }
}

impl FileResult {
    /// What a filing at `deadline` came to. A deadline that the filing's own service
    /// (it beat the entry) found passed is reported passed at once, so that a timer
    /// due already completes in this poll rather than at its task's next turn.
    fn of(set: &'static DeadlineSet, generation: u64, outcome: FileOutcome, deadline: u64) -> Self {
        match outcome {
            FileOutcome::Filed(filed, memo) => {
                let filing = Filing {
                    set,
                    generation,
                    filed: Some(filed),
                    memo,
                };
                if filing.has_passed(deadline) {
                    return FileResult::Passed; // the filing is given back as it drops
                }
                FileResult::Filed(filing)
            }
            FileOutcome::Passed => FileResult::Passed,
            FileOutcome::Void => FileResult::Void,
        }
    }
}

/// Under the lock, after a filing at `deadline`: a deadline earlier than the entry
/// services the set now (re-arming it); a later one is covered by the armed entry.
fn rearm(
    set: &DeadlineSet,
    locked: &mut Locked<TokioEntry>,
    deadline: u64,
) -> Option<crate::core::service::Serviced> {
    set.shared.rearm(locked, deadline)
}

impl Filing {
    /// Whether the filed deadline has passed; registers `waker` if it changed (or,
    /// if its runtime shut down meanwhile, wakes it so that its poll sees that).
    #[inline]
    pub fn poll_passed(&mut self, deadline: u64, waker: &Waker) -> bool {
        match self.filed {
            Some(filed) => {
                self.set
                    .shared
                    .poll_passed(self.generation, filed, deadline, &mut self.memo, waker)
            }
            None => false,
        }
    }

    /// Whether the filed deadline has passed, as far as the set has seen (no waker
    /// registration).
    #[inline]
    pub fn has_passed(&self, deadline: u64) -> bool {
        self.set.shared.has_passed(deadline)
    }

    /// Whether the set's runtime shut down: the filing is void.
    #[inline]
    pub fn is_void(&self) -> bool {
        !self.set.is_open(self.generation)
    }

    /// Moves the filing to `deadline` under one lock, with `waker` or else the waker
    /// the slot holds (consumed: the old filing is given back in every case).
    /// `None` when neither waker is there (the filing expired and no waker was
    /// given): nothing is filed then.
    pub fn refile(mut self, deadline: u64, waker: Option<&Waker>) -> Option<FileResult> {
        let (set, generation) = (self.set, self.generation);
        let previous = self.filed.take().expect("a filing is refiled once");
        let (outcome, drop_later, serviced) = thread_sets::with_view(set, generation, |view| {
            set.shared
                .refile(generation, previous, deadline, waker, view, |locked| {
                    rearm(set, locked, deadline)
                })
        });
        drop(drop_later); // after the lock
        if let Some(serviced) = serviced.flatten() {
            set.shared.after_service(serviced);
        }
        drop(self); // given back already: only a closed set's release, if last
        Some(FileResult::of(set, generation, outcome?, deadline))
    }
}

impl Drop for Filing {
    /// Answered, elapsed or dropped: give the slot back.
    fn drop(&mut self) {
        let (set, generation) = (self.set, self.generation);
        if let Some(filed) = self.filed {
            let waker =
                thread_sets::with_view(set, generation, |view| set.shared.cancel(filed, view));
            drop(waker); // after the lock and the thread's list: it may run any code
        }
        if !set.is_open(generation) {
            // Its runtime has gone: the set goes back to the pool with its last filing.
            set.release(generation);
        }
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
impl Bound {
    /// The set, for tests.
    pub(crate) fn set(&self) -> Option<&'static DeadlineSet> {
        self.set
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests;
