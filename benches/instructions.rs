//! The instruction-count suite: every shape a drop-in user's code gives `sleep`,
//! `Sleep`, `timeout` and `interval`, tokio's timers beside ours, as a plain program
//! that `benches/instructions.py` runs under callgrind (instructions are
//! deterministic where this machine's timings move 10–30%).
//!
//! ```text
//! instructions <shape> <side> <ops>   # run one shape `ops` times, then exit
//! instructions --list                 # the shapes: name, paused clock (0/1), what it does
//! ```
//!
//! `side` is `tokio`, `lazy`, or `tokio2` (tokio's timers again, through a separate
//! instantiation of the same harness: the runner's self-check, which must read
//! 1.00x against `tokio`). Every side runs the same generic harness code (the
//! `Side` impls are one macro, differing only in the module the timer items come
//! from: `tokio::time` or `lazy_deadline::time`), on a current-thread runtime;
//! shapes whose timers must fire run under a paused clock (`start_paused`), which
//! auto-advances to the next deadline whenever the runtime is idle.
//!
//! A row's operation is the one its description names; for the 64-task rows it is
//! one timer's operation (one fire, one request), so `ops` must be a multiple of 64
//! there. The runner differences two op counts, so the runtime's start and exit and
//! each shape's one-time set-up (the first poll of a long-lived `Sleep`, an
//! interval's immediate first tick) cancel out.

#[path = "../examples/support/pending_once.rs"]
mod pending_once;

use pending_once::PendingOnce;
use std::future::{pending, poll_fn, ready, Future};
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::process::ExitCode;
use std::task::Poll;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::task::yield_now;
use tokio::time::Instant;

/// A deadline that never comes during a run (a request's 5 s timeout).
const DEADLINE: Duration = Duration::from_secs(5);
/// How far ahead the long-lived `Sleep`s start: the runner's 6,400 steps of 1 ms
/// either way stay within it (and within tokio's wheel), so they never fire.
const AHEAD: Duration = Duration::from_secs(3600);
/// The fire shapes' period.
const PERIOD: Duration = Duration::from_millis(1);
/// The tasks of the 64-task rows.
const TASKS: u64 = 64;

/// The timer items a shape uses, so each shape is one generic function run with
/// either side's timers.
trait Side: 'static {
    type Sleep: Future<Output = ()> + Send + 'static;
    type Interval: Send + 'static;
    type Elapsed: Send;
    type Timeout<F: Future + Send>: Future<Output = Result<F::Output, Self::Elapsed>> + Send;
    fn sleep(duration: Duration) -> Self::Sleep;
    fn sleep_until(deadline: Instant) -> Self::Sleep;
    fn deadline(sleep: &Self::Sleep) -> Instant;
    fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant);
    fn timeout<F: Future + Send>(duration: Duration, future: F) -> Self::Timeout<F>;
    fn interval(period: Duration) -> Self::Interval;
    fn interval_at(start: Instant, period: Duration) -> Self::Interval;
    fn tick(interval: &mut Self::Interval) -> impl Future<Output = Instant> + Send + '_;
}

/// One `Side` impl per module path: the bodies are the same tokens for every side.
macro_rules! side {
    ($side:ident, $($time:ident)::+) => {
        struct $side;

        impl Side for $side {
            type Sleep = $($time)::+::Sleep;
            type Interval = $($time)::+::Interval;
            type Elapsed = $($time)::+::error::Elapsed;
            type Timeout<F: Future + Send> = $($time)::+::Timeout<F>;
            #[inline]
            fn sleep(duration: Duration) -> Self::Sleep {
                $($time)::+::sleep(duration)
            }
            #[inline]
            fn sleep_until(deadline: Instant) -> Self::Sleep {
                $($time)::+::sleep_until(deadline)
            }
            #[inline]
            fn deadline(sleep: &Self::Sleep) -> Instant {
                sleep.deadline()
            }
            #[inline]
            fn reset(sleep: Pin<&mut Self::Sleep>, deadline: Instant) {
                sleep.reset(deadline)
            }
            #[inline]
            fn timeout<F: Future + Send>(duration: Duration, future: F) -> Self::Timeout<F> {
                $($time)::+::timeout(duration, future)
            }
            #[inline]
            fn interval(period: Duration) -> Self::Interval {
                $($time)::+::interval(period)
            }
            #[inline]
            fn interval_at(start: Instant, period: Duration) -> Self::Interval {
                $($time)::+::interval_at(start, period)
            }
            #[inline]
            fn tick(interval: &mut Self::Interval) -> impl Future<Output = Instant> + Send + '_ {
                interval.tick()
            }
        }
    };
}

