use super::*;

fn expired<T>(popped: Popped<T>) -> (Key, u64, T) {
    match popped {
        Popped::Expired {
            key,
            deadline,
            value,
        } => (key, deadline, value),
        _ => panic!("expected an expiry"),
    }
}

fn idle(last_activity: u64, timeout: u64) -> Idle {
    Idle {
        last_activity,
        timeout,
    }
}

type IdleCore<T> = KeyedCore<T, Idle>;
type AtCore<T> = KeyedCore<T, At>;

#[test]
fn untouched_entry_expires_at_its_deadline() {
    let mut q = IdleCore::with_capacity(0);
    let k = q.insert("a", idle(0, 100));
    assert_eq!(q.pop_expired(99, 10), Popped::NotYet(Some(100)));
    let (key, deadline, value) = expired(q.pop_expired(100, 10));
    assert_eq!((key, deadline, value), (k, 100, "a"));
    assert_eq!(q.len(), 0);
    assert!(!q.touch_at(k, 5));
    assert_eq!(q.pop_expired(1_000, 10), Popped::NotYet(None));
}

#[test]
fn touches_are_stores_and_refile_once_per_period() {
    let mut q = IdleCore::with_capacity(0);
    let k = q.insert((), idle(0, 100));
    for t in 1..=99 {
        assert!(q.touch_at(k, t));
    }
    assert_eq!(q.records(), 1, "touching files nothing");
    assert!(!q.earliest_is_settled());
    assert_eq!(q.pop_expired(100, 10), Popped::NotYet(Some(199)));
    assert!(q.earliest_is_settled());
    assert_eq!(q.refiles(), 1);
    assert!(q.touch_at(k, 50)); // older: ignored
    assert_eq!(q.timing(k), Some(idle(99, 100)));
    assert_eq!(expired(q.pop_expired(199, 10)).1, 199);
}

#[test]
fn due_entries_come_out_in_deadline_order() {
    let mut q = IdleCore::with_capacity(0);
    let a = q.insert('a', idle(0, 10)); // filed at 10, touched to 15
    q.insert('b', idle(0, 12));
    q.insert('c', idle(0, 11));
    q.touch_at(a, 5);
    let order: Vec<_> = (0..3).map(|_| expired(q.pop_expired(20, 10)).2).collect();
    assert_eq!(order, ['c', 'b', 'a']);
}

#[test]
fn shortening_is_due_at_once_and_longer_is_a_store() {
    let mut q = IdleCore::with_capacity(0);
    let k = q.insert((), idle(0, 1_000));
    assert!(q.set_timeout(k, 2_000));
    assert_eq!(q.records(), 1);
    assert!(q.set_timeout(k, 10));
    assert_eq!(expired(q.pop_expired(10, 10)).1, 10);
    // The old record at 1000 is stale and skipped.
    assert_eq!(q.pop_expired(5_000, 10), Popped::NotYet(None));
}

#[test]
fn reset_at_later_is_a_store_and_earlier_files_a_record() {
    let mut q = AtCore::with_capacity(0);
    let k = q.insert("x", At::new(100));
    assert_eq!(q.reset_at(k, 300), Some(false));
    assert_eq!(q.records(), 1, "later: nothing filed");
    assert_eq!(q.reset_at(k, 200), Some(true), "earlier than 300");
    assert_eq!(q.records(), 2);
    assert_eq!(q.peek(), Some((k, 200)));
    // The record at 100 is stale (a later filing exists); 200 is the live one.
    assert_eq!(q.pop_expired(150, 10), Popped::NotYet(Some(200)));
    assert_eq!(expired(q.pop_expired(200, 10)), (k, 200, "x"));
    assert_eq!(q.reset_at(k, 5), None);
}

#[test]
fn peek_finds_the_earliest_also_when_the_top_moved_later() {
    let mut q = AtCore::with_capacity(0);
    let a = q.insert('a', At::new(10));
    let b = q.insert('b', At::new(20));
    assert_eq!(q.peek(), Some((a, 10)));
    q.reset_at(a, 30);
    assert_eq!(q.peek(), Some((b, 20)), "the scan path");
    assert_eq!(q.settle_earliest(10), Some(Some(20)));
    assert_eq!(q.peek(), Some((b, 20)), "the settled path");
}

#[test]
fn stale_keys_never_reach_a_later_entry() {
    let mut q = IdleCore::with_capacity(0);
    let old = q.insert(1, idle(0, 10));
    assert_eq!(q.remove(old).map(|(v, _)| v), Some(1));
    let new = q.insert(2, idle(0, 10));
    assert_ne!(old, new);
    assert_eq!(q.get(old), None);
    assert!(q.remove(old).is_none());
    assert!(!q.set_timeout(old, 1));
    assert_eq!(q.get(new), Some(&2));
    // The removed entry's record is skipped; only the new one expires.
    assert_eq!(expired(q.pop_expired(10, 10)).2, 2);
    assert_eq!(q.pop_expired(10, 10), Popped::NotYet(None));
}

