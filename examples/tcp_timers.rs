//! A tiny reliable sender over UDP on 127.0.0.1, with TCP's timers on `SlotTimer`s:
//! RTO, TLP and PROBE0 on the sender's one runtime entry, delayed ACK on the
//! receiver's. The receiver drops incoming datagrams at a seeded loss rate, and its
//! application stalls now and then, closing the window (which PROBE0 then probes).
//!
//! ```text
//! cargo run --release --example tcp_timers [-- --duration S --segments N --loss 0.05 --seed 7]
//! ```
//!
//! Check (exit status 1 if it fails): every segment is delivered in order exactly
//! once despite the loss. When `--duration` ends the run first (a slow machine, a
//! short duration), what was delivered must be exactly the first segments, in order,
//! once each, and include every segment the sender saw acknowledged.

use lazy_deadline::{timer_kinds, SlotTimer};
use std::collections::VecDeque;
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;
use tokio::time::Instant;

timer_kinds! { enum SenderTimer { Rto, Tlp, Probe0 } }
timer_kinds! { enum ReceiverTimer { DelAck } }

const RTO: Duration = Duration::from_millis(40);
const TLP: Duration = Duration::from_millis(10);
const PROBE0: Duration = Duration::from_millis(20);
const DELACK: Duration = Duration::from_millis(5);
const CWND: u32 = 8;
const RECV_BUFFER: usize = 16;

