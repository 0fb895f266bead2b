#!/usr/bin/env python3
"""modelprof.memory_report (the binding over mp_memory_report_file): the same
figures as `modelprof memory --format json`, each format, a device, a hostile
file refused with the opcode named. Run by `make pytest-ish`."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import modelprof  # noqa: E402

SNAP = os.path.join(ROOT, "tests", "snapshots", "v25_multidev_oom.pickle")


def main():
    build = sys.argv[sys.argv.index("--build") + 1] if "--build" in sys.argv else os.path.join(ROOT, "build")
    j = json.loads(modelprof.memory_report(SNAP))
    cli = json.loads(subprocess.run([os.path.join(build, "modelprof"), "memory", "--format", "json", SNAP],
                                    check=True, capture_output=True, text=True).stdout)
    assert j["memory"]["devices"] == cli["memory"]["devices"], "binding and command differ"
    assert [d["device"] for d in j["memory"]["devices"]] == [0, 2]
    one = json.loads(modelprof.memory_report(SNAP, device=2, stack="full", top=3))
    assert [d["device"] for d in one["memory"]["devices"]] == [2]
    assert len(one["memory"]["devices"][0]["top_at_peak"]) == 3 and "stack" in one["memory"]["devices"][0]["top_at_peak"][0]
    assert "Device 2" in modelprof.memory_report(SNAP, format="text", device=2)
    assert modelprof.memory_report(SNAP, format="csv", csv_table="sites").startswith("device,bytes,")
    assert "<canvas" in modelprof.memory_report(SNAP, format="html") or "mp-timeline" in modelprof.memory_report(SNAP, format="html")
    try:
        modelprof.memory_report(os.path.join(ROOT, "tests", "snapshots", "hostile", "global_reduce.pickle"))
        raise AssertionError("a pickle naming a function was read")
    except modelprof.ModelprofError as e:
        assert "GLOBAL" in str(e) and "byte offset" in str(e), e
    try:
        modelprof.memory_report(SNAP, format="xml")
        raise AssertionError("format xml accepted")
    except ValueError:
        pass
    print("memory_report: 7 checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
