//! Wake-driven paused-clock differentials: our keyed queues against tokio-util's
//! `DelayQueue`, each consumed by a task that polls **only when woken**, as a real
//! task does. (Polling at every instant with a no-op waker, as the other
//! differentials do, cannot see a lost wake: the next poll finds what the missing
//! wake should have announced.)
//!
//! `DelayQueue` and `DelayMap`: a driver applies random inserts, resets (earlier,
//! later, into the past), removes, clears and advances to both queues through a
//! shared lock, while a consumer task per queue waits on it and treats "empty"
//! (`Ready(None)`) as "wait for an insert to wake me", which tokio-util's queue
//! does. `IdleQueue` is owned by one task, so there the owner receives the
//! operations over a channel in a `select!` loop beside `expired()`.
//!
//! Properties, per entry: it comes out of ours at or after its final deadline
//! (never early), no later than out of tokio-util (never after), and on whole
//! milliseconds at most one tick before it (tokio-util re-creates its `Sleep` after
//! each yield, which can cost it a tick); both yield the same entries, each once, a
//! removed one never; and at the end nothing is left in either (no lost wake: an
//! entry ours never yields fails the case).

mod common;

use common::{paused_runtime, When};
use lazy_deadline::{DelayMap, DelayQueue, IdleQueue};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{self, Instant};
use tokio_util::time::{delay_queue as peer_dq, DelayQueue as PeerQueue};

/// When a deadline falls, relative to now.

#[derive(Clone, Debug)]
enum Op {
    Insert(When),
    /// Reset (or, for `IdleQueue`, touch / set the timeout) of the n-th live entry.
    Reset(usize, When),
    Remove(usize),
    Clear,
    /// Whole milliseconds (one at a time), or microseconds.
    Advance(u64, bool),
}

fn op(whole_ms: bool) -> impl Strategy<Value = Op> {
    let when = if whole_ms {
        prop_oneof![
            4 => (0u64..300).prop_map(When::Ms),
            1 => (0u64..50).prop_map(When::PastMs),
        ]
        .boxed()
    } else {
        prop_oneof![
            3 => (0u64..300).prop_map(When::Ms),
            3 => (0u64..300_000).prop_map(When::Us),
            1 => (0u64..50).prop_map(When::PastMs),
        ]
        .boxed()
    };
    let advance = if whole_ms {
        (0u64..40).prop_map(|ms| Op::Advance(ms, true)).boxed()
    } else {
        prop_oneof![
            (0u64..40).prop_map(|ms| Op::Advance(ms, true)),
            (0u64..40_000).prop_map(|us| Op::Advance(us, false)),
        ]
        .boxed()
    };
    prop_oneof![
        4 => when.clone().prop_map(Op::Insert),
        3 => (0usize..16, when).prop_map(|(n, w)| Op::Reset(n, w)),
        2 => (0usize..16).prop_map(Op::Remove),
        1 => Just(Op::Clear),
        4 => advance,
    ]
}

/// What came out of one side: id -> the instant it came out.
type Out = Arc<Mutex<BTreeMap<u32, Instant>>>;

/// Whether both sides have yielded the same entries so far.
fn same_out(ours: &Out, peer: &Out) -> bool {
    let ours: Vec<u32> = ours.lock().unwrap().keys().copied().collect();
    let peer: Vec<u32> = peer.lock().unwrap().keys().copied().collect();
    ours == peer
}

/// A keyed queue under test, as both the driver and its consumer see it.
trait Side: Send + 'static {
    fn insert(&mut self, id: u32, at: Instant);
    /// Moves a live entry; `false` if it is not in this queue (already out).
    fn reset(&mut self, id: u32, at: Instant) -> bool;
    fn remove(&mut self, id: u32) -> bool;
    fn clear(&mut self);
    fn holds(&self, id: u32) -> bool;
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<u32>>;
}

struct Ours(
    DelayQueue<u32>,
    HashMap<u32, lazy_deadline::delay_queue::Key>,
);
struct Peer(PeerQueue<u32>, HashMap<u32, peer_dq::Key>);
struct Map(DelayMap<u32, ()>);

