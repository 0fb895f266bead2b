#!/usr/bin/python3
"""modelprof benchmark: static profile time and memory vs. Python's onnx.

    /usr/bin/python3 bench/run.py --modelprof build/modelprof
    /usr/bin/python3 bench/run.py --baseline-only

Models (generated into build/bench/ when missing, never committed):
  resnet50_weights.onnx  ResNet-50 with its ~100 MB of weights inline
                         (tools/export_fixtures.py --keep-weights --only resnet50)
  llama7b.onnx           Llama-2-7B-sized decoder, weights absent (external)
                         (tools/make_llama7b.py)
  bert_inline.onnx       BERT-base-sized encoder with ~530 MB of weights inline
                         (tools/make_bert_inline.py)

The files with inline weights are rewritten before each run, so their pages
sit in the page cache as freshly written data (large folios): the case where
reading each initializer's header used to map most of the file.

For each model, two comparisons, each like with like:

  commands    `modelprof MODEL --format json -o /dev/null` (plus
              `--dim batch=1 --dim seq=128` for llama) against
              `python3 -c 'import onnx; infer_shapes(onnx.load(MODEL))'`, one
              fresh process per run on both sides, spawn to exit (process
              start, interpreter start and imports included: what a user
              waits for).  modelprof runs --warmup times unmeasured, then
              --runs times; Python runs 10 times.  Peak RSS comes from GNU
              time's %M (2 extra runs; falls back to os.wait4's rusage, which
              is biased upwards by the spawning Python's RSS, see
              measure_rss).
  in process  bench_static's load + infer + cost + aggregate (and, apart,
              the JSON report) in a loop, against `onnx.load(path,
              load_external_data=False)` + `onnx.shape_inference.
              infer_shapes(m)` timed inside one Python process,
              --baseline-runs times (no interpreter start or import).

Targets: ResNet-50 <= 20 ms, llama7b <= 50 ms, bert_inline <= 50 ms
(modelprof command median), python3/modelprof >= 20x (command medians), and
peak RSS <= 64 MB for the models with inline weights; the in-process ratio
is printed beside it.  The verdict is printed; the exit status is 0 whatever
the verdict and non-zero only when a command failed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = [
    # name, file, extra modelprof args, target ms, peak RSS target MB (None: none)
    ("resnet50", "resnet50_weights.onnx", [], 20.0, 64.0),
    ("llama7b", "llama7b.onnx", ["--dim", "batch=1", "--dim", "seq=128"], 50.0, None),
    ("bert_inline", "bert_inline.onnx", [], 50.0, 64.0),
]
TARGET_RATIO = 20.0

BASELINE_SCRIPT = r"""
import json, sys, time
import onnx
import onnx.shape_inference
path, runs = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    m = onnx.load(path, load_external_data=False)
    onnx.shape_inference.infer_shapes(m)
    times.append(time.perf_counter() - t0)
    del m
print(json.dumps(times))
"""


class CommandFailed(Exception):
    pass


def run_measured(cmd, cwd=None):
    """Run cmd once; return (wall seconds, peak RSS bytes, stdout text)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if p.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise CommandFailed("%s exited with %d\n%s" % (" ".join(cmd), p.returncode, tail))
    return wall, ru.ru_maxrss * 1024, stdout


GNU_TIME = "/usr/bin/time"


def measure_rss(cmd):
    """Peak RSS in bytes of one run of cmd.

    os.wait4's ru_maxrss of a process spawned from Python starts at Python's
    own RSS (Linux carries the pre-exec memory high-water mark across exec,
    and vfork/fork children start from the parent's), so a 5 MB tool would
    read as ~13 MB.  GNU time forks from a ~1 MB process, so its %M is
    faithful: use it when installed, else fall back to wait4 (biased)."""
    if os.access(GNU_TIME, os.X_OK):
        with tempfile.NamedTemporaryFile("r", suffix=".rss") as f:
            run_measured([GNU_TIME, "-f", "%M", "-o", f.name] + cmd)
            return int(f.read().strip().splitlines()[-1]) * 1024, "GNU time %M"
    return run_measured(cmd)[1], "wait4 ru_maxrss (includes the spawning Python's RSS)"


