"""get_model_profile and profile_onnx: a PyTorch module exported to ONNX in a
temporary folder and profiled by the library. No counting here: every figure
comes from the library's profile (its JSON)."""
import contextlib
import os
import shutil
import sys
import tempfile

from . import _lib
from ._lib import ModelprofError


class Obj(dict):
    """The JSON's objects as Python objects: fields as keys and attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _objects(v):
    if isinstance(v, dict):
        return Obj((k, _objects(x)) for k, x in v.items())
    if isinstance(v, list):
        return [_objects(x) for x in v]
    return v


def profile_onnx(path, dims=None, run=False, inputs=None, warmup=3, iters=20, threads=0,
                 formula=False):
    """The profile of an ONNX file as Python objects, the fields of
    `modelprof --format json` (docs/JSON.md): total, modules, ops, nodes, ...;
    with run=True also the measured run (`run`); with formula=True the costs
    as exact formulas in the dims left free (`formulas`, as --formula).
    dims: {"batch": 1}; inputs: {"input": [1, 3, 224, 224]}."""
    with _lib.Profile(path, dims, inputs) as p:
        if formula:
            p.formulas()
        if run:
            p.run(warmup, iters, threads)
        return _objects(p.json())


def analyze_trace(path):
    """The trace analysis of a torch.profiler trace (Kineto JSON or the bare
    event array of export_chrome_trace without Kineto), the fields of
    `modelprof trace --format json`."""
    import json
    return _objects(json.loads(_lib.trace_report(path, _lib.JSON)))


# ---- DeepSpeed's number formatting (flops_profiler/profiler.py) ----
def _num(n, units=None, precision=2):
    for u, s in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= u and units in (None, s):
            return "%s %s" % (round(n / u, precision), s)
    return "%s " % round(n, precision) if units is None else "%s %s" % (round(n, precision), units)


def number_to_string(num, units=None, precision=2):
    return _num(num, units, precision)


def macs_to_string(macs, units=None, precision=2):
    return _num(macs, units, precision) + "MACs"


def flops_to_string(flops, units=None, precision=2):
    return _num(flops, units, precision) + "FLOPS"


def duration_to_string(duration, units=None, precision=2):
    """Seconds as DeepSpeed's duration_to_string writes them."""
    for u, s in ((1, "s"), (1e-3, "ms")):
        if duration >= u and units in (None, s):
            return "%s %s" % (round(duration / u, precision), s)
    return "%s us" % round(duration * 1e6, precision)


def params_to_string(params, units=None, precision=2):
    return _num(params, units, precision).rstrip()


# ---- export ----
def _scope_names(model):
    return {m: (n or type(model).__name__) for n, m in model.named_modules()}


@contextlib.contextmanager
def _module_tracker(model):
    """Which module was running when the export failed."""
    names = _scope_names(model)
    stack, handles = [], []
    last = {"where": None}

    def pre(m, inp):
        stack.append((names.get(m, type(m).__name__), type(m).__name__))
        last["where"] = "%s (%s)" % stack[-1]

    def post(m, inp, out):
        if stack:
            stack.pop()
        if stack:
            last["where"] = "%s (%s)" % (stack[-1][0], stack[-1][1])

    for m in names:
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    try:
        yield last, stack
    finally:
        for h in handles:
            h.remove()


def export_onnx(model, args, kwargs, path):
    """Export `model` (called with args, kwargs) to `path`: the TorchScript
    exporter on torch < 2.5 (module scopes are written into node names, which
    the library reads as the module tree), dynamo where present."""
    import torch
    major_minor = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]
                        if x.isdigit())
    use_dynamo = major_minor >= (2, 5) and hasattr(torch.onnx, "dynamo_export")
    args = tuple(args)
    with _module_tracker(model) as (where, stack):
        try:
            if use_dynamo:
                prog = torch.onnx.export(model, args, kwargs=kwargs or None, dynamo=True)
                prog.save(path)
            else:
                export_args = args + ((dict(kwargs),) if kwargs else ())
                # grad mode stays on: under no_grad an eval MultiheadAttention
                # takes its fused fast path, which the exporter cannot write
                torch.onnx.export(model, export_args, path, opset_version=14,
                                  do_constant_folding=False,
                                  training=torch.onnx.TrainingMode.PRESERVE)
        except Exception as e:  # the exporter's own exception types vary by version
            reason = str(e).strip().split("\n")[0]
            if stack:   # failed while tracing: the module running then
                mod = "in module %s" % where["where"]
            else:       # failed converting the traced graph: the op's module
                mod = _op_module(model, args, kwargs, reason)
            raise ModelprofError("cannot export %s to ONNX%s: %s: %s" % (
                type(model).__name__, " " + mod if mod else "", type(e).__name__, reason),
                "export") from e


