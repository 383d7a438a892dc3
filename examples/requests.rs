//! Per-request deadlines under load: 64 tasks issuing requests that are pending
//! once (the shape of an RPC awaiting its reply), each with a 5 s deadline, on a
//! current-thread runtime and on 1 to N workers (N: the cores here). Prints ns per
//! request for the request alone, with `tokio::time::timeout`, with ours, with
//! pingora's `fast_timeout`, and with a fresh `sleep` per request raced in a
//! `select!` (tokio's and ours), and each one's own cost (total minus the request
//! alone), with the machine's load: on several workers tokio's cost is contention
//! on its timer driver's lock, which another busy process hides.
//!
//! ```text
//! cargo run --release --example requests [-- --duration SECONDS]
//! ```
//!
//! Then an in-process RPC: the same 64 tasks as clients of one server task (each call
//! sends the request and a oneshot over an mpsc channel; the server replies at once),
//! with no timeout, tokio's and ours around each call.
//!
//! Then two shapes beside those: requests answered at their timeout's first poll
//! (the timeout's whole life is the call and one poll), and a rate limiter's timer:
//! each task's one `Sleep`, fired, reset to now + 1 ms and polled after a yield (what
//! tower's `RateLimit` does between periods), measured as CPU time per period, since
//! the wall time is the waiting.
//!
//! On 1 and more workers, `lazy_deadline::timeout` also runs on a runtime built with
//! `on_thread_start(lazy_deadline::on_thread_start)` ("pinned"): its threads skip the
//! runtime lookup.
//!
//! Its check (exit status 1): every request and call of every variant completed in
//! time (none may elapse: the deadline is 5 s and a request takes microseconds), and
//! every period of the rate limiter's timer lasted at least its millisecond.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/pending_once.rs"]
mod pending_once;
#[path = "../benches/common/record.rs"]
mod record;

use pending_once::PendingOnce;
use std::future::Future;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

const TASKS: usize = 64;
const RUNS: usize = 5;
/// The RPC workload's variants: no timeout, tokio's, ours.
const RPC_VARIANTS: [Variant; 3] = [Variant::Alone, Variant::Tokio, Variant::Lazy];
const DEADLINE: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Alone,
    Tokio,
    Lazy,
    TokioSleep,
    LazySleep,
    Pingora,
    /// `Lazy` on a runtime whose threads are pinned to it (`on_thread_start`).
    LazyPinned,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Alone => "no timeout",
            Variant::Tokio => "tokio::time::timeout",
            Variant::Lazy => "lazy_deadline::timeout",
            Variant::TokioSleep => "tokio::time::sleep select",
            Variant::LazySleep => "lazy_deadline::sleep select",
            Variant::Pingora => "pingora fast_timeout",
            Variant::LazyPinned => "lazy_deadline::timeout, pinned",
        }
    }
}

/// One request under `variant`; `false` if it elapsed.
async fn request(variant: Variant) -> bool {
    let req = PendingOnce(false);
    match variant {
        Variant::Alone => {
            req.await;
            true
        }
        Variant::Tokio => tokio::time::timeout(DEADLINE, req).await.is_ok(),
        Variant::Lazy | Variant::LazyPinned => lazy_deadline::timeout(DEADLINE, req).await.is_ok(),
        // A fresh sleep per request raced in a `select!`, the request first (as a
        // timeout polls it).
        Variant::TokioSleep => tokio::select! {
            biased;
            () = req => true,
            () = tokio::time::sleep(DEADLINE) => false,
        },
        Variant::LazySleep => tokio::select! {
            biased;
            () = req => true,
            () = lazy_deadline::sleep(DEADLINE) => false,
        },
        Variant::Pingora => pingora_timeout::fast_timeout::fast_timeout(DEADLINE, req)
            .await
            .is_ok(),
    }
}

