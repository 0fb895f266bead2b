"""Models on the meta device (built from a config without weights, as
calflops and `accelerate.init_empty_weights` do): exported without values,
their weights declared to the library from the model itself.

The export: PyTorch's TorchScript exporter with export_params=False, so the
parameters and buffers are graph inputs named by their state_dict names.
Three of its passes read weight values, which meta tensors do not have; for
the duration of the export they get none (the same three as
tools/make_llama7b.py):
  - graph and node shape inference get an empty parameter dict (shapes
    come from the traced types, never from values);
  - the merging of equal initializers is skipped: it compares values (or,
    in train mode, data pointers, which every meta tensor shares as null),
    so it would merge every weight of one shape into one.
Ties are the model's: the exporter takes each tensor once by identity
(torch.jit._unique_state_dict), and the table below is built the same way.
Buffers the model does not save (register_buffer(persistent=False), a
rotary inv_freq) would become constants holding meta data the exporter
cannot write: for the export they are saved (graph inputs) and declared as
constants, neither parameters nor buffers.

Tensor constants the tracer made of meta tensors (a traced size divided
by an int) are never equal to the exporter's common subexpression pass
(meta_constants_unequal): it compares them with aten::equal, which has no
Meta kernel. Constants whose values the tracer computed from meta tensors
(Swin's shifted-window mask pieces) are written as zeros
(meta_constants_zeroed): a mask made so reads as no mask.

torch 1.13's tracer records a convolution below aten::convolution (as
aten::_convolution, which ONNX's symbolic reads); on the meta device the
convolution's meta kernel answers first and nothing is recorded, so a
TorchFunctionMode records each convolution of meta tensors itself: the
node the tracer would have written, with the output's traced value.

The table (mp_model_set_weight): name, ONNX dtype, shape, kind (0 a
parameter, 1 a buffer, 2 a constant), for each tensor of the state dict,
once by identity."""
import contextlib

# torch dtype name -> ONNX TensorProto.DataType
_ONNX_DTYPE = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
               "int64": 7, "bool": 9, "float16": 10, "float64": 11, "uint32": 12, "uint64": 13,
               "complex64": 14, "complex128": 15, "bfloat16": 16}
PARAM, BUFFER, CONST = 0, 1, 2


def on_meta(model):
    """Whether any of the model's parameters or buffers is on the meta device."""
    for t in list(model.parameters()) + list(model.buffers()):
        if t.device.type == "meta":
            return True
    return False


def to_meta(x):
    """Tensors of an argument tree moved to the meta device (shapes and
    dtypes kept); anything else as it is."""
    import torch
    if isinstance(x, torch.Tensor):
        return x if x.device.type == "meta" else x.to("meta")
    if isinstance(x, tuple):
        return tuple(to_meta(v) for v in x)
    if isinstance(x, list):
        return [to_meta(v) for v in x]
    if isinstance(x, dict):
        return {k: to_meta(v) for k, v in x.items()}
    return x


def _signature(x):
    """An argument tree with each tensor as (shape, dtype); anything else
    as its repr."""
    import torch
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), str(x.dtype))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _signature(v)) for k, v in sorted(x.items(), key=lambda kv: str(kv[0])))
    return repr(x)


def export_key(model, args, kwargs):
    """What a meta model's export depends on that a caller can change
    without making a new model: its modules (names and classes), its
    tensors (names, shapes, dtypes, which are tied) and the call's
    arguments (shapes and dtypes of tensors, values of the rest). Two
    calls with the same key export the same graph (a meta model has no
    values to differ), so get_model_profile and plan on one model export
    it once (torchprof._profiled)."""
    mods = tuple((n, type(m).__name__) for n, m in model.named_modules())
    ids = {}
    tensors = tuple((n, tuple(t.shape), str(t.dtype), ids.setdefault(id(t), len(ids)))
                    for n, t in model.state_dict(keep_vars=True).items())
    return (type(model).__name__, mods, tensors, _signature(tuple(args)), _signature(dict(kwargs or {})))


def weight_table(model, unsaved=()):
    """(name, onnx dtype, shape, kind) for each tensor of the state dict,
    once by identity (the exporter's naming: the first name of a tied
    tensor). unsaved: names of buffers the model does not save (kind
    constant)."""
    params = {id(p) for p in model.parameters()}
    seen, out = set(), []
    # the state dict, then the buffers it leaves out (persistent=False: a
    # causal table, rotary caches), which the export holds too
    named = list(model.state_dict(keep_vars=True).items()) + list(model.named_buffers())
    for name, t in named:
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        dt = str(t.dtype).replace("torch.", "")
        if dt not in _ONNX_DTYPE:
            continue
        kind = PARAM if id(t) in params else (CONST if name in unsaved else BUFFER)
        out.append((name, _ONNX_DTYPE[dt], tuple(int(d) for d in t.shape), kind))
    return out


