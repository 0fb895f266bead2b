#!/usr/bin/python3
"""modelprof.memory.record without a GPU: torch.cuda.memory is replaced by stand-ins with the
signatures of PyTorch 2.1+, 2.0 and 1.13 (read from their torch/cuda/memory.py), and the test
checks the calls each gets, the snapshot written, the module paths set by the forward hooks
(on this machine's CPU torch), the report handed over by modelprof.memory_report, and what
happens when the block raises or the binding is missing. Prints "N passed, N failed".

  tests/python/test_memory.py [FILTER]"""
import json
import os
import pickle
import shutil
import sys
import tempfile
import warnings

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import modelprof  # noqa: E402
import modelprof.memory as mm  # noqa: E402

SNAP = os.path.join(ROOT, "tests", "snapshots", "v22_train_adam.pickle")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Fail, Suite, check  # noqa: E402,F401

SUITE = Suite()
test = SUITE.test


def fake_snapshot():
    with open(SNAP, "rb") as f:
        return pickle.load(f)


class Api21:
    """torch/cuda/memory.py of 2.1 and later (2.5+ adds clear_history, compile_context,
    global_record_annotations, skip_actions)."""

    def __init__(self, metadata=False, annotations=False):
        self.calls = []
        self.meta = []
        if metadata:
            self._set_memory_metadata = self._set_meta
        if annotations:
            def _record_memory_history(enabled="all", context="all", stacks="all",
                                       max_entries=sys.maxsize, device=None, clear_history=False,
                                       compile_context=False, global_record_annotations=False,
                                       skip_actions=None):
                self.calls.append(("record", enabled, dict(context=context, stacks=stacks,
                                   max_entries=max_entries, device=device,
                                   global_record_annotations=global_record_annotations)))
            self._record_memory_history = _record_memory_history

    def _record_memory_history(self, enabled="all", context="all", stacks="all",
                               max_entries=sys.maxsize, device=None):
        self.calls.append(("record", enabled, dict(context=context, stacks=stacks,
                           max_entries=max_entries, device=device)))

    def _dump_snapshot(self, filename="dump_snapshot.pickle"):
        self.calls.append(("dump", filename))
        shutil.copyfile(SNAP, filename)

    def _set_meta(self, s):
        self.meta.append(s)


class Api20:
    """torch/cuda/memory.py of 2.0: no _dump_snapshot; _snapshot() returns the dict."""

    def __init__(self):
        self.calls = []

    def _record_memory_history(self, enabled, record_context=True, trace_alloc_max_entries=1,
                               trace_alloc_record_context=False, device=None, record_context_cpp=False):
        self.calls.append(("record", enabled, dict(record_context=record_context,
                           trace_alloc_max_entries=trace_alloc_max_entries,
                           trace_alloc_record_context=trace_alloc_record_context,
                           record_context_cpp=record_context_cpp)))

    def _snapshot(self, device=None):
        self.calls.append(("snapshot",))
        return fake_snapshot()


class Api113:
    """torch/cuda/memory.py of 1.13 (this machine's): _record_memory_history(enabled, device);
    memory_snapshot() returns the list of segments."""

    def __init__(self):
        self.calls = []

    def _record_memory_history(self, enabled, device=None):
        self.calls.append(("record", enabled))

    def memory_snapshot(self):
        self.calls.append(("memory_snapshot",))
        return [{"device": 0, "address": 0, "total_size": 2097152, "allocated_size": 512,
                 "active_size": 512, "segment_type": "small",
                 "blocks": [{"size": 512, "state": "active_allocated",
                             "history": [{"addr": 0, "real_size": 100, "frames": []}]},
                            {"size": 2097152 - 512, "state": "inactive"}]}]


class Binding:
    """A stand-in for modelprof.memory_report (MEM's binding): records its arguments and
    returns JSON text made from the snapshot it is given."""

    def __init__(self):
        self.calls = []

    def __call__(self, path, format="json", device=None, stack=None):
        self.calls.append((path, format, device, stack))
        with open(path, "rb") as f:
            data = pickle.load(f)
        n = len(data["segments"]) if isinstance(data, dict) else len(data)
        return json.dumps({"memory": {"devices": [{"device": 0, "segments": n}]}})


class patched:
    def __init__(self, api, binding=True):
        self.api = api
        self.binding = Binding() if binding else None

    def __enter__(self):
        self.old_api = mm._api_module
        self.had = hasattr(modelprof, "memory_report")
        self.old_binding = getattr(modelprof, "memory_report", None)
        mm._api_module = self.api
        if self.binding is not None:
            modelprof.memory_report = self.binding
        elif self.had:
            del modelprof.memory_report
        return self

    def __exit__(self, *exc):
        mm._api_module = self.old_api
        if self.had:
            modelprof.memory_report = self.old_binding
        elif hasattr(modelprof, "memory_report"):
            del modelprof.memory_report
        return False


