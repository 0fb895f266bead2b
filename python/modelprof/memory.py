"""Record the CUDA caching allocator's memory history around a block of code, dump the
snapshot and read it with the library (issue 32):

    import modelprof.memory
    with modelprof.memory.record(model=model) as rec:   # path=None: a temporary file
        train_a_few_steps()
    print(rec.report["memory"]["devices"][0]["peak_requested_bytes"])
    rec.path   # the snapshot (kept when `path` was given)

The snapshot is dumped even when the block raises (an out-of-memory error is what one most
often wants to read), then the exception goes on. Nothing is counted here: the report comes
from the library through `modelprof.memory_report` (the same as `modelprof memory FILE`).

Each PyTorch's API, read from its torch/cuda/memory.py:
  - 2.1 and later: `_record_memory_history(enabled="all", context="all", stacks=..., max_entries=...)`;
    off with `enabled=None`; `_dump_snapshot(path)`.
  - 2.0: `_record_memory_history(enabled: bool, record_context=True, trace_alloc_max_entries=1,
    trace_alloc_record_context=False, device=None, record_context_cpp=False)`; off with `False`;
    the dict of `_snapshot()` pickled here (2.0 has no `_dump_snapshot`).
  - 1.13: `_record_memory_history(enabled: bool, device=None)` keeps a history per block and no
    event list: the snapshot (the list of `memory_snapshot()`) shows the end state only.
The version is told from the function's signature, not from version strings.

Module paths (`model.layers.3.mlp`) on the holders, where PyTorch lets a snapshot carry them:
  - PyTorch with `torch.cuda.memory._set_memory_metadata(str)` (recent releases): forward hooks
    set the running module's path; every trace event made by that thread carries it as
    `user_metadata`. The metadata is thread-local: allocations made by autograd's backward
    threads carry it only with `backward_paths=True` (full backward hooks set it there too; they
    wrap each module's outputs, which some in-place code refuses).
  - otherwise, from 2.5 on: record_function ranges "nn.Module: PATH" opened by the same hooks
    land in the snapshot's `external_annotations` (START/END with time_us; from every thread when
    `_record_memory_history` takes `global_record_annotations`); events are matched to the
    innermost range open at their time_us.
  - before that (2.0-2.4, 1.13) a snapshot has no field for it: holders read as file:line only.
Blocks allocated before recording started (parameters of a model built earlier) carry no path.
"""
import contextlib
import inspect
import json
import os
import pickle
import sys
import tempfile
import warnings

from ._lib import ModelprofError

# tests put a stand-in for torch.cuda.memory here (tests/python/test_memory.py)
_api_module = None


def _memory_api():
    if _api_module is not None:
        return _api_module
    import torch
    if not torch.cuda.is_available():
        raise ModelprofError("modelprof.memory.record: CUDA is not available: memory history "
                             "records the CUDA caching allocator (on a machine without a GPU "
                             "read an existing snapshot with modelprof.memory_report(path))")
    import torch.cuda.memory
    return torch.cuda.memory


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def api_version(mem):
    """'2.1+', '2.0' or '1.13', from _record_memory_history's signature."""
    p = _params(mem._record_memory_history)
    if "max_entries" in p or "stacks" in p:
        return "2.1+"
    if "trace_alloc_max_entries" in p:
        return "2.0"
    return "1.13"