@contextlib.contextmanager
def saved_buffers(model):
    """Buffers the model does not save become saved for the export (graph
    inputs, not constants holding meta data). Yields their state_dict
    names; restored afterwards."""
    changed, names = [], []
    for prefix, m in model.named_modules():
        nps = getattr(m, "_non_persistent_buffers_set", None)
        if nps:
            changed.append((m, set(nps)))
            names.extend((prefix + "." if prefix else "") + b for b in nps)
            nps.clear()
    try:
        yield set(names)
    finally:
        for m, nps in changed:
            m._non_persistent_buffers_set.update(nps)


def _exporter_module():
    """The module of the TorchScript exporter's passes (torch._C)."""
    from torch import _C
    return _C


@contextlib.contextmanager
def exporter_without_values():
    """The exporter's passes that read weight values get none (module
    docstring). Restored afterwards."""
    _C = _exporter_module()
    names = ("_jit_pass_onnx_graph_shape_type_inference",
             "_jit_pass_onnx_node_shape_type_inference",
             "_jit_pass_onnx_deduplicate_initializers")
    saved = {k: getattr(_C, k) for k in names if hasattr(_C, k)}
    g = saved.get(names[0])
    n = saved.get(names[1])
    if g is not None:
        setattr(_C, names[0], lambda graph, params, opset, *a: g(graph, {}, opset, *a))
    if n is not None:
        setattr(_C, names[1], lambda node, params, opset, *a: n(node, {}, opset, *a))
    if names[2] in saved:
        setattr(_C, names[2], lambda graph, params, training: params)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(_C, k, v)


@contextlib.contextmanager
def meta_constants_zeroed():
    """Constants whose values the tracer computed from meta tensors have
    none to write (torchvision's Swin builds its shifted windows' mask with
    x.new_zeros and slice assignments: its pieces become Constant nodes
    holding meta tensors, and the writer cannot copy them out). For the
    export's duration the writer gets zeros of the same shape and type in
    their place. Nothing the counts read comes from such values (shapes
    and indices are the tracer's ints, written as they are); a mask made
    so reads as no mask (a causal one would be bidirectional)."""
    try:
        import torch
        G = torch._C.Graph
        orig = G._export_onnx
    except (ImportError, AttributeError):
        yield
        return

    def export_onnx(self, *a, **k):
        for n in self.nodes():
            if n.kind() != "onnx::Constant" or "value" not in n.attributeNames():
                continue
            try:
                t = n.t("value")
            except RuntimeError:    # not a tensor attribute
                continue
            if t.device.type == "meta":
                n.t_("value", torch.zeros(t.shape, dtype=t.dtype))
        return orig(self, *a, **k)
    G._export_onnx = export_onnx
    try:
        yield
    finally:
        G._export_onnx = orig


@contextlib.contextmanager
def meta_constants_unequal():
    """Tensor constants the tracer made from meta tensors (torchvision's
    Swin divides a traced size by the window: `pad_H // window_size[0]`
    wraps the int in a meta tensor) reach the exporter's common
    subexpression pass, which compares constants with aten::equal: meta
    tensors have no values, and no Meta kernel answers. For the export's
    duration one does, saying unequal: such constants are not merged, which
    only keeps apart size arithmetic the real model's export would merge
    (a few shape operators more, no parameter, MAC or peak moved)."""
    import torch
    # nonzero's count is the data's: a meta tensor says one (not none: a
    # forward that skips an expert with no tokens still traces it; not every
    # element: index_add_'s exporter refuses a source longer than its
    # target). The export records the operator; the library sizes what
    # follows it (unknown, or a mixture of experts' routing planned
    # balanced). Each kernel is given alone: a PyTorch that has its own Meta
    # kernel of one (torch 2.x has nonzero's) refuses that one only.
    kernels = (("equal", lambda a, b: False),
               ("nonzero", lambda a: torch.zeros((min(a.numel(), 1), a.dim()), dtype=torch.long, device="meta")))
    libs = []
    for name, fn in kernels:
        try:
            lib = torch.library.Library("aten", "IMPL", "Meta")
            lib.impl(name, fn)
            libs.append(lib)
        except Exception:   # registered already, or no Python kernels: PyTorch's own
            pass
    try:
        yield
    finally:
        del libs[:]


def _ints(v, k):
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)] * k


