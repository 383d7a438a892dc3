//! A node's peer table keyed by peer id, on one `DelayMap`, over loopback UDP: every
//! message from a peer pushes its deadline back (a store); a peer idle for
//! `--idle-ms` is pinged; one that stays silent for `--ping-ms` after the ping is
//! dropped. The shape of a p2p peer manager (a `HashMap<PeerId, Key>` beside a
//! `DelayQueue` in many crates), without the side map.
//!
//! In-process peers, one UDP socket each, of three kinds: chatty ones (a message
//! every 20 ms), quiet ones that only answer pings, and silent ones that say hello
//! (until welcomed) and never answer.
//!
//! ```text
//! cargo run --release --example peer_table [-- --duration SECONDS --peers N --idle-ms MS --ping-ms MS]
//! ```
//!
//! Checks (exit status 1 if any fails): no chatty peer is ever pinged; every quiet
//! peer is pinged and none is dropped; every silent peer is pinged once and dropped,
//! never before `idle + ping` after its last message.

use lazy_deadline::DelayMap;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::Instant;

const HELLO: u8 = 0;
const DATA: u8 = 1;
const PING: u8 = 2;
const PONG: u8 = 3;
const WELCOME: u8 = 4;

fn arg(name: &str, default: f64) -> f64 {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Chatty,
    Quiet,
    Silent,
}

fn kind(peer: u32) -> Kind {
    match peer % 3 {
        0 => Kind::Chatty,
        1 => Kind::Quiet,
        _ => Kind::Silent,
    }
}

/// What the node keeps per peer.
struct Peer {
    addr: SocketAddr,
    last_heard: Instant,
    pinged: bool,
}

#[derive(Default)]
struct Report {
    pings: HashMap<u32, u32>,
    /// Peer id -> (dropped at, last heard).
    dropped: HashMap<u32, (Instant, Instant)>,
    messages: u64,
    resets: u64,
    registrations: u64,
}

/// The node: one socket, one `DelayMap`, until `stop`.
async fn node(
    socket: UdpSocket,
    idle: Duration,
    ping: Duration,
    mut stop: watch::Receiver<bool>,
) -> Report {
    let mut peers: DelayMap<u32, Peer> = DelayMap::new();
    let mut report = Report::default();
    let mut buf = [0u8; 16];
    loop {
        tokio::select! {
            received = socket.recv_from(&mut buf) => {
                let Ok((5.., from)) = received else { continue };
                let id = u32::from_le_bytes(buf[1..5].try_into().unwrap());
                let now = Instant::now();
                report.messages += 1;
                if let Some(peer) = peers.get_mut(&id) {
                    peer.last_heard = now;
                    peer.pinged = false;
                    // Heard from: a store (the deadline only moves later).
                    peers.reset(&id, idle);
                    report.resets += 1;
                } else if buf[0] == HELLO {
                    peers.insert(id, Peer { addr: from, last_heard: now, pinged: false }, idle);
                }
                if buf[0] == HELLO {
                    let mut message = [WELCOME, 0, 0, 0, 0];
                    message[1..].copy_from_slice(&id.to_le_bytes());
                    let _ = socket.send_to(&message, from).await;
                }
            }
            Some((id, mut peer)) = peers.expired() => {
                if peer.pinged {
                    report.dropped.insert(id, (Instant::now(), peer.last_heard));
                    continue;
                }
                let mut message = [PING, 0, 0, 0, 0];
                message[1..].copy_from_slice(&id.to_le_bytes());
                let _ = socket.send_to(&message, peer.addr).await;
                *report.pings.entry(id).or_default() += 1;
                peer.pinged = true;
                peers.insert(id, peer, ping);
            }
            _ = stop.changed() => break,
        }
    }
    report.registrations = peers.stats().registrations;
    report
}