class Recorder:
    """What `record` returns: .path (the snapshot), .report (the library's report: a dict for
    format="json", else text), .api ('2.1+', '2.0', '1.13'), .module_paths ('user_metadata',
    'external_annotations' or None), .error (why no report, when the block raised)."""

    def __init__(self, path=None, max_entries=1000000, stacks="python", model=None, name="model",
                 device=None, format="json", stack=None, backward_paths=False):
        if stacks not in ("python", "all"):
            raise ValueError("stacks: 'python' (Python frames) or 'all' (Python and C++), not %r" % (stacks,))
        if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 1:
            raise ValueError("max_entries: a positive integer (events kept in the ring), not %r" % (max_entries,))
        self.path = path
        self._keep = path is not None
        self.max_entries = max_entries
        self.stacks = stacks
        self.model = model
        self.name = name
        self.device = device
        self.format = format
        self.stack = stack
        self.backward_paths = backward_paths
        self.report = None
        self.error = None
        self.api = None
        self.module_paths = None
        self._mem = None
        self._hooks = []
        self._on = False

    # ---- recording ----
    def _start(self):
        mem = self._mem = _memory_api()
        self.api = api_version(mem)
        rec = mem._record_memory_history
        p = _params(rec)
        kw = {}
        if self.device is not None and "device" in p:
            kw["device"] = self.device
        if self.api == "2.1+":
            if "global_record_annotations" in p and self.model is not None:
                kw["global_record_annotations"] = True
            rec(enabled="all", context="all", stacks=self.stacks, max_entries=self.max_entries, **kw)
        elif self.api == "2.0":
            if "record_context_cpp" in p:
                kw["record_context_cpp"] = self.stacks == "all"
            rec(True, record_context=True, trace_alloc_max_entries=self.max_entries,
                trace_alloc_record_context=True, **kw)
        else:
            warnings.warn("modelprof.memory.record: this PyTorch (1.13) keeps a history per block "
                          "and no event list: the report shows the end state as the peak; "
                          "PyTorch 2.1 or later records every alloc and free", stacklevel=3)
            rec(True, **kw)
        self._on = True

    def _stop(self):
        if not self._on:
            return
        self._on = False
        rec = self._mem._record_memory_history
        kw = {"device": self.device} if self.device is not None and "device" in _params(rec) else {}
        if self.api == "2.1+":
            rec(enabled=None, **kw)
        else:
            rec(False, **kw)

    def _dump(self):
        mem = self._mem
        if self.path is None:
            fd, self.path = tempfile.mkstemp(prefix="modelprof-memory-", suffix=".pickle")
            os.close(fd)
        if hasattr(mem, "_dump_snapshot"):
            mem._dump_snapshot(self.path)
            return
        snap = mem._snapshot() if hasattr(mem, "_snapshot") else mem.memory_snapshot()
        with open(self.path, "wb") as f:
            pickle.dump(snap, f)

    # ---- module paths ----
    def _install_hooks(self):
        model = self.model
        if model is None:
            return
        mem = self._mem
        setter = getattr(mem, "_set_memory_metadata", None)
        p = _params(mem._record_memory_history)
        if setter is not None:
            self.module_paths = "user_metadata"
        elif "global_record_annotations" in p or "clear_history" in p:
            # the releases whose snapshots carry `external_annotations` (2.5 on) are the ones
            # whose _record_memory_history takes clear_history / global_record_annotations
            self.module_paths = "external_annotations"
        else:
            return
        paths = {m: (self.name + "." + n if n else self.name) for n, m in model.named_modules()}
        stack = []
        ranges = []

        def enter(m, *_):
            path = paths.get(m, type(m).__name__)
            stack.append(path)
            if setter is not None:
                setter(path)
            else:
                import torch
                rf = torch.autograd.profiler.record_function("nn.Module: " + path)
                rf.__enter__()
                ranges.append(rf)

        def leave(m, *_):
            if stack:
                stack.pop()
            if setter is not None:
                setter(stack[-1] if stack else "")
            elif ranges:
                ranges.pop().__exit__(None, None, None)

        for m in paths:
            self._hooks.append(m.register_forward_pre_hook(enter))
            self._hooks.append(m.register_forward_hook(leave))
        if self.backward_paths and setter is not None and hasattr(model, "register_full_backward_pre_hook"):
            bstack = []

            def benter(m, grad_out):
                bstack.append(paths.get(m, ""))
                setter(bstack[-1])

            def bleave(m, grad_in, grad_out):
                if bstack:
                    bstack.pop()
                setter(bstack[-1] if bstack else "")

            for m in paths:
                self._hooks.append(m.register_full_backward_pre_hook(benter))
                self._hooks.append(m.register_full_backward_hook(bleave))
        self._ranges = ranges
        self._setter = setter

    def _remove_hooks(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for rf in reversed(getattr(self, "_ranges", [])):
            rf.__exit__(None, None, None)
        self._ranges = []
        if getattr(self, "_setter", None) is not None:
            self._setter("")

    # ---- the report ----
    def _report(self):
        pkg = sys.modules[__package__]
        fn = getattr(pkg, "memory_report", None)
        if fn is None:
            raise ModelprofError("modelprof.memory_report is not in this build of modelprof (it "
                                 "comes with `modelprof memory`, issue 32): the snapshot is at %s; "
                                 "read it with `modelprof memory %s` once built" % (self.path, self.path))
        kw = {"format": self.format}
        if self.device is not None:
            kw["device"] = self.device if isinstance(self.device, int) else getattr(self.device, "index", None)
        if self.stack is not None:
            kw["stack"] = self.stack
        out = fn(self.path, **kw)
        if self.format == "json" and isinstance(out, (str, bytes)):
            out = json.loads(out)
        return out

    def __enter__(self):
        self._start()
        try:
            self._install_hooks()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self._remove_hooks()
        try:
            self._dump()
        finally:
            self._stop()
        try:
            self.report = self._report()
        except Exception as e:
            if exc_type is None:
                raise
            self.error = e  # the block's own exception goes on
        finally:
            if not self._keep and self.report is not None and self.error is None and os.path.exists(self.path):
                # a temporary snapshot is removed once read; give `path` to keep it
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                self.path = None
        return False


def record(path=None, max_entries=1000000, stacks="python", model=None, name="model", device=None,
           format="json", stack=None, backward_paths=False):
    """A context manager that records memory history with stacks (`stacks`: "python" or "all"
    for C++ frames too), keeps at most `max_entries` events, dumps the snapshot to `path` (a
    temporary file, removed once read, when None) and puts the report in `.report`.
    `model`: an nn.Module whose module paths (`name` + "." + its qualified name) are attached to
    what its forward allocates, where PyTorch allows (see the module's docstring).
    `format`: "json" (a dict), "text", "csv" or "html"; `stack`: "full" for whole stacks."""
    return Recorder(path=path, max_entries=max_entries, stacks=stacks, model=model, name=name,
                    device=device, format=format, stack=stack, backward_paths=backward_paths)
