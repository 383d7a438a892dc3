//! `SetCore`: the deadlines of the in-flight requests of one deadline set (one thread,
//! one runtime), behind that set's one runtime timer entry. Everything here is
//! guarded by the set's lock, except the state words of the owner's slots, which the
//! owner thread writes without it (`core::owner_view`).
//!
//! - **Slots.** A request's deadline and its task's waker sit in a slot, named by a
//!   [`Filed`]. The owner thread's slots each have a state word in a shared array, so
//!   the owner answers a request with one load and one store and gives the slot back
//!   at its next lock. Requests filed from another thread use *remote* slots, which
//!   live under the lock only.
//! - **Order.** Records of the pending deadlines sit in [`Lanes`](super::lanes):
//!   appends and pops, no heap.
//! - **Memory** follows the requests in flight: answered requests' records are shed
//!   from the lanes, and what a burst grew is given back under the lock as the burst
//!   is answered from any thread, expires, or at the set's next service round:
//!   the owner has at most [`OWNER_SLOTS`] slots, never shrunk (a burst beyond them
//!   takes remote slots), so its state words and its lock-free view never move once
//!   grown, and remote slots, which keep no waker once free, shrink under the lock.
//! - **Wakers.** An owner slot keeps the waker of its last request after the request
//!   is answered, while the set has other requests filed: the next request of the
//!   same task usually takes the same slot (free slots are reused last-in,
//!   first-out) and finds its waker there, so filing needs no waker clone. Once
//!   nothing is filed, every kept waker goes (a tokio waker keeps its task's cell,
//!   the future inline: a finished task must not stay with the set): at the owner's
//!   last answer (it takes the lock then), at an answer from another thread, and at
//!   an expiry that finds only answered requests (the owner's answers of which
//!   another thread's cannot see).
//!
//! Nothing here reads a clock or touches tokio.

use super::lanes::{Lanes, Record};
use super::owner_view::{
    word, StateWords, REMOTE, TAG_CANCELLED, TAG_FIRED, TAG_FREE, TAG_PENDING,
};
pub use super::owner_view::{Filed, OwnerView};
use super::NEVER;
use crate::sync::WakerMemo;
use crate::sync::{Arc, Ordering};
use std::task::Waker;

/// The owner thread's slots at most (and state words: 2 KiB). A thread with more
/// requests in flight at once files the rest in remote slots (answered under the
/// lock). The owner's slots are never shrunk (their kept wakers go once nothing is
/// filed, after the lock), and the owner's view of the state words stays the set's
/// own.
pub const OWNER_SLOTS: usize = 256;

/// Remote slots kept when they shrink after a burst.
pub const SHRINK_KEEP: usize = 256;

#[derive(Debug, Default)]
struct Slot {
    ticket: u64,
    deadline: u64,
    /// The request's waker; kept after the request is answered, for the next one,
    /// while the set has requests filed (see the module docs).
    waker: Option<Waker>,
    /// Which lane holds its record (`ORDERED`: the ordered set).
    lane: u8,
    /// Held by a filing (not on the free list).
    taken: bool,
    /// Expired by a fire (its lane's live count already dropped).
    fired: bool,
}

/// The deadline set's data; see the module docs.
#[derive(Debug)]
pub struct SetCore {
    slots: Vec<Slot>,
    states: Arc<StateWords>,
    free: Vec<u32>,
    remote: Vec<Slot>,
    /// Free remote slots; may also name slots that a shrink has dropped since (at
    /// or past `remote.len()`): skipped when popped.
    remote_free: Vec<u32>,
    /// Remote slots taken.
    remote_taken: usize,
    lanes: Lanes,
    next_ticket: u64,
    /// Filings alive (owner slots not given back, remote filings not cancelled).
    filings: usize,
    /// Kept wakers let go of under the lock by an expiry, for the service to drop
    /// after it (see [`take_let_go`](Self::take_let_go)).
    let_go: Vec<Waker>,
}

impl Default for SetCore {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            states: Arc::new(StateWords::with_len(0, None)),
            free: Vec::new(),
            remote: Vec::new(),
            remote_free: Vec::new(),
            remote_taken: 0,
            lanes: Lanes::default(),
            next_ticket: 1,
            filings: 0,
            let_go: Vec::new(),
        }
    }
}

