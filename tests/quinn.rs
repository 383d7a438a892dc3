//! quinn on `LazyRuntime`, both ends, over 127.0.0.1: streams, bulk data, the idle
//! timeout, keep-alive, and recovery on a lossy path (PTO and loss timers fire
//! through our `Sleep`).
//!
//! Real time and real sockets on purpose: quinn's timers race its packets, and
//! tokio's paused clock would jump over waits on the socket. Every wait is bounded
//! (`HANG`), and only lower bounds on time are asserted.

#[path = "common/quic.rs"]
mod quic;

use lazy_deadline::quinn::LazyRuntime;
use quinn::{ConnectionError, Endpoint, TransportConfig};
use std::io::IoSliceMut;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{timeout, Instant};

/// A wait that has not ended by then never will.
const HANG: Duration = Duration::from_secs(20);

fn transport(idle: Duration, keep_alive: Option<Duration>) -> TransportConfig {
    let mut transport = TransportConfig::default();
    transport.max_idle_timeout(Some(idle.try_into().expect("idle timeout fits")));
    transport.keep_alive_interval(keep_alive);
    transport
}

/// A server and a client endpoint on `LazyRuntime`, both with `idle` as their idle
/// timeout; the client also sends keep-alives every `client_keep_alive`.
fn lazy_endpoints(
    idle: Duration,
    client_keep_alive: Option<Duration>,
) -> (Endpoint, Endpoint, std::net::SocketAddr) {
    quic::endpoints(
        Arc::new(LazyRuntime),
        transport(idle, None),
        transport(idle, client_keep_alive),
    )
}

async fn connect(
    client: &Endpoint,
    server: &Endpoint,
    addr: std::net::SocketAddr,
) -> (quinn::Connection, quinn::Connection) {
    let connecting = client.connect(addr, quic::SERVER_NAME).expect("connect");
    let (client_conn, server_conn) = tokio::join!(
        async { connecting.await.expect("client handshake") },
        async {
            let incoming = server.accept().await.expect("incoming");
            incoming.await.expect("server handshake")
        }
    );
    (client_conn, server_conn)
}

/// Echoes every bidirectional stream of every connection until the endpoint closes.
fn spawn_echo_server(server: Endpoint) {
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    tokio::spawn(async move {
                        let data = recv.read_to_end(1 << 24).await.expect("read request");
                        send.write_all(&data).await.expect("echo");
                        send.finish().expect("finish");
                        let _ = send.stopped().await;
                    });
                }
            });
        }
    });
}

async fn echo(conn: &quinn::Connection, message: Vec<u8>) {
    let (mut send, mut recv) = conn.open_bi().await.expect("open stream");
    send.write_all(&message).await.expect("send");
    send.finish().expect("finish");
    let back = recv.read_to_end(1 << 24).await.expect("read echo");
    assert_eq!(back, message);
}