side!(Tokio, tokio::time);
// The self-check's side: tokio's timers through a type of its own, so its harness is
// a separate instantiation of the same code, as ours is.
side!(Tokio2, tokio::time);
side!(Lazy, lazy_deadline::time);

/// Yields every 64th operation in the shapes whose operations never wait, so that
/// tokio's cooperative budget (128 per task poll) never runs out and turns a poll
/// into a forced `Pending`.
async fn take_turns(op: u64) {
    if op % 64 == 63 {
        yield_now().await;
    }
}

/// Polls `future` once with the caller's waker (the poll a `select!` loop makes).
async fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> bool {
    let mut future = Some(future);
    poll_fn(|cx| {
        let future = future.take().expect("polled once");
        Poll::Ready(black_box(future.poll(cx).is_pending()))
    })
    .await
}

/// `timeout(5 s, f)` awaited, `f` ready at its first poll.
async fn timeout_ready<S: Side>(ops: u64) {
    for op in 0..ops {
        black_box(S::timeout(DEADLINE, ready(black_box(op))).await.is_ok());
        take_turns(op).await;
    }
}

/// A `sleep(5 s)` made in a biased `select!` whose other branch is ready, dropped
/// unpolled.
async fn sleep_select_unpolled<S: Side>(ops: u64) {
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

/// A `sleep(5 s)` made, polled once (pending), dropped.
async fn sleep_poll_once_drop<S: Side>(ops: u64) {
    for op in 0..ops {
        let sleep = pin!(S::sleep(DEADLINE));
        poll_once(sleep).await;
        take_turns(op).await;
    }
}

/// `timeout(5 s, request)` awaited, the request pending once (it wakes its task at
/// once, as a reply would, then is ready).
async fn timeout_pending_once<S: Side>(ops: u64) {
    for _ in 0..ops {
        black_box(S::timeout(DEADLINE, PendingOnce(false)).await.is_ok());
    }
}

/// A pending poll of an armed `Sleep`: one `Sleep` an hour out, polled with the
/// task's waker, then a yield (so every poll is a new poll of the task, with the same
/// waker), per operation.
async fn sleep_pending_poll<S: Side>(ops: u64) {
    let mut sleep = pin!(S::sleep(AHEAD));
    for _ in 0..ops {
        poll_once(sleep.as_mut()).await;
        yield_now().await;
    }
}

/// An armed `Sleep` (registered or filed with the task's waker, as in a loop), reset
/// by `step` (later when `later`, else earlier) and polled once, per operation. The
/// deadline starts an hour out, so it never fires during the run.
async fn reset_then_poll<S: Side>(ops: u64, step: Duration, later: bool) {
    let mut sleep = pin!(S::sleep(AHEAD));
    poll_once(sleep.as_mut()).await;
    let mut deadline = S::deadline(&sleep);
    for op in 0..ops {
        if later {
            deadline += step;
        } else {
            deadline -= step;
        }
        S::reset(sleep.as_mut(), black_box(deadline));
        poll_once(sleep.as_mut()).await;
        take_turns(op).await;
    }
}

/// `sleep(1 ms)` awaited until it fires (paused clock).
async fn sleep_fire<S: Side>(ops: u64) {
    for _ in 0..ops {
        S::sleep(PERIOD).await;
    }
}

/// `timeout(1 ms, pending())` awaited until it elapses (paused clock).
async fn timeout_elapse<S: Side>(ops: u64) {
    for _ in 0..ops {
        black_box(S::timeout(PERIOD, pending::<()>()).await.is_err());
    }
}

/// `interval(1 ms)`'s ticks awaited (paused clock; the first tick is immediate).
async fn interval_tick<S: Side>(ops: u64) {
    let mut interval = S::interval(PERIOD);
    for _ in 0..ops {
        black_box(S::tick(&mut interval).await);
    }
}

/// A rate limiter's fired `Sleep`: awaited, reset to now + 1 ms, then a yield
/// (paused clock).
async fn refire<S: Side>(ops: u64) {
    let mut sleep = pin!(S::sleep(PERIOD));
    for _ in 0..ops {
        sleep.as_mut().await;
        S::reset(sleep.as_mut(), Instant::now() + PERIOD);
        yield_now().await;
    }
}

/// One of 64 tasks' sleeps, each due `start + (i + 1) ms + k * 64 ms`: one fires per
/// tick (paused clock).
async fn sleep_staggered<S: Side>(start: Instant, i: u64, rounds: u64) {
    for k in 0..rounds {
        S::sleep_until(start + PERIOD * (i + 1) as u32 + PERIOD * (TASKS * k) as u32).await;
    }
}

/// One of 64 tasks' intervals of 64 ms, the `i`th starting at `start + (i + 1) ms`:
/// one ticks per tick (paused clock).
async fn interval_staggered<S: Side>(start: Instant, i: u64, rounds: u64) {
    let mut interval = S::interval_at(start + PERIOD * (i + 1) as u32, PERIOD * TASKS as u32);
    for _ in 0..rounds {
        black_box(S::tick(&mut interval).await);
    }
}

/// `future` spawned as a task on `rt`, awaited from `block_on`.
fn in_task<F: Future<Output = ()> + Send + 'static>(rt: &Runtime, future: F) {
    rt.block_on(async { tokio::spawn(future).await.unwrap() });
}

