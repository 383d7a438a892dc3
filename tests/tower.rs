//! `lazy_deadline::tower` side by side with tower's own `timeout` layer: the same
//! outcomes at the same virtual instants (paused clock, tasks polled only when
//! woken), errors passed through and downcast as tower's, readiness back-pressure,
//! the traits; then both layers in front of a hyper server over 127.0.0.1.

use lazy_deadline::tower as ours;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};

/// Which layer a scenario runs with.
#[derive(Clone, Copy, Debug)]
enum Which {
    Tower,
    Ours,
}

/// A service behind `which` layer, made by the layer (`ServiceBuilder`), boxed so
/// both sides run the same code.
fn layered<S>(
    which: Which,
    timeout: Duration,
    inner: S,
) -> tower::util::BoxCloneService<u64, u64, BoxError>
where
    S: Service<u64, Response = u64> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    match which {
        Which::Tower => ServiceBuilder::new()
            .layer(tower::timeout::TimeoutLayer::new(timeout))
            .service(inner)
            .boxed_clone(),
        Which::Ours => ServiceBuilder::new()
            .layer(ours::TimeoutLayer::new(timeout))
            .service(inner)
            .boxed_clone(),
    }
}

/// Answers `delay_us` microseconds after the call, with the delay.
fn delayed() -> impl Service<u64, Response = u64, Error = Infallible, Future = impl Send> + Clone {
    service_fn(|delay_us: u64| async move {
        tokio::time::sleep(Duration::from_micros(delay_us)).await;
        Ok::<_, Infallible>(delay_us)
    })
}

/// What became of one call, and when, from the start of its runtime.
#[derive(Debug, PartialEq)]
enum Outcome {
    Answered(u64, Duration),
    Elapsed(Duration),
}

/// Runs `calls` ((answer delay, timeout) in µs), each in its own task started at
/// the same instant, on a fresh paused runtime, through `which` layer.
fn run_calls(which: Which, calls: &[(u64, u64)]) -> Vec<Outcome> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = calls
            .iter()
            .map(|&(delay, timeout)| {
                let service = layered(which, Duration::from_micros(timeout), delayed());
                tokio::spawn(async move {
                    match service.oneshot(delay).await {
                        Ok(answer) => Outcome::Answered(answer, start.elapsed()),
                        Err(err) => {
                            assert!(err.is::<Elapsed>(), "{which:?}: not tower's Elapsed: {err}");
                            assert_eq!(err.to_string(), "request timed out");
                            Outcome::Elapsed(start.elapsed())
                        }
                    }
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap());
        }
        outcomes
    })
}

/// A small deterministic generator (no dependency, the same cases every run).
fn cases(seed: u64, n: usize, grid_us: u64) -> Vec<(u64, u64)> {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            let timeout = (next() % 50 + 1) * grid_us;
            // Around the deadline: before, at, after.
            let delay = match next() % 3 {
                0 => timeout,
                _ => (next() % 60) * grid_us,
            };
            (delay, timeout)
        })
        .collect()
}

#[test]
fn whole_milliseconds_give_the_same_outcome_at_the_same_instant() {
    for seed in 1..=40 {
        let calls = cases(seed * 7919, 25, 1_000);
        let theirs = run_calls(Which::Tower, &calls);
        let mine = run_calls(Which::Ours, &calls);
        assert_eq!(mine, theirs, "calls {calls:?}");
    }
}

#[test]
fn sub_millisecond_deadlines_are_never_early_and_never_after_tower() {
    for seed in 1..=40 {
        let calls = cases(seed * 104_729, 25, 137);
        let theirs = run_calls(Which::Tower, &calls);
        let mine = run_calls(Which::Ours, &calls);
        for ((call, tower), lazy) in calls.iter().zip(&theirs).zip(&mine) {
            let (delay, timeout) = (Duration::from_micros(call.0), Duration::from_micros(call.1));
            match *lazy {
                Outcome::Elapsed(at) => {
                    assert!(at >= timeout, "{call:?}: elapsed early at {at:?}");
                    let tower_at = match *tower {
                        Outcome::Elapsed(at) | Outcome::Answered(_, at) => at,
                    };
                    assert!(at <= tower_at, "{call:?}: ours {lazy:?}, tower {tower:?}");
                }
                Outcome::Answered(answer, at) => {
                    assert_eq!(answer, call.0);
                    assert!(at >= delay);
                    // Answered by us means the answer came no later than our deadline;
                    // tower's can only have answered too, or elapsed no earlier.
                    if let Outcome::Elapsed(tower_at) = *tower {
                        assert!(at <= tower_at, "{call:?}: ours {lazy:?}, tower {tower:?}");
                    }
                }
            }
        }
    }
}

