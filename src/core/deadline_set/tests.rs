//! Unit tests of `SetCore` and the owner's view, with no runtime and no clock.

use super::*;
use crate::core::lanes::{COMPACT_MIN, MAX_LANES};
use crate::core::owner_view::RECLAIM_BATCH;

fn core_and_view() -> (SetCore, OwnerView) {
    let core = SetCore::default();
    let view = core.owner_view();
    (core, view)
}

/// The owner answers `filed`, as `SharedSet::cancel` does: lock-free in one of its
/// slots (given back at the next reclaim, or now for a batch), under the lock in a
/// remote one (a burst past the owner's slots).
fn answer(set: &mut SetCore, view: &mut OwnerView, filed: Filed) {
    if filed.is_remote() {
        drop(set.cancel_locked(filed));
    } else if view.cancel(filed) {
        set.reclaim(view);
    }
}

#[test]
fn expires_in_deadline_order_and_reports_the_next() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let (late, _, _) = set.file_owned(30, w, &mut view);
    let (early, _, _) = set.file_owned(10, w, &mut view);
    let mut wake = Vec::new();
    assert_eq!(set.expire(9, &mut wake), 10);
    assert!(wake.is_empty());
    assert_eq!(set.expire(10, &mut wake), 30);
    assert_eq!(wake.len(), 1);
    assert!(!set.is_pending(early) && set.is_pending(late));
    assert_eq!(set.expire(100, &mut wake), NEVER);
    assert_eq!(set.pending(), 0);
}

#[test]
fn a_request_answered_by_its_owner_never_expires_and_its_slot_and_waker_are_reused() {
    let (mut set, mut view) = core_and_view();
    // Another request of the thread stays pending throughout (with none, the last
    // answer lets go of the kept wakers: the test below).
    let (_other, _, _) = set.file_owned(1_000, Waker::noop(), &mut view);
    let (flag, waker) = crate::core::tests_support::counting_waker();
    let (first, memo, replaced) = set.file_owned(10, &waker, &mut view);
    assert!(replaced.is_none());
    assert!(!view.cancel(first), "no flush for one answer");
    assert!(!set.is_pending(first));
    set.reclaim(&mut view);
    let (second, memo2, replaced) = set.file_owned(20, &waker, &mut view);
    assert_eq!(second.slot(), first.slot(), "the slot is reused");
    assert_ne!(second.ticket, first.ticket);
    assert_eq!(memo, memo2, "the same stored waker: no clone");
    assert!(replaced.is_none());
    assert!(!set.is_pending(first), "the old filing stays stale");
    assert!(set.update_waker(first, &waker).is_none());
    let mut wake = Vec::new();
    assert_eq!(set.expire(15, &mut wake), 20);
    assert!(wake.is_empty(), "the answered deadline woke nobody");
    assert_eq!(flag.wakes(), 0);
}

#[test]
fn the_owners_last_answer_lets_go_of_every_kept_waker() {
    let (mut set, mut view) = core_and_view();
    let (_, first_waker) = crate::core::tests_support::counting_waker();
    let (_, second_waker) = crate::core::tests_support::counting_waker();
    let (first, _, _) = set.file_owned(10, &first_waker, &mut view);
    let (second, _, _) = set.file_owned(20, &second_waker, &mut view);
    assert!(
        !view.cancel(first),
        "one of the thread's requests is still pending"
    );
    assert!(view.cancel(second), "the last answer asks for the lock");
    let let_go = set.reclaim_and_let_go(&mut view);
    assert_eq!(let_go.len(), 2, "a finished task's waker is kept");
    assert_eq!(set.filings(), 0);
    // Reused slots clone the next task's waker.
    let (_, _, replaced) = set.file_owned(30, &first_waker, &mut view);
    assert!(replaced.is_none());
}

#[test]
fn a_stale_cancel_never_touches_the_request_that_took_its_slot() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let (old, _, _) = set.file_owned(10, w, &mut view);
    let mut wake = Vec::new();
    set.expire(10, &mut wake);
    assert_eq!(wake.len(), 1);
    // The expired filing is given back (its future completed) ...
    view.cancel(old);
    set.reclaim(&mut view);
    // ... a new request takes the slot ...
    let (new, _, _) = set.file_owned(50, w, &mut view);
    assert_eq!(new.slot(), old.slot());
    // ... and a second cancel of the old filing (by a remote path) cannot reach it.
    set.cancel_locked(old);
    assert!(set.is_pending(new));
    assert_eq!(set.expire(49, &mut wake), 50);
}

#[test]
fn remote_filings_live_under_the_lock_and_fire_once() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let (remote, _, _) = set.file_remote(10, w);
    assert!(remote.is_remote());
    let (owned, _, _) = set.file_owned(10, w, &mut view);
    assert!(!owned.is_remote());
    let mut wake = Vec::new();
    assert_eq!(set.expire(10, &mut wake), NEVER);
    assert_eq!(wake.len(), 2);
    assert!(
        set.cancel_locked(remote).is_none(),
        "fired: nothing to give"
    );
    view.cancel(owned);
    set.reclaim(&mut view);
    assert_eq!(set.filings(), 0);
}

