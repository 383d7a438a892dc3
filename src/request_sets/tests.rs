//! Unit tests of how a binding is recorded in its runtime's life and let go of:
//! abandoned when the runtime went meanwhile, left to the runtime's next thread.

use super::deadline_set::tests::paused;
use super::deadline_set::DeadlineSet;
use super::runtime_life::RuntimeLife;

#[test]
fn a_binding_recorded_after_its_runtime_went_is_closed_and_pooled() {
    let gone = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let life = RuntimeLife::of(gone.handle());
    drop(gone);
    assert!(life.is_gone());
    let rt = paused();
    let _inside = rt.enter();
    let id = rt.handle().id();
    for thread in [true, false] {
        let (set, generation, view) = DeadlineSet::bind(id, thread);
        drop(view);
        assert!(
            !life.record_binding((set, generation), thread),
            "recorded in a gone runtime"
        );
        assert!(
            !set.is_open(generation),
            "abandoned, not closed (thread: {thread})"
        );
        assert_ne!(
            set.shared.generation(),
            generation,
            "abandoned, not back in the pool (thread: {thread})"
        );
    }
}

fn same(a: Option<super::runtime_life::BoundSet>, b: super::runtime_life::BoundSet) -> bool {
    a.is_some_and(|(set, generation)| std::ptr::eq(set, b.0) && generation == b.1)
}

#[test]
fn a_set_bound_for_no_thread_or_let_go_by_its_thread_is_the_runtimes_orphan() {
    let rt = paused();
    let _inside = rt.enter();
    let id = rt.handle().id();
    let life = RuntimeLife::of(rt.handle());
    let (shared, _) = life.bind_set(id, false).expect("bound");
    assert!(
        same(life.orphan(false), shared),
        "bound for no thread: not shared"
    );
    let (owned, view) = life.bind_set(id, true).expect("bound");
    life.release_owned(owned, view.expect("a thread's"));
    assert!(
        same(life.orphan(true), owned),
        "let go by its thread: not left to the next"
    );
}

/// A current-thread runtime's timers take tokio's own entry: no thread binds a set
/// for it (its own, or another in its context), so nothing of a set (its binding's
/// driver probe, its entry) is ever in that runtime's driver. With the sets
/// preferred (the crate's tests of them), a thread binds one as before.
#[test]
fn no_set_is_bound_for_a_current_thread_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    let on_another_thread = move |prefer: bool| {
        let handle = handle.clone();
        std::thread::spawn(move || {
            super::thread_sets::prefer_sets(prefer);
            let _inside = handle.enter();
            let request = crate::timeout(std::time::Duration::from_millis(5), async {});
            let sleep = crate::sleep(std::time::Duration::from_millis(5));
            drop((request, sleep));
            super::thread_sets::owned_here()
        })
        .join()
        .unwrap()
    };
    assert_eq!(on_another_thread(false), 0, "a set was bound");
    assert_eq!(on_another_thread(true), 1, "the sets, when preferred");
    drop(runtime);
}

/// In `block_on`'s own future (the body of `#[tokio::test]`), whose waker's clones
/// need not keep its vtable's address, a filing's memo names the poll's waker, so
/// the next pending poll with it skips the set's lock (it swapped the waker on every
/// poll when the memo named the stored clone). Seen in release builds (CI's "tests in
/// release" step), where the clone's vtable sits apart from the original's.
#[test]
fn a_filing_in_block_on_remembers_the_polls_waker() {
    let runtime = paused();
    let mut request = None;
    let mut polls = 0;
    runtime.block_on(std::future::poll_fn(|cx| {
        polls += 1;
        let at = crate::time_base::to_nanos(tokio::time::Instant::now()) + 3_600_000_000_000;
        let request = request.get_or_insert_with(super::Request::current);
        if !request.is_filed() {
            assert_eq!(request.file(at, cx.waker()), super::Filing::Filed);
        } else {
            assert!(!request.poll_passed(at, cx.waker()));
        }
        assert!(
            request.remembers(cx.waker()),
            "poll {polls}: the memo does not name the poll's waker"
        );
        if polls == 3 {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }));
}
