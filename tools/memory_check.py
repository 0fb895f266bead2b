#!/usr/bin/python3
"""Acceptance check of `modelprof memory` against the reference replay (issue 32):

  tools/memory_check.py [--modelprof build/modelprof] [--shared ../shared/fixtures/snapshots] [FILTER]

- every snapshot in tests/snapshots/ (and the shared real ones): `modelprof memory F --format
  json` equals NAME.ref.json field by field (devices, events by action, peak requested bytes and
  event, peak reserved, end requested/allocated/reserved, the ten largest live at the peak); a
  reference {"exit": 2} means the command must exit 2 with a message;
- every file in tests/snapshots/hostile/: exit status 2, a message on stderr, no signal, no
  hang (10 s), and /tmp/modelprof-hostile-ran never created (nothing named in a pickle runs).
Prints one line per file and a summary; exit 1 on any failure, or when `modelprof memory` is
not in the build (with a message).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "fixtures", "snapshots"))
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
    if os.path.exists(MARK):
        print("FAIL %s exists: a hostile pickle ran a command" % MARK)
        fails += 1
    print("memory-check: %s" % ("all passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
