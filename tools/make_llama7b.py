#!/usr/bin/python3
"""Write a weightless Llama-2-7B-sized decoder (fp16) for the benchmark.

    /usr/bin/python3 tools/make_llama7b.py [OUT.onnx] [7b|8b|70b]   (default build/bench/llama7b.onnx, 7b)

(70b: Llama-2-70B's sizes, 68,976,648,192 parameters, for the planner's
benchmark: bench/bench_plan.c.)

The model is the same hand-written LlamaForCausalLM as the llama_small
fixture (tools/fixture_models.py) with the 7B config: vocab 32000, hidden
4096, 32 layers, 32 heads, intermediate 11008, RMSNorm eps 1e-6, rotary,
SwiGLU, untied lm_head; 6,738,415,616 parameters, all fp16.

It is exported by the TorchScript exporter from torch's "meta" device, so no
weight is ever allocated (~0.3 GB RAM, a few seconds).  torch 1.13 needs
three of its private passes bent for that; each is patched only for the
duration of the export:
  * _jit_pass_onnx_graph_shape_type_inference / _node_shape_type_inference
    get an empty params dict (they try to read parameter values, which meta
    tensors do not have; weights are never needed for shapes);
  * _jit_pass_onnx_deduplicate_initializers is skipped (it compares weight
    values; with real trained weights nothing would be merged anyway).
export_params=False turns the weights into graph inputs; they are then
turned into fp16 initializers stored as EXTERNAL data in
<stem>.weights.bin, a file that is never written (same as the fixtures).
The rotary inv_freq buffer (non-persistent in the fixture, so a Constant
there) is exported as an input too and replaced by a Constant node here.
"""

import io
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np                          # noqa: E402
import onnx                                 # noqa: E402
from onnx import helper, numpy_helper       # noqa: E402
import torch                                # noqa: E402
from torch import _C                        # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

import fixture_models as fm                 # noqa: E402

OPSET = 14
ALIGN = 4096
DTYPE = torch.float16
ONNX_DTYPE_SIZE = {onnx.TensorProto.FLOAT16: 2, onnx.TensorProto.FLOAT: 4,
                   onnx.TensorProto.BFLOAT16: 2, onnx.TensorProto.DOUBLE: 8}


class MetaFactories(TorchFunctionMode):
    """Create parameters (torch.empty/ones/zeros) on the meta device in fp16."""
    FACTORIES = (torch.empty, torch.ones, torch.zeros)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self.FACTORIES:
            kwargs["device"] = "meta"
            kwargs["dtype"] = DTYPE
        return func(*args, **kwargs)


class PatchedExporterPasses:
    def __enter__(self):
        self.saved = {k: getattr(_C, k) for k in (
            "_jit_pass_onnx_graph_shape_type_inference",
            "_jit_pass_onnx_node_shape_type_inference",
            "_jit_pass_onnx_deduplicate_initializers")}
        g, n = (self.saved["_jit_pass_onnx_graph_shape_type_inference"],
                self.saved["_jit_pass_onnx_node_shape_type_inference"])
        _C._jit_pass_onnx_graph_shape_type_inference = lambda graph, params, opset: g(graph, {}, opset)
        _C._jit_pass_onnx_node_shape_type_inference = lambda node, params, opset: n(node, {}, opset)
        _C._jit_pass_onnx_deduplicate_initializers = lambda graph, params, training: params
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(_C, k, v)
        return False


def build(config):
    with MetaFactories():
        model = fm.LlamaForCausalLM(config)
    inv_freq = {}
    for i, layer in enumerate(model.model.layers):
        rot = layer.self_attn.rotary_emb
        name = "model.layers.%d.self_attn.rotary_emb.inv_freq" % i
        inv_freq[name] = rot.inv_freq.numpy().copy()       # computed on CPU, fp32
        del rot._buffers["inv_freq"]
        rot.register_buffer("inv_freq", torch.empty(inv_freq[name].shape, device="meta"),
                            persistent=True)               # -> a graph input, no data needed
    return model.eval(), inv_freq


def export(model):
    ids = torch.zeros(1, 8, dtype=torch.long, device="meta")
    f = io.BytesIO()
    axes = {0: "batch", 1: "seq"}
    with PatchedExporterPasses():
        torch.onnx.export(
            model, (ids,), f, export_params=False, opset_version=OPSET,
            training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
            input_names=["input_ids"], output_names=["logits"],
            dynamic_axes={"input_ids": axes, "logits": axes})
    return onnx.load_from_string(f.getvalue())


def weights_to_external(m, inv_freq, location):
    """Graph inputs that are weights -> EXTERNAL initializers; inv_freq -> Constant."""
    keep, offset, nbytes = [], 0, 0
    constants = []
    for vi in m.graph.input:
        if vi.name == "input_ids":
            keep.append(vi)
            continue
        if vi.name in inv_freq:
            constants.append(helper.make_node(
                "Constant", [], [vi.name],
                name="/model/layers.%s/self_attn/rotary_emb/Constant_inv_freq"
                % vi.name.split(".")[2],
                value=numpy_helper.from_array(inv_freq[vi.name].astype(np.float32))))
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value for d in tt.shape.dim]
        t = onnx.TensorProto()
        t.name, t.data_type = vi.name, tt.elem_type
        t.dims.extend(dims)
        length = int(np.prod(dims)) * ONNX_DTYPE_SIZE[tt.elem_type]
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        m.graph.initializer.append(t)
        nbytes += length
        offset = (offset + length + ALIGN - 1) // ALIGN * ALIGN
    del m.graph.input[:]
    m.graph.input.extend(keep)
    nodes = constants + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return nbytes


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bench", "llama7b.onnx")
    if not torch.__version__.startswith("1.13"):
        print("warning: written for torch 1.13 (private exporter passes are patched); "
              "this is torch %s" % torch.__version__, file=sys.stderr)
    t0 = time.time()
    cfg = {"7b": fm.LLAMA_7B, "8b": fm.LLAMA3_8B, "70b": fm.LLAMA_70B}[sys.argv[2] if len(sys.argv) > 2 else "7b"]
    model, inv_freq = build(cfg)
    params = sum(p.numel() for p in model.parameters())
    m = export(model)
    onnx.checker.check_model(m)            # before the weights go to an absent file
    stem = os.path.splitext(os.path.basename(out))[0]
    nbytes = weights_to_external(m, inv_freq, stem + ".weights.bin")
    inits = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    if inits != params:
        raise SystemExit("parameter count mismatch: initializers %d, torch %d" % (inits, params))

    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    logits = [d.dim_param or d.dim_value for d in
              inferred.graph.output[0].type.tensor_type.shape.dim]
    if logits != ["batch", "seq", cfg["vocab_size"]]:
        raise SystemExit("unexpected logits shape %r" % logits)

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    onnx.save(m, out)
    print("%s: %d params (fp16, %.2f GB absent in %s.weights.bin), %d nodes, "
          "%d bytes, logits %s, %.1fs"
          % (out, params, nbytes / 1e9, stem, len(m.graph.node), os.path.getsize(out),
             logits, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
