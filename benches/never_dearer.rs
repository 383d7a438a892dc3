//! Group 12: every shape a drop-in user's code gives our timers, tokio's timer beside
//! ours in the same process and the same group, each on a current-thread runtime and
//! on a 2-worker runtime. Every shape runs in 64 spawned tasks, each doing the same
//! number of operations; a sample's figure is its total divided by 64, so criterion
//! reports the time per operation (or, where said, the CPU time per operation).
//!
//! Bench ids are `never_dearer/<shape>/<runtime>/<tokio|lazy>`, runtime being
//! `current_thread` or `two_workers`:
//!
//! 1. `sleep_dropped_unpolled`: a `sleep(5 s)` made and dropped without ever being
//!    polled (a biased `select!` whose other branch, `ready(())`, is ready first).
//!    Wall time.
//! 2. `timeout_ready_first_poll`: `timeout(5 s, ready(()))` awaited, ready at its
//!    first poll. Wall time.
//! 3. `reset_earlier_same_tick`: a task's one armed `Sleep`, reset 1 µs earlier than
//!    its deadline and polled once with the task's waker (as a `select!` loop does
//!    after a reset), pending. Wall time.
//! 4. `reset_earlier_next_tick`: the same, 1 ms earlier each time. Wall time.
//! 5. `refire`: a rate limiter's fired `Sleep`: each task's one `Sleep(1 ms)`,
//!    awaited, reset to now + 1 ms, then a `yield_now`, repeated. CPU time per period.
//! 6. `limiter_turns`: a limiter whose waiting acquirer holds the only `sleep_until`:
//!    the 64 tasks acquire permits (one per 1 ms) from one shared limiter; the one
//!    that must wait resets the limiter's one `Sleep` to its permit's instant and
//!    awaits it, so the same `Sleep` is reset, completed and reset again by turns.
//!    CPU time per acquire.
//! 7. `tower_rate_limit`: tower 0.5's `RateLimit` (4 calls per 1 ms, one per task, as
//!    per connection), its timer logic transcribed over either `Sleep`, around a
//!    trivial service; `ready().await` then `call`. CPU time per call.
//! 8. `timeout_pending_once`: the per-request `timeout(5 s, request)` whose request
//!    is pending once; and `never_dearer/request_alone/<runtime>`, the same request
//!    without a timeout, the floor a report subtracts for the timeout's own cost.
//!    Wall time.
//! 9. `interval_tick`: a keepalive ticker, `interval(1 ms)` with each tick awaited.
//!    CPU time per tick.
//! 10. `sleep_fire`: a fresh `sleep(1 ms)` awaited each time, as a retry's backoff or
//!     a poll loop's pause: made, registered (filed, for ours on two workers), fired
//!     and woken. CPU time per fire.
//!
//! The wall-time shapes whose operations never wait (1 to 4) yield every 64
//! operations, so the tasks take turns as in the others. For 5 to 7 the wall time is
//! the waiting, so they (and 9 and 10) report the CPU time of all of the process's threads (Linux
//! `schedstat`, as `examples/requests.rs` reads it): criterion shows that CPU time as
//! its "time". Nothing here asserts on a time: a slow machine only gives slow figures.

#[path = "../examples/support/cli.rs"]
mod cli;
mod common;
#[path = "../examples/support/pending_once.rs"]
mod pending_once;

use common::{config, current_thread, multi_thread};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode};
use pending_once::PendingOnce;
use std::convert::Infallible;
use std::future::{poll_fn, ready, Future};
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::time::Instant;
use tower::{service_fn, Service, ServiceExt};

const TASKS: u32 = 64;
const DEADLINE: Duration = Duration::from_secs(5);
/// The rate limiter's period (shapes 5 and 7) and the shared limiter's permit spacing.
const PERIOD: Duration = Duration::from_millis(1);
/// tower `Rate::new(RATE_NUM, PERIOD)`: calls per period per `RateLimit`.
const RATE_NUM: u64 = 4;

