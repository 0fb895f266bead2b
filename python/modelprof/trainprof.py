"""FlopsProfiler: DeepSpeed's in-training profiler API, measured by
torch.profiler on real steps and analysed by the library's trace analysis.

Forward and backward ranges per module (docs/JSON.md, "Module ranges"):
  "nn.Module: Class_K"           forward hooks (pre: enter, post: exit)
  "nn.Module.backward: Class_K"  entered when the first gradient reaches one
                                 of the module's outputs (a tensor hook on
                                 each output), left when the gradients of its
                                 inputs are complete (a tensor hook on each
                                 input), or at the end of backward for inputs
                                 that need no gradient (the data, token ids)
The ranges are written on every PyTorch (with Kineto too, instead of its
with_modules scopes: one naming for both trees).
FLOPs, MACs and params come from the library's static profile of the same
model (exported to ONNX with the first recorded call's inputs), module by
module; times from the trace. Nothing is counted here."""
import os
import shutil
import sys
import tempfile

import torch

from . import _lib, torchprof
from ._lib import ModelprofError


def _labels(model):
    """name -> "Class_K" (K counts modules of one class in named_modules order)."""
    counts, out = {}, {}
    for name, m in model.named_modules():
        cls = type(m).__name__
        out[name] = "%s_%d" % (cls, counts.get(cls, 0))
        counts[cls] = counts.get(cls, 0) + 1
    return out


def _trace_paths(model, labels):
    """name -> the module's path in the trace's module tree (labels joined by '.')."""
    out = {}
    for name, _ in model.named_modules():
        parts = name.split(".") if name else []
        chain = [labels[""]] + [labels[".".join(parts[:i + 1])] for i in range(len(parts))]
        out[name] = ".".join(chain)
    return out


class _Ranges:
    """The open record_function ranges, closed innermost first."""

    def __init__(self):
        self.stack = []   # [state]

    def enter(self, name):
        rf = torch.autograd.profiler.record_function(name)
        rf.__enter__()
        st = {"rf": rf, "open": True}
        self.stack.append(st)
        return st

    def exit(self, st):
        if not st["open"]:
            return
        # a range left while ranges opened after it are open: close those first
        while self.stack:
            top = self.stack.pop()
            if top["open"]:
                top["open"] = False
                top["rf"].__exit__(None, None, None)
            if top is st:
                break

    def close_all(self):
        while self.stack:
            self.exit(self.stack[-1])


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def _slot(t):
    """One gradient hook per tensor, shared by the modules that produce or
    consume it: when its gradient is ready, the ranges of the modules it
    leaves (consumers, innermost first) close, then those it enters
    (producers, outermost first) open."""
    slot = getattr(t, "_modelprof_bwd", None)
    if slot is None:
        slot = {"enter": [], "leave": []}
        t._modelprof_bwd = slot

        def fire(grad):
            for f in reversed(slot["leave"]):
                f()
            for f in reversed(slot["enter"]):
                f()
            return None
        if t.grad_fn is not None or t.is_leaf:
            t.register_hook(fire)
    return slot