macro_rules! delay_queue_side {
    ($side:ident) => {
        impl Side for $side {
            fn insert(&mut self, id: u32, at: Instant) {
                let key = self.0.insert_at(id, at);
                self.1.insert(id, key);
            }
            fn reset(&mut self, id: u32, at: Instant) -> bool {
                match self.1.get(&id) {
                    Some(key) => {
                        self.0.reset_at(key, at);
                        true
                    }
                    None => false,
                }
            }
            fn remove(&mut self, id: u32) -> bool {
                match self.1.remove(&id) {
                    Some(key) => self.0.try_remove(&key).is_some(),
                    None => false,
                }
            }
            fn clear(&mut self) {
                self.0.clear();
                self.1.clear();
            }
            fn holds(&self, id: u32) -> bool {
                self.1.contains_key(&id)
            }
            fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<u32>> {
                self.0.poll_expired(cx).map(|expired| {
                    let id = expired?.into_inner();
                    self.1.remove(&id);
                    Some(id)
                })
            }
        }
    };
}
delay_queue_side!(Ours);
delay_queue_side!(Peer);

impl Side for Map {
    fn insert(&mut self, id: u32, at: Instant) {
        assert!(self.0.insert_at(id, (), at).is_none());
    }
    fn reset(&mut self, id: u32, at: Instant) -> bool {
        self.0.reset_at(&id, at)
    }
    fn remove(&mut self, id: u32) -> bool {
        self.0.remove(&id).is_some()
    }
    fn clear(&mut self) {
        self.0.clear();
    }
    fn holds(&self, id: u32) -> bool {
        self.0.contains_key(&id)
    }
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<u32>> {
        self.0.poll_expired(cx).map(|pair| pair.map(|(id, ())| id))
    }
}

/// A task that waits on `side`, polling it only when woken; "empty" means wait.
fn spawn_consumer<S: Side>(side: Arc<Mutex<S>>, out: Out) {
    tokio::spawn(async move {
        loop {
            let id = std::future::poll_fn(|cx| match side.lock().unwrap().poll_next(cx) {
                Poll::Ready(Some(id)) => Poll::Ready(id),
                Poll::Ready(None) | Poll::Pending => Poll::Pending,
            })
            .await;
            let first = out.lock().unwrap().insert(id, Instant::now());
            assert!(first.is_none(), "{id} came out twice");
        }
    });
}

/// The model: every entry's final deadline and when it was set, which entries were
/// removed or cleared, and every instant at which the tasks were let run.
struct Model {
    /// id -> (final deadline, the instant that deadline was set).
    deadline: HashMap<u32, (Instant, Instant)>,
    gone: Vec<u32>,
    settles: Vec<Instant>,
    /// The runtime's start: tokio's millisecond ticks count from it.
    origin: Instant,
}

impl Model {
    fn new(origin: Instant) -> Self {
        Self {
            deadline: HashMap::new(),
            gone: Vec::new(),
            settles: Vec::new(),
            origin,
        }
    }

    fn set(&mut self, id: u32, deadline: Instant) {
        self.deadline.insert(id, (deadline, Instant::now()));
    }

    /// Lets every woken task run at the current instant (yields never move a paused
    /// clock), and records the instant.
    async fn settle(&mut self) {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        self.settles.push(Instant::now());
    }

    /// Advances whole milliseconds one at a time, or microseconds at once.
    async fn advance(&mut self, n: u64, whole_ms: bool) {
        if whole_ms {
            for _ in 0..n {
                time::advance(Duration::from_millis(1)).await;
                self.settle().await;
            }
        } else {
            time::advance(Duration::from_micros(n)).await;
        }
        self.settle().await;
    }

    /// Runs the clock until every deadline is a few ticks behind.
    async fn run_out(&mut self) {
        let last = self.deadline.values().map(|&(at, set)| at.max(set)).max();
        let last = last.unwrap_or(self.origin) + Duration::from_millis(3);
        while Instant::now() <= last {
            self.advance(1, true).await;
        }
    }

    /// The latest instant a `tokio::time::Sleep` with this final deadline, set at
    /// `set`, completes in this run: at the deadline's tick (tokio rounds up to
    /// whole milliseconds from the runtime's start), or at once when set after it;
    /// seen at the first instant the tasks ran from then on.
    fn tokio_bound(&self, deadline: Instant, set: Instant) -> Instant {
        let since = deadline.max(self.origin) - self.origin;
        let tick = self.origin + Duration::from_millis(since.as_nanos().div_ceil(1_000_000) as u64);
        let due = tick.max(set);
        let index = self.settles.partition_point(|&at| at < due);
        self.settles.get(index).copied().unwrap_or(due)
    }
}

