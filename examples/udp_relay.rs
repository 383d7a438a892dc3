//! A UDP relay on 127.0.0.1: one owner task keeps the session table (an `IdleQueue`
//! keyed by client address and session id); each session's upstream task forwards to
//! the upstream server and relays its replies back, touching the session through a
//! `KeyHandle`. A session stays while traffic flows in either direction and expires
//! after `--idle-ms` of silence both ways, with one runtime timer entry for all.
//!
//! Three kinds of client session: interactive ones (the client speaks several times
//! per idle timeout), pushed ones (the client speaks once; the upstream server then
//! pushes a datagram every 20 ms, which only the upstream task sees), and quiet ones
//! (one request, one reply, silence).
//!
//! ```text
//! cargo run --release --example udp_relay [-- --duration SECONDS --sessions N --idle-ms MS]
//! ```
//!
//! Checks (exit status 1 if any fails): no interactive or pushed session expires;
//! every quiet one does, never before the idle timeout after its last datagram in
//! either direction; upstream tasks end once their session has left.

use lazy_deadline::{IdleQueue, Key};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep, sleep_until, Instant};

fn arg(name: &str, default: f64) -> f64 {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Interactive,
    Pushed,
    Quiet,
}

fn kind(session: u32) -> Kind {
    match session % 3 {
        0 => Kind::Interactive,
        1 => Kind::Pushed,
        _ => Kind::Quiet,
    }
}

/// Nanoseconds since the run's start, for the last-reply stamps upstream tasks keep.
fn since(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

/// The upstream server: echoes every datagram; for a pushed session it also pushes a
/// datagram every 20 ms to the relay socket that spoke for it, until `end`.
async fn upstream_server(socket: UdpSocket, end: Instant) {
    let socket = Arc::new(socket);
    let mut buf = [0u8; 64];
    while let Ok(Ok((n, from))) = tokio::time::timeout_at(end, socket.recv_from(&mut buf)).await {
        let id = u32::from_le_bytes(buf[..4].try_into().unwrap());
        let _ = socket.send_to(&buf[..n], from).await;
        if kind(id) == Kind::Pushed && buf[4] == 0 {
            let socket = socket.clone();
            tokio::spawn(async move {
                let mut push = id.to_le_bytes().to_vec();
                push.push(1);
                while Instant::now() < end {
                    sleep(Duration::from_millis(20)).await;
                    let _ = socket.send_to(&push, from).await;
                }
            });
        }
    }
}

/// One session's upstream side: forwards what the owner hands it, relays replies to
/// the client, and touches the session through its handle. Ends when the session
/// has left (the handle says so, or the owner dropped the sender).
async fn upstream_task(
    front: Arc<UdpSocket>,
    client: SocketAddr,
    upstream: SocketAddr,
    handle: lazy_deadline::KeyHandle,
    mut from_client: mpsc::UnboundedReceiver<Vec<u8>>,
    last_reply: Arc<AtomicU64>,
    start: Instant,
) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.connect(upstream).await.unwrap();
    let mut buf = [0u8; 64];
    loop {
        tokio::select! {
            datagram = from_client.recv() => match datagram {
                Some(datagram) => { let _ = socket.send(&datagram).await; }
                None => return,
            },
            reply = socket.recv(&mut buf) => {
                let Ok(n) = reply else { return };
                let _ = front.send_to(&buf[..n], client).await;
                last_reply.fetch_max(since(start), Ordering::Relaxed);
                // One atomic RMW on this session's word; the owner sees it when the
                // session's check time comes up.
                if !handle.touch() {
                    return;
                }
            }
        }
    }
}

struct Session {
    id: (SocketAddr, u32),
    to_upstream: mpsc::UnboundedSender<Vec<u8>>,
    last_request: Instant,
    last_reply: Arc<AtomicU64>,
}

struct Expiry {
    id: (SocketAddr, u32),
    last_traffic: Instant,
    at: Instant,
}

