#!/usr/bin/env python3
"""Trace-analysis benchmark (make bench-trace, part of make bench).

Builds a large Kineto trace (518 MB by default) by repeating the steps of a
shared trace (tools/make_big_trace.py), then times, on that same file and
alternating so that both see the same load:
  - `modelprof trace FILE --format json` (read, link, analyse, JSON report
    to /dev/null), with its peak RSS (getrusage of the child);
  - `python3 -c 'import json; json.load(open(F))'` alone;
and prints the throughput, the ratio of the best times and of the medians,
and the targets of issue 25: >= 35x the Python load, peak RSS <= 10% of the
file. With --gz the same trace gzipped is analysed too (the inflater's
share). Times are wall clock on a shared machine; CPU times are printed
beside them, and the load average.
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
    ap.add_argument("--min-bytes", type=int, default=518_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--gz", action="store_true", help="also the trace gzipped")
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
        times, cpus, rss, py, py_cpu = [], [], 0, [], []
        py_rss = 0
        for _ in range(a.runs):
            dt, r, cpu = run([a.modelprof, "trace", a.big, "--format", "json"])
            times.append(dt)
            cpus.append(cpu)
            rss = max(rss, r)
            pt, pr, pc = run([sys.executable, "-c", "import json,sys; json.load(open(sys.argv[1]))", a.big])
            py.append(pt)
            py_cpu.append(pc)
            py_rss = max(py_rss, pr)
        times.sort()
        cpus.sort()
        py.sort()
        py_cpu.sort()
        best, med = times[0], times[len(times) // 2]
        py_t, py_med = py[0], py[len(py) // 2]
        load = os.getloadavg()[0]
        gz = None
        if a.gz:
            gzpath = a.big + ".gz"
            subprocess.run("gzip -1 -c '%s' > '%s'" % (a.big, gzpath), shell=True, check=True)
            try:
                gt, gr, gc = run([a.modelprof, "trace", gzpath, "--format", "json"])
                gz = (gt, gr, gc, os.path.getsize(gzpath))
            finally:
                os.unlink(gzpath)
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
    print(f"python3 json.load alone       : best {py_t:.2f} s, median {py_med:.2f} s ({mb / py_t:.0f} MB/s), "
          f"CPU {py_cpu[0]:.2f} s, peak RSS {py_rss / 1e6:.0f} MB")
    ratio_b, ratio_m = py_t / best, py_med / med
    print(f"ratio                         : {ratio_b:.1f}x faster (best), {ratio_m:.1f}x (median), "
          f"{py_cpu[0] / cpus[0]:.1f}x in CPU time (best), {a.runs} runs alternating")
    if gz:
        gt, gr, gc, gsize = gz
        print(f"the same trace gzipped ({gsize / 1e6:.0f} MB, gzip -1): {gt:.2f} s ({mb / gt:.0f} MB/s of JSON), "
              f"CPU {gc:.2f} s, peak RSS {gr / 1e6:.0f} MB ({100 * gr / size:.1f}% of the JSON)")
    targets = [("speed >= 35x json.load", ratio_b >= 35),
               ("peak RSS <= 10% of file", rss <= 0.10 * size),
               ("counts scale with copies", ok_counts)]
    print("targets: " + ", ".join(f"{n}: {'met' if ok else 'NOT met'}" for n, ok in targets))


if __name__ == "__main__":
    main()
