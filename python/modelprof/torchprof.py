"""get_model_profile and profile_onnx: a PyTorch module exported to ONNX in a
temporary folder and profiled by the library. No counting here: every figure
comes from the library's profile (its JSON)."""
import contextlib
import gc
import os
import shutil
import sys
import tempfile
import traceback
import weakref

from . import _lib, _meta, _warnings
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
def number_to_string(num, units=None, precision=2):
    """DeepSpeed's number_to_string: "1.23 G", "5 " (no unit below 1000),
    "2.5 m" below 1; "? " for None, a figure the profile could not know
    (its JSON null: docs/JSON.md, "Unknown figures")."""
    if num is None:
        return "? "
    scales = {"T": 1e12, "G": 1e9, "M": 1e6, "K": 1e3, "m": 1e-3, "u": 1e-6}
    if units is None:
        for u in ("T", "G", "M", "K"):
            if num >= scales[u]:
                units = u
                break
        else:
            units = "" if (num >= 1 or num == 0) else ("m" if num >= 1e-3 else "u")
    mag = scales.get(units, 1)
    return "%s %s" % (format(round(num / mag, precision), "g"), units)


def macs_to_string(macs, units=None, precision=2):
    return number_to_string(macs, units, precision) + "MACs"


def flops_to_string(flops, units=None, precision=2):
    return number_to_string(flops, units, precision) + "FLOPS"


def duration_to_string(duration, units=None, precision=2):
    """Seconds as DeepSpeed's duration_to_string writes them ("12.3 ms")."""
    return number_to_string(duration, units, precision) + "s"


def params_to_string(params, units=None, precision=2):
    units = units.replace("B", "G") if units else units
    return number_to_string(params, units, precision).replace("G", "B").strip()


# ---- export ----
def _scope_names(model):
    return {m: (n or type(model).__name__) for n, m in model.named_modules()}


def _unqualified(name):
    """The scope segment PyTorch's TorchScript exporter writes for a module:
    its qualified name from the last non-numeric atom on ("h.0.mlp.c_fc" ->
    "c_fc", "h.0" -> "h.0")."""
    atoms = name.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isnumeric():
            return ".".join(atoms[i:])
    return name


@contextlib.contextmanager
def _module_tracker(model):
    """Which module was running when the export failed; and, for each
    module called, the chain of TorchScript scope segments of the called
    modules down to it (a module that is never called, a ModuleList or a
    ModuleDict, has no segment) -> its qualified name."""
    names = _scope_names(model)
    qual = {m: n for n, m in model.named_modules()}
    stack, handles, called = [], [], []
    last = {"where": None, "scopes": {}, "exact": {}}
    seen = {}

    def pre(m, inp):
        stack.append((names.get(m, type(m).__name__), type(m).__name__))
        last["where"] = "%s (%s)" % stack[-1]
        called.append(qual.get(m, ""))
        if len(called) > 1:
            segs = tuple(_unqualified(q) for q in called[1:])
            last["scopes"].setdefault(segs, called[-1])
            # the exporter's name for this call's scope: its segments joined,
            # made unique by a count of the same path ("fc", then "fc_1" for
            # the next call of a path: another module's or the same one's)
            path = "/".join(segs)
            k = seen.get(path, 0)
            seen[path] = k + 1
            last["exact"][path if k == 0 else "%s_%d" % (path, k)] = called[-1]

    def post(m, inp, out):
        if stack:
            stack.pop()
        if called:
            called.pop()
        if stack:
            last["where"] = "%s (%s)" % (stack[-1][0], stack[-1][1])

    try:
        for m in names:
            handles.append(m.register_forward_pre_hook(pre))
            handles.append(m.register_forward_hook(post))
        yield last, stack
    finally:
        for h in handles:
            h.remove()


