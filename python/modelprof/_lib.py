"""ctypes over include/modelprof.h: the one place the package touches the C
library. The library is found next to the package after `make install`
(PREFIX/lib/python3/dist-packages/modelprof -> PREFIX/lib/libmodelprof.so.0),
in build/ of a checkout (python/modelprof -> build/libmodelprof.so), or at
$MODELPROF_LIB."""
import ctypes
import json
import os

from ._abi import FUNCTIONS, ReportOptions, RunOptions, TorchModule, TrainOptions

_HERE = os.path.dirname(os.path.abspath(__file__))


class ModelprofError(Exception):
    """A failure of the library (its message names the file, node, event or
    flag) or of the export to ONNX (naming the module)."""

    def __init__(self, message, status="error"):
        super().__init__(message)
        self.status = status


def _candidates():
    env = os.environ.get("MODELPROF_LIB")
    if env:
        yield env
    # installed: PREFIX/lib/python3/dist-packages/modelprof -> PREFIX/lib
    lib = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))
    yield os.path.join(lib, "libmodelprof.so.0")
    # a checkout: python/modelprof -> build/
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libmodelprof.so"))


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    raise ImportError("modelprof: libmodelprof not found (looked at %s; set MODELPROF_LIB)"
                      % ", ".join(tried))


LIB, LIB_PATH = _load()
_c = ctypes
for _name, (_res, _args) in FUNCTIONS.items():
    _f = getattr(LIB, _name)
    _f.restype, _f.argtypes = _res, _args
VERSION = LIB.mp_version().decode()


def options(cls):
    """A struct of options with the library's defaults (mp_X_init with the
    struct's size: the library writes no more than ctypes allocated)."""
    o = cls()
    check(getattr(LIB, _INIT[cls])(_c.byref(o), _c.sizeof(o)))
    return o


_INIT = {ReportOptions: "mp_report_options_init", RunOptions: "mp_run_options_init",
         TrainOptions: "mp_train_options_init"}

TEXT, JSON = 0, 1


def check(status):
    if status != 0:
        name = LIB.mp_status_name(status).decode()
        raise ModelprofError(LIB.mp_last_error().decode("utf-8", "replace"), name)


def take_string(ptr):
    try:
        return _c.string_at(ptr.value).decode("utf-8", "replace")
    finally:
        LIB.mp_free(ptr)


