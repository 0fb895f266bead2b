#!/usr/bin/env python3
"""Trace-analysis benchmark (make bench-trace, part of make bench).

Builds a >= 1 GB Kineto trace by repeating the steps of a shared trace
(tools/make_big_trace.py), then times, on that same file:
  - `modelprof trace FILE --format json` (whole analysis, report to /dev/null),
    best and median of three runs, with its peak RSS;
  - `python3 -c 'import json; json.load(open(F))'` alone, once, with its peak RSS;
and prints the throughput and the ratios against the targets:
>= 10x faster than the Python load, >= 500 MB/s end to end, peak RSS <= 25%
of the file's size. Times are wall clock on a shared machine: the best of
three is the figure least disturbed by other load; the median is printed too.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def run(cmd, stdout=subprocess.DEVNULL):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"bench_trace: {' '.join(cmd)} failed ({code}): {err}")
    return dt, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelprof", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--big", required=True)
    ap.add_argument("--min-bytes", type=int, default=1_050_000_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    tool = os.path.join(here, "..", "tools", "make_big_trace.py")
    made = False
    if not os.path.exists(a.big) or os.path.getsize(a.big) < a.min_bytes:
        subprocess.run([sys.executable, tool, a.source, a.big, "--min-bytes", str(a.min_bytes)],
                       check=True)
        made = True
    size = os.path.getsize(a.big)
    mb = size / 1e6
    try:
        # the analysis is right on the big file: N copies give N times the steps
        out = subprocess.run([a.modelprof, "trace", a.big, "--format", "json"], check=True,
                             stdout=subprocess.PIPE).stdout
        rep = json.loads(out)
        src = json.loads(subprocess.run([a.modelprof, "trace", a.source, "--format", "json"],
                                        check=True, stdout=subprocess.PIPE).stdout)
        copies = rep["summary"]["steps"] // max(1, src["summary"]["steps"])
        ok_counts = all(
            o["count"] == copies * s["count"]
            for o, s in zip(sorted(rep["operators"], key=lambda x: (x["name"], x["device_side"])),
                            sorted(src["operators"], key=lambda x: (x["name"], x["device_side"]))))
        times, cpus, rss = [], [], 0
        for _ in range(a.runs):
            dt, r, cpu = run([a.modelprof, "trace", a.big, "--format", "json"])
            times.append(dt)
            cpus.append(cpu)
            rss = max(rss, r)
        times.sort()
        cpus.sort()
        best, med = times[0], times[len(times) // 2]
        load = os.getloadavg()[0]
        py_t, py_rss, py_cpu = run([sys.executable, "-c", "import json,sys; json.load(open(sys.argv[1]))", a.big])
    finally:
        if made and not os.environ.get("BENCH_TRACE_KEEP"):
            os.unlink(a.big)
    print()
    print(f"== trace analysis: {a.big} ({mb:.0f} MB of JSON, {rep['events']} events, "
          f"{rep['summary']['steps']} steps = {copies} x the {src['summary']['steps']} of "
          f"{os.path.basename(a.source)}; operator counts {copies}x: "
          f"{'yes' if ok_counts else 'NO'})")
    print(f"modelprof trace --format json : best {best:.2f} s, median {med:.2f} s "
          f"({mb / best:.0f} MB/s best, {mb / med:.0f} MB/s median), peak RSS {rss / 1e6:.0f} MB "
          f"({100 * rss / size:.1f}% of the file)")
    print(f"  CPU time (user + sys)       : best {cpus[0]:.2f} s ({mb / cpus[0]:.0f} MB/s of CPU time); "
          f"load average {load:.1f} on {os.cpu_count()} cores during the runs")
    print(f"python3 json.load alone       : {py_t:.2f} s ({mb / py_t:.0f} MB/s), "
          f"CPU {py_cpu:.2f} s, peak RSS {py_rss / 1e6:.0f} MB")
    ratio_b, ratio_m = py_t / best, py_t / med
    print(f"ratio                         : {ratio_b:.1f}x faster (best), {ratio_m:.1f}x (median)")
    targets = [("speed >= 10x json.load", ratio_b >= 10),
               ("throughput >= 500 MB/s", mb / best >= 500),
               ("peak RSS <= 25% of file", rss <= 0.25 * size),
               ("counts scale with copies", ok_counts)]
    print("targets: " + ", ".join(f"{n}: {'met' if ok else 'NOT met'}" for n, ok in targets))


if __name__ == "__main__":
    main()
