//! quinn end to end over 127.0.0.1, `quinn::TokioRuntime` against
//! `lazy_deadline::quinn::LazyRuntime`, alternating in one run, on a current-thread
//! and on a 2-worker tokio runtime:
//!
//! - bulk: one connection moves `--mib` MiB (default 256) over one stream;
//! - request/response: 50 connections, each exchanging 64-byte messages on one
//!   stream, one message in flight per connection.
//!
//! ```text
//! cargo run --release --features quinn --example quinn_bulk [-- --quick | --duration S | --mib N --reps N]
//! ```
//!
//! Per runtime it reports throughput, CPU seconds per GiB (process CPU from
//! `/proc/self/stat`, both endpoints included, as they share the process), quinn's
//! `AsyncTimer::reset` calls, and how many times the runtime's timer was armed:
//! counted by a wrapper around each timer, not estimated. For tokio that is one
//! registration per timer plus every reset to an earlier deadline (tokio re-files
//! the entry under the driver's lock; a later reset is a CAS it defers). For ours it
//! is the `Sleep`'s own `stats().registrations`: its filings in its thread's deadline
//! set (first poll, earlier resets, and re-files when a filing expired before a
//! deadline that had moved later), each under the set's lock, never the driver's;
//! the set's one runtime entry per thread is shared and not counted.
//!
//! Check (exit status 1 if it fails): every byte and every message arrives, on both
//! runtimes. Throughput is reported, never asserted.

#[path = "../tests/common/quic.rs"]
mod quic;
// Machine-readable figures for benches/report.py (a no-op unless it asks for them).
#[path = "support/cli.rs"]
mod cli;
#[path = "../benches/common/record.rs"]
mod record;

use lazy_deadline::quinn::LazyRuntime;
use quinn::{AsyncTimer, Runtime, TokioRuntime, TransportConfig};
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 50;
const MESSAGE: usize = 64;

#[derive(Debug, Default)]
struct Counters {
    timers: AtomicU64,
    resets: AtomicU64,
    earlier_resets: AtomicU64,
    lazy_registrations: AtomicU64,
}

/// The timer quinn gets, counting what quinn asks of it.
#[derive(Debug)]
enum CountingTimer {
    Tokio(Pin<Box<tokio::time::Sleep>>),
    Lazy(Pin<Box<lazy_deadline::Sleep>>),
}

#[derive(Debug)]
struct Counted {
    timer: CountingTimer,
    deadline: Instant,
    counters: Arc<Counters>,
}

impl AsyncTimer for Counted {
    fn reset(mut self: Pin<&mut Self>, at: Instant) {
        // Relaxed everywhere: counters read after the runtime has been dropped.
        self.counters.resets.fetch_add(1, Ordering::Relaxed);
        if at < self.deadline {
            self.counters.earlier_resets.fetch_add(1, Ordering::Relaxed);
        }
        self.deadline = at;
        match &mut self.timer {
            CountingTimer::Tokio(sleep) => AsyncTimer::reset(sleep.as_mut(), at),
            CountingTimer::Lazy(sleep) => AsyncTimer::reset(sleep.as_mut(), at),
        }
    }

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.timer {
            CountingTimer::Tokio(sleep) => AsyncTimer::poll(sleep.as_mut(), cx),
            CountingTimer::Lazy(sleep) => AsyncTimer::poll(sleep.as_mut(), cx),
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let CountingTimer::Lazy(sleep) = &self.timer {
            let registrations = sleep.stats().registrations;
            self.counters
                .lazy_registrations
                .fetch_add(registrations, Ordering::Relaxed);
        }
    }
}

/// `TokioRuntime` or `LazyRuntime`, with counted timers. The lazy timer is what
/// `LazyRuntime::new_timer` returns (`lazy_deadline::sleep_until`), built here so its
/// `stats()` stay readable; everything else is delegated to the real runtime.
#[derive(Debug)]
struct Counting {
    lazy: bool,
    /// The runtime measured (`TokioRuntime` or `LazyRuntime`): everything but timers.
    inner: Box<dyn Runtime>,
    counters: Arc<Counters>,
}

impl Counting {
    fn new(lazy: bool, counters: Arc<Counters>) -> Self {
        let inner: Box<dyn Runtime> = if lazy {
            Box::new(LazyRuntime)
        } else {
            Box::new(TokioRuntime)
        };
        Self {
            lazy,
            inner,
            counters,
        }
    }
}

impl Runtime for Counting {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn AsyncTimer>> {
        self.counters.timers.fetch_add(1, Ordering::Relaxed);
        let timer = if self.lazy {
            CountingTimer::Lazy(Box::pin(lazy_deadline::sleep_until(at.into())))
        } else {
            CountingTimer::Tokio(Box::pin(tokio::time::sleep_until(at.into())))
        };
        Box::pin(Counted {
            timer,
            deadline: at,
            counters: self.counters.clone(),
        })
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.inner.spawn(future)
    }

    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> std::io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        self.inner.wrap_udp_socket(socket)
    }

    fn now(&self) -> Instant {
        self.inner.now()
    }
}

