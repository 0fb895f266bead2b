"""The C API as ctypes sees it: mirrors of the structs of include/modelprof.h
and the prototypes of the functions the package calls. Nothing here loads
the library (_lib.py does, and applies FUNCTIONS to it).

tools/abi_check.py checks this file against the header at build time (`make`)
and in the tests: every struct's fields (names, order, types; sizes and
offsets as the C compiler lays them out) and every prototype (return and
argument types). Change the header, and this file must follow, or the build
fails. C_NAME names the struct each class mirrors."""
import ctypes as _c


class Limits(_c.Structure):
    C_NAME = "mp_limits"
    _fields_ = [("size", _c.c_size_t), ("max_nodes", _c.c_int64), ("max_values", _c.c_int64),
                ("max_attr_elems", _c.c_int64), ("max_memory", _c.c_int64),
                ("max_depth", _c.c_int64)]


class ReportOptions(_c.Structure):
    C_NAME = "mp_report_options"
    _fields_ = [("size", _c.c_size_t), ("format", _c.c_int), ("depth", _c.c_int),
                ("top", _c.c_int), ("detailed", _c.c_int), ("show_ops", _c.c_int),
                ("csv_table", _c.c_int), ("by_module_op", _c.c_int), ("op_top", _c.c_int),
                ("tree_depth", _c.c_int)]


class RunOptions(_c.Structure):
    C_NAME = "mp_run_options"
    _fields_ = [("size", _c.c_size_t), ("warmup", _c.c_int), ("iters", _c.c_int),
                ("threads", _c.c_int), ("fuse", _c.c_int), ("node_timing", _c.c_int),
                ("peak_gflops", _c.c_double), ("seed", _c.c_uint64), ("max_memory", _c.c_int64),
                ("progress", _c.c_int), ("keep_timestamps", _c.c_int)]


class TorchModule(_c.Structure):
    C_NAME = "mp_torch_module"
    _fields_ = [("name", _c.c_char_p), ("class_name", _c.c_char_p), ("trace_path", _c.c_char_p),
                ("params", _c.c_int64), ("export_calls", _c.c_int64), ("ignored", _c.c_int)]


class TrainOptions(_c.Structure):
    C_NAME = "mp_train_options"
    _fields_ = [("size", _c.c_size_t), ("format", _c.c_int), ("step", _c.c_int),
                ("depth", _c.c_int), ("top", _c.c_int), ("detailed", _c.c_int)]


class MemoryOptions(_c.Structure):
    C_NAME = "mp_memory_options"
    _fields_ = [("size", _c.c_size_t), ("format", _c.c_int), ("device", _c.c_int), ("top", _c.c_int),
                ("full_stack", _c.c_int), ("csv_table", _c.c_int)]


STRUCTS = [Limits, ReportOptions, RunOptions, TorchModule, TrainOptions, MemoryOptions]

_P = _c.POINTER
_H = _c.c_void_p          # a handle (mp_model *, mp_profile *, ...)
_OUT = _P(_c.c_void_p)    # where the library puts a handle or a string it allocated
_ST = _c.c_int            # mp_status

# name: (return type, [argument types])
FUNCTIONS = {
    "mp_version": (_c.c_char_p, []),
    "mp_free": (None, [_c.c_void_p]),
    "mp_status_name": (_c.c_char_p, [_c.c_int]),
    "mp_last_error": (_c.c_char_p, []),
    "mp_model_load": (_ST, [_c.c_char_p, _OUT]),
    "mp_model_load_memory": (_ST, [_c.c_char_p, _c.c_size_t, _c.c_char_p, _P(Limits), _OUT]),
    "mp_model_free": (None, [_H]),
    "mp_model_warning_count": (_c.c_int, [_H]),
    "mp_model_warning": (_c.c_char_p, [_H, _c.c_int]),
    "mp_model_absent_weights": (_c.c_char_p, [_H]),
    "mp_model_set_dim": (_ST, [_H, _c.c_char_p, _c.c_int64]),
    "mp_model_set_input_shape": (_ST, [_H, _c.c_char_p, _P(_c.c_int64), _c.c_int]),
    "mp_model_set_module_class": (_ST, [_H, _c.c_char_p, _c.c_char_p]),
    "mp_model_ignore_module": (_ST, [_H, _c.c_char_p]),
    "mp_model_input_count": (_c.c_int, [_H]),
    "mp_model_input_name": (_c.c_char_p, [_H, _c.c_int]),
    "mp_tplan_option_kind": (_c.c_int, [_c.c_char_p]),
    "mp_model_set_weight": (_ST, [_H, _c.c_char_p, _c.c_int, _P(_c.c_int64), _c.c_int, _c.c_int]),
    "mp_tplan_profile_string": (_ST, [_H, _c.c_int, _P(_c.c_char_p), _P(_c.c_char_p), _c.c_int,
                                      _OUT]),
    "mp_profile_static": (_ST, [_H, _OUT]),
    "mp_profile_free": (None, [_H]),
    "mp_profile_formulas": (_ST, [_H]),
    "mp_report_options_init": (_ST, [_P(ReportOptions), _c.c_size_t]),
    "mp_report_string": (_ST, [_H, _P(ReportOptions), _OUT]),
    "mp_trace_string": (_ST, [_c.c_char_p, _c.c_int, _OUT]),
    "mp_memory_options_init": (_ST, [_P(MemoryOptions), _c.c_size_t]),
    "mp_memory_report_file": (_ST, [_c.c_char_p, _P(MemoryOptions), _OUT]),
    "mp_train_open": (_ST, [_c.c_char_p, _c.c_char_p, _P(TorchModule), _c.c_int, _OUT]),
    "mp_train_free": (None, [_H]),
    "mp_train_set_clock": (_ST, [_H, _c.c_int, _c.c_double, _c.c_double, _c.c_int, _c.c_double,
                                 _c.c_double]),
    "mp_train_set_overhead": (_ST, [_H, _c.c_double, _c.c_double]),
    "mp_train_set_shapes": (_ST, [_H, _P(_c.c_char_p), _P(_c.c_int64), _c.c_int]),
    "mp_train_options_init": (_ST, [_P(TrainOptions), _c.c_size_t]),
    "mp_train_string": (_ST, [_H, _P(TrainOptions), _OUT]),
    "mp_run_options_init": (_ST, [_P(RunOptions), _c.c_size_t]),
    "mp_exec_create": (_ST, [_H, _P(RunOptions), _OUT]),
    "mp_exec_free": (None, [_H]),
    "mp_profile_run": (_ST, [_H, _H]),
    "mp_exec_set_input": (_ST, [_H, _c.c_char_p, _c.c_int, _c.c_int, _P(_c.c_int64), _c.c_void_p,
                                _c.c_size_t]),
}
