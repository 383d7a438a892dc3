//! `TimerKind`, `KindSet` and the `timer_kinds!` macro.

use std::fmt;
use std::marker::PhantomData;

/// A kind of deadline a [`SlotTimer`](crate::SlotTimer) tracks: RTO, TLP, PROBE0,
/// delayed ACK, keepalive, ...
///
/// Usually implemented by [`timer_kinds!`](crate::timer_kinds), which numbers the
/// variants in order. A hand-written implementation must keep `COUNT` in `1..=64`,
/// `index(k) < COUNT`, and `from_index(k.index()) == k`; `SlotTimer::new` checks
/// `COUNT` and panics with a clear message if it is out of range.
pub trait TimerKind: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// How many kinds there are (`1..=64`).
    const COUNT: usize;
    /// This kind's slot, `< COUNT`.
    fn index(self) -> usize;
    /// The kind in slot `index` (`index < COUNT`).
    fn from_index(index: usize) -> Self;
}

/// Declares an enum of timer kinds and implements [`TimerKind`] for it.
///
/// The macro adds `#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]` itself; other
/// attributes and doc comments pass through. Variants are unit variants without
/// explicit discriminants; at most 64 (checked at compile time).
///
/// # Examples
///
/// ```
/// lazy_deadline::timer_kinds! {
///     /// The timers of one TCP connection.
///     pub enum TcpTimer {
///         /// Retransmission timeout.
///         Rto,
///         /// Tail loss probe.
///         Tlp,
///         /// Zero-window probe.
///         Probe0,
///         /// Delayed acknowledgement.
///         DelAck,
///         /// Keepalive.
///         Keepalive,
///     }
/// }
/// use lazy_deadline::TimerKind;
/// assert_eq!(TcpTimer::COUNT, 5);
/// assert_eq!(TcpTimer::Probe0.index(), 2);
/// assert_eq!(TcpTimer::from_index(4), TcpTimer::Keepalive);
/// ```
#[macro_export]
macro_rules! timer_kinds {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$variant_meta])* $variant ),+
        }

        impl $crate::TimerKind for $name {
            const COUNT: usize = [$($name::$variant),+].len();

            #[inline]
            fn index(self) -> usize {
                self as usize
            }

            fn from_index(index: usize) -> Self {
                const ALL: &[$name] = &[$($name::$variant),+];
                ALL[index]
            }
        }

        const _: () = ::core::assert!(
            <$name as $crate::TimerKind>::COUNT <= 64,
            "timer_kinds!: at most 64 kinds"
        );
    };
}

/// A set of timer kinds: what [`SlotTimer::poll_expired`](crate::SlotTimer::poll_expired)
/// reports. A 64-bit mask; `Copy`, no allocation.
///
/// # Examples
///
/// ```
/// lazy_deadline::timer_kinds! { enum Kind { Rto, Tlp, DelAck } }
/// use lazy_deadline::KindSet;
///
/// let mut set = KindSet::new();
/// set.insert(Kind::DelAck);
/// set.insert(Kind::Rto);
/// assert!(set.contains(Kind::Rto) && !set.contains(Kind::Tlp));
/// assert_eq!(set.iter().collect::<Vec<_>>(), [Kind::Rto, Kind::DelAck]);
/// assert_eq!(format!("{set:?}"), "{Rto, DelAck}");
/// ```
pub struct KindSet<K> {
    bits: u64,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for KindSet<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for KindSet<K> {}
impl<K> PartialEq for KindSet<K> {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
    }
}
impl<K> Eq for KindSet<K> {}
impl<K> Default for KindSet<K> {
    fn default() -> Self {
        Self::from_bits(0)
    }
}
impl<K> std::hash::Hash for KindSet<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bits.hash(state);
    }
}

impl<K> KindSet<K> {
    /// The empty set.
    pub const fn new() -> Self {
        Self::from_bits(0)
    }

    pub(crate) const fn from_bits(bits: u64) -> Self {
        Self {
            bits,
            _kind: PhantomData,
        }
    }

    /// How many kinds are in the set.
    pub const fn len(&self) -> usize {
        self.bits.count_ones() as usize
    }

    /// Whether the set is empty.
    pub const fn is_empty(&self) -> bool {
        self.bits == 0
    }
}

impl<K: TimerKind> KindSet<K> {
    /// Whether `kind` is in the set.
    pub fn contains(&self, kind: K) -> bool {
        self.bits & bit(kind) != 0
    }

    /// Adds `kind`; returns whether it was newly added.
    pub fn insert(&mut self, kind: K) -> bool {
        let added = !self.contains(kind);
        self.bits |= bit(kind);
        added
    }

    /// Removes `kind`; returns whether it was there.
    pub fn remove(&mut self, kind: K) -> bool {
        let present = self.contains(kind);
        self.bits &= !bit(kind);
        present
    }

    /// The kinds in the set, in index order.
    pub fn iter(&self) -> Iter<K> {
        Iter {
            bits: self.bits,
            _kind: PhantomData,
        }
    }
}

/// The single bit of `kind`; an index out of range (a broken `TimerKind` impl) maps to
/// no bit rather than overflowing the shift.
fn bit<K: TimerKind>(kind: K) -> u64 {
    1u64.checked_shl(kind.index() as u32).unwrap_or(0)
}

impl<K: TimerKind> fmt::Debug for KindSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl<K: TimerKind> FromIterator<K> for KindSet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        let mut set = Self::new();
        iter.into_iter().for_each(|kind| {
            set.insert(kind);
        });
        set
    }
}

impl<K: TimerKind> IntoIterator for KindSet<K> {
    type Item = K;
    type IntoIter = Iter<K>;
    fn into_iter(self) -> Iter<K> {
        self.iter()
    }
}

impl<K: TimerKind> IntoIterator for &KindSet<K> {
    type Item = K;
    type IntoIter = Iter<K>;
    fn into_iter(self) -> Iter<K> {
        self.iter()
    }
}

/// Iterator over a [`KindSet`], in index order.
pub struct Iter<K> {
    bits: u64,
    _kind: PhantomData<fn() -> K>,
}

impl<K: TimerKind> Iterator for Iter<K> {
    type Item = K;
    fn next(&mut self) -> Option<K> {
        if self.bits == 0 {
            return None;
        }
        let index = self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Some(K::from_index(index))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bits.count_ones() as usize;
        (n, Some(n))
    }
}

impl<K: TimerKind> ExactSizeIterator for Iter<K> {}

impl<K> fmt::Debug for Iter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter").field("bits", &self.bits).finish()
    }
}
