//! loom model of `DeferredService` (`src/core/deferred.rs`): the hand-over between a
//! deadline set's wakes on tokio's per-worker timer and the task each schedules to
//! service the set. A wake that finds a task scheduled and not begun leaves its fire
//! to that task; whatever the interleaving, some service sees every fire, and no
//! more than one task is scheduled at a time before it begins.
#![cfg(lazy_deadline_loom)]

use lazy_deadline::core::deferred::DeferredService;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// What the model shares: the flag, the fires so far, the most any service saw, the
/// tasks scheduled (to join), and how many tasks are scheduled and not begun.
struct Model {
    deferred: DeferredService,
    fires: AtomicUsize,
    most_seen: AtomicUsize,
    tasks: Mutex<Vec<thread::JoinHandle<()>>>,
    waiting: AtomicUsize,
}

/// A task that services the set: reads the fires as it serves (Relaxed: only the
/// flag's hand-over orders the read after a claimed fire).
fn service_task(model: Arc<Model>) {
    model.waiting.fetch_sub(1, Ordering::SeqCst);
    let seen = model.deferred.serve(|| model.fires.load(Ordering::Relaxed));
    model.most_seen.fetch_max(seen, Ordering::SeqCst);
}

/// The driver fires the entry (Relaxed: tokio's state is not ours to order) and
/// wakes the set: a task if none is scheduled, else nothing.
fn fire(model: &Arc<Model>) {
    model.fires.fetch_add(1, Ordering::Relaxed);
    if model.deferred.claim() {
        let before = model.waiting.fetch_add(1, Ordering::SeqCst);
        assert_eq!(before, 0, "a second task scheduled before the first began");
        let task = {
            let model = model.clone();
            thread::spawn(move || service_task(model))
        };
        model.tasks.lock().unwrap().push(task);
    }
}

fn run(fires_per_thread: &[usize]) {
    let model = Arc::new(Model {
        deferred: DeferredService::default(),
        fires: AtomicUsize::new(0),
        most_seen: AtomicUsize::new(0),
        tasks: Mutex::new(Vec::new()),
        waiting: AtomicUsize::new(0),
    });
    let drivers: Vec<_> = fires_per_thread
        .iter()
        .map(|&fires| {
            let model = model.clone();
            thread::spawn(move || (0..fires).for_each(|_| fire(&model)))
        })
        .collect();
    drivers.into_iter().for_each(|d| d.join().unwrap());
    loop {
        let task = model.tasks.lock().unwrap().pop();
        match task {
            Some(task) => task.join().unwrap(),
            None => break,
        }
    }
    let total: usize = fires_per_thread.iter().sum();
    assert_eq!(
        model.most_seen.load(Ordering::SeqCst),
        total,
        "a fire no service saw"
    );
}

/// Two drivers (two workers' wheels) fire once each.
#[test]
fn every_fire_of_two_drivers_is_seen_by_a_service() {
    loom::model(|| run(&[1, 1]));
}

/// One driver fires twice: the second fire finds the first's task scheduled, begun
/// or done.
#[test]
fn a_second_fire_is_seen_whether_or_not_the_first_task_began() {
    loom::model(|| run(&[2]));
}