/// 64 tasks, the `i`th running `task(start, i, ops / 64)`, spawned together from
/// `block_on` at one instant `start` and awaited.
fn in_64_tasks<F, T>(rt: &Runtime, ops: u64, task: T)
where
    F: Future<Output = ()> + Send + 'static,
    T: Fn(Instant, u64, u64) -> F,
{
    assert!(
        ops % TASKS == 0,
        "the 64-task shapes run a multiple of 64 operations"
    );
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| tokio::spawn(task(start, i, ops / TASKS)))
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// The shapes: (row name, paused clock, what one operation is).
const SHAPES: &[(&str, bool, &str)] = &[
    (
        "timeout_ready/task",
        false,
        "`timeout(5 s, f)`, `f` ready at its first poll",
    ),
    (
        "timeout_ready/block_on",
        false,
        "`timeout(5 s, f)`, `f` ready at its first poll",
    ),
    (
        "sleep_select_unpolled/task",
        false,
        "`sleep(5 s)` in a biased `select!` whose other branch is ready: made, dropped unpolled",
    ),
    (
        "sleep_select_unpolled/block_on",
        false,
        "`sleep(5 s)` in a biased `select!` whose other branch is ready: made, dropped unpolled",
    ),
    (
        "sleep_poll_once_drop/task",
        false,
        "`sleep(5 s)` made, polled once (pending), dropped",
    ),
    (
        "sleep_poll_once_drop/block_on",
        false,
        "`sleep(5 s)` made, polled once (pending), dropped",
    ),
    (
        "timeout_pending_once/task",
        false,
        "`timeout(5 s, request)`, the request pending once",
    ),
    (
        "timeout_pending_once/64_tasks",
        false,
        "`timeout(5 s, request)`, the request pending once, 64 tasks interleaved",
    ),
    (
        "timeout_pending_once/block_on",
        false,
        "`timeout(5 s, request)`, the request pending once",
    ),
    (
        "sleep_pending_poll/task",
        false,
        "a pending poll of an armed `Sleep` (same waker), then a yield",
    ),
    (
        "sleep_pending_poll/block_on",
        false,
        "a pending poll of an armed `Sleep` (same waker), then a yield",
    ),
    (
        "reset_later_1ms/task",
        false,
        "an armed `Sleep` reset 1 ms later, then polled (pending)",
    ),
    (
        "reset_earlier_1ms/task",
        false,
        "an armed `Sleep` reset 1 ms earlier, then polled (pending)",
    ),
    // Paused although nothing fires: on the real clock the deadlines' phase against
    // the driver's millisecond ticks differs run to run, and with it how many of the
    // 1 µs steps cross a tick (where the deadline set's entry moves): the sets' row
    // moved by 2-4% between runs of one binary. Paused, the clock reads the
    // runtime's start throughout, and every run crosses the same ticks.
    (
        "reset_earlier_1us/task",
        true,
        "an armed `Sleep` reset 1 µs earlier, then polled (pending)",
    ),
    (
        "sleep_fire/task",
        true,
        "`sleep(1 ms)` awaited until it fires",
    ),
    (
        "sleep_fire/block_on",
        true,
        "`sleep(1 ms)` awaited until it fires",
    ),
    (
        "timeout_elapse/task",
        true,
        "`timeout(1 ms, pending())` awaited until it elapses",
    ),
    (
        "interval_tick/task",
        true,
        "an `interval(1 ms)` tick awaited",
    ),
    (
        "interval_tick/block_on",
        true,
        "an `interval(1 ms)` tick awaited",
    ),
    (
        "refire/task",
        true,
        "a rate limiter's fired `Sleep`: reset to now + 1 ms, a yield, awaited",
    ),
    (
        "sleep_fire/64_tasks_one_tick",
        true,
        "64 tasks' `sleep(1 ms)` all due in one tick; per fire",
    ),
    (
        "interval_tick/64_tasks_one_tick",
        true,
        "64 tasks' `interval(1 ms)` all due in one tick; per tick",
    ),
    (
        "timeout_elapse/64_tasks_one_tick",
        true,
        "64 tasks' `timeout(1 ms, pending())` all due in one tick; per elapse",
    ),
    (
        "sleep_fire/64_tasks_staggered",
        true,
        "64 tasks' sleeps, one due per tick; per fire",
    ),
    (
        "interval_tick/64_tasks_staggered",
        true,
        "64 tasks' `interval(64 ms)`s, one due per tick; per tick",
    ),
];

