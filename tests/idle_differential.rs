//! Property-based paused-clock differential for `IdleTimeout`: random touches (owner
//! and handle, now or at an offset, older ones included), timeout changes (owner and
//! handle, shorter and longer, zero and `Duration::MAX`), advances from sub-ms to
//! seconds, and polls, applied to ours and to a model: one `tokio::time::Sleep` reset
//! to `max(activity) + timeout` after every change.
//! Ours never resolves before that deadline, and is ready whenever the model is.

mod common;

use common::{paused_runtime, poll_once};
use lazy_deadline::IdleTimeout;
use proptest::prelude::*;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{self, Instant};

#[derive(Clone, Debug)]
enum Op {
    Touch {
        handle: bool,
    },
    /// Activity at now + offset µs (negative: older, must be ignored).
    TouchAt {
        handle: bool,
        offset_us: i64,
    },
    SetTimeout {
        handle: bool,
        timeout: Timeout,
    },
    Advance(u64),
    Poll,
}

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

fn timeout() -> impl Strategy<Value = Timeout> {
    prop_oneof![
        8 => (1u64..3_000_000).prop_map(Timeout::Micros),
        1 => Just(Timeout::Zero),
        1 => Just(Timeout::Max),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => any::<bool>().prop_map(|handle| Op::Touch { handle }),
        2 => (any::<bool>(), -2_000_000i64..500_000).prop_map(|(handle, offset_us)| Op::TouchAt { handle, offset_us }),
        1 => (any::<bool>(), timeout()).prop_map(|(handle, timeout)| Op::SetTimeout { handle, timeout }),
        3 => prop_oneof![0u64..2_000, 0u64..60_000, 0u64..4_000_000].prop_map(Op::Advance),
        2 => Just(Op::Poll),
    ]
}

/// `at + d`, or tokio's far future when that overflows or exceeds it.
fn deadline_of(at: Instant, d: Duration) -> Instant {
    let far = Instant::now() + Duration::from_secs(86_400 * 365 * 30);
    at.checked_add(d).map_or(far, |deadline| deadline.min(far))
}

fn run(initial: Timeout, ops: Vec<Op>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let mut ours = IdleTimeout::new(initial.duration());
        let handle = ours.handle();
        let (mut last, mut timeout) = (Instant::now(), initial.duration());
        let mut model = Box::pin(time::sleep_until(deadline_of(last, timeout)));
        for op in ops.into_iter().chain([Op::Poll]) {
            let now = Instant::now();
            match op {
                Op::Touch { handle: h } => {
                    if h {
                        handle.touch()
                    } else {
                        ours.touch()
                    }
                    last = last.max(now);
                }
                Op::TouchAt {
                    handle: h,
                    offset_us,
                } => {
                    let at = if offset_us >= 0 {
                        now + Duration::from_micros(offset_us as u64)
                    } else {
                        now.checked_sub(Duration::from_micros(offset_us.unsigned_abs()))
                            .unwrap_or(now)
                    };
                    if h {
                        handle.touch_at(at)
                    } else {
                        ours.touch_at(at)
                    }
                    last = last.max(at);
                }
                Op::SetTimeout {
                    handle: h,
                    timeout: t,
                } => {
                    if h {
                        handle.set_timeout(t.duration())
                    } else {
                        ours.set_timeout(t.duration())
                    }
                    timeout = t.duration();
                }
                Op::Advance(us) => time::advance(Duration::from_micros(us)).await,
                Op::Poll => {}
            }
            let deadline = deadline_of(last, timeout);
            if model.deadline() != deadline {
                model.as_mut().reset(deadline);
            }
            prop_assert_eq!(ours.last_activity(), last);
            let model_ready = poll_once(model.as_mut()).is_ready();
            let ready = poll_once(Pin::new(&mut ours)).is_ready();
            if ready {
                prop_assert!(
                    Instant::now() >= deadline,
                    "ours resolved before {:?}",
                    deadline - Instant::now()
                );
            }
            prop_assert!(!model_ready || ready, "the model fired and ours did not");
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn idle_timeout_matches_model(initial in timeout(), ops in prop::collection::vec(op(), 1..50)) {
        run(initial, ops)?;
    }
}