def ensure_models(args):
    os.makedirs(args.bench_dir, exist_ok=True)
    resnet = os.path.join(args.bench_dir, "resnet50_weights.onnx")
    if not os.path.exists(resnet):
        print("generating %s ..." % resnet, flush=True)
        subprocess.check_call([args.python, os.path.join(ROOT, "tools", "export_fixtures.py"),
                               "--keep-weights", "--only", "resnet50", "--out", args.bench_dir])
    llama = os.path.join(args.bench_dir, "llama7b.onnx")
    if not os.path.exists(llama):
        print("generating %s ..." % llama, flush=True)
        subprocess.check_call([args.python, os.path.join(ROOT, "tools", "make_llama7b.py"), llama])
    bert = os.path.join(args.bench_dir, "bert_inline.onnx")
    if not os.path.exists(bert):
        print("generating %s ..." % bert, flush=True)
        subprocess.check_call([args.python, os.path.join(ROOT, "tools", "make_bert_inline.py"),
                               bert])
    for path in (resnet, bert):
        rewrite(path)


def rewrite(path):
    """Write the file anew (copy, then rename over it): its pages are then
    in the page cache as freshly written data, as after an export."""
    tmp = path + ".tmp"
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        while True:
            block = src.read(1 << 24)
            if not block:
                break
            dst.write(block)
    os.replace(tmp, path)


def summarize(seconds):
    ms = [s * 1e3 for s in seconds]
    return {"min_ms": min(ms), "median_ms": statistics.median(ms), "runs": len(ms)}


def bench_modelprof(args, path, extra):
    cmd = [args.modelprof, path, "--format", "json", "-o", "/dev/null"] + extra
    for _ in range(args.warmup):
        run_measured(cmd)
    walls = [run_measured(cmd)[0] for _ in range(args.runs)]
    r = summarize(walls)
    rss = [measure_rss(cmd) for _ in range(2)]
    r["peak_rss_mb"] = max(x[0] for x in rss) / 2**20
    r["rss_method"] = rss[0][1]
    r["command"] = " ".join(cmd)
    return r


def bench_inprocess(args, path, extra):
    """load + infer + cost + aggregate inside one process (bench_static),
    the counterpart of the baseline's in-process onnx.load + infer_shapes."""
    dims = [a for a in extra if "=" in a]
    _, _, stdout = run_measured([args.bench_static, path, str(args.runs)] + dims)
    d = json.loads(stdout.strip().splitlines()[-1])
    r = summarize(d["profile_s"])
    r["report"] = summarize(d["report_s"])
    return r


def bench_baseline(args, path):
    wall, peak, stdout = run_measured(
        [args.python, "-c", BASELINE_SCRIPT, path, str(args.baseline_runs)])
    r = summarize(json.loads(stdout.strip().splitlines()[-1]))
    r["peak_rss_mb"] = peak / 2**20
    r["process_s"] = wall
    return r


BASELINE_CMD = r"""
import sys
import onnx
import onnx.shape_inference
onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1], load_external_data=False))
"""


def bench_baseline_command(args, path, runs=10):
    """The baseline as a user runs it: one python3 process per profile,
    interpreter start and `import onnx` included (like modelprof's runs,
    which include its process start)."""
    walls = [run_measured([args.python, "-c", BASELINE_CMD, path])[0] for _ in range(runs)]
    return summarize(walls)


