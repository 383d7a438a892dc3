//! An HTTP/1 server with a per-request timeout layer, end to end over 127.0.0.1:
//! hyper on a 2-worker tokio runtime, its service behind no timeout layer, tower's
//! `TimeoutLayer` or ours (`lazy_deadline::tower::TimeoutLayer`), alternating in one
//! run. The handler awaits once (as one awaiting a backend), so every request's
//! deadline is armed. A client runtime on its own thread keeps `--connections`
//! keep-alive connections busy, one request in flight on each.
//!
//! ```text
//! cargo run --release --features tower --example http_timeout [-- --duration SECONDS --connections N]
//! ```
//!
//! Reports requests per second and the server's CPU per request (its two workers'
//! user + system time, from `/proc/self/task/*/stat`; the client is not counted),
//! median of 5 runs each, with the machine's load. The client shares the two cores:
//! the server's CPU per request is the figure that shows the layer.
//!
//! Check (exit status 1 if it fails): every response is a 200 (the deadline is 30 s).
//! Figures are reported, never asserted.

#[path = "support/cli.rs"]
mod cli;
#[path = "../benches/common/record.rs"]
mod record;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tower::{service_fn, Layer};

const DEADLINE: Duration = Duration::from_secs(30);
const RUNS: usize = 5;
const LAYERS: [&str; 3] = [
    "no timeout layer",
    "tower TimeoutLayer",
    "lazy_deadline TimeoutLayer",
];

async fn handler(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // A handler that awaits something once, as one calling a backend does.
    tokio::task::yield_now().await;
    Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
}

/// Serves every accepted connection with the layer `layer` names at accept time.
async fn serve(listener: TcpListener, layer: Arc<AtomicU8>) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        let http1 = hyper::server::conn::http1::Builder::new();
        // Relaxed: set before the client connects, and the connect orders it.
        match layer.load(Ordering::Relaxed) {
            // The same adapter on every path: only the layer differs.
            0 => spawn_connection(
                http1.serve_connection(io, TowerToHyperService::new(service_fn(handler))),
            ),
            1 => {
                let timed = tower::timeout::TimeoutLayer::new(DEADLINE).layer(service_fn(handler));
                spawn_connection(http1.serve_connection(io, TowerToHyperService::new(timed)));
            }
            _ => {
                let timed =
                    lazy_deadline::tower::TimeoutLayer::new(DEADLINE).layer(service_fn(handler));
                spawn_connection(http1.serve_connection(io, TowerToHyperService::new(timed)));
            }
        }
    }
}

fn spawn_connection<F: std::future::Future + Send + 'static>(connection: F) {
    tokio::spawn(async move {
        let _ = connection.await;
    });
}

/// One keep-alive connection sending requests until `stop`; (200s, other answers).
async fn client(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> (u64, u64) {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let (mut ok, mut bad) = (0, 0);
    // Relaxed: a stop flag; a few extra requests after it are harmless.
    while !stop.load(Ordering::Relaxed) {
        let request = Request::get("/")
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .unwrap();
        match sender.send_request(request).await {
            Ok(response) if response.status() == StatusCode::OK => {
                let _ = response.into_body().collect().await;
                ok += 1;
            }
            _ => bad += 1,
        }
    }
    (ok, bad)
}

/// CPU seconds used so far by the threads in `tids`.
fn cpu_seconds(tids: &[String]) -> f64 {
    tids.iter()
        .filter_map(|tid| {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
            // Fields after the command name (which may hold spaces) start at state (3).
            let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .sum()
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() -> ExitCode {
    let seconds = cli::arg("--duration").unwrap_or(15.0);
    let connections = cli::arg("--connections").map_or(32, |c| c as usize);
    let per_run = Duration::from_secs_f64(seconds / (RUNS * LAYERS.len()) as f64);

    let tids = Arc::new(Mutex::new(Vec::new()));
    let seen = tids.clone();
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            if let Ok(path) = std::fs::read_link("/proc/thread-self") {
                if let Some(tid) = path.file_name() {
                    seen.lock()
                        .unwrap()
                        .push(tid.to_string_lossy().into_owned());
                }
            }
        })
        .build()
        .unwrap();
    let layer = Arc::new(AtomicU8::new(0));
    let listener = server.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    server.spawn(serve(listener, layer.clone()));
    let clients = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    println!("load average at start: {}", cli::load());
    println!(
        "HTTP/1 over 127.0.0.1, server on 2 workers, {connections} keep-alive connections, deadline {}s, median of {RUNS} runs of {:.1}s",
        DEADLINE.as_secs(),
        per_run.as_secs_f64()
    );
    let mut rps = vec![Vec::new(); LAYERS.len()];
    let mut cpu_us = vec![Vec::new(); LAYERS.len()];
    let mut failed = 0;
    for _ in 0..RUNS {
        for (i, samples) in rps.iter_mut().enumerate() {
            // Relaxed: read by the accept loop after the client's connect, which orders it.
            layer.store(i as u8, Ordering::Relaxed);
            let stop = Arc::new(AtomicBool::new(false));
            let worker_tids = tids.lock().unwrap().clone();
            let (ok, bad, elapsed, cpu) = clients.block_on(async {
                let tasks: Vec<_> = (0..connections)
                    .map(|_| tokio::spawn(client(addr, stop.clone())))
                    .collect();
                let (cpu_start, start) = (cpu_seconds(&worker_tids), Instant::now());
                tokio::time::sleep(per_run).await;
                // Relaxed: see `client`.
                stop.store(true, Ordering::Relaxed);
                let (mut ok, mut bad) = (0, 0);
                for task in tasks {
                    let (o, b) = task.await.unwrap();
                    ok += o;
                    bad += b;
                }
                (
                    ok,
                    bad,
                    start.elapsed(),
                    cpu_seconds(&worker_tids) - cpu_start,
                )
            });
            failed += bad + u64::from(ok == 0);
            samples.push(ok as f64 / elapsed.as_secs_f64());
            cpu_us[i].push(cpu * 1e6 / ok.max(1) as f64);
        }
    }
    let rps: Vec<f64> = rps.into_iter().map(median).collect();
    let cpu_us: Vec<f64> = cpu_us.into_iter().map(median).collect();
    for (i, name) in LAYERS.iter().enumerate() {
        println!(
            "  {name:<28} {:>9.0} requests/s   server CPU {:>6.2} µs/request",
            rps[i], cpu_us[i]
        );
        let key = ["None", "Tower", "Ours"][i];
        record::record_value(&format!("http/{key}/rps"), rps[i]);
        record::record_value(&format!("http/{key}/cpu_us"), cpu_us[i]);
    }
    println!(
        "  ours vs tower's layer: requests/s {:.2}x; server CPU per request, tower's / ours {:.2}x",
        rps[2] / rps[1],
        cpu_us[1] / cpu_us[2]
    );
    println!("load average at end: {}", cli::load());
    if failed == 0 {
        println!("ok: every response was a 200");
        ExitCode::SUCCESS
    } else {
        println!("FAILED: {failed} requests were not answered 200 (or a run answered none)");
        ExitCode::FAILURE
    }
}