/// What the shapes need of a `Sleep`, so each shape is one generic function run with
/// tokio's `Sleep` and with ours.
trait DropIn: Future<Output = ()> + Send + Sized + 'static {
    /// `sleep(duration)`.
    fn sleep(duration: Duration) -> Self;
    /// `sleep_until(deadline)`.
    fn sleep_until(deadline: Instant) -> Self;
    /// `Sleep::deadline`.
    fn deadline(&self) -> Instant;
    /// `Sleep::reset`.
    fn reset(self: Pin<&mut Self>, deadline: Instant);
    /// The same side's `timeout(duration, future)` awaited: `true` if not elapsed.
    fn timeout<F: Future + Send>(
        duration: Duration,
        future: F,
    ) -> impl Future<Output = bool> + Send;
    /// The same side's `interval(period)`, `ticks` ticks awaited.
    fn ticks(period: Duration, ticks: u64) -> impl Future<Output = ()> + Send;
}

impl DropIn for tokio::time::Sleep {
    fn sleep(duration: Duration) -> Self {
        tokio::time::sleep(duration)
    }
    fn sleep_until(deadline: Instant) -> Self {
        tokio::time::sleep_until(deadline)
    }
    fn deadline(&self) -> Instant {
        tokio::time::Sleep::deadline(self)
    }
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        tokio::time::Sleep::reset(self, deadline)
    }
    async fn timeout<F: Future + Send>(duration: Duration, future: F) -> bool {
        tokio::time::timeout(duration, future).await.is_ok()
    }
    async fn ticks(period: Duration, ticks: u64) {
        let mut interval = tokio::time::interval(period);
        for _ in 0..ticks {
            interval.tick().await;
        }
    }
}

impl DropIn for lazy_deadline::Sleep {
    fn sleep(duration: Duration) -> Self {
        lazy_deadline::sleep(duration)
    }
    fn sleep_until(deadline: Instant) -> Self {
        lazy_deadline::sleep_until(deadline)
    }
    fn deadline(&self) -> Instant {
        lazy_deadline::Sleep::deadline(self)
    }
    fn reset(self: Pin<&mut Self>, deadline: Instant) {
        lazy_deadline::Sleep::reset(self, deadline)
    }
    async fn timeout<F: Future + Send>(duration: Duration, future: F) -> bool {
        lazy_deadline::timeout(duration, future).await.is_ok()
    }
    async fn ticks(period: Duration, ticks: u64) {
        let mut interval = lazy_deadline::interval(period);
        for _ in 0..ticks {
            interval.tick().await;
        }
    }
}

/// Yields every 64th operation, so that tasks whose operations never wait take turns.
async fn take_turns(op: u64) {
    if op % 64 == 63 {
        tokio::task::yield_now().await;
    }
}

/// Shape 1: a `select!` whose sleep branch is made and dropped, never polled.
async fn sleep_dropped_unpolled<S: DropIn>(ops: u64) {
    for op in 0..ops {
        let fired = tokio::select! {
            biased;
            () = ready(()) => false,
            () = S::sleep(DEADLINE) => true,
        };
        black_box(fired);
        take_turns(op).await;
    }
}

/// Shape 2: a timeout whose future is ready at the first poll.
async fn timeout_ready_first_poll<S: DropIn>(ops: u64) {
    for op in 0..ops {
        black_box(S::timeout(DEADLINE, ready(())).await);
        take_turns(op).await;
    }
}

/// Shapes 3 and 4: one armed `Sleep` `ahead` in the future, reset `step` earlier and
/// polled with the task's own waker per operation (the poll a `select!` loop makes).
async fn reset_earlier<S: DropIn>(ops: u64, ahead: Duration, step: Duration) {
    let mut sleep = pin!(S::sleep_until(Instant::now() + ahead));
    // Registered (tokio) or filed (ours) with this task's waker, as in a loop.
    poll_fn(|cx| Poll::Ready(black_box(sleep.as_mut().poll(cx).is_pending()))).await;
    let mut deadline = sleep.deadline();
    for op in 0..ops {
        deadline -= step;
        sleep.as_mut().reset(deadline);
        poll_fn(|cx| Poll::Ready(black_box(sleep.as_mut().poll(cx).is_pending()))).await;
        take_turns(op).await;
    }
}

