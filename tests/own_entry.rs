//! A `Sleep` on a tokio entry of its own (after a reset earlier across ticks, or a
//! reset of a completed `Sleep`), side by side with tokio's `Sleep`: polled and reset
//! away from its runtime, fired before its task polls, completed and polled again by
//! another task, moved into the past before its task polls, moved later (`is_elapsed`).

mod common;

use common::{ms, paused_runtime, poll_once, CountingWaker};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;
use tokio::time::Instant;

trait AnySleep: Future<Output = ()> {
    fn reset_to(self: Pin<&mut Self>, deadline: Instant);
    fn elapsed(&self) -> bool;
}
impl AnySleep for lazy_deadline::Sleep {
    fn reset_to(self: Pin<&mut Self>, deadline: Instant) {
        self.reset(deadline);
    }
    fn elapsed(&self) -> bool {
        self.is_elapsed()
    }
}
impl AnySleep for tokio::time::Sleep {
    fn reset_to(self: Pin<&mut Self>, deadline: Instant) {
        self.reset(deadline);
    }
    fn elapsed(&self) -> bool {
        self.is_elapsed()
    }
}

/// Made and moved earlier at home (ours: an entry of its own), then polled away from
/// its runtime (a plain thread): fired while its task has not polled, then reset
/// later there and polled. The wakes its waker gets: after the fire, and at the new
/// deadline.
fn away_reset_after_fire<S: AnySleep + 'static>(
    make: impl FnOnce(Instant) -> S + Send + 'static,
) -> Vec<usize> {
    let rt = paused_runtime();
    let (start, mut sleep) = rt.block_on(async move {
        let start = Instant::now();
        let mut sleep = Box::pin(make(start + ms(500)));
        assert!(sleep
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
        sleep.as_mut().reset_to(start + ms(100));
        (start, sleep)
    });
    let (count, waker) = CountingWaker::new();
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    rt.block_on(tokio::time::advance(ms(100)));
    let mut seen = vec![count.wakes()];
    sleep.as_mut().reset_to(start + ms(200)); // later, away: takes effect now
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    rt.block_on(tokio::time::advance(ms(100)));
    seen.push(count.wakes());
    seen
}

#[test]
fn a_sleep_on_its_own_entry_fired_then_reset_later_away_is_woken_at_the_new_deadline() {
    let tokio = away_reset_after_fire(tokio::time::sleep_until);
    let ours = away_reset_after_fire(lazy_deadline::sleep_until);
    assert_eq!(tokio, [1, 2], "tokio's own behaviour changed");
    assert_eq!(ours, tokio);
}

/// Completed at home, then polled and reset from a plain thread (away from its
/// runtime, no runtime context): into the past, then later, never polled between.
/// The wakes of its last waker after each (tokio's re-registers its entry with it).
fn completed_then_reset_away<S: AnySleep + 'static>(
    make: impl FnOnce(Instant) -> S + Send + 'static,
) -> Vec<usize> {
    let rt = paused_runtime();
    let (start, mut sleep) = rt.block_on(async move {
        let start = Instant::now();
        let mut sleep = Box::pin(make(start + ms(5)));
        sleep.as_mut().await;
        (start, sleep)
    });
    let (count, waker) = CountingWaker::new();
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready());
    sleep.as_mut().reset_to(start + ms(1)); // the past
    let mut seen = vec![count.wakes()];
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready());
    sleep.as_mut().reset_to(start + ms(20)); // later, not polled
    rt.block_on(tokio::time::advance(ms(15)));
    seen.push(count.wakes());
    seen
}

#[test]
fn a_completed_sleep_reset_away_from_home_wakes_its_last_waker_as_tokios_does() {
    let tokio = completed_then_reset_away(tokio::time::sleep_until);
    let ours = completed_then_reset_away(lazy_deadline::sleep_until);
    assert_eq!(tokio, [1, 2], "tokio's own behaviour changed");
    assert_eq!(ours, tokio);
}

