//! Each thread's deadline sets: the set it owns for each runtime it makes timers in
//! (usually one), found by runtime id without a lock, and how a filing learns that
//! it runs on its set's owner thread (which then answers it without the lock).
//!
//! A thread-local list, so that a thread's timers reach their set with no shared
//! count touched. A miss (the thread's first timer in a runtime) goes through the
//! runtime's record (`runtime_life`): an orphan set of that runtime (its
//! thread exited) is adopted, or a set comes from the pool. Sets of runtimes that
//! have gone leave the list at the thread's next miss, and all of them when the
//! thread exits.
//!
//! A timer made where the list cannot be reached (inside another thread-local's
//! destructor, after this one's) still works: it uses an orphan set of its runtime,
//! which no thread owns, through the lock.

use super::deadline_set::{Bound, DeadlineSet};
use super::runtime_life::RuntimeLife;
use crate::core::deadline_set::OwnerView;
use std::cell::{Cell, RefCell};
use tokio::runtime::Id;

thread_local! {
    /// How many more timers this thread makes on tokio's own entry before it looks its
    /// runtime up again (0: it looks it up, through its sets). Set when a lookup finds
    /// a runtime whose timers no second worker contends for (see
    /// [`takes_tokio_entry`]).
    static TOKIO_ENTRY_HINT: Cell<u8> = const { Cell::new(0) };
    /// Set by [`prefer_sets`]: this thread's timers take the deadline sets on every
    /// runtime (how the crate's own tests reach the sets under a paused clock).
    static PREFER_SETS: Cell<bool> = const { Cell::new(false) };
    /// The set the thread's last timer found, copied out of the list: a timer made in
    /// the same runtime finds it with one plain thread-local read (this one has no
    /// destructor to register), a runtime-id compare and the set's life word.
    static LAST: Cell<Option<Last>> = const { Cell::new(None) };
    static THREAD: RefCell<ThreadSets> = const {
        RefCell::new(ThreadSets {
            owned: Vec::new(),
            pinned: None,
        })
    };
}

/// See `LAST`.
#[derive(Clone, Copy)]
struct Last {
    runtime: Id,
    set: &'static DeadlineSet,
    generation: u64,
    /// The thread is pinned to this runtime: no lookup at all.
    pinned: bool,
    /// Pinned, and the runtime is a multi-thread one, whose clock is the real one
    /// (never paused): see [`now_of`].
    real_clock: bool,
}

impl Last {
    /// The bound set, while its binding is open (closed once its runtime is gone:
    /// also when a later runtime reused the gone one's id).
    #[inline]
    fn bound(self) -> Option<Bound> {
        self.set
            .is_open(self.generation)
            .then(|| Bound::new(Some(self.set), self.generation, self.runtime))
    }
}

/// A set this thread owns.
struct Owned {
    set: &'static DeadlineSet,
    generation: u64,
    runtime: Id,
    life: RuntimeLife,
    view: OwnerView,
}

impl Owned {
    /// The thread lets go of the set (see `RuntimeLife::release_owned`).
    fn release(self) {
        self.life
            .release_owned((self.set, self.generation), self.view);
    }
}

struct ThreadSets {
    owned: Vec<Owned>,
    /// The runtime that started this thread, if it said so ([`pin_to_current`]):
    /// timers made here are its, with no runtime lookup, while it lives.
    pinned: Option<Pinned>,
}

/// The runtime a thread is pinned to.
struct Pinned {
    /// Kept for the thread's first timer (a thread of that runtime holds one anyway:
    /// tokio's own context for it); dropped once the runtime is found gone.
    handle: tokio::runtime::Handle,
    /// Whether it lives, once a timer has asked.
    life: Option<RuntimeLife>,
}

impl ThreadSets {
    /// This thread's set for `runtime`, while that runtime lives (a gone runtime's
    /// set never answers for a runtime that reused its id).
    #[inline]
    fn bound(&self, runtime: Id) -> Option<Bound> {
        self.owned
            .iter()
            .find(|owned| owned.runtime == runtime && !owned.life.is_gone())
            .map(|owned| Bound::new(Some(owned.set), owned.generation, runtime))
    }
}