class Profile:
    """A static profile (and, after run(), the measured run) held by the
    library: the model is loaded, dims set, profiled."""

    def __init__(self, path, dims=None, inputs=None, data=None, name=None, classes=None,
                 ignore=None, weights=None):
        """path: an ONNX file; or data: its bytes (kept alive here, as
        mp_model_load_memory asks), named `name` in the report and messages.
        classes: {module path: class name} for exports without classes;
        ignore: module paths left out (mp_model_ignore_module). Modules the
        export does not hold (they ran no operator) are skipped. weights:
        (name, ONNX dtype, shape, kind) of an export without weights
        (mp_model_set_weight); names that are not graph inputs (a tensor
        the forward does not use) are skipped; or the buffers of an export
        with weights, declared so where the export holds them."""
        self._m = _c.c_void_p()
        self._p = _c.c_void_p()
        if data is not None:
            self._data = data
            check(LIB.mp_model_load_memory(data, len(data), (name or "<memory>").encode(), None,
                                           _c.byref(self._m)))
        else:
            check(LIB.mp_model_load(os.fsencode(path), _c.byref(self._m)))
        try:
            if weights:
                graph_inputs = {LIB.mp_model_input_name(self._m, i).decode()
                                for i in range(LIB.mp_model_input_count(self._m))}
                for wname, dtype, shape, kind in weights:
                    arr = (_c.c_int64 * max(1, len(shape)))(*shape)
                    if wname in graph_inputs:
                        check(LIB.mp_model_set_weight(self._m, wname.encode(), dtype, arr,
                                                      len(shape), kind))
                    else:
                        # an export with weights: a parameter or buffer the
                        # export holds is declared so (a help: a name the
                        # export does not hold, or holds otherwise, is left
                        # as it is)
                        LIB.mp_model_set_weight(self._m, wname.encode(), dtype, arr, len(shape), kind)
            for name, value in (dims or {}).items():
                check(LIB.mp_model_set_dim(self._m, name.encode(), int(value)))
            for name, shape in (inputs or {}).items():
                arr = (_c.c_int64 * len(shape))(*shape)
                check(LIB.mp_model_set_input_shape(self._m, name.encode(), arr, len(shape)))
            for mpath, cls in (classes or {}).items():
                # a module that ran no operator is not in the export: skipped
                LIB.mp_model_set_module_class(self._m, mpath.encode(), cls.encode())
            for mpath in ignore or ():
                # absent from the export: it ran no operator, nothing to leave out
                LIB.mp_model_ignore_module(self._m, mpath.encode())
            check(LIB.mp_profile_static(self._m, _c.byref(self._p)))
        except BaseException:
            self.close()
            raise

    def warnings(self):
        return [LIB.mp_model_warning(self._m, i).decode("utf-8", "replace")
                for i in range(LIB.mp_model_warning_count(self._m))]

    def run(self, warmup=3, iters=20, threads=0, inputs=None):
        """A measured run (mp_profile_run). inputs: the graph inputs' data in
        their order, each (onnx dtype, shape, address, bytes); when one
        does not fit its input (mp_exec_set_input refuses it), nothing runs
        and False is returned."""
        o = options(RunOptions)
        o.warmup, o.iters, o.threads = warmup, iters, threads
        plan = _c.c_void_p()
        check(LIB.mp_exec_create(self._p, _c.byref(o), _c.byref(plan)))
        try:
            for i, (dtype, shape, addr, nbytes) in enumerate(inputs or ()):
                name = LIB.mp_model_input_name(self._m, i)
                dims = (_c.c_int64 * max(1, len(shape)))(*shape)
                if name is None or LIB.mp_exec_set_input(plan, name, dtype, len(shape), dims, addr, nbytes):
                    return False
            check(LIB.mp_profile_run(plan, self._p))
        finally:
            LIB.mp_exec_free(plan)
        return True

    def input_count(self):
        return LIB.mp_model_input_count(self._m)

    def formulas(self):
        """The costs as exact formulas in the dims left free (--formula):
        the reports then carry them (docs/JSON.md, "formulas")."""
        check(LIB.mp_profile_formulas(self._p))

    def report(self, fmt=TEXT, depth=-1, top=3, detailed=True, show_ops=True, tree_depth=-2):
        o = options(ReportOptions)
        o.format, o.depth, o.top, o.tree_depth = fmt, depth, top, tree_depth
        o.detailed, o.show_ops = int(bool(detailed)), int(bool(show_ops))
        out = _c.c_void_p()
        check(LIB.mp_report_string(self._p, _c.byref(o), _c.byref(out)))
        return take_string(out)

    def json(self):
        return json.loads(self.report(JSON))

    def plan(self, flags, fmt=JSON):
        """The training plan of this profile (mp_tplan_profile_string):
        flags, [(flag, value or None for a switch)] as the command line's
        plan options."""
        n = len(flags)
        keep = [(f.encode(), None if v is None else str(v).encode()) for f, v in flags]
        fa = (_c.c_char_p * max(1, n))(*[f for f, _ in keep])
        va = (_c.c_char_p * max(1, n))(*[v for _, v in keep])
        out = _c.c_void_p()
        check(LIB.mp_tplan_profile_string(self._p, n, fa, va, fmt, _c.byref(out)))
        return take_string(out)

    def close(self):
        if self._p:
            LIB.mp_profile_free(self._p)
            self._p = _c.c_void_p()
        if self._m:
            LIB.mp_model_free(self._m)
            self._m = _c.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Train:
    """A training profile held by the library (mp_train_open): a trace's
    module times joined with the static profile of the model's export.
    modules: (name, class, trace paths, params, export_calls, ignored) in
    named_modules order (mp_torch_module; trace paths: a list)."""

    def __init__(self, trace_path, model_path, modules):
        arr = (TorchModule * len(modules))()
        self._keep = []
        for i, (name, cls, tpaths, params, export_calls, ignored) in enumerate(modules):
            b = (name.encode(), cls.encode(), "\n".join(tpaths).encode())
            self._keep.append(b)
            arr[i] = TorchModule(b[0], b[1], b[2], int(params), int(export_calls), int(ignored))
        self._t = _c.c_void_p()
        check(LIB.mp_train_open(os.fsencode(trace_path),
                                os.fsencode(model_path) if model_path else None,
                                arr, len(modules), _c.byref(self._t)))

    def set_overhead(self, op_record_s, range_s):
        check(LIB.mp_train_set_overhead(self._t, op_record_s, range_s))

    def set_shapes(self, model_paths, calls):
        """The profiled calls' input shapes: the export of one call of each
        (model_paths) and how many calls had it (mp_train_set_shapes)."""
        n = len(model_paths)
        paths = (_c.c_char_p * n)(*[os.fsencode(p) for p in model_paths])
        counts = (_c.c_int64 * n)(*[int(c) for c in calls])
        check(LIB.mp_train_set_shapes(self._t, paths, counts, n))

    def set_clock(self, before_calls, before_iter_s, before_fwd_s, profiled_calls,
                  profiled_iter_s, profiled_fwd_s):
        check(LIB.mp_train_set_clock(self._t, before_calls, before_iter_s, before_fwd_s,
                                     profiled_calls, profiled_iter_s, profiled_fwd_s))

    def report(self, fmt=TEXT, step=1, depth=-1, top=1, detailed=True):
        o = options(TrainOptions)
        o.format, o.step, o.depth, o.top, o.detailed = fmt, step, depth, top, int(bool(detailed))
        out = _c.c_void_p()
        check(LIB.mp_train_string(self._t, _c.byref(o), _c.byref(out)))
        return take_string(out)

    def json(self):
        return json.loads(self.report(JSON))

    def close(self):
        if self._t:
            LIB.mp_train_free(self._t)
            self._t = _c.c_void_p()

    def __del__(self):
        self.close()


