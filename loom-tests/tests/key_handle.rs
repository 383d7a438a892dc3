//! loom models of `KeyHandle`'s protocol (`src/core/remote.rs`): a handle's touch,
//! one `fetch_max` on its key's word, racing the owner's expiry decision
//! (`confirm_expiry`, run as `IdleQueue`'s poll runs it, through the keyed core).
#![cfg(lazy_deadline_loom)]

use lazy_deadline::core::keyed::{Idle, KeyedCore, Popped};
use lazy_deadline::core::remote::{confirm_expiry, RemoteActivity};
use loom::sync::Arc;
use loom::thread;

type Core = KeyedCore<(u32, Option<Arc<RemoteActivity>>), Idle>;

fn pop(core: &mut Core, now: u64) -> Popped<(u32, Option<Arc<RemoteActivity>>)> {
    core.pop_expired_confirmed(now, 16, |_, (_, remote), timing, check| {
        confirm_expiry(remote.as_deref(), timing, check)
    })
}

/// A touch at 50 (deadline 150) races the owner judging the key at 120 (its filed
/// deadline, 100, has passed). Either the touch lands first (returns `true`) and the
/// owner re-files the key at 150, or it lands after the owner's claim (returns
/// `false`) and the key expired: never both, never neither. After the re-file, the
/// key expires at 150, not before.
#[test]
fn a_touch_racing_expiry_keeps_the_key_or_comes_after_it() {
    loom::model(|| {
        let mut core = Core::with_capacity(1);
        let remote = RemoteActivity::new();
        core.insert(
            (7, Some(remote.clone())),
            Idle {
                last_activity: 0,
                timeout: 100,
            },
        );
        let toucher = thread::spawn(move || remote.touch_at(50));
        let expired = matches!(pop(&mut core, 120), Popped::Expired { .. });
        let touch_kept_it = toucher.join().unwrap();
        assert_ne!(
            expired, touch_kept_it,
            "expired {expired}, touch returned {touch_kept_it}"
        );
        if touch_kept_it {
            assert!(matches!(pop(&mut core, 149), Popped::NotYet(Some(150))));
            assert!(matches!(
                pop(&mut core, 150),
                Popped::Expired { deadline: 150, .. }
            ));
        }
    });
}

/// Two handles touch while the owner judges: whatever interleaving, the key expires
/// at most once, only at a deadline covering every touch that returned `true`.
#[test]
fn two_handles_racing_expiry_are_never_lost() {
    loom::model(|| {
        let mut core = Core::with_capacity(1);
        let remote = RemoteActivity::new();
        core.insert(
            (1, Some(remote.clone())),
            Idle {
                last_activity: 0,
                timeout: 100,
            },
        );
        let touchers: Vec<_> = [40u64, 60]
            .into_iter()
            .map(|at| {
                let remote = remote.clone();
                thread::spawn(move || (at, remote.touch_at(at)))
            })
            .collect();
        let first = pop(&mut core, 120);
        let results: Vec<(u64, bool)> = touchers.into_iter().map(|t| t.join().unwrap()).collect();
        let latest_kept = results
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(at, _)| *at)
            .max();
        let deadline = match first {
            Popped::Expired { deadline, .. } => deadline,
            _ => match pop(&mut core, 1_000) {
                Popped::Expired { deadline, .. } => deadline,
                other => panic!("not expired after every touch: {other:?}"),
            },
        };
        if let Some(at) = latest_kept {
            assert!(
                deadline >= at + 100,
                "expired at {deadline} despite a touch at {at}"
            );
        }
        assert!(
            matches!(pop(&mut core, u64::MAX - 2), Popped::NotYet(None)),
            "twice"
        );
    });
}

/// A handle outliving its entry while the owner removes it and inserts another in
/// the same slot: a touch after the removal returns `false` and never reaches the new
/// entry (which has no shared word of its own).
#[test]
fn a_handle_outliving_its_entry_never_reaches_the_next_one() {
    loom::model(|| {
        let mut core = Core::with_capacity(1);
        let remote = RemoteActivity::new();
        let old = core.insert(
            (1, Some(remote.clone())),
            Idle {
                last_activity: 0,
                timeout: 100,
            },
        );
        let toucher = {
            let remote = remote.clone();
            thread::spawn(move || remote.touch_at(90))
        };
        // What `IdleQueue::remove` does: the entry's word is told it left.
        let ((_, word), _) = core.remove(old).unwrap();
        word.unwrap().leave();
        let new = core.insert(
            (2, None),
            Idle {
                last_activity: 10,
                timeout: 100,
            },
        );
        let _ = toucher.join().unwrap();
        assert!(
            !remote.touch_at(95),
            "a touch after the removal reports it live"
        );
        assert_eq!(core.timing(new).unwrap().last_activity, 10);
        assert!(matches!(
            pop(&mut core, 110),
            Popped::Expired { deadline: 110, .. }
        ));
    });
}
