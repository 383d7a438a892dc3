//! `lazy_deadline::time` mirrors `tokio::time` item for item: every public item of the
//! `tokio::time` this crate is built with (read from tokio's source in cargo's
//! registry, for the version in Cargo.lock) has its counterpart there, so a new tokio
//! item cannot be missed silently; and each one is usable through the one `use` line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[allow(unused_imports)]
use lazy_deadline::time::{
    self, error::Elapsed, error::Error, interval, interval_at, sleep, sleep_until, timeout,
    timeout_at, Duration, Instant, Interval, MissedTickBehavior, Sleep, Timeout,
};
#[cfg(feature = "test-util")]
#[allow(unused_imports)]
use lazy_deadline::time::{advance, pause, resume};

/// The version of `name` in the workspace's Cargo.lock.
fn locked_version(name: &str) -> String {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .expect("Cargo.lock");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{name}\"") {
            let version = lines.next().expect("a version line");
            return version
                .trim_start_matches("version = \"")
                .trim_end_matches('"')
                .to_string();
        }
    }
    panic!("{name} is not in Cargo.lock");
}

/// tokio's `src/time/` in cargo's registry, for the locked version.
fn tokio_time_dir() -> PathBuf {
    let version = locked_version("tokio");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let registry = cargo_home.join("registry").join("src");
    std::fs::read_dir(&registry)
        .unwrap_or_else(|e| panic!("{}: {e}", registry.display()))
        .filter_map(|index| {
            let dir = index
                .ok()?
                .path()
                .join(format!("tokio-{version}"))
                .join("src/time");
            dir.is_dir().then_some(dir)
        })
        .next()
        .unwrap_or_else(|| panic!("tokio {version}'s source is not in {}", registry.display()))
}

/// The names a Rust source re-exports with `pub use` (one level of braces).
fn pub_use_names(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for statement in source.split("pub use ").skip(1) {
        let statement = &statement[..statement.find(';').expect("a `pub use` ends")];
        let list = match (statement.find('{'), statement.rfind('}')) {
            (Some(open), Some(close)) => &statement[open + 1..close],
            _ => statement.rsplit("::").next().unwrap_or(statement),
        };
        for item in list.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item);
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() && name != "self" {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The public types and functions a Rust source defines at its top level.
fn pub_items(source: &str) -> BTreeSet<String> {
    source
        .lines()
        .filter_map(|line| {
            let rest = line
                .strip_prefix("pub struct ")
                .or_else(|| line.strip_prefix("pub enum "))
                .or_else(|| line.strip_prefix("pub fn "))?;
            let end = rest.find(|c: char| !c.is_alphanumeric() && c != '_')?;
            Some(rest[..end].to_string())
        })
        .collect()
}

#[test]
fn every_public_item_of_tokio_time_has_its_counterpart_in_lazy_deadline_time() {
    let tokio_dir = tokio_time_dir();
    let read = |path: &Path| {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let tokio_mod = read(&tokio_dir.join("mod.rs"));
    let tokio_error = read(&tokio_dir.join("error.rs"));
    let ours = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/time.rs"));
    let (tokio_names, our_names) = (pub_use_names(&tokio_mod), pub_use_names(&ours));
    assert!(
        tokio_names.len() >= 15,
        "tokio::time's re-exports were not read: {tokio_names:?}"
    );
    let missing: Vec<_> = tokio_names.difference(&our_names).collect();
    assert!(
        missing.is_empty(),
        "tokio::time has items lazy_deadline::time lacks: {missing:?}"
    );
    assert!(tokio_mod.contains("pub mod error;") && ours.contains("pub mod error {"));
    let tokio_errors = pub_items(&tokio_error);
    assert!(tokio_errors.contains("Elapsed") && tokio_errors.contains("Error"));
    let missing: Vec<_> = tokio_errors.difference(&our_names).collect();
    assert!(
        missing.is_empty(),
        "tokio::time::error has items lazy_deadline::time::error lacks: {missing:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_one_use_line_reaches_ours_where_we_have_a_drop_in_and_tokios_elsewhere() {
    let start = Instant::now();
    let sleeper: Sleep = sleep(Duration::from_millis(10));
    sleeper.await;
    let elapsed: Result<(), Elapsed> =
        timeout(Duration::from_millis(5), std::future::pending()).await;
    let _ours: lazy_deadline::error::Elapsed = elapsed.unwrap_err(); // the same type
    let mut ticker: Interval = time::interval(Duration::from_millis(10));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await;
    assert_eq!(start.elapsed(), Duration::from_millis(15));
    let _ours: Timeout<std::future::Ready<()>> = timeout_at(start, std::future::ready(()));
    let _error: fn() -> Error = Error::shutdown;
}
