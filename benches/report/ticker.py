"""BENCHMARKS.md's keepalive-ticker section (`Interval`), kept beside render.py."""


def section(r, pair_rows):
    g = "interval/"
    rows = [
        ("`reset_at(now + period)` later", "tokio `Interval`", g + "reset_at_later/tokio",
         "lazy `Interval`", g + "reset_at_later/lazy"),
        ("`reset()` (reads the clock)", "tokio `Interval`", g + "reset/tokio", "lazy `Interval`", g + "reset/lazy"),
        ("`poll_tick` returning `Pending`", "tokio `Interval`", g + "poll_tick_pending/tokio",
         "lazy `Interval`", g + "poll_tick_pending/lazy"),
    ]
    return f"""## A keepalive ticker postponed on every message

`cargo bench --bench interval`: an `Interval` that has ticked and is registered,
pushed back by one period on every message, tokio's against ours:

{pair_rows(r, rows)}

A later reset of ours is a store, and the runtime entry moves once per period at
most. `reset()` reads the clock (`Instant::now()`), which both sides pay on every
call; a protocol task that already read the clock for the message passes it to
`reset_at`. A pending `poll_tick` is the lazy `Sleep`'s: a read of its deadline
set's passed mark and a waker compare.
"""