/// A runtime of `workers` workers (0: current-thread), its threads pinned to it for
/// our timers when `pinned` (`on_thread_start`).
fn runtime(workers: usize, pinned: bool) -> tokio::runtime::Runtime {
    let mut builder = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    if pinned {
        builder.on_thread_start(lazy_deadline::on_thread_start);
    }
    builder.enable_time().build().unwrap()
}

/// One request answered at once under `variant`: the timeout's whole life is the
/// call and one poll.
async fn ready_request(variant: Variant) -> bool {
    let req = std::future::ready(());
    match variant {
        Variant::Tokio => tokio::time::timeout(DEADLINE, req).await.is_ok(),
        Variant::Lazy | Variant::LazyPinned => lazy_deadline::timeout(DEADLINE, req).await.is_ok(),
        _ => {
            req.await;
            true
        }
    }
}

/// ns per request answered at its first poll (see [`ready_request`]); a task yields
/// every 64 requests, so that the tasks take turns as in the other workloads.
fn measure_ready(rt: &tokio::runtime::Runtime, variant: Variant, per_task: usize) -> (f64, bool) {
    in_tasks(rt, per_task, move |i| async move {
        let ok = ready_request(variant).await;
        if i % 64 == 63 {
            tokio::task::yield_now().await;
        }
        ok
    })
}

/// The rate limiter's timer: each task's one `Sleep`, fired, reset to now + 1 ms and
/// polled after a yield, `periods` times. CPU ns per period (all of the process's
/// threads), and whether every task took at least its `periods` milliseconds.
fn measure_refire(rt: &tokio::runtime::Runtime, variant: Variant, periods: usize) -> (f64, bool) {
    const PERIOD: Duration = Duration::from_millis(1);
    rt.block_on(async {
        let (cpu, start) = (cli::cpu_ns(), Instant::now());
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                tokio::spawn(async move {
                    let begun = Instant::now();
                    macro_rules! periods {
                        ($sleep:expr) => {{
                            let sleep = $sleep;
                            tokio::pin!(sleep);
                            for _ in 0..periods {
                                sleep.as_mut().await;
                                sleep.as_mut().reset(tokio::time::Instant::now() + PERIOD);
                                tokio::task::yield_now().await;
                            }
                        }};
                    }
                    match variant {
                        Variant::Tokio => periods!(tokio::time::sleep(PERIOD)),
                        _ => periods!(lazy_deadline::sleep(PERIOD)),
                    }
                    begun.elapsed() >= PERIOD * periods as u32
                })
            })
            .collect();
        let mut ok = true;
        for task in tasks {
            ok &= task.await.unwrap();
        }
        let _ = start;
        let ns = (cli::cpu_ns() - cpu) as f64 / (TASKS * periods) as f64;
        (ns, ok)
    })
}

/// ns per request for `per_task` requests in each of the 64 tasks, and whether all
/// of them completed in time.
fn measure(rt: &tokio::runtime::Runtime, variant: Variant, per_task: usize) -> (f64, bool) {
    in_tasks(rt, per_task, move |_| request(variant))
}

/// ns per call of `call` (given the call's number) made `per_task` times in each of
/// the 64 tasks, and whether every call returned `true`.
fn in_tasks<F: Future<Output = bool> + Send>(
    rt: &tokio::runtime::Runtime,
    per_task: usize,
    call: impl Fn(usize) -> F + Send + Copy + 'static,
) -> (f64, bool) {
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                tokio::spawn(async move {
                    let mut ok = true;
                    for i in 0..per_task {
                        ok &= call(i).await;
                    }
                    ok
                })
            })
            .collect();
        let mut ok = true;
        for task in tasks {
            ok &= task.await.unwrap();
        }
        let ns = start.elapsed().as_nanos() as f64 / (TASKS * per_task) as f64;
        (ns, ok)
    })
}

/// An in-process RPC: the request and a oneshot for the reply go to a server task
/// over an mpsc channel; the server replies at once.
type Call = (u64, oneshot::Sender<u64>);