def memory_report(path, format="json", device=None, stack=None, top=None, csv_table="holders"):
    """The report of a CUDA memory snapshot (torch.cuda.memory._dump_snapshot's pickle, read by
    the library without running it): the same as `modelprof memory FILE --format FORMAT`. A
    string (JSON text for format="json"); raises ModelprofError for a file that is not one."""
    from ._abi import MemoryOptions
    fmts = {"text": 0, "json": 1, "html": 2, "csv": 3}
    tables = {"holders": 0, "sites": 1, "events": 2}
    if format not in fmts:
        raise ValueError("memory_report: format is one of %s, not %r" % (", ".join(fmts), format))
    if csv_table not in tables:
        raise ValueError("memory_report: csv_table is one of %s, not %r" % (", ".join(tables), csv_table))
    if stack not in (None, "full", "user"):
        raise ValueError("memory_report: stack is 'full' or 'user', not %r" % (stack,))
    o = MemoryOptions()
    check(LIB.mp_memory_options_init(_c.byref(o), _c.sizeof(o)))
    o.format = fmts[format]
    o.device = -1 if device is None else int(device)
    if top is not None:
        o.top = int(top)
    o.full_stack = 1 if stack == "full" else 0
    o.csv_table = tables[csv_table]
    out = _c.c_void_p()
    check(LIB.mp_memory_report_file(os.fsencode(path), _c.byref(o), _c.byref(out)))
    return take_string(out)


def trace_report(path, fmt=JSON):
    out = _c.c_void_p()
    check(LIB.mp_trace_string(os.fsencode(path), fmt, _c.byref(out)))
    return take_string(out)
