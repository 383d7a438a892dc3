//! Property-based paused-clock differential for `SlotTimer`: random sets (owner and
//! handle, `set`, `set_after`, `batch_at`, past deadlines and `Duration::MAX`
//! included), cancels (owner and handle), advances from sub-ms to seconds, and polls,
//! applied to ours and to a model of one `tokio::time::Sleep` per kind.
//! Properties: a kind is reported only after its deadline and only while set; every
//! kind whose model `Sleep` has fired has been reported; each set is reported once.

mod common;

use common::{paused_runtime, poll_once};
use lazy_deadline::{timer_kinds, KindSet, SlotTimer, TimerKind};
use proptest::prelude::*;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::time::{self, Instant};

timer_kinds! {
    enum Kind { A, B, C, D, E }
}

#[derive(Clone, Copy, Debug)]
enum Via {
    Owner,
    OwnerAfter,
    OwnerBatch,
    Handle,
    HandleAfter,
}

#[derive(Clone, Debug)]
enum Op {
    /// Set `kind` to now + offset µs (negative: already past), or to "never".
    Set {
        kind: usize,
        offset_us: Option<i64>,
        via: Via,
    },
    Cancel {
        kind: usize,
        handle: bool,
    },
    Advance(u64),
    Poll,
}

fn op() -> impl Strategy<Value = Op> {
    let via = prop_oneof![
        Just(Via::Owner),
        Just(Via::OwnerAfter),
        Just(Via::OwnerBatch),
        Just(Via::Handle),
        Just(Via::HandleAfter),
    ];
    let offset = prop_oneof![
        8 => (-50_000i64..3_000_000).prop_map(Some),
        1 => Just(None),
    ];
    prop_oneof![
        4 => (0..Kind::COUNT, offset, via).prop_map(|(kind, offset_us, via)| Op::Set { kind, offset_us, via }),
        1 => (0..Kind::COUNT, any::<bool>()).prop_map(|(kind, handle)| Op::Cancel { kind, handle }),
        3 => prop_oneof![0u64..2_000, 0u64..60_000, 0u64..4_000_000].prop_map(Op::Advance),
        2 => Just(Op::Poll),
    ]
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let mut ours = SlotTimer::<Kind>::new();
        let handle = ours.handle();
        let mut model: Vec<Option<Pin<Box<time::Sleep>>>> =
            (0..Kind::COUNT).map(|_| None).collect();
        for op in ops.into_iter().chain([Op::Poll]) {
            let now = Instant::now();
            match op {
                Op::Set {
                    kind: index,
                    offset_us,
                    via,
                } => {
                    let kind = Kind::from_index(index);
                    let after = match offset_us {
                        Some(us) if us >= 0 => Duration::from_micros(us as u64),
                        Some(_) => Duration::ZERO,
                        None => Duration::MAX,
                    };
                    let at = match offset_us {
                        Some(us) if us < 0 => now - Duration::from_micros(us.unsigned_abs()),
                        _ => now + after.min(Duration::from_secs(86_400 * 365 * 30)),
                    };
                    match via {
                        Via::Owner => ours.set(kind, at),
                        Via::OwnerAfter => ours.set_after(kind, after),
                        Via::OwnerBatch => ours.batch_at(now).set_after(kind, after),
                        Via::Handle => handle.set(kind, at),
                        Via::HandleAfter => handle.set_after(kind, after),
                    }
                    // Relative sets of a past offset are "due now" in both.
                    let model_at =
                        if matches!(via, Via::OwnerAfter | Via::OwnerBatch | Via::HandleAfter) {
                            now + after.min(Duration::from_secs(86_400 * 365 * 30))
                        } else {
                            at
                        };
                    model[index] = Some(Box::pin(time::sleep_until(model_at)));
                }
                Op::Cancel {
                    kind: index,
                    handle: h,
                } => {
                    let kind = Kind::from_index(index);
                    if h {
                        handle.cancel(kind)
                    } else {
                        ours.cancel(kind)
                    }
                    model[index] = None;
                }
                Op::Advance(us) => time::advance(Duration::from_micros(us)).await,
                Op::Poll => {}
            }
            let reported = match poll_once(Box::pin(ours.expired()).as_mut()) {
                Poll::Ready(set) => {
                    prop_assert!(!set.is_empty(), "ready with an empty set");
                    set
                }
                Poll::Pending => KindSet::new(),
            };
            for (index, slot) in model.iter_mut().enumerate() {
                let kind = Kind::from_index(index);
                if reported.contains(kind) {
                    let sleep = slot.take();
                    prop_assert!(
                        sleep.is_some(),
                        "{:?} reported while unset (twice, or after a cancel)",
                        kind
                    );
                    let deadline = sleep.unwrap().deadline();
                    prop_assert!(Instant::now() >= deadline, "{:?} reported early", kind);
                } else if let Some(sleep) = slot {
                    prop_assert!(
                        poll_once(sleep.as_mut()).is_pending(),
                        "{:?}: the model fired, ours did not report",
                        kind
                    );
                }
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn slot_timer_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