/// Shape 5: the rate limiter's fired `Sleep`, as `examples/requests.rs`'s
/// `measure_refire` runs it: awaited, reset to now + 1 ms, then a yield.
async fn refire<S: DropIn>(periods: u64) {
    let mut sleep = pin!(S::sleep(PERIOD));
    for _ in 0..periods {
        sleep.as_mut().await;
        sleep.as_mut().reset(Instant::now() + PERIOD);
        tokio::task::yield_now().await;
    }
}

/// Shape 10: a fresh `sleep(1 ms)` per operation, awaited until it fires.
async fn sleep_fire<S: DropIn>(fires: u64) {
    for _ in 0..fires {
        S::sleep(PERIOD).await;
    }
}

/// Shape 6's limiter: one permit per `PERIOD`, and its one `Sleep`, made by the first
/// acquirer that had to wait and kept for the next.
struct Limiter<S> {
    /// When the next permit may be handed out.
    next: Instant,
    sleep: Option<Pin<Box<S>>>,
}

impl<S: DropIn> Limiter<S> {
    /// A limiter whose first permit is due at once, shared by the tasks.
    fn shared() -> Arc<tokio::sync::Mutex<Self>> {
        Arc::new(tokio::sync::Mutex::new(Limiter {
            next: Instant::now(),
            sleep: None,
        }))
    }
}

/// Shape 6: `permits` acquisitions from the shared limiter. The acquirer holds the
/// lock while it waits, so the waiting acquirer alone holds the limiter's one `Sleep`:
/// it resets it to its permit's instant when the deadline differs and awaits it; the
/// next acquirer finds it completed in the limiter when the lock is handed on.
async fn limiter_turns<S: DropIn>(limiter: Arc<tokio::sync::Mutex<Limiter<S>>>, permits: u64) {
    for _ in 0..permits {
        let mut state = limiter.lock().await;
        let now = Instant::now();
        let at = state.next.max(now);
        state.next = at + PERIOD;
        if at > now {
            let sleep = state
                .sleep
                .get_or_insert_with(|| Box::pin(S::sleep_until(at)));
            if sleep.deadline() != at {
                sleep.as_mut().reset(at);
            }
            sleep.as_mut().await;
        }
    }
}

/// Shape 7: tower 0.5's `limit::rate::RateLimit` (`src/limit/rate/service.rs`), its
/// timer logic transcribed over `S` (tower's own is fixed to tokio's `Sleep`).
struct RateLimit<T, S> {
    inner: T,
    num: u64,
    per: Duration,
    state: State,
    sleep: Pin<Box<S>>,
}

/// tower's `RateLimit` state: limited until the sleep fires, or calls left this period.
enum State {
    Limited,
    Ready { until: Instant, rem: u64 },
}

impl<T, S: DropIn> RateLimit<T, S> {
    /// tower's `RateLimit::new`: the sleep made eagerly, to be reset in place.
    fn new(inner: T, num: u64, per: Duration) -> Self {
        let until = Instant::now();
        RateLimit {
            inner,
            num,
            per,
            state: State::Ready { until, rem: num },
            sleep: Box::pin(S::sleep_until(until)),
        }
    }
}

impl<T: Service<R>, S: DropIn, R> Service<R> for RateLimit<T, S> {
    type Response = T::Response;
    type Error = T::Error;
    type Future = T::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
        match self.state {
            State::Ready { .. } => return self.inner.poll_ready(cx),
            State::Limited => {
                if self.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
            }
        }
        self.state = State::Ready {
            until: Instant::now() + self.per,
            rem: self.num,
        };
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> T::Future {
        match self.state {
            State::Ready { mut until, mut rem } => {
                let now = Instant::now();
                if now >= until {
                    until = now + self.per;
                    rem = self.num;
                }
                if rem > 1 {
                    rem -= 1;
                    self.state = State::Ready { until, rem };
                } else {
                    self.sleep.as_mut().reset(until);
                    self.state = State::Limited;
                }
                self.inner.call(request)
            }
            State::Limited => panic!("service not ready; poll_ready must be called first"),
        }
    }
}