impl Drop for ThreadSets {
    /// The thread exits: its sets go to their runtimes' next threads (or, for gone
    /// runtimes, back to the pool once their filings are gone).
    fn drop(&mut self) {
        for owned in self.owned.drain(..) {
            owned.release();
        }
    }
}

/// How many timers a thread makes on a learnt "tokio's own entry" before it checks
/// its runtime again: a thread that moved to a multi-thread runtime's context (a
/// `block_on` of one after a current-thread runtime's) takes the sets again after at
/// most this many timers, and the check costs each timer a share of one runtime
/// lookup this small.
const HINT_SPAN: u8 = u8::MAX;

/// Whether a timer made here now takes tokio's own entry (a `tokio::time::Sleep` of
/// its own, no deadline set) by the thread's hint: a thread-local read, a compare and
/// a store, no runtime lookup. `false` means "ask [`current_or_tokio`]", which looks
/// the runtime up and learns the hint again.
///
/// A timer on tokio's entry is bound by tokio to the current runtime, whatever the
/// hint says: a stale hint (the thread entered a multi-thread runtime's context
/// since it learnt it, at most [`HINT_SPAN`] timers ago) costs speed, never
/// correctness.
#[inline(always)]
pub(crate) fn takes_tokio_entry() -> bool {
    TOKIO_ENTRY_HINT.with(|left| {
        let n = left.get();
        if n == 0 {
            return false;
        }
        left.set(n - 1);
        true
    })
}

/// Whether a runtime's timers belong on tokio's own entry: no second worker contends
/// for its driver's lock (a current-thread runtime), so tokio's path (an uncontended
/// lock and an O(1) wheel insert) costs less than any deadline set. Learnt for the
/// thread on the way.
fn learn_tokio_entry(handle: &tokio::runtime::Handle) -> bool {
    let direct = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
        && !sets_preferred();
    if direct {
        TOKIO_ENTRY_HINT.with(|left| left.set(HINT_SPAN));
        // A verdict learnt in a multi-thread runtime's sets is not this runtime's.
        super::sleep_fate::forget();
    }
    direct
}

/// The runtime this thread is pinned to ([`pin_to_current`]), as its last timer
/// found it: one thread-local read.
#[inline]
pub(super) fn last_pinned_runtime() -> Option<Id> {
    LAST.with(Cell::get)
        .filter(|last| last.pinned)
        .map(|last| last.runtime)
}

/// Whether this thread's timers take the sets on every runtime ([`prefer_sets`], or
/// the environment's `LAZY_DEADLINE_PREFER_SETS=1`).
pub(crate) fn sets_preferred() -> bool {
    PREFER_SETS.with(Cell::get) || sets_preferred_by_the_environment()
}

/// Whether `LAZY_DEADLINE_PREFER_SETS=1` is in the process's environment (read once):
/// every thread's timers take the deadline sets on every runtime, as with
/// [`prefer_sets`]. For the crate's CI, which runs the paused-clock suites through
/// the sets too; not part of the API.
fn sets_preferred_by_the_environment() -> bool {
    static PREFERRED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PREFERRED
        .get_or_init(|| std::env::var_os("LAZY_DEADLINE_PREFER_SETS").is_some_and(|v| v == "1"))
}

/// This thread's timers take the deadline sets on every runtime from now on (`true`),
/// or tokio's own entry where that wins again (`false`). For the crate's tests of the
/// sets under a paused clock (which only a current-thread runtime has).
#[doc(hidden)]
pub fn prefer_sets(prefer: bool) {
    PREFER_SETS.with(|cell| cell.set(prefer));
    TOKIO_ENTRY_HINT.with(|left| left.set(0));
    super::sleep_fate::forget();
}

/// The current thread's set for the current runtime, or `None` where the timer takes
/// tokio's own entry (the runtime is one whose timers nothing contends for: see
/// [`learn_tokio_entry`]). Ask [`takes_tokio_entry`] first.
///
/// # Panics
///
/// tokio's own panic outside a runtime, or in one without the time driver (at the
/// caller).
#[track_caller]
#[inline(always)]
pub(crate) fn current_or_tokio() -> Option<Bound> {
    if let Some((bound, _)) = last_bound() {
        return Some(bound);
    }
    slow(true).ok()
}

