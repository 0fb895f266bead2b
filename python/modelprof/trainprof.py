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
with_modules scopes: one naming for both trees). Every module that is called
is timed, whatever holds it (a ModuleList, a ModuleDict, a Sequential, an
attribute): its path in the trace's tree is recorded as it runs (a
ModuleList is never called: its children's ranges sit under their caller).
FLOPs, MACs and params come from the library's static profile of the same
model, exported (in the mode it trains in) with the first recorded call's
positional and keyword arguments; times from the trace. Nothing is counted
here."""
import os
import shutil
import sys
import tempfile
import time

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

    def enter(self, name, call=None, anc=()):
        """Open a range; a backward range (call: its module call's id; anc:
        the ids of the calls around that call in the forward) first closes
        the open backward ranges of calls that are not around it: on one
        thread the engine has finished their work when another module's
        backward starts (siblings that read one tensor, q/k/v projections,
        would otherwise wait for its whole gradient, nested in one another)."""
        if call is not None:
            while self.stack and self.stack[-1].get("call") is not None and \
                    self.stack[-1]["call"] not in anc:
                self.exit(self.stack[-1])
        rf = torch.autograd.profiler.record_function(name)
        rf.__enter__()
        st = {"rf": rf, "open": True, "call": call}
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
    """The tensors of a module's inputs or output, whatever holds them (a
    ModelOutput or an object with `.loss` too)."""
    return torchprof.tensors_of(x)


def _slot(t, leaves):
    """One gradient hook per tensor, shared by the modules that produce or
    consume it: when its gradient is ready, the ranges of the modules it
    leaves (consumers, innermost first) close, then those it enters
    (producers, outermost first) open. A leaf (a parameter given as an
    input: a soft prompt) outlives the step: it and its hook go in `leaves`,
    for stop_profile to take off."""
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
            h = t.register_hook(fire)
            if t.is_leaf:
                leaves.append((t, h))
    return slot


def _detached(x):
    """A recorded argument: tensors detached (nested in tuples, lists and
    dicts too); anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, tuple):
        return tuple(_detached(v) for v in x)
    if isinstance(x, list):
        return [_detached(v) for v in x]
    if isinstance(x, dict):
        return {k: _detached(v) for k, v in x.items()}
    return x


# The input shapes of profiled calls exported one by one, at most (a
# generation loop whose KV cache grows has one a token: profile a window).
_MAX_SHAPES = 64


def _signature(x):
    """What decides a forward's figures: each tensor's shape and dtype and
    every other argument's value (a flag such as use_cache), nested as
    given."""
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), str(x.dtype))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _signature(v)) for k, v in x.items())
    if x is None or isinstance(x, (bool, int, float, str)):
        return ("V", repr(x))
    return ("O", type(x).__name__)


def _kwargs_hooks():
    """Whether this torch's forward pre-hooks can take the keyword arguments
    (register_forward_pre_hook(..., with_kwargs=True), torch >= 2.0)."""
    import inspect
    return "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters


class _CallRecorder:
    """The arguments of the model's calls, keyword arguments included:
    a forward pre-hook with_kwargs where torch has it; on older torch (1.13)
    the model's forward wrapped on the instance (removed by remove()), which
    also calls `failed` when the forward raises (with the hooks, the next
    call's start finds the failed one)."""

    def __init__(self, model, fn, failed=None):
        self.model = model
        self.handle = None
        self.patched = False
        if _kwargs_hooks():
            def pre(mod, args, kwargs):
                fn(args, kwargs)
                return None
            self.handle = model.register_forward_pre_hook(pre, with_kwargs=True)
        else:
            import functools
            self.had = "forward" in model.__dict__
            self.orig = model.forward

            @functools.wraps(self.orig)
            def forward(*args, **kwargs):
                fn(args, kwargs)
                try:
                    return self.orig(*args, **kwargs)
                except BaseException:
                    if failed is not None:
                        failed()
                    raise
            model.forward = forward
            self.patched = True

    def remove(self):
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        if self.patched:
            if self.had:
                self.model.forward = self.orig
            else:
                del self.model.forward
            self.patched = False