def torch_version():
    """(major, minor) of the torch in use."""
    import torch
    parts = torch.__version__.split("+")[0].split(".")
    out = []
    for x in parts[:2]:
        digits = "".join(c for c in x if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def uses_dynamo():
    """Whether export_onnx calls the dynamo exporter first (torch >= 2.5,
    where torch.onnx.export(..., dynamo=True) exists) rather than
    TorchScript's. MODELPROF_EXPORTER=torchscript or dynamo chooses."""
    choice = os.environ.get("MODELPROF_EXPORTER", "").strip().lower()
    if choice in ("torchscript", "dynamo"):
        return choice == "dynamo"
    return torch_version() >= (2, 5)


def tensors_of(out):
    """The tensors of a forward's output, in order, whatever holds them: a
    tensor, a tuple, list or dict, a Hugging Face ModelOutput (to_tuple) or
    any object with tensor attributes (a dataclass; `.loss`, `.logits`)."""
    import dataclasses
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if out is None or isinstance(out, (str, bytes, int, float, bool)):
        return []
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in tensors_of(x)]
    if isinstance(out, dict):
        return [t for x in out.values() for t in tensors_of(x)]
    if hasattr(out, "to_tuple") and callable(out.to_tuple):
        return tensors_of(out.to_tuple())
    if dataclasses.is_dataclass(out):
        return [t for f in dataclasses.fields(out) for t in tensors_of(getattr(out, f.name))]
    if hasattr(out, "__dict__"):
        return [t for x in vars(out).values() for t in tensors_of(x)]
    return []


def _is_tensor_tree(x):
    import torch
    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, (tuple, list)):
        return any(_is_tensor_tree(v) for v in x)
    if isinstance(x, dict):
        return any(_is_tensor_tree(v) for v in x.values())
    return False


@contextlib.contextmanager
def _export_call(model, args, kwargs, dynamo):
    """The model as the exporters can take it, for the duration of an
    export: its forward (patched on the instance, removed afterwards) returns
    the output's tensors as one flat tuple (exporters take tensors, tuples,
    lists and dicts, not a ModelOutput or a dataclass with `.loss`). Yields
    (args, kwargs) to hand the exporter. The dynamo exporter takes keyword
    arguments itself; for TorchScript's, the keyword arguments that hold
    tensors become trailing positional inputs the patched forward hands back
    by name (the others are bound as constants), which works whatever the
    forward's signature (**kwargs included)."""
    import functools
    orig = model.forward                      # bound: the class's or the instance's

    def outputs(out):
        t = tuple(tensors_of(out))
        if not t:
            raise ModelprofError("the forward returned no tensor (%s): an export keeps only the work "
                                 "that reaches an output, so nothing would be counted; return the "
                                 "output tensors" % type(out).__name__, "usage")
        return t
    had = "forward" in model.__dict__
    kwargs = dict(kwargs or {})
    if dynamo:
        @functools.wraps(orig)
        def forward(*a, **kw):
            return outputs(orig(*a, **kw))
        call = (tuple(args), kwargs)
    else:
        n = len(args)
        tkeys = [k for k, v in kwargs.items() if _is_tensor_tree(v)]
        consts = {k: v for k, v in kwargs.items() if k not in tkeys}

        def forward(*flat):
            kw = dict(consts)
            kw.update(zip(tkeys, flat[n:]))
            return outputs(orig(*flat[:n], **kw))
        flat = tuple(args) + tuple(kwargs[k] for k in tkeys)
        # the TorchScript exporter reads a dict last among the arguments as
        # keyword arguments; an empty dict after it says there are none,
        # so a dict the forward takes (model({"x": x})) stays an argument
        if flat and isinstance(flat[-1], dict):
            flat = flat + ({},)
        call = (flat, {})
    model.forward = forward
    try:
        yield call
    finally:
        if had:
            model.forward = orig
        else:
            del model.forward