/// [`current_or_tokio`], with now by the clock of the runtime the timer belongs to,
/// for a deadline `duration` from now: tokio's `Instant::now()` (the current
/// context's clock, which is that runtime's), except on a thread pinned to that
/// runtime ([`pin_to_current`]), which may be inside another runtime's context
/// (another runtime's `block_on` on a blocking thread) whose clock (paused, maybe far
/// off) tokio's `Instant::now()` would read. Where that runtime is a multi-thread
/// one, its clock is never paused: the real clock. (A current-thread runtime's pinned
/// threads let go of the pin at their first timer, unless the sets are preferred for
/// tests; their clock may be paused, and is read through tokio.) The choice comes
/// with the lookup (the thread's last set says it), so it costs no second read.
///
/// # Panics
///
/// As [`current_or_tokio`].
#[track_caller]
#[inline(always)]
pub(crate) fn current_or_tokio_and_now() -> (Option<Bound>, tokio::time::Instant) {
    let (bound, real_clock) = match last_bound() {
        Some((bound, real_clock)) => (Some(bound), real_clock),
        None => match slow(true) {
            Ok(bound) => (Some(bound), last_real_clock(&bound)),
            Err(_) => (None, false),
        },
    };
    let now = if real_clock {
        tokio::time::Instant::from_std(std::time::Instant::now())
    } else {
        tokio::time::Instant::now()
    };
    (bound, now)
}

/// Whether the thread's last set, just found for `bound` by a lookup, is on a
/// pinned multi-thread runtime's clock (see [`current_or_tokio_and_now`]).
#[cold]
fn last_real_clock(bound: &Bound) -> bool {
    LAST.with(|last| {
        last.get()
            .is_some_and(|last| last.real_clock && last.runtime == bound.runtime())
    })
}

/// The current thread's set for the current runtime.
///
/// # Panics
///
/// tokio's own panic outside a runtime, or in one without the time driver (at the
/// caller).
#[cfg(all(test, not(lazy_deadline_loom)))]
#[track_caller]
pub(crate) fn current() -> Bound {
    if let Some((bound, _)) = last_bound() {
        return bound;
    }
    slow(false).expect("a set when tokio's entry is not allowed")
}

/// The thread's last set, if the current runtime is its runtime (and it lives), and
/// whether its clock is the real one (`Last::real_clock`).
#[inline(always)]
fn last_bound() -> Option<(Bound, bool)> {
    let last = LAST.with(Cell::get)?;
    if last.pinned {
        return last.bound().map(|bound| (bound, last.real_clock));
    }
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let same = last.runtime == handle.id();
    drop(handle);
    if same {
        last.bound().map(|bound| (bound, false))
    } else {
        None
    }
}

/// [`current`] past the thread's last set: its list, and a miss. `Err` with the
/// runtime (only if `tokio_entry` allows it): the runtime's timers take tokio's own
/// entry.
#[cold]
#[track_caller]
fn slow(tokio_entry: bool) -> Result<Bound, Id> {
    let lookup = || {
        THREAD.try_with(|thread| {
            let thread = thread.try_borrow().ok()?;
            Some(match &thread.pinned {
                Some(pinned) => match thread.bound(pinned.handle.id()) {
                    Some(bound) => Lookup::Found(bound),
                    None => Lookup::FirstPinned(pinned.handle.clone(), pinned.life.clone()),
                },
                None => match tokio::runtime::Handle::try_current() {
                    Ok(handle) => match thread.bound(handle.id()) {
                        Some(bound) => Lookup::Found(bound),
                        None => Lookup::Miss(handle),
                    },
                    Err(_) => Lookup::NoRuntime,
                },
            })
        })
    };
    let mut found = lookup();
    if let Ok(Some(Lookup::FirstPinned(handle, life))) = &found {
        // Outside the list's borrow: asking may spawn the runtime's sentinel.
        let life = life.clone().unwrap_or_else(|| RuntimeLife::of(handle));
        if life.is_gone() {
            // The thread outlived its runtime (a blocking thread after
            // `shutdown_background`): it binds as an unpinned thread from now on, and
            // keeps nothing of the gone runtime.
            unpin();
            found = lookup();
        } else {
            let _ = THREAD.try_with(|thread| {
                if let Some(pinned) = thread.try_borrow_mut().ok()?.pinned.as_mut() {
                    pinned.life.get_or_insert(life);
                }
                Some(())
            });
        }
    }
    let bound = match found {
        Ok(Some(Lookup::Found(bound))) => bound,
        Ok(Some(Lookup::FirstPinned(handle, _))) => {
            if tokio_entry && learn_tokio_entry(&handle) {
                // The pin spares a set lookup, which tokio's entry never makes: the
                // thread lets go of it (and of the runtime's handle).
                unpin();
                return Err(handle.id());
            }
            first_pinned(&handle)
        }
        Ok(Some(Lookup::Miss(handle))) => {
            if tokio_entry && learn_tokio_entry(&handle) {
                return Err(handle.id());
            }
            miss(&handle)
        }
        // No runtime (tokio's panic, reported here at the caller), or the thread's
        // list is out of reach (its destructor ran, or it is borrowed).
        _ => {
            let handle = tokio::runtime::Handle::current();
            if tokio_entry && learn_tokio_entry(&handle) {
                return Err(handle.id());
            }
            miss(&handle)
        }
    };
    remember(bound);
    Ok(bound)
}