/// Process CPU time (user + system, all threads) from `/proc/self/stat`, in seconds;
/// `None` where there is no procfs. Assumes the usual 100 clock ticks per second.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at state (3).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn transport() -> TransportConfig {
    let mut transport = TransportConfig::default();
    transport.max_idle_timeout(Some(Duration::from_secs(30).try_into().unwrap()));
    transport
}

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    Bulk { bytes: u64 },
    RequestResponse { exchanges: u32 },
}

#[derive(Default, Clone)]
struct Outcome {
    seconds: f64,
    cpu: f64,
    units: f64, // bytes or exchanges moved
    timers: u64,
    resets: u64,
    arms: u64,
    complete: bool,
}

async fn bulk(
    client: &quinn::Endpoint,
    server: &quinn::Endpoint,
    addr: std::net::SocketAddr,
    bytes: u64,
) -> bool {
    let connecting = client.connect(addr, quic::SERVER_NAME).unwrap();
    let accept = async { server.accept().await.unwrap().await.unwrap() };
    let (client_conn, server_conn) = tokio::join!(async { connecting.await.unwrap() }, accept);
    let receiver = tokio::spawn(async move {
        let mut recv = server_conn.accept_uni().await.unwrap();
        let mut received = 0u64;
        while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.unwrap() {
            received += chunk.bytes.len() as u64;
        }
        server_conn.close(0u32.into(), b"done");
        received
    });
    let mut send = client_conn.open_uni().await.unwrap();
    let chunk = bytes::Bytes::from(vec![0x5a; 1 << 16]);
    let mut sent = 0u64;
    while sent < bytes {
        let n = (bytes - sent).min(chunk.len() as u64) as usize;
        send.write_chunk(chunk.slice(..n)).await.unwrap();
        sent += n as u64;
    }
    send.finish().unwrap();
    let received = receiver.await.unwrap();
    client_conn.close(0u32.into(), b"done");
    received == bytes
}

async fn request_response(
    client: &quinn::Endpoint,
    server: &quinn::Endpoint,
    addr: std::net::SocketAddr,
    exchanges: u32,
) -> bool {
    let server = server.clone();
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok((mut send, mut recv)) = conn.accept_bi().await else {
                    return;
                };
                let mut message = [0u8; MESSAGE];
                while recv.read_exact(&mut message).await.is_ok() {
                    if send.write_all(&message).await.is_err() {
                        return;
                    }
                }
                let _ = send.finish();
                conn.closed().await;
            });
        }
    });
    let clients = (0..CONNECTIONS).map(|c| {
        let client = client.clone();
        async move {
            let conn = client
                .connect(addr, quic::SERVER_NAME)
                .unwrap()
                .await
                .unwrap();
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            let mut ok = true;
            for i in 0..exchanges {
                let message = [(c as u32 ^ i) as u8; MESSAGE];
                send.write_all(&message).await.unwrap();
                let mut back = [0u8; MESSAGE];
                recv.read_exact(&mut back).await.unwrap();
                ok &= back == message;
            }
            conn.close(0u32.into(), b"done");
            ok
        }
    });
    futures::future::join_all(clients)
        .await
        .into_iter()
        .all(|ok| ok)
}