/// The owner: the front socket and the session table, until `stop`.
async fn relay(
    front: Arc<UdpSocket>,
    upstream: SocketAddr,
    idle: Duration,
    start: Instant,
    mut stop: watch::Receiver<bool>,
) -> (Vec<Expiry>, usize, u64, Vec<tokio::task::JoinHandle<()>>) {
    let mut sessions: IdleQueue<Session> = IdleQueue::new(idle);
    let mut by_id: HashMap<(SocketAddr, u32), Key> = HashMap::new();
    let (mut expiries, mut tasks, mut seen) = (Vec::new(), Vec::new(), 0usize);
    let mut buf = [0u8; 64];
    loop {
        tokio::select! {
            received = front.recv_from(&mut buf) => {
                let Ok((n @ 5.., from)) = received else { continue };
                let id = (from, u32::from_le_bytes(buf[..4].try_into().unwrap()));
                let now = Instant::now();
                let key = match by_id.get(&id) {
                    Some(&key) => {
                        sessions.touch_at(key, now);
                        key
                    }
                    None => {
                        let (to_upstream, from_client) = mpsc::unbounded_channel();
                        let last_reply = Arc::new(AtomicU64::new(0));
                        let key = sessions.insert(Session {
                            id,
                            to_upstream,
                            last_request: now,
                            last_reply: last_reply.clone(),
                        });
                        let handle = sessions.handle(key).unwrap();
                        tasks.push(tokio::spawn(upstream_task(
                            front.clone(), from, upstream, handle, from_client, last_reply, start,
                        )));
                        by_id.insert(id, key);
                        seen += 1;
                        key
                    }
                };
                if let Some(session) = sessions.get_mut(key) {
                    session.last_request = now;
                    let _ = session.to_upstream.send(buf[..n].to_vec());
                }
            }
            expired = sessions.expired() => {
                let session = expired.into_inner();
                by_id.remove(&session.id);
                let reply = start + Duration::from_nanos(session.last_reply.load(Ordering::Relaxed));
                expiries.push(Expiry {
                    id: session.id,
                    last_traffic: session.last_request.max(reply),
                    at: Instant::now(),
                });
                // Dropping the session drops its sender: the upstream task ends.
            }
            _ = stop.changed() => break,
        }
    }
    let registrations = sessions.stats().registrations;
    (expiries, seen, registrations, tasks)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let duration = Duration::from_secs_f64(arg("--duration", 3.0).max(1.0));
    let count = arg("--sessions", 300.0).max(3.0) as u32;
    let idle = Duration::from_millis(arg("--idle-ms", 200.0) as u64);
    let start = Instant::now();
    let end = start + duration;

    let upstream_socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let upstream = upstream_socket.local_addr().unwrap();
    tokio::spawn(upstream_server(upstream_socket, end + idle * 4));
    let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let front_addr = front.local_addr().unwrap();
    let (stop, stopped) = watch::channel(false);
    let relaying = tokio::spawn(relay(front, upstream, idle, start, stopped));

    // The client: one socket, sessions by id; interactive ones speak every idle / 4.
    let client = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    client.connect(front_addr).await.unwrap();
    let client_addr = client.local_addr().unwrap();
    {
        let client = client.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while client.recv(&mut buf).await.is_ok() {}
        });
    }
    let mut next_round = Instant::now();
    let mut first = true;
    while Instant::now() < end {
        for id in 0..count {
            if first || kind(id) == Kind::Interactive {
                let mut datagram = id.to_le_bytes().to_vec();
                datagram.push(0);
                let _ = client.send(&datagram).await;
                if id % 64 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }
        first = false;
        next_round += idle / 4;
        sleep_until(next_round).await;
    }
    // Quiet sessions have long expired; stop before the others' silence shows.
    let _ = stop.send(true);
    let (expiries, seen, registrations, tasks) = relaying.await.unwrap();
    let left_early = tasks.iter().filter(|t| t.is_finished()).count();

    let expired: std::collections::HashSet<u32> = expiries
        .iter()
        .filter(|e| e.id.0 == client_addr)
        .map(|e| e.id.1)
        .collect();
    let wrong = (0..count)
        .filter(|&id| (kind(id) == Kind::Quiet) != expired.contains(&id))
        .count();
    let early = expiries
        .iter()
        .filter(|e| e.at < e.last_traffic + idle)
        .count();
    let quiet = (0..count).filter(|&id| kind(id) == Kind::Quiet).count();
    println!(
        "{} s, {count} sessions ({quiet} quiet), idle {} ms: {seen} sessions seen, {} expired, {wrong} wrong, {early} early; {left_early} upstream tasks ended with their session; {registrations} runtime registrations",
        duration.as_secs_f64(),
        idle.as_millis(),
        expiries.len()
    );
    let ok = seen == count as usize && wrong == 0 && early == 0 && left_early >= quiet;
    if ok {
        println!("ok: pushed sessions kept alive by their upstream tasks' handles, quiet ones expired on time");
        ExitCode::SUCCESS
    } else {
        println!("FAIL");
        ExitCode::FAILURE
    }
}
