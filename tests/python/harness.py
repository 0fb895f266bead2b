"""The Python test scripts' harness (tests/python/run.py, test_memory.py):
a registry of test functions, `check`, and the loop that runs them and
prints "ok"/"FAIL" lines and "N passed, N failed"."""
import time
import traceback


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class Suite:
    """`prefix` goes before each test's name in the lines; `timed` adds
    each passing test's seconds."""

    def __init__(self, prefix="", timed=False):
        self.tests, self.prefix, self.timed = [], prefix, timed

    def test(self, f):
        self.tests.append(f)
        return f

    def run(self, flt=""):
        """Runs the tests whose name contains flt; 1 when any failed."""
        passed = failed = 0
        for t in self.tests:
            if flt not in t.__name__:
                continue
            name = self.prefix + t.__name__
            t0 = time.time()
            try:
                t()
            except Fail as e:
                failed += 1
                print("FAIL %s: %s" % (name, e))
                continue
            except Exception:
                failed += 1
                print("FAIL %s:\n%s" % (name, traceback.format_exc()))
                continue
            passed += 1
            print("ok   %s%s" % (name, " (%.1f s)" % (time.time() - t0) if self.timed else ""))
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0
