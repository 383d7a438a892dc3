//! `DeadlineSet`: the per-request deadlines of one thread for one runtime, behind one
//! tokio timer entry (the lifecycle rules are the module's: `request_sets`).
//!
//! A timer files its deadline in its set at its first pending poll
//! (`core::shared_set`: the lock and a lane append). Its later polls read the set's
//! passed mark without the lock; answering it on the owner thread is a load and a
//! store. The entry moves when it fires (or a deadline beats it), and that fire comes
//! through the set's own waker from tokio's driver, whichever thread turns it
//! (`core::service`): a busy or blocked worker does not delay its requests'
//! deadlines. (On tokio's per-worker timer, and on a multi-thread runtime until the
//! set has learnt its driver, the wake schedules a task of the runtime that
//! services the set instead: see `service_task`.) The entry's waker holds the
//! set by its `&'static` reference and its generation, never by a count, so the
//! entry (which keeps the last waker it was polled with) keeps nothing alive.

use super::service_task;
use crate::core::deadline_set::OwnerView;
use crate::core::grid::{find_boundary, tick_end};
use crate::core::service::{wake_all, SetEntry};
use crate::core::shared_set::{Locked, SharedSet};
use crate::time_base::{from_nanos, now_nanos};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use tokio::runtime::{Id, RuntimeFlavor};

/// Sets no binding uses, for the next one.
static POOL: Mutex<Vec<&'static DeadlineSet>> = Mutex::new(Vec::new());

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DeadlineSet {
    /// The set's state (a `Request` files, moves and answers through it).
    pub(super) shared: SharedSet<TokioEntry>,
    /// The entry's `grid`, readable without the lock (`NO_GRID`: unknown, as it is
    /// until the entry's first re-arm from its runtime), for a timer that decides
    /// whether a move stays within its filing's tick.
    grid: AtomicU64,
    /// The entry's `keeps_waker`, readable without the lock, for a timer that leaves
    /// the set for an entry of its own on the same driver.
    keeps_waker: AtomicBool,
}

/// `DeadlineSet::grid` when the set does not know its runtime's ticks.
const NO_GRID: u64 = u64::MAX;

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
pub(super) struct TokioEntry {
    /// Made in the binding's runtime; `None` outside a binding and once closed.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The waker the entry is polled with (by reference and generation: see the
    /// module docs).
    waker: Option<Waker>,
    runtime: Option<Id>,
    holder: Holder,
    /// A tick boundary of the runtime's timer driver (any one: they are a
    /// millisecond apart), once learnt (see `learn_driver`); `None` until then, or
    /// if it could not be.
    grid: Option<u64>,
    /// Whether the entry keeps its waker across a reset (see `probe_driver`);
    /// `false` until learnt, which costs a poll per re-arm, never a fire.
    keeps_waker: bool,
    /// Whether `grid` and `keeps_waker` were learnt in this binding.
    probed: bool,
    /// Whether its runtime may have tokio's per-worker timer: a multi-thread one (a
    /// current-thread runtime always has tokio's default driver).
    multi_thread: bool,
    /// The set, whose lock-free copies of `grid` and `keeps_waker` the probe fills.
    set: Option<&'static DeadlineSet>,
    /// How often the entry was re-armed (tokio's driver lock each time), for tests.
    #[cfg(test)]
    resets: u64,
    /// Whether the entry's waker schedules a service task (`fit_waker`), for tests.
    #[cfg(test)]
    deferring: bool,
    /// Service rounds run (each reads the home clock once), for tests.
    #[cfg(test)]
    service_rounds: u64,
}

