//! The SCTP heartbeat technique over real UDP sockets on 127.0.0.1.
//!
//! A sender streams DATA datagrams in bursts separated by pauses. Its `IdleTimeout`
//! is touched once per datagram (a store, no timer work) and fires only when the path
//! has been idle for the heartbeat interval; then it sends HEARTBEAT, which the
//! receiver answers with HEARTBEAT-ACK.
//!
//! ```text
//! cargo run --release --example heartbeat [-- --duration SECONDS]
//! ```
//!
//! Checks (exit status 1 if either fails): no heartbeat is sent less than one interval
//! after the last activity (so none during a burst), and every pause longer than the
//! interval (plus scheduling slack) contains a heartbeat.

use lazy_deadline::IdleTimeout;
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::time::{sleep_until, Instant};

const INTERVAL: Duration = Duration::from_millis(50);
/// Pauses longer than the interval by this much must contain a heartbeat; the slack
/// absorbs scheduling delays on a busy machine.
const SLACK: Duration = Duration::from_millis(20);
const SPACING: Duration = Duration::from_micros(200);

#[derive(Clone, Copy, PartialEq)]
enum Sent {
    Data,
    Heartbeat,
}

fn duration_arg() -> Duration {
    let secs = std::env::args()
        .skip_while(|a| a != "--duration")
        .nth(1)
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs.clamp(0.2, 600.0))
}

/// Answers each HEARTBEAT with a HEARTBEAT-ACK; counts everything until BYE.
async fn receiver(socket: UdpSocket) -> (u64, u64) {
    let (mut data, mut heartbeats) = (0, 0);
    let mut buf = [0u8; 64];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            break;
        };
        match &buf[..n] {
            b"DATA" => data += 1,
            b"HEARTBEAT" => {
                heartbeats += 1;
                let _ = socket.send_to(b"HEARTBEAT-ACK", from).await;
            }
            b"BYE" => break,
            _ => {}
        }
    }
    (data, heartbeats)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<ExitCode> {
    let duration = duration_arg();
    let receive_socket = UdpSocket::bind("127.0.0.1:0").await?;
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.connect(receive_socket.local_addr()?).await?;
    let receiver = tokio::spawn(receiver(receive_socket));

    // Bursts of 50..250 datagrams, then pauses either clearly shorter or clearly
    // longer than the interval (ambiguous pauses would make the check a coin toss).
    let pauses = [10u64, 30, 80, 120, 200, 25, 150];
    let (mut rng, mut phase) = (0x2545_F491_4F6C_DD1Du64, 0usize);
    let mut burst_left = 100u32;
    let mut next_send = Instant::now();
    let mut idle = IdleTimeout::new(INTERVAL);
    let mut log: Vec<(Instant, Sent)> = Vec::new();
    let mut acks = 0u64;
    let mut ack_buf = [0u8; 64];
    let end = Instant::now() + duration;

    while Instant::now() < end {
        tokio::select! {
            // The path has been idle for a whole interval: probe it.
            () = &mut idle => {
                socket.send(b"HEARTBEAT").await?;
                log.push((Instant::now(), Sent::Heartbeat));
                idle.touch(); // next heartbeat one interval later, if still idle
            }
            () = sleep_until(next_send) => {
                socket.send(b"DATA").await?;
                let now = Instant::now();
                idle.touch_at(now); // the hot path: one store per datagram
                log.push((now, Sent::Data));
                burst_left -= 1;
                next_send = if burst_left > 0 {
                    next_send + SPACING
                } else {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    burst_left = 50 + (rng % 200) as u32;
                    phase += 1;
                    now + Duration::from_millis(pauses[phase % pauses.len()])
                };
            }
            Ok(n) = socket.recv(&mut ack_buf) => {
                if &ack_buf[..n] == b"HEARTBEAT-ACK" {
                    acks += 1;
                }
            }
        }
    }
    socket.send(b"BYE").await?;
    let (data_received, heartbeats_received) = receiver.await.expect("receiver task");

    // Check 1: every heartbeat came at least one interval after the activity before it.
    let mut early = 0;
    for pair in log.windows(2) {
        if pair[1].1 == Sent::Heartbeat && pair[1].0 - pair[0].0 < INTERVAL {
            early += 1;
        }
    }
    // Check 2: every long pause between two DATA datagrams holds a heartbeat.
    let data_times: Vec<Instant> = log
        .iter()
        .filter(|e| e.1 == Sent::Data)
        .map(|e| e.0)
        .collect();
    let heartbeat_times: Vec<Instant> = log
        .iter()
        .filter(|e| e.1 == Sent::Heartbeat)
        .map(|e| e.0)
        .collect();
    let (mut long_pauses, mut missed) = (0, 0);
    for gap in data_times.windows(2) {
        if gap[1] - gap[0] > INTERVAL + SLACK {
            long_pauses += 1;
            if !heartbeat_times.iter().any(|&h| h > gap[0] && h < gap[1]) {
                missed += 1;
            }
        }
    }

    let sent_data = data_times.len() as u64;
    let stats = idle.stats();
    println!("datagrams sent {sent_data}, received {data_received}");
    println!(
        "heartbeats sent {}, received {heartbeats_received}, acks {acks}",
        heartbeat_times.len()
    );
    println!(
        "pauses longer than {} ms: {long_pauses}, without a heartbeat: {missed}",
        (INTERVAL + SLACK).as_millis()
    );
    println!(
        "runtime timer registrations: {} (re-arming per datagram would have been {})",
        stats.registrations,
        sent_data + heartbeat_times.len() as u64
    );
    if early > 0 || missed > 0 || long_pauses == 0 {
        eprintln!("FAIL: {early} early heartbeats, {missed} long pauses without one");
        return Ok(ExitCode::FAILURE);
    }
    println!("ok: no heartbeat during traffic, one in every long pause");
    Ok(ExitCode::SUCCESS)
}
