#!/usr/bin/env python3
"""Memory-snapshot benchmark (make bench-memory, issue 32).

Makes a large snapshot (1 M+ events with memo-shared frames, tools/make_big_snapshot.py, from a
real snapshot's structure) unless it exists, then times on that same file, alternating so that
both see the same load:
  - `modelprof memory FILE --format json` (read, replay, report; JSON to /dev/null), with its
    peak RSS (os.wait4's rusage of that child alone);
  - `python3 -c 'import pickle; pickle.load(open(F, "rb"))'` alone, with its peak RSS;
and prints best and median times, the ratio of the best times and of the medians, and the
targets: >= 5x pickle.load, modelprof's peak RSS below the (uncompressed) file's size.
With --check the JSON's devices are compared with tools/snapshot_ref.py's replay.
Exit status: 0 targets met, 1 missed or `modelprof memory` missing/failing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run(cmd, stdout=subprocess.DEVNULL):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")  # small; read before waiting
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    p.stderr.close()
    return os.waitstatus_to_exitcode(status), dt, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime, err


def has_memory_command(modelprof, snap):
    """(True, '') when `modelprof memory` exists and reads a small snapshot."""
    if not os.access(modelprof, os.X_OK):
        return False, "no %s: build it first (make all)" % modelprof
    code, _, _, _, err = run([modelprof, "memory", snap, "--format", "json"])
    if code != 0:
        return False, ("`%s memory %s --format json` failed (exit %d): %s"
                       % (modelprof, os.path.relpath(snap, ROOT), code, err.strip()[:300]))
    return True, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--big", default=os.path.join(ROOT, "build", "bench", "big_snapshot.pickle"))
    ap.add_argument("--events", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python", default=sys.executable or "/usr/bin/python3")
    ap.add_argument("--check", action="store_true", help="compare with tools/snapshot_ref.py")
    args = ap.parse_args()

    small = os.path.join(ROOT, "tests", "snapshots",
                         "HugePandaCoder_octree-nca-groupeq__mem_snapshots_cuda_single_step__55ff68f.pickle")
    ok, why = has_memory_command(args.modelprof, small)
    if not ok:
        print("bench-memory: `modelprof memory` is not available: %s\n"
              "bench-memory: it comes with issue 32's C side (src/memory/, `modelprof memory FILE`);"
              " nothing was timed." % why, file=sys.stderr)
        return 1
    if not os.path.exists(args.big):
        subprocess.check_call([args.python, os.path.join(ROOT, "tools", "make_big_snapshot.py"),
                               "--events", str(args.events), "--out", args.big])
    size = os.path.getsize(args.big)
    mb = size / 1e6
    with open(args.big, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            sys.exit("bench-memory: %s is gzipped: give the uncompressed pickle" % args.big)

    mp_cmd = [args.modelprof, "memory", args.big, "--format", "json"]
    py_cmd = [args.python, "-c", "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))", args.big]
    mp, py = [], []
    for i in range(args.runs):
        code, dt, rss, cpu, err = run(mp_cmd)
        if code != 0:
            print("bench-memory: %s failed (exit %d): %s" % (" ".join(mp_cmd), code, err.strip()[:500]),
                  file=sys.stderr)
            return 1
        mp.append((dt, rss, cpu))
        code, dt, rss, cpu, err = run(py_cmd)
        if code != 0:
            print("bench-memory: pickle.load failed (exit %d): %s" % (code, err.strip()[:500]), file=sys.stderr)
            return 1
        py.append((dt, rss, cpu))
        print("run %d: modelprof %.2f s (cpu %.2f s, RSS %.0f MB); pickle.load %.2f s (cpu %.2f s, RSS %.0f MB)"
              % (i + 1, mp[-1][0], mp[-1][2], mp[-1][1] / 1e6, py[-1][0], py[-1][2], py[-1][1] / 1e6))
    mp_best, mp_med = min(t for t, _, _ in mp), statistics.median(t for t, _, _ in mp)
    py_best, py_med = min(t for t, _, _ in py), statistics.median(t for t, _, _ in py)
    mp_rss = max(r for _, r, _ in mp)
    py_rss = max(r for _, r, _ in py)
    ratio_b, ratio_m = py_best / mp_best, py_med / mp_med
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print()
    print("file                             : %s, %.1f MB uncompressed, load average %.1f"
          % (os.path.relpath(args.big, ROOT), mb, load))
    print("modelprof memory --format json   : best %.2f s, median %.2f s (%.0f MB/s best), peak RSS %.0f MB (%.1f%% of the file)"
          % (mp_best, mp_med, mb / mp_best, mp_rss / 1e6, 100.0 * mp_rss / size))
    print("python3 pickle.load alone        : best %.2f s, median %.2f s (%.0f MB/s best), peak RSS %.0f MB"
          % (py_best, py_med, mb / py_best, py_rss / 1e6))
    print("ratio                            : %.1fx faster (best), %.1fx (median); target >= 5x"
          % (ratio_b, ratio_m))
    mp_cpu, py_cpu = min(c for _, _, c in mp), min(c for _, _, c in py)
    print("CPU time (user+sys), best        : modelprof %.2f s, pickle.load %.2f s: %.1fx (the wall ratio on an idle machine)"
          % (mp_cpu, py_cpu, py_cpu / mp_cpu if mp_cpu else float("inf")))
    print("peak RSS against the file        : %.0f MB vs %.0f MB; target below the file's size"
          % (mp_rss / 1e6, mb))
    failed = []
    if ratio_b < 5.0:
        failed.append("speed %.1fx < 5x" % ratio_b)
    if mp_rss >= size:
        failed.append("peak RSS %.0f MB >= file %.0f MB" % (mp_rss / 1e6, mb))
    if args.check:
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import snapshot_ref
        with tempfile.NamedTemporaryFile("w+", suffix=".json") as out:
            subprocess.check_call(mp_cmd, stdout=out)
            out.seek(0)
            got = json.load(out)
        diffs = snapshot_ref.compare(snapshot_ref.reference(args.big, warn=lambda m: None), got)
        print("against snapshot_ref.py          : %s" % ("equal" if not diffs else "; ".join(diffs[:5])))
        if diffs:
            failed.append("%d differences from the reference" % len(diffs))
    print("bench-memory: %s" % ("targets met" if not failed else "MISSED: " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
