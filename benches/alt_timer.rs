//! tokio's alternative per-worker timer (`Builder::enable_alt_timer`, tokio_unstable),
//! whose `reset` is drop + new entry, against ours on the same runtime. Needs
//!
//! ```text
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable \
//!   cargo bench --bench alt_timer
//! ```
//!
//! Without the cfg it prints how to run it and exits.

#[cfg(tokio_unstable)]
#[path = "../examples/support/cli.rs"]
mod cli;
mod common;

#[cfg(tokio_unstable)]
mod alt {
    use super::cli;
    use super::common::*;
    use criterion::Criterion;
    use std::hint::black_box;
    use std::time::Duration;
    use tokio::time::Instant;

    fn alt_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_alt_timer()
            .build()
            .unwrap()
    }

    pub fn benches(c: &mut Criterion) {
        let rt = alt_runtime();
        let _inside = rt.enter();
        let base = Instant::now();
        let mut group = c.benchmark_group("alt_timer");
        let mut theirs = registered_sleep(base + Duration::from_secs(1));
        let mut at = base + Duration::from_secs(1);
        group.bench_function("reset_later/tokio", |b| {
            b.iter(|| {
                at += Duration::from_nanos(100);
                theirs.as_mut().reset(black_box(at));
            })
        });
        let mut ours = registered_lazy_sleep(base + Duration::from_secs(1));
        let mut at = base + Duration::from_secs(1);
        group.bench_function("reset_later/lazy", |b| {
            b.iter(|| {
                at += Duration::from_nanos(100);
                ours.as_mut().reset(black_box(at));
            })
        });
        let mut kernel = registered_sleep(base + TLP);
        let mut now = base;
        group.bench_function("tcp_packet/tokio_kernel_style", |b| {
            b.iter(|| {
                now += PACKET;
                kernel.as_mut().reset(black_box(now) + TLP);
                kernel.as_mut().reset(black_box(now) + RTO);
            })
        });
        let mut timers = registered_slot_timer(base);
        let mut now = base;
        group.bench_function("tcp_packet/lazy_slot_timer_batch_at", |b| {
            b.iter(|| {
                now += PACKET;
                let mut batch = timers.batch_at(black_box(now));
                batch.set_after(Tcp::Tlp, TLP);
                batch.set_after(Tcp::Rto, RTO);
            })
        });
        // A `sleep(1 ms)` awaited until it fires, in 64 tasks: the CPU time of the
        // whole process per fire (every worker's, the driver's turns and the wakes
        // included), reported by criterion as if it were the time per iteration. On
        // this timer a deadline set's fires are serviced by a task the wake schedules.
        for (name, lazy) in [
            ("sleep_fire_cpu/tokio", false),
            ("sleep_fire_cpu/lazy", true),
        ] {
            group.bench_function(name, |b| {
                b.iter_custom(|rounds| {
                    rt.block_on(async move {
                        const TASKS: u64 = 64;
                        let period = Duration::from_millis(1);
                        let cpu = cli::cpu_ns();
                        let tasks: Vec<_> = (0..TASKS)
                            .map(|_| {
                                tokio::spawn(async move {
                                    for _ in 0..rounds {
                                        if lazy {
                                            lazy_deadline::sleep(period).await;
                                        } else {
                                            tokio::time::sleep(period).await;
                                        }
                                    }
                                })
                            })
                            .collect();
                        for task in tasks {
                            task.await.unwrap();
                        }
                        Duration::from_nanos(cli::cpu_ns().saturating_sub(cpu) / TASKS)
                    })
                })
            });
        }
        group.finish();
    }
}

#[cfg(tokio_unstable)]
criterion::criterion_group! { name = benches; config = common::config(); targets = alt::benches }
#[cfg(tokio_unstable)]
criterion::criterion_main!(benches);

#[cfg(not(tokio_unstable))]
fn main() {
    eprintln!(
        "alt_timer needs tokio_unstable: RUSTFLAGS=\"--cfg tokio_unstable\" \
         CARGO_TARGET_DIR=target/unstable cargo bench --bench alt_timer"
    );
}