/// One peer: says hello until welcomed (UDP drops what a full socket buffer cannot
/// take), then behaves as its kind says until `end`.
async fn peer(id: u32, node: SocketAddr, end: Instant) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.connect(node).await.unwrap();
    let send = |tag: u8| {
        let mut message = [tag, 0, 0, 0, 0];
        message[1..].copy_from_slice(&id.to_le_bytes());
        message
    };
    let mut buf = [0u8; 16];
    loop {
        let _ = socket.send(&send(HELLO)).await;
        tokio::select! {
            received = socket.recv(&mut buf) => {
                if matches!(received, Ok(1..)) && buf[0] == WELCOME {
                    break;
                }
            }
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
            () = tokio::time::sleep_until(end) => return,
        }
    }
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            _ = tick.tick(), if kind(id) == Kind::Chatty => {
                let _ = socket.send(&send(DATA)).await;
            }
            received = socket.recv(&mut buf) => {
                if matches!(received, Ok(1..)) && buf[0] == PING && kind(id) == Kind::Quiet {
                    let _ = socket.send(&send(PONG)).await;
                }
            }
            () = tokio::time::sleep_until(end) => break,
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let duration = Duration::from_secs_f64(arg("--duration", 3.0).max(1.0));
    let peers = arg("--peers", 300.0).max(3.0) as u32;
    let idle = Duration::from_millis(arg("--idle-ms", 100.0) as u64);
    let ping = Duration::from_millis(arg("--ping-ms", 50.0) as u64);

    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let (stop, stopped) = watch::channel(false);
    let serving = tokio::spawn(node(socket, idle, ping, stopped));
    let start = Instant::now();
    let end = start + duration;
    let tasks: Vec<_> = (0..peers)
        .map(|id| tokio::spawn(peer(id, addr, end)))
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // Peers stop at `end`; stop the node before chatty peers' silence shows.
    let _ = stop.send(true);
    let report = serving.await.unwrap();

    let by_kind = |k: Kind| (0..peers).filter(move |&id| kind(id) == k);
    let pinged_chatty = by_kind(Kind::Chatty)
        .filter(|id| report.pings.contains_key(id))
        .count();
    let quiet_unpinged = by_kind(Kind::Quiet)
        .filter(|id| !report.pings.contains_key(id))
        .count();
    let quiet_dropped = by_kind(Kind::Quiet)
        .filter(|id| report.dropped.contains_key(id))
        .count();
    let silent: HashSet<u32> = by_kind(Kind::Silent).collect();
    let silent_kept = silent
        .iter()
        .filter(|id| !report.dropped.contains_key(id))
        .count();
    let silent_pings_wrong = silent
        .iter()
        .filter(|id| report.pings.get(id) != Some(&1))
        .count();
    let early = report
        .dropped
        .values()
        .filter(|&&(at, heard)| at < heard + idle + ping)
        .count();
    let latest = report
        .dropped
        .values()
        .map(|&(at, heard)| at - heard)
        .max()
        .unwrap_or_default();

    println!(
        "{} s, {peers} peers, idle {} ms, ping {} ms: {} messages, {} resets (stores), {} runtime registrations",
        duration.as_secs_f64(),
        idle.as_millis(),
        ping.as_millis(),
        report.messages,
        report.resets,
        report.registrations
    );
    println!(
        "pinged: {pinged_chatty} chatty (want 0), {} quiet of {} ({quiet_unpinged} never); dropped: {} silent of {} ({silent_kept} kept), {quiet_dropped} quiet (want 0); {early} early; latest drop {:.1} ms after the last message",
        by_kind(Kind::Quiet).count() - quiet_unpinged,
        by_kind(Kind::Quiet).count(),
        silent.len() - silent_kept,
        silent.len(),
        latest.as_secs_f64() * 1e3
    );
    if std::env::var_os("PEER_TABLE_DEBUG").is_some() {
        let missing: Vec<u32> = by_kind(Kind::Quiet)
            .filter(|id| !report.pings.contains_key(id))
            .collect();
        println!("quiet never pinged: {missing:?}");
    }
    let ok = pinged_chatty == 0
        && quiet_unpinged == 0
        && quiet_dropped == 0
        && silent_kept == 0
        && silent_pings_wrong == 0
        && early == 0;
    if ok {
        println!("ok: chatty peers never pinged, quiet ones pinged and kept, silent ones dropped on time");
        ExitCode::SUCCESS
    } else {
        println!("FAIL");
        ExitCode::FAILURE
    }
}
