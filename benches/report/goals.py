"""The goals the project set itself, judged against this run, and why the missed ones
are missed. A goal's explanation is printed only while the run misses it, and it
speaks of what limits the figure, never of a figure of its own."""

# `cargo bench --bench never_dearer`: every shape a drop-in user's code gives `Sleep`
# and `timeout`, as (bench id's shape, what the code does, what a figure is). Shared
# with render.py's section, so the table and the goals name the same rows.
# (bench id's shape, what it is, how it is measured, what bounds ours when it misses)
DROP_IN_SHAPES = [
    ("sleep_dropped_unpolled", "a `sleep(5 s)` in a biased `select!` whose other branch is ready first: "
     "made and dropped unpolled", "wall time",
     "On one thread the `sleep` is tokio's own entry: ours adds the thread's hint (a "
     "thread-local read and store) and a `Sleep` a quarter larger than tokio's (still moved "
     "inline, not by `memcpy`); `python3 benches/instructions.py` counts those as what ours "
     "executes beyond tokio's. On two workers both look the runtime up at the call (tokio's "
     "handle clone, ours the same clone and drop); ours adds a read of the thread's last "
     "deadline set and that set's open check."),
    ("timeout_ready_first_poll", "`timeout(5 s, f)`, `f` ready at the first poll", "wall time",
     "On one thread the deadline is tokio's own entry: ours adds the thread's hint and lets go "
     "of the entry at the answer (so that an answered `Timeout` never wakes its task), where "
     "tokio's drops it with the `Timeout`; a flag to skip that for an entry never polled would "
     "make the `Timeout` larger than tokio's and cost a `memcpy` per move. On two workers: the "
     "runtime lookup at the call, plus the thread's last set and its open check."),
    ("reset_earlier_same_tick", "an armed `Sleep` reset 1 µs earlier, then polled (pending)", "wall time",
     "On one thread it is tokio's own reset and poll, plus the `Sleep`'s checks around them "
     "(whether the entry is armed at the deadline, the flags, the counts). On two workers, "
     "within the filing's tick ours is a store; once the deadline crosses a tick it is on an "
     "entry of its own, where this is tokio's own reset and the saved poll."),
    ("reset_earlier_next_tick", "an armed `Sleep` reset 1 ms earlier, then polled (pending)", "wall time",
     "As the row above: tokio's own reset, plus the `Sleep`'s checks (one thread), or the "
     "`Sleep`'s own entry and the saved pending poll (two workers)."),
    ("refire", "a rate limiter's fired `Sleep`: reset to now + 1 ms, awaited after a yield", "CPU per period",
     "On one thread the `Sleep` is tokio's own entry and the period is tokio's reset, fire and "
     "wake, plus the `Sleep`'s checks. On two workers, after its first period the `Sleep` is on "
     "an entry of its own: tokio's reset, fire and wake, plus the `Sleep`'s signal between the "
     "entry and the task (one more wake per fire). The CPU per period is mostly the task's wake "
     "and the driver's park, which both pay."),
    ("interval_tick", "an `interval(1 ms)`'s tick, awaited", "CPU per tick",
     "On one thread each tick is tokio's entry's fire and a lazy re-arm at the next poll: the "
     "tick's deadline is stored as a gap past the spent one, and turned back into an instant "
     "for tokio's reset (`Instant` arithmetic tokio's `reset_without_timer` does not need). On "
     "two workers the ticker's `Sleep` is on an entry of its own, through its signal (one more "
     "wake per fire). The park and the driver's turn, most of a tick, are the same on both."),
    ("sleep_fire", "a fresh `sleep(1 ms)` awaited until it fires (a retry's backoff)", "CPU per fire",
     "On one thread the `sleep` is tokio's own entry: tokio's registration, fire and wake, plus "
     "the `Sleep`'s hint and checks. On two workers the thread's first `sleep`s are filed in "
     "its deadline set (per fire, tokio's work for the set's entry plus the set's own filing, "
     "expiry and give-back: `python3 benches/instructions.py`'s sets column); once three in "
     "four of a window of 32 fired, its fresh `sleep`s take tokio's own entry, with no runtime "
     "lookup: tokio's registration, fire and wake, plus the `Sleep`'s checks and the thread's "
     "count of what fired. The sets save tokio's contended driver lock for deadlines cancelled "
     "before they fire (a per-request `timeout`), not for each one that fires."),
    ("limiter_turns", "a limiter whose waiting acquirer holds the only `sleep_until` (one permit per ms)",
     "CPU per acquire",
     "The `Sleep` is reset after it completed: tokio's own entry on one thread, an entry of its "
     "own with its signal on two workers (see the `interval` row); the CPU per acquire is mostly "
     "the lock hand-offs and wakes."),
    ("tower_rate_limit", "tower's `RateLimit` (4 calls per ms, one per task) over the `Sleep` it resets",
     "CPU per call",
     "Its `Sleep` is reset after it completed, as the limiter's above."),
    ("timeout_pending_once", "`timeout(5 s, request)`, the request pending once: own cost", "wall time",
     "One thread: the deadline is tokio's own entry, so both pay tokio's uncontended driver lock "
     "twice around wheel work; ours adds the thread's hint and lets go of the entry at the "
     "answer rather than at the drop. On two workers tokio's driver lock is shared and "
     "contended; ours files in a set per thread."),
]
# Short names for one-line summaries.
DROP_IN_SHORT = {
    "sleep_dropped_unpolled": "a `sleep` dropped unpolled",
    "timeout_ready_first_poll": "a `timeout` ready at its first poll",
    "reset_earlier_same_tick": "a reset 1 µs earlier",
    "reset_earlier_next_tick": "a reset 1 ms earlier",
    "refire": "a rate limiter's fired `Sleep`",
    "interval_tick": "an `interval` tick",
    "sleep_fire": "a fresh `sleep` fired",
    "limiter_turns": "a limiter's shared `sleep_until`",
    "tower_rate_limit": "tower's rate limiter",
    "timeout_pending_once": "a per-request `timeout`",
}
# (bench id's runtime, as the tables name it)
DROP_IN_RUNTIMES = [("current_thread", "current-thread"), ("two_workers", "2 workers")]


