"""BENCHMARKS.md's per-request table under load, from `examples/requests.rs`."""

VARIANTS = [("Alone", "request alone"), ("Tokio", "with tokio `timeout`"),
            ("Lazy", "with our `timeout`"), ("Pingora", "with pingora `fast_timeout`"),
            ("TokioSleep", "with a fresh tokio `sleep`"), ("LazySleep", "with a fresh lazy `sleep`")]


def configs(r):
    """The runtime configurations the run measured, in order (current-thread first)."""
    seen = []
    for key in r.raw["values"]:
        if key.startswith("requests/") and key.endswith("/Alone/ns"):
            seen.append(key.split("/")[1])
    return sorted(seen, key=lambda c: (c != "current-thread", c))


def ns(r, config, variant):
    return r.v(f"requests/{config}/{variant}/ns")


def pinned(r, config):
    """ns per request with our `timeout` on a runtime whose threads are pinned
    (`on_thread_start`), or None where the run had no such row (current-thread)."""
    return r.raw["values"].get(f"requests/{config}/LazyPinned/ns")


def section(r, table):
    rows = []
    for config in configs(r):
        alone = ns(r, config, "Alone")
        cells = [config] + [f"{ns(r, config, v):.0f} ns" for v, _ in VARIANTS]
        own = lambda v: max(ns(r, config, v) - alone, 0.1)  # noqa: E731
        cells.append(f"{own('Tokio') / own('Lazy'):.1f}x")
        cells.append(f"{ns(r, config, 'Tokio') / ns(r, config, 'Lazy'):.1f}x")
        cells.append(f"{own('TokioSleep') / own('LazySleep'):.1f}x")
        p = pinned(r, config)
        cells.append("—" if p is None else f"{p:.0f} ns ({own('Tokio') / max(p - alone, 0.1):.1f}x)")
        rows.append(cells)
    headers = (["runtime"] + [name for _, name in VARIANTS]
               + ["`timeout` own cost, tokio / ours", "`timeout` total, tokio / ours", "`sleep` own cost, tokio / ours",
                  "ours, threads pinned (own cost, tokio / ours)"])
    return f"""`cargo run --release --example requests`: 64 tasks issuing requests that are pending
once, each under a 5 s deadline (a timeout, or a fresh `sleep` raced in a `select!`
with the request first), ns per request (median of 5 runs); a deadline's own cost is
its total minus the request alone. "Pinned" is our `timeout` on a runtime built with
`on_thread_start(lazy_deadline::on_thread_start)`, whose threads skip the runtime
lookup (a current-thread runtime starts no thread for its `block_on`: no row). The
multi-worker rows are mostly contention and move run to run; the load average is in
this file's header.

{table(headers, rows)}"""


def _versus(r, table, workload, alone):
    """A workload's row per configuration: alone, with tokio's `timeout`, with ours."""
    rows = []
    for config in configs(r):
        v = lambda variant: r.v(f"{workload}/{config}/{variant}/ns")  # noqa: E731
        own = lambda variant: max(v(variant) - v("Alone"), 0.1)  # noqa: E731
        rows.append([config, f"{v('Alone'):.1f} ns", f"{v('Tokio'):.1f} ns", f"{v('Lazy'):.1f} ns",
                     f"{own('Tokio') / own('Lazy'):.2f}x", f"{v('Tokio') / v('Lazy'):.2f}x"])
    headers = ["runtime", alone, "with tokio `timeout`", "with our `timeout`",
               "own cost, tokio / ours", "total, tokio / ours"]
    return table(headers, rows)


def rpc_section(r, table):
    return f"""The same command's in-process RPC: the 64 tasks are clients of one server task
(each call sends its request and a oneshot over an mpsc channel; the server replies
at once), each call under a 5 s deadline around the send and the reply:

{_versus(r, table, "rpc", "RPC alone")}

Here the channel hand-offs, the server's wake-ups and the reply cost most of a call,
and on several workers the server task's queue, not the timer, is the point all
clients share."""


def ready_section(r, table):
    return f"""The same command, requests answered at their timeout's first poll (the timeout's
whole life is the call and one poll; neither side files anything):

{_versus(r, table, "ready", "request alone")}"""


def refire_section(r, table):
    rows = []
    for config in configs(r):
        v = lambda variant: r.v(f"refire/{config}/{variant}/ns")  # noqa: E731
        rows.append([config, f"{v('Tokio'):.0f} ns", f"{v('Lazy'):.0f} ns", f"{v('Tokio') / v('Lazy'):.2f}x"])
    headers = ["runtime", "tokio `Sleep`", "lazy `Sleep`", "tokio / ours"]
    return f"""And a rate limiter's timer, the shape of tower's `RateLimit` between periods: each
of the 64 tasks' one `Sleep` fires, is reset to now + 1 ms and is polled after a
`yield_now`. CPU time of all the process's threads per period (the wall time is the
waiting), from `schedstat`:

{table(headers, rows)}"""