/// One RPC under `variant` (the deadline covers the send and the reply, as a client
/// library's `timeout(d, client.call(req))` does); `false` if it elapsed or failed.
async fn rpc(server: &mpsc::Sender<Call>, variant: Variant, n: u64) -> bool {
    let call = async {
        let (reply, answer) = oneshot::channel();
        server.send((n, reply)).await.ok()?;
        answer.await.ok()
    };
    let answer = match variant {
        Variant::Tokio => tokio::time::timeout(DEADLINE, call).await.ok().flatten(),
        Variant::Lazy => lazy_deadline::timeout(DEADLINE, call).await.ok().flatten(),
        _ => call.await,
    };
    answer == Some(n)
}

/// ns per RPC for `per_task` calls from each of the 64 client tasks to one server
/// task, and whether every call was answered in time.
fn measure_rpc(rt: &tokio::runtime::Runtime, variant: Variant, per_task: usize) -> (f64, bool) {
    rt.block_on(async {
        let (server, mut calls) = mpsc::channel::<Call>(1024);
        let serving = tokio::spawn(async move {
            while let Some((n, reply)) = calls.recv().await {
                let _ = reply.send(n);
            }
        });
        let start = Instant::now();
        let clients: Vec<_> = (0..TASKS)
            .map(|_| {
                let server = server.clone();
                tokio::spawn(async move {
                    let mut ok = true;
                    for n in 0..per_task as u64 {
                        ok &= rpc(&server, variant, n).await;
                    }
                    ok
                })
            })
            .collect();
        let mut ok = true;
        for client in clients {
            ok &= client.await.unwrap();
        }
        let ns = start.elapsed().as_nanos() as f64 / (TASKS * per_task) as f64;
        drop(server);
        serving.await.unwrap();
        (ns, ok)
    })
}

/// The medians of `RUNS` alternating runs of each variant, and whether all were ok.
fn medians(variants: &[Variant], mut run: impl FnMut(Variant) -> (f64, bool)) -> (Vec<f64>, bool) {
    let mut samples = vec![Vec::new(); variants.len()];
    let mut all_ok = true;
    for _ in 0..RUNS {
        for (i, &variant) in variants.iter().enumerate() {
            let (ns, ok) = run(variant);
            all_ok &= ok;
            samples[i].push(ns);
        }
    }
    let medians = samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        })
        .collect();
    (medians, all_ok)
}

/// Prints and records one workload's medians on one runtime configuration.
fn report(workload: &str, label: &str, variants: &[Variant], median: &[f64]) {
    println!("-- {label}, {workload}");
    for (i, &variant) in variants.iter().enumerate() {
        // Where the first variant is the workload alone, what each one adds to it.
        let own = if variants[0] == Variant::Alone {
            format!("   own {:>7.1} ns", (median[i] - median[0]).max(0.0))
        } else {
            String::new()
        };
        let name = match (workload, variant) {
            ("refire", Variant::Tokio) => "tokio::time::Sleep, CPU",
            ("refire", _) => "lazy_deadline::Sleep, CPU",
            _ => variant.name(),
        };
        println!("  {name:<32} {:>8.1} ns{own}", median[i]);
        record::record_value(&format!("{workload}/{label}/{variant:?}/ns"), median[i]);
    }
}

/// The variants of the per-request workloads on a configuration: the pinned one only
/// where the runtime starts its threads (not on current-thread).
fn request_variants(workers: usize) -> Vec<Variant> {
    let mut variants = vec![
        Variant::Alone,
        Variant::Tokio,
        Variant::Lazy,
        Variant::Pingora,
        Variant::TokioSleep,
        Variant::LazySleep,
    ];
    if workers > 0 {
        variants.push(Variant::LazyPinned);
    }
    variants
}

