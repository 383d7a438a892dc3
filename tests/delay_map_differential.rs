//! Property-based paused-clock differential: `DelayMap` against the pair many crates
//! write by hand (delay_map's shape): a `HashMap<K, (V, delay_queue::Key)>` beside a
//! tokio-util `DelayQueue<K>`, fed the same random inserts (new keys and
//! replacements), resets, removes, retains and advances.
//!
//! Properties, after every operation (both drained at that instant):
//! - the same pairs come out, with the value last inserted, each once;
//! - never early: a pair comes out of ours at or after its final deadline;
//! - never after the model: when the model yields a key, ours has yielded it.

mod common;

use common::paused_runtime;
use lazy_deadline::DelayMap;
use proptest::prelude::*;
use std::collections::HashMap;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{self, Instant};
use tokio_util::time::{delay_queue, DelayQueue};

#[derive(Clone, Debug)]
enum Op {
    Insert(u8, u32, u64),
    ResetAt(u8, u64),
    Remove(u8),
    /// Keep the keys whose bit is set.
    Retain(u16),
    AdvanceUs(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Deadlines in µs from now: whole milliseconds most of the time.
    let when = prop_oneof![
        3 => (0u64..300).prop_map(|ms| ms * 1_000),
        1 => 0u64..300_000,
    ];
    prop_oneof![
        4 => (0u8..12, any::<u32>(), when.clone()).prop_map(|(k, v, w)| Op::Insert(k, v, w)),
        3 => (0u8..12, when).prop_map(|(k, w)| Op::ResetAt(k, w)),
        1 => (0u8..12).prop_map(Op::Remove),
        1 => any::<u16>().prop_map(Op::Retain),
        3 => prop_oneof![(0u64..30).prop_map(|ms| ms * 1_000), 0u64..30_000].prop_map(Op::AdvanceUs),
    ]
}

struct Model {
    map: HashMap<u8, (u32, delay_queue::Key)>,
    queue: DelayQueue<u8>,
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(tokio::task::unconstrained(async move {
        let mut ours: DelayMap<u8, u32> = DelayMap::new();
        let mut model = Model {
            map: HashMap::new(),
            queue: DelayQueue::new(),
        };
        let mut finals: HashMap<u8, (Instant, u32)> = HashMap::new();
        let mut ours_out: Vec<(u8, u32)> = Vec::new();
        let mut model_out: Vec<(u8, u32)> = Vec::new();
        let tail = (0..1_000).map(|_| Op::AdvanceUs(1_000));
        for op in ops.into_iter().chain(tail) {
            let now = Instant::now();
            match op {
                Op::Insert(k, v, us) => {
                    let when = now + Duration::from_micros(us);
                    let replaced = ours.insert_at(k, v, when);
                    let previous = match model.map.get_mut(&k) {
                        Some((value, key)) => {
                            model.queue.reset_at(key, when);
                            Some(std::mem::replace(value, v))
                        }
                        None => {
                            let key = model.queue.insert_at(k, when);
                            model.map.insert(k, (v, key));
                            None
                        }
                    };
                    prop_assert_eq!(replaced, previous);
                    finals.insert(k, (when, v));
                }
                Op::ResetAt(k, us) => {
                    let when = now + Duration::from_micros(us);
                    let present = model.map.get(&k).map(|(_, key)| *key);
                    prop_assert_eq!(ours.reset_at(&k, when), present.is_some());
                    if let Some(key) = present {
                        model.queue.reset_at(&key, when);
                        finals.get_mut(&k).unwrap().0 = when;
                    }
                }
                Op::Remove(k) => {
                    let expected = model.map.remove(&k).map(|(v, key)| {
                        model.queue.remove(&key);
                        v
                    });
                    prop_assert_eq!(ours.remove(&k), expected);
                    finals.remove(&k);
                }
                Op::Retain(mask) => {
                    let keep = |k: &u8| mask & (1 << k) != 0;
                    ours.retain(|k, _| keep(k));
                    let gone: Vec<u8> = model.map.keys().copied().filter(|k| !keep(k)).collect();
                    for k in gone {
                        let (_, key) = model.map.remove(&k).unwrap();
                        model.queue.remove(&key);
                        finals.remove(&k);
                    }
                }
                Op::AdvanceUs(us) => time::advance(Duration::from_micros(us)).await,
            }
            let now = Instant::now();
            let mut cx = Context::from_waker(Waker::noop());
            while let Poll::Ready(Some(expired)) = model.queue.poll_expired(&mut cx) {
                let k = expired.into_inner();
                let (v, _) = model.map.remove(&k).unwrap();
                model_out.push((k, v));
            }
            while let Poll::Ready(Some((k, v))) = ours.poll_expired(&mut cx) {
                let (deadline, value) = finals.remove(&k).expect("yielded a key not in the map");
                prop_assert!(now >= deadline, "key {} early by {:?}", k, deadline - now);
                prop_assert_eq!(v, value);
                ours_out.push((k, v));
                // Ours may come out before the model (never after): the model's pair
                // would follow; take it out of the model now, so that later
                // operations on the same key mean the same thing to both.
                if let Some((model_value, key)) = model.map.remove(&k) {
                    model.queue.remove(&key);
                    prop_assert_eq!(model_value, v);
                    model_out.push((k, v));
                }
            }
            for pair in &model_out {
                prop_assert!(
                    ours_out.contains(pair),
                    "the model yielded {:?}, ours had not",
                    pair
                );
            }
            prop_assert_eq!(
                ours.len() + ours_out.len(),
                model.map.len() + model_out.len()
            );
            if ours.is_empty() && model.map.is_empty() {
                break;
            }
        }
        ours_out.sort_unstable();
        model_out.sort_unstable();
        prop_assert_eq!(ours_out, model_out);
        Ok(())
    }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn delay_map_matches_a_hash_map_beside_a_delay_queue(ops in prop::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