def spawn_floor(runs=20):
    """What an empty program costs through the same harness."""
    true = "/bin/true" if os.path.exists("/bin/true") else "true"
    r = summarize([run_measured([true])[0] for _ in range(runs)])
    r["peak_rss_mb"], r["rss_method"] = measure_rss([true])
    r["peak_rss_mb"] /= 2**20
    return r


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def main():
    ap = argparse.ArgumentParser(description="modelprof static-profile benchmark")
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--bench-static", default=os.path.join(ROOT, "build", "bench_static"),
                    help="in-process timer built from bench/bench_static.c")
    ap.add_argument("--bench-dir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="Python with torch and onnx (model generation, baseline)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--baseline-runs", type=int, default=20)
    ap.add_argument("--baseline-only", action="store_true")
    ap.add_argument("--only", choices=[m[0] for m in MODELS], action="append")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()

    failed = []
    try:
        ensure_models(args)
    except (subprocess.CalledProcessError, OSError) as e:
        print("error: generating benchmark models failed: %s" % e, file=sys.stderr)
        return 2

    run_tool = not args.baseline_only
    if run_tool and not os.access(args.modelprof, os.X_OK):
        print("error: %s is not an executable (build it first, or use --baseline-only)"
              % args.modelprof, file=sys.stderr)
        failed.append("modelprof missing")
        run_tool = False

    results = []
    for name, fname, extra, target, rss_target in MODELS:
        if args.only and name not in args.only:
            continue
        path = os.path.join(args.bench_dir, fname)
        row = {"model": name, "file": path, "bytes": os.path.getsize(path),
               "target_ms": target, "target_rss_mb": rss_target, "modelprof": None,
               "baseline": None}
        print("benchmarking %s (%.1f MB) ..." % (name, row["bytes"] / 2**20), flush=True)
        try:
            row["baseline"] = bench_baseline(args, path)
        except CommandFailed as e:
            print("error: baseline: %s" % e, file=sys.stderr)
            failed.append("baseline " + name)
        if run_tool:
            try:
                row["baseline_command"] = bench_baseline_command(args, path)
            except CommandFailed as e:
                print("error: baseline command: %s" % e, file=sys.stderr)
                failed.append("baseline command " + name)
            try:
                row["modelprof"] = bench_modelprof(args, path, extra)
                if os.access(args.bench_static, os.X_OK):
                    row["inprocess"] = bench_inprocess(args, path, extra)
            except CommandFailed as e:
                print("error: modelprof: %s" % e, file=sys.stderr)
                failed.append("modelprof " + name)
        results.append(row)

    # Ratios compare like with like: a command with a command (process
    # start, interpreter start and imports included on both sides), and a
    # call in process with a call in process (nothing but the work itself).
    print()
    head = ("model", "modelprof cmd min/med ms", "peak RSS MB", "python3 cmd med ms",
            "baseline RSS MB", "ratio (commands)", "verdict")
    widths = (12, 24, 12, 18, 16, 17, 0)
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()
    print(line)
    print("-" * len(line))
    all_pass = True
    for row in results:
        mp, bc, bl = row["modelprof"], row.get("baseline_command"), row["baseline"]
        ratio = verdict = None
        if mp and bc:
            ratio = bc["median_ms"] / mp["median_ms"] if mp["median_ms"] > 0 else float("inf")
            ok_time = mp["median_ms"] <= row["target_ms"]
            ok_ratio = ratio >= TARGET_RATIO
            ok_rss = row["target_rss_mb"] is None or mp["peak_rss_mb"] <= row["target_rss_mb"]
            verdict = "PASS" if ok_time and ok_ratio and ok_rss else "FAIL (%s)" % ", ".join(
                x for x, ok in (("> %g ms" % row["target_ms"], ok_time),
                                ("ratio < %gx" % TARGET_RATIO, ok_ratio),
                                ("RSS > %s MB" % row["target_rss_mb"], ok_rss)) if not ok)
            all_pass = all_pass and ok_time and ok_ratio and ok_rss
        else:
            all_pass = False
            verdict = "baseline only" if args.baseline_only else "not measured"
        row["command_ratio"], row["verdict"] = ratio, verdict
        cells = (row["model"],
                 "%s / %s" % (fmt(mp and mp["min_ms"]), fmt(mp and mp["median_ms"])),
                 fmt(mp and mp["peak_rss_mb"]),
                 fmt(bc and bc["median_ms"]),
                 fmt(bl and bl["peak_rss_mb"]),
                 "-" if ratio is None else "%.1fx" % ratio,
                 verdict)
        print("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip())
    print("  commands: `modelprof MODEL --format json -o /dev/null` against `python3 -c 'import "
          "onnx; infer_shapes(onnx.load(MODEL))'`, one process each, spawn to exit")
    print()
    print("in process (no process start on either side): modelprof load + infer + cost + "
          "aggregate (bench_static) against onnx.load + infer_shapes timed inside Python:")
    for row in results:
        ip, bl = row.get("inprocess"), row["baseline"]
        if not ip or not bl:
            continue
        row["inprocess_ratio"] = bl["median_ms"] / ip["median_ms"] if ip["median_ms"] > 0 else None
        print("  %-10s modelprof min/med %.3f / %.3f ms (+ JSON report %.3f ms)  onnx min/med "
              "%.1f / %.1f ms  ratio %.1fx%s"
              % (row["model"], ip["min_ms"], ip["median_ms"], ip["report"]["median_ms"],
                 bl["min_ms"], bl["median_ms"], row["inprocess_ratio"] or 0,
                 "" if (row["inprocess_ratio"] or 0) >= TARGET_RATIO
                 else "  (< %gx)" % TARGET_RATIO))
    floor = spawn_floor()
    print()
    print("floor (/bin/true through the same harness): min %.2f ms, median %.2f ms, "
          "peak RSS %.1f MB [RSS by %s]"
          % (floor["min_ms"], floor["median_ms"], floor["peak_rss_mb"], floor["rss_method"]))
    print("targets: resnet50 <= 20 ms, llama7b <= 50 ms, bert_inline <= 50 ms (modelprof "
          "median, process spawn to exit), python3/modelprof >= %gx (median commands), peak RSS "
          "<= 64 MB with inline weights (resnet50, bert_inline)" % TARGET_RATIO)
    if not args.baseline_only:
        print("verdict: %s" % ("PASS" if all_pass and not failed else "FAIL"))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "spawn_floor": floor, "failed": failed}, f, indent=1)
    if failed:
        print("failed: %s" % ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