#[test]
fn a_slot_is_retired_before_its_generation_wraps() {
    let mut q = AtCore::with_capacity(0);
    let first = q.insert(0u32, At::new(1));
    q.slots[0].generation = RETIRED - 1;
    let last = Key {
        index: 0,
        generation: RETIRED - 1,
    };
    assert_eq!(q.remove(first).map(|(v, _)| v), None, "generation moved on");
    assert_eq!(q.remove(last).map(|(v, _)| v), Some(0));
    let next = q.insert(1, At::new(1));
    assert_eq!(next.index, 1, "slot 0 is retired, not reused");
    assert_eq!(q.get(first), None);
    assert_eq!(q.get(last), None);
}

#[test]
fn work_is_bounded_per_call() {
    let mut q = IdleCore::with_capacity(0);
    let keys: Vec<_> = (0..10).map(|i| q.insert(i, idle(0, 10))).collect();
    for &k in &keys {
        q.touch_at(k, 5);
    }
    assert_eq!(q.pop_expired(10, 4), Popped::Busy);
    assert_eq!(q.pop_expired(10, 4), Popped::Busy);
    assert_eq!(q.pop_expired(10, 4), Popped::NotYet(Some(15)));
    assert_eq!(q.refiles(), 10);
}

#[test]
fn stale_records_are_purged_past_a_quarter() {
    let mut q = IdleCore::with_capacity(0);
    let keys: Vec<_> = (0..400).map(|i| q.insert(i, idle(0, 10))).collect();
    for &k in &keys[..100] {
        q.remove(k);
    }
    assert_eq!(q.records(), 400, "a quarter exactly: not yet");
    q.remove(keys[100]);
    assert_eq!(q.records(), 299);
    assert_eq!(q.len(), 299);
}

#[test]
fn clear_empties_and_stales_every_key() {
    let mut q = IdleCore::with_capacity(0);
    let k = q.insert(1, idle(0, 10));
    q.clear();
    assert_eq!((q.len(), q.records()), (0, 0));
    assert_eq!(q.get(k), None);
    let k2 = q.insert(2, idle(0, 10));
    assert_ne!(k, k2);
    assert_eq!(expired(q.pop_expired(10, 10)).2, 2);
}

#[test]
fn saturated_deadlines_clamp_below_never() {
    let mut q = IdleCore::with_capacity(0);
    let k = q.insert((), idle(u64::MAX, u64::MAX));
    assert_eq!(q.timing(k).unwrap().deadline(), SATURATED);
    assert_eq!(q.next_check(), Some(SATURATED));
    let mut q = AtCore::with_capacity(0);
    q.insert((), At::new(u64::MAX));
    assert_eq!(q.next_check(), Some(SATURATED));
}

#[test]
fn settling_refiles_moved_records_at_the_top_only() {
    let mut q = IdleCore::with_capacity(0);
    let a = q.insert('a', idle(0, 100));
    let b = q.insert('b', idle(0, 150));
    let c = q.insert('c', idle(0, 200));
    q.touch_at(a, 80); // deadline 180: past b's
    q.touch_at(c, 10); // deadline 210, below the top: left alone
    assert_eq!(q.settle_earliest(10), Some(Some(150)));
    assert_eq!(q.refiles(), 1);
    q.remove(b);
    assert_eq!(q.settle_earliest(10), Some(Some(180)));
    assert_eq!(q.settle_earliest(0), None, "no work allowed: not settled");
    q.clear();
    assert_eq!(q.settle_earliest(10), Some(None));
}

#[test]
fn compact_keeps_every_key_and_cuts_the_slab_to_len() {
    let mut q = AtCore::with_capacity(0);
    let keys: Vec<_> = (0..8u32)
        .map(|i| q.insert(i, At::new(u64::from(i))))
        .collect();
    for &k in &keys[..6] {
        q.remove(k);
    }
    q.compact();
    assert_eq!((q.len(), q.capacity()), (2, 2));
    assert_eq!(q.get(keys[6]), Some(&6));
    assert_eq!(q.get(keys[7]), Some(&7));
    for &k in &keys[..6] {
        assert_eq!(q.get(k), None, "a removed key stays stale");
    }
    // A new slot at a cut index never matches an old key.
    let fresh: Vec<_> = (0..6u32).map(|i| q.insert(100 + i, At::new(50))).collect();
    for &k in &keys[..6] {
        assert_eq!(q.get(k), None);
    }
    assert_eq!(q.peek(), Some((keys[6], 6)));
    assert_eq!(q.reset_at(keys[7], 1), Some(true));
    let (key, deadline, value) = expired(q.pop_expired(10, 10));
    assert_eq!(
        (key, deadline, value),
        (keys[7], 1, 7),
        "reported under its own key"
    );
    assert_eq!(q.get(keys[7]), None);
    assert_eq!(q.remove(keys[6]).map(|(v, _)| v), Some(6));
    // Compacting again keeps the moved keys of the first pass.
    q.remove(fresh[0]);
    q.compact();
    assert_eq!(q.capacity(), 5);
    for (i, &k) in fresh.iter().enumerate().skip(1) {
        assert_eq!(q.get(k), Some(&(100 + i as u32)));
    }
    assert_eq!(q.iter().count(), 5);
}