/// Shape 7's task: one `RateLimit` (a connection's) over a trivial service, `calls`
/// times `ready().await` then `call`.
async fn tower_rate_limit<S: DropIn>(calls: u64) {
    let inner = service_fn(|()| ready(Ok::<u32, Infallible>(7)));
    let mut service = RateLimit::<_, S>::new(inner, RATE_NUM, PERIOD);
    for _ in 0..calls {
        let Ok(svc) = service.ready().await;
        let Ok(answer) = svc.call(()).await;
        black_box(answer);
    }
}

/// Shape 8: a per-request timeout around a request pending once.
async fn timeout_pending_once<S: DropIn>(requests: u64) {
    for _ in 0..requests {
        black_box(S::timeout(DEADLINE, PendingOnce(false)).await);
    }
}

/// Shape 8's floor: the same request without a timeout.
async fn request_alone(requests: u64) {
    for _ in 0..requests {
        PendingOnce(false).await;
    }
}

/// What a shape's figure is: the wall time, or the CPU time of all threads.
#[derive(Clone, Copy)]
enum Clock {
    Wall,
    Cpu,
}

/// Spawns `task()` 64 times on `rt` and waits for all; returns the wall or CPU time
/// divided by 64, so that criterion, dividing by the operations per task, reports
/// the time per operation.
fn in_tasks<F>(rt: &Runtime, clock: Clock, task: impl Fn() -> F) -> Duration
where
    F: Future<Output = ()> + Send + 'static,
{
    rt.block_on(async {
        let (cpu, start) = (cli::cpu_ns(), std::time::Instant::now());
        let tasks: Vec<_> = (0..TASKS).map(|_| tokio::spawn(task())).collect();
        for task in tasks {
            task.await.unwrap();
        }
        let total = match clock {
            Clock::Wall => start.elapsed(),
            // Saturating: a thread that exited takes its CPU time out of the sum.
            Clock::Cpu => Duration::from_nanos(cli::cpu_ns().saturating_sub(cpu)),
        };
        total / TASKS
    })
}

/// The shapes, in the order they run (the limiter last: its group settings stay).
#[derive(Clone, Copy)]
enum Shape {
    SleepDroppedUnpolled,
    TimeoutReadyFirstPoll,
    ResetEarlierSameTick,
    ResetEarlierNextTick,
    TimeoutPendingOnce,
    RequestAlone,
    Refire,
    IntervalTick,
    SleepFire,
    TowerRateLimit,
    LimiterTurns,
}

impl Shape {
    const ALL: [Shape; 11] = [
        Shape::SleepDroppedUnpolled,
        Shape::TimeoutReadyFirstPoll,
        Shape::ResetEarlierSameTick,
        Shape::ResetEarlierNextTick,
        Shape::TimeoutPendingOnce,
        Shape::RequestAlone,
        Shape::Refire,
        Shape::IntervalTick,
        Shape::SleepFire,
        Shape::TowerRateLimit,
        Shape::LimiterTurns,
    ];