/// Keeps `bound` as the thread's last set, if it is one the thread owns.
fn remember(bound: Bound) {
    let last = THREAD
        .try_with(|thread| {
            let thread = thread.try_borrow().ok()?;
            let owned = thread.owned.iter().find(|owned| {
                owned.runtime == bound.runtime() && bound.is_of(owned.set, owned.generation)
            })?;
            let pinned = thread
                .pinned
                .as_ref()
                .filter(|p| p.handle.id() == owned.runtime);
            Some(Last {
                runtime: owned.runtime,
                set: owned.set,
                generation: owned.generation,
                pinned: pinned.is_some(),
                real_clock: pinned.is_some_and(|p| {
                    p.handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread
                }),
            })
        })
        .ok()
        .flatten();
    if last.is_some() {
        LAST.with(|cell| cell.set(last));
    }
}

/// What the thread's list says for the current runtime.
enum Lookup {
    Found(Bound),
    /// The thread is pinned to this runtime (whose life, if known) and has no set of
    /// it yet.
    FirstPinned(tokio::runtime::Handle, Option<RuntimeLife>),
    /// The thread has no set of this runtime yet.
    Miss(tokio::runtime::Handle),
    NoRuntime,
}

/// A pinned thread's first timer: its runtime's set, found in that runtime's context
/// whatever context the thread is in now.
#[cold]
#[track_caller]
fn first_pinned(handle: &tokio::runtime::Handle) -> Bound {
    let _entered = handle.enter();
    miss(handle)
}

/// Pins this thread to the current runtime (see [`crate::on_thread_start`]): timers
/// made on this thread are that runtime's, and once the first has found the thread's
/// set (the usual way, so a runtime without the time driver panics there, with
/// tokio's message), they skip the runtime lookup, while that runtime lives.
///
/// # Panics
///
/// tokio's own panic outside a runtime.
#[track_caller]
pub(crate) fn pin_to_current() {
    let mut pinned = Some(Pinned {
        handle: tokio::runtime::Handle::current(),
        life: None,
    });
    let replaced = THREAD
        .try_with(|thread| {
            let mut thread = thread.try_borrow_mut().ok()?;
            std::mem::replace(&mut thread.pinned, pinned.take())
        })
        .ok()
        .flatten();
    drop(replaced); // outside the borrow: a handle's drop may drop a runtime
}

/// Lets go of this thread's pin (its runtime is gone), and of that runtime's handle
/// (dropped outside the list's borrow: it may be the runtime's last).
fn unpin() {
    let pinned = THREAD
        .try_with(|thread| thread.try_borrow_mut().ok()?.pinned.take())
        .ok()
        .flatten();
    // The thread's last set stays in `LAST` only while its binding is open, and a
    // gone runtime's sets are closed: nothing there is taken for pinned any more.
    drop(pinned);
}