/// A completed `Sleep` on an entry of its own, polled again (`Ready`) by another
/// task, then reset later and not polled: tokio's entry wakes the task that polled
/// it last.
async fn completed_repolled_by_another_task<S: AnySleep>(mut sleep: Pin<&mut S>) -> (usize, usize) {
    let (a, waker_a) = CountingWaker::new();
    let (b, waker_b) = CountingWaker::new();
    while sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker_a))
        .is_pending()
    {
        tokio::time::sleep(ms(1)).await;
    }
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(&waker_b))
        .is_ready());
    sleep.as_mut().reset_to(Instant::now() + ms(10));
    tokio::time::advance(ms(10)).await;
    (a.wakes(), b.wakes())
}

#[tokio::test(start_paused = true)]
async fn a_completed_sleep_polled_by_another_task_wakes_that_task_after_a_reset() {
    let start = Instant::now();
    let theirs = tokio::time::sleep_until(start + ms(100));
    tokio::pin!(theirs);
    theirs.as_mut().reset(start + ms(3));
    let tokio = completed_repolled_by_another_task(theirs).await;

    let start = Instant::now();
    let ours = lazy_deadline::sleep_until(start + ms(100));
    tokio::pin!(ours);
    assert!(ours
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    ours.as_mut().reset(start + ms(3)); // an entry of its own
    let ours = completed_repolled_by_another_task(ours).await;
    assert_eq!(tokio.1, 1, "tokio's own behaviour changed: {tokio:?}");
    assert_eq!(ours.1, tokio.1, "ours {ours:?}, tokio's {tokio:?}");
}

/// On an entry of its own, polled twice while pending by the same task (the second
/// poll answered without calling into tokio), then fired: woken once, and its next
/// poll is `Ready`, as tokio's.
#[tokio::test(start_paused = true)]
async fn a_sleep_on_its_own_entry_polled_while_pending_then_fired_is_ready() {
    let start = Instant::now();
    let sleep = lazy_deadline::sleep_until(start + ms(500));
    tokio::pin!(sleep);
    assert!(sleep
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_pending());
    sleep.as_mut().reset(start + ms(100)); // an entry of its own
    let (count, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    assert!(sleep.as_mut().poll(&mut cx).is_pending());
    tokio::time::advance(ms(100)).await;
    assert_eq!(count.wakes(), 1);
    assert!(
        sleep.as_mut().poll(&mut cx).is_ready(),
        "the fire was not seen"
    );
}

/// Filed (ours: in the set) at 10 ms, fired, and before its task polls it, moved
/// earlier across ticks, into the past (ours: an entry of its own, armed with no
/// waker, as the filing's waker was spent). `is_elapsed` right after the reset, then
/// the next poll.
async fn fired_then_moved_into_the_past<S: AnySleep>(mut s: Pin<&mut S>) -> (bool, bool) {
    let start = Instant::now();
    assert!(poll_once(s.as_mut()).is_pending());
    tokio::time::advance(ms(10)).await;
    s.as_mut().reset_to(start + ms(3));
    let elapsed = s.elapsed();
    let ready = poll_once(s.as_mut()).is_ready();
    (elapsed, ready)
}

#[tokio::test(start_paused = true)]
async fn a_fired_sleep_moved_into_the_past_is_elapsed_and_ready_as_tokios() {
    let theirs = tokio::time::sleep(ms(10));
    tokio::pin!(theirs);
    let tokio = fired_then_moved_into_the_past(theirs).await;
    let ours = lazy_deadline::sleep(ms(10));
    tokio::pin!(ours);
    let ours = fired_then_moved_into_the_past(ours).await;
    assert_eq!(tokio, (true, true), "tokio's own behaviour changed");
    assert_eq!(ours, tokio, "(is_elapsed, next poll ready): ours, tokio's");
}

/// On an entry of its own (moved earlier across ticks), then moved later (ours: a
/// store), and the first deadline passes with the task not polling: `is_elapsed`
/// stays `false` as tokio's, until the new deadline.
async fn moved_later_on_its_own_entry<S: AnySleep>(mut s: Pin<&mut S>) -> [bool; 2] {
    let start = Instant::now();
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset_to(start + ms(100));
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset_to(start + ms(300));
    tokio::time::advance(ms(150)).await;
    let at_150 = s.elapsed();
    tokio::time::advance(ms(200)).await;
    let at_350 = poll_once(s.as_mut()).is_ready() && s.elapsed();
    [at_150, at_350]
}

#[tokio::test(start_paused = true)]
async fn a_sleep_on_its_own_entry_moved_later_is_not_elapsed_before_its_deadline() {
    let theirs = tokio::time::sleep(ms(500));
    tokio::pin!(theirs);
    let tokio = moved_later_on_its_own_entry(theirs).await;
    let ours = lazy_deadline::sleep(ms(500));
    tokio::pin!(ours);
    let ours = moved_later_on_its_own_entry(ours).await;
    assert_eq!(tokio, [false, true], "tokio's own behaviour changed");
    assert_eq!(ours, tokio);
}

/// One `Sleep` used four ways in turn, in every order, twice over: as a ticker's
/// (reset after it completed, polled pending once, fired, polled `Ready`), as a
/// `select!` loop's (polled pending several times per fire, by two tasks' wakers in
/// turn), as a limiter's (reset after it completed and not polled before its fire:
/// its last waker is woken), and handed over after each of those (completed, polled
/// by the other task, which becomes the one a reset wakes, as a limiter shared
/// behind a lock). Ours, on an entry of its own, switches between polling tokio's
/// entry with the task's waker (about one pending poll per fire) and through its
/// signal (more), at each fire. After each step, the wakes of each waker and the
/// poll's outcome, which must be tokio's.
async fn ticker_then_select_loop_then_limiter<S: AnySleep>(mut s: Pin<&mut S>) -> Vec<String> {
    let (a_count, a) = CountingWaker::new();
    let (b_count, b) = CountingWaker::new();
    let mut seen = Vec::new();
    let mut record = |step: &str, ready: Option<bool>, elapsed: bool| {
        seen.push(format!(
            "{step}: a woken {}, b woken {}, ready {ready:?}, elapsed {elapsed}",
            a_count.wakes(),
            b_count.wakes()
        ));
    };
    let poll_with =
        |s: Pin<&mut S>, waker: &Waker| s.poll(&mut Context::from_waker(waker)).is_ready();
    assert!(!poll_with(s.as_mut(), &a));
    tokio::time::advance(ms(10)).await;
    assert!(poll_with(s.as_mut(), &a), "the first deadline");
    // Whether `b` polled last (the waker a reset of the completed `Sleep` wakes).
    let mut b_last = false;
    // Each phase after each other, so that a hand-over meets both modes, and the
    // switch from one to the other right before it.
    let phases = [
        "ticker",
        "ticker",
        "hand over",
        "loop",
        "hand over",
        "loop",
        "loop",
        "hand over",
        "limiter",
        "hand over",
        "ticker",
        "loop",
        "limiter",
        "limiter",
        "hand over",
    ];
    for round in 0..phases.len() * 2 {
        let now = Instant::now();
        match phases[round % phases.len()] {
            "ticker" => {
                let waker = if b_last { &b } else { &a };
                s.as_mut().reset_to(now + ms(1));
                let ready = poll_with(s.as_mut(), waker);
                record("ticker, reset", Some(ready), s.elapsed());
                tokio::time::advance(ms(1)).await;
                record("ticker, due", None, s.elapsed());
                let ready = poll_with(s.as_mut(), waker);
                record("ticker, polled", Some(ready), s.elapsed());
            }
            "loop" => {
                s.as_mut().reset_to(now + ms(3));
                for (i, waker) in [&b, &a, &b, &a].into_iter().enumerate() {
                    let ready = poll_with(s.as_mut(), waker);
                    record(&format!("loop, poll {i}"), Some(ready), s.elapsed());
                    tokio::time::advance(Duration::from_micros(500)).await;
                }
                tokio::time::advance(ms(1)).await;
                record("loop, due", None, s.elapsed());
                let ready = poll_with(s.as_mut(), &b);
                record("loop, polled", Some(ready), s.elapsed());
                b_last = true;
            }
            "limiter" => {
                s.as_mut().reset_to(now + ms(2));
                record("limiter, reset", None, s.elapsed());
                tokio::time::advance(ms(2)).await;
                record("limiter, due", None, s.elapsed());
                let ready = poll_with(s.as_mut(), if b_last { &b } else { &a });
                record("limiter, polled", Some(ready), s.elapsed());
            }
            _ => {
                // The other task polls the completed `Sleep`, then resets it.
                b_last = !b_last;
                let ready = poll_with(s.as_mut(), if b_last { &b } else { &a });
                record("hand over, polled", Some(ready), s.elapsed());
                s.as_mut().reset_to(now + ms(1));
                tokio::time::advance(ms(1)).await;
                record("hand over, due", None, s.elapsed());
                let ready = poll_with(s.as_mut(), if b_last { &b } else { &a });
                record("hand over, polled again", Some(ready), s.elapsed());
            }
        }
    }
    seen
}

#[test]
fn a_sleep_on_its_own_entry_used_as_a_ticker_a_loop_and_a_limiter_in_turn_wakes_as_tokios() {
    let tokio = paused_runtime().block_on(async {
        let theirs = tokio::time::sleep(ms(10));
        tokio::pin!(theirs);
        ticker_then_select_loop_then_limiter(theirs).await
    });
    common::in_both_places(|sets| {
        let tokio = tokio.clone();
        async move {
            let ours = lazy_deadline::sleep(ms(10));
            tokio::pin!(ours);
            let ours = ticker_then_select_loop_then_limiter(ours).await;
            for (step, (ours, tokio)) in ours.iter().zip(&tokio).enumerate() {
                assert_eq!(ours, tokio, "step {step} (through the sets: {sets})");
            }
            assert_eq!(ours.len(), tokio.len());
        }
    });
}

/// Moved earlier across ticks (ours: an entry of its own), then `is_elapsed` read
/// inside other runtimes' contexts, whose paused clocks `Instant::now()` would read:
/// one an hour ahead while the entry waits, one behind once the entry fired. tokio's
/// answers from its entry in both; so must ours, where the entry is armed at the
/// deadline (no clock of the caller's has a say).
async fn is_elapsed_read_in_other_runtimes<S: AnySleep>(
    mut s: Pin<&mut S>,
    ahead: &tokio::runtime::Handle,
    behind: &tokio::runtime::Handle,
) -> [bool; 4] {
    let start = Instant::now();
    assert!(poll_once(s.as_mut()).is_pending());
    s.as_mut().reset_to(start + ms(100));
    assert!(poll_once(s.as_mut()).is_pending());
    let waiting_ahead = {
        let _in_ahead = ahead.enter();
        s.elapsed()
    };
    let waiting_home = s.elapsed();
    tokio::time::advance(ms(100)).await;
    let fired_behind = {
        let _in_behind = behind.enter();
        s.elapsed()
    };
    let fired_home = s.elapsed();
    [waiting_ahead, waiting_home, fired_behind, fired_home]
}

#[test]
fn is_elapsed_read_inside_another_runtime_answers_from_the_entry_as_tokios() {
    // Built first: its clock, paused at its start, is behind every later runtime's.
    let behind = paused_runtime();
    let ahead = paused_runtime();
    ahead.block_on(tokio::time::advance(Duration::from_secs(3600)));
    let (ahead, behind) = (ahead.handle().clone(), behind.handle().clone());
    let tokio = paused_runtime().block_on(async {
        let theirs = tokio::time::sleep(ms(500));
        tokio::pin!(theirs);
        is_elapsed_read_in_other_runtimes(theirs, &ahead, &behind).await
    });
    assert_eq!(
        tokio,
        [false, false, true, true],
        "tokio's own behaviour changed"
    );
    common::in_both_places(|sets| {
        let (ahead, behind) = (ahead.clone(), behind.clone());
        async move {
            let ours = lazy_deadline::sleep(ms(500));
            tokio::pin!(ours);
            let ours = is_elapsed_read_in_other_runtimes(ours, &ahead, &behind).await;
            assert_eq!(ours, tokio, "sets preferred by the test hook: {sets}");
        }
    });
}