class FlopsProfiler:
    """DeepSpeed's FlopsProfiler(model): start_profile(), run training steps
    (forward, backward, optimizer step), stop_profile(), then
    get_total_flops/macs/params/duration and print_model_profile();
    end_profile() removes the hooks. Works on the CPU and on a GPU."""

    def __init__(self, model, ds_engine=None, recompute_fwd_factor=0.0):
        self.model = model
        self.started = False
        self.func_patched = False
        self._prof = None
        self._hooks = []
        self._result = None
        self._args = None
        self._tmp = None

    # ---- recording ----
    def start_profile(self, ignore_list=None):
        if self.started:
            return
        self._result = None
        self._args = None
        self._ranges = _Ranges()
        self._bwd_queued = False
        kineto = torch.autograd.kineto_available() if hasattr(torch.autograd,
                                                               "kineto_available") else False
        self._kineto = kineto
        labels = _labels(self.model)
        ignore = tuple(ignore_list or ())
        for name, m in self.model.named_modules():
            if ignore and isinstance(m, ignore):
                continue
            self._hook(m, labels[name], root=(name == ""))
        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        # the module ranges are ours on every PyTorch (one naming for the
        # forward and backward trees); with Kineto, shapes for its FLOP counts
        kw = dict(activities=acts, record_shapes=kineto)
        self._prof = torch.profiler.profile(**kw)
        self._prof.__enter__()
        self.started = True

    def _hook(self, m, label, root):
        ranges = self._ranges
        fwd_name = "nn.Module: " + label
        bwd_name = "nn.Module.backward: " + label
        calls = []

        def end_of_backward():
            ranges.close_all()
            self._bwd_queued = False

        def pre(mod, inp):
            if root and self._args is None:
                self._args = tuple(t.detach() if isinstance(t, torch.Tensor) else t for t in inp)
            st = {"fwd": ranges.enter(fwd_name), "bwd": None,
                  "inputs": [t for t in _tensors(inp) if t.requires_grad]}
            calls.append(st)

        def post(mod, inp, out):
            if not calls:
                return
            st = calls.pop()
            if st["fwd"] is not None:
                ranges.exit(st["fwd"])
            if not torch.is_grad_enabled():
                return
            outs = [t for t in _tensors(out) if t.requires_grad]
            if not outs:
                return

            def enter():
                if st["bwd"] is None:
                    st["bwd"] = ranges.enter(bwd_name)
                    if not self._bwd_queued:
                        self._bwd_queued = True
                        torch.autograd.Variable._execution_engine.queue_callback(end_of_backward)

            def leave():
                if st["bwd"] is not None:
                    ranges.exit(st["bwd"])

            for t in outs:
                _slot(t)["enter"].append(enter)
            for t in st["inputs"]:
                _slot(t)["leave"].append(leave)

        self._hooks.append(m.register_forward_pre_hook(pre))
        self._hooks.append(m.register_forward_hook(post))

    def stop_profile(self):
        """Stop recording and analyse the trace (steps done so far)."""
        if not self.started:
            return
        self.started = False
        self._ranges.close_all()
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._prof.__exit__(None, None, None)
        tmp = tempfile.mkdtemp(prefix="modelprof-")
        try:
            path = os.path.join(tmp, "trace.json")
            self._prof.export_chrome_trace(path)
            self._trace = torchprof.analyze_trace(path)
            self._static = self._static_profile(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._result = self._combine()

    def end_profile(self):
        if self.started:
            self.stop_profile()
        self._prof = None

    def reset_profile(self):
        self._result = None

    # ---- the figures ----
    def _static_profile(self, tmp):
        if self._args is None:
            return None
        path = os.path.join(tmp, "model.onnx")
        # exported in the mode it trains in (training=PRESERVE)
        torchprof.export_onnx(self.model, self._args, {}, path)
        with _lib.Profile(path) as p:
            return p.json()

    def _combine(self):
        t = self._trace
        mods = t["modules"]
        scale = 1.0 if any("fwd_device_s" in x for x in mods[:1]) else 1e-6
        fkey = "fwd_device_s" if scale == 1.0 else "fwd_device_us"
        bkey = "bwd_device_s" if scale == 1.0 else "bwd_device_us"
        by_path = {x["path"]: x for x in mods}
        labels = _labels(self.model)
        tpaths = _trace_paths(self.model, labels)
        static = {}
        if self._static:
            static = {x["path"]: x for x in self._static["modules"]}
        rows = {}
        for name, m in self.model.named_modules():
            tr = by_path.get(tpaths[name], {})
            st = static.get(name, {})
            calls = tr.get("calls", 0)
            rows[name] = {
                "name": name, "class": type(m).__name__, "label": labels[name],
                "depth": 0 if not name else name.count(".") + 1,
                "calls": calls,
                "fwd_s": tr.get(fkey, 0) * scale, "bwd_s": tr.get(bkey, 0) * scale,
                "params": st.get("params", sum(p.numel() for p in m.parameters())),
                "macs": st.get("macs", 0) * max(calls, 1 if not tr else calls),
                "flops": st.get("flops", 0) * max(calls, 1 if not tr else calls),
            }
        steps = t.get("steps", [])
        return {"rows": rows, "trace": t, "steps": steps,
                "module_time": t.get("module_time", "device")}

    def _need(self):
        if self.started:
            self.stop_profile()
        if self._result is None:
            raise ModelprofError("FlopsProfiler: nothing profiled (call start_profile and "
                                 "run a step first)", "usage")
        return self._result

    def _root(self):
        return self._need()["rows"][""]

    def get_total_flops(self, as_string=False):
        v = self._root()["flops"]
        return torchprof.number_to_string(v) if as_string else v

    def get_total_macs(self, as_string=False):
        v = self._root()["macs"]
        return torchprof.macs_to_string(v) if as_string else v

    def get_total_params(self, as_string=False):
        v = self._root()["params"]
        return torchprof.params_to_string(v) if as_string else v

    def get_total_duration(self, as_string=False):
        """Forward time of the model over the profiled calls (seconds)."""
        v = self._root()["fwd_s"]
        return _dur(v) if as_string else v

    def get_total_backward_duration(self, as_string=False):
        v = self._root()["bwd_s"]
        return _dur(v) if as_string else v

    def get_module_profile(self):
        """Per module (by its name in named_modules): calls, fwd_s, bwd_s,
        params, macs, flops."""
        return self._need()["rows"]

    def print_model_profile(self, profile_step=1, module_depth=-1, top_modules=1,
                            detailed=True, output_file=None):
        r = self._need()
        f = open(output_file, "w", encoding="utf-8") if output_file else sys.stdout
        try:
            _print(f, r, profile_step, module_depth, top_modules, detailed)
        finally:
            if output_file:
                f.close()


def _dur(s):
    if s >= 1:
        return "%s s" % round(s, 2)
    if s >= 1e-3:
        return "%s ms" % round(s * 1e3, 2)
    return "%s us" % round(s * 1e6, 2)


def _rate(flops, s):
    return torchprof.flops_to_string(flops / s) if s > 0 else "?"


def _print(f, r, step, depth, top, detailed):
    rows = r["rows"]
    root = rows[""]
    w = f.write
    where = "CPU" if r["module_time"] == "cpu" else "device"
    calls = max(root["calls"], 1)
    steps = r["steps"]
    wall = sum(s.get("wall_s", s.get("wall_us", 0) * 1e-6) for s in steps)
    opt = sum(s.get("optimizer_s", s.get("optimizer_us", 0) * 1e-6) for s in steps)
    w("-------------------------- modelprof Flops Profiler (DeepSpeed layout) --------------------------\n")
    w("Profile Summary at step %d (%d forward call%s recorded; times are %s time from the trace):\n"
      % (step, root["calls"], "" if root["calls"] == 1 else "s", where))
    w("Notations:\nnumber of parameters (params), number of multiply-accumulate operations(MACs),\n"
      "number of floating-point operations (flops), floating-point operations per second (FLOPS),\n"
      "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
      "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n")
    fwd, bwd = root["fwd_s"] / calls, root["bwd_s"] / calls
    fl = root["flops"] / calls
    w("params per device:                                            %s\n"
      % torchprof.params_to_string(root["params"]))
    w("fwd MACs per device:                                          %s\n"
      % torchprof.macs_to_string(root["macs"] / calls))
    w("fwd flops per device:                                         %s\n"
      % torchprof.number_to_string(fl))
    w("fwd latency:                                                  %s\n" % _dur(fwd))
    w("bwd latency:                                                  %s\n" % _dur(bwd))
    w("fwd FLOPS per device = fwd flops per device / fwd latency:    %s\n" % _rate(fl, fwd))
    w("bwd FLOPS per device = 2 * fwd flops per device / bwd latency: %s\n" % _rate(2 * fl, bwd))
    w("fwd+bwd FLOPS per device = 3 * fwd flops / (fwd+bwd latency): %s\n"
      % _rate(3 * fl, fwd + bwd))
    if steps and wall > 0:
        # ProfilerStep ranges when the loop called prof.step(); else the
        # whole trace holds the profiled calls
        whole = len(steps) == 1 and not str(steps[0].get("name", "")).startswith("ProfilerStep")
        n = calls if whole else len(steps)
        w("step latency (optimizer):                                     %s\n" % _dur(opt / n))
        w("iter latency (profiled step, wall):                           %s\n" % _dur(wall / n))
    w("\n----------------------------- Aggregated Profile per device -----------------------------\n")
    w("Top modules in terms of params, MACs or fwd latency at different model depths\n"
      "(MACs and latencies summed over the %d profiled calls):\n" % root["calls"])
    maxd = max(x["depth"] for x in rows.values())
    for d in range(0, maxd + 1 if depth < 0 else min(depth, maxd) + 1):
        agg = {}
        for x in rows.values():
            if x["depth"] != d:
                continue
            a = agg.setdefault(x["class"], [0, 0, 0.0, 0.0])
            a[0] += x["params"]
            a[1] += x["macs"]
            a[2] += x["fwd_s"]
            a[3] += x["bwd_s"]
        k = top if top >= 0 else len(agg)

        def best(i, fmt):
            items = sorted(agg.items(), key=lambda kv: -kv[1][i])[:k]
            return "{" + ", ".join("'%s': '%s'" % (c, fmt(v[i])) for c, v in items) + "}"
        w("depth %d:\n" % d)
        w("    params      - %s\n" % best(0, torchprof.params_to_string))
        w("    MACs        - %s\n" % best(1, torchprof.macs_to_string))
        w("    fwd latency - %s\n" % best(2, _dur))
        w("    bwd latency - %s\n" % best(3, _dur))
    if detailed:
        w("\n------------------------------ Detailed Profile per device ------------------------------\n")
        w("Figures summed over the %d profiled calls. " % root["calls"])
        w("Each module profile is listed after its name in the following order:\n"
          "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
          "percentage of total fwd latency, bwd latency, percentage of total bwd latency, "
          "fwd FLOPS\n\n")
        tot = root

        def pct(a, b):
            return "%.2f%%" % (100.0 * a / b) if b else "0%"

        def line(x, ind):
            return ("%s(%s): %s(%s, %s Params, %s, %s MACs, %s, %s fwd latency, %s, %s bwd "
                    "latency, %s)" % (
                        ind, x["name"].split(".")[-1] or x["class"], x["class"],
                        torchprof.params_to_string(x["params"]), pct(x["params"], tot["params"]),
                        torchprof.macs_to_string(x["macs"]), pct(x["macs"], tot["macs"]),
                        _dur(x["fwd_s"]), pct(x["fwd_s"], tot["fwd_s"]),
                        _dur(x["bwd_s"]), pct(x["bwd_s"], tot["bwd_s"]),
                        _rate(x["flops"], x["fwd_s"])))
        for name in rows:
            x = rows[name]
            if depth >= 0 and x["depth"] > depth:
                continue
            w(line(x, "  " * x["depth"]) + "\n")
    w("------------------------------------------------------------------------------------------\n")