fn main() -> ExitCode {
    let seconds = cli::arg("--duration").unwrap_or(20.0);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let configs: Vec<usize> = std::iter::once(0).chain(1..=cores).collect();
    // Size the work to the time: a calibration round per configuration and workload,
    // then RUNS alternating runs of every variant sharing what is left.
    let ready_variants = [Variant::Alone, Variant::Tokio, Variant::Lazy];
    let refire_variants = [Variant::Tokio, Variant::Lazy];
    let runs_per_config = (request_variants(1).len()
        + RPC_VARIANTS.len()
        + ready_variants.len()
        + refire_variants.len())
        * RUNS;
    let budget = Duration::from_secs_f64(seconds) / (configs.len() * runs_per_config) as u32;
    println!("load average at start: {}", cli::load());
    println!(
        "{} tasks, requests pending once, and RPCs; deadline 5 s; ns per request (median of {RUNS} runs); own = total - no timeout",
        TASKS
    );
    let mut all_ok = true;
    for &workers in &configs {
        let rt = runtime(workers, false);
        let pinned = runtime(workers, true);
        let on = |variant: Variant| {
            if variant == Variant::LazyPinned {
                &pinned
            } else {
                &rt
            }
        };
        let label = if workers == 0 {
            "current-thread".to_string()
        } else {
            format!("{workers} worker{}", if workers == 1 { "" } else { "s" })
        };
        let variants = request_variants(workers);
        let (probe, _) = measure(&rt, Variant::Tokio, 200);
        let per_task = ((budget.as_nanos() as f64 / probe / TASKS as f64) as usize).max(50);
        let (median, ok) = medians(&variants, |variant| measure(on(variant), variant, per_task));
        all_ok &= ok;
        report("requests", &label, &variants, &median);
        let own = |i: usize| (median[i] - median[0]).max(0.1);
        println!(
            "  ours vs tokio: request + timeout {:.1}x, own cost {:.1}x lower; vs pingora {:.1}x; fresh sleep: own cost {:.1}x lower",
            median[1] / median[2],
            own(1) / own(2),
            median[3] / median[2],
            own(4) / own(5)
        );
        if let Some(i) = variants.iter().position(|&v| v == Variant::LazyPinned) {
            println!(
                "  pinned: request + timeout {:.1}x, own cost {:.1}x lower than tokio's",
                median[1] / median[i],
                own(1) / own(i)
            );
        }
        let (probe, _) = measure_rpc(&rt, Variant::Tokio, 200);
        let per_task = ((budget.as_nanos() as f64 / probe / TASKS as f64) as usize).max(50);
        let (median, ok) = medians(&RPC_VARIANTS, |variant| measure_rpc(&rt, variant, per_task));
        all_ok &= ok;
        report("rpc", &label, &RPC_VARIANTS, &median);
        println!(
            "  ours vs tokio: RPC + timeout {:.2}x",
            median[1] / median[2]
        );
        let (probe, _) = measure_ready(&rt, Variant::Tokio, 1_000);
        let per_task = ((budget.as_nanos() as f64 / probe / TASKS as f64) as usize).max(100);
        let (median, ok) = medians(&ready_variants, |variant| {
            measure_ready(&rt, variant, per_task)
        });
        all_ok &= ok;
        report("ready", &label, &ready_variants, &median);
        let own = |i: usize| (median[i] - median[0]).max(0.1);
        println!(
            "  answered at the first poll: request + timeout {:.2}x, own cost {:.1}x lower than tokio's",
            median[1] / median[2],
            own(1) / own(2)
        );
        // A period is a millisecond of wall time whatever the CPU: size by that.
        let periods = ((budget.as_secs_f64() * 1e3) as usize).clamp(20, 2_000);
        let (median, ok) = medians(&refire_variants, |variant| {
            measure_refire(&rt, variant, periods)
        });
        all_ok &= ok;
        report("refire", &label, &refire_variants, &median);
        println!(
            "  a fired Sleep reset and polled after a yield: CPU per period {:.2}x lower than tokio's",
            median[0] / median[1]
        );
    }
    println!("load average at end: {}", cli::load());
    if all_ok {
        println!("ok: every request and call completed in time");
        ExitCode::SUCCESS
    } else {
        println!("FAILED: a request or a call elapsed");
        ExitCode::FAILURE
    }
}
