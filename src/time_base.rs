//! The process-wide time base: tokio instants as `u64` nanoseconds, so deadlines fit
//! in one atomic word.
//!
//! Every `tokio::time::Instant` wraps a `std::time::Instant`, including under a paused
//! clock (a paused runtime starts from the real time at which it was built and only
//! moves forward), so one base serves every runtime in the process, paused or not.
//! The base is taken a day before the first use, so instants a runtime created before
//! that use still map exactly. Both directions saturate instead of overflowing:
//! instants before the base map to 0 (always in the past), instants more than ~584
//! years after it map to `u64::MAX`.

use std::sync::OnceLock;
use std::time::Duration;
use tokio::time::Instant;

/// How far before the first use the base is placed (halved until the platform can
/// represent it).
const BASE_MARGIN: Duration = Duration::from_secs(24 * 60 * 60);

/// tokio's own cap for "far future" sleeps (about 30 years; longer overflows
/// `Instant` on some platforms).
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

static BASE: OnceLock<std::time::Instant> = OnceLock::new();

#[inline]
fn base() -> std::time::Instant {
    *BASE.get_or_init(|| {
        let now = std::time::Instant::now();
        let mut margin = BASE_MARGIN;
        while !margin.is_zero() {
            if let Some(base) = now.checked_sub(margin) {
                return base;
            }
            margin /= 2;
        }
        now
    })
}

/// A duration in nanoseconds, saturating at `u64::MAX` (~584 years).
#[inline]
pub(crate) fn duration_to_nanos(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(duration.subsec_nanos()))
}

/// An instant as nanoseconds since the base, saturating at both ends.
#[inline]
pub(crate) fn to_nanos(at: Instant) -> u64 {
    duration_to_nanos(at.into_std().saturating_duration_since(base()))
}

/// The instant `nanos` after the base. A saturated value (see `core::SATURATED`), or
/// one the platform cannot represent, maps to tokio's far future (now + ~30 years):
/// "never" must stay ahead of the clock even after the clock itself has saturated.
pub(crate) fn from_nanos(nanos: u64) -> Instant {
    if nanos >= crate::core::SATURATED {
        return far_future();
    }
    match base().checked_add(Duration::from_nanos(nanos)) {
        Some(at) => Instant::from_std(at),
        None => far_future(),
    }
}

/// `Instant::now() + FAR_FUTURE`, tokio's stand-in for "never".
pub(crate) fn far_future() -> Instant {
    Instant::now() + FAR_FUTURE
}

/// The tokio clock (paused or not) as nanoseconds since the base.
pub(crate) fn now_nanos() -> u64 {
    to_nanos(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact() {
        let now = Instant::now();
        for offset in [0u64, 1, 999, 1_000_000, 86_400_000_000_000] {
            let at = now + Duration::from_nanos(offset);
            assert_eq!(from_nanos(to_nanos(at)), at);
        }
    }

    #[test]
    fn instants_before_the_first_use_still_map() {
        let earlier = Instant::now() - Duration::from_secs(3600);
        assert!(to_nanos(earlier) > 0);
        assert_eq!(from_nanos(to_nanos(earlier)), earlier);
    }

    #[test]
    fn saturates_at_both_ends() {
        assert_eq!(duration_to_nanos(Duration::MAX), u64::MAX);
        assert_eq!(duration_to_nanos(Duration::from_nanos(7)), 7);
        let far = Instant::now() + Duration::from_secs(u64::MAX / 1_000_000_000 * 2);
        assert_eq!(to_nanos(far), u64::MAX);
        // Far past: whatever the platform allows, it maps to the base or later.
        let past = from_nanos(0);
        assert_eq!(to_nanos(past), 0);
        // Saturated: tokio's far future, ahead of any clock.
        assert!(from_nanos(u64::MAX) > Instant::now() + Duration::from_secs(86_400 * 365));
    }
}
