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
            model_path = self._export(tmp)
            self._close_train()
            self._train = _lib.Train(path, model_path, self._modules())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._result = self._combine()

    def end_profile(self):
        if self.started:
            self.stop_profile()
        self._prof = None

    def reset_profile(self):
        self._result = None
        self._close_train()

    # ---- the figures ----
    def _export(self, tmp):
        """The model exported (in the mode it trains in) with the first
        recorded call's inputs; None when no call was recorded."""
        if self._args is None:
            return None
        path = os.path.join(tmp, "model.onnx")
        torchprof.export_onnx(self.model, self._args, {}, path)
        return path

    def _modules(self):
        """(name, class, path in the trace's module tree, params) per module,
        named_modules order: what the library joins on."""
        labels = _labels(self.model)
        tpaths = _trace_paths(self.model, labels)
        return [(name, type(m).__name__, tpaths[name], sum(p.numel() for p in m.parameters()))
                for name, m in self.model.named_modules()]

    def _close_train(self):
        t = getattr(self, "_train", None)
        if t is not None:
            t.close()
            self._train = None

    def _combine(self):
        j = self._train.json()
        rows = {x["name"]: x for x in j["modules"]}
        return {"rows": rows, "trace": self._trace, "module_time": j["module_time"]}

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
        return torchprof.duration_to_string(v) if as_string else v

    def get_total_backward_duration(self, as_string=False):
        v = self._root()["bwd_s"]
        return torchprof.duration_to_string(v) if as_string else v

    def get_module_profile(self):
        """Per module (by its name in named_modules): calls, fwd_s, bwd_s,
        params, macs, flops."""
        return self._need()["rows"]

    def print_model_profile(self, profile_step=1, module_depth=-1, top_modules=1,
                            detailed=True, output_file=None):
        self._need()
        text = self._train.report(_lib.TEXT, step=profile_step, depth=module_depth,
                                  top=top_modules, detailed=detailed)
        if output_file:
            with open(output_file, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
