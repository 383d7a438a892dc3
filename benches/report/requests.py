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


def section(r, table):
    rows = []
    for config in configs(r):
        alone = ns(r, config, "Alone")
        cells = [config] + [f"{ns(r, config, v):.0f} ns" for v, _ in VARIANTS]
        own = lambda v: max(ns(r, config, v) - alone, 0.1)  # noqa: E731
        cells.append(f"{own('Tokio') / own('Lazy'):.1f}x")
        cells.append(f"{ns(r, config, 'Tokio') / ns(r, config, 'Lazy'):.1f}x")
        cells.append(f"{own('TokioSleep') / own('LazySleep'):.1f}x")
        rows.append(cells)
    headers = (["runtime"] + [name for _, name in VARIANTS]
               + ["`timeout` own cost, tokio / ours", "`timeout` total, tokio / ours", "`sleep` own cost, tokio / ours"])
    return f"""`cargo run --release --example requests`: 64 tasks issuing requests that are pending
once, each under a 5 s deadline (a timeout, or a fresh `sleep` raced in a `select!`
with the request first), ns per request (median of 5 runs); a deadline's own cost is
its total minus the request alone. The multi-worker rows are mostly
contention and move run to run; the load average is in this file's header.

{table(headers, rows)}"""


def rpc_section(r, table):
    rows = []
    for config in configs(r):
        v = lambda variant: r.v(f"rpc/{config}/{variant}/ns")  # noqa: E731
        own = lambda variant: max(v(variant) - v("Alone"), 0.1)  # noqa: E731
        rows.append([config, f"{v('Alone'):.0f} ns", f"{v('Tokio'):.0f} ns", f"{v('Lazy'):.0f} ns",
                     f"{own('Tokio') / own('Lazy'):.1f}x", f"{v('Tokio') / v('Lazy'):.2f}x"])
    headers = ["runtime", "RPC alone", "with tokio `timeout`", "with our `timeout`",
               "own cost, tokio / ours", "total, tokio / ours"]
    return f"""The same command's in-process RPC: the 64 tasks are clients of one server task
(each call sends its request and a oneshot over an mpsc channel; the server replies
at once), each call under a 5 s deadline around the send and the reply:

{table(headers, rows)}

Here the channel hand-offs, the server's wake-ups and the reply cost most of a call,
and on several workers the server task's queue, not the timer, is the point all
clients share."""