/// The entry's waker on tokio's default driver (a current-thread runtime's, or
/// learnt): the set's service, while the set is in the same binding. Otherwise the
/// entry's waker is `service_task::DeferringWaker` (see `fit_waker`); the default
/// driver's wake has no choice to make.
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
            holder: Holder::Nobody,
            grid: None,
            keeps_waker: false,
            probed: false,
            multi_thread: false,
            set: None,
            #[cfg(test)]
            resets: 0,
            #[cfg(test)]
            deferring: false,
            #[cfg(test)]
            service_rounds: 0,
        }
    }

    /// Learns the driver (`probe_driver`) before the entry's first re-arm in its
    /// binding, and only from its runtime's context (whose clock the probe reads):
    /// not when the set is bound, because a set is bound by a thread's first timer
    /// where it is *made*, and making a timer must register nothing with the driver,
    /// as tokio's does not (a timer made in a task's `Drop` while the runtime shuts
    /// down would get the driver's shutdown panic, or the per-worker timer's). A
    /// re-arm comes from a pending poll, where tokio's own timer registers too.
    /// Until learnt, the set and its timers take the conservative path (a poll
    /// after each re-arm; a move where a shared tick would have spared it).
    fn learn_driver(&mut self) {
        let (Some(sleep), Some(runtime), Some(set)) = (self.sleep.as_mut(), self.runtime, self.set)
        else {
            return;
        };
        if crate::entry::polled_away_from(runtime) {
            return; // at the first re-arm at home
        }
        self.probed = true;
        let (keeps_waker, grid) = probe_driver(sleep);
        self.keeps_waker = keeps_waker;
        self.grid = grid;
        // Relaxed: see `DeadlineSet::tick_end`.
        set.grid.store(grid.unwrap_or(NO_GRID), Ordering::Relaxed);
        set.keeps_waker.store(keeps_waker, Ordering::Relaxed);
        if keeps_waker && self.multi_thread {
            // tokio's default driver on a multi-thread runtime: the in-wake service
            // from now on. On its per-worker timer there is nothing to change (the
            // entry has had the deferring waker since its binding), nor on a
            // current-thread runtime (the in-wake one since its binding).
            self.fit_waker(set, set.shared.generation());
        }
    }

    /// Gives the entry the waker for what is known of its driver, in binding
    /// `generation` of `set`. On tokio's default driver (a current-thread runtime's,
    /// or learnt): the set's service inside the wake (that driver wakes entries from
    /// its park, and shuts down after the runtime's end closed the set; a
    /// current-thread runtime may run no task after the wake). On a multi-thread
    /// runtime until its driver is learnt, and on tokio's per-worker timer: a wake
    /// only schedules a task that services the set (`service_task`), because a set
    /// whose timers are polled away from home may learn nothing for long, and on that
    /// timer a service inside the wake re-arms the entry there, which panics inside
    /// tokio's shutdown. The entry is polled with the new waker after the re-arm
    /// that learns the driver (the probe leaves it fired). The waker it replaces runs
    /// no code when dropped (under the lock).
    fn fit_waker(&mut self, set: &'static DeadlineSet, generation: u64) {
        let deferring = match self.runtime {
            Some(runtime) if !self.keeps_waker && self.multi_thread => Some(runtime),
            _ => None,
        };
        #[cfg(test)]
        {
            self.deferring = deferring.is_some();
        }
        let waker = match deferring {
            Some(runtime) => service_task::waker(set, generation, runtime),
            None => Waker::from(Arc::new(SetWaker { set, generation })),
        };
        self.waker = Some(waker);
    }
}

