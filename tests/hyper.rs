//! hyper on `LazyTimer` over 127.0.0.1: HTTP/1 header-read timeout and keep-alive,
//! HTTP/2 keep-alive pings, and `reset` in place and with a foreign sleep.
//!
//! Real time and real sockets for the connection tests (hyper's timers race reads on
//! the socket; tokio's paused clock would jump over them). Every wait is bounded
//! (`HANG`), and only lower bounds on time are asserted.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::rt::Timer;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lazy_deadline::hyper::LazyTimer;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};

const HANG: Duration = Duration::from_secs(20);

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// Serves HTTP/1 with `builder` on a fresh listener; counts accepted connections.
async fn http1_server(
    builder: hyper::server::conn::http1::Builder,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // Relaxed: a test counter read after the requests completed.
            count.fetch_add(1, Ordering::Relaxed);
            let connection = builder.serve_connection(TokioIo::new(stream), service_fn(hello));
            tokio::spawn(async move {
                let _ = connection.await;
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn header_read_timeout_closes_a_half_sent_head_not_before() {
    let read_timeout = Duration::from_millis(200);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(LazyTimer).header_read_timeout(read_timeout);
    let (addr, _) = http1_server(builder).await;

    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // Read until the server closes: whatever it says, it must not be before the
    // timeout (its timer started no earlier than our connect).
    let mut answer = Vec::new();
    let _ = timeout(HANG, stream.read_to_end(&mut answer))
        .await
        .expect("closed in time");
    assert!(
        start.elapsed() >= read_timeout,
        "closed after {:?}",
        start.elapsed()
    );
    assert!(
        !answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test]
async fn keep_alive_requests_share_one_connection() {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(LazyTimer)
        .header_read_timeout(Duration::from_secs(2))
        .keep_alive(true);
    let (addr, accepted) = http1_server(builder).await;

    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    timeout(HANG, async {
        for i in 0..20 {
            if i % 5 == 0 {
                // Idle between requests: the server's header timer is re-armed for
                // each new head.
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            sender.ready().await.unwrap();
            let request = Request::get("/")
                .header("host", "localhost")
                .body(Empty::<Bytes>::new())
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.status(), 200);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"hello");
        }
    })
    .await
    .expect("requests in time");
    assert_eq!(accepted.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn http2_keep_alive_pings_keep_an_idle_connection_working() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(LazyTimer)
            .keep_alive_interval(Duration::from_millis(50))
            .keep_alive_timeout(Duration::from_secs(2));
        let _ = builder
            .serve_connection(TokioIo::new(stream), service_fn(hello))
            .await;
    });

    let stream = TcpStream::connect(addr).await.unwrap();
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(LazyTimer)
        .keep_alive_interval(Duration::from_millis(50))
        .keep_alive_timeout(Duration::from_secs(2))
        .keep_alive_while_idle(true);
    let (mut sender, connection) = builder.handshake(TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(connection);
    for _ in 0..2 {
        let request = Request::get("http://localhost/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = timeout(HANG, sender.send_request(request))
            .await
            .expect("in time")
            .unwrap();
        assert_eq!(response.status(), 200);
        // Idle for several ping intervals on both sides.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        !connection.is_finished(),
        "the pings closed a healthy connection"
    );
}

#[tokio::test]
async fn http2_keep_alive_timeout_closes_a_silent_peer_not_before() {
    // A peer that accepts and reads but never answers, not even the pings.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut sink = [0u8; 4096];
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    });

    let (interval, keep_alive_timeout) = (Duration::from_millis(50), Duration::from_millis(100));
    let start = Instant::now();
    let stream = TcpStream::connect(addr).await.unwrap();
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(LazyTimer)
        .keep_alive_interval(interval)
        .keep_alive_timeout(keep_alive_timeout)
        .keep_alive_while_idle(true);
    let (_sender, connection) = builder
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
        .await
        .unwrap();
    let result = timeout(HANG, connection)
        .await
        .expect("the connection gives up in time");
    assert!(result.is_err(), "a silent peer should fail the keep-alive");
    assert!(
        start.elapsed() >= interval + keep_alive_timeout,
        "gave up after {:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn reset_works_in_place_and_replaces_a_foreign_sleep() {
    let timer = LazyTimer;
    let start = timer.now();
    let mut sleep = timer.sleep(Duration::from_millis(10));
    assert!(sleep
        .as_mut()
        .downcast_mut_pin::<lazy_deadline::Sleep>()
        .is_some());
    timer.reset(&mut sleep, start + Duration::from_millis(40));
    assert!(sleep
        .as_mut()
        .downcast_mut_pin::<lazy_deadline::Sleep>()
        .is_some());
    (&mut sleep).await;
    assert_eq!(timer.now() - start, Duration::from_millis(40));

    // A sleep from another timer is replaced by one of ours at the new deadline,
    // never left as it was.
    let mut foreign: std::pin::Pin<Box<dyn hyper::rt::Sleep>> = Box::pin(Foreign {
        inner: tokio::time::sleep(Duration::from_secs(3600)),
    });
    let start = timer.now();
    timer.reset(&mut foreign, start + Duration::from_millis(20));
    assert!(foreign
        .as_mut()
        .downcast_mut_pin::<lazy_deadline::Sleep>()
        .is_some());
    foreign.await;
    assert_eq!(timer.now() - start, Duration::from_millis(20));
}

pin_project_lite::pin_project! {
    /// A `hyper::rt::Sleep` that is not ours.
    struct Foreign {
        #[pin]
        inner: tokio::time::Sleep,
    }
}

impl std::future::Future for Foreign {
    type Output = ();
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.project().inner.poll(cx)
    }
}

impl hyper::rt::Sleep for Foreign {}
