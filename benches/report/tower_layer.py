"""BENCHMARKS.md's tower timeout-layer section, kept beside render.py."""

LAYERS = [("none", "no timeout layer"), ("tower", "tower `TimeoutLayer`"), ("ours", "our `TimeoutLayer`")]
RUNTIMES = [("current_thread", "current-thread"), ("2_workers", "2 workers")]


def ns(r, runtime, layer):
    return r.ns(f"tower_timeout_layer/{runtime}/{layer}")


def http(r, layer, what):
    return r.v(f"http/{layer}/{what}")


def section(r, table, t):
    rows = []
    for runtime, label in RUNTIMES:
        cells = [label] + [t(ns(r, runtime, layer)) for layer, _ in LAYERS]
        own = lambda layer: max(ns(r, runtime, layer) - ns(r, runtime, "none"), 0.1)  # noqa: E731
        cells.append(f"{own('tower') / own('ours'):.1f}x")
        cells.append(f"{ns(r, runtime, 'tower') / ns(r, runtime, 'ours'):.1f}x")
        rows.append(cells)
    crit = table(["runtime"] + [name for _, name in LAYERS] + ["layer's own cost, tower / ours", "total, tower / ours"], rows)
    http_rows = [[name, f"{http(r, key, 'rps'):,.0f}", f"{http(r, key, 'cpu_us'):.2f} µs"]
                 for key, name in [("None", "no timeout layer"), ("Tower", "tower `TimeoutLayer`"),
                                   ("Ours", "our `TimeoutLayer`")]]
    gain_rps = http(r, "Ours", "rps") / http(r, "Tower", "rps")
    gain_cpu = http(r, "Tower", "cpu_us") / http(r, "Ours", "cpu_us")
    return f"""## A timeout layer on a tower service

`cargo bench --features tower --bench tower`: a `ServiceBuilder` service whose response
is pending once (a handler awaiting a backend), 64 tasks calling it, time per call
with no timeout layer, with tower's `TimeoutLayer` (a fresh tokio `Sleep` per call)
and with ours (`lazy_deadline::tower::TimeoutLayer`: the deadline filed in the
thread's deadline set), both at 30 s:

{crit}

End to end, `cargo run --release --features tower --example http_timeout`: hyper's
HTTP/1 server on 2 workers over 127.0.0.1, 32 keep-alive connections each with one
request in flight, a handler that awaits once; requests per second and the server
workers' CPU per request (median of 5 alternating runs; the load-generating client
shares the two cores and is not counted):

{table(["layer", "requests/s", "server CPU per request"], http_rows)}

Ours against tower's layer in that run: requests per second, ours / tower's,
{gain_rps:.2f}x; server CPU per request, tower's / ours, {gain_cpu:.2f}x (above 1 is a
gain for ours). Every row serves through the same tower-to-hyper adapter, so only the
layer differs. A request here costs microseconds of
socket and HTTP work, so a layer's tens to hundreds of nanoseconds sit inside the
run-to-run noise of this shared machine (about 10%): the gain shows where the
handler is cheap and many workers share tokio's timer lock, as in the table above.
"""