    /// The first part of the bench id, which the report's keys name.
    fn name(self) -> &'static str {
        match self {
            Shape::SleepDroppedUnpolled => "sleep_dropped_unpolled",
            Shape::TimeoutReadyFirstPoll => "timeout_ready_first_poll",
            Shape::ResetEarlierSameTick => "reset_earlier_same_tick",
            Shape::ResetEarlierNextTick => "reset_earlier_next_tick",
            Shape::TimeoutPendingOnce => "timeout_pending_once",
            Shape::RequestAlone => "request_alone",
            Shape::Refire => "refire",
            Shape::IntervalTick => "interval_tick",
            Shape::SleepFire => "sleep_fire",
            Shape::TowerRateLimit => "tower_rate_limit",
            Shape::LimiterTurns => "limiter_turns",
        }
    }

    /// `ops` operations of this shape in each of the 64 tasks, with `S` as the
    /// timer; the figure per task (see [`in_tasks`]).
    fn measure<S: DropIn>(self, rt: &Runtime, ops: u64) -> Duration {
        use Clock::{Cpu, Wall};
        match self {
            Shape::SleepDroppedUnpolled => in_tasks(rt, Wall, || sleep_dropped_unpolled::<S>(ops)),
            Shape::TimeoutReadyFirstPoll => {
                in_tasks(rt, Wall, || timeout_ready_first_poll::<S>(ops))
            }
            // 1 µs earlier per operation from an hour out: 3.6e9 operations from now.
            Shape::ResetEarlierSameTick => in_tasks(rt, Wall, || {
                reset_earlier::<S>(ops, Duration::from_secs(3600), Duration::from_micros(1))
            }),
            // 1 ms earlier from 10,000 hours out (within tokio's wheel's ~2 years).
            Shape::ResetEarlierNextTick => in_tasks(rt, Wall, || {
                reset_earlier::<S>(ops, Duration::from_secs(36_000_000), PERIOD)
            }),
            Shape::TimeoutPendingOnce => in_tasks(rt, Wall, || timeout_pending_once::<S>(ops)),
            Shape::RequestAlone => in_tasks(rt, Wall, || request_alone(ops)),
            Shape::Refire => in_tasks(rt, Cpu, || refire::<S>(ops)),
            // A keepalive ticker: `interval(1 ms)`, each tick awaited (CPU per tick).
            Shape::IntervalTick => in_tasks(rt, Cpu, || S::ticks(PERIOD, ops)),
            Shape::SleepFire => in_tasks(rt, Cpu, || sleep_fire::<S>(ops)),
            Shape::TowerRateLimit => in_tasks(rt, Cpu, || tower_rate_limit::<S>(ops)),
            Shape::LimiterTurns => {
                let limiter = Limiter::<S>::shared();
                in_tasks(rt, Cpu, || limiter_turns(limiter.clone(), ops))
            }
        }
    }
}

/// Benches one shape on one runtime with `S` as the timer, as `<shape>/<runtime>/<side>`
/// (the floor, which has no timer, as `request_alone/<runtime>`).
fn bench<S: DropIn>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    shape: Shape,
    (label, rt): (&str, &Runtime),
    side: &str,
) {
    let id = match shape {
        Shape::RequestAlone => format!("{}/{label}", shape.name()),
        _ => format!("{}/{label}/{side}", shape.name()),
    };
    group.bench_function(id, |b| b.iter_custom(|ops| shape.measure::<S>(rt, ops)));
}

/// The suite: each shape, on each runtime, tokio's then ours, side by side in one group.
fn never_dearer(c: &mut Criterion) {
    let runtimes = [
        ("current_thread", current_thread()),
        ("two_workers", multi_thread(2)),
    ];
    let mut group = c.benchmark_group("never_dearer");
    for shape in Shape::ALL {
        if let Shape::LimiterTurns = shape {
            // 64 acquires of one permit per ms: 64 ms per operation per task. Flat
            // sampling keeps the samples at a few operations each, within 3 s.
            group.sample_size(10);
            group.sampling_mode(SamplingMode::Flat);
            group.measurement_time(Duration::from_secs(3));
        }
        for (label, rt) in &runtimes {
            if let Shape::RequestAlone = shape {
                bench::<tokio::time::Sleep>(&mut group, shape, (label, rt), "none");
                continue;
            }
            bench::<tokio::time::Sleep>(&mut group, shape, (label, rt), "tokio");
            bench::<lazy_deadline::Sleep>(&mut group, shape, (label, rt), "lazy");
        }
    }
    group.finish();
}

// 20 samples in 2 s per bench (the limiter's set above); set here rather than on the
// group, so criterion's command line (`--measurement-time`, `--sample-size`) can
// shorten them.
criterion_group! {
    name = benches;
    config = config().sample_size(20);
    targets = never_dearer
}
criterion_main!(benches);
