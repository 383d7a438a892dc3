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
//! Its check (exit status 1): every request of every variant completed `Ok` (none
//! of them may elapse: the deadline is 5 s and a request takes microseconds).

#[path = "support/cli.rs"]
mod cli;
#[path = "../benches/common/record.rs"]
mod record;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

const TASKS: usize = 64;
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
            Variant::Alone => "request alone",
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
    const RUNS: usize = 5;
    // Size the work to the time: a calibration round per configuration, then RUNS
    // alternating runs of every variant sharing what is left.
    let budget = Duration::from_secs_f64(seconds) / (configs.len() * variants.len() * RUNS) as u32;
    println!("load average at start: {}", cli::load());
    println!(
        "{} tasks, requests pending once, deadline 5 s; ns per request (median of {RUNS} runs); own = total - request alone",
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
        let mut samples = vec![Vec::new(); variants.len()];
        for _ in 0..RUNS {
            for (i, &variant) in variants.iter().enumerate() {
                let (ns, ok) = measure(&rt, variant, per_task);
                all_ok &= ok;
                samples[i].push(ns);
            }
        }
        let median: Vec<f64> = samples
            .into_iter()
            .map(|mut s| {
                s.sort_by(f64::total_cmp);
                s[s.len() / 2]
            })
            .collect();
        let alone = median[0];
        println!("-- {label}");
        for (i, &variant) in variants.iter().enumerate() {
            let own = (median[i] - alone).max(0.0);
            println!(
                "  {:<28} {:>8.1} ns   own {:>7.1} ns",
                variant.name(),
                median[i],
                own
            );
            record::record_value(&format!("requests/{label}/{variant:?}/ns"), median[i]);
        }
        let own = |i: usize| (median[i] - alone).max(0.1);
        println!(
            "  ours vs tokio: request + timeout {:.1}x, own cost {:.1}x lower; vs pingora {:.1}x; fresh sleep: own cost {:.1}x lower",
            median[1] / median[2],
            own(1) / own(2),
            median[3] / median[2],
            own(4) / own(5)
        );
    }
    println!("load average at end: {}", cli::load());
    if all_ok {
        ExitCode::SUCCESS
    } else {
        println!("FAILED: a request elapsed");
        ExitCode::FAILURE
    }
}
