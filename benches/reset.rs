//! Group 1: `Sleep::reset`, tokio vs ours, for later, earlier (same ms and across ms)
//! and alternating deadlines. Each timer is registered with the driver first.

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use tokio::time::Instant;

/// Runs `reset` for both peers over the same deadline sequence.
fn pair(c: &mut Criterion, name: &str, mut next: impl FnMut(Instant, u64) -> Instant + Copy) {
    let rt = current_thread();
    let _inside = rt.enter();
    let base = Instant::now();
    let mut group = c.benchmark_group(format!("reset/{name}"));
    let start = base + Duration::from_secs(30 * 86_400);
    let mut theirs = registered_sleep(start);
    let mut i = 0u64;
    group.bench_function("tokio", |b| {
        b.iter(|| {
            i += 1;
            theirs.as_mut().reset(black_box(next(base, i)));
        })
    });
    let mut ours = registered_lazy_sleep(start);
    let mut i = 0u64;
    group.bench_function("lazy", |b| {
        b.iter(|| {
            i += 1;
            ours.as_mut().reset(black_box(next(base, i)));
        })
    });
    group.finish();
}

fn resets(c: &mut Criterion) {
    // Later: 100 ns further each time.
    pair(c, "later", |base, i| {
        base + Duration::from_secs(1) + Duration::from_nanos(100 * i)
    });
    // Earlier within the same millisecond tick: 1 ns earlier each time. Strictly
    // decreasing for the whole run (no wrap-around: after one, every deadline would
    // be later than the lowest one armed, and the lazy timer would rightly store).
    pair(c, "earlier_same_ms", |base, i| {
        base + Duration::from_secs(3600) - Duration::from_nanos(i)
    });
    // Earlier across ticks: 1 ms earlier each time, from 30 days out (a run makes
    // well under 10^9 calls, so it stays in the future).
    pair(c, "earlier_across_ms", |base, i| {
        base + Duration::from_secs(30 * 86_400) - Duration::from_millis(i)
    });
    // Alternating 20 ms / 200 ms ahead of a packet clock advancing 1 µs per call.
    pair(c, "alternating_20ms_200ms", |base, i| {
        base + PACKET * (i as u32) + if i % 2 == 0 { TLP } else { RTO }
    });
}

criterion_group! { name = benches; config = config(); targets = resets }
criterion_main!(benches);
