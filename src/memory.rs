//! Heap accounting for `heap_bytes()`: what the standard collections allocate for a
//! given capacity, so the figures users read match what the allocator hands out.

/// Bytes a hash table (std's `HashMap`, hashbrown's `HashTable`: the same layout)
/// allocates for `capacity` (as its `capacity()` reports it) entries of
/// `entry_size` bytes: one slot and one control byte per bucket, plus one group of
/// trailing control bytes. Buckets are a power of two, at most 7/8 full (all but
/// one for fewer than 8).
pub(crate) fn hash_table_bytes(capacity: usize, entry_size: usize) -> usize {
    if capacity == 0 {
        return 0; // an empty table points at a static singleton
    }
    let buckets = if capacity < 7 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity / 7 * 8).next_power_of_two()
    };
    // The group width of the SIMD control-byte scan: 16 with SSE2, 8 otherwise.
    const GROUP: usize = if cfg!(all(target_arch = "x86_64", target_feature = "sse2")) {
        16
    } else {
        8
    };
    let data = (buckets * entry_size).next_multiple_of(GROUP);
    data + buckets + GROUP
}

/// Bytes of one `Arc<T>` allocation: the two counts and the value.
pub(crate) const fn arc_bytes<T>() -> usize {
    2 * std::mem::size_of::<usize>() + std::mem::size_of::<T>()
}

#[cfg(all(test, not(lazy_deadline_loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_load_factor() {
        assert_eq!(hash_table_bytes(0, 16), 0);
        let mut map = std::collections::HashMap::<u64, u64>::new();
        map.insert(1, 1);
        // 3 usable of 4 buckets.
        assert_eq!(map.capacity(), 3);
        assert!(hash_table_bytes(map.capacity(), 16) >= 4 * 16 + 4);
        for i in 0..10_000 {
            map.insert(i, i);
        }
        // 14336 usable of 16384 buckets.
        assert_eq!(map.capacity(), 14_336);
        let bytes = hash_table_bytes(map.capacity(), 16);
        assert!((16_384 * 17..16_384 * 17 + 32).contains(&bytes), "{bytes}");
    }
}
