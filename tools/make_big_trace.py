#!/usr/bin/env python3
"""Build a large torch.profiler trace for the trace-analysis benchmark by
repeating the profiled steps of a real (shared) trace back to back.

Each copy of the trace's events is shifted in time by the length of the
window, and its ids (External id, correlation, flow ids, Sequence number)
are offset so the copies never link to each other; ProfilerStep#N is
renumbered. The result is a valid Kineto trace of N x 3 steps whose
analysis should report N times the operator counts of the original.

usage: make_big_trace.py SOURCE.trace.json[.gz] OUT.json --min-bytes 1000000000
"""
import argparse
import gzip
import json
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--min-bytes", type=int, default=1_000_000_000)
    a = ap.parse_args()
    op = gzip.open if a.source.endswith(".gz") else open
    with op(a.source, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and isinstance(e.get("pid"), int)]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + e.get("dur", 0) for e in timed)
    shift = (hi - lo) + 1000.0
    steps = [int(m.group(1)) for e in events
             for m in [re.match(r"ProfilerStep#(\d+)$", e.get("name", ""))] if m]
    nsteps = max(steps) - min(steps) + 1 if steps else 1
    # ids continue where the previous copy's ended, as in one long run
    # (External ids, correlations and sequence numbers are counters)
    id_max = 0
    for e in events:
        if isinstance(e.get("id"), int):
            id_max = max(id_max, e["id"])
        args = e.get("args")
        if isinstance(args, dict):
            for k in ("External id", "correlation", "Sequence number"):
                if isinstance(args.get(k), int):
                    id_max = max(id_max, args[k])
    id_off = id_max + 1
    # the events as text once, with the fields that change per copy as
    # format fields; the rest of each event is copied verbatim
    def template(e):
        e = dict(e)
        marks = {}
        if isinstance(e.get("ts"), (int, float)) and isinstance(e.get("pid"), int):
            marks["ts"] = e["ts"]
            e["ts"] = "\x00TS\x00"
        if "id" in e and isinstance(e["id"], int):
            marks["id"] = e["id"]
            e["id"] = "\x00ID\x00"
        args = e.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for k, tag in (("External id", "EXT"), ("correlation", "COR"), ("Sequence number", "SEQ")):
                if isinstance(args.get(k), int):
                    marks[tag] = args[k]
                    args[k] = "\x00" + tag + "\x00"
            e["args"] = args
        m = re.match(r"ProfilerStep#(\d+)$", e.get("name", ""))
        if m:
            marks["STEP"] = int(m.group(1))
            e["name"] = "ProfilerStep#\x00STEP\x00"
        s = json.dumps(e)
        s = s.replace("{", "{{").replace("}", "}}")
        s = s.replace('"\\u0000TS\\u0000"', "{ts:.3f}").replace('"\\u0000ID\\u0000"', "{id}")
        for tag in ("EXT", "COR", "SEQ"):
            s = s.replace('"\\u0000%s\\u0000"' % tag, "{%s}" % tag)
        s = s.replace("\\u0000STEP\\u0000", "{STEP}")
        return s, marks
    tpl = [template(e) for e in events if e.get("ph") != "M"]
    meta = [json.dumps(e) for e in events if e.get("ph") == "M"]
    head = json.dumps(doc)[:-1]
    written = 0
    copies = 0
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(head + ', "traceEvents": [\n')
        f.write(",\n".join(meta))
        written = f.tell()
        while written < a.min_bytes:
            dt = shift * copies
            out = []
            for s, mk in tpl:
                v = {}
                if "ts" in mk:
                    v["ts"] = mk["ts"] + dt
                if "id" in mk:
                    v["id"] = mk["id"] + id_off * copies
                for tag in ("EXT", "COR", "SEQ"):
                    if tag in mk:
                        v[tag] = mk[tag] + id_off * copies
                if "STEP" in mk:
                    v["STEP"] = mk["STEP"] + nsteps * copies
                out.append(s.format(**v))
            f.write(",\n" + ",\n".join(out))
            copies += 1
            written = f.tell()
        f.write("\n]}\n")
    os.replace(tmp, a.out)
    print(f"{a.out}: {os.path.getsize(a.out)} bytes, {copies} copies of {len(tpl)} events "
          f"({copies * nsteps} steps)", file=sys.stderr)


if __name__ == "__main__":
    main()
