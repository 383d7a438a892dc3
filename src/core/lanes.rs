//! `Lanes`: a deadline set's records in deadline order, without a heap.
//!
//! On one thread `now + d` only grows, so deadlines filed with the same `d` arrive
//! sorted: each lane is a deque of records kept in deadline order, and a record goes
//! to the lane whose last deadline is the latest not after its own (patience
//! sorting: a few durations interleaved take a lane each), or before the first of a
//! lane when deadlines come in decreasing order. A deadline that fits no lane's ends
//! goes to an ordered set. Expiring pops due records off the lanes' fronts and the
//! set's start; filing is an append or a prepend.
//!
//! Answered requests leave stale records (their slot says so). A lane sheds them
//! from its front as it grows and is compacted once stale records outnumber live
//! ones, so memory follows the requests in flight, not the ones answered under long
//! deadlines. The caller says what is live (`live(index, ticket)`).

use std::collections::{BTreeSet, VecDeque};

/// At most this many lanes (distinct request durations in flight at once, roughly);
/// deadlines that fit none go to the ordered set.
pub const MAX_LANES: usize = 4;

/// Stale records a lane keeps before it is compacted, whatever its live count.
pub(crate) const COMPACT_MIN: usize = 64;

/// Where a record is: a lane's index, or this for the ordered set.
pub(crate) const ORDERED: u8 = u8::MAX;

/// A request's deadline, and its slot and ticket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    pub deadline: u64,
    pub index: u32,
    pub ticket: u64,
}

#[derive(Debug, Default)]
struct Lane {
    records: VecDeque<Record>,
    /// The deadline of the record appended last (the lane's greatest).
    tail: u64,
    /// Records of requests still pending.
    live: usize,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    lanes: Vec<Lane>,
    ordered: BTreeSet<(u64, u32, u64)>,
}