def _calibrate(activities, device, install, rounds=7, n=50, clock=time.perf_counter):
    """What the profiler adds, measured on this machine now, both with the
    profiler's own activities and on the model's device (a GPU's launch
    records count too):
      - one operator record: a small add that autograd records, with
        torch.profiler on, against off;
      - one module range: a module that only scales its input, called and
        taken back through backward under torch.profiler, with the
        profiler's own hooks (install(module) puts them on and returns
        their handles: forward and backward ranges, tensor hooks, the path
        bookkeeping), against without; half of that per range (a call makes
        a forward and a backward range).
    Each cost is a difference of two timings of about a microsecond. Timed
    one after the other (all the "off" calls, then all the "on" ones), a
    clock ramping up between them, or another process taking the core
    during one of them, made "on" no slower than "off", and the clipped
    difference read 0 ("1885 operator records x 0 s"). So each of `rounds`
    rounds times off and on back to back (each the best of 3 blocks of
    calls: a block the scheduler interrupted does not count) and the cost
    is the median of the rounds' differences: a drift cancels within a
    round, a disturbed round is outvoted. 0 when the median is not above
    0: the cost is below what the clock resolves (the report says so).
    Seconds each."""
    v = torch.zeros(16, device=device, requires_grad=True)

    class Probe(torch.nn.Module):
        def forward(self, t):
            return t * 2

    probe = Probe()

    def per_call(fn, k):
        best = float("inf")
        for _ in range(3):
            t = clock()
            for _ in range(k):
                fn()
            best = min(best, (clock() - t) / k)
        return best

    def op():
        # as a training step records them: autograd on (the profiler notes
        # each operator's sequence number and the backward node it makes)
        torch.add(v, 1)

    def call():
        probe(v).sum().backward()

    def median(xs):
        xs = sorted(xs)
        k = len(xs) // 2
        return xs[k] if len(xs) % 2 else 0.5 * (xs[k - 1] + xs[k])

    op_d, call_d = [], []
    for _ in range(rounds):
        op_off = per_call(op, n)
        with torch.profiler.profile(activities=activities):
            op_on = per_call(op, n)
            call_off = per_call(call, max(1, n // 5))
            hooks = install(probe)
            try:
                call_on = per_call(call, max(1, n // 5))
            finally:
                for h in hooks:
                    h.remove()
        op_d.append(op_on - op_off)
        call_d.append(call_on - call_off)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return max(0.0, median(op_d)), max(0.0, median(call_d) / 2)


class _Clock:
    """Python's perf_counter around the model's forward calls, from the
    profiler's creation on: the interval from one call to the next (an
    iteration: forward, backward, optimizer step, data) and the call itself,
    before profiling and while it runs. The profiled step beside the
    unprofiled one shows what the profiler's own hooks and ranges cost."""

    KEEP = 64

    def __init__(self, model):
        import collections
        self.calls = {"before": collections.deque(maxlen=self.KEEP),
                      "profiled": collections.deque(maxlen=self.KEEP)}
        self.phase = "before"
        self.t0 = None
        self.last = {"before": None, "profiled": None}
        self.iters = {"before": collections.deque(maxlen=self.KEEP),
                      "profiled": collections.deque(maxlen=self.KEEP)}
        self.depth = 0
        self.paused = False     # the profiler's own calls (the export's tracing)
        self.handles = [model.register_forward_pre_hook(self._pre),
                        model.register_forward_hook(self._post)]

    def _pre(self, mod, inp):
        if self.paused:
            return
        self.depth += 1
        if self.depth > 1:      # a recursive call of the model: not a step
            return
        now = time.perf_counter()
        last = self.last[self.phase]
        if last is not None:
            self.iters[self.phase].append(now - last)
        self.last[self.phase] = now
        self.t0 = now

    def _post(self, mod, inp, out):
        if self.paused:
            return
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.t0 is not None:
            self.calls[self.phase].append(time.perf_counter() - self.t0)
            self.t0 = None

    def start(self):
        self.depth = 0
        self.phase = "profiled"
        self.calls["profiled"].clear()
        self.iters["profiled"].clear()
        self.last["profiled"] = None

    def stop(self):
        self.phase = "before"
        # the next unprofiled interval must not span the profiling
        self.last["before"] = None

    @staticmethod
    def _median(xs):
        xs = sorted(xs)
        if not xs:
            return 0.0
        k = len(xs) // 2
        return xs[k] if len(xs) % 2 else 0.5 * (xs[k - 1] + xs[k])

    def figures(self):
        """(before_calls, before_iter_s, before_fwd_s, profiled_calls,
        profiled_iter_s, profiled_fwd_s): medians; the calls are the forward
        calls seen (the intervals between them are one fewer)."""
        b, p = self.calls["before"], self.calls["profiled"]
        return (len(self.iters["before"]) + 1 if self.iters["before"] else len(b),
                self._median(self.iters["before"]), self._median(b),
                len(self.iters["profiled"]) + 1 if self.iters["profiled"] else len(p),
                self._median(self.iters["profiled"]), self._median(p))

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


class FlopsProfiler:
    """DeepSpeed's FlopsProfiler(model): start_profile(), run training steps
    (forward, backward, optimizer step), stop_profile(), then
    get_total_flops/macs/params/duration and print_model_profile();
    end_profile() removes what the profiler added. Works on the CPU and on a
    GPU; the model may be called with positional and keyword arguments
    (model(input_ids=..., labels=...)) and return any output (a tensor, a
    tuple, a Hugging Face ModelOutput, an object with `.loss`).

    From its creation it times the model's forward calls with a plain clock
    (two cheap hooks on the model), so that steps run before start_profile
    show what a step costs without the profiler. verbose=True shows the
    exporter's own warnings (else the ones that change the figures are said
    in one line)."""

    def __init__(self, model, ds_engine=None, recompute_fwd_factor=0.0, verbose=False):
        torchprof.check_module("FlopsProfiler", model)
        self.model = model
        self.verbose = verbose
        self.ds_engine = ds_engine
        self.recompute_fwd_factor = recompute_fwd_factor
        self.started = False
        self.func_patched = False
        self._prof = None
        self._hooks = []
        self._recorder = None
        self._result = None
        self._call = None
        self._train = None
        self._clock = _Clock(model)

    # ---- recording ----
    def start_profile(self, ignore_list=None):
        """Start recording. ignore_list: module types (as DeepSpeed compares
        them: type(module) in ignore_list) left out with their submodules:
        not timed, their MACs and FLOPs counted nowhere (params still are)."""
        if self.started and self.func_patched:
            return          # recording already
        from . import _meta
        if _meta.on_meta(self.model):
            raise ModelprofError("FlopsProfiler: %s is on the meta device: its steps compute "
                                 "nothing to time (get_model_profile and plan take it)"
                                 % type(self.model).__name__, "usage")
        self.reset_profile()
        if not self._clock.handles:     # end_profile removed it: time again from now
            self._clock = _Clock(self.model)
        self._records_cleared()
        self._pending = []            # each hooked module's calls in flight
        self._leaves = []             # (leaf tensor, its gradient hook) to take off
        self._ranges = _Ranges()
        labels = _labels(self.model)
        self._ignored = set(torchprof.ignored_names(self.model, ignore_list))
        try:
            for name, m in self.model.named_modules():
                if self._left_out(name):
                    continue
                self._hook(m, name, labels[name], root=(name == ""))
            self._recorder = _CallRecorder(self.model, self._record_call, self._forward_failed)
        except BaseException:
            for h in self._hooks:
                h.remove()
            self._hooks = []
            raise
        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        try:
            device = next(self.model.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
        self._costs = _calibrate(acts, device, self._probe_hooks)
        self._paths.pop(self._PROBE, None)
        kineto = torch.autograd.kineto_available() if hasattr(torch.autograd,
                                                               "kineto_available") else False
        # the module ranges are ours on every PyTorch (one naming for the
        # forward and backward trees); with Kineto, shapes for its FLOP counts
        self._prof_args = {"activities": acts, "record_shapes": kineto}
        self._prof = torch.profiler.profile(**self._prof_args)
        self._prof.__enter__()
        self._clock.start()
        self.started = True
        self.func_patched = True

    _PROBE = "\0probe"

    def _records_cleared(self):
        self._call = None
        self._shapes = {}             # input signature -> [calls, the first call's arguments]
        self._last_sig = None         # the signature of the call running now
        self._failed = 0              # forwards that raised
        self._first = {}              # name -> calls in the first recorded forward
        self._first_state = 0         # 0 before it, 1 during it, 2 after
        self._paths = {}              # name -> {trace path: calls}
        self._stack = []              # (label, call id) of the modules running now
        self._next_call = 0
        self._bwd_queued = False

    def _probe_hooks(self, probe):
        """The profiler's own hooks on a probe module (calibration): their
        handles, kept apart from the model's."""
        n = len(self._hooks)
        self._hook(probe, self._PROBE, "Probe_0", root=False)
        hooks = self._hooks[n:]
        del self._hooks[n:]
        return hooks

    def _left_out(self, name):
        return any(name == x or name.startswith(x + ".") or x == "" for x in self._ignored)

    def _forward_failed(self):
        """The model's forward raised (an out-of-memory error, a bad
        batch): the ranges its modules left open close now, their pending
        calls are dropped, and the call counts for no MACs or FLOPs (its
        partial time stays in the trace). A failed first forward is not the
        one the calls per module are read from."""
        self._ranges.close_all()
        for pending in self._pending:
            pending.clear()
        self._stack.clear()
        if self._first_state == 1:
            self._first, self._first_state = {}, 0
        self._failed += 1
        sig = self._last_sig
        if sig is not None and sig in self._shapes:
            self._shapes[sig][0] -= 1
            if self._shapes[sig][0] <= 0:
                call = self._shapes.pop(sig)[1]
                if self._call is call:
                    self._call = next((c for _, c in self._shapes.values() if c is not None), None)
        self._last_sig = None

    def _record_call(self, args, kwargs):
        """Each recorded call's input shapes: the first call of each shape
        kept (its arguments, for the export), the calls of each counted."""
        sig = _signature((tuple(args), dict(kwargs)))
        self._last_sig = sig
        seen = self._shapes.get(sig)
        if seen is not None:
            seen[0] += 1
            return
        call = (_detached(tuple(args)), _detached(dict(kwargs)))
        if self._call is None:
            self._call = call
        # past the cap only counted: stop_profile says the figures cannot be given
        self._shapes[sig] = [1, call if len(self._shapes) < _MAX_SHAPES else None]

    def _hook(self, m, name, label, root):
        ranges = self._ranges
        fwd_name = "nn.Module: " + label
        bwd_name = "nn.Module.backward: " + label
        calls = []
        self._pending.append(calls)

        def end_of_backward():
            ranges.close_all()
            self._bwd_queued = False

        def pre(mod, inp):
            if root and self._stack:   # the last forward raised where no wrapper saw it
                self._forward_failed()
            # where it runs: its path in the trace's tree (the labels of the
            # modules whose ranges are open), whatever holds it
            path = ".".join([x[0] for x in self._stack] + [label])
            seen = self._paths.setdefault(name, {})
            seen[path] = seen.get(path, 0) + 1
            self._next_call += 1
            call = self._next_call
            anc = frozenset(x[1] for x in self._stack)
            self._stack.append((label, call))
            # the calls of each module in the first recorded forward (the one
            # exported): the static profile's figures cover these
            if root and self._first_state == 0:
                self._first_state = 1
            if self._first_state == 1:
                self._first[name] = self._first.get(name, 0) + 1
            st = {"fwd": ranges.enter(fwd_name), "bwd": None, "depth": len(self._stack),
                  "call": call, "anc": anc,
                  "inputs": [t for t in _tensors(inp) if t.requires_grad]}
            calls.append(st)

        def post(mod, inp, out):
            if not calls:
                return
            st = calls.pop()
            del self._stack[st["depth"] - 1:]
            if root and self._first_state == 1:
                self._first_state = 2
            if st["fwd"] is not None:
                ranges.exit(st["fwd"])
            if not torch.is_grad_enabled():
                return
            outs = [t for t in _tensors(out) if t.requires_grad]
            if not outs:
                return

            def enter():
                if st["bwd"] is None:
                    st["bwd"] = ranges.enter(bwd_name, st["call"], st["anc"])
                    if not self._bwd_queued:
                        self._bwd_queued = True
                        torch.autograd.Variable._execution_engine.queue_callback(end_of_backward)

            def leave():
                if st["bwd"] is not None:
                    ranges.exit(st["bwd"])

            for t in outs:
                _slot(t, self._leaves)["enter"].append(enter)
            for t in st["inputs"]:
                _slot(t, self._leaves)["leave"].append(leave)

        self._hooks.append(m.register_forward_pre_hook(pre))
        self._hooks.append(m.register_forward_hook(post))

    def stop_profile(self):
        """Stop recording and analyse the trace (the steps done so far)."""
        if not self.started or self._prof is None or not self.func_patched:
            return
        self.func_patched = False
        self._clock.stop()
        # read now: the export below calls the model's forward (tracing),
        # which the clock must not take for an unprofiled call
        clock = self._clock.figures()
        self._ranges.close_all()
        for h in self._hooks:
            h.remove()
        self._hooks = []
        for t, h in getattr(self, "_leaves", []):
            h.remove()
            if hasattr(t, "_modelprof_bwd"):
                del t._modelprof_bwd
        self._leaves = []
        if self._recorder is not None:
            self._recorder.remove()
            self._recorder = None
        self._prof.__exit__(None, None, None)
        if self._call is None:
            # no forward ran in the window: nothing to analyse (DeepSpeed's
            # counters stay at zero); the figures say so when asked for
            self._result = None
            self._empty = True
            return
        self._empty = False
        self._failure = None
        tmp = tempfile.mkdtemp(prefix="modelprof-")
        try:
            path = os.path.join(tmp, "trace.json")
            self._prof.export_chrome_trace(path)
            self._trace = torchprof.analyze_trace(path)
            if len(self._shapes) > _MAX_SHAPES:
                raise ModelprofError(
                    "FlopsProfiler: the profiled calls had %d input shapes, and each is exported to "
                    "count its MACs and FLOPs (at most %d): profile a window of fewer shapes (a few "
                    "steps of a generation loop, batches padded to a few lengths)"
                    % (len(self._shapes), _MAX_SHAPES), "usage")
            model_path = self._export(tmp)
            self._close_train()
            self._train = _lib.Train(path, model_path, self._modules())
            if len(self._shapes) > 1 or self._failed:
                # each shape's calls that completed (a forward that raised counts none)
                paths, counts = [], []
                for i, (n, call) in enumerate(self._shapes.values()):
                    paths.append(self._export(tmp, call, "shape%d.onnx" % i))
                    counts.append(n)
                self._train.set_shapes(paths, counts)
            self._train.set_clock(*clock)
            self._train.set_overhead(*self._costs)
        except ModelprofError as e:
            # said now, and again when a figure is asked for (not "nothing
            # profiled": the steps were)
            self._failure = e
            raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._result = self._combine()

    def end_profile(self):
        """Stop (when recording) and remove everything the profiler added to
        the model, its clock hooks included."""
        if self.started:
            self.stop_profile()
        self.started = False
        self._prof = None
        self._clock.remove()

    def reset_profile(self):
        """DeepSpeed's reset_profile: the figures start again from zero.
        While recording, what was recorded so far is dropped (the trace, the
        calls, the clock's profiled steps) and recording goes on: the next
        stop_profile covers the steps run after the reset."""
        self._result = None
        self._close_train()
        if self.started and self.func_patched and self._prof is not None:
            self._ranges.close_all()
            self._prof.__exit__(None, None, None)
            self._records_cleared()
            self._clock.start()
            self._prof = torch.profiler.profile(**self._prof_args)
            self._prof.__enter__()

    # ---- the figures ----
    def _export(self, tmp, call=None, name="model.onnx"):
        """The model exported (in the mode it trains in) with a recorded
        call's arguments (the first's by default); None when no call was
        recorded."""
        call = call or self._call
        if call is None:
            return None
        path = os.path.join(tmp, name)
        args, kwargs = call
        self._clock.paused = True
        try:
            try:
                torchprof.export_onnx(self.model, args, kwargs, path, verbose=self.verbose)
            except ModelprofError as e:
                if not self.model.training:
                    raise
                # what only training runs can stop the exporter (Hugging
                # Face's gradient checkpointing, active when self.training):
                # the eval-mode forward has the same products
                modes = [(m, m.training) for m in self.model.modules()]
                self.model.eval()
                try:
                    torchprof.export_onnx(self.model, args, kwargs, path, verbose=self.verbose)
                finally:
                    for m, was in modes:
                        m.training = was
                if not getattr(self, "_eval_said", False):
                    self._eval_said = True
                    sys.stderr.write("modelprof: the model was exported in eval mode for its MACs and "
                                     "FLOPs: in train mode the exporter failed (%s)\n" % e)
        finally:
            self._clock.paused = False
        return path

    def _modules(self):
        """(name, class, paths in the trace's module tree, params, calls in
        the exported forward, ignored) per module, named_modules order: what
        the library joins on."""
        first = self._first
        out = []
        for name, m in self.model.named_modules():
            paths = sorted(self._paths.get(name, {}).items(), key=lambda kv: -kv[1])
            out.append((name, type(m).__name__, [p for p, _ in paths],
                        sum(p.numel() for p in m.parameters()),
                        first.get(name, 0),
                        name in self._ignored))
        return out

    def _close_train(self):
        t = getattr(self, "_train", None)
        if t is not None:
            t.close()
            self._train = None

    def _combine(self):
        j = self._train.json()
        rows = {x["name"]: x for x in j["modules"]}
        return {"rows": rows, "trace": self._trace, "module_time": j["module_time"],
                "clock": j["clock"]}

    def _need(self):
        if self.started and self.func_patched:
            self.stop_profile()
        if self._result is None and getattr(self, "_failure", None) is not None:
            raise self._failure
        if self._result is None:
            if getattr(self, "_empty", False):
                raise ModelprofError("FlopsProfiler: nothing profiled: the model's forward did not "
                                     "run between start_profile and stop_profile", "usage")
            raise ModelprofError("FlopsProfiler: nothing profiled (call start_profile and "
                                 "run a step first)", "usage")
        return self._result

    def _root(self):
        return self._need()["rows"][""]

    def get_total_flops(self, as_string=False):
        """The model's forward FLOPs over the profiled calls (DeepSpeed sums
        each call's), as a number or DeepSpeed's string."""
        v = self._root()["flops"]
        return torchprof.number_to_string(v) if as_string else v

    def get_total_macs(self, as_string=False):
        """The model's forward MACs over the profiled calls."""
        v = self._root()["macs"]
        return torchprof.macs_to_string(v) if as_string else v

    def get_total_params(self, as_string=False):
        """The model's parameters (every one, as model.parameters() counts
        them)."""
        v = self._root()["params"]
        return torchprof.params_to_string(v) if as_string else v

    def get_total_duration(self, as_string=False):
        """The model's forward time over the profiled calls, in seconds (as
        DeepSpeed sums each call's)."""
        v = self._root()["fwd_s"]
        return torchprof.duration_to_string(v) if as_string else v

    def get_total_backward_duration(self, as_string=False):
        """The model's backward time over the profiled calls, in seconds."""
        v = self._root()["bwd_s"]
        return torchprof.duration_to_string(v) if as_string else v

    def get_module_profile(self):
        """Per module (by its name in named_modules): calls, fwd_s, bwd_s,
        params, macs, flops, container, ignored (docs/JSON.md, "Training
        profile")."""
        return self._need()["rows"]

    def print_model_profile(self, profile_step=1, module_depth=-1, top_modules=1,
                            detailed=True, output_file=None):
        """DeepSpeed's print_model_profile: the summary, the aggregated
        profile (top_modules per depth, down to module_depth; -1 every
        depth) and, when detailed, the whole module tree; into output_file
        (its folder made when missing) when given, else on stdout."""
        self._need()
        text = self._train.report(_lib.TEXT, step=profile_step, depth=module_depth,
                                  top=top_modules, detailed=detailed)
        torchprof._write_or_print(text, output_file)
