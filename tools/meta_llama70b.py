#!/usr/bin/python3
"""A Llama-architecture decoder at Llama-2-70B's dimensions, built on the
meta device (no weight allocated, as calflops builds Hugging Face models
from their config), profiled with modelprof.get_model_profile and planned
with modelprof.plan: the figures of docs/PLANNING.md ("A model too big for
this machine").

    /usr/bin/python3 tools/meta_llama70b.py [SEQ] [--build build]

The model is tools/fixture_models.py's LlamaForCausalLM with LLAMA_70B
(vocabulary 32,000, hidden 8,192, 80 layers, 64 heads with 8 KV heads,
intermediate 28,672, untied lm_head), in bf16. Measure its memory with
/usr/bin/time -v."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch                                   # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

import fixture_models as fm                    # noqa: E402


class OnMeta(TorchFunctionMode):
    """Tensors the modules create in __init__ go to the meta device in bf16
    (floats) -- what `with torch.device("meta")` does on torch >= 2.0."""
    FACTORIES = (torch.empty, torch.ones, torch.zeros, torch.full, torch.arange, torch.tensor,
                 torch.randn, torch.rand)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.FACTORIES:
            kwargs["device"] = "meta"
            if func in (torch.empty, torch.ones, torch.zeros, torch.randn, torch.rand):
                kwargs["dtype"] = torch.bfloat16
        return func(*args, **kwargs)


def main():
    args = [a for i, a in enumerate(sys.argv[1:]) if not a.startswith("--")
            and not sys.argv[i].startswith("--")]
    seq = int(args[0]) if args else 4096
    if "--build" in sys.argv:
        b = sys.argv[sys.argv.index("--build") + 1]
        os.environ.setdefault("MODELPROF_LIB", os.path.join(ROOT, b, "libmodelprof.so"))
    import modelprof
    t0 = time.time()
    with OnMeta():
        model = fm.LlamaForCausalLM(fm.LLAMA_70B)
    n = sum(p.numel() for p in model.parameters())
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    t1 = time.time()
    flops, macs, params = modelprof.get_model_profile(model, args=[ids], print_profile=False,
                                                      as_string=False)
    t2 = time.time()
    print("Llama 70B dims on the meta device, batch 1, seq %d (torch %s)" % (seq, torch.__version__))
    print("  PyTorch's parameter count: %d" % n)
    print("  get_model_profile: params %d, MACs %d, FLOPs %d (%.1f s; model built in %.1f s)"
          % (params, macs, flops, t2 - t1, t1 - t0))
    layouts = [dict(gpu="h100-sxm", precision="bf16-mixed", optimizer="adamw", zero=3, dp=64,
                    checkpointing=True),
               dict(gpu="h100-sxm", precision="bf16-mixed", optimizer="adamw", tp=8, pp=4,
                    dp=2, micro_batches=8, checkpointing=True),
               dict(gpu="h200", precision="bf16", inference=True)]
    # each plan exports the model again: --plans N keeps the first N
    if "--plans" in sys.argv:
        layouts = layouts[:int(sys.argv[sys.argv.index("--plans") + 1])]
    for kw in layouts:
        t3 = time.time()
        pl = modelprof.plan(model, args=[ids], **kw)
        mem = pl["memory"]
        print("  plan(%s): peak %.2f GB per GPU (weights %.2f, grads %.2f, optimizer %.2f, "
              "activations %.2f GB), step %s s (%.1f s)"
              % (", ".join("%s=%r" % kv for kv in kw.items()), mem["peak_bytes"] / 1e9,
                 mem["weights_bytes"] / 1e9, mem["grads_bytes"] / 1e9,
                 mem["optimizer_bytes"] / 1e9, mem["activations_bytes"] / 1e9,
                 "%.3f" % pl["step_time_s"] if pl.get("step_time_s") else "-", time.time() - t3))
    check = params == n
    print("  params equal PyTorch's: %s" % ("yes" if check else "NO"))
    return 0 if check else 1


if __name__ == "__main__":
    sys.exit(main())