/// A filing: where, the memo of the waker its slot holds, and the waker it replaced
/// (drop it after the lock: a waker's drop may run code that reaches this set).
pub type Placement = (Filed, WakerMemo, Option<Waker>);

impl SetCore {
    /// A view for the set's owner thread.
    pub fn owner_view(&self) -> OwnerView {
        OwnerView::new(self.states.clone())
    }

    /// Whether `view` is a view of this core (on its state words).
    pub fn is_viewed_by(&self, view: &OwnerView) -> bool {
        view.is_on(&self.states)
    }

    /// Files `deadline` for the task of `waker` in one of the owner's slots (the
    /// owner thread only: it alone grows the state words, and `view` is brought up to
    /// date when it does), or in a remote slot when all [`OWNER_SLOTS`] are taken.
    ///
    /// # Panics
    ///
    /// With more than 2^31 requests pending on one thread at once.
    #[inline]
    pub fn file_owned(&mut self, deadline: u64, waker: &Waker, view: &mut OwnerView) -> Placement {
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slots.len() < OWNER_SLOTS => self.grow_owned(view),
            None => return self.file_remote(deadline, waker),
        };
        let placement = self.fill(index, deadline, waker);
        view.live = view.live.saturating_add(1);
        // Relaxed: read under this lock by the fire, and by the owner (this thread).
        self.states
            .get(index as usize)
            .store(word(placement.0.ticket, TAG_PENDING), Ordering::Relaxed);
        placement
    }

    /// Files `deadline` for the task of `waker` in a remote slot (from a thread that
    /// is not the set's owner).
    ///
    /// # Panics
    ///
    /// With more than 2^31 remote requests pending at once.
    pub fn file_remote(&mut self, deadline: u64, waker: &Waker) -> Placement {
        let len = self.remote.len();
        // Entries a shrink left behind (past the end) are skipped; once the list is
        // empty nothing stale is left in it, so a slot grown back is never listed
        // twice.
        let index =
            match std::iter::from_fn(|| self.remote_free.pop()).find(|&i| (i as usize) < len) {
                Some(index) => index,
                None => {
                    let index = u32::try_from(len)
                        .ok()
                        .filter(|&i| i < REMOTE)
                        .expect("at most 2^31 pending deadlines per set");
                    self.remote.push(Slot::default());
                    index
                }
            } | REMOTE;
        self.remote_taken += 1;
        self.fill(index, deadline, waker)
    }

    /// Files a record for slot `index` (of either kind) at `deadline`, under a new
    /// ticket, and fills the slot: taken, pending, holding `waker` (the one it kept,
    /// if that wakes the same task).
    #[inline]
    fn fill(&mut self, index: u32, deadline: u64, waker: &Waker) -> Placement {
        let ticket = self.queue(index, deadline);
        let slot = self.slot_mut(index);
        let replaced = keep_or_replace(&mut slot.waker, waker);
        // The memo names the poll's waker, not the clone stored: a clone need not
        // keep its original's vtable address (tokio's current-thread `block_on`
        // waker's does not), and a memo of the clone would never match the next poll
        // (a lock per pending poll). The slot holds a waker of the same task.
        let memo = WakerMemo::of(waker);
        slot.taken = true;
        slot.fired = false;
        self.filings += 1;
        (Filed { index, ticket }, memo, replaced)
    }

    /// Gives slot `index` a new ticket and a record at `deadline` (where the slot
    /// notes its lane). The ticket first: a record the slot had is stale while the
    /// lanes shed.
    #[inline]
    fn queue(&mut self, index: u32, deadline: u64) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.slot_mut(index).ticket = ticket;
        let lane = self.place(deadline, index, ticket);
        let slot = self.slot_mut(index);
        slot.deadline = deadline;
        slot.lane = lane;
        ticket
    }

    /// Gives back the slots the owner answered since its last lock (`view`'s list).
    /// Drops nothing: owner slots keep their wakers.
    pub fn reclaim(&mut self, view: &mut OwnerView) {
        if view.to_reclaim.is_empty() {
            return;
        }
        // Drained, not taken: the list keeps its capacity for the next answers.
        let mut answered = std::mem::take(&mut view.to_reclaim);
        for filed in answered.drain(..) {
            self.release_owned(filed);
        }
        view.to_reclaim = answered;
    }

    /// [`reclaim`](Self::reclaim), and if none of the owner's slots holds a request
    /// any more (every one answered), the wakers they kept, to drop after the lock: a
    /// kept waker is its task's (a tokio waker keeps the task's cell, its future
    /// inline), and a finished task's memory must not stay with the set.
    /// Brings `view`'s count of pending owner filings back in step (answers made
    /// under the lock, from other threads, are not counted off there).
    pub fn reclaim_and_let_go(&mut self, view: &mut OwnerView) -> Vec<Waker> {
        self.reclaim(view);
        view.live = self.slots.iter().filter(|slot| slot.taken).count() as u32;
        if view.live != 0 {
            return Vec::new();
        }
        // Every owner slot is free (a remote slot keeps no waker once free).
        self.slots
            .iter_mut()
            .filter_map(|slot| slot.waker.take())
            .collect()
    }

    /// A request answered from a thread that is not the set's owner (under the
    /// lock): [`cancel_locked`](Self::cancel_locked), and the waker its owner slot
    /// kept goes too (its task finished or moved on; the owner, which reuses a slot's
    /// waker for its next request, is elsewhere). If that was the last filing, every
    /// kept waker goes (see [`reclaim_and_let_go`](Self::reclaim_and_let_go)).
    /// Returns the wakers to drop after the lock.
    pub fn answer_locked(&mut self, filed: Filed) -> (Option<Waker>, Vec<Waker>) {
        if filed.is_remote() {
            let waker = self.cancel_locked(filed);
            return (waker, self.let_go_if_idle());
        }
        let pending = self
            .slots
            .get(filed.slot())
            .is_some_and(|slot| slot.taken && slot.ticket == filed.ticket);
        drop(self.cancel_locked(filed)); // `None`: an owner slot keeps its waker
        let mut own = None;
        if pending {
            // Given back here, not by the owner: its count of pending ones is off by one.
            self.states.answered_remotely();
            own = self.slots[filed.slot()].waker.take();
        }
        if self.filings != 0 && self.next_deadline() == NEVER {
            // No live record is left, so no expiry will come to sweep what the owner
            // answered without its lock: sweep now.
            self.sweep_answered();
        }
        let mut let_go = self.take_let_go();
        let_go.extend(self.let_go_if_idle());
        (own, let_go)
    }

    /// A request cancelled from a thread that is not the owner's (or by a filing
    /// that moved, or one in a remote slot): under the lock, for either kind of
    /// slot. Returns the waker to drop after the lock, if the slot gave it up. Gives
    /// back what a burst left, if this was one.
    pub fn cancel_locked(&mut self, filed: Filed) -> Option<Waker> {
        if filed.is_remote() {
            self.filings -= 1;
            let slot = self.remote.get_mut(filed.slot())?;
            if !slot.taken || slot.ticket != filed.ticket {
                return None; // it fired, and the fire gave the slot back
            }
            let waker = slot.waker.take();
            self.unqueue(filed, false);
            self.free_remote(filed.slot());
            self.tidy();
            return waker;
        }
        let state = self.states.get(filed.slot());
        // Relaxed: under the lock; the owner never writes this slot's word again
        // (the filing has moved away from it).
        if state.load(Ordering::Relaxed) == word(filed.ticket, TAG_PENDING) {
            state.store(word(filed.ticket, TAG_CANCELLED), Ordering::Relaxed);
        }
        self.release_owned(filed);
        self.tidy();
        None
    }

    /// Moves a pending request to `deadline` in place: same slot, same waker, a new
    /// ticket (its old record goes stale) and a record at the new deadline. `None`
    /// if it is no longer pending.
    pub fn move_filing(&mut self, filed: Filed, deadline: u64) -> Option<Filed> {
        if !self.is_live(filed.index, filed.ticket) {
            return None;
        }
        self.unqueue(filed, false);
        let ticket = self.queue(filed.index, deadline);
        if !filed.is_remote() {
            // Relaxed: under the lock; the filing is the caller's, so its owner's
            // lock-free answer cannot race this (see `OwnerView::cancel`).
            self.states
                .get(filed.slot())
                .store(word(ticket, TAG_PENDING), Ordering::Relaxed);
        }
        Some(Filed {
            index: filed.index,
            ticket,
        })
    }

    /// Replaces a pending request's waker: `Some` with the replaced one (to drop
    /// after the lock), `None` when the request is no longer pending.
    pub fn update_waker(&mut self, filed: Filed, waker: &Waker) -> Option<Option<Waker>> {
        if !self.is_live(filed.index, filed.ticket) {
            return None;
        }
        let slot = self.slot_mut(filed.index);
        Some(keep_or_replace(&mut slot.waker, waker))
    }

    /// The waker a pending request's slot holds.
    pub fn stored_waker(&self, filed: Filed) -> Option<&Waker> {
        if !self.is_live(filed.index, filed.ticket) {
            return None;
        }
        self.slot(filed.index).waker.as_ref()
    }

    /// Whether `filed` is still pending (not fired, not cancelled).
    #[cfg(any(test, lazy_deadline_loom))]
    pub fn is_pending(&self, filed: Filed) -> bool {
        self.is_live(filed.index, filed.ticket)
    }

    /// Expires every pending request due at or before `up_to`, pushing their wakers
    /// to `wake` (wake them after the lock), and returns the earliest deadline still
    /// pending (`NEVER`: none).
    pub fn expire(&mut self, up_to: u64, wake: &mut Vec<Waker>) -> u64 {
        let woken = wake.len();
        while let Some(record) = self.lanes.pop_due(up_to) {
            self.fire(record, wake);
        }
        if wake.len() == woken && self.filings != 0 {
            // Nothing was due but answered requests' records: the owner may have
            // answered the rest without its lock and gone quiet.
            self.sweep_answered();
        }
        let next = self.next_deadline();
        self.tidy();
        next
    }

    /// The earliest deadline still pending (`NEVER`: none); sheds stale records it
    /// meets at the lanes' fronts.
    pub fn next_deadline(&mut self) -> u64 {
        let (slots, remote, states) = (&self.slots, &self.remote, &self.states);
        self.lanes
            .next(|index, ticket| is_live(slots, remote, states, index, ticket))
            .unwrap_or(NEVER)
    }

    /// The latest filed deadline (pending or not) at or before `bound`, if any: a
    /// point the runtime layer may probe to expire everything up to it at once.
    pub fn latest_at_or_before(&self, bound: u64) -> Option<u64> {
        self.lanes.latest_at_or_before(bound)
    }

    /// Filings alive: owner slots not given back, remote filings not cancelled.
    pub fn filings(&self) -> usize {
        self.filings
    }

    /// Pending requests (by their records), for tests.
    #[cfg(any(test, lazy_deadline_loom))]
    pub fn pending(&self) -> usize {
        self.lanes.pending()
    }

    /// A new owner slot at the end (there are fewer than [`OWNER_SLOTS`]), the state
    /// words grown with it (by doubling, so the copy is amortised), `view` pointed at
    /// the new array.
    fn grow_owned(&mut self, view: &mut OwnerView) -> u32 {
        let index = self.slots.len() as u32;
        self.slots.push(Slot::default());
        if self.states.len() < self.slots.len() {
            let len = (self.slots.len() * 2).clamp(16, OWNER_SLOTS);
            self.states = Arc::new(StateWords::with_len(len, Some(&self.states)));
        }
        view.states = self.states.clone();
        index
    }

    /// Files a record for (`index`, `ticket`) at `deadline`; returns where.
    #[inline]
    fn place(&mut self, deadline: u64, index: u32, ticket: u64) -> u8 {
        let (slots, remote, states) = (&self.slots, &self.remote, &self.states);
        let record = Record {
            deadline,
            index,
            ticket,
        };
        self.lanes.place(record, |index, ticket| {
            is_live(slots, remote, states, index, ticket)
        })
    }

    /// Expires one record if its request is still pending: the slot is marked
    /// fired (an owner slot stays taken until its owner gives it back; a remote one
    /// is free at once) and its waker goes to `wake`.
    fn fire(&mut self, record: Record, wake: &mut Vec<Waker>) {
        let Record { index, ticket, .. } = record;
        // A stale record may name a slot that is gone (the slots shrank after a burst):
        // looked up, never indexed.
        if index & REMOTE != 0 {
            let i = (index & !REMOTE) as usize;
            let Some(slot) = self.remote.get_mut(i) else {
                return;
            };
            if !slot.taken || slot.ticket != ticket {
                return;
            }
            wake.extend(slot.waker.take());
            let lane = slot.lane;
            self.free_remote(i);
            self.lanes.lane_done(lane);
            return;
        }
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return;
        };
        if !slot.taken || slot.ticket != ticket || slot.fired {
            return;
        }
        // Relaxed on success and failure: under the lock; the owner's cancel (its
        // only write outside the lock) is either seen here or lands after this,
        // when the task is woken once more (see `OwnerView::cancel`).
        let claimed = self
            .states
            .get(index as usize)
            .compare_exchange(
                word(ticket, TAG_PENDING),
                word(ticket, TAG_FIRED),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok();
        if claimed {
            slot.fired = true;
            wake.extend(slot.waker.take());
            let lane = slot.lane;
            self.lanes.lane_done(lane);
        }
    }

    /// Removes a filing's record from the ordered set, or counts it out of its lane
    /// (where it stays, stale, until shed); `fired`: the fire did that already.
    fn unqueue(&mut self, filed: Filed, fired: bool) {
        if fired {
            return;
        }
        let slot = self.slot(filed.index);
        let record = Record {
            deadline: slot.deadline,
            index: filed.index,
            ticket: filed.ticket,
        };
        self.lanes.unqueue(slot.lane, record);
    }

    /// Gives an owner slot back (its request was answered, cancelled or expired).
    fn release_owned(&mut self, filed: Filed) {
        let i = filed.slot();
        let Some(slot) = self.slots.get(i) else {
            return;
        };
        if !slot.taken || slot.ticket != filed.ticket {
            return;
        }
        let fired = slot.fired;
        self.unqueue(filed, fired);
        let slot = &mut self.slots[i];
        slot.taken = false;
        slot.fired = false;
        // Relaxed: under the lock; a free slot's word is read only under it.
        self.states.get(i).store(TAG_FREE, Ordering::Relaxed);
        self.free.push(i as u32);
        self.filings -= 1;
    }

    fn is_live(&self, index: u32, ticket: u64) -> bool {
        is_live(&self.slots, &self.remote, &self.states, index, ticket)
    }

    fn slot(&self, index: u32) -> &Slot {
        if index & REMOTE != 0 {
            &self.remote[(index & !REMOTE) as usize]
        } else {
            &self.slots[index as usize]
        }
    }

    fn slot_mut(&mut self, index: u32) -> &mut Slot {
        if index & REMOTE != 0 {
            &mut self.remote[(index & !REMOTE) as usize]
        } else {
            &mut self.slots[index as usize]
        }
    }
}

/// Whether the request of slot `index` filed under `ticket` is still pending (a free
/// function over the slot fields, so that the lanes can ask while they are borrowed).
#[inline]
fn is_live(slots: &[Slot], remote: &[Slot], states: &StateWords, index: u32, ticket: u64) -> bool {
    if index & REMOTE != 0 {
        return remote
            .get((index & !REMOTE) as usize)
            .is_some_and(|slot| slot.taken && slot.ticket == ticket);
    }
    // Relaxed: under the lock. The owner's cancel may not be visible yet; then the
    // request counts as pending a little longer (see `OwnerView::cancel`).
    slots.get(index as usize).is_some_and(|slot| {
        slot.taken
            && slot.ticket == ticket
            && !slot.fired
            && states.get(index as usize).load(Ordering::Relaxed) == word(ticket, TAG_PENDING)
    })
}

/// Keeps the slot's waker if it wakes the same task as `waker` (no clone), else
/// stores a clone and returns the one it replaced.
#[inline]
fn keep_or_replace(slot: &mut Option<Waker>, waker: &Waker) -> Option<Waker> {
    match slot {
        Some(stored) if stored.will_wake(waker) => None,
        _ => slot.replace(waker.clone()),
    }
}

mod memory;
#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests;