/// Runs `ops` against ours and tokio-util's side by side (shared-lock consumers).
fn run_shared<S: Side + Send + 'static>(
    make: fn() -> S,
    ops: Vec<Op>,
    start_offset_us: u64,
) -> Result<(), TestCaseError> {
    // Under a watchdog: a lost wake that leaves a consumer spinning, or a poll that
    // never settles, fails the case by name instead of hanging the suite.
    common::watchdog(
        "a case of the wake-driven differential",
        Duration::from_secs(60),
        move || run_shared_case(make, ops, start_offset_us),
    )
}

fn run_shared_case<S: Side + Send + 'static>(
    make: fn() -> S,
    ops: Vec<Op>,
    start_offset_us: u64,
) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let mut model = Model::new(Instant::now());
        time::advance(Duration::from_micros(start_offset_us)).await;
        let ours = Arc::new(Mutex::new(make()));
        let peer = Arc::new(Mutex::new(Peer(PeerQueue::new(), HashMap::new())));
        let (ours_out, peer_out): (Out, Out) = Default::default();
        spawn_consumer(ours.clone(), ours_out.clone());
        spawn_consumer(peer.clone(), peer_out.clone());
        model.settle().await;
        let mut next_id = 0u32;
        let exact = exact_run(&ops, start_offset_us);
        for op in ops {
            let now = Instant::now();
            // Entries in both queues: the only ones an operation may touch (one
            // side may have yielded an entry a tick before the other).
            let both = |ours: &S, peer: &Peer| -> Vec<u32> {
                let mut ids: Vec<u32> = peer
                    .1
                    .keys()
                    .copied()
                    .filter(|&id| ours.holds(id))
                    .collect();
                ids.sort_unstable();
                ids
            };
            {
                let (mut o, mut p) = (ours.lock().unwrap(), peer.lock().unwrap());
                match op {
                    Op::Insert(w) => {
                        let at = w.at(now);
                        o.insert(next_id, at);
                        p.insert(next_id, at);
                        model.set(next_id, at);
                        next_id += 1;
                    }
                    Op::Reset(n, w) => {
                        let ids = both(&o, &p);
                        if !ids.is_empty() {
                            let id = ids[n % ids.len()];
                            let at = w.at(now);
                            prop_assert!(o.reset(id, at) && p.reset(id, at));
                            model.set(id, at);
                        }
                    }
                    Op::Remove(n) => {
                        let ids = both(&o, &p);
                        if !ids.is_empty() {
                            let id = ids[n % ids.len()];
                            prop_assert!(o.remove(id) && p.remove(id));
                            model.gone.push(id);
                        }
                    }
                    Op::Clear => {
                        // Only with nothing in flight: an entry one side has yielded
                        // and the other still holds would be cleared from one only.
                        let ids = both(&o, &p);
                        if same_out(&ours_out, &peer_out) {
                            model.gone.extend(ids);
                            o.clear();
                            p.clear();
                        }
                    }
                    Op::Advance(..) => {}
                }
            }
            match op {
                Op::Advance(n, whole_ms) => model.advance(n, whole_ms).await,
                _ => model.settle().await,
            }
        }
        // Everything left comes out by its deadline's tick; a lost wake shows here.
        model.run_out().await;
        let (ours_out, peer_out) = (ours_out.lock().unwrap(), peer_out.lock().unwrap());
        check(&model, &ours_out, &peer_out, exact)
    })
}

/// Runs whose deadlines and advances all sit on tokio's millisecond grid: there a
/// tokio `Sleep` completes at an exact instant, and so must ours.
fn exact_run(ops: &[Op], start_offset_us: u64) -> bool {
    start_offset_us == 0
        && ops.iter().all(|op| match op {
            Op::Insert(w) | Op::Reset(_, w) => w.on_grid(),
            Op::Advance(_, whole) => *whole,
            _ => true,
        })
}

