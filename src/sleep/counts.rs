//! A `Sleep`'s counts of registrations and fires (its `stats()`), kept small.

use crate::stats::Stats;

/// `Stats` in less room (saturating): a `Sleep` is moved around by value. `u32`s in
/// the deadline set's place; `u16`s on tokio's entry, where a `Sleep` must stay
/// within 128 bytes (see the type's `place`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts<T = u32> {
    registrations: T,
    fires: T,
}

/// A saturating count.
pub(super) trait Count: Copy + Default + Into<u64> {
    fn plus_one(self) -> Self;
}

impl Count for u16 {
    #[inline]
    fn plus_one(self) -> Self {
        self.saturating_add(1)
    }
}

impl Count for u32 {
    #[inline]
    fn plus_one(self) -> Self {
        self.saturating_add(1)
    }
}

impl<T: Count> Counts<T> {
    #[inline]
    pub(super) fn registered(&mut self) {
        self.registrations = self.registrations.plus_one();
    }

    #[inline]
    pub(super) fn fired(&mut self) {
        self.fires = self.fires.plus_one();
    }

    pub(super) fn stats(self) -> Stats {
        Stats {
            registrations: self.registrations.into(),
            entry_fires: self.fires.into(),
        }
    }
}