fn arg(name: &str, default: f64) -> f64 {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Wire format: b'D' seq payload | b'P' (window probe) | b'A' ack window.
fn ack(next: u32, window: u16) -> [u8; 7] {
    let mut m = [b'A', 0, 0, 0, 0, 0, 0];
    m[1..5].copy_from_slice(&next.to_be_bytes());
    m[5..7].copy_from_slice(&window.to_be_bytes());
    m
}

/// Receives in order, ACKs every second segment or after the delayed-ACK timer, and
/// hands data to an application that drains every millisecond but stalls 80 ms of
/// every 300 ms. Returns the delivered sequence numbers.
async fn receiver(
    socket: UdpSocket,
    loss: f64,
    seed: u64,
    mut stop: oneshot::Receiver<()>,
) -> (Vec<u32>, u64, u64) {
    let (mut rng, mut dropped) = (seed | 1, 0u64);
    let mut timers = SlotTimer::<ReceiverTimer>::new();
    let (mut next, mut unacked, mut buffer) = (0u32, 0u32, VecDeque::new());
    let mut delivered = Vec::new();
    let mut app = tokio::time::interval(Duration::from_millis(1));
    let (start, mut peer, mut buf) = (Instant::now(), None, [0u8; 64]);
    let window = |b: &VecDeque<u32>| (RECV_BUFFER - b.len()) as u16;
    loop {
        tokio::select! {
            _ = &mut stop => return (delivered, dropped, timers.stats().registrations),
            Ok((n, from)) = socket.recv_from(&mut buf) => {
                rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
                if (rng % 1_000_000) as f64 / 1e6 < loss {
                    dropped += 1; // lost on the way in
                    continue;
                }
                peer = Some(from);
                let in_order = n == 13 && buf[0] == b'D'
                    && u32::from_be_bytes(buf[1..5].try_into().unwrap()) == next
                    && buffer.len() < RECV_BUFFER;
                if in_order {
                    assert_eq!(&buf[5..13], &u64::from(next).to_be_bytes(), "corrupt payload");
                    buffer.push_back(next);
                    next += 1;
                    unacked += 1;
                    if unacked < 2 {
                        timers.set_after(ReceiverTimer::DelAck, DELACK); // ACK later, maybe with company
                        continue;
                    }
                }
                // Every second segment, anything out of order, and probes: ACK now.
                timers.cancel(ReceiverTimer::DelAck);
                unacked = 0;
                socket.send_to(&ack(next, window(&buffer)), from).await.ok();
            }
            _ = timers.expired() => {
                unacked = 0;
                if let Some(to) = peer { socket.send_to(&ack(next, window(&buffer)), to).await.ok(); }
            }
            _ = app.tick() => {
                let stalled = start.elapsed().as_millis() % 300 >= 220;
                let was_closed = window(&buffer) == 0;
                if !stalled && !buffer.is_empty() {
                    delivered.extend(buffer.drain(..));
                    if was_closed { // window update
                        if let Some(to) = peer { socket.send_to(&ack(next, window(&buffer)), to).await.ok(); }
                    }
                }
            }
        }
    }
}

#[derive(Default)]
struct Counts {
    /// Segments the receiver acknowledged (cumulative).
    acked: u32,
    sent: u64,
    by_rto: u64,
    by_tlp: u64,
    probes: u64,
}

/// Sends `total` segments reliably; returns counts and timer registrations.
async fn sender(
    socket: UdpSocket,
    total: u32,
    until: Instant,
) -> std::io::Result<(Counts, u64, bool)> {
    let mut timers = SlotTimer::<SenderTimer>::new();
    let (mut una, mut next, mut window) = (0u32, 0u32, RECV_BUFFER as u32);
    let (mut counts, mut buf) = (Counts::default(), [0u8; 64]);
    let segment = |seq: u32| {
        let mut m = [0u8; 13];
        m[0] = b'D';
        m[1..5].copy_from_slice(&seq.to_be_bytes());
        m[5..13].copy_from_slice(&u64::from(seq).to_be_bytes());
        m
    };
    while una < total {
        if Instant::now() > until {
            counts.acked = una;
            return Ok((counts, timers.stats().registrations, false));
        }
        // Send what the windows allow; each send pushes the loss probe back (a store).
        while next < total && next < una + window.min(CWND) {
            socket.send(&segment(next)).await?;
            next += 1;
            counts.sent += 1;
            let mut batch = timers.batch_at(Instant::now());
            batch.set_after(SenderTimer::Tlp, TLP);
            if timers.deadline(SenderTimer::Rto).is_none() {
                timers.set_after(SenderTimer::Rto, RTO);
            }
        }
        tokio::select! {
            Ok(n) = socket.recv(&mut buf) => {
                if n != 7 || buf[0] != b'A' { continue; }
                let acked = u32::from_be_bytes(buf[1..5].try_into().unwrap());
                window = u32::from(u16::from_be_bytes(buf[5..7].try_into().unwrap()));
                if acked > una {
                    una = acked;
                    if una == next { timers.cancel(SenderTimer::Rto); timers.cancel(SenderTimer::Tlp); }
                    else { timers.set_after(SenderTimer::Rto, RTO); } // progress: restart RTO (later: a store)
                }
                if window == 0 && una == next { timers.set_after(SenderTimer::Probe0, PROBE0); }
                else if window > 0 { timers.cancel(SenderTimer::Probe0); }
            }
            expired = timers.expired() => {
                if expired.contains(SenderTimer::Rto) && una < next {
                    counts.by_rto += 1;
                    next = una; // go back N
                    timers.set_after(SenderTimer::Rto, RTO);
                } else if expired.contains(SenderTimer::Tlp) && una < next {
                    // Tail loss probe: the receiver keeps only in-order data, so the
                    // probe re-sends the window from the first unacked segment.
                    counts.by_tlp += 1;
                    next = una;
                }
                if expired.contains(SenderTimer::Probe0) && window == 0 {
                    counts.probes += 1;
                    socket.send(b"P").await?;
                    timers.set_after(SenderTimer::Probe0, PROBE0);
                }
            }
        }
    }
    counts.acked = una;
    Ok((counts, timers.stats().registrations, true))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<ExitCode> {
    let duration = Duration::from_secs_f64(arg("--duration", 5.0).clamp(0.5, 600.0));
    let total = arg("--segments", 3000.0).clamp(1.0, 1e7) as u32;
    let loss = arg("--loss", 0.05).clamp(0.0, 0.5);
    let seed = arg("--seed", 7.0) as u64;

    let receive_socket = UdpSocket::bind("127.0.0.1:0").await?;
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.connect(receive_socket.local_addr()?).await?;
    let (stop, stopped) = oneshot::channel();
    let receiver = tokio::spawn(receiver(receive_socket, loss, seed, stopped));
    let started = Instant::now();
    let (counts, sender_regs, finished) = sender(socket, total, started + duration).await?;
    let elapsed = started.elapsed();
    // Let the application drain its buffer (it may be in a stall), then stop it.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let _ = stop.send(());
    let (delivered, dropped, receiver_regs) = receiver.await.expect("receiver task");

    println!(
        "{total} segments in {:.2} s with {:.0}% loss (seed {seed}): {dropped} datagrams dropped",
        elapsed.as_secs_f64(),
        loss * 100.0
    );
    println!(
        "segments sent {} (retransmission rounds: {} by RTO, {} by TLP), {} zero-window probes",
        counts.sent, counts.by_rto, counts.by_tlp, counts.probes
    );
    println!("runtime timer registrations: sender {sender_regs}, receiver {receiver_regs} (for {} sends and {} receives)", counts.sent, delivered.len());
    // Exactly the first `delivered.len()` segments, in order, once each.
    let prefix = delivered.iter().copied().eq(0..delivered.len() as u32);
    let complete = delivered.len() == total as usize;
    let acked_delivered = delivered.len() >= counts.acked as usize;
    if !prefix || !acked_delivered || delivered.is_empty() || (finished && !complete) {
        eprintln!(
            "FAIL: finished {finished}, delivered {} of {total} segments, in order exactly once: {prefix}, acked {} all delivered: {acked_delivered}",
            delivered.len(),
            counts.acked
        );
        return Ok(ExitCode::FAILURE);
    }
    if complete {
        println!("ok: all {total} segments delivered in order exactly once");
    } else {
        println!(
            "ok: --duration ended the run; the first {} of {total} segments were delivered in order exactly once ({} acked)",
            delivered.len(),
            counts.acked
        );
    }
    Ok(ExitCode::SUCCESS)
}