#[test]
fn sorted_lanes_take_interleaved_durations_and_the_rest_goes_to_the_ordered_set() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    // Two durations interleaved: two lanes, each sorted.
    for now in 0..10u64 {
        set.file_owned(now + 1_000, w, &mut view);
        set.file_owned(now + 5_000, w, &mut view);
    }
    assert_eq!(set.lanes.shape(), (2, false));
    // Deadlines in decreasing order go before a lane's first: no new lane.
    for early in (0..100u64).rev() {
        set.file_owned(early, w, &mut view);
    }
    assert_eq!(set.lanes.shape(), (2, false));
    // Deadlines that fit no lane's ends (inside every lane's span): new lanes up to
    // the limit, then the ordered set.
    for inside in [
        2_500u64, 3_000, 2_700, 2_900, 2_800, 2_850, 2_820, 2_840, 2_830,
    ] {
        set.file_owned(inside, w, &mut view);
    }
    assert_eq!(set.lanes.shape(), (MAX_LANES, true));
    // Everything expires in deadline order, whatever holds it.
    let mut last = 0;
    let mut fired = 0;
    // Bounded: each round must expire the earliest deadline (a core that does not
    // fails here by name instead of spinning).
    for _ in 0..=129 {
        let mut wake = Vec::new();
        let next = set.next_deadline();
        if next == NEVER {
            break;
        }
        assert!(next >= last, "{next} after {last}");
        last = next;
        let pending = set.pending();
        set.expire(next, &mut wake);
        assert!(set.pending() < pending, "expiring {next} expired nothing");
        fired += wake.len();
    }
    assert_eq!(fired, 20 + 100 + 9);
}

#[test]
fn memory_follows_the_requests_in_flight() {
    // A million requests answered under hour-long deadlines, ten in flight.
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let mut in_flight = std::collections::VecDeque::new();
    for i in 0..1_000_000u64 {
        let (filed, _, _) = set.file_owned(3_600_000_000_000 + i, w, &mut view);
        in_flight.push_back(filed);
        if in_flight.len() > 10 && view.cancel(in_flight.pop_front().unwrap()) {
            set.reclaim(&mut view);
        }
    }
    set.reclaim(&mut view);
    assert_eq!(set.pending(), 10);
    assert!(
        set.slots.len() <= 11 + RECLAIM_BATCH,
        "slots: {}",
        set.slots.len()
    );
    let records = set.lanes.records();
    assert!(
        records <= 2 * (10 + RECLAIM_BATCH) + COMPACT_MIN + 1,
        "records: {records}"
    );
}

#[test]
fn one_long_request_at_the_front_does_not_pin_the_answered_ones_behind_it() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let (_stuck, _, _) = set.file_owned(1, w, &mut view);
    for i in 0..100_000u64 {
        let (filed, _, _) = set.file_owned(2 + i, w, &mut view);
        if view.cancel(filed) {
            set.reclaim(&mut view);
        }
    }
    let records = set.lanes.records();
    assert!(
        records < 4 * COMPACT_MIN + 2 * RECLAIM_BATCH,
        "records: {records}"
    );
}

#[test]
fn a_burst_answered_gives_its_memory_back() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let filed: Vec<_> = (0..200_000u64)
        .map(|i| set.file_owned(1_000 + i, w, &mut view).0)
        .collect();
    let at_peak = set.heap_bytes();
    assert!(at_peak > 4_000_000, "{at_peak}");
    assert!(
        filed[OWNER_SLOTS].is_remote(),
        "past the owner's slots: remote"
    );
    for filed in filed {
        answer(&mut set, &mut view, filed);
    }
    set.reclaim(&mut view);
    assert_eq!(set.filings(), 0);
    // A new request keeps working, and the shrunk set stays small.
    let (again, _, _) = set.file_owned(5, w, &mut view);
    assert!(set.is_pending(again));
    let after = set.heap_bytes();
    assert!(after <= 64 * 1024, "{after} bytes after the burst");
}

#[test]
fn probes_see_the_latest_record_at_or_before_a_bound() {
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    for at in [10, 20, 30] {
        set.file_owned(at, w, &mut view);
    }
    set.file_owned(15, w, &mut view); // a second lane
    assert_eq!(set.latest_at_or_before(9), None);
    assert_eq!(set.latest_at_or_before(17), Some(15));
    assert_eq!(set.latest_at_or_before(25), Some(20));
    assert_eq!(set.latest_at_or_before(u64::MAX), Some(30));
}

#[test]
fn close_wakes_every_pending_request_once() {
    let (mut set, mut view) = core_and_view();
    let (flag, waker) = crate::core::tests_support::counting_waker();
    let (a, _, _) = set.file_owned(10, &waker, &mut view);
    let (_b, _, _) = set.file_remote(20, &waker);
    let (c, _, _) = set.file_owned(30, &waker, &mut view);
    view.cancel(c);
    let (mut wake, mut kept) = (Vec::new(), Vec::new());
    set.close(&mut wake, &mut kept);
    assert_eq!(wake.len(), 2, "the two pending ones");
    assert_eq!(
        kept.len(),
        1,
        "the answered one's kept waker, to drop after the lock"
    );
    crate::core::service::wake_all(wake);
    assert_eq!(flag.wakes(), 2);
    assert_eq!(set.pending(), 0);
    view.cancel(a);
    set.reclaim(&mut view);
    assert_eq!(set.filings(), 1, "the remote filing until it is dropped");
}