/// A service whose readiness and errors the test controls.
#[derive(Clone, Default)]
struct Gate {
    open: Arc<AtomicBool>,
    fail_ready: Arc<AtomicBool>,
    waiting: Arc<Mutex<Option<Waker>>>,
}

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Refused {}

impl Gate {
    fn open(&self) {
        // Relaxed: the waker below is handed over under the mutex.
        self.open.store(true, Ordering::Relaxed);
        if let Some(waker) = self.waiting.lock().unwrap().take() {
            waker.wake();
        }
    }
}

impl Service<u64> for Gate {
    type Response = u64;
    type Error = Refused;
    type Future = Pin<Box<dyn Future<Output = Result<u64, Refused>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        // Relaxed: single-threaded runtime; the mutex orders the waker.
        if self.fail_ready.load(Ordering::Relaxed) {
            return Poll::Ready(Err(Refused));
        }
        let mut waiting = self.waiting.lock().unwrap();
        if self.open.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        *waiting = Some(cx.waker().clone());
        Poll::Pending
    }

    fn call(&mut self, request: u64) -> Self::Future {
        Box::pin(async move {
            if request == 0 {
                Err(Refused)
            } else {
                Ok(request)
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn errors_from_poll_ready_and_from_the_response_pass_through_boxed() {
    for which in [Which::Tower, Which::Ours] {
        let gate = Gate::default();
        gate.open();
        gate.fail_ready.store(true, Ordering::Relaxed);
        let err = layered(which, Duration::from_secs(1), gate.clone())
            .oneshot(7)
            .await
            .unwrap_err();
        assert!(err.is::<Refused>(), "{which:?}: {err}");

        gate.fail_ready.store(false, Ordering::Relaxed);
        let err = layered(which, Duration::from_secs(1), gate.clone())
            .oneshot(0)
            .await
            .unwrap_err();
        assert!(err.is::<Refused>(), "{which:?}: {err}");
        assert!(!err.is::<Elapsed>());
        assert_eq!(
            layered(which, Duration::from_secs(1), gate)
                .oneshot(7)
                .await
                .unwrap(),
            7
        );
    }
}

#[tokio::test(start_paused = true)]
async fn readiness_back_pressure_is_the_inner_services() {
    for which in [Which::Tower, Which::Ours] {
        let gate = Gate::default();
        let mut service = layered(which, Duration::from_millis(10), gate.clone());
        let mut ready = tokio_test_ready(&mut service);
        // Not ready while the gate is shut, however long it stays shut: readiness has
        // no deadline, in tower's layer as in ours.
        assert!(futures::poll!(&mut ready).is_pending());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(futures::poll!(&mut ready).is_pending());
        gate.open();
        let service = ready.await.unwrap();
        assert_eq!(service.call(3).await.unwrap(), 3, "{which:?}");
    }
}

/// `ServiceExt::ready`'s future, pinned and boxed (it borrows the service).
type Ready<'a, S, E> = Pin<Box<dyn Future<Output = Result<&'a mut S, E>> + Send + 'a>>;

fn tokio_test_ready<'a, S>(service: &'a mut S) -> Ready<'a, S, S::Error>
where
    S: Service<u64> + Send,
{
    Box::pin(service.ready())
}

#[tokio::test(start_paused = true)]
async fn a_response_ready_past_the_deadline_wins_as_in_tower() {
    // The response is polled first: ready at the deadline's own instant, it answers.
    for which in [Which::Tower, Which::Ours] {
        let service = layered(which, Duration::from_millis(5), delayed());
        assert_eq!(service.oneshot(5_000).await.unwrap(), 5_000, "{which:?}");
    }
}

#[test]
fn traits_are_towers() {
    fn assert_traits<T: Clone + std::fmt::Debug + Send + Sync>() {}
    fn assert_send<T: Send>(_: &T) {}
    assert_traits::<ours::TimeoutLayer>();
    assert_traits::<
        ours::Timeout<
            tower::util::ServiceFn<fn(u64) -> std::future::Ready<Result<u64, Infallible>>>,
        >,
    >();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _inside = rt.enter();
    let mut service =
        ours::TimeoutLayer::new(Duration::from_secs(1)).layer(service_fn(|n: u64| {
            std::future::ready(Ok::<_, Infallible>(n))
        }));
    let future = service.call(1);
    assert_send(&future);
    assert!(format!("{future:?}").contains("ResponseFuture"));
    assert!(format!("{service:?}").contains("Timeout"));
    let _: &tower::util::ServiceFn<_> = service.get_ref();
    let _: &mut tower::util::ServiceFn<_> = service.get_mut();
    let mut inner: tower::util::ServiceFn<_> = service.into_inner();
    assert_eq!(rt.block_on(inner.call(2)).unwrap(), 2);
}

#[test]
#[should_panic(expected = "no reactor running")]
fn a_call_outside_a_runtime_panics_as_towers() {
    let mut service = ours::Timeout::new(
        service_fn(|n: u64| std::future::ready(Ok::<_, Infallible>(n))),
        Duration::from_secs(1),
    );
    drop(service.call(1));
}

mod over_hyper {
    //! Both layers in front of a hyper HTTP/1 server on 127.0.0.1, with the expiry
    //! mapped to 504 by downcasting to tower's `Elapsed` (what `HandleErrorLayer`
    //! users write). Real time and real sockets: tokio's paused clock would jump
    //! over reads in flight. Every wait is bounded; only lower bounds on time are
    //! asserted.

    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty, Full};
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    use tokio::net::{TcpListener, TcpStream};

    const HANG: Duration = Duration::from_secs(20);
    const DEADLINE: Duration = Duration::from_millis(200);

    type Body = Full<Bytes>;

    /// `/slow` never answers; any other path answers 200 at once.
    async fn handler(
        request: Request<hyper::body::Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        if request.uri().path() == "/slow" {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(Full::new(Bytes::from_static(b"fast"))))
    }

    /// tower's `Elapsed` becomes a 504, any other error a 500.
    fn gateway_timeout(
        result: Result<Response<Body>, BoxError>,
    ) -> Result<Response<Body>, Infallible> {
        let (status, body) = match result {
            Ok(response) => return Ok(response),
            Err(err) if err.is::<Elapsed>() => (StatusCode::GATEWAY_TIMEOUT, "timed out"),
            Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "failed"),
        };
        let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
        *response.status_mut() = status;
        Ok(response)
    }

    type HttpService =
        tower::util::BoxCloneService<Request<hyper::body::Incoming>, Response<Body>, Infallible>;

    /// `timed` with its errors turned into responses, as a hyper server needs.
    fn with_504<S>(timed: S) -> HttpService
    where
        S: Service<Request<hyper::body::Incoming>, Response = Response<Body>, Error = BoxError>
            + Clone
            + Send
            + 'static,
        S::Future: Send,
    {
        tower::util::BoxCloneService::new(service_fn(move |request| {
            let timed = timed.clone();
            async move { gateway_timeout(timed.oneshot(request).await) }
        }))
    }

    async fn serve(which: Which) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let service = match which {
                    Which::Tower => with_504(
                        tower::timeout::TimeoutLayer::new(DEADLINE).layer(service_fn(handler)),
                    ),
                    Which::Ours => {
                        with_504(ours::TimeoutLayer::new(DEADLINE).layer(service_fn(handler)))
                    }
                };
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
        });
        addr
    }

    /// GETs `path` on one keep-alive connection per call; the status, the body and
    /// how long it took.
    async fn get(addr: std::net::SocketAddr, path: &str) -> (StatusCode, Bytes, Duration) {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let start = Instant::now();
        let request = Request::get(path)
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = tokio::time::timeout(HANG, sender.send_request(request))
            .await
            .expect("the server answered within the bound")
            .unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body, start.elapsed())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fast_handler_answers_200_and_a_slow_one_504_not_before_the_deadline() {
        for which in [Which::Tower, Which::Ours] {
            let addr = serve(which).await;
            let (status, body, _) = get(addr, "/fast").await;
            assert_eq!(
                (status, &body[..]),
                (StatusCode::OK, &b"fast"[..]),
                "{which:?}"
            );
            let (status, body, took) = get(addr, "/slow").await;
            assert_eq!(
                (status, &body[..]),
                (StatusCode::GATEWAY_TIMEOUT, &b"timed out"[..]),
                "{which:?}"
            );
            assert!(took >= DEADLINE, "{which:?}: 504 after {took:?}");
            // Many fast calls on several connections at once: none times out.
            let calls: Vec<_> = (0..64).map(|_| tokio::spawn(get(addr, "/fast"))).collect();
            for call in calls {
                assert_eq!(call.await.unwrap().0, StatusCode::OK, "{which:?}");
            }
        }
    }
}