def _op_module(model, args, kwargs, reason):
    """The module that calls the operator an exporter error names ("... the
    operator 'aten::foo' ..."): one forward pass watched by a dispatch mode
    and the module hooks."""
    import re
    import torch
    m = re.search(r"operator '([a-z_]+)::([A-Za-z0-9_]+)", reason)
    if not m:
        return ""
    want = "%s::%s" % (m.group(1), m.group(2))
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return ""
    found = []

    with _module_tracker(model) as (where, stack):
        class Watch(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = getattr(getattr(func, "_schema", None), "name", "")
                # a composite op reaches the dispatcher as its kernel (_linalg_svd)
                if (name == want or name.split("::")[-1].lstrip("_") == m.group(2).lstrip("_")) \
                        and not found and stack:
                    found.append(where["where"] if where["where"] else stack[-1])
                return func(*args, **(kwargs or {}))
        try:
            with torch.no_grad() if "native_multi_head" in want or "_fwd" in want \
                    else contextlib.nullcontext(), Watch():
                model(*args, **(kwargs or {}))
        except Exception:
            pass
    return "in module %s" % found[0] if found else ""


def _inputs(model, input_shape, args, kwargs):
    import torch
    if input_shape is not None:
        if args:
            raise ModelprofError("get_model_profile: give input_shape or args, not both", "usage")
        try:
            p = next(model.parameters())
            dtype, device = p.dtype, p.device
        except StopIteration:
            dtype, device = torch.float32, torch.device("cpu")
        return (torch.ones((), dtype=dtype, device=device).new_empty(tuple(input_shape)),)
    return tuple(args)


def get_model_profile(model, input_shape=None, args=[], kwargs={}, print_profile=True,
                      detailed=True, module_depth=-1, top_modules=1, warm_up=1,
                      as_string=True, output_file=None, ignore_modules=None,
                      mode="forward"):
    """DeepSpeed's get_model_profile: (flops, macs, params) of one forward
    pass of `model`, strings when as_string. The model is exported to ONNX in
    a temporary folder (removed, also on errors) and profiled by the library,
    which prints its report in DeepSpeed's layout. warm_up, ignore_modules
    and mode are accepted for compatibility: the counts are static (the
    forward pass as exported)."""
    import torch
    if not isinstance(model, torch.nn.Module):
        raise ModelprofError("get_model_profile: model must be a torch.nn.Module, not %s"
                             % type(model).__name__, "usage")
    if mode != "forward":
        raise ModelprofError("get_model_profile: mode '%s': only 'forward' is profiled "
                             "(the exported forward pass)" % mode, "usage")
    args = _inputs(model, input_shape, args, kwargs)
    was_training = model.training
    model.eval()
    tmp = tempfile.mkdtemp(prefix="modelprof-")
    try:
        path = os.path.join(tmp, type(model).__name__ + ".onnx")
        export_onnx(model, args, kwargs, path)
        data = _name_root(path, type(model).__name__)
        import torch
        label = "%s (exported by torch %s)" % (type(model).__name__, torch.__version__)
        classes = {n: type(x).__name__ for n, x in model.named_modules()}
        with (_lib.Profile(None, data=data, name=label, classes=classes) if data is not None
              else _lib.Profile(path, classes=classes)) as p:
            d = p.json()
            if print_profile:
                text = p.report(_lib.TEXT, depth=module_depth, top=top_modules,
                                detailed=detailed)
                if output_file:
                    with open(output_file, "w", encoding="utf-8") as f:
                        f.write(text)
                else:
                    sys.stdout.write(text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        model.train(was_training)
    tot = d["total"]
    flops, macs, params = tot["flops"], tot["macs"], tot["params"]
    if as_string:
        return number_to_string(flops), macs_to_string(macs), params_to_string(params)
    return flops, macs, params


def _name_root(path, name):
    """The graph's name is the module tree's root: the model's class, not
    the exporter's 'torch_jit'. Returns the model's bytes (profiled from
    memory, named after the class) or None (profile the file)."""
    try:
        import onnx
    except ImportError:
        return
    m = onnx.load(path)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        m.graph.name = name   # weights beside the file: profiled from the file
        onnx.save(m, path)
        return None
    m.graph.name = name
    return m.SerializeToString()
