//! Property-based paused-clock differential: `lazy_deadline::DelayQueue` against
//! tokio-util's `DelayQueue`, fed the same random inserts, resets (earlier, later,
//! into the past), removes and advances (sub-millisecond to seconds), with deadlines
//! on whole milliseconds and off them.
//!
//! After every operation both queues are drained of whatever they yield at that
//! instant. Properties:
//! - the same entries come out in the end, each once, a removed one never;
//! - never early: an entry comes out of ours at or after its final deadline, and
//!   `Expired::deadline` is exactly that deadline;
//! - never after tokio-util: when tokio-util yields an entry, ours has yielded it by
//!   the same instant;
//! - on whole milliseconds, at the same millisecond as tokio-util or one tick (1 ms)
//!   before it: tokio-util re-creates its own `Sleep` after each entry it yields, and
//!   when the next entry is due in the millisecond just passed, that `Sleep` only
//!   fires at the next turn of the driver; ours has the next entry due by the clock.

mod common;

use common::{paused_runtime, When};
use lazy_deadline::{delay_queue, DelayQueue};
use proptest::prelude::*;
use std::collections::HashMap;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{self, Instant};
use tokio_util::time::{delay_queue as peer_delay_queue, DelayQueue as PeerQueue};

const KEYS: usize = 8;

#[derive(Clone, Debug)]
enum Op {
    Insert(When),
    ResetAt(usize, When),
    Remove(usize),
    /// Whole milliseconds, or microseconds.
    Advance(u64, bool),
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![
        4 => (0u64..400).prop_map(When::Ms),
        3 => (0u64..400_000).prop_map(When::Us),
        1 => (0u64..50).prop_map(When::PastMs),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => when().prop_map(Op::Insert),
        3 => (0..KEYS, when()).prop_map(|(k, w)| Op::ResetAt(k, w)),
        1 => (0..KEYS).prop_map(Op::Remove),
        3 => prop_oneof![
            (0u64..30).prop_map(|ms| Op::Advance(ms, true)),
            (0u64..30_000).prop_map(|us| Op::Advance(us, false)),
        ],
    ]
}

/// Deadlines and advances on whole milliseconds only.
fn whole_ms_op() -> impl Strategy<Value = Op> {
    let when = prop_oneof![
        4 => (0u64..400).prop_map(When::Ms),
        1 => (0u64..50).prop_map(When::PastMs),
    ];
    prop_oneof![
        3 => when.clone().prop_map(Op::Insert),
        3 => (0..KEYS, when).prop_map(|(k, w)| Op::ResetAt(k, w)),
        1 => (0..KEYS).prop_map(Op::Remove),
        3 => (0u64..30).prop_map(|ms| Op::Advance(ms, true)),
    ]
}

struct Live {
    label: usize,
    ours: delay_queue::Key,
    peer: peer_delay_queue::Key,
    deadline: Instant,
}

