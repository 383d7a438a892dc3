//! Paused-clock differential: random resets and advances applied to our `Sleep` and to
//! a `tokio::time::Sleep` with the same deadline. Ours is never ready before its
//! deadline, and is ready whenever tokio's is.

mod common;

use common::{paused_runtime, poll_once};
use proptest::prelude::*;
use std::time::Duration;
use tokio::time::{self, Instant};

#[derive(Clone, Debug)]
enum Op {
    /// Reset both to start + offset (microseconds; may be in the past).
    Reset(u64),
    /// Advance the paused clock (microseconds).
    Advance(u64),
    /// Poll both.
    Poll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..400_000).prop_map(Op::Reset),
        3 => prop_oneof![0u64..2_000, 0u64..50_000, 0u64..3_000_000].prop_map(Op::Advance),
        2 => Just(Op::Poll),
    ]
}

fn run(initial: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let start = Instant::now();
        let us = Duration::from_micros;
        let ours = lazy_deadline::sleep_until(start + us(initial));
        let theirs = time::sleep_until(start + us(initial));
        tokio::pin!(ours, theirs);
        let mut ours_done = false;
        for op in ops.into_iter().chain([Op::Poll]) {
            match op {
                Op::Reset(at) => {
                    ours.as_mut().reset(start + us(at));
                    theirs.as_mut().reset(start + us(at));
                    ours_done = false;
                }
                Op::Advance(d) => time::advance(us(d)).await,
                Op::Poll => {}
            }
            prop_assert_eq!(ours.deadline(), theirs.deadline());
            let tokio_ready = poll_once(theirs.as_mut()).is_ready();
            let ready = poll_once(ours.as_mut()).is_ready();
            if ready && !ours_done {
                prop_assert!(Instant::now() >= ours.deadline(), "ours fired early");
                ours_done = true;
            }
            prop_assert!(!tokio_ready || ready, "tokio's fired and ours did not");
        }
        // Let both run to completion: they finish at the same virtual instant.
        theirs.as_mut().await;
        let tokio_done = Instant::now();
        ours.as_mut().await;
        prop_assert_eq!(Instant::now(), tokio_done);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
    ))]

    #[test]
    fn sleep_matches_tokio(initial in 0u64..300_000, ops in prop::collection::vec(op(), 1..40)) {
        run(initial, ops)?;
    }
}
