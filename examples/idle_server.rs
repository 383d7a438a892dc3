//! A TCP echo server on 127.0.0.1 that closes connections idle for a while, with the
//! read and write halves in separate tasks, both recording activity on one
//! `IdleTimeout` through `ActivityHandle`s (a store per read or write, no timer work).
//!
//! An in-process client opens connections, keeps half of them busy and lets the
//! other half go quiet.
//!
//! ```text
//! cargo run --release --example idle_server [-- --duration SECONDS --idle-ms MS --connections N]
//! ```
//!
//! Checks (exit status 1 if any fails): exactly the quiet connections are closed by
//! the server, and each no earlier than the idle timeout after its last byte.

use lazy_deadline::IdleTimeout;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::{sleep, Instant};

fn arg(name: &str, default: f64) -> f64 {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Serves one connection until the client closes it or it is idle for `idle`.
async fn serve(stream: TcpStream, idle: Duration) {
    let (mut read_half, mut write_half) = stream.into_split();
    let mut timeout = IdleTimeout::new(idle);
    let (to_writer, mut from_reader) = mpsc::channel::<Vec<u8>>(16);

    let reading = timeout.handle();
    let mut reader = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = read_half.read(&mut buf).await {
            reading.touch(); // activity from the read task
            if to_writer.send(buf[..n].to_vec()).await.is_err() {
                break;
            }
        }
    });
    let writing = timeout.handle();
    let writer = tokio::spawn(async move {
        while let Some(chunk) = from_reader.recv().await {
            if write_half.write_all(&chunk).await.is_err() {
                break;
            }
            writing.touch(); // activity from the write task
        }
    });

    tokio::select! {
        // Idle: dropping both halves (by aborting their tasks) closes the socket.
        () = &mut timeout => {}
        _ = &mut reader => {} // the client closed its side
    }
    reader.abort();
    writer.abort();
}

/// A client that pings every 50 ms until `until`; returns whether the server closed
/// it first (it must not).
async fn busy_client(addr: SocketAddr, until: Instant) -> std::io::Result<bool> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut buf = [0u8; 64];
    while Instant::now() < until {
        stream.write_all(b"ping").await?;
        if stream.read_exact(&mut buf[..4]).await.is_err() {
            return Ok(true); // closed by the server
        }
        sleep(Duration::from_millis(50)).await;
    }
    Ok(false)
}

/// A client that pings three times, then goes quiet; returns how long after its last
/// byte the server closed the connection (`None` if it did not by `until`).
async fn quiet_client(addr: SocketAddr, until: Instant) -> std::io::Result<Option<Duration>> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut buf = [0u8; 64];
    let mut last_byte = Instant::now();
    for _ in 0..3 {
        stream.write_all(b"ping").await?;
        last_byte = Instant::now();
        stream.read_exact(&mut buf[..4]).await?; // the echo
        sleep(Duration::from_millis(20)).await;
    }
    tokio::select! {
        read = stream.read(&mut buf) => match read? {
            0 => Ok(Some(last_byte.elapsed())),
            _ => Ok(None), // an unexpected byte: not closed
        },
        () = tokio::time::sleep_until(until) => Ok(None),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<ExitCode> {
    let duration = Duration::from_secs_f64(arg("--duration", 3.0).clamp(0.5, 600.0));
    let idle = Duration::from_millis(arg("--idle-ms", 200.0).clamp(10.0, 60_000.0) as u64);
    let connections = arg("--connections", 16.0).clamp(2.0, 1_000.0) as usize;
    if idle * 2 > duration {
        eprintln!("--duration must be at least twice --idle-ms");
        return Ok(ExitCode::FAILURE);
    }

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, idle));
        }
    });

    let until = Instant::now() + duration;
    let busy: Vec<_> = (0..connections / 2)
        .map(|_| tokio::spawn(busy_client(addr, until)))
        .collect();
    let quiet: Vec<_> = (0..connections - connections / 2)
        .map(|_| tokio::spawn(quiet_client(addr, until)))
        .collect();

    let mut busy_closed = 0;
    for client in busy {
        busy_closed += client.await.expect("client task")? as usize;
    }
    let (mut quiet_closed, mut early, mut worst) = (0, 0, Duration::ZERO);
    for client in quiet {
        if let Some(after) = client.await.expect("client task")? {
            quiet_closed += 1;
            early += (after < idle) as usize;
            worst = worst.max(after);
        }
    }
    let quiet_total = connections - connections / 2;
    println!(
        "idle timeout {} ms, {connections} connections over {:.1} s",
        idle.as_millis(),
        duration.as_secs_f64()
    );
    println!(
        "busy connections closed by the server: {busy_closed} of {}",
        connections / 2
    );
    println!("quiet connections closed by the server: {quiet_closed} of {quiet_total} (latest {} ms after the last byte)", worst.as_millis());
    if busy_closed > 0 || quiet_closed != quiet_total || early > 0 {
        eprintln!("FAIL: {busy_closed} busy closed, {quiet_closed}/{quiet_total} quiet closed, {early} closed early");
        return Ok(ExitCode::FAILURE);
    }
    println!("ok: exactly the quiet connections were closed, none early");
    Ok(ExitCode::SUCCESS)
}