def tmp_leftovers():
    return set(f for f in os.listdir(tempfile.gettempdir()) if f.startswith("modelprof-memory-"))


@test
def api_21_calls():
    api = Api21()
    before = tmp_leftovers()
    with patched(api) as p:
        with mm.record(max_entries=123456, stacks="python") as rec:
            pass
    check(rec.api == "2.1+", "api %r" % rec.api)
    check(api.calls[0] == ("record", "all", dict(context="all", stacks="python", max_entries=123456, device=None)),
          "enable call %r" % (api.calls[0],))
    check(api.calls[1][0] == "dump", "dump %r" % (api.calls[1],))
    check(api.calls[2] == ("record", None, dict(context="all", stacks="all", max_entries=sys.maxsize, device=None)),
          "disable call (enabled=None) %r" % (api.calls[2],))
    check(len(api.calls) == 3, "calls %r" % api.calls)
    n = len(fake_snapshot()["segments"])
    check(rec.report == {"memory": {"devices": [{"device": 0, "segments": n}]}}, "report (parsed JSON) %r" % rec.report)
    check(p.binding.calls[0][1] == "json", "binding format %r" % (p.binding.calls,))
    check(tmp_leftovers() == before, "temporary snapshot left: %s" % (tmp_leftovers() - before))
    check(rec.path is None, "path of a removed temporary snapshot %r" % rec.path)


@test
def api_21_stacks_all_and_path_kept():
    api = Api21()
    d = tempfile.mkdtemp(prefix="mp-memtest-")
    try:
        path = os.path.join(d, "snap.pickle")
        with patched(api):
            with mm.record(path=path, stacks="all", format="text") as rec:
                pass
        check(api.calls[0][2]["stacks"] == "all", "stacks %r" % (api.calls[0],))
        check(api.calls[1] == ("dump", path), "dump %r" % (api.calls[1],))
        check(os.path.exists(path) and rec.path == path, "snapshot kept at the given path")
        check(isinstance(rec.report, str), "text report is a string")
    finally:
        shutil.rmtree(d)


@test
def api_20_calls():
    api = Api20()
    d = tempfile.mkdtemp(prefix="mp-memtest-")
    try:
        path = os.path.join(d, "snap.pickle")
        with patched(api):
            with mm.record(path=path, max_entries=5000) as rec:
                pass
        check(rec.api == "2.0", "api %r" % rec.api)
        check(api.calls[0] == ("record", True, dict(record_context=True, trace_alloc_max_entries=5000,
                                                    trace_alloc_record_context=True, record_context_cpp=False)),
              "enable call %r" % (api.calls[0],))
        check(api.calls[1] == ("snapshot",), "2.0 has no _dump_snapshot: _snapshot() %r" % (api.calls[1],))
        check(api.calls[2][:2] == ("record", False), "disable %r" % (api.calls[2],))
        with open(path, "rb") as f:
            check(pickle.load(f) == fake_snapshot(), "the dict of _snapshot() pickled")
    finally:
        shutil.rmtree(d)


@test
def api_20_cpp_stacks():
    api = Api20()
    with patched(api):
        with mm.record(stacks="all"):
            pass
    check(api.calls[0][2]["record_context_cpp"] is True, "record_context_cpp %r" % (api.calls[0],))


@test
def api_113_calls():
    api = Api113()
    with patched(api):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with mm.record() as rec:
                pass
    check(rec.api == "1.13", "api %r" % rec.api)
    check(api.calls == [("record", True), ("memory_snapshot",), ("record", False)], "calls %r" % api.calls)
    check(any("no event list" in str(x.message) for x in w), "warning about 1.13: %r" % [str(x.message) for x in w])
    check(rec.report["memory"]["devices"][0]["segments"] == 1, "report of the bare list %r" % rec.report)


@test
def api_113_real_signature():
    """This machine's torch 1.13: its _record_memory_history reads as the 1.13 API."""
    import torch.cuda.memory as real
    check(mm.api_version(real) == "1.13", "api_version(torch 1.13) = %r" % mm.api_version(real))


@test
def no_cuda_fails_clearly():
    """This machine's torch has no CUDA: record() says so before touching anything."""
    check(mm._api_module is None, "no stand-in left installed")
    try:
        with mm.record():
            raise Fail("the block ran without CUDA")
    except modelprof.ModelprofError as e:
        check("CUDA is not available" in str(e), "message %r" % str(e))


