//! Property-based paused-clock differential for `IdleQueue`: random inserts (default
//! and own timeouts), touches (now, older, in the future; by the owner and through
//! each key's `KeyHandle`), timeout changes both ways
//! (zero and `Duration::MAX` included), removes, advances from sub-millisecond to
//! seconds and polls, applied to ours and to a model of one plain tokio `Sleep` per
//! key, reset to `last_activity + timeout` after every change.
//!
//! Properties, after every operation (ours drained of everything it yields):
//! - never early: each yielded entry is in the model, its model deadline has passed,
//!   and `Expired::deadline` is exactly that deadline;
//! - not later than tokio: no model `Sleep` of a key still in the queue has fired;
//! - yielded in deadline order, each once, a removed key never.

mod common;

use common::{paused_runtime, poll_once};
use lazy_deadline::{IdleQueue, Key};
use proptest::prelude::*;
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;
use tokio::time::{self, Instant};

const KEYS: usize = 6;

#[derive(Clone, Copy, Debug)]
enum Timeout {
    Micros(u64),
    Zero,
    Max,
}

impl Timeout {
    fn duration(self) -> Duration {
        match self {
            Timeout::Micros(us) => Duration::from_micros(us),
            Timeout::Zero => Duration::ZERO,
            Timeout::Max => Duration::MAX,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        own: Option<Timeout>,
    },
    Touch {
        key: usize,
    },
    /// Activity at now + offset µs (negative: older, ignored).
    TouchAt {
        key: usize,
        offset_us: i64,
    },
    SetTimeout {
        key: usize,
        timeout: Timeout,
    },
    Remove {
        key: usize,
    },
    /// A `KeyHandle` touch at now + offset µs, from the handle of that key.
    HandleTouchAt {
        key: usize,
        offset_us: i64,
    },
    Advance(u64),
    Poll,
}

fn timeout() -> impl Strategy<Value = Timeout> {
    prop_oneof![
        8 => (1u64..3_000_000).prop_map(Timeout::Micros),
        1 => Just(Timeout::Zero),
        1 => Just(Timeout::Max),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => proptest::option::of(timeout()).prop_map(|own| Op::Insert { own }),
        2 => (0..KEYS).prop_map(|key| Op::Touch { key }),
        2 => (0..KEYS, -2_000_000i64..500_000).prop_map(|(key, offset_us)| Op::TouchAt { key, offset_us }),
        1 => (0..KEYS, timeout()).prop_map(|(key, timeout)| Op::SetTimeout { key, timeout }),
        1 => (0..KEYS).prop_map(|key| Op::Remove { key }),
        2 => (0..KEYS, -2_000_000i64..500_000).prop_map(|(key, offset_us)| Op::HandleTouchAt { key, offset_us }),
        3 => prop_oneof![0u64..2_000, 0u64..60_000, 0u64..4_000_000].prop_map(Op::Advance),
        1 => Just(Op::Poll),
    ]
}

/// `at + d`, or tokio's far future when that overflows or exceeds it.
fn deadline_of(at: Instant, d: Duration) -> Instant {
    let far = Instant::now() + Duration::from_secs(86_400 * 365 * 30);
    at.checked_add(d).map_or(far, |deadline| deadline.min(far))
}

struct ModelEntry {
    key: Key,
    handle: lazy_deadline::KeyHandle,
    last: Instant,
    timeout: Duration,
    sleep: Pin<Box<time::Sleep>>,
}

impl ModelEntry {
    fn rearm(&mut self) {
        let deadline = deadline_of(self.last, self.timeout);
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
    }
}

fn run(default: Timeout, ops: Vec<Op>) -> Result<(), TestCaseError> {
    // Unconstrained: budget exhaustion is tested elsewhere; here both sides must
    // answer every poll on its merits.
    paused_runtime().block_on(tokio::task::unconstrained(async move {
        let mut ours = IdleQueue::new(default.duration());
        // Slot i of the model: the i-th key inserted that is still live, by label.
        let mut model: Vec<Option<ModelEntry>> = (0..KEYS).map(|_| None).collect();
        let mut labels = 0usize;
        for op in ops.into_iter().chain([Op::Poll]) {
            let now = Instant::now();
            match op {
                Op::Insert { own } => {
                    let Some(free) = model.iter().position(Option::is_none) else {
                        continue;
                    };
                    let timeout = own.unwrap_or(default).duration();
                    let key = match own {
                        Some(t) => ours.insert_with_timeout(labels, t.duration()),
                        None => ours.insert(labels),
                    };
                    labels += 1;
                    let sleep = Box::pin(time::sleep_until(deadline_of(now, timeout)));
                    let handle = ours.handle(key).expect("a live key has a handle");
                    model[free] = Some(ModelEntry {
                        key,
                        handle,
                        last: now,
                        timeout,
                        sleep,
                    });
                }
                Op::Touch { key } => {
                    if let Some(entry) = model[key].as_mut() {
                        prop_assert!(ours.touch(entry.key));
                        entry.last = entry.last.max(now);
                        entry.rearm();
                    }
                }
                Op::TouchAt { key, offset_us } => {
                    if let Some(entry) = model[key].as_mut() {
                        let at = if offset_us >= 0 {
                            now + Duration::from_micros(offset_us as u64)
                        } else {
                            now.checked_sub(Duration::from_micros(offset_us.unsigned_abs()))
                                .unwrap_or(now)
                        };
                        prop_assert!(ours.touch_at(entry.key, at));
                        entry.last = entry.last.max(at);
                        entry.rearm();
                    }
                }
                Op::SetTimeout { key, timeout } => {
                    if let Some(entry) = model[key].as_mut() {
                        prop_assert!(ours.set_timeout(entry.key, timeout.duration()));
                        entry.timeout = timeout.duration();
                        entry.rearm();
                    }
                }
                Op::Remove { key } => {
                    if let Some(entry) = model[key].take() {
                        prop_assert!(ours.remove(entry.key).is_some());
                        prop_assert!(!ours.contains(entry.key));
                        prop_assert!(!entry.handle.touch(), "a removed key's handle is live");
                    }
                }
                Op::HandleTouchAt { key, offset_us } => {
                    if let Some(entry) = model[key].as_mut() {
                        let at = if offset_us >= 0 {
                            now + Duration::from_micros(offset_us as u64)
                        } else {
                            now.checked_sub(Duration::from_micros(offset_us.unsigned_abs()))
                                .unwrap_or(now)
                        };
                        prop_assert!(entry.handle.touch_at(at));
                        entry.last = entry.last.max(at);
                        entry.rearm();
                    }
                }
                Op::Advance(us) => time::advance(Duration::from_micros(us)).await,
                Op::Poll => {}
            }
            // Model first (as a task woken by its driver would see it), then ours.
            let fired: Vec<bool> = model
                .iter_mut()
                .map(|slot| {
                    slot.as_mut()
                        .is_some_and(|e| poll_once(e.sleep.as_mut()).is_ready())
                })
                .collect();
            let mut previous = None;
            while let Poll::Ready(expired) = poll_once(pin!(ours.expired())) {
                let index = model
                    .iter()
                    .position(|slot| slot.as_ref().is_some_and(|e| e.key == expired.key()));
                prop_assert!(
                    index.is_some(),
                    "yielded a key not in the queue (twice, or removed)"
                );
                let entry = model[index.unwrap()].take().unwrap();
                prop_assert!(!entry.handle.touch(), "an expired key's handle is live");
                let deadline = entry.sleep.deadline();
                prop_assert!(
                    Instant::now() >= deadline,
                    "yielded {:?} early",
                    deadline - Instant::now()
                );
                prop_assert_eq!(expired.deadline(), deadline);
                prop_assert!(
                    previous.is_none_or(|p| p <= deadline),
                    "out of deadline order"
                );
                previous = Some(deadline);
            }
            for (index, slot) in model.iter().enumerate() {
                prop_assert!(
                    !(fired[index] && slot.is_some()),
                    "the model fired for key {} and ours did not yield it",
                    index
                );
            }
            prop_assert_eq!(ours.len(), model.iter().flatten().count());
        }
        Ok(())
    }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn idle_queue_matches_model(default in timeout(), ops in prop::collection::vec(op(), 1..60)) {
        run(default, ops)?;
    }
}
