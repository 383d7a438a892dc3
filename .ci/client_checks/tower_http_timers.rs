//! lazy-deadline's own checks of tower-http's timers once `.ci/client_suites.py` made
//! them ours: the timeout layers answer at their deadline to the millisecond, on a
//! paused clock.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, StreamBody};
use std::convert::Infallible;
use std::time::Duration;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::timeout::{ResponseBodyTimeoutLayer, TimeoutLayer};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A handler that takes `d` ms answers 200 before the 50 ms deadline, else the
/// layer's 408 at 50 ms exactly (the layer polls its sleep first: a tie is a 408, as
/// with tokio's sleep).
#[tokio::test(start_paused = true)]
#[allow(deprecated)] // `TimeoutLayer::new` (tower-http names its replacement)
async fn the_timeout_layer_answers_408_at_its_deadline() {
    let mut svc = ServiceBuilder::new()
        .layer(TimeoutLayer::new(ms(50)))
        .service_fn(|req: Request<Empty<Bytes>>| async move {
            let d: u64 = req.uri().path()[1..].parse().unwrap();
            tokio::time::sleep(ms(d)).await;
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        });
    for d in [0u64, 20, 49, 50, 51, 500] {
        let start = Instant::now();
        let req = Request::get(format!("/{d}")).body(Empty::new()).unwrap();
        let response = svc.ready().await.unwrap().call(req).await.unwrap();
        let took = Instant::now() - start;
        if d < 50 {
            assert_eq!((response.status(), took), (StatusCode::OK, ms(d)));
        } else {
            assert_eq!(
                (response.status(), took),
                (StatusCode::REQUEST_TIMEOUT, ms(50)),
                "{d} ms"
            );
        }
    }
}

/// A response body whose frames come 30 ms apart, then stop: the body timeout (40 ms
/// between frames) lets the frames through and errors 40 ms after the last one.
#[tokio::test(start_paused = true)]
async fn the_body_timeout_restarts_at_each_frame() {
    let mut svc = ServiceBuilder::new()
        .layer(ResponseBodyTimeoutLayer::new(ms(40)))
        .service_fn(|_req: Request<Empty<Bytes>>| async {
            let frames = futures_util::stream::unfold(0u32, |n| async move {
                tokio::time::sleep(ms(if n < 3 { 30 } else { 1_000 })).await;
                Some((Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"x"))), n + 1))
            });
            Ok::<_, Infallible>(Response::new(StreamBody::new(Box::pin(frames))))
        });
    let start = Instant::now();
    let req = Request::get("/").body(Empty::new()).unwrap();
    let mut body = Box::pin(svc.ready().await.unwrap().call(req).await.unwrap().into_body());
    for n in 1..=3u64 {
        assert!(body.frame().await.unwrap().is_ok());
        assert_eq!(Instant::now() - start, ms(30 * n));
    }
    assert!(body.frame().await.unwrap().is_err(), "the fourth frame is late");
    assert_eq!(Instant::now() - start, ms(90 + 40));
}