@test
def block_raises_snapshot_still_dumped():
    api = Api21()
    with patched(api) as p:
        rec = mm.record()
        try:
            with rec:
                raise MemoryError("CUDA out of memory (simulated)")
        except MemoryError:
            pass
        else:
            raise Fail("the block's exception was swallowed")
    check([c[0] for c in api.calls] == ["record", "dump", "record"], "calls %r" % api.calls)
    check(api.calls[-1][1] is None, "recording stopped")
    check(rec.report is not None and len(p.binding.calls) == 1, "report made after the exception")


@test
def missing_binding_fails_clearly():
    api = Api21()
    d = tempfile.mkdtemp(prefix="mp-memtest-")
    try:
        path = os.path.join(d, "snap.pickle")
        with patched(api, binding=False):
            try:
                with mm.record(path=path):
                    pass
            except modelprof.ModelprofError as e:
                msg = str(e)
            else:
                raise Fail("no error without modelprof.memory_report")
        check("memory_report" in msg and path in msg, "message %r" % msg)
        check(os.path.exists(path), "the snapshot is kept for `modelprof memory`")
        check(api.calls[-1][1] is None, "recording stopped")
    finally:
        shutil.rmtree(d)


@test
def real_binding_report():
    """With the library's own modelprof.memory_report (no stand-in binding): the report of the
    dumped snapshot equals tools/snapshot_ref.py's replay."""
    if not hasattr(modelprof, "memory_report"):
        raise Fail("modelprof.memory_report is not in this build")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import snapshot_ref
    api = Api21()
    old = mm._api_module
    mm._api_module = api
    try:
        with mm.record() as rec:
            pass
        with mm.record(format="text") as text:
            pass
    finally:
        mm._api_module = old
    ref = snapshot_ref.reference(SNAP, warn=lambda m: None)
    diffs = snapshot_ref.compare(ref, rec.report)
    check(not diffs, "report against the reference: %s" % diffs[:3])
    check(isinstance(text.report, str) and text.report.strip(), "text report")


@test
def bad_arguments():
    for kw in (dict(stacks="cpp"), dict(max_entries=0), dict(max_entries=True), dict(max_entries=1.5)):
        try:
            mm.record(**kw)
        except ValueError:
            continue
        raise Fail("record(%r) accepted" % kw)


def _model():
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(self.fc(x))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([MLP(), MLP()])
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.head(x)
    return Net()


@test
def module_paths_metadata():
    import torch
    api = Api21(metadata=True)
    model = _model()
    with patched(api):
        with mm.record(model=model) as rec:
            model(torch.ones(3, 4))
    check(rec.module_paths == "user_metadata", "module_paths %r" % rec.module_paths)
    seq = api.meta
    for p in ("model", "model.layers.0", "model.layers.0.fc", "model.layers.1.act", "model.head"):
        check(p in seq, "%s set (%r)" % (p, seq))
    i = seq.index("model.layers.0.fc")
    check(seq[i + 1] == "model.layers.0", "back to the parent after fc: %r" % seq[i:i + 3])
    check(seq[-1] == "", "metadata cleared at the end: %r" % seq[-3:])
    n = len(seq)
    model(torch.ones(3, 4))
    check(len(api.meta) == n, "hooks removed after the block")


@test
def module_paths_annotations():
    """No _set_memory_metadata: record_function ranges "nn.Module: PATH" (external_annotations),
    and global_record_annotations=True where the signature has it."""
    import torch
    api = Api21(annotations=True)
    model = _model()
    names = []
    orig = torch.autograd.profiler.record_function

    class RF(orig):
        def __init__(self, name, *a, **k):
            names.append(name)
            super().__init__(name, *a, **k)
    torch.autograd.profiler.record_function = RF
    try:
        with patched(api):
            with mm.record(model=model) as rec:
                model(torch.ones(3, 4))
    finally:
        torch.autograd.profiler.record_function = orig
    check(rec.module_paths == "external_annotations", "module_paths %r" % rec.module_paths)
    check(api.calls[0][2]["global_record_annotations"] is True, "global_record_annotations %r" % (api.calls[0],))
    check("nn.Module: model.layers.1.fc" in names, "ranges %r" % names)


@test
def module_paths_none_21_to_24():
    """2.1-2.4 (no clear_history/global_record_annotations, no _set_memory_metadata): no field."""
    import torch
    api = Api21()
    model = _model()
    with patched(api):
        with mm.record(model=model) as rec:
            model(torch.ones(3, 4))
    check(rec.module_paths is None, "2.1-2.4 have no field for module paths: %r" % rec.module_paths)


@test
def module_paths_none_before_25():
    import torch
    api = Api20()
    model = _model()
    with patched(api):
        with mm.record(model=model) as rec:
            model(torch.ones(3, 4))
    check(rec.module_paths is None, "2.0 has no field for module paths: %r" % rec.module_paths)


def main(argv):
    return SUITE.run(argv[1] if len(argv) > 1 else "")

if __name__ == "__main__":
    sys.exit(main(sys.argv))
