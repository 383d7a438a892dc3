//! `DelayMap`: keyed by the caller's own key, with `DelayQueue`'s semantics.

mod common;

use common::{ms, CountingWaker};
use futures::StreamExt;
use lazy_deadline::DelayMap;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{sleep, Instant};

fn poll<K: Eq + std::hash::Hash + Clone, V>(
    map: &mut DelayMap<K, V>,
    waker: &Waker,
) -> Poll<Option<(K, V)>> {
    map.poll_expired(&mut Context::from_waker(waker))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn insert_replaces_in_place_and_returns_the_old_value() {
    let mut map = DelayMap::new();
    let start = Instant::now();
    assert_eq!(map.insert_at("peer", 1, start + ms(100)), None);
    assert_eq!(map.insert_at("peer", 2, start + ms(50)), Some(1));
    assert_eq!(map.len(), 1);
    assert_eq!(map.get(&"peer"), Some(&2));
    assert_eq!(map.deadline(&"peer"), Some(start + ms(50)));
    assert_eq!(map.next().await, Some(("peer", 2)));
    assert_eq!(Instant::now(), start + ms(50));
    assert_eq!(map.next().await, None);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn absent_keys_answer_none_or_false() {
    let mut map: DelayMap<u32, ()> = DelayMap::new();
    assert!(!map.reset(&1, ms(1)));
    assert!(!map.reset_at(&1, Instant::now()));
    assert_eq!(map.remove(&1), None);
    assert_eq!(map.get(&1), None);
    assert_eq!(map.get_mut(&1), None);
    assert_eq!(map.deadline(&1), None);
    assert!(!map.contains_key(&1));
    assert_eq!(map.peek(), None);
    map.insert(1, (), ms(1));
    assert_eq!(map.expired().await, Some((1, ())));
    assert!(!map.reset(&1, ms(1)), "an expired key is absent");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn resets_later_are_stores_and_earlier_ones_wake() {
    let (count, waker) = CountingWaker::new();
    let mut map = DelayMap::new();
    let start = Instant::now();
    for peer in 0..100u32 {
        map.insert_at(peer, peer * 10, start + ms(100));
    }
    assert!(poll(&mut map, &waker).is_pending());
    let registrations = map.stats().registrations;
    for round in 1..=50u64 {
        for peer in 0..100u32 {
            assert!(map.reset_at(&peer, start + ms(100 + round)));
        }
    }
    assert_eq!(map.stats().registrations, registrations);
    assert_eq!(count.wakes(), 0);
    assert!(map.reset_at(&42, start + ms(10)));
    assert_eq!(count.wakes(), 1, "an earlier reset wakes the task");
    assert_eq!(map.expired().await, Some((42, 420)));
    assert_eq!(Instant::now(), start + ms(10));
    assert_eq!(map.peek().map(|(k, d)| (*k, d)), Some((0, start + ms(150))));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn retain_iter_clear_and_the_stream_end() {
    let mut map = DelayMap::with_capacity(16);
    for i in 0..10u32 {
        map.insert(i, format!("v{i}"), ms(u64::from(i) + 1));
    }
    map.retain(|k, v| {
        v.push('!');
        k % 2 == 0
    });
    assert_eq!(map.len(), 5);
    let mut listed: Vec<_> = map.iter().map(|(k, v, _)| (*k, v.clone())).collect();
    listed.sort();
    assert_eq!(listed[0], (0, "v0!".to_string()));
    assert_eq!(listed.len(), 5);
    if let Some(v) = map.get_mut(&4) {
        v.push('?');
    }
    let out: Vec<(u32, String)> = (&mut map).take(2).collect().await;
    assert_eq!(out, [(0, "v0!".into()), (2, "v2!".into())]);
    let (count, waker) = CountingWaker::new();
    assert!(poll(&mut map, &waker).is_pending());
    map.clear();
    assert_eq!(count.wakes(), 1);
    assert!(matches!(poll(&mut map, &waker), Poll::Ready(None)));
    map.shrink_to_fit();
    assert!(map.is_empty());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn removing_the_last_pair_wakes_and_saturation_is_never() {
    let (count, waker) = CountingWaker::new();
    let mut map = DelayMap::new();
    map.insert('a', (), Duration::MAX);
    map.insert_at('b', (), Instant::now() + Duration::from_secs(1 << 40));
    assert!(poll(&mut map, &waker).is_pending());
    tokio::time::advance(Duration::from_secs(86_400 * 365 * 10)).await;
    assert!(poll(&mut map, &waker).is_pending());
    assert_eq!(map.remove(&'a'), Some(()));
    assert_eq!(map.remove(&'b'), Some(()));
    assert!(count.wakes() >= 1);
    assert!(matches!(poll(&mut map, &waker), Poll::Ready(None)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_mass_expiry_drains_in_deadline_order_within_the_budget() {
    let mut map = DelayMap::new();
    let start = Instant::now();
    for i in (0..2_000u64).rev() {
        map.insert_at(i, (), start + Duration::from_micros(i));
    }
    sleep(ms(3)).await;
    let mut out = Vec::new();
    let mut pendings = 0;
    while out.len() < 2_000 {
        match poll(&mut map, Waker::noop()) {
            Poll::Ready(Some((k, ()))) => out.push(k),
            Poll::Ready(None) => break,
            Poll::Pending => {
                pendings += 1;
                tokio::task::yield_now().await;
            }
        }
    }
    assert_eq!(out, (0..2_000).collect::<Vec<_>>());
    assert!(pendings >= 1);
    assert!(map.is_empty());
}

#[test]
fn needs_no_runtime_to_build_and_fill() {
    let mut map: DelayMap<String, u8> = DelayMap::default();
    map.insert("x".into(), 1, ms(5));
    assert!(map.contains_key(&"x".to_string()));
    fn traits<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    traits::<DelayMap<String, u8>>();
    assert!(format!("{map:?}").contains("\"x\""));
}