/// The properties of the module docs.
fn check(
    model: &Model,
    ours: &BTreeMap<u32, Instant>,
    peer: &BTreeMap<u32, Instant>,
    exact: bool,
) -> Result<(), TestCaseError> {
    let origin = model.origin;
    for id in &model.gone {
        prop_assert!(!ours.contains_key(id), "{} was removed, yet came out", id);
    }
    for (id, &(deadline, set)) in &model.deadline {
        if model.gone.contains(id) {
            continue;
        }
        let bound = model.tokio_bound(deadline, set);
        let Some(&ours_at) = ours.get(id) else {
            return Err(TestCaseError::fail(format!(
                "{id} (deadline +{:?}) never came out of ours: a lost wake (tokio: +{:?})",
                deadline - origin,
                bound - origin
            )));
        };
        prop_assert!(
            ours_at >= deadline,
            "{} early by {:?}",
            id,
            deadline - ours_at
        );
        prop_assert!(
            ours_at <= bound,
            "{} came out at +{:?}, after a tokio Sleep's +{:?}",
            id,
            ours_at - origin,
            bound - origin
        );
        if exact {
            prop_assert_eq!(
                ours_at,
                bound,
                "{} not at tokio's instant on whole milliseconds",
                id
            );
        }
        // tokio-util's queue has lost wakes of its own (an insert of a passed
        // deadline after a drain can go unseen); where it yields, ours was no later.
        if let Some(&peer_at) = peer.get(id) {
            prop_assert!(
                ours_at <= peer_at,
                "{} came out at +{:?}, after tokio-util's +{:?}",
                id,
                ours_at - origin,
                peer_at - origin
            );
        }
    }
    Ok(())
}

fn ours() -> Ours {
    Ours(DelayQueue::new(), HashMap::new())
}

fn map() -> Map {
    Map(DelayMap::new())
}

/// `IdleQueue`, owned by one task: operations arrive over a channel.
enum IdleOp {
    Insert(u32, Duration),
    Touch(u32),
    SetTimeout(u32, Duration),
    Remove(u32),
    Clear,
}

fn run_idle(ops: Vec<Op>, start_offset_us: u64) -> Result<(), TestCaseError> {
    paused_runtime().block_on(async move {
        let mut model = Model::new(Instant::now());
        time::advance(Duration::from_micros(start_offset_us)).await;
        let (ours_out, peer_out): (Out, Out) = Default::default();
        let (ours_tx, mut ours_rx) = tokio::sync::mpsc::unbounded_channel::<IdleOp>();
        let out = ours_out.clone();
        tokio::spawn(async move {
            let mut queue = IdleQueue::new(Duration::from_secs(1));
            let mut keys = HashMap::new();
            loop {
                tokio::select! {
                    op = ours_rx.recv() => match op {
                        Some(IdleOp::Insert(id, timeout)) => {
                            keys.insert(id, queue.insert_with_timeout(id, timeout));
                        }
                        Some(IdleOp::Touch(id)) => assert!(queue.touch(keys[&id])),
                        Some(IdleOp::SetTimeout(id, t)) => assert!(queue.set_timeout(keys[&id], t)),
                        Some(IdleOp::Remove(id)) => assert!(queue.remove(keys[&id]).is_some()),
                        Some(IdleOp::Clear) => queue.clear(),
                        None => return,
                    },
                    expired = queue.expired() => {
                        out.lock().unwrap().insert(expired.into_inner(), Instant::now());
                    }
                }
            }
        });
        // The peer: tokio-util's queue with `reset_at(last activity + timeout)`.
        let peer = Arc::new(Mutex::new(Peer(PeerQueue::new(), HashMap::new())));
        spawn_consumer(peer.clone(), peer_out.clone());
        model.settle().await;
        let mut idle: BTreeMap<u32, (Instant, Duration)> = BTreeMap::new(); // activity, timeout
        let mut next_id = 0u32;
        let timeout_of = |w: When| match w {
            When::Ms(ms) => Duration::from_millis(ms),
            When::Us(us) => Duration::from_micros(us),
            When::PastMs(_) => Duration::ZERO,
        };
        let exact = exact_run(&ops, start_offset_us);
        for op in ops {
            let now = Instant::now();
            let live = |p: &Peer, out: &BTreeMap<u32, Instant>| -> Vec<u32> {
                let mut ids: Vec<u32> =
                    p.1.keys()
                        .copied()
                        .filter(|id| !out.contains_key(id))
                        .collect();
                ids.sort_unstable();
                ids
            };
            {
                let mut p = peer.lock().unwrap();
                let ids = live(&p, &ours_out.lock().unwrap());
                let in_step = same_out(&ours_out, &peer_out);
                let send = |op: IdleOp| {
                    ours_tx
                        .send(op)
                        .map_err(|_| TestCaseError::fail("owner gone"))
                };
                match op {
                    Op::Insert(w) => {
                        let timeout = timeout_of(w);
                        send(IdleOp::Insert(next_id, timeout))?;
                        p.insert(next_id, now + timeout);
                        idle.insert(next_id, (now, timeout));
                        model.set(next_id, now + timeout);
                        next_id += 1;
                    }
                    Op::Reset(n, w) if !ids.is_empty() => {
                        let id = ids[n % ids.len()];
                        let (activity, timeout) = idle[&id];
                        // Even n: a touch now; odd: a new timeout (shorter or longer).
                        let (activity, timeout) = if n % 2 == 0 {
                            send(IdleOp::Touch(id))?;
                            (now, timeout)
                        } else {
                            send(IdleOp::SetTimeout(id, timeout_of(w)))?;
                            (activity, timeout_of(w))
                        };
                        let at = activity + timeout;
                        prop_assert!(p.reset(id, at));
                        idle.insert(id, (activity, timeout));
                        model.set(id, at);
                    }
                    Op::Remove(n) if !ids.is_empty() => {
                        let id = ids[n % ids.len()];
                        send(IdleOp::Remove(id))?;
                        prop_assert!(p.remove(id));
                        model.gone.push(id);
                    }
                    Op::Clear if in_step => {
                        send(IdleOp::Clear)?;
                        p.clear();
                        model.gone.extend(ids);
                    }
                    _ => {}
                }
            }
            match op {
                Op::Advance(n, whole_ms) => model.advance(n, whole_ms).await,
                _ => model.settle().await,
            }
        }
        model.run_out().await;
        drop(ours_tx);
        let (ours_out, peer_out) = (ours_out.lock().unwrap(), peer_out.lock().unwrap());
        check(&model, &ours_out, &peer_out, exact)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::proptest_cases()))]

    #[test]
    fn delay_queue_driven_by_its_wakes_matches_tokio_util(
        ops in prop::collection::vec(op(false), 1..40),
        start_offset_us in 0u64..1_000,
    ) {
        run_shared(ours, ops, start_offset_us)?;
    }

    #[test]
    fn delay_queue_driven_by_its_wakes_on_whole_milliseconds(
        ops in prop::collection::vec(op(true), 1..40),
        start_offset_us in prop_oneof![Just(0u64), 0u64..1_000],
    ) {
        run_shared(ours, ops, start_offset_us)?;
    }

    #[test]
    fn delay_map_driven_by_its_wakes_matches_tokio_util(
        ops in prop::collection::vec(op(false), 1..40),
        start_offset_us in 0u64..1_000,
    ) {
        run_shared(map, ops, start_offset_us)?;
    }

    #[test]
    fn idle_queue_driven_by_its_wakes_matches_tokio_util(
        ops in prop::collection::vec(op(false), 1..40),
        start_offset_us in prop_oneof![Just(0u64), 0u64..1_000],
    ) {
        run_idle(ops, start_offset_us)?;
    }
}

