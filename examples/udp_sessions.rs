//! A UDP relay-style server on 127.0.0.1 keeping one session per (client address,
//! session id) in an `IdleQueue`: every datagram touches its session (a store, no
//! timer work), and sessions idle for `--idle-ms` expire.
//!
//! An in-process client drives thousands of sessions over a few sockets in bursts,
//! then lets a known subset (every fourth session) go quiet while the rest keep
//! talking until the end of the run.
//!
//! ```text
//! cargo run --release --example udp_sessions [-- --duration SECONDS --idle-ms MS --sessions N]
//! ```
//!
//! Checks (exit status 1 if any fails): exactly the quiet sessions expire, each no
//! earlier than the idle timeout after the last datagram the server received for it.

use lazy_deadline::{IdleQueue, Key};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::{sleep, Instant};

/// Client sockets; sessions are spread over them round-robin.
const SOCKETS: usize = 4;
/// How often the client sends a burst.
const BURST_EVERY: Duration = Duration::from_millis(10);

fn arg(name: &str, default: f64) -> f64 {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// What the server keeps per session.
struct Session {
    id: (SocketAddr, u32),
    last_datagram: Instant,
}

struct Expiry {
    id: (SocketAddr, u32),
    last_datagram: Instant,
    at: Instant,
}

struct ServerReport {
    expiries: Vec<Expiry>,
    datagrams: u64,
    sessions: usize,
    refiles: u64,
    registrations: u64,
}

/// Serves until `stop` turns true: echoes each datagram and keeps its session alive.
async fn server(
    socket: UdpSocket,
    idle: Duration,
    mut stop: watch::Receiver<bool>,
) -> ServerReport {
    let mut sessions: IdleQueue<Session> = IdleQueue::with_capacity(idle, 8_192);
    let mut by_id: HashMap<(SocketAddr, u32), Key> = HashMap::new();
    let (mut expiries, mut datagrams, mut seen) = (Vec::new(), 0u64, 0usize);
    let mut buf = [0u8; 64];
    loop {
        tokio::select! {
            received = socket.recv_from(&mut buf) => {
                let Ok((n @ 4.., from)) = received else { continue };
                let id = (from, u32::from_le_bytes(buf[..4].try_into().unwrap()));
                let now = Instant::now();
                datagrams += 1;
                match by_id.get(&id).copied() {
                    // Known session: a store into its entry.
                    Some(key) => {
                        sessions.touch_at(key, now);
                        if let Some(session) = sessions.get_mut(key) {
                            session.last_datagram = now;
                        }
                    }
                    None => {
                        by_id.insert(id, sessions.insert(Session { id, last_datagram: now }));
                        seen += 1;
                    }
                }
                let _ = socket.send_to(&buf[..n], from).await;
            }
            expired = sessions.expired() => {
                let session = expired.into_inner();
                by_id.remove(&session.id);
                expiries.push(Expiry { id: session.id, last_datagram: session.last_datagram, at: Instant::now() });
            }
            _ = stop.changed() => break,
        }
    }
    ServerReport {
        expiries,
        datagrams,
        sessions: seen,
        refiles: sessions.refiles(),
        registrations: sessions.stats().registrations,
    }
}

/// Sends bursts: session `i` speaks every `cycle` bursts, quiet ones stop at
/// `quiet_at`, everyone stops at `end`. Replies are read and dropped.
async fn client(
    sockets: Vec<Arc<UdpSocket>>,
    sessions: usize,
    cycle: usize,
    quiet_at: Instant,
    end: Instant,
) -> u64 {
    for socket in &sockets {
        let socket = socket.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while socket.recv(&mut buf).await.is_ok() {}
        });
    }
    let (mut sent, mut burst) = (0u64, 0usize);
    while Instant::now() < end {
        let quiet_phase = Instant::now() >= quiet_at;
        for session in (burst % cycle..sessions).step_by(cycle) {
            if quiet_phase && is_quiet(session) {
                continue;
            }
            let socket = &sockets[session % SOCKETS];
            let id = (session / SOCKETS) as u32;
            if socket.send(&id.to_le_bytes()).await.is_ok() {
                sent += 1;
            }
            if sent % 64 == 0 {
                // Let the server drain the socket before the kernel's buffer fills.
                tokio::task::yield_now().await;
            }
        }
        burst += 1;
        sleep(BURST_EVERY).await;
    }
    sent
}

fn is_quiet(session: usize) -> bool {
    session % 4 == 3
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let duration = Duration::from_secs_f64(arg("--duration", 3.0).max(1.0));
    let idle = Duration::from_millis(arg("--idle-ms", 200.0) as u64);
    let sessions = arg("--sessions", 2_000.0) as usize;
    // Each busy session speaks at least three times per idle timeout.
    let cycle = ((idle.as_millis() / 3 / BURST_EVERY.as_millis()).max(1)) as usize;

    let server_socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let server_addr = server_socket.local_addr().unwrap();
    let (stop, stopped) = watch::channel(false);
    let serving = tokio::spawn(server(server_socket, idle, stopped));

    let mut sockets = Vec::new();
    for _ in 0..SOCKETS {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.connect(server_addr).await.unwrap();
        sockets.push(Arc::new(socket));
    }
    let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
    let start = Instant::now();
    // Quiet ones stop a third of the way in; the run leaves them room to expire.
    let quiet_at = start + duration.saturating_sub(idle * 2) / 3;
    let sent = client(sockets, sessions, cycle, quiet_at, start + duration).await;
    let _ = stop.send(true);
    let report = serving.await.unwrap();

    let quiet: std::collections::HashSet<(SocketAddr, u32)> = (0..sessions)
        .filter(|&s| is_quiet(s))
        .map(|s| (addrs[s % SOCKETS], (s / SOCKETS) as u32))
        .collect();
    let expired: std::collections::HashSet<_> = report.expiries.iter().map(|e| e.id).collect();
    let early = report
        .expiries
        .iter()
        .filter(|e| e.at < e.last_datagram + idle)
        .count();
    let latest = report
        .expiries
        .iter()
        .map(|e| e.at - e.last_datagram)
        .max()
        .unwrap_or_default();
    let busy_expired = expired.difference(&quiet).count();
    let quiet_missed = quiet.difference(&expired).count();

    println!(
        "{} s, idle timeout {} ms: {} sessions seen ({} quiet), {} datagrams sent, {} received",
        duration.as_secs_f64(),
        idle.as_millis(),
        report.sessions,
        quiet.len(),
        sent,
        report.datagrams
    );
    println!(
        "expired {} sessions: {} quiet ones missed, {} busy ones expired, {} early; latest {:.1} ms after its last datagram",
        report.expiries.len(),
        quiet_missed,
        busy_expired,
        early,
        latest.as_secs_f64() * 1e3
    );
    println!(
        "timer work: {} runtime registrations and {} re-files, where DelayQueue::reset per datagram would do {} wheel resets",
        report.registrations, report.refiles, report.datagrams
    );
    let ok = report.sessions == sessions && quiet_missed == 0 && busy_expired == 0 && early == 0;
    if ok {
        println!("ok: exactly the quiet sessions expired, none early");
        ExitCode::SUCCESS
    } else {
        println!("FAIL");
        ExitCode::FAILURE
    }
}