@contextlib.contextmanager
def _state_kept(model):
    """The exporters run the forward: its side effects on the model (a
    BatchNorm's running statistics in train mode, dropout's draws from the
    random generators) must not reach it. Each buffer is swapped for a copy
    while the exporter runs (a buffer two modules share, one copy) and put
    back afterwards, untouched: writing the old values back in place would
    move the version counters of tensors a pending backward saved (a
    train-mode BatchNorm's running statistics), and that backward, run after
    the profile as DeepSpeed's loop does, would fail."""
    import torch
    swapped, copies = [], {}
    for m in model.modules():
        for name, b in list(m._buffers.items()):
            if b is None:
                continue
            c = copies.get(id(b))
            if c is None:
                c = copies[id(b)] = b.detach().clone()
            swapped.append((m, name, b))
            m._buffers[name] = c
    cpu = torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        for m, name, b in swapped:
            m._buffers[name] = b
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _qualify_scopes(path, scopes, exact=None):
    """TorchScript's node names carry each called module's last name only
    ("/h.0/c_fc/MatMul" for h.0.mlp.c_fc: the ModuleDict mlp, never called,
    is lost). Rewritten with the qualified names of the modules the hooks
    saw ("/h/h.0/h.0.mlp/h.0.mlp.c_fc/MatMul"), the library's module tree
    is PyTorch's: named_modules() names, containers included. A scope the
    exporter named as the hooks saw it called (`exact`: its path made unique
    by a count, as torch/csrc/jit/passes/onnx/naming.cpp does) is that call's
    module: enc.fc then dec.fc, both "fc" to the exporter, are "/fc" and
    "/fc_1"; else the longest known prefix."""
    try:
        import onnx
    except ImportError:
        return
    m = onnx.load(path, load_external_data=False)
    import re
    again = re.compile(r"^(.+)_([0-9]+)$")

    def calls_merged(segs):
        """A module called again in one forward gets its segment suffixed
        by the exporter ("/blk_1/Gemm", "/enc/enc.0_1/Gemm" for enc's second
        call): the node belongs to that module, as DeepSpeed's hooks count
        every call into it. A segment the hooks never saw whose unsuffixed
        name they did see (at the same place) is that module."""
        out = []
        for s in segs:
            cur = tuple(out) + (s,)
            if cur not in scopes:
                g = again.match(s)
                if g and tuple(out) + (g.group(1),) in scopes:
                    s = g.group(1)
            out.append(s)
        return tuple(out)

    def fix(graph):
        for n in graph.node:
            parts = n.name.split("/")
            q = (exact or {}).get("/".join(parts[1:-1])) if len(parts) > 2 and parts[0] == "" else None
            if q is not None:
                atoms = q.split(".")
                n.name = "/" + "/".join([".".join(atoms[:i + 1]) for i in range(len(atoms))] + [parts[-1]])
            elif len(parts) > 2 and parts[0] == "":
                segs = calls_merged(tuple(parts[1:-1]))
                for k in range(len(segs), 0, -1):
                    q = scopes.get(segs[:k])
                    if q is not None:
                        atoms = q.split(".")
                        chain = [".".join(atoms[:i + 1]) for i in range(len(atoms))]
                        n.name = "/" + "/".join(chain + list(segs[k:]) + [parts[-1]])
                        break
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    fix(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        fix(g)
    fix(m.graph)
    onnx.save(m, path)


def _dynamo_options():
    """Keyword arguments of torch.onnx.export for the dynamo exporter: the
    ones this torch's export takes (its signature, not its attributes)."""
    import inspect
    import torch
    params = inspect.signature(torch.onnx.export).parameters
    kw = {"dynamo": True, "opset_version": 18}
    # the graph as PyTorch runs it: no BatchNorm folded into a convolution,
    # no equal initializers merged (the library reads both, but counts what
    # runs: a train-mode BatchNorm's statistics work)
    if "optimize" in params:
        kw["optimize"] = False
    if "verbose" in params:
        kw["verbose"] = False
    if "report" in params:
        kw["report"] = False
    return kw


def export_onnx(model, args, kwargs, path, verbose=False):
    """Export `model`, called as model(*args, **kwargs), to `path`: the one
    export path of get_model_profile and FlopsProfiler. On torch >= 2.5 the
    dynamo exporter, asked for by name (torch.onnx.export(..., dynamo=True),
    opset 18), which writes module scopes and classes as node metadata; on
    older torch, or when the dynamo exporter fails (a model torch.export
    cannot trace), the TorchScript exporter (opset 14, module scopes in node
    names, BatchNorm kept: training=PRESERVE, no constant folding). The model
    is exported in the mode it is in; the forward's effects on its buffers
    and on the random generators are undone. The exporters' warnings are
    kept out of the console unless verbose (_warnings.py: the ones that
    change the figures are said in one line).

    A model on the meta device (no weights: _meta.py) is exported by the
    TorchScript exporter without values, its tensor arguments moved to the
    meta device; it returns the weight table to declare to the library
    (Profile's weights=), else None."""
    with _warnings.quiet(verbose):
        return _export(model, args, kwargs, path)


def _export(model, args, kwargs, path):
    args = tuple(args)
    meta = _meta.on_meta(model)
    if meta:
        args, kwargs = _meta.to_meta(args), _meta.to_meta(dict(kwargs or {}))
    tries = [True, False] if uses_dynamo() and not meta else [False]
    failures = []
    unsaved = set()
    for dynamo in tries:
        failure = _export_with(model, args, kwargs, path, dynamo, meta, unsaved)
        if failure is None:
            if failures:    # said once, as the exporters warn
                sys.stderr.write("modelprof: the dynamo exporter failed (%s: %s); exported with "
                                 "the TorchScript exporter\n" % (type(failures[0][0]).__name__,
                                                                  failures[0][1]))
            return _meta.weight_table(model, unsaved) if meta else None
        failures.append(failure)
    # the last exporter's failure leads (the TorchScript exporter traces
    # module by module, so it names the module); the dynamo one follows
    exc, reason, mod = failures[-1]
    if not mod:
        mod = _op_module(model, args, kwargs, reason)
    also = ""
    if len(failures) > 1:
        also = " (the dynamo exporter first: %s: %s)" % (type(failures[0][0]).__name__,
                                                           failures[0][1])
    raise ModelprofError("cannot export %s to ONNX%s: %s: %s%s" % (
        type(model).__name__, " " + mod if mod else "", type(exc).__name__, reason, also),
        "export") from exc


def _export_with(model, args, kwargs, path, dynamo, meta=False, unsaved=None):
    """One export by one exporter: None, or (exception, its first line, the
    module running when it failed while tracing). meta: the model is on the
    meta device (_meta.meta_export; the names of the buffers it does not
    save go into `unsaved`)."""
    import torch
    with _module_tracker(model) as (where, stack), _state_kept(model), \
            _export_call(model, args, kwargs, dynamo) as (xargs, xkwargs), \
            (_meta.meta_export(model) if meta else contextlib.nullcontext(set())) as nosave:
        try:
            if dynamo:
                torch.onnx.export(model, xargs, path, kwargs=xkwargs or None, **_dynamo_options())
            else:
                # grad mode stays on: under no_grad an eval MultiheadAttention
                # takes its fused fast path, which the exporter cannot write;
                # dynamo=False where the signature has it (torch >= 2.9
                # defaults to dynamo)
                extra = {}
                import inspect
                if "dynamo" in inspect.signature(torch.onnx.export).parameters:
                    extra["dynamo"] = False
                torch.onnx.export(model, xargs, path, opset_version=14,
                                  do_constant_folding=False, export_params=not meta,
                                  training=torch.onnx.TrainingMode.PRESERVE, **extra)
                if unsaved is not None:
                    unsaved.update(nosave)
                _qualify_scopes(path, where["scopes"], where["exact"])
        except Exception as e:  # the exporter's own exception types vary by version
            reason = str(e).strip().split("\n")[0]
            # the failed export's frames hold its TorchScript graph; freed
            # later, by a collection in the middle of another export, it
            # breaks that one (torch 1.13: "Unable to cast from non-held to
            # held instance" in _jit_pass_lint): their locals go now
            traceback.clear_frames(e.__traceback__)
            gc.collect()
            # failed while tracing: the module running then; else the op's module
            return (e, reason, "in module %s" % where["where"] if stack else "")
    return None


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


def _inputs(who, model, input_shape, args, kwargs):
    import torch
    if input_shape is not None:
        if args:
            raise ModelprofError("%s: give input_shape or args, not both" % who, "usage")
        if not isinstance(input_shape, (tuple, list)) or \
                not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in input_shape):
            raise ModelprofError("%s: input_shape must be a tuple of positive ints (the one input "
                                 "tensor's shape, as DeepSpeed takes it), not %r" % (who, input_shape),
                                 "usage")
        try:
            p = next(model.parameters())
            dtype, device = p.dtype, p.device
        except StopIteration:
            dtype, device = torch.float32, torch.device("cpu")
        try:
            return (torch.ones((), dtype=dtype, device=device).new_empty(tuple(input_shape)),)
        except RuntimeError as e:
            raise ModelprofError("%s: cannot make an input of shape %s (%s): %s" % (
                who, tuple(input_shape), dtype, str(e).strip().split("\n")[0]), "usage") from None
    return tuple(args or ())