#[test]
fn a_request_its_owner_answered_is_never_woken_by_a_later_fire() {
    // The owner's answer lands before the fire (the common order): the fire's claim
    // sees it and skips the request, even before the slot is given back.
    let (mut set, mut view) = core_and_view();
    let (flag, waker) = crate::core::tests_support::counting_waker();
    let (answered, _, _) = set.file_owned(10, &waker, &mut view);
    let (_, _, _) = set.file_remote(10, &waker);
    view.cancel(answered);
    let mut wake = Vec::new();
    set.expire(10, &mut wake);
    assert_eq!(wake.len(), 1, "only the pending one");
    crate::core::service::wake_all(wake);
    assert_eq!(flag.wakes(), 1);
}

#[test]
fn stale_records_of_slots_given_back_after_a_burst_are_skipped() {
    // A burst of remote filings, all cancelled: the remote slots are given back and
    // their memory freed, while their records are still in the lanes. Expiring them
    // must skip them (never index a slot that is gone), and so for the owner's.
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let remote: Vec<_> = (0..SHRINK_KEEP as u64 + 50)
        .map(|i| set.file_remote(100 + i, w).0)
        .collect();
    for filed in remote {
        set.cancel_locked(filed);
    }
    let mut wake = Vec::new();
    assert_eq!(set.expire(u64::MAX - 2, &mut wake), NEVER);
    assert!(wake.is_empty());
    // The owner's: a burst in the ordered set (each deadline earlier than the last),
    // answered, the slots shrunk, then a fire.
    let owned: Vec<_> = (0..2 * SHRINK_KEEP as u64)
        .map(|i| set.file_owned(10_000 - i, w, &mut view).0)
        .collect();
    for filed in owned {
        answer(&mut set, &mut view, filed);
    }
    set.reclaim(&mut view);
    assert_eq!(set.expire(u64::MAX - 2, &mut wake), NEVER);
    assert!(wake.is_empty());
    assert_eq!(set.filings(), 0);
}

#[test]
fn a_filing_moved_earlier_again_and_again_keeps_its_records_bounded() {
    // A `Sleep` reset 1 ms earlier per packet, for a million packets: each move
    // prepends a record and leaves the last one stale.
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    let (mut filed, _, _) = set.file_owned(u64::MAX / 2, w, &mut view);
    for i in 1..1_000_000u64 {
        filed = set
            .move_filing(filed, u64::MAX / 2 - i * 1_000_000)
            .expect("still pending");
    }
    assert_eq!(set.pending(), 1);
    let records = set.lanes.records();
    assert!(records <= 2 + 2 * COMPACT_MIN, "records: {records}");
    let last = u64::MAX / 2 - 999_999 * 1_000_000;
    let mut wake = Vec::new();
    assert_eq!(set.expire(last - 1, &mut wake), last);
    assert!(wake.is_empty());
    assert_eq!(set.expire(last, &mut wake), NEVER);
    assert_eq!(wake.len(), 1, "the moved filing fires at its last deadline");
}

#[test]
fn requests_filed_in_decreasing_order_and_answered_keep_records_bounded() {
    // Deadlines filed last-first (a runtime waking deferred tasks in reverse), each
    // answered before the next is filed.
    let (mut set, mut view) = core_and_view();
    let w = Waker::noop();
    for i in 0..1_000_000u64 {
        let (filed, _, _) = set.file_owned(u64::MAX / 2 - i, w, &mut view);
        if view.cancel(filed) {
            set.reclaim(&mut view);
        }
    }
    let records = set.lanes.records();
    assert!(
        records <= 2 * RECLAIM_BATCH + 2 * COMPACT_MIN + 1,
        "records: {records}"
    );
}

/// One of the owner's requests answered under the lock from another thread, the
/// other by the owner: the owner's last answer still asks for the lock (its count of
/// pending requests takes the other thread's answer off), and every kept waker goes.
#[test]
fn an_answer_from_another_thread_counts_for_the_owners_last_answer() {
    let (mut set, mut view) = core_and_view();
    let (_, first_waker) = crate::core::tests_support::counting_waker();
    let (_, second_waker) = crate::core::tests_support::counting_waker();
    let (first, _, _) = set.file_owned(10, &first_waker, &mut view);
    let (second, _, _) = set.file_owned(20, &second_waker, &mut view);
    let (given_back, let_go) = set.answer_locked(first);
    assert!(given_back.is_some(), "the answered slot's waker is let go");
    assert!(let_go.is_empty(), "the owner's other request is pending");
    assert!(
        view.cancel(second),
        "the owner's last answer asks for the lock"
    );
    assert_eq!(set.reclaim_and_let_go(&mut view).len(), 1);
    assert_eq!(set.filings(), 0);
}