/// What a set learns of its runtime's timer driver at its entry's first re-arm from
/// that runtime's context (`TokioEntry::learn_driver`), through its own
/// entry `sleep` (made in that runtime): whether a reset keeps the waker the entry
/// was last polled with and wakes it from inside the reset when the new deadline has
/// passed (tokio's default driver does; the per-worker timer of `tokio_unstable`
/// makes a new entry per reset, which holds no waker until polled), and, if so, a
/// tick boundary of the driver (`core::grid`). Asked at run time, per runtime: a
/// build may pass `--cfg tokio_unstable` to tokio and not to this crate, and only a
/// multi-thread runtime built with `enable_alt_timer` has that timer.
///
/// The entry is left fired (off the wheel), so that the driver has nothing of the
/// probe to wake for.
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
        let fired = entry.poll(&mut Context::from_waker(waker)).is_ready();
        if fired && !self.keeps_waker {
            // tokio fires an entry at or after its deadline (its tick is the first
            // at or after it), except when its per-worker timer shuts down a worker:
            // that wakes every entry first, before the runtime drops its tasks (and
            // the sentinel closes this set, waking its requests). The set's service
            // runs in a task there (`service_task`), which is dropped unpolled, but
            // a worker may still poll tasks in the turn it learns of the shutdown,
            // and a re-arm then (a new entry on a driver that is down) panics. So
            // an early fire, read at home (by the clock the driver fires by), is no
            // fire: nothing expires, nothing re-arms. (tokio's default driver keeps
            // the waker; it shuts down after the sentinel closed the set.)
            let home = self
                .runtime
                .is_some_and(|runtime| !crate::entry::polled_away_from(runtime));
            if home && tokio::time::Instant::now() < sleep.deadline() {
                return false;
            }
        }
        fired
    }

    fn reset(&mut self, at: u64) {
        #[cfg(test)]
        {
            self.resets += 1;
        }
        if self.keeps_waker {
            // tokio's default driver: its reset never panics (on a driver that shut
            // down, it fires the entry with tokio's shutdown error).
            if let Some(sleep) = self.sleep.as_mut() {
                sleep.as_mut().reset(from_nanos(at));
            }
            return;
        }
        // Not learnt yet, or tokio's per-worker timer, whose reset makes a new entry
        // and panics once the worker shut down ("being shutdown"). Learnt, the set
        // is serviced in a task there (`service_task`), so no re-arm runs inside
        // tokio's shutdown (which wakes every entry; an unlearnt set of a
        // multi-thread runtime is serviced in a task too); but a task polled in the
        // turn a worker learns of the shutdown may re-arm on a driver that is down,
        // as tokio's own timer registered in such a task panics. That panic must
        // not come out of tokio's shutdown (it aborts the process) nor fail a
        // user's task: the entry goes, and the runtime's end, which follows, closes
        // the set and wakes its requests. A panic hook still sees the panic.
        let reset = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if !self.probed {
                // Before the re-arm: the probe leaves the entry fired, and the
                // caller polls after a re-arm while `keeps_waker` is unknown (the
                // set's waker is registered again there).
                self.learn_driver();
            }
            if let Some(sleep) = self.sleep.as_mut() {
                sleep.as_mut().reset(from_nanos(at));
            }
        }));
        if reset.is_err() {
            self.sleep = None; // nothing fires any more: the close wakes the requests
        }
    }

    fn home_now(&mut self) -> Option<u64> {
        #[cfg(test)]
        {
            self.service_rounds += 1;
        }
        // A cancel from a plain thread or another runtime services the set too, and
        // must not read its own clock as the set's.
        let runtime = self.runtime?;
        (!crate::entry::polled_away_from(runtime)).then(now_nanos)
    }

    fn keeps_waker_across_reset(&self) -> bool {
        // Learnt at the first re-arm (`probe_driver`; `false` until then): tokio's
        // default driver re-registers
        // the entry in place, waker kept; its per-worker timer makes a new entry, and
        // the set polls it after each re-arm there.
        self.keeps_waker
    }

    fn tick_end(&self, at: u64) -> Option<u64> {
        Some(tick_end(self.grid?, at))
    }
}

impl DeadlineSet {
    fn new() -> Self {
        Self {
            shared: SharedSet::new(TokioEntry::unbound()),
            grid: AtomicU64::new(NO_GRID),
            keeps_waker: AtomicBool::new(false),
        }
    }

    /// Whether its runtime's driver keeps an entry's waker across a reset (learnt at
    /// the entry's first re-arm; `false` until then). Lock-free, as
    /// [`tick_end`](Self::tick_end).
    pub fn keeps_waker(&self) -> bool {
        // Relaxed: see `tick_end`.
        self.keeps_waker.load(Ordering::Relaxed)
    }

    /// The end of the driver tick that holds `at`, if the set knows its runtime's
    /// ticks. Lock-free: a hint of the current binding (a timer of a gone binding is
    /// void, and nothing of its deadline matters any more).
    #[inline]
    pub fn tick_end(&self, at: u64) -> Option<u64> {
        // Relaxed: written under the lock, at binding ("unknown", before any filing
        // of the binding reads it: a timer reads it after its own filing, which took
        // that lock or ran on the owner thread, so never a previous binding's value)
        // and at the entry's first re-arm (learnt). A reader that misses the second
        // store reads "unknown", which costs a move, never a fire: both values are
        // true of the binding.
        let offset = self.grid.load(Ordering::Relaxed);
        (offset != NO_GRID).then(|| tick_end(offset, at))
    }

    /// Whether the set is in binding `generation` and its runtime has not shut down.
    #[inline]
    pub fn is_open(&self, generation: u64) -> bool {
        self.shared.is_open(generation)
    }