#[tokio::test]
async fn many_streams_echo_on_lazy_runtime() {
    let idle = Duration::from_secs(10);
    let (server, client, addr) = lazy_endpoints(idle, None);
    spawn_echo_server(server);
    let conn = timeout(HANG, client.connect(addr, quic::SERVER_NAME).unwrap())
        .await
        .expect("handshake in time")
        .expect("handshake");
    let streams = (0..64u32).map(|i| {
        let conn = conn.clone();
        tokio::spawn(async move {
            let message: Vec<u8> = (0..8_192 + i).map(|b| (b ^ i) as u8).collect();
            echo(&conn, message).await;
        })
    });
    let all = futures::future::join_all(streams);
    for done in timeout(HANG, all).await.expect("echoes in time") {
        done.expect("stream task");
    }
    conn.close(0u32.into(), b"done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_transfer_on_lazy_runtime() {
    const BYTES: usize = 32 << 20;
    let idle = Duration::from_secs(10);
    let (server, client, addr) = lazy_endpoints(idle, None);
    let (client_conn, server_conn) = timeout(HANG, connect(&client, &server, addr))
        .await
        .expect("handshake in time");
    let receiver = tokio::spawn(async move {
        let mut recv = server_conn.accept_uni().await.expect("stream");
        let data = recv.read_to_end(BYTES).await.expect("read all");
        data.len()
    });
    let mut send = client_conn.open_uni().await.expect("open");
    let chunk = vec![0x5a; 1 << 16];
    timeout(HANG, async {
        for _ in 0..BYTES / chunk.len() {
            send.write_all(&chunk).await.expect("write");
        }
        send.finish().expect("finish");
    })
    .await
    .expect("sent in time");
    let received = timeout(HANG, receiver)
        .await
        .expect("received in time")
        .unwrap();
    assert_eq!(received, BYTES);
}

#[tokio::test]
async fn a_silent_connection_is_closed_by_the_idle_timeout_not_before() {
    let idle = Duration::from_millis(300);
    let (server, client, addr) = lazy_endpoints(idle, None);
    let (client_conn, server_conn) = timeout(HANG, connect(&client, &server, addr))
        .await
        .expect("handshake in time");
    // Every packet of the handshake was sent before this instant or after it, so the
    // last one is no earlier: closing before `quiet + idle` would be early.
    let quiet = Instant::now();
    let reason = timeout(HANG, server_conn.closed())
        .await
        .expect("closed in time");
    assert_eq!(reason, ConnectionError::TimedOut);
    assert!(
        quiet.elapsed() >= idle,
        "closed after {:?}",
        quiet.elapsed()
    );
    let reason = timeout(HANG, client_conn.closed())
        .await
        .expect("client closed in time");
    assert_eq!(reason, ConnectionError::TimedOut);
}

#[tokio::test]
async fn keep_alive_holds_a_silent_connection_open_past_the_idle_timeout() {
    let idle = Duration::from_millis(300);
    let (server, client, addr) = lazy_endpoints(idle, Some(Duration::from_millis(50)));
    let (client_conn, server_conn) = timeout(HANG, connect(&client, &server, addr))
        .await
        .expect("handshake in time");
    tokio::time::sleep(idle * 3).await;
    assert_eq!(server_conn.close_reason(), None, "server side timed out");
    assert_eq!(client_conn.close_reason(), None, "client side timed out");
    // And the connection still carries data.
    let echo_server = tokio::spawn(async move {
        let (mut send, mut recv) = server_conn.accept_bi().await.expect("stream");
        let data = recv.read_to_end(1024).await.expect("read");
        send.write_all(&data).await.expect("echo");
        send.finish().expect("finish");
        let _ = send.stopped().await;
    });
    timeout(HANG, echo(&client_conn, b"still here".to_vec()))
        .await
        .expect("echo in time");
    echo_server.await.unwrap();
}

/// Drops every `nth` datagram the wrapped socket sends.
#[derive(Debug)]
struct LossySocket {
    inner: Arc<dyn quinn::AsyncUdpSocket>,
    nth: u64,
    sent: AtomicU64,
    dropped: Arc<AtomicU64>,
}

impl quinn::AsyncUdpSocket for LossySocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn quinn::UdpPoller>> {
        self.inner.clone().create_io_poller()
    }
    fn try_send(&self, transmit: &quinn::udp::Transmit) -> std::io::Result<()> {
        // Relaxed: a counter owned by this socket; only the count matters.
        if self.sent.fetch_add(1, Ordering::Relaxed) % self.nth == self.nth - 1 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.inner.try_send(transmit)
    }
    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> Poll<std::io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }
    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
    // One datagram per transmit, so a dropped transmit is one lost packet.
    fn max_transmit_segments(&self) -> usize {
        1
    }
    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }
    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// `LazyRuntime` with lossy sockets.
#[derive(Debug)]
struct LossyRuntime {
    nth: u64,
    dropped: Arc<AtomicU64>,
}

impl quinn::Runtime for LossyRuntime {
    fn new_timer(&self, at: std::time::Instant) -> Pin<Box<dyn quinn::AsyncTimer>> {
        LazyRuntime.new_timer(at)
    }
    fn spawn(&self, future: Pin<Box<dyn std::future::Future<Output = ()> + Send>>) {
        LazyRuntime.spawn(future)
    }
    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> std::io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        Ok(Arc::new(LossySocket {
            inner: LazyRuntime.wrap_udp_socket(socket)?,
            nth: self.nth,
            sent: AtomicU64::new(0),
            dropped: self.dropped.clone(),
        }))
    }
    fn now(&self) -> std::time::Instant {
        LazyRuntime.now()
    }
}

#[tokio::test]
async fn a_lossy_path_recovers_through_our_timers() {
    let dropped = Arc::new(AtomicU64::new(0));
    let runtime = Arc::new(LossyRuntime {
        nth: 7,
        dropped: dropped.clone(),
    });
    let idle = Duration::from_secs(10);
    let (server, client, addr) =
        quic::endpoints(runtime, transport(idle, None), transport(idle, None));
    spawn_echo_server(server);
    let conn = timeout(HANG, client.connect(addr, quic::SERVER_NAME).unwrap())
        .await
        .expect("handshake in time")
        .expect("handshake");
    // Many small request/response exchanges: their tail losses are found only by
    // the probe timeout, which runs on our `Sleep`.
    timeout(HANG, async {
        for i in 0..200u32 {
            echo(&conn, i.to_be_bytes().repeat(1 + i as usize % 300)).await;
        }
    })
    .await
    .expect("every exchange completes despite the loss");
    assert!(dropped.load(Ordering::Relaxed) > 0);
    let stats = conn.stats();
    assert!(stats.path.lost_packets > 0, "{stats:?}");
    conn.close(0u32.into(), b"done");
}
