//! Runs the loopback examples with short durations; each exits non-zero when its own
//! check fails. Real time and real sockets on purpose: these are end-to-end runs.
//!
//! `cargo test` builds the examples before running tests; the binaries are found
//! next to this test's own executable.

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("test executable path");
    let profile_dir = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is not built: run through `cargo test` (which builds examples)",
        path.display()
    );
    path
}

fn run(name: &str, args: &[&str]) -> String {
    let output = Command::new(example(name))
        .args(args)
        .output()
        .expect("spawn example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "{name} failed its own check:\n{stdout}{stderr}"
    );
    assert!(
        stdout.contains("ok:"),
        "{name} printed no verdict:\n{stdout}"
    );
    stdout.into_owned()
}

#[test]
fn heartbeat_sends_heartbeats_only_in_pauses() {
    run("heartbeat", &["--duration", "1.5"]);
}

#[test]
fn tcp_timers_cut_by_duration_checks_what_it_delivered() {
    // A million segments cannot finish in a second: the run is cut and must say so.
    let stdout = run(
        "tcp_timers",
        &["--duration", "1", "--segments", "1000000", "--loss", "0.05"],
    );
    assert!(stdout.contains("--duration ended the run"), "{stdout}");
}

#[test]
fn tcp_timers_delivers_everything_in_order_despite_loss() {
    run(
        "tcp_timers",
        &[
            "--duration",
            "20",
            "--segments",
            "800",
            "--loss",
            "0.05",
            "--seed",
            "11",
        ],
    );
}

#[test]
fn idle_server_closes_exactly_the_quiet_connections() {
    run(
        "idle_server",
        &[
            "--duration",
            "1.2",
            "--idle-ms",
            "200",
            "--connections",
            "10",
        ],
    );
}

#[test]
fn udp_sessions_expires_exactly_the_quiet_sessions() {
    run(
        "udp_sessions",
        &["--duration", "1", "--idle-ms", "200", "--sessions", "2000"],
    );
}

#[test]
fn udp_relay_keeps_sessions_alive_through_key_handles() {
    run(
        "udp_relay",
        &["--duration", "1", "--sessions", "150", "--idle-ms", "300"],
    );
}

#[test]
fn peer_table_pings_idle_peers_and_drops_silent_ones() {
    run(
        "peer_table",
        &[
            "--duration",
            "1",
            "--peers",
            "150",
            "--idle-ms",
            "300",
            "--ping-ms",
            "100",
        ],
    );
}

#[test]
fn requests_complete_in_time_under_every_deadline() {
    run("requests", &["--duration", "1"]);
}

#[cfg(feature = "tower")]
#[test]
fn http_timeout_answers_every_request_with_each_layer() {
    run("http_timeout", &["--duration", "1"]);
}

#[cfg(feature = "quinn")]
#[test]
fn quinn_bulk_moves_everything_on_both_runtimes() {
    run("quinn_bulk", &["--duration", "1"]);
}
