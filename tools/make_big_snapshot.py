#!/usr/bin/python3
"""Writes a large CUDA memory snapshot (1 M+ events with frames) for `make bench-memory`, built
from a real snapshot's structure: its segments, its events and their frame lists.

  tools/make_big_snapshot.py [--src REAL.pickle] [--events 1000000] [--out build/bench/big_snapshot.pickle]

The source's trace is repeated until the event count is reached, so that the result is a
trace PyTorch could have written:
  - allocations that end before the trace does (an alloc and its free_completed both in the
    trace) repeat in every round, at the same addresses, later in time;
  - allocations still live at the end (no free in the trace) come only in the last round, and
    frees of allocations made before recording only in the first, so the final segments still
    agree with the replay;
  - segment events and `snapshot` markers come only in the first round.
Every event is a dict of its own, as the allocator writes one per trace entry, while frame
lists are shared objects, as memory_snapshot.cpp's ivalue_symbolize shares one list per
distinct traceback: Python's pickler then stores each stack once and refers to it by memo
index ever after (BINGET/LONG_BINGET), which is what makes real snapshots' frames cheap.
The source is read with tools/snapshot_ref.py's restricted Unpickler.
"""
import argparse
import os
import pickle
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import snapshot_ref  # noqa: E402

DEFAULT_SRC = os.path.join(ROOT, "..", "shared", "fixtures", "snapshots",
                           "JasperSolt_EoR_NN__snapshot__6720e24.pickle")


def classify(trace):
    """Per event: 'first' (first round only), 'last' (last round only) or 'every'."""
    live = {}
    seen = set()
    role = ["every"] * len(trace)
    for i, e in enumerate(trace):
        act = e["action"]
        if act == "alloc":
            live[e["addr"]] = [i]
            seen.add(e["addr"])
        elif act in ("free_requested", "free_completed"):
            if e["addr"] in live:
                live[e["addr"]].append(i)
                if act == "free_completed":
                    del live[e["addr"]]
            else:
                role[i] = "first"  # frees of allocations made before recording
        else:
            role[i] = "first"  # segment events, snapshot markers, oom
    for idxs in live.values():  # allocations live at the end (and their free_requested)
        for i in idxs:
            role[i] = "last"
    return role


def build(src, n_events):
    data = snapshot_ref.load(src)
    if not isinstance(data, dict) or not data.get("device_traces"):
        raise SystemExit("make_big_snapshot: %s has no device_traces to repeat" % src)
    dev = max(range(len(data["device_traces"])), key=lambda i: len(data["device_traces"][i]))
    trace = data["device_traces"][dev]
    role = classify(trace)
    n_every = role.count("every")
    if n_every == 0:
        raise SystemExit("make_big_snapshot: %s: no allocation both starts and ends in the trace" % src)
    first_extra = role.count("first")
    last_extra = role.count("last")
    rounds = max(1, -(-(n_events - first_extra - last_extra) // n_every))
    times = [e.get("time_us") for e in trace if "time_us" in e]
    span = (max(times) - min(times) + 1000) if times else 0
    out = []
    for r in range(rounds):
        for e, ro in zip(trace, role):
            if (ro == "first" and r != 0) or (ro == "last" and r != rounds - 1):
                continue
            ne = dict(e)  # a dict per event; its 'frames' list stays the shared object
            if "time_us" in ne:
                ne["time_us"] = e["time_us"] + r * span
            out.append(ne)
    traces = [[] for _ in data["device_traces"]]
    traces[dev] = out
    big = dict(data)
    big["device_traces"] = traces
    return big, rounds, len(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "big_snapshot.pickle"))
    ap.add_argument("--protocol", type=int, default=4)
    args = ap.parse_args()
    t0 = time.time()
    big, rounds, n = build(args.src, args.events)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(big, f, protocol=args.protocol)
    os.replace(tmp, args.out)
    print("make_big_snapshot: %s: %d events (%d rounds of %s), %.1f MB, %.1f s"
          % (args.out, n, rounds, os.path.basename(args.src), os.path.getsize(args.out) / 1e6,
             time.time() - t0))


if __name__ == "__main__":
    main()
