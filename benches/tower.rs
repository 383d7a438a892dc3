//! Group 11 (feature `tower`): a `ServiceBuilder` service whose calls are pending
//! once (the shape of a handler awaiting a backend), with no timeout layer, with
//! tower's `TimeoutLayer` and with ours, 64 tasks calling it on a current-thread
//! runtime and on 2 workers. Time per call.

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::{service_fn, Service, ServiceBuilder, ServiceExt};

const TASKS: u64 = 64;
const DEADLINE: Duration = Duration::from_secs(30);

/// A response pending once (its task is woken at once, as by a reply), then `Ok`.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = Result<u32, std::convert::Infallible>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.0 {
            return Poll::Ready(Ok(7));
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[derive(Clone, Copy, Debug)]
enum Layer {
    None,
    Tower,
    Ours,
}

/// `calls` calls through `service` from one task; panics if one fails.
async fn call_many<S>(mut service: S, calls: u64)
where
    S: Service<(), Response = u32>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..calls {
        let answer = service.ready().await.unwrap().call(()).await.unwrap();
        assert_eq!(answer, 7);
    }
}

/// The time of `iters` calls spread over `TASKS` tasks on `rt`.
fn measure(rt: &tokio::runtime::Runtime, layer: Layer, iters: u64) -> Duration {
    let tasks = iters.clamp(1, TASKS);
    let per_task = iters.div_ceil(tasks);
    let handler = service_fn(|()| PendingOnce(false));
    rt.block_on(async move {
        let start = Instant::now();
        let joins: Vec<_> = (0..tasks)
            .map(|_| match layer {
                Layer::None => tokio::spawn(call_many(handler, per_task)),
                Layer::Tower => tokio::spawn(call_many(
                    ServiceBuilder::new()
                        .layer(tower::timeout::TimeoutLayer::new(DEADLINE))
                        .service(handler),
                    per_task,
                )),
                Layer::Ours => tokio::spawn(call_many(
                    ServiceBuilder::new()
                        .layer(lazy_deadline::tower::TimeoutLayer::new(DEADLINE))
                        .service(handler),
                    per_task,
                )),
            })
            .collect();
        for join in joins {
            join.await.unwrap();
        }
        start.elapsed()
    })
}

fn tower_layers(c: &mut Criterion) {
    let mut group = c.benchmark_group("tower_timeout_layer");
    for (label, rt) in [
        ("current_thread", current_thread()),
        ("2_workers", multi_thread(2)),
    ] {
        for layer in [Layer::None, Layer::Tower, Layer::Ours] {
            let id = format!("{label}/{layer:?}").to_lowercase();
            group.bench_function(id, |b| b.iter_custom(|iters| measure(&rt, layer, iters)));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = tower_layers
}
criterion_main!(benches);
