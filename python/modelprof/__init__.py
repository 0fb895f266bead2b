"""modelprof from PyTorch: a thin layer over the C library
(include/modelprof.h): no counting happens in Python.

    import modelprof
    flops, macs, params = modelprof.get_model_profile(model, input_shape=(1, 3, 224, 224))
    prof = modelprof.FlopsProfiler(model)   # per-module fwd/bwd time of real steps
    modelprof.plan(model, args=(x,), gpu="h100-sxm", zero=3)   # the plan's JSON object
"""
from ._lib import LIB_PATH, ModelprofError, memory_report
from .torchprof import (analyze_trace, flops_to_string, get_model_profile, macs_to_string,
                        number_to_string, params_to_string, profile_onnx)

from ._plan import plan
from ._lib import VERSION as __version__  # the library's (mp_version)
from . import memory  # noqa: E402,F401  (modelprof.memory.record: CUDA memory history)


def __getattr__(name):
    # FlopsProfiler imports torch; `import modelprof` alone does not
    if name == "FlopsProfiler":
        from .trainprof import FlopsProfiler
        return FlopsProfiler
    raise AttributeError(name)


__all__ = ["FlopsProfiler", "ModelprofError", "analyze_trace", "get_model_profile", "plan",
           "profile_onnx", "number_to_string", "macs_to_string", "flops_to_string",
           "params_to_string", "LIB_PATH", "memory_report"]
