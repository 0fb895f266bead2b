#!/usr/bin/python3
"""Write a bf16 (or fp16) copy of an ONNX model, weightless.

    /usr/bin/python3 tools/make_bf16.py IN.onnx OUT.onnx [--dtype bf16|fp16]

What `model.to(torch.bfloat16)` then an export would give, as far as the
planner can tell: every fp32 tensor type becomes bf16 (initializers, graph
inputs and outputs, value_info, Cast targets, Constant and ConstantOfShape
values). Weights stay external and absent, as in the fixtures (GUIDE
section 5): a large initializer keeps its external-data entry with the
length halved; a small inline one is converted in place (shape arithmetic
reads only integer tensors). The planner test `plan.bf16_export` plans the
result: weights at 2 bytes a parameter, activations and states in bf16.
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def to16(t, dt):
    if t.data_type != TensorProto.FLOAT:
        return
    if t.data_location == TensorProto.EXTERNAL:
        t.data_type = dt
        for kv in t.external_data:
            if kv.key == "length":
                kv.value = str(int(kv.value) // 2)
        return
    a = numpy_helper.to_array(t).astype(np.float32)
    name = t.name
    if dt == TensorProto.FLOAT16:
        new = numpy_helper.from_array(a.astype(np.float16), name)
    else:  # bf16: the upper 16 bits of the fp32 pattern (round to nearest even)
        u = a.view(np.uint32).astype(np.uint64)
        s16 = np.uint64(16)
        u = ((u + np.uint64(0x7FFF) + ((u >> s16) & np.uint64(1))) >> s16).astype(np.uint16)
        new = onnx.helper.make_tensor(name, TensorProto.BFLOAT16, a.shape, u.tobytes(), raw=True)
    t.CopyFrom(new)


def convert(m, dt):
    g = m.graph
    for t in g.initializer:
        to16(t, dt)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.elem_type == TensorProto.FLOAT:
            tt.elem_type = dt
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = dt
            if a.type == onnx.AttributeProto.TENSOR:
                to16(a.t, dt)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    a = ap.parse_args()
    dt = TensorProto.BFLOAT16 if a.dtype == "bf16" else TensorProto.FLOAT16
    m = convert(onnx.load(a.src, load_external_data=False), dt)
    onnx.save(m, a.dst)


if __name__ == "__main__":
    main()