    /// A set from the pool, bound to the current runtime (`runtime`) and held by a
    /// thread's list (`thread`, with that thread's owner view) or by the runtime's
    /// orphans. The caller records the binding in the runtime's life
    /// (`RuntimeLife::bind_set`), and [`abandon`](Self::abandon)s it if the runtime
    /// went meanwhile.
    ///
    /// # Panics
    ///
    /// tokio's own, in a runtime without the time driver (at the caller).
    #[track_caller]
    pub fn bind(runtime: Id, thread: bool) -> (&'static Self, u64, Option<OwnerView>) {
        // The entry first, in this runtime: a missing time driver panics here, with
        // tokio's message, before anything is taken from the pool. Only made: the
        // driver is learnt at its first re-arm (`TokioEntry::learn_driver`).
        let sleep = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
        let set = POOL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop()
            .unwrap_or_else(|| Box::leak(Box::new(Self::new())));
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() != RuntimeFlavor::CurrentThread);
        let entry = TokioEntry {
            sleep: Some(sleep),
            runtime: Some(runtime),
            multi_thread,
            holder: if thread {
                Holder::Thread
            } else {
                Holder::Orphans
            },
            ..TokioEntry::unbound()
        };
        set.bind_as(entry, thread)
    }

    /// [`bind`](Self::bind) once the set is out of the pool: a new binding with
    /// `entry`.
    fn bind_as(
        &'static self,
        mut entry: TokioEntry,
        thread: bool,
    ) -> (&'static Self, u64, Option<OwnerView>) {
        let set = self;
        let (generation, view, unbound) = set.shared.state().with(|locked| {
            let generation = set.shared.open(locked);
            // Relaxed: see `tick_end`.
            set.grid
                .store(entry.grid.unwrap_or(NO_GRID), Ordering::Relaxed);
            set.keeps_waker.store(entry.keeps_waker, Ordering::Relaxed);
            entry.fit_waker(set, generation);
            entry.set = Some(set);
            let unbound = std::mem::replace(&mut locked.extra, entry);
            (
                generation,
                thread.then(|| locked.core.owner_view()),
                unbound,
            )
        });
        drop(unbound); // after the lock (it holds nothing; a rule without exceptions)
        (set, generation, view)
    }

    /// Binding `generation`'s runtime went before the binding was recorded in its
    /// life: nobody will hold it, so it closes (and goes back to the pool).
    pub fn abandon(&'static self, generation: u64) {
        self.shared.state().with(|locked| {
            if self.shared.generation() == generation {
                locked.extra.holder = Holder::Nobody;
            }
        });
        self.close(generation);
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
        wake_all(wake);
        if idle {
            self.retire(generation);
        }
        // Last: a kept waker is a user's, and its drop may panic; the set is closed
        // and its waiters woken by then.
        drop(kept);
    }

    /// The thread that owned binding `generation` lets go of it (it exited, or found
    /// the runtime gone): gives back what it answered. `true`: the runtime lives, and
    /// the set is its orphan now (the caller leaves it to the runtime's next thread);
    /// otherwise it goes back to the pool once its filings are gone.
    #[must_use]
    pub fn release_owner(&'static self, generation: u64, mut view: OwnerView) -> bool {
        let (orphaned, retire) = self.shared.state().with(|locked| {
            if self.shared.generation() != generation {
                return (false, false);
            }
            locked.core.reclaim(&mut view);
            if locked.extra.holder == Holder::Thread {
                locked.extra.holder = Holder::Nobody;
            }
            if self.is_open(generation) {
                locked.extra.holder = Holder::Orphans;
                (true, false)
            } else {
                (false, locked.core.filings() == 0)
            }
        });
        if retire {
            self.retire(generation);
        }
        orphaned
    }

    /// A filing of binding `generation` went: back to the pool if it was the last
    /// thing holding a closed set.
    pub(super) fn release(&'static self, generation: u64) {
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
    pub(super) set: Option<&'static DeadlineSet>,
    pub(super) generation: u64,
    pub(super) runtime: Id,
}

impl Bound {
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
}

/// Under the lock, after a filing at `deadline`: a deadline earlier than the entry
/// services the set now (re-arming it); a later one is covered by the armed entry.
pub(super) fn rearm(
    set: &DeadlineSet,
    locked: &mut Locked<TokioEntry>,
    deadline: u64,
) -> Option<crate::core::service::Serviced> {
    set.shared.rearm(locked, deadline)
}

#[cfg(all(test, not(lazy_deadline_loom)))]
impl Bound {
    /// The set, for tests.
    pub(crate) fn set(&self) -> Option<&'static DeadlineSet> {
        self.set
    }
}

#[cfg(all(test, not(lazy_deadline_loom)))]
pub(super) mod tests;