def ignored_names(model, ignore):
    """The qualified names of the modules whose type is in `ignore` (as
    DeepSpeed compares: type(module) in ignore_list, no subclasses)."""
    ignore = tuple(ignore or ())
    return [n for n, m in model.named_modules() if ignore and type(m) in ignore]


def _write_or_print(text, output_file):
    """DeepSpeed's output_file: the report into that file (its folder made
    when missing), else on stdout."""
    if output_file:
        folder = os.path.dirname(os.path.abspath(output_file))
        os.makedirs(folder, exist_ok=True)
        with open(output_file, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def get_model_profile(model, input_shape=None, args=[], kwargs={}, print_profile=True,
                      detailed=True, module_depth=-1, top_modules=1, warm_up=1,
                      as_string=True, output_file=None, ignore_modules=None,
                      mode="forward", verbose=False):
    """DeepSpeed's get_model_profile: (flops, macs, params) of one forward
    pass of model(*args, **kwargs) (or of a tensor of input_shape), strings
    in DeepSpeed's format when as_string. The model is exported to ONNX in
    eval mode in a temporary folder (removed, also on errors), through the
    same export path as FlopsProfiler, and profiled by the library, which
    prints the report in DeepSpeed's layout (print_profile; into
    output_file when given). module_depth limits the aggregated block (-1:
    every depth), top_modules its modules per depth, detailed adds the
    whole module tree. ignore_modules (module types) leaves the modules of
    those types out, with their submodules: their MACs and FLOPs count
    nowhere (their parameters still do). warm_up is accepted for
    compatibility: the counts are static, nothing is timed. A model on the
    meta device (built without weights) profiles as the same model with
    weights does (_meta.py). verbose=True shows the exporter's own
    warnings."""
    if mode != "forward":
        raise ModelprofError("get_model_profile: mode '%s': only 'forward' is profiled "
                             "(the exported forward pass)" % mode, "usage")
    with _profiled("get_model_profile", model, input_shape, args, kwargs, ignore_modules,
                   verbose) as p:
        d = p.json()
        if _count_by_run(p, d, model):
            d = p.json()
        if print_profile:
            _write_or_print(p.report(_lib.TEXT, depth=module_depth, top=top_modules,
                                     detailed=detailed, tree_depth=-1), output_file)
    tot = d["total"]
    flops, macs, params = tot["flops"], tot["macs"], tot["params"]
    say_unrun(model, params, lambda: d["modules"])
    if as_string:
        return number_to_string(flops), macs_to_string(macs), params_to_string(params)
    return flops, macs, params


def _count_by_run(p, d, model):
    """Sizes only the data decides (a mixture of experts' routed rows, a
    detector's kept boxes) are unknown to the static profile; DeepSpeed's
    profiler counts the forward it ran. The export runs once here on the
    call's own tensors (the library's measured run, which counts those
    nodes with the shapes it saw: docs/COUNTING.md, "Sizes the data
    decides"). Only when every graph input takes its tensor as it is: else,
    and on a meta model (no data), the figures stay unknown. True when it
    ran."""
    tot = d["total"]
    tensors = getattr(p, "call_tensors", None)
    if not tot.get("unknown_nodes") or d.get("unresolved_dims") or _meta.on_meta(model) or tensors is None:
        return False
    if len(tensors) != p.input_count():
        return False
    ins, keep = [], []      # keep: the CPU copies whose addresses the run reads
    for t in tensors:
        c = t.detach().to("cpu").contiguous()
        code = _meta._ONNX_DTYPE.get(str(c.dtype).replace("torch.", ""))
        if code is None:
            return False
        keep.append(c)
        ins.append((code, list(c.shape), c.data_ptr(), c.numel() * c.element_size()))
    try:
        return p.run(warmup=0, iters=1, inputs=ins)
    except ModelprofError as e:
        sys.stderr.write("modelprof: sizes the data decides left unknown: the export could not run "
                         "here (%s)\n" % e)
        return False


def unrun_params(model, counted, modules):
    """The model's parameters (each once, as model.parameters() gives
    them) beyond the `counted` of its profile: those of modules the
    exported forward did not run (a branch not taken: Inception-v3's
    AuxLogits in eval mode) are not in the export; sum(p.numel()) and
    DeepSpeed's profiler count them. Returns (elements, [modules]): the
    outermost modules the export holds no operator of, when their
    parameters are exactly the difference (a module whose weights its
    parent reads, as nn.MultiheadAttention reads out_proj's, holds none and
    is counted); else no names. modules: a function giving the profile's
    module rows, called only when there is a difference."""
    declared = sum(p.numel() for p in model.parameters())
    diff = declared - int(counted or 0)
    if diff <= 0:
        return 0, []
    held = {m["path"] for m in modules()}
    seen, total, where = set(), 0, []
    for name, mod in model.named_modules():
        if not name or name in held:
            continue
        parent = name.rsplit(".", 1)[0] if "." in name else ""
        if parent not in held:
            continue    # inside an outer absent module: counted with it
        n = 0
        for p in mod.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        if n:
            total += n
            where.append(name)
    return diff, where if total == diff else []


def say_unrun(model, counted, modules, planned=False):
    """One line on stderr when unrun_params finds any (get_model_profile,
    modelprof.plan)."""
    n, where = unrun_params(model, counted, modules)
    if n:
        shown = ", ".join(where[:4]) + (" and %d more" % (len(where) - 4) if len(where) > 4 else "")
        sys.stderr.write("modelprof: %s of the model's parameters are not in the export: %s; %s\n"
                         % (format(n, ","), "the forward ran no operator of " + shown if shown
                            else "its forward did not use them",
                            "the plan holds no weights, gradients or optimizer states for them "
                            "(a branch only training runs, as an auxiliary head, is not planned)"
                            if planned else "not counted (sum(p.numel()) and DeepSpeed's "
                            "profiler count them)"))


# model -> (export_key, the export's bytes, the weight table), for models
# on the meta device only (a model with weights is exported each time: its
# bytes hold the weights)
_META_EXPORTS = weakref.WeakKeyDictionary()


def check_module(who, model):
    """A torch.nn.Module written in Python, or a clear ModelprofError: a
    TorchScript module (torch.jit.trace, torch.jit.script) has no Python
    forward for the export to call through and takes no hooks, the model's
    or a submodule's."""
    import torch
    if not isinstance(model, torch.nn.Module):
        raise ModelprofError("%s: model must be a torch.nn.Module, not %s"
                             % (who, type(model).__name__), "usage")
    script = getattr(torch.jit, "ScriptModule", ())
    for name, m in model.named_modules():
        if isinstance(m, script):
            raise ModelprofError(
                "%s: %s is a TorchScript module (%s, made by torch.jit.trace or torch.jit.script): "
                "it has no Python forward to export and takes no hooks; give the Python module, or "
                "export it with torch.onnx.export and run modelprof on the file"
                % (who, "the model" if not name else "submodule '%s'" % name, type(m).__name__),
                "usage")


def _args_tuple(who, args):
    """DeepSpeed's args: a list or tuple of the forward's positional
    arguments; a lone tensor is taken as the one argument."""
    import torch
    if args is None:
        return ()
    if isinstance(args, torch.Tensor):
        return (args,)
    if isinstance(args, (list, tuple)):
        return tuple(args)
    raise ModelprofError("%s: args must be a list or tuple of the forward's positional arguments, "
                         "not %s" % (who, type(args).__name__), "usage")


@contextlib.contextmanager
def _profiled(who, model, input_shape, args, kwargs, ignore_modules=None, verbose=False):
    """The library's static profile (a _lib.Profile) of one forward pass of
    the model, exported in eval mode in a temporary folder (removed, also on
    errors); a meta model's weights declared from its own table."""
    import torch
    check_module(who, model)
    args = _inputs(who, model, input_shape, _args_tuple(who, args), kwargs)
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ModelprofError("%s: kwargs must be a dict of the forward's keyword arguments, not %s"
                             % (who, type(kwargs).__name__), "usage")
    kwargs = dict(kwargs or {})
    if not args and not kwargs:
        raise ModelprofError("%s: give input_shape, args or kwargs" % who, "usage")
    ignored = ignored_names(model, ignore_modules)
    # each module's own mode comes back (a frozen block kept in eval, a
    # dropout kept in train for MC dropout), not the model's for all
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    tmp = tempfile.mkdtemp(prefix="modelprof-")
    try:
        path = os.path.join(tmp, type(model).__name__ + ".onnx")
        # a meta model's export (its graph: no weights) is kept with the
        # model, so get_model_profile and plan export it once
        key = _meta.export_key(model, args, kwargs) if _meta.on_meta(model) else None
        kept = _META_EXPORTS.get(model) if key is not None else None
        if kept is not None and kept[0] == key:
            data, weights = kept[1], kept[2]
        else:
            weights = export_onnx(model, args, kwargs, path, verbose=verbose)
            if weights is None:
                # with weights: the model's parameters and registered
                # buffers, declared so where the export holds them (a buffer
                # read as an operand is no parameter, a scalar nn.Parameter
                # or a learned initial state is one: PyTorch's count is the
                # module's)
                weights = [w for w in _meta.weight_table(model) if w[3] in (_meta.PARAM, _meta.BUFFER)]
            data = _name_root(path, type(model).__name__)
            if key is not None and data is not None:
                _META_EXPORTS[model] = (key, data, weights)
        label = "%s (exported by torch %s)" % (type(model).__name__, torch.__version__)
        classes = {n: type(x).__name__ for n, x in model.named_modules()}
        with (_lib.Profile(None, data=data, name=label, classes=classes, ignore=ignored,
                           weights=weights)
              if data is not None else _lib.Profile(path, classes=classes, ignore=ignored,
                                                    weights=weights)) as p:
            # the graph's inputs, in order: the call's tensors as the export
            # took them (positional, then the keyword ones holding tensors)
            p.call_tensors = tensors_of((tuple(args), [v for v in kwargs.values() if _is_tensor_tree(v)]))
            yield p
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for m, was in modes:
            m.training = was


def _name_root(path, name):
    """The graph's name is the module tree's root: the model's class, not
    the exporter's 'torch_jit'. Returns the model's bytes (profiled from
    memory, named after the class) or None (profile the file)."""
    try:
        import onnx
    except ImportError:
        return
    # the weights stay where the exporter wrote them (the dynamo exporter
    # writes them beside the file): not read, not copied
    m = onnx.load(path, load_external_data=False)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        m.graph.name = name   # weights beside the file: profiled from the file
        onnx.save(m, path)
        return None
    m.graph.name = name
    return m.SerializeToString()