/// Runs `f` with this thread's view of `set` in binding `generation` if this thread
/// owns it, else with `None` (the lock path). `f` must not run code that can reach
/// this module again (it runs inside the thread's list, borrowed): wakers it
/// replaces or expires are dropped and woken by the caller after it returns.
#[inline]
pub(crate) fn with_view<R>(
    set: &'static DeadlineSet,
    generation: u64,
    f: impl FnOnce(Option<&mut OwnerView>) -> R,
) -> R {
    let mut f = Some(f);
    let owned = THREAD.try_with(|thread| {
        let mut thread = thread.try_borrow_mut().ok()?;
        let owned = thread
            .owned
            .iter_mut()
            .find(|owned| std::ptr::eq(owned.set, set) && owned.generation == generation)?;
        let f = f.take().expect("called once");
        Some(f(Some(&mut owned.view)))
    });
    match owned {
        Ok(Some(result)) => result,
        _ => (f.take().expect("called once"))(None),
    }
}

/// The slow path of [`current`]: the thread's first timer in this runtime (or its
/// first since the runtime it had a set for went).
#[cold]
#[track_caller]
fn miss(handle: &tokio::runtime::Handle) -> Bound {
    let runtime = handle.id();
    let life = RuntimeLife::of(handle);
    prune();
    if life.is_gone() {
        return Bound::new(None, 0, runtime);
    }
    let can_own = THREAD
        .try_with(|thread| thread.try_borrow_mut().is_ok())
        .unwrap_or(false);
    if !can_own {
        return unowned(&life, runtime);
    }
    let adopted = std::iter::from_fn(|| life.orphan(true))
        .find_map(|(set, generation)| Some((set, generation, set.adopt(generation)?)));
    let (set, generation, view) = match adopted {
        Some(adopted) => adopted,
        None => match life.bind_set(runtime, true) {
            Some(((set, generation), view)) => (set, generation, view.expect("a thread's")),
            None => return Bound::new(None, 0, runtime), // the runtime went meanwhile
        },
    };
    let mut owned = Some(Owned {
        set,
        generation,
        runtime,
        life,
        view,
    });
    let _ = THREAD.try_with(|thread| {
        if let Ok(mut thread) = thread.try_borrow_mut() {
            thread.owned.push(owned.take().expect("pushed once"));
        }
    });
    if let Some(owned) = owned {
        // Unreachable in practice (checked above); leave it to the runtime.
        owned.release();
    }
    Bound::new(Some(set), generation, runtime)
}

/// A set for a thread that cannot own one (its list is gone or busy): an orphan of
/// the runtime, used by such threads through the lock.
#[cold]
#[track_caller]
fn unowned(life: &RuntimeLife, runtime: Id) -> Bound {
    if let Some((set, generation)) = life.orphan(false) {
        return Bound::new(Some(set), generation, runtime);
    }
    match life.bind_set(runtime, false) {
        Some(((set, generation), _)) => Bound::new(Some(set), generation, runtime),
        None => Bound::new(None, 0, runtime),
    }
}

/// Lets go of the sets of runtimes that have gone.
fn prune() {
    let gone = THREAD
        .try_with(|thread| {
            let Ok(mut thread) = thread.try_borrow_mut() else {
                return Vec::new();
            };
            let (gone, kept) =
                std::mem::take(&mut thread.owned)
                    .into_iter()
                    .partition(|owned: &Owned| {
                        owned.life.is_gone() || !owned.set.is_open(owned.generation)
                    });
            thread.owned = kept;
            gone
        })
        .unwrap_or_default();
    // Outside the borrow: a release may drop wakers, whose drop may run any code.
    for owned in gone {
        owned.release();
    }
}

/// Whether this thread is pinned to a runtime (for tests).
#[cfg(all(test, not(lazy_deadline_loom)))]
pub(crate) fn is_pinned() -> bool {
    THREAD.with(|thread| thread.borrow().pinned.is_some())
}

/// How many sets this thread owns (for tests).
#[cfg(all(test, not(lazy_deadline_loom)))]
pub(crate) fn owned_here() -> usize {
    THREAD.with(|thread| thread.borrow().owned.len())
}

/// Puts a set in this thread's list as if it were `runtime`'s (a runtime that
/// reused a gone runtime's id), for tests.
#[cfg(all(test, not(lazy_deadline_loom)))]
pub(crate) fn stand_in(set: &'static DeadlineSet, generation: u64, runtime: Id, life: RuntimeLife) {
    let view = crate::core::deadline_set::SetCore::default().owner_view();
    THREAD.with(|thread| {
        thread.borrow_mut().owned.insert(
            0,
            Owned {
                set,
                generation,
                runtime,
                life,
                view,
            },
        )
    });
}
