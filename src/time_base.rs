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
//!
//! # Why the conversion reads an `Instant` through `Hash`
//!
//! The natural conversion, `at.saturating_duration_since(base)` and then seconds times
//! 10^9 plus nanoseconds, costs ~4.5 ns here: std's instant subtraction is an opaque,
//! non-inlined call (the platform `Timespec` code) that normalises a nanosecond borrow
//! and builds a `Duration`, and the caller then saturates it back into one integer.
//! Every `touch_at`, `set` and handle call paid it. `Instant`'s derived `Hash` is
//! generic and so inlined into our code; on the platforms we know it writes the
//! seconds and then the nanoseconds of the instant. [`Parts`] captures those two
//! writes, and the conversion becomes one 128-bit multiply and a subtraction (~1 ns).
//! Nothing is assumed: when the base is taken, the fast path is checked against the
//! std path on instants from one nanosecond to days apart, and it is used only if
//! every one agrees (and per call only if the writes had the expected shape);
//! otherwise every conversion takes the std path.

use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::time::Instant;

/// How far before the first use the base is placed (halved until the platform can
/// represent it).
const BASE_MARGIN: Duration = Duration::from_secs(24 * 60 * 60);

/// tokio's timer tick (see `core::service::TICK_NANOS`, where the deadline sets use
/// it): what a clock reading may declare passed is only what is a whole tick behind
/// it (`DelayQueue`, the per-request deadline sets); newer deadlines wait for an entry.
pub(crate) const TICK_NANOS: u64 = crate::core::service::TICK_NANOS;

/// tokio's own cap for "far future" sleeps (about 30 years; longer overflows
/// `Instant` on some platforms).
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

const NANOS_PER_SEC: u32 = 1_000_000_000;

/// The base instant, and its parts when the fast conversion was validated.
struct Base {
    instant: std::time::Instant,
    /// `Some((seconds, nanoseconds))` of `instant` if [`parts`] agrees with std.
    parts: Option<(i64, u32)>,
    /// The instant that stands for "never" (a saturated deadline), and its offset
    /// from `instant`: every instant at or past it converts back to "never", so a
    /// saturated deadline read out and given back stays saturated.
    never: std::time::Instant,
    never_nanos: u64,
}

static BASE: OnceLock<Base> = OnceLock::new();

#[inline]
fn base() -> &'static Base {
    BASE.get_or_init(|| {
        let now = std::time::Instant::now();
        let mut instant = now;
        let mut margin = BASE_MARGIN;
        while !margin.is_zero() {
            if let Some(base) = now.checked_sub(margin) {
                instant = base;
                break;
            }
            margin /= 2;
        }
        let parts = parts(instant).filter(|&base_parts| fast_path_agrees(instant, base_parts));
        let (never, never_nanos) = never_after(instant);
        Base {
            instant,
            parts,
            never,
            never_nanos,
        }
    })
}

/// The instant that stands for "never": `SATURATED` nanoseconds after the base
/// (~584 years) where the platform can name it with room to spare (tokio adds a
/// tick to every deadline it registers), else the furthest such point halving down
/// to tokio's own far future (~30 years).
fn never_after(base: std::time::Instant) -> (std::time::Instant, u64) {
    let room = Duration::from_secs(1);
    let mut offset = crate::core::SATURATED;
    loop {
        let at = base.checked_add(Duration::from_nanos(offset));
        if let Some(at) = at.filter(|at| at.checked_add(room).is_some()) {
            return (at, offset);
        }
        if offset / 2 < duration_to_nanos(FAR_FUTURE) {
            // Not even tokio's far future fits after the base: the platform's own
            // limit is "never".
            let offset = duration_to_nanos(FAR_FUTURE);
            return (base + Duration::from_nanos(offset), offset);
        }
        offset /= 2;
    }
}

/// A `Hasher` that records the two writes `Instant`'s derived `Hash` makes (seconds
/// as `i64` or `u64`, then nanoseconds as `u32`); any other shape marks it invalid.
#[derive(Default)]
struct Parts {
    secs: i64,
    nanos: u32,
    writes: u8,
    invalid: bool,
}

impl Hasher for Parts {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {
        self.invalid = true;
    }
    #[inline]
    fn write_i64(&mut self, secs: i64) {
        self.invalid |= self.writes != 0;
        self.secs = secs;
        self.writes += 1;
    }
    #[inline]
    fn write_u64(&mut self, secs: u64) {
        self.invalid |= self.writes != 0 || secs > i64::MAX as u64;
        self.secs = secs as i64;
        self.writes += 1;
    }
    #[inline]
    fn write_u32(&mut self, nanos: u32) {
        self.invalid |= self.writes != 1 || nanos >= NANOS_PER_SEC;
        self.nanos = nanos;
        self.writes += 1;
    }
}

/// The (seconds, nanoseconds) an instant hashes as, if the writes had the shape above.
#[inline]
fn parts(at: std::time::Instant) -> Option<(i64, u32)> {
    let mut parts = Parts::default();
    at.hash(&mut parts);
    (!parts.invalid && parts.writes == 2).then_some((parts.secs, parts.nanos))
}

/// Nanoseconds from `base` to `at` computed from their parts, saturating at both ends
/// exactly as the std path does. `None` if `at` did not hash in the expected shape.
#[inline]
fn fast_nanos_since(at: std::time::Instant, (base_secs, base_nanos): (i64, u32)) -> Option<u64> {
    let (secs, nanos) = parts(at)?;
    // i128: the difference of two i64 seconds, times 10^9, cannot overflow it.
    let since = (i128::from(secs) - i128::from(base_secs)) * i128::from(NANOS_PER_SEC)
        + i128::from(nanos)
        - i128::from(base_nanos);
    Some(since.clamp(0, i128::from(u64::MAX)) as u64)
}