def drop_in_figures(r, shape, runtime):
    """(tokio, ours, tokio / ours) in ns for one shape on one runtime, or None where
    the run has no figure for it. `timeout_pending_once` gives own costs: each total
    minus the request alone (`request_alone`), as the per-request goals compute them."""
    crit = r.raw["criterion"]
    ids = [f"never_dearer/{shape}/{runtime}/{side}" for side in ("tokio", "lazy")]
    if shape == "timeout_pending_once":
        ids.append(f"never_dearer/request_alone/{runtime}")
    if any(i not in crit for i in ids):
        return None
    tokio, ours = (crit[i]["median_ns"] for i in ids[:2])
    if shape == "timeout_pending_once":
        alone = crit[ids[2]]["median_ns"]
        tokio, ours = max(tokio - alone, 0.1), max(ours - alone, 0.1)
    return tokio, ours, tokio / ours


def _goals(r):
    tq = "idle_queue_touch_storm/"
    dq = "delay_queue_"
    st = "idle_queue/steady/"
    kh = "key_handle_touch/"
    acc = "accuracy/"
    ours_p99 = max(r.v(f"{acc}{k}/p99_us") for k in ["LazySleep", "IdleTimeout", "SlotTimer"])

    def ratio(peer, ours):
        return r.ns(peer) / r.ns(ours)

    sizes = ["1k", "100k", "1M"]
    # (workload, goal, measured value, unit, ">=" or "<=", bound, why when missed)
    yield ("TCP-style kinds", "a kernel-style packet at least 50x cheaper with `SlotTimer::batch_at`",
           ratio("tcp_packet/tokio_kernel_style_one_sleep", "tcp_packet/slot_timer_batch_at"), "x", ">=", 50,
           "The goal came from the design's anchor of ~490 ns per kernel-style packet, which is what "
           "tokio's per-worker timer costs here (see the `alt_timer` rows). The default driver does the "
           "packet in well under 100 ns, so 50x would need ours below the few ns the caller's own "
           "`Instant` arithmetic costs. Where an earlier reset wakes the driver (the `compare` row "
           "that writes tokio's eventfd per packet), the gap is of that size.")
    yield ("TCP-style kinds", "two `set(kind, Instant)` within 1.3x of two `batch_at` sets",
           ratio("tcp_packet/slot_timer_set_instant", "tcp_packet/slot_timer_batch_at"), "x", "<=", 1.3,
           "What remains is the caller's `now + d`: two opaque std `Instant + Duration` calls that "
           "`batch_at` replaces with integer adds. No API that takes an `Instant` can remove them.")
    yield ("TCP-style kinds", "`set(kind, Instant)` at least 3x cheaper than the quinn-style table",
           ratio("tcp_packet/tokio_quinn_style_table", "tcp_packet/slot_timer_set_instant"), "x", ">=", 3,
           "The table pays the same `Instant` additions as ours, and they are most of both rows.")
    yield ("TCP-style kinds", "`SlotTimer<5 kinds>` at most one tokio `Sleep` + 128 B (240 B)",
           r.v("compare/memory/slot_timer_bytes"), "B", "<=", 240,
           "The boxed tokio `Sleep` is 112 B of it; the shared state 64 B (`Arc` counts, the "
           "deadlines' box pointer, the published deadline, the waker slot's mutex); five deadlines "
           "40 B; the owner's fields (entry pointers, waker memo, lazy entry state, `Stats`, the owning "
           "runtime's id and the away mask) the rest. Packing the entry state into one word would halve "
           "the time base's horizon and lose the witnessed time while armed; 32-bit `Stats` counters "
           "would saturate within months; the rest would need `unsafe`, which the crate forbids.")
    yield ("TCP-style kinds", "TCP-like messages per second on 2 workers at least 1.5x tokio's",
           _rate(r, "tcp/lazy_slot_timer") / _rate(r, "tcp/tokio_two_sleeps"), "x", ">=", 1.5,
           "Channel hand-offs and task wake-ups, not timers, dominate that workload.")
    yield ("per-request deadlines", "a reused lazy `Sleep` at least 10x cheaper than a fresh `tokio::time::timeout`",
           ratio("per_request/tokio_timeout_new_poll_drop", "per_request/lazy_sleep_reused_reset_poll"), "x", ">=", 10,
           "The goal assumed the design's anchor for a fresh `timeout`; here tokio creates, polls and "
           "drops one far faster; our reused reset + poll is the caller's `Instant + Duration`, a store, "
           "and a poll that reads the deadline set's passed mark.")
    for name, bench in [("lazy `Sleep`", "lazy_sleep"), ("`IdleTimeout`", "idle_timeout"), ("`SlotTimer`", "slot_timer")]:
        yield ("polling while not due", f"a pending poll of {name} no dearer than tokio's",
               ratio("poll_pending/tokio_sleep", f"poll_pending/{bench}"), "x", ">=", 1,
               "Its pending poll is its own state check (for a lazy `Sleep`, a read of its deadline "
               "set's passed mark and a waker compare); a miss here is this machine's noise.")
    req = lambda c, v: r.v(f"requests/{c}/{v}/ns")  # noqa: E731
    own = lambda c, v: max(req(c, v) - req(c, "Alone"), 0.1)  # noqa: E731
    why_ct = ("Both sides read the clock (about a fifth of tokio's cost) and look the runtime up at "
              "the call (a reference-count clone and drop); ours then takes its set's lock once to "
              "file and answers with a load and a store, where tokio takes its uncontended driver "
              "lock twice around wheel work. Filing without the lock would not change this much: the "
              "fire runs on whatever thread turns tokio's driver, so a lock-free filing must publish "
              "itself through a full fence (the Dekker pair with the fire's re-arm), which costs here "
              "more than half of what the uncontended lock and unlock cost together.")
    why_pin = ("The pinned threads skip the runtime lookup; the clock read and the set's lock remain "
               "(see the current-thread goals).")
    why_mt = ("On several workers tokio's cost is contention on its driver's lock, which moves "
              "several-fold between runs (how the two workers interleave); ours is each worker's own "
              "set, plus the runtime lookup at the call, a reference count on a line every worker "
              "writes (the pinned rows drop it).")
    yield ("per-request deadlines", "`timeout`'s own cost at least 2x lower than tokio's, current-thread",
           own("current-thread", "Tokio") / own("current-thread", "Lazy"), "x", ">=", 2, why_ct)
    yield ("per-request deadlines", "`timeout`'s own cost at least 2.5x lower than tokio's with the threads pinned, 1 worker "
           "(the opt-in covers threads a runtime starts; a current-thread runtime's `block_on` is not one)",
           own("1 worker", "Tokio") / max(req("1 worker", "LazyPinned") - req("1 worker", "Alone"), 0.1),
           "x", ">=", 2.5, why_pin)
    yield ("per-request deadlines", "request + `timeout` at least 1.5x cheaper than with tokio's, current-thread",
           req("current-thread", "Tokio") / req("current-thread", "Lazy"), "x", ">=", 1.5, why_ct)
    yield ("per-request deadlines", "`timeout`'s own cost at least 15x lower than tokio's, 2 workers",
           own("2 workers", "Tokio") / own("2 workers", "Lazy"), "x", ">=", 15, why_mt)
    yield ("per-request deadlines", "`timeout`'s own cost at least 15x lower than tokio's with the threads pinned, 2 workers",
           own("2 workers", "Tokio") / max(req("2 workers", "LazyPinned") - req("2 workers", "Alone"), 0.1),
           "x", ">=", 15, why_mt)
    yield ("per-request deadlines", "request + `timeout` at least 6x cheaper than with tokio's, 2 workers",
           req("2 workers", "Tokio") / req("2 workers", "Lazy"), "x", ">=", 6, why_mt)
    yield ("per-request deadlines", "request + `timeout` at least 1.5x cheaper than with pingora's `fast_timeout`, current-thread",
           req("current-thread", "Pingora") / req("current-thread", "Lazy"), "x", ">=", 1.5, why_ct)
    yield ("per-request deadlines", "request + `timeout` at least 2x cheaper than with pingora's `fast_timeout`, 2 workers",
           req("2 workers", "Pingora") / req("2 workers", "Lazy"), "x", ">=", 2, why_mt)
    yield ("per-request deadlines", "a fresh `sleep`'s own cost at least 2x lower than tokio's, current-thread",
           own("current-thread", "TokioSleep") / own("current-thread", "LazySleep"), "x", ">=", 2, why_ct)
    yield ("per-request deadlines", "a fresh `sleep`'s own cost at least 15x lower than tokio's, 2 workers",
           own("2 workers", "TokioSleep") / own("2 workers", "LazySleep"), "x", ">=", 15, why_mt)
    ready = lambda c, v: r.v(f"ready/{c}/{v}/ns")  # noqa: E731
    why_ready = ("Answered at its first poll, a timeout is the clock read and the runtime lookup on both "
                 "sides (`cargo bench --bench per_request -- ready` shows the same few-ns gap). tokio's lookup "
                 "clones its handle; ours does that too, for the runtime's id, and then reads the thread's "
                 "last set (a second thread-local read and the set's open check), which is what is left "
                 "between the two. tokio gives no way to read the current runtime's id without the clone; "
                 "on pinned threads (the opt-in) ours skips the clone.")
    for config in ["current-thread", "2 workers"]:
        yield ("per-request deadlines", f"a `timeout` answered at its first poll no dearer than tokio's, {config}",
               ready(config, "Tokio") / ready(config, "Lazy"), "x", ">=", 1, why_ready)
    rpc = lambda c, v: r.v(f"rpc/{c}/{v}/ns")  # noqa: E731
    why_rpc = ("A call is mostly channel hand-offs and wake-ups (the server task's and the client's): the "
               "deadline's own cost is a minority of it, and ours is bounded as above.")
    yield ("per-request deadlines", "an in-process RPC with our `timeout` at least 1.25x cheaper than with tokio's, current-thread",
           rpc("current-thread", "Tokio") / rpc("current-thread", "Lazy"), "x", ">=", 1.25, why_rpc)
    yield ("per-request deadlines", "an in-process RPC with our `timeout` at least 2x cheaper than with tokio's, 2 workers",
           rpc("2 workers", "Tokio") / rpc("2 workers", "Lazy"), "x", ">=", 2, why_rpc)
    refire = lambda c, v: r.v(f"refire/{c}/{v}/ns")  # noqa: E731
    why_refire = ("Most of a period's CPU is the same on both sides: the task's wake-ups and polls, "
                  "and the runtime parking and unparking its thread between ticks (a profile shows "
                  "the kernel's task switch first on both). The timer's own work, which is what "
                  "differs (our set's lock, a waker clone and one service per tick, against tokio's "
                  "driver lock, wheel insert and wheel walk), is a minority of it on both sides, so "
                  "1.5x of the whole is out of reach of any timer.")
    for config in ["current-thread", "2 workers"]:
        yield ("rate limiter's timer", f"a fired `Sleep` reset and polled after a yield at least 1.5x less CPU than tokio's, {config}",
               refire(config, "Tokio") / refire(config, "Lazy"), "x", ">=", 1.5, why_refire)
    tl = lambda c, layer: r.ns(f"tower_timeout_layer/{c}/{layer}")  # noqa: E731
    yield ("tower timeout layer", "a call through our layer at least 1.3x cheaper than through tower's, current-thread",
           tl("current_thread", "tower") / tl("current_thread", "ours"), "x", ">=", 1.3, why_ct)
    yield ("tower timeout layer", "a call through our layer at least 4x cheaper than through tower's, 2 workers",
           tl("2_workers", "tower") / tl("2_workers", "ours"), "x", ">=", 4, why_mt)
    # One per shape and runtime; None (not measured) where the run has no figure.
    for runtime, config in DROP_IN_RUNTIMES:
        for shape, what, _, why in DROP_IN_SHAPES:
            figures = drop_in_figures(r, shape, runtime)
            yield ("drop-in shapes", f"ours no dearer than tokio's: {what}, {config}",
                   None if figures is None else figures[2], "x", ">=", 1.0, why)
    yield ("keepalive ticker", "`Interval::reset_at` later at least 3x cheaper than tokio's",
           ratio("interval/reset_at_later/tokio", "interval/reset_at_later/lazy"), "x", ">=", 3,
           "Ours is the lazy `Sleep`'s store plus the caller's `Instant + Duration`, which tokio's "
           "row pays too; tokio's later reset is one CAS in its driver.")
    yield ("keepalive ticker", "a pending `Interval::poll_tick` no dearer than tokio's",
           ratio("interval/poll_tick_pending/tokio", "interval/poll_tick_pending/lazy"), "x", ">=", 1,
           "It is the lazy `Sleep`'s pending poll, a read of its deadline set's passed mark and a "
           "waker compare, plus the ticker's own checks; a miss here is this machine's noise.")
    yield ("real time", "worst p99 lateness of ours within 0.5 ms of tokio's `sleep_until`",
           (ours_p99 - r.v(f"{acc}TokioSleep/p99_us")) / 1e3, "+ms", "<=", 0.5,
           "p99 moves by more than the difference between runs on this shared machine.")
    yield ("many keys", "`IdleQueue::touch_at` at least 20x cheaper than `DelayQueue::reset_at` at 1k keys",
           ratio(f"{tq}delay_queue_reset/1k", f"{tq}idle_queue_touch_at/1k"), "x", ">=", 20,
           "At 1k keys everything fits in cache and tokio-util's reset is cheap; 20x would put ours "
           "at or below the floor that the caller's own loop costs.")
    for size in ["1k", "10k", "100k", "1M"]:
        yield ("many keys", f"`IdleQueue::touch_at` within 1.5x of the floor at {size} keys",
               ratio(f"{tq}idle_queue_touch_at/{size}", f"{tq}floor_via_key_table/{size}"), "x", "<=", 1.5,
               "Ours adds a generation check and the conversion to nanoseconds to the floor's store; "
               "at the largest sizes the slot and the heap record are separate cache misses.")
    yield ("many keys", "re-files per second at most keys / timeout",
           r.v(st + "refiles") / r.v(st + "seconds"), "/s", "<=", r.v(st + "keys") / r.v(st + "timeout_s"),
           "A key is re-filed at most once per timeout; more means the queue re-files early.")
    yield ("many keys", "resident bytes per key no more than tokio-util's `DelayQueue`",
           r.v("idle_queue/memory/idle_queue/bytes_per_key") / r.v("idle_queue/memory/delay_queue/bytes_per_key"),
           "x", "<=", 1, "The slot holds the value, the deadline, the generation and the heap position, "
           "as tokio-util's slab entry holds its value, deadline and wheel links: the two are level, "
           "and a miss by a fraction of a percent is a few pages of resident memory, the "
           "granularity of the measure.")
    yield ("many keys", "no poll of a 1M-key mass expiry longer than 1 ms",
           r.v("idle_queue/mass_expiry/idle_queue/longest_us") / 1e3, "ms", "<=", 1,
           "A poll does at most a bounded number of records of work and spends tokio's coop budget.")
    yield ("`DelayQueue`", "`reset_at` later at least 10x cheaper at 1k keys",
           ratio(f"{dq}reset_later/tokio_util_delay_queue/1k", f"{dq}reset_later/lazy_delay_queue/1k"), "x", ">=", 10,
           "A later reset is a generation check and a store behind two random accesses (the caller's "
           "key table and the slab) plus the `Instant` conversion.")
    yield ("`DelayQueue`", "`reset_at` later at least 20x cheaper at 100k keys",
           ratio(f"{dq}reset_later/tokio_util_delay_queue/100k", f"{dq}reset_later/lazy_delay_queue/100k"), "x", ">=", 20,
           "At 100k keys the slab no longer fits the cache: the reset is a cache miss on the slot "
           "after one on the caller's key, where tokio-util's cost is its wheel work plus the same "
           "misses.")
    yield ("`DelayQueue`", "`reset_at` earlier at least 2x cheaper at 100k keys",
           ratio(f"{dq}reset_earlier/tokio_util_delay_queue/100k", f"{dq}reset_earlier/lazy_delay_queue/100k"), "x", ">=", 2,
           "An earlier reset files a heap record (a push and, later, a stale pop).")
    for size in sizes:
        yield ("`DelayQueue`", f"`insert_at` + `remove` at least 1.5x cheaper at {size}",
               ratio(f"{dq}insert_remove/tokio_util_delay_queue/{size}", f"{dq}insert_remove/lazy_delay_queue/{size}"),
               "x", ">=", 1.5, "An insert pushes a heap record; at 1M keys the heap no longer fits the cache.")
    yield ("`DelayQueue`", "1M entries due together drained no slower than tokio-util's",
           r.v("delay_queue/mass_expiry/tokio_util/total_ms") / r.v("delay_queue/mass_expiry/ours/total_ms"), "x", ">=", 1,
           "tokio-util's wheel drains a slot as a linked list; ours pops a 4-ary heap, `O(log n)` "
           "with cache misses at 1M records. We keep the heap because it gives exact deadlines and "
           "makes a later reset a store.")
    yield ("`DelayQueue`", "no poll of that drain longer than 1 ms",
           r.v("delay_queue/mass_expiry/ours/longest_us") / 1e3, "ms", "<=", 1, "A poll's work is bounded.")
    yield ("`DelayQueue`", "resident bytes per entry no more than tokio-util's",
           r.v("delay_queue/memory/ours/bytes_per_entry") / r.v("delay_queue/memory/tokio_util/bytes_per_entry"),
           "x", "<=", 1, "A slot and its heap record against tokio-util's slab entry and wheel links.")
    for size in sizes:
        yield ("`DelayMap`", f"reset at least 2x cheaper than `HashMapDelay` at {size}",
               ratio(f"delay_map_reset/delay_map_hashmapdelay/{size}", f"delay_map_reset/lazy_delay_map/{size}"),
               "x", ">=", 2, "Both pay one hash lookup and one clock read (the floor column); at 1M keys "
               "those are most of the cost, and ours adds the slot access behind the index.")
    yield ("`DelayMap`", "insert + remove at least 2x cheaper than `HashMapDelay` at 100k",
           ratio("delay_map_insert_remove/delay_map_hashmapdelay/100k", "delay_map_insert_remove/lazy_delay_map/100k"),
           "x", ">=", 2, "Storing each key once means the index compares keys through the slots: an insert or "
           "a remove probes the table and reads the slot, one more miss than a `HashMap` holding its "
           "keys inline, and a remove also leaves a stale heap record.")
    yield ("`DelayMap`", "resident bytes at most 0.7x `HashMapDelay`'s",
           r.v("delay_queue/memory/delay_map/bytes_per_entry") / r.v("delay_queue/memory/hashmapdelay/bytes_per_entry"),
           "x", "<=", 0.7, "The index is a `HashTable` of keys into the slots (8 B each at its load factor) "
           "beside the queue's slots and heap.")
    yield ("`DelayMap`", "a `HashMap<u64, Key>` + our `DelayQueue` at least 5x cheaper than with tokio-util's, 100k peers",
           ratio("delay_map_reset/hashmap_plus_tokio_util/100k", "delay_map_reset/hashmap_plus_lazy_delay_queue/100k"),
           "x", ">=", 5, "Both rows pay the `HashMap` lookup and the clock read (the floor column), which are "
           "most of the cost at 100k keys; what is ours is the reset behind them.")
    for size in sizes:
        yield ("`KeyHandle`", f"a touch at most 1.5x `ActivityHandle::touch_at` at {size}",
               ratio(f"{kh}key_handle_touch_at/{size}", f"{kh}activity_handle_per_key/{size}"), "x", "<=", 1.5,
               "One `fetch_max` on the key's own word behind its `Arc`, like the activity handle's.")
        yield ("`KeyHandle`", f"a touch at least 5x cheaper than a channel message at {size}",
               ratio(f"{kh}channel_to_owner/{size}", f"{kh}key_handle_touch_at/{size}"), "x", ">=", 5,
               "A channel send received on the same thread is cheap here (no cross-thread wake, the "
               "queue's block stays in cache); ours is a random access to the key's word, like the "
               "channel owner's own `touch_at`.")
    s = "key_handle/sessions/"
    yield ("`KeyHandle`", "100k sessions: at least 100x fewer runtime registrations than an `IdleTimeout` each",
           r.v(s + "idle_timeout_per_session/registrations") / max(1, r.v(s + "idle_queue_key_handle/registrations")),
           "x", ">=", 100, "One queue owns one runtime entry.")
    yield ("`KeyHandle`", "100k sessions: CPU per touch no worse than an `IdleTimeout` each",
           r.v(s + "idle_timeout_per_session/cpu_ns_per_touch") / r.v(s + "idle_queue_key_handle/cpu_ns_per_touch"),
           "x", ">=", 1, "Process CPU includes the session tasks' own work, which is the same on both sides.")


