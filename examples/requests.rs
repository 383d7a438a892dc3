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
//! Its check (exit status 1): every request and call of every variant completed in
//! time (none may elapse: the deadline is 5 s and a request takes microseconds).

#[path = "support/cli.rs"]
mod cli;
#[path = "../benches/common/record.rs"]
mod record;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

const TASKS: usize = 64;
const RUNS: usize = 5;
/// The RPC workload's variants: no timeout, tokio's, ours.
const RPC_VARIANTS: [Variant; 3] = [Variant::Alone, Variant::Tokio, Variant::Lazy];
const DEADLINE: Duration = Duration::from_secs(5);

/// A request: pending once (its task is woken at once, as by a reply), then done.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Alone,
    Tokio,
    Lazy,
    TokioSleep,
    LazySleep,
    Pingora,
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
        Variant::Lazy => lazy_deadline::timeout(DEADLINE, req).await.is_ok(),
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

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    let mut builder = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    builder.enable_time().build().unwrap()
}

/// ns per request for `per_task` requests in each of the 64 tasks, and whether all
/// of them completed in time.
fn measure(rt: &tokio::runtime::Runtime, variant: Variant, per_task: usize) -> (f64, bool) {
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                tokio::spawn(async move {
                    let mut ok = true;
                    for _ in 0..per_task {
                        ok &= request(variant).await;
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
        let own = (median[i] - median[0]).max(0.0);
        println!(
            "  {:<28} {:>8.1} ns   own {:>7.1} ns",
            variant.name(),
            median[i],
            own
        );
        record::record_value(&format!("{workload}/{label}/{variant:?}/ns"), median[i]);
    }
}

fn main() -> ExitCode {
    let seconds = cli::arg("--duration").unwrap_or(20.0);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let configs: Vec<usize> = std::iter::once(0).chain(1..=cores).collect();
    let variants = [
        Variant::Alone,
        Variant::Tokio,
        Variant::Lazy,
        Variant::Pingora,
        Variant::TokioSleep,
        Variant::LazySleep,
    ];
    // Size the work to the time: a calibration round per configuration and workload,
    // then RUNS alternating runs of every variant sharing what is left.
    let runs_per_config = (variants.len() + RPC_VARIANTS.len()) * RUNS;
    let budget = Duration::from_secs_f64(seconds) / (configs.len() * runs_per_config) as u32;
    println!("load average at start: {}", cli::load());
    println!(
        "{} tasks, requests pending once, and RPCs; deadline 5 s; ns per request (median of {RUNS} runs); own = total - no timeout",
        TASKS
    );
    let mut all_ok = true;
    for &workers in &configs {
        let rt = runtime(workers);
        let label = if workers == 0 {
            "current-thread".to_string()
        } else {
            format!("{workers} worker{}", if workers == 1 { "" } else { "s" })
        };
        let (probe, _) = measure(&rt, Variant::Tokio, 200);
        let per_task = ((budget.as_nanos() as f64 / probe / TASKS as f64) as usize).max(50);
        let (median, ok) = medians(&variants, |variant| measure(&rt, variant, per_task));
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
        let (probe, _) = measure_rpc(&rt, Variant::Tokio, 200);
        let per_task = ((budget.as_nanos() as f64 / probe / TASKS as f64) as usize).max(50);
        let (median, ok) = medians(&RPC_VARIANTS, |variant| measure_rpc(&rt, variant, per_task));
        all_ok &= ok;
        report("rpc", &label, &RPC_VARIANTS, &median);
        println!(
            "  ours vs tokio: RPC + timeout {:.2}x",
            median[1] / median[2]
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