fn run(multi_thread: bool, lazy: bool, workload: Workload) -> Outcome {
    let counters = Arc::new(Counters::default());
    let rt = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .unwrap();
    let runtime = Arc::new(Counting::new(lazy, counters.clone()));
    let (cpu_before, started) = (cpu_seconds().unwrap_or(0.0), Instant::now());
    let complete = rt.block_on(async {
        let (server, client, addr) = quic::endpoints(runtime, transport(), transport());
        let complete = match workload {
            Workload::Bulk { bytes } => bulk(&client, &server, addr, bytes).await,
            Workload::RequestResponse { exchanges } => {
                request_response(&client, &server, addr, exchanges).await
            }
        };
        client.wait_idle().await;
        server.close(0u32.into(), b"done");
        complete
    });
    let seconds = started.elapsed().as_secs_f64();
    drop(rt); // drops the connections' timers, so their counts are in
    let cpu = cpu_seconds().unwrap_or(0.0) - cpu_before;
    let units = match workload {
        Workload::Bulk { bytes } => bytes as f64,
        Workload::RequestResponse { exchanges } => (exchanges as usize * CONNECTIONS) as f64,
    };
    let timers = counters.timers.load(Ordering::Relaxed);
    let arms = if lazy {
        counters.lazy_registrations.load(Ordering::Relaxed)
    } else {
        timers + counters.earlier_resets.load(Ordering::Relaxed)
    };
    Outcome {
        seconds,
        cpu,
        units,
        timers,
        resets: counters.resets.load(Ordering::Relaxed),
        arms,
        complete,
    }
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    // The default run (256 MiB, 2,000 exchanges per connection, 3 repetitions) takes
    // about 30 s here; `--duration S` scales the work to about S seconds (never below
    // 4 MiB and 20 exchanges), `--quick` to about 3 s.
    let scale = match (quick, cli::arg("--duration")) {
        (_, Some(seconds)) => (seconds / 30.0).min(1.0),
        (true, None) => 0.25,
        (false, None) => 1.0,
    };
    let mib = cli::arg("--mib").unwrap_or((256.0 * scale).max(4.0));
    let exchanges = ((2_000.0 * scale) as u32).max(20);
    let reps = cli::arg("--reps")
        .map(|r| r as usize)
        .unwrap_or(if scale < 0.5 { 1 } else { 3 });
    let bytes = (mib * (1u64 << 20) as f64) as u64;
    let workloads = [
        ("bulk, 1 connection", Workload::Bulk { bytes }),
        (
            "request/response, 50 connections",
            Workload::RequestResponse { exchanges },
        ),
    ];
    println!(
        "quinn over 127.0.0.1: bulk {mib:.0} MiB; request/response {CONNECTIONS} x {exchanges} exchanges of {MESSAGE} B; {reps} repetition(s), runtimes alternating\n"
    );
    record::record_value("quinn/mib", mib);
    record::record_value("quinn/exchanges", exchanges);
    record::record_value("quinn/connections", CONNECTIONS);
    record::record_value("quinn/message_bytes", MESSAGE);
    record::record_value("quinn/reps", reps);
    let mut all_complete = true;
    for multi_thread in [false, true] {
        println!(
            "{} runtime",
            if multi_thread {
                "2-worker multi-thread"
            } else {
                "current-thread"
            }
        );
        println!(
            "{:<34} {:<12} {:>12} {:>10} {:>8} {:>12} {:>11} {:>8}",
            "workload",
            "runtime",
            "throughput",
            "CPU s/GiB",
            "timers",
            "resets",
            "timer arms",
            "arms %"
        );
        for (name, workload) in workloads {
            let mut results: [Vec<Outcome>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..reps {
                for (i, lazy) in [false, true].into_iter().enumerate() {
                    let outcome = run(multi_thread, lazy, workload);
                    all_complete &= outcome.complete;
                    results[i].push(outcome);
                }
            }
            for (i, label) in ["TokioRuntime", "LazyRuntime"].into_iter().enumerate() {
                let runs = &results[i];
                let mut rates: Vec<f64> = runs.iter().map(|o| o.units / o.seconds).collect();
                rates.sort_by(f64::total_cmp);
                let rate = rates[rates.len() / 2];
                let (units, cpu): (f64, f64) = runs
                    .iter()
                    .fold((0.0, 0.0), |a, o| (a.0 + o.units, a.1 + o.cpu));
                let sum = |f: fn(&Outcome) -> u64| runs.iter().map(f).sum::<u64>();
                let (timers, resets, arms) =
                    (sum(|o| o.timers), sum(|o| o.resets), sum(|o| o.arms));
                let (throughput, cpu_column) = match workload {
                    Workload::Bulk { .. } => (
                        format!("{:.0} MiB/s", rate / (1u64 << 20) as f64),
                        format!("{:.2}", cpu / (units / (1u64 << 30) as f64)),
                    ),
                    Workload::RequestResponse { .. } => (
                        format!("{:.0} k/s", rate / 1e3),
                        format!("{:.1} µs/x", cpu / units * 1e6),
                    ),
                };
                let gib_or_exchange = match workload {
                    Workload::Bulk { .. } => units / (1u64 << 30) as f64,
                    Workload::RequestResponse { .. } => units,
                };
                record::record(&[
                    &"quinn_row",
                    &if multi_thread {
                        "2 workers"
                    } else {
                        "current-thread"
                    },
                    &name,
                    &label,
                    &rate,
                    &(cpu / gib_or_exchange),
                    &resets,
                    &arms,
                ]);
                println!(
                    "{:<34} {:<12} {:>12} {:>10} {:>8} {:>12} {:>11} {:>7.2}%",
                    name,
                    label,
                    throughput,
                    cpu_column,
                    timers,
                    resets,
                    arms,
                    100.0 * arms as f64 / resets.max(1) as f64
                );
            }
        }
        println!();
    }
    println!("throughput: median of the repetitions; CPU and counts: totals over them (request/response CPU is per exchange)");
    if all_complete {
        println!("ok: every byte and every message arrived on both runtimes");
        ExitCode::SUCCESS
    } else {
        eprintln!("FAIL: data was lost or corrupted");
        ExitCode::FAILURE
    }
}