fn run(ops: Vec<Op>, start_offset_us: u64) -> Result<(), TestCaseError> {
    paused_runtime().block_on(tokio::task::unconstrained(async move {
        // Off the grid, as a real clock usually is when a test starts.
        time::advance(Duration::from_micros(start_offset_us)).await;
        let mut ours = DelayQueue::new();
        let mut peer = PeerQueue::new();
        let start = Instant::now();
        let mut live: Vec<Option<Live>> = (0..KEYS).map(|_| None).collect();
        let mut labels = 0usize;
        // label -> (final deadline, whole ms from start?)
        let mut finals: HashMap<usize, (Instant, bool)> = HashMap::new();
        let mut ours_out: HashMap<usize, Instant> = HashMap::new();
        let mut peer_out: HashMap<usize, Instant> = HashMap::new();
        let on_grid = |at: Instant| (at.max(start) - start).subsec_nanos() % 1_000_000 == 0;
        let whole_ms_run = ops.iter().all(|op| {
            !matches!(op, Op::Advance(_, false))
                && !matches!(op, Op::Insert(When::Us(_)) | Op::ResetAt(_, When::Us(_)))
        });
        let tail = [Op::Advance(1_000, true)];
        // Drains both queues at this instant and checks the bounds (see `drain`).
        macro_rules! drain {
            () => {
                drain(
                    &mut ours,
                    &mut peer,
                    &finals,
                    &mut ours_out,
                    &mut peer_out,
                    start,
                )?
            };
        }
        for op in ops.into_iter().chain(tail) {
            let now = Instant::now();
            match op {
                Op::Insert(w) => {
                    if let Some(free) = live.iter().position(Option::is_none) {
                        let deadline = w.at(now);
                        let key = ours.insert_at(labels, deadline);
                        let peer_key = peer.insert_at(labels, deadline);
                        finals.insert(labels, (deadline, on_grid(deadline)));
                        live[free] = Some(Live {
                            label: labels,
                            ours: key,
                            peer: peer_key,
                            deadline,
                        });
                        labels += 1;
                    }
                }
                Op::ResetAt(k, w) => {
                    if let Some(entry) = live[k].as_mut() {
                        let deadline = w.at(now);
                        ours.reset_at(&entry.ours, deadline);
                        peer.reset_at(&entry.peer, deadline);
                        entry.deadline = deadline;
                        finals.insert(entry.label, (deadline, on_grid(deadline)));
                    }
                }
                Op::Remove(k) => {
                    if let Some(entry) = live[k].take() {
                        prop_assert_eq!(ours.remove(&entry.ours).into_inner(), entry.label);
                        prop_assert_eq!(peer.remove(&entry.peer).into_inner(), entry.label);
                        finals.remove(&entry.label);
                    }
                }
                Op::Advance(n, true) => {
                    // Whole milliseconds one at a time, both drained at each, so that
                    // "the same instant" means the same millisecond.
                    for _ in 0..n {
                        time::advance(Duration::from_millis(1)).await;
                        drain!();
                        if ours.is_empty() && peer.is_empty() {
                            break;
                        }
                    }
                }
                Op::Advance(n, false) => time::advance(Duration::from_micros(n)).await,
            }
            drain!();
            // An entry that came out leaves the model (its keys are stale now).
            for slot in live.iter_mut() {
                if slot
                    .as_ref()
                    .is_some_and(|e| ours_out.contains_key(&e.label))
                {
                    let entry = slot.take().unwrap();
                    prop_assert!(ours.try_remove(&entry.ours).is_none());
                }
            }
        }
        prop_assert_eq!(ours.len(), 0);
        prop_assert_eq!(peer.len(), 0);
        let mut ours_labels: Vec<_> = ours_out.keys().copied().collect();
        let mut peer_labels: Vec<_> = peer_out.keys().copied().collect();
        ours_labels.sort_unstable();
        peer_labels.sort_unstable();
        prop_assert_eq!(&ours_labels, &peer_labels);
        for (label, &(_, whole_ms)) in &finals {
            if whole_ms && whole_ms_run {
                let lead = peer_out[label] - ours_out[label];
                prop_assert!(
                    lead <= Duration::from_millis(1),
                    "label {} on whole milliseconds came out {:?} before tokio-util",
                    label,
                    lead
                );
            }
        }
        Ok(())
    }))
}

type Out = HashMap<usize, Instant>;

/// Drains both queues at the current instant and checks the bounds.
fn drain(
    ours: &mut DelayQueue<usize>,
    peer: &mut PeerQueue<usize>,
    finals: &HashMap<usize, (Instant, bool)>,
    ours_out: &mut Out,
    peer_out: &mut Out,
    start: Instant,
) -> Result<(), TestCaseError> {
    let now = Instant::now();
    let mut cx = Context::from_waker(Waker::noop());
    while let Poll::Ready(Some(expired)) = peer.poll_expired(&mut cx) {
        let label = expired.into_inner();
        prop_assert!(peer_out.insert(label, now).is_none());
    }
    while let Poll::Ready(Some(expired)) = ours.poll_expired(&mut cx) {
        let label = *expired.get_ref();
        let (deadline, _) = finals[&label];
        prop_assert!(
            now >= deadline,
            "label {} early by {:?}",
            label,
            deadline - now
        );
        prop_assert_eq!(expired.deadline(), deadline);
        prop_assert!(ours_out.insert(label, now).is_none(), "yielded twice");
    }
    for (label, &at) in peer_out.iter() {
        prop_assert!(
            ours_out.contains_key(label),
            "tokio-util yielded {} at {:?} and ours had not",
            label,
            at - start
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn delay_queue_matches_tokio_util(
        ops in prop::collection::vec(op(), 1..50),
        start_offset_us in 0u64..1_000,
    ) {
        run(ops, start_offset_us)?;
    }

    #[test]
    fn delay_queue_matches_tokio_util_on_whole_milliseconds(
        ops in prop::collection::vec(whole_ms_op(), 1..50),
        start_offset_us in 0u64..1_000,
    ) {
        run(ops, start_offset_us)?;
    }
}