/// The simplest lost wake, found by the review, as a fixed case of the harness: the
/// clock jumps past the deadline by more than a tick, so the entry comes out by the
/// home clock, the consumer sees the queue empty, and the next insert must wake it.
#[test]
fn insert_expire_drain_insert_again() {
    let ops = vec![
        Op::Insert(When::Ms(10)),
        Op::Advance(20_000, false),
        Op::Insert(When::Ms(10)),
        Op::Advance(20, true),
    ];
    run_shared(ours, ops.clone(), 0).unwrap();
    run_shared(map, ops, 0).unwrap();
}

/// The harness itself: a queue that never yields must fail the case, not pass it.
#[test]
fn the_harness_reports_an_entry_that_never_came_out() {
    struct Silent(Ours);
    impl Side for Silent {
        fn insert(&mut self, id: u32, at: Instant) {
            self.0.insert(id, at)
        }
        fn reset(&mut self, id: u32, at: Instant) -> bool {
            self.0.reset(id, at)
        }
        fn remove(&mut self, id: u32) -> bool {
            self.0.remove(id)
        }
        fn clear(&mut self) {
            self.0.clear()
        }
        fn holds(&self, id: u32) -> bool {
            self.0.holds(id)
        }
        fn poll_next(&mut self, _: &mut Context<'_>) -> Poll<Option<u32>> {
            Poll::Pending // never wakes, never yields
        }
    }
    let result = run_shared(
        || Silent(ours()),
        vec![Op::Insert(When::Ms(5)), Op::Advance(10, true)],
        0,
    );
    let message = format!(
        "{:?}",
        result.expect_err("a silent queue must fail the case")
    );
    assert!(message.contains("lost wake"), "{message}");
}