def _rate(r, bench):
    c = r.raw["criterion"]["multi_thread_messages/" + bench]
    return c["elements"] / c["median_ns"]


def _shown(value, unit, op, bound):
    """The measured value (None: not measured) and the bound, as the goal reads them."""
    fmt = {
        "x": lambda v: f"{v:.2f}x" if v < 10 else f"{v:,.1f}x",
        "B": lambda v: f"{v:.0f} B",
        "ms": lambda v: f"{v:.2f} ms",
        "+ms": lambda v: f"{v:+.2f} ms",
        "/s": lambda v: f"{v:,.0f}/s",
    }[unit]
    wanted = f"{op.replace('>=', '≥').replace('<=', '≤')} {fmt(bound)}"
    if value is None:
        return "not measured in this run", wanted
    if unit == "x" and abs(value - bound) < 0.01 * bound:
        # Within 1% of the bound: enough digits to show which side it fell on.
        fmt = lambda v: f"{v:.3f}x"  # noqa: E731
    return fmt(value), f"{op.replace('>=', '≥').replace('<=', '≤')} {fmt(bound)}"


def section(r, table):
    rows, misses, unmeasured = [], {}, 0
    for workload, goal, value, unit, op, bound, why in _goals(r):
        if value is None:
            # A goal whose figures this run lacks (a suite added since): neither
            # met nor missed.
            unmeasured += 1
            shown, wanted = _shown(None, unit, op, bound)
            rows.append([workload, goal, wanted, shown, "—"])
            continue
        met = value >= bound if op == ">=" else value <= bound
        shown, wanted = _shown(value, unit, op, bound)
        rows.append([workload, goal, wanted, shown, "met" if met else "**missed**"])
        if not met:
            # Goals that differ only in size share their explanation: one bullet.
            misses.setdefault(why, []).append(f"{goal} ({shown})")
    misses = [f"- **{'; '.join(goals)}**. {why}" for why, goals in misses.items()]
    met = sum(1 for row in rows if row[-1] == "met")
    counted = f"{met} of\n{len(rows)} met"
    if unmeasured:
        counted = f"{met} of\n{len(rows) - unmeasured} measured met, {unmeasured} not measured in this run"
    return f"""## Goals we miss, and why

The goals the project set for each workload, judged against this run ({counted}). A ratio is peer / ours where the goal asks for "cheaper", and ours /
reference where it bounds ours by a reference:

{table(["workload", "goal", "bound", "this run", ""], rows)}

What limits the missed ones:

{chr(10).join(misses) if misses else "- none in this run."}
"""