impl Lanes {
    /// Files `record`; returns where (a lane, or [`ORDERED`]).
    #[inline]
    pub fn place(&mut self, record: Record, live: impl Fn(u32, u64) -> bool) -> u8 {
        let at = record.deadline;
        // The lane whose last deadline is the latest not after `at` (append), else
        // the one whose first is the earliest not before it (prepend: deadlines that
        // come in decreasing order, as the tasks a runtime's `yield_now` defers are
        // woken last first), else an empty lane, else a new one.
        let mut append: Option<usize> = None;
        let mut prepend: Option<(usize, u64)> = None;
        let mut empty = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            match lane.records.front() {
                None => empty = empty.or(Some(i)),
                Some(first) => {
                    if lane.tail <= at {
                        if append.is_none_or(|b: usize| lane.tail > self.lanes[b].tail) {
                            append = Some(i);
                        }
                    } else if at <= first.deadline
                        && prepend.is_none_or(|(_, head)| first.deadline < head)
                    {
                        prepend = Some((i, first.deadline));
                    }
                }
            }
        }
        let (lane, front) = match (append, prepend) {
            (Some(i), _) => (i, false),
            (None, Some((i, _))) => (i, true),
            (None, None) => {
                let new = empty.or_else(|| {
                    (self.lanes.len() < MAX_LANES).then(|| {
                        self.lanes.push(Lane::default());
                        self.lanes.len() - 1
                    })
                });
                let Some(i) = new else {
                    self.ordered.insert((at, record.index, record.ticket));
                    return ORDERED;
                };
                (i, false)
            }
        };
        let l = &mut self.lanes[lane];
        // Either end: a lane filed in decreasing order (or a request moved earlier
        // again and again) leaves its stale records at the front too.
        shed(l, &live);
        if front && !l.records.is_empty() {
            l.records.push_front(record);
        } else {
            l.records.push_back(record);
            l.tail = at;
        }
        l.live += 1;
        lane as u8
    }

    /// Takes one record due at or before `up_to` out, if there is one (lanes
    /// first, in no particular order across them; then the ordered set).
    #[inline]
    pub fn pop_due(&mut self, up_to: u64) -> Option<Record> {
        for lane in &mut self.lanes {
            if lane.records.front().is_some_and(|r| r.deadline <= up_to) {
                return lane.records.pop_front();
            }
        }
        let &(deadline, index, ticket) = self.ordered.first()?;
        if deadline > up_to {
            return None;
        }
        self.ordered.pop_first();
        Some(Record {
            deadline,
            index,
            ticket,
        })
    }

    /// The earliest live deadline (`None`: none); sheds the stale records it meets
    /// at the fronts.
    pub fn next(&mut self, live: impl Fn(u32, u64) -> bool) -> Option<u64> {
        let mut next: Option<u64> = None;
        for lane in &mut self.lanes {
            let before = lane.records.len();
            while let Some(&record) = lane.records.front() {
                if live(record.index, record.ticket) {
                    next = Some(next.map_or(record.deadline, |n| n.min(record.deadline)));
                    break;
                }
                lane.records.pop_front();
            }
            if lane.records.len() != before {
                shrink(&mut lane.records);
            }
        }
        while let Some(&(deadline, index, ticket)) = self.ordered.first() {
            if live(index, ticket) {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
                break;
            }
            self.ordered.pop_first();
        }
        next
    }

    /// The latest filed deadline (live or not) at or before `bound`, if any.
    /// (A plain loop: the iterator chain it replaced was inlined or not depending on
    /// how the crate's codegen units fell, 17 instructions a fire apart.)
    pub fn latest_at_or_before(&self, bound: u64) -> Option<u64> {
        let mut latest = self
            .ordered
            .range(..=(bound, u32::MAX, u64::MAX))
            .next_back()
            .map(|&(deadline, _, _)| deadline);
        for lane in &self.lanes {
            let at = lane.records.partition_point(|r| r.deadline <= bound);
            if let Some(record) = at.checked_sub(1).map(|i| &lane.records[i]) {
                latest = Some(latest.map_or(record.deadline, |l| l.max(record.deadline)));
            }
        }
        latest
    }

    /// A record of `lane` stopped being live without being popped: counts it out of
    /// its lane (where it stays, stale, until shed), or removes it from the ordered
    /// set. Inline: small, on every answer, and called from another module (whose
    /// codegen unit may not hold this one).
    #[inline]
    pub fn unqueue(&mut self, lane: u8, record: Record) {
        if lane == ORDERED {
            self.ordered
                .remove(&(record.deadline, record.index, record.ticket));
        } else {
            self.lane_done(lane);
        }
    }

    /// A live record of `lane` was popped and fired.
    #[inline]
    pub fn lane_done(&mut self, lane: u8) {
        if let Some(lane) = self.lanes.get_mut(lane as usize) {
            lane.live = lane.live.saturating_sub(1);
        }
    }

    /// Drops every record, and their memory.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Compacts each lane whose stale records outnumber its live ones, and gives
    /// back the capacity a burst left behind: O(1) per lane when there is nothing to
    /// do, else amortised over the answers that made the records stale. (The
    /// ordered set holds no stale record: cancels remove theirs.)
    #[inline]
    pub fn compact_sparse(&mut self, live: impl Fn(u32, u64) -> bool) {
        for lane in &mut self.lanes {
            if lane.records.len() > 2 * lane.live + COMPACT_MIN {
                lane.records.retain(|r| live(r.index, r.ticket));
            }
            shrink(&mut lane.records);
        }
    }

    /// Pending records (their count), for tests.
    #[cfg(any(test, lazy_deadline_loom))]
    pub fn pending(&self) -> usize {
        self.lanes.iter().map(|lane| lane.live).sum::<usize>() + self.ordered.len()
    }

    /// How many lanes there are, and whether the ordered set is used, for tests.
    #[cfg(all(test, not(lazy_deadline_loom)))]
    pub fn shape(&self) -> (usize, bool) {
        (self.lanes.len(), !self.ordered.is_empty())
    }

    /// Records held (stale ones included), for tests.
    #[cfg(all(test, not(lazy_deadline_loom)))]
    pub fn records(&self) -> usize {
        self.lanes.iter().map(|l| l.records.len()).sum::<usize>() + self.ordered.len()
    }

    /// Bytes held (capacity, not length).
    #[cfg(all(test, not(lazy_deadline_loom)))]
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.lanes
            .iter()
            .map(|lane| lane.records.capacity() * size_of::<Record>())
            .sum::<usize>()
            + self.ordered.len() * size_of::<(u64, u32, u64)>() * 2
    }
}

/// Sheds a lane's stale front records, and compacts it when stale records outnumber
/// live ones (amortised over the cancels that made them stale).
fn shed(lane: &mut Lane, live: &impl Fn(u32, u64) -> bool) {
    while lane
        .records
        .front()
        .is_some_and(|r| !live(r.index, r.ticket))
    {
        lane.records.pop_front();
    }
    if lane.records.len() > 2 * lane.live + COMPACT_MIN {
        compact(lane, live);
    }
    shrink(&mut lane.records);
}

/// Drops a lane's stale records wherever they are. Out of line (rare: amortised
/// over the cancels that made them stale), so that `shed`'s usual path, run at
/// every filing, stays a short loop: inlined, this took registers from it (about
/// 12 instructions a filing, depending on how the crate's codegen units fell).
#[cold]
#[inline(never)]
fn compact(lane: &mut Lane, live: &impl Fn(u32, u64) -> bool) {
    lane.records.retain(|r| live(r.index, r.ticket));
}

/// Gives back a lane's capacity once it is mostly unused (after a burst), keeping
/// room to grow again without reallocating at once.
#[inline]
fn shrink(records: &mut VecDeque<Record>) {
    let used = records.len().max(COMPACT_MIN);
    if records.capacity() > 4 * used {
        shrink_to(records, 2 * used);
    }
}

/// [`shrink`]'s rare part, out of line for the same reason as [`compact`].
#[cold]
#[inline(never)]
fn shrink_to(records: &mut VecDeque<Record>, capacity: usize) {
    records.shrink_to(capacity);
}