#[test]
fn compact_never_moves_an_entry_into_a_retired_slot_nor_cuts_a_worn_one() {
    // Slot 0 worn out (retired), slot 1 near the limit, entries above both.
    let mut q = AtCore::with_capacity(0);
    let keys: Vec<_> = (0..6u32)
        .map(|i| q.insert(i, At::new(u64::from(i))))
        .collect();
    q.slots[0].generation = RETIRED - 1;
    let worn = Key {
        index: 0,
        generation: RETIRED - 1,
    };
    assert_eq!(q.remove(worn).map(|(v, _)| v), Some(0));
    assert_eq!(q.slots[0].generation, RETIRED, "slot 0 is retired");
    q.remove(keys[1]);
    q.remove(keys[2]);
    q.slots[2].generation = compact::CUT_LIMIT + 5;
    q.compact();
    // Entries 3, 4, 5 are live; slot 0 (retired) takes none, slot 2 (worn) is kept.
    assert_eq!(q.len(), 3);
    assert!(q.slots[0].value.is_none(), "no entry in a retired slot");
    assert_eq!(q.get(worn), None, "the retired slot's last key stays stale");
    for (i, &k) in keys.iter().enumerate().skip(3) {
        assert_eq!(q.get(k), Some(&(i as u32)));
    }
    // New slots are born well below retirement and reused as usual.
    assert!(q.remap.generation_floor() <= compact::CUT_LIMIT);
    let fresh = q.insert(9, At::new(9));
    let fresh_gen = q.slots[fresh.index as usize].generation;
    assert_ne!(fresh_gen, RETIRED);
    q.remove(fresh);
    let again = q.insert(10, At::new(10));
    assert_eq!(again.index, fresh.index, "the slot is reused");
    assert_eq!(q.get(fresh), None);
    // A second compact never hands an old key a live entry.
    q.remove(again);
    q.compact();
    assert_eq!(q.get(worn), None);
    assert_eq!(q.get(fresh), None);
    assert_eq!(q.get(again), None);
    for (i, &k) in keys.iter().enumerate().skip(3) {
        assert_eq!(q.get(k), Some(&(i as u32)));
    }
}

#[test]
fn a_slot_emptied_by_compact_and_kept_is_never_reused_under_the_moved_key() {
    let mut q = AtCore::with_capacity(0);
    let keys: Vec<_> = (0..4u32)
        .map(|i| q.insert(i, At::new(u64::from(i))))
        .collect();
    // Slot 3 is worn (kept by compact); slot 2's entry moves down into slot 0.
    q.remove(keys[0]);
    q.remove(keys[3]);
    q.slots[3].generation = compact::CUT_LIMIT;
    q.compact();
    assert_eq!(q.get(keys[2]), Some(&2));
    // Fill every vacant slot: none of the new keys may equal a handed-out one, and
    // the moved key still reaches its own entry.
    let fresh: Vec<_> = (0..4u32).map(|i| q.insert(10 + i, At::new(9))).collect();
    for &k in &fresh {
        assert!(!keys.contains(&k), "a new key equals an old one: {k:?}");
    }
    assert_eq!(q.get(keys[2]), Some(&2));
    assert_eq!(q.get(keys[1]), Some(&1));
}

#[test]
fn compact_refiles_every_entry_at_its_deadline() {
    // Records name slots; after moves they must name the new ones, or entries come
    // out late (never) or a moved entry's old record fires another's.
    let mut q = AtCore::with_capacity(0);
    let keys: Vec<_> = (0..8u32)
        .map(|i| q.insert(i, At::new(100 + u64::from(i))))
        .collect();
    for &k in &keys[..4] {
        q.remove(k);
    }
    q.compact();
    let mut out = Vec::new();
    while let Popped::Expired {
        key,
        deadline,
        value,
    } = q.pop_expired(1_000, 64)
    {
        out.push((key, deadline, value));
    }
    let expected: Vec<_> = (4..8u32)
        .map(|i| (keys[i as usize], 100 + u64::from(i), i))
        .collect();
    assert_eq!(out, expected);
    assert_eq!(q.pop_expired(1_000, 64), Popped::NotYet(None));
}

#[test]
fn remap_tables_are_given_back_once_no_moved_entry_is_left() {
    let mut q = AtCore::with_capacity(0);
    let keys: Vec<_> = (0..20_000u32)
        .map(|i| q.insert(i, At::new(u64::from(i))))
        .collect();
    for &k in &keys[..10_000] {
        q.remove(k);
    }
    q.compact();
    assert!(q.remap.heap_bytes() > 0, "the upper half moved down");
    q.clear();
    assert_eq!(q.remap.heap_bytes(), 0, "an emptied queue keeps no remap");
    q.compact();
    q.shrink_to_fit();
    assert_eq!(q.heap_bytes(), 0, "an empty, compacted queue holds nothing");
}