/// Runs `shape` `ops` times with `S`'s timers on `rt`.
fn run<S: Side>(rt: &Runtime, shape: &str, ops: u64) {
    let micro = Duration::from_micros(1);
    match shape {
        "timeout_ready/task" => in_task(rt, timeout_ready::<S>(ops)),
        "timeout_ready/block_on" => rt.block_on(timeout_ready::<S>(ops)),
        "sleep_select_unpolled/task" => in_task(rt, sleep_select_unpolled::<S>(ops)),
        "sleep_select_unpolled/block_on" => rt.block_on(sleep_select_unpolled::<S>(ops)),
        "sleep_poll_once_drop/task" => in_task(rt, sleep_poll_once_drop::<S>(ops)),
        "sleep_poll_once_drop/block_on" => rt.block_on(sleep_poll_once_drop::<S>(ops)),
        "timeout_pending_once/task" => in_task(rt, timeout_pending_once::<S>(ops)),
        "timeout_pending_once/64_tasks" => {
            in_64_tasks(rt, ops, |_, _, n| timeout_pending_once::<S>(n))
        }
        "timeout_pending_once/block_on" => rt.block_on(timeout_pending_once::<S>(ops)),
        "sleep_pending_poll/task" => in_task(rt, sleep_pending_poll::<S>(ops)),
        "sleep_pending_poll/block_on" => rt.block_on(sleep_pending_poll::<S>(ops)),
        "reset_later_1ms/task" => in_task(rt, reset_then_poll::<S>(ops, PERIOD, true)),
        "reset_earlier_1ms/task" => in_task(rt, reset_then_poll::<S>(ops, PERIOD, false)),
        "reset_earlier_1us/task" => in_task(rt, reset_then_poll::<S>(ops, micro, false)),
        "sleep_fire/task" => in_task(rt, sleep_fire::<S>(ops)),
        "sleep_fire/block_on" => rt.block_on(sleep_fire::<S>(ops)),
        "timeout_elapse/task" => in_task(rt, timeout_elapse::<S>(ops)),
        "interval_tick/task" => in_task(rt, interval_tick::<S>(ops)),
        "interval_tick/block_on" => rt.block_on(interval_tick::<S>(ops)),
        "refire/task" => in_task(rt, refire::<S>(ops)),
        "sleep_fire/64_tasks_one_tick" => in_64_tasks(rt, ops, |_, _, n| sleep_fire::<S>(n)),
        "interval_tick/64_tasks_one_tick" => in_64_tasks(rt, ops, |_, _, n| interval_tick::<S>(n)),
        "timeout_elapse/64_tasks_one_tick" => {
            in_64_tasks(rt, ops, |_, _, n| timeout_elapse::<S>(n))
        }
        "sleep_fire/64_tasks_staggered" => in_64_tasks(rt, ops, sleep_staggered::<S>),
        "interval_tick/64_tasks_staggered" => in_64_tasks(rt, ops, interval_staggered::<S>),
        _ => unreachable!("shape `{shape}` is listed but not run"),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args.iter().any(|arg| arg == "--bench") {
        // `cargo bench` runs every bench target with `--bench`: this one is measured
        // under callgrind by its runner, not timed here.
        println!("instructions: run `python3 benches/instructions.py` (callgrind)");
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("--list") {
        for (name, paused, what) in SHAPES {
            println!("{name}\t{}\t{what}", u8::from(*paused));
        }
        return ExitCode::SUCCESS;
    }
    let usage = "usage: instructions <shape> <tokio|lazy|tokio2> <ops> | instructions --list";
    let [shape, side, ops] = args.as_slice() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let Some(&(_, paused, _)) = SHAPES.iter().find(|(name, ..)| name == shape) else {
        eprintln!("instructions: no shape `{shape}` (`--list` lists them)");
        return ExitCode::from(2);
    };
    let Ok(ops) = ops.parse::<u64>() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(paused)
        .build()
        .unwrap();
    match side.as_str() {
        "tokio" => run::<Tokio>(&rt, shape, ops),
        "tokio2" => run::<Tokio2>(&rt, shape, ops),
        "lazy" => run::<Lazy>(&rt, shape, ops),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