def _one_hot(func, args, kwargs):
    """F.one_hot of a meta tensor: its kernel reads the indices' values
    (their range), which a meta tensor does not have. With num_classes
    given, the output is computed untraced as indices == arange(n) (its
    shape and type are all a meta tensor has) and the trace records
    aten::one_hot itself, as a real export does (ONNX OneHot: the pattern
    layer reads a mixture of experts' routing from it)."""
    import torch
    from torch import _C
    x = args[0] if args else kwargs.get("tensor", kwargs.get("input"))
    n = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
    state = _C._get_tracing_state()
    if state is None or not isinstance(x, torch.Tensor) or x.device.type != "meta" or int(n) < 0:
        return func(*args, **kwargs)
    _C._set_tracing_state(None)
    try:
        out = (x.unsqueeze(-1) == torch.arange(int(n), device=x.device)).long()
    finally:
        _C._set_tracing_state(state)
    g = state.graph()
    node = g.create("aten::one_hot", [_C._get_value_trace(x), g.insertConstant(int(n))], 1)
    g.insertNode(node)
    node.output().inferTypeFrom(out)
    _C._set_value_trace(out, node.output())
    return out


def traced_meta_conv():
    """A TorchFunctionMode that records the convolutions of meta tensors in
    the trace (module docstring)."""
    import torch
    import torch.nn.functional as F
    from torch import _C
    from torch.overrides import TorchFunctionMode

    conv = {F.conv1d: (1, False), F.conv2d: (2, False), F.conv3d: (3, False),
            F.conv_transpose1d: (1, True), F.conv_transpose2d: (2, True),
            F.conv_transpose3d: (3, True)}
    fwd = ["input", "weight", "bias", "stride", "padding", "dilation", "groups"]
    tr = ["input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"]

    class TracedMetaConv(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") == "one_hot":
                return _one_hot(func, args, kwargs)
            spec = conv.get(func)
            state = _C._get_tracing_state() if spec else None
            if state is None:
                return func(*args, **kwargs)
            k, transposed = spec
            a = dict(zip(tr if transposed else fwd, args))
            a.update(kwargs)
            x, w, b = a["input"], a["weight"], a.get("bias")
            if not isinstance(x, torch.Tensor) or x.device.type != "meta":
                return func(*args, **kwargs)
            stride, dil = _ints(a.get("stride", 1), k), _ints(a.get("dilation", 1), k)
            pad = a.get("padding", 0)
            if isinstance(pad, str):
                total = [d * (s - 1) for d, s in zip(dil, w.shape[2:])]
                if pad == "valid":
                    pad = [0] * k
                elif all(t % 2 == 0 for t in total):
                    pad = [t // 2 for t in total]
                else:   # asymmetric "same": the exporter pads first; left to it
                    return func(*args, **kwargs)
            pad = _ints(pad, k)
            opad = _ints(a.get("output_padding", 0), k)
            groups = int(a.get("groups", 1))
            _C._set_tracing_state(None)
            try:
                out = func(*args, **kwargs)
            finally:
                _C._set_tracing_state(state)
            g = state.graph()
            vals = [_C._get_value_trace(x), _C._get_value_trace(w),
                    _C._get_value_trace(b) if b is not None else g.insertConstant(None)]
            vals += [g.insertConstant(v) for v in (stride, pad, dil, transposed, opad, groups,
                                                   False, False, True, True)]
            node = g.create("aten::_convolution", vals, 1)
            g.insertNode(node)
            node.output().inferTypeFrom(out)
            _C._set_value_trace(out, node.output())
            return out

    return TracedMetaConv()


@contextlib.contextmanager
def without_onnx_shape_inference():
    """The exporter's own ONNX shape inference off (torch.onnx.utils._export's
    onnx_shape_inference=False). torch 1.13's runs it after converting each
    node, at a cost that grows with the graph: a Llama of 70B's dimensions
    exports in 3.0 s at 4 blocks and 38 s at 16; without it, 1.9 s and
    10.7 s. The library infers every shape itself. What changes: the
    exporter writes some shape arithmetic as operators (Shape, Gather,
    Concat) instead of constants, so FLOPs and bytes move by a few
    elements; parameters, MACs, the activation peak and the plan do not
    (tests/python/run.py, meta_device_models)."""
    import functools
    import importlib
    import inspect
    # torch 1.13 has the exporter in torch.onnx.utils; torch 2.x in
    # torch.onnx._internal.torchscript_exporter.utils (export calls the
    # _export of its own module)
    saved = []
    for name in ("torch.onnx.utils", "torch.onnx._internal.torchscript_exporter.utils"):
        try:
            U = importlib.import_module(name)
            orig = U._export
        except (ImportError, AttributeError):
            continue
        if isinstance(orig, functools.partial) or "onnx_shape_inference" not in inspect.signature(orig).parameters:
            continue
        U._export = functools.partial(orig, onnx_shape_inference=False)
        saved.append((U, orig))
    try:
        yield
    finally:
        for U, orig in saved:
            U._export = orig


@contextlib.contextmanager
def meta_export(model):
    """Everything a meta model's export needs, for its duration (module
    docstring). Yields the names of the buffers the model does not save."""
    with saved_buffers(model) as unsaved, exporter_without_values(), traced_meta_conv(), \
            without_onnx_shape_inference(), meta_constants_unequal(), meta_constants_zeroed():
        yield unsaved
