#!/usr/bin/python3
"""Acceptance check of `modelprof memory` against the reference replay (issue 32):

  tools/memory_check.py [--modelprof build/modelprof] [--shared ../shared/fixtures/snapshots] [FILTER]

- every snapshot in tests/snapshots/ (and the shared real ones): `modelprof memory F --format
  json` equals NAME.ref.json field by field (devices, events by action, peak requested bytes and
  event, peak reserved, end requested/allocated/reserved, the ten largest live at the peak); a
  reference {"exit": 2} means the command must exit 2 with a message;
- every file in tests/snapshots/hostile/: exit status 2, a message on stderr, no signal, no
  hang (10 s), and /tmp/modelprof-hostile-ran never created (nothing named in a pickle runs).
With --sweep: also 120 damaged copies of each small snapshot (truncated, a byte changed, a run
of bytes replaced; seeded, the same every time): each must exit 0, or 2 with a message, within
10 s and without a signal.
Prints one line per file and a summary; exit 1 on any failure, or when `modelprof memory` is
not in the build (with a message).
"""
import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import snapshot_ref  # noqa: E402

MARK = "/tmp/modelprof-hostile-ran"


def run(modelprof, path):
    try:
        p = subprocess.run([modelprof, "memory", path, "--format", "json"], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return None, b"", b"timed out after 10 s"
    return p.returncode, p.stdout, p.stderr


def ref_path(path):
    base = os.path.basename(path)
    for ext in (".pickle.gz", ".pickle"):
        if base.endswith(ext):
            base = base[:-len(ext)]
    return os.path.join(ROOT, "tests", "snapshots", base + ".ref.json")


def damaged(data, rnd):
    for k in range(40):
        yield "cut at %d" % (k,), data[:rnd.randrange(len(data))]
    for k in range(60):
        b = bytearray(data)
        i = rnd.randrange(len(b))
        b[i] = rnd.randrange(256)
        yield "byte %d changed" % i, bytes(b)
    for k in range(20):
        b = bytearray(data)
        i = rnd.randrange(len(b))
        j = rnd.randrange(i, min(len(b), i + 64))
        b[i:j] = bytes(rnd.randrange(256) for _ in range(j - i))
        yield "bytes %d-%d replaced" % (i, j), bytes(b)


def sweep(modelprof, flt):
    rnd = random.Random(1)
    fails = n = 0
    files = sorted(f for f in glob.glob(os.path.join(ROOT, "tests", "snapshots", "*.pickle"))
                   if os.path.getsize(f) < 40000 and flt in os.path.basename(f))
    with tempfile.TemporaryDirectory(prefix="mp-memsweep-") as d:
        p = os.path.join(d, "damaged.pickle")
        for f in files:
            with open(f, "rb") as fh:
                data = fh.read()
            for what, b in damaged(data, rnd):
                with open(p, "wb") as fh:
                    fh.write(b)
                code, _, err = run(modelprof, p)
                n += 1
                if code not in (0, 2) or (code == 2 and not err.strip()):
                    fails += 1
                    print("FAIL sweep %s, %s: exit %s %s" % (os.path.basename(f), what, code,
                                                             err.decode(errors="replace")[:150]))
    print("%s sweep: %d damaged snapshots, %d failed" % ("ok  " if not fails else "FAIL", n, fails))
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "fixtures", "snapshots"))
    ap.add_argument("--sweep", action="store_true", help="damaged copies of the small snapshots too")
    ap.add_argument("filter", nargs="?", default="")
    args = ap.parse_args()
    small = os.path.join(ROOT, "tests", "snapshots", "v22_train_adam.pickle")
    code, _, err = run(args.modelprof, small) if os.access(args.modelprof, os.X_OK) else (None, b"", b"no binary")
    if code != 0:
        print("memory-check: `modelprof memory` is not available in %s (%s): it comes with issue 32's C side"
              % (args.modelprof, err.decode(errors="replace").strip()[:200]), file=sys.stderr)
        return 1
    if os.path.exists(MARK):
        os.unlink(MARK)
    fails = 0
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "snapshots", "*.pickle*")))
    if os.path.isdir(args.shared):
        have = set(os.path.basename(f) for f in files)
        files += sorted(f for f in glob.glob(os.path.join(args.shared, "*.pickle"))
                        if os.path.basename(f) not in have)
    for f in files:
        name = os.path.basename(f)
        if args.filter not in name:
            continue
        rp = ref_path(f)
        if os.path.exists(rp):
            with open(rp, encoding="utf-8") as fh:
                ref = json.load(fh)
        else:
            ref = snapshot_ref.reference(f, warn=lambda m: None)
        code, out, err = run(args.modelprof, f)
        if "exit" in ref:
            ok = code == ref["exit"] and err.strip()
            why = "exit %s, %s" % (code, err.decode(errors="replace").strip()[:100])
        elif code != 0:
            ok, why = False, "exit %s: %s" % (code, err.decode(errors="replace").strip()[:200])
        else:
            try:
                diffs = snapshot_ref.compare(ref, json.loads(out))
            except ValueError as e:
                diffs = ["output is not JSON: %s" % e]
            ok, why = not diffs, "; ".join(diffs[:4]) or "equal"
        fails += not ok
        print("%s %-60s %s" % ("ok  " if ok else "FAIL", name[:60], why))
    for f in sorted(glob.glob(os.path.join(ROOT, "tests", "snapshots", "hostile", "*"))):
        name = os.path.basename(f)
        if name.endswith(".md") or args.filter not in name:
            continue
        code, out, err = run(args.modelprof, f)
        msg = err.decode(errors="replace").strip()
        ok = code == 2 and bool(msg)
        fails += not ok
        print("%s hostile/%-52s exit %s: %s" % ("ok  " if ok else "FAIL", name[:52], code, msg[:110]))
    if args.sweep:
        fails += sweep(args.modelprof, args.filter)
    if os.path.exists(MARK):
        print("FAIL %s exists: a hostile pickle ran a command" % MARK)
        fails += 1
    print("memory-check: %s" % ("all passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
