//! What several examples read from their command line and the machine, shared by
//! `#[path]` (this directory holds no example of its own).
#![allow(dead_code)] // each example uses what it needs

/// The positive, finite number after `name` on the command line, if any.
pub fn arg(name: &str) -> Option<f64> {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// The load averages (1, 5, 15 min), printed with figures that contention moves.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|_| "unknown".into())
}

/// CPU time this process's threads have used so far, in nanoseconds (Linux
/// `schedstat`: nanosecond resolution, unlike `stat`'s 10 ms ticks); 0 elsewhere.
pub fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}