/// The std path: what the fast path must equal.
fn std_nanos_since(at: std::time::Instant, base: std::time::Instant) -> u64 {
    duration_to_nanos(at.saturating_duration_since(base))
}

/// Checks the fast path against std on instants around the base, a nanosecond to
/// days apart, with and without a nanosecond borrow.
fn fast_path_agrees(base: std::time::Instant, base_parts: (i64, u32)) -> bool {
    let offsets = [
        0,
        1,
        999_999_999,
        1_000_000_000,
        1_000_000_001,
        1_500_000_000,
        2_999_999_999,
        86_400_000_000_007,
        BASE_MARGIN.as_nanos() as u64 * 3 + 123_456_789,
    ];
    offsets.iter().all(|&offset| {
        let Some(at) = base.checked_add(Duration::from_nanos(offset)) else {
            return true; // not representable here: nothing to compare
        };
        let later =
            std_nanos_since(at, base) == offset && fast_nanos_since(at, base_parts) == Some(offset);
        let earlier = match base.checked_sub(Duration::from_nanos(offset)) {
            Some(before) => fast_nanos_since(before, base_parts) == Some(0),
            None => true,
        };
        later && earlier
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

/// An instant as nanoseconds since the base, saturating at both ends: instants
/// before the base map to 0, and the "never" instant and anything past it to
/// `u64::MAX` (saturated).
#[inline]
pub(crate) fn to_nanos(at: Instant) -> u64 {
    let base = base();
    let at = at.into_std();
    let nanos = match base.parts.and_then(|parts| fast_nanos_since(at, parts)) {
        Some(nanos) => nanos,
        None => std_nanos_since(at, base.instant),
    };
    if nanos >= base.never_nanos {
        u64::MAX
    } else {
        nanos
    }
}

/// How many nanoseconds `later` is past `earlier`, if it is later and that fits in a
/// `u64` (584 years). From the instants' parts where the fast path holds (checked
/// against std once, with the base), else std's subtraction: a later reset of a
/// `Sleep` on tokio's entry stores this, so it is on a connection's per-packet path.
#[inline]
pub(crate) fn nanos_after(earlier: Instant, later: Instant) -> Option<u64> {
    let (earlier, later) = (earlier.into_std(), later.into_std());
    if base().parts.is_some() {
        if let (Some((s0, n0)), Some((s1, n1))) = (parts(earlier), parts(later)) {
            let since = (i128::from(s1) - i128::from(s0)) * i128::from(NANOS_PER_SEC)
                + i128::from(n1)
                - i128::from(n0);
            return u64::try_from(since).ok().filter(|&nanos| nanos > 0);
        }
    }
    u64::try_from(later.checked_duration_since(earlier)?.as_nanos())
        .ok()
        .filter(|&nanos| nanos > 0)
}

/// The instant `nanos` after the base. A saturated value (see `core::SATURATED`), or
/// one past the "never" instant, maps to that instant, which [`to_nanos`] maps back
/// to saturated: a deadline that was "never" stays "never" when read out and given
/// back (`reset_at(queue.deadline(&key))`).
pub(crate) fn from_nanos(nanos: u64) -> Instant {
    let base = base();
    if nanos >= base.never_nanos {
        return Instant::from_std(base.never);
    }
    Instant::from_std(base.instant + Duration::from_nanos(nanos))
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
    fn the_fast_path_is_validated_here_and_equals_std() {
        // On the platforms CI runs on, the fast path must be in use (else the
        // conversion silently costs 4x); where it is, it must equal std exactly.
        let base = base();
        let parts = match base.parts {
            Some(parts) => parts,
            None if cfg!(target_os = "linux") => {
                panic!("Instant should hash as (seconds, nanoseconds) on this platform")
            }
            None => return, // another layout: every conversion takes the std path
        };
        let now = std::time::Instant::now();
        let mut at = now;
        for step in [1u64, 7, 999_999_999, 1_000_000_001, 123_456_789_012] {
            at += Duration::from_nanos(step);
            assert_eq!(
                fast_nanos_since(at, parts),
                Some(std_nanos_since(at, base.instant))
            );
        }
        let before = base.instant.checked_sub(Duration::from_nanos(1));
        if let Some(before) = before {
            assert_eq!(fast_nanos_since(before, parts), Some(0));
        }
        let far = now + Duration::from_secs(u64::MAX / 1_000_000_000 * 2);
        assert_eq!(fast_nanos_since(far, parts), Some(u64::MAX));
        assert_eq!(std_nanos_since(far, base.instant), u64::MAX);
    }

    #[test]
    fn a_hasher_of_another_shape_is_refused() {
        let mut parts = Parts::default();
        parts.write_u32(5);
        assert!(parts.invalid);
        let mut parts = Parts::default();
        parts.write_i64(5);
        parts.write_u32(NANOS_PER_SEC);
        assert!(parts.invalid);
        let mut parts = Parts::default();
        parts.write_i64(5);
        parts.write_u32(5);
        parts.write_u32(5);
        assert!(parts.invalid);
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
        // Saturated: far ahead of any clock, and back to saturated.
        assert!(from_nanos(u64::MAX) > Instant::now() + Duration::from_secs(86_400 * 365 * 29));
        assert_eq!(to_nanos(from_nanos(u64::MAX)), u64::MAX);
        assert_eq!(to_nanos(from_nanos(crate::core::SATURATED)), u64::MAX);
        assert!(to_nanos(from_nanos(crate::core::SATURATED - 1)) >= crate::core::SATURATED - 1);
    }
}
