#!/usr/bin/python3
"""Regenerate modelprof's fixture models (models/*.onnx + models/expected.json).

Each fixture is a real PyTorch model (torchvision classification,
segmentation or detection, or a hand-written transformer, LSTM/GRU tagger or
quantized CNN from tools/fixture_models.py), randomly initialised with
torch.manual_seed(0), exported with the TorchScript exporter
(torch.onnx.export, training=PRESERVE, do_constant_folding=False so that
BatchNorm stays a node and the parameter count matches PyTorch exactly), and
then stripped of its weights: every float initializer with more than 16
elements becomes EXTERNAL data pointing at `<stem>.weights.bin`, a file that
is never written (see GUIDE section 5).  One fixture (quant_cnn_qoperator)
is written with onnx.helper from the quantized PyTorch model instead, since
torch cannot export that form (docs/FIXTURES.md).

    /usr/bin/python3 tools/export_fixtures.py                 # all fixtures -> models/
    /usr/bin/python3 tools/export_fixtures.py --only resnet18 --only gpt2
    /usr/bin/python3 tools/export_fixtures.py --keep-weights --only resnet50 --out build/bench
        # -> build/bench/resnet50_weights.onnx with weights inline (never committed)
    /usr/bin/python3 tools/export_fixtures.py --list

expected.json in the output folder is updated (entries of fixtures not
exported in this run are kept).
"""

import argparse
import collections
import hashlib
import re
import json
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import onnx                    # noqa: E402
import torch                   # noqa: E402
import torchvision             # noqa: E402

import fixture_models as fm    # noqa: E402

OPSET = 14
OPSET_FUNCTIONS = 15
SMALL_FLOAT_ELEMS = 16          # float initializers with more elements go external
ALIGN = 4096

FLOAT_TYPES = {
    onnx.TensorProto.FLOAT: 4,
    onnx.TensorProto.FLOAT16: 2,
    onnx.TensorProto.BFLOAT16: 2,
    onnx.TensorProto.DOUBLE: 8,
}


# --------------------------------------------------------------------------
# fixture table
# --------------------------------------------------------------------------

class Fixture:
    def __init__(self, name, build, example, input_names, output_names,
                 dynamic_axes, config, opset=OPSET, functions=False, note="",
                 dims=None, make_onnx=None, data_dependent=()):
        self.name = name
        self.build = build              # () -> nn.Module
        self.example = example          # () -> tuple of example inputs
        self.input_names = input_names
        self.output_names = output_names
        self.dynamic_axes = dynamic_axes
        self.config = config
        self.opset = opset
        self.functions = functions
        self.note = note
        self.dims = dims                # values tests should give the symbolic dims
        self.make_onnx = make_onnx      # (nn.Module) -> ModelProto instead of torch.onnx.export
        self.data_dependent = list(data_dependent)  # outputs whose size depends on values


def image_input():
    return (torch.randn(1, 3, 224, 224),)


IMAGE_AXES = {"input": {0: "batch"}, "logits": {0: "batch"}}


def vision(name, arch, **kwargs):
    def build():
        return getattr(torchvision.models, arch)(weights=None, **kwargs)
    config = dict(arch=arch, source="torchvision %s" % torchvision.__version__,
                  input=[1, 3, 224, 224], **kwargs)
    return Fixture(name, build, image_input, ["input"], ["logits"],
                   IMAGE_AXES, config)


def token_input(vocab, seq=16, mask=False):
    def example():
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, vocab, (2, seq), generator=g, dtype=torch.long)
        if not mask:
            return (ids,)
        return (ids, torch.ones(2, seq, dtype=torch.long))
    return example


TOKEN_AXES = {0: "batch", 1: "seq"}


def bert(name, config, functions=False):
    return Fixture(
        name, lambda: fm.Bert(config),
        token_input(config["vocab_size"], mask=True),
        ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"],
        {"input_ids": TOKEN_AXES, "attention_mask": TOKEN_AXES,
         "last_hidden_state": TOKEN_AXES, "pooler_output": {0: "batch"}},
        dict(config, model="BertModel (hand-written, HF names)"),
        opset=OPSET_FUNCTIONS if functions else OPSET, functions=functions)


def decoder(name, cls, config, model_desc):
    return Fixture(
        name, lambda: cls(config), token_input(config["vocab_size"]),
        ["input_ids"], ["logits"],
        {"input_ids": TOKEN_AXES, "logits": TOKEN_AXES},
        dict(config, model=model_desc))


def segmentation(name, arch, size=520, **kwargs):
    """torchvision.models.segmentation; output "out" [batch, 21, size, size]
    (the aux head is off, so the output dict holds "out" only)."""
    def build():
        return getattr(torchvision.models.segmentation, arch)(
            weights=None, weights_backbone=None, **kwargs)
    config = dict(arch="segmentation." + arch,
                  source="torchvision %s" % torchvision.__version__,
                  input=[1, 3, size, size], weights_backbone=None, **kwargs)
    return Fixture(name, build, lambda: (torch.randn(1, 3, size, size),),
                   ["input"], ["out"], {"input": {0: "batch"}, "out": {0: "batch"}},
                   config, dims={"batch": 1})


def detection(name, arch, size=320, note="", **kwargs):
    """torchvision.models.detection in eval mode: the input is a list of
    CHW images (here one, 3 x size x size, static: there is no batch dim), the
    outputs boxes [n, 4], scores [n], labels [n] with n data-dependent (NMS)."""
    def build():
        return getattr(torchvision.models.detection, arch)(
            weights=None, weights_backbone=None, **kwargs)
    config = dict(arch="detection." + arch,
                  source="torchvision %s" % torchvision.__version__,
                  input=[3, size, size], weights_backbone=None, **kwargs)
    return Fixture(name, build, lambda: ([torch.rand(3, size, size)],),
                   ["images"], ["boxes", "scores", "labels"], {}, config,
                   dims={}, note=note, data_dependent=["boxes", "scores", "labels"])


def rnn_tagger(name, cell):
    c = fm.RNN_TAGGER
    return Fixture(
        name, lambda: fm.RNNTagger(c, cell), token_input(c["vocab_size"]),
        ["input_ids"], ["logits"],
        {"input_ids": TOKEN_AXES, "logits": TOKEN_AXES},
        dict(c, cell=cell, model="RNNTagger (hand-written: Embedding, nn.%s, Linear)"
             % cell.upper()),
        dims={"batch": 1, "seq": 128})


def quant_input():
    g = torch.Generator().manual_seed(1)
    size = fm.QUANT_CNN["image_size"]
    return (torch.randn(1, 3, size, size, generator=g),)


def quant_cnn(name, make_onnx=None, note=""):
    c = fm.QUANT_CNN
    return Fixture(
        name, lambda: fm.quantized_cnn(c), quant_input, ["input"], ["logits"],
        IMAGE_AXES, dict(c, model="QuantCNN (hand-written, torch.ao.quantization eager mode)"),
        dims={"batch": 1}, make_onnx=make_onnx, note=note)


def build_fixtures():
    fx = [
        vision("resnet18", "resnet18"),
        vision("resnet50", "resnet50"),
        vision("mobilenet_v2", "mobilenet_v2"),
        vision("mobilenet_v3_small", "mobilenet_v3_small"),
        vision("efficientnet_b0", "efficientnet_b0"),
        vision("densenet121", "densenet121"),
        vision("squeezenet1_0", "squeezenet1_0"),
        vision("vgg11", "vgg11"),
        vision("alexnet", "alexnet"),
        vision("shufflenet_v2_x1_0", "shufflenet_v2_x1_0"),
        vision("googlenet", "googlenet", aux_logits=False, init_weights=True),
        vision("convnext_tiny", "convnext_tiny"),
        vision("vit_b_16", "vit_b_16"),
        vision("regnet_y_400mf", "regnet_y_400mf"),
    ]
    # symbolic batch, height and width (issue 31 point 3): strided convolutions
    # and pooling make the spatial sizes floors, so no cost of the backbone is
    # a polynomial in height and width
    hw = vision("resnet18_dynamic_hw", "resnet18")
    hw.dynamic_axes = {"input": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}}
    hw.dims = {"batch": 1, "height": 224, "width": 224}
    fx.append(hw)
    r18 = vision("resnet18_functions", "resnet18")
    r18.opset, r18.functions = OPSET_FUNCTIONS, True
    fx.append(r18)
    fx.append(bert("bert_base", fm.BERT_BASE))
    fx.append(bert("bert_tiny_functions", fm.BERT_TINY, functions=True))
    fx.append(decoder("gpt2", fm.GPT2LMHeadModel, fm.GPT2_SMALL,
                      "GPT2LMHeadModel (hand-written, HF names, lm_head tied to wte)"))
    fx.append(decoder("llama_small", fm.LlamaForCausalLM, fm.LLAMA_SMALL,
                      "LlamaForCausalLM (hand-written, HF names)"))
    # beyond classification (issue 4, point 5)
    fx.append(segmentation("deeplabv3_mobilenet_v3_large",
                           "deeplabv3_mobilenet_v3_large", aux_loss=False))
    fx.append(segmentation("fcn_resnet50", "fcn_resnet50", aux_loss=False))
    fx.append(detection(
        "ssdlite320_mobilenet_v3_large", "ssdlite320_mobilenet_v3_large",
        note="postprocess unrolled over the 91 classes (TopK, NonZero, GatherND "
             "per class); batched_nms is one If (NonMaxSuppression in else_branch)"))
    fx.append(detection(
        "fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn",
        note="RPN and box head: TopK, NonZero, RoiAlign, ScatterElements; "
             "4 If nodes (nested If inside one else_branch; NonMaxSuppression in "
             "the else_branches)"))
    fx.append(rnn_tagger("lstm_tagger", "lstm"))
    fx.append(rnn_tagger("gru_tagger", "gru"))
    fx.append(quant_cnn(
        "quant_cnn_qdq",
        note="torch.onnx.export of the converted model: QuantizeLinear/DequantizeLinear "
             "around float Conv/Gemm; int8 weights, per-channel scales and float biases "
             "are Constant nodes (no initializers except the float classifier)"))
    fx.append(quant_cnn(
        "quant_cnn_qoperator", make_onnx=qoperator_model,
        note="written with onnx.helper from the converted model's int8 weights and "
             "scales (torch cannot export this form): QLinearConv x2, "
             "DynamicQuantizeLinear+ConvInteger, QLinearMatMul, "
             "DynamicQuantizeLinear+MatMulInteger"))
    b17 = bert("bert_base_opset17", fm.BERT_BASE)
    b17.opset, b17.dims = 17, {"batch": 1, "seq": 128}
    fx.append(b17)
    return collections.OrderedDict((f.name, f) for f in fx)


# --------------------------------------------------------------------------
# QOperator form of the quantized CNN, written with onnx.helper
# --------------------------------------------------------------------------

def qoperator_model(qm):
    """The converted QuantCNN `qm` as ONNX "operator-oriented" quantization.

    torch 1.13 only exports the QDQ form (quant_cnn_qdq), so this graph is
    written by hand from qm's own tensors (int8 weights, per-channel scales,
    activation scales and zero points):
      QuantizeLinear -> QLinearConv(conv1) -> QLinearConv(conv2)
      -> DequantizeLinear -> DynamicQuantizeLinear -> ConvInteger(conv3)
         -> Cast -> Mul(scales) -> Add(bias) -> Relu
      -> GlobalAveragePool -> Flatten -> QuantizeLinear
      -> QLinearMatMul(fc1) -> DequantizeLinear -> Add(bias) -> Relu
      -> DynamicQuantizeLinear -> MatMulInteger(classifier) -> Cast -> Mul -> Add
    conv1/conv2 keep static quantization (ReLU folded in: output zero point
    0), conv3 and the classifier use dynamic activation quantization
    (onnxruntime's quantize_dynamic pattern), the classifier weight is
    quantized here (per-tensor symmetric int8).  Every weight and bias is an
    initializer: int8 weights, int32 biases for QLinearConv, float biases
    elsewhere; scales and zero points are initializers too (not parameters).
    The numbers are plausible, not bit-exact with PyTorch (logits within
    6e-4 of the quantized PyTorch model's, checked with a numpy evaluator).
    Parameters (expected.json params_by_dtype) are the initializers named
    *.weight and *.bias: 0-d and per-channel scales and zero points are not."""
    import numpy as np
    from onnx import helper, numpy_helper, TensorProto

    inits, nodes = [], []

    def const(name, array):
        # np.array keeps 0-d scalars 0-d (ascontiguousarray would make them [1])
        inits.append(numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def node(op, inputs, outputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def qparams(mod):
        return float(mod.scale), int(mod.zero_point)

    def weight(mod):
        w = mod.weight()
        return (w.int_repr().numpy().astype(np.int8),
                w.q_per_channel_scales().numpy().astype(np.float32),
                w.q_per_channel_zero_points().numpy().astype(np.int8))

    x_s, x_zp = float(qm.quant.scale), int(qm.quant.zero_point)
    x = node("QuantizeLinear", ["input", const("quant.scale", np.float32(x_s)),
                                const("quant.zero_point", np.uint8(x_zp))],
             ["/quant/QuantizeLinear_output_0"], "/quant/QuantizeLinear")
    prev_s, prev_zp = "quant.scale", "quant.zero_point"
    for name in ("conv1", "conv2"):
        mod = getattr(qm, name)
        w, ws, wzp = weight(mod)
        y_s, y_zp = qparams(mod)
        in_scale = float(np.float32(x_s if name == "conv1" else qparams(qm.conv1)[0]))
        bias = np.round(mod.bias().detach().numpy() / (in_scale * ws)).astype(np.int32)
        x = node("QLinearConv",
                 [x, prev_s, prev_zp, const(name + ".weight", w),
                  const(name + ".weight_scale", ws), const(name + ".weight_zero_point", wzp),
                  const(name + ".scale", np.float32(y_s)),
                  const(name + ".zero_point", np.uint8(y_zp)),
                  const(name + ".bias", bias)],
                 ["/%s/QLinearConv_output_0" % name], "/%s/QLinearConv" % name,
                 kernel_shape=list(mod.kernel_size), strides=list(mod.stride),
                 pads=list(mod.padding) * 2, dilations=list(mod.dilation),
                 group=mod.groups)
        prev_s, prev_zp = name + ".scale", name + ".zero_point"

    # conv3: dynamic quantization of its input, ConvInteger, float rescale.
    # Per-tensor weight scale (a scalar, as onnxruntime's quantize_dynamic
    # writes by default): the dequantized per-channel weight requantized.
    mod = qm.conv3
    wf = mod.weight().dequantize().numpy()
    ws = np.float32(np.abs(wf).max() / 127.0)
    w = np.clip(np.round(wf / ws), -127, 127).astype(np.int8)
    wzp = np.int8(0)
    x = node("DequantizeLinear", [x, prev_s, prev_zp],
             ["/conv3/DequantizeLinear_output_0"], "/conv3/DequantizeLinear")
    xq, xs, xzp = node("DynamicQuantizeLinear", [x],
                       ["/conv3/DynamicQuantizeLinear_output_0",
                        "/conv3/DynamicQuantizeLinear_output_1",
                        "/conv3/DynamicQuantizeLinear_output_2"],
                       "/conv3/DynamicQuantizeLinear")
    x = node("ConvInteger", [xq, const("conv3.weight", w), xzp,
                             const("conv3.weight_zero_point", wzp)],
             ["/conv3/ConvInteger_output_0"], "/conv3/ConvInteger",
             kernel_shape=list(mod.kernel_size), strides=list(mod.stride),
             pads=list(mod.padding) * 2, dilations=list(mod.dilation), group=mod.groups)
    x = node("Cast", [x], ["/conv3/Cast_output_0"], "/conv3/Cast", to=TensorProto.FLOAT)
    s = node("Mul", [xs, const("conv3.weight_scale", ws)],
             ["/conv3/Mul_output_0"], "/conv3/Mul")
    x = node("Mul", [x, s], ["/conv3/Mul_1_output_0"], "/conv3/Mul_1")
    x = node("Add", [x, const("conv3.bias", mod.bias().detach().numpy().reshape(1, -1, 1, 1))],
             ["/conv3/Add_output_0"], "/conv3/Add")
    x = node("Relu", [x], ["/conv3/Relu_output_0"], "/conv3/Relu")
    x = node("GlobalAveragePool", [x], ["/pool/GlobalAveragePool_output_0"],
             "/pool/GlobalAveragePool")
    x = node("Flatten", [x], ["/Flatten_output_0"], "/Flatten", axis=1)
    p_s, p_zp = qparams(qm.conv3)
    x = node("QuantizeLinear", [x, const("pool.scale", np.float32(p_s)),
                                const("pool.zero_point", np.uint8(p_zp))],
             ["/QuantizeLinear_output_0"], "/QuantizeLinear")

    # fc1: QLinearMatMul (per-column weight scales), bias added in float
    mod = qm.fc1
    w, ws, wzp = weight(mod)
    y_s, y_zp = qparams(mod)
    x = node("QLinearMatMul",
             [x, "pool.scale", "pool.zero_point", const("fc1.weight", w.T),
              const("fc1.weight_scale", ws), const("fc1.weight_zero_point", wzp),
              const("fc1.scale", np.float32(y_s)), const("fc1.zero_point", np.uint8(y_zp))],
             ["/fc1/QLinearMatMul_output_0"], "/fc1/QLinearMatMul")
    x = node("DequantizeLinear", [x, "fc1.scale", "fc1.zero_point"],
             ["/fc1/DequantizeLinear_output_0"], "/fc1/DequantizeLinear")
    x = node("Add", [x, const("fc1.bias", mod.bias().detach().numpy())],
             ["/fc1/Add_output_0"], "/fc1/Add")
    x = node("Relu", [x], ["/relu4/Relu_output_0"], "/relu4/Relu")

    # classifier (float in PyTorch): dynamic quantization, MatMulInteger
    wf = qm.classifier.weight.detach().numpy()
    c_s = np.float32(np.abs(wf).max() / 127.0)
    wq = np.clip(np.round(wf / c_s), -127, 127).astype(np.int8)
    xq, xs, xzp = node("DynamicQuantizeLinear", [x],
                       ["/classifier/DynamicQuantizeLinear_output_0",
                        "/classifier/DynamicQuantizeLinear_output_1",
                        "/classifier/DynamicQuantizeLinear_output_2"],
                       "/classifier/DynamicQuantizeLinear")
    x = node("MatMulInteger", [xq, const("classifier.weight", wq.T), xzp,
                               const("classifier.weight_zero_point", np.int8(0))],
             ["/classifier/MatMulInteger_output_0"], "/classifier/MatMulInteger")
    x = node("Cast", [x], ["/classifier/Cast_output_0"], "/classifier/Cast",
             to=TensorProto.FLOAT)
    s = node("Mul", [xs, const("classifier.weight_scale", c_s)],
             ["/classifier/Mul_output_0"], "/classifier/Mul")
    x = node("Mul", [x, s], ["/classifier/Mul_1_output_0"], "/classifier/Mul_1")
    node("Add", [x, const("classifier.bias", qm.classifier.bias.detach().numpy())],
         ["logits"], "/classifier/Add")

    size = fm.QUANT_CNN["image_size"]
    graph = helper.make_graph(
        nodes, "QuantCNN",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       ["batch", fm.QUANT_CNN["num_classes"]])],
        inits)
    m = helper.make_model(graph, producer_name="modelprof tools/export_fixtures.py",
                          opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 7          # what torch 1.13 writes at opset 14
    by_dtype = collections.Counter()
    for t in inits:
        if t.name.endswith((".weight", ".bias")):
            by_dtype[onnx.TensorProto.DataType.Name(t.data_type).lower()] += numel(t)
    qm.fixture_params["params_by_dtype"] = collections.OrderedDict(sorted(by_dtype.items()))
    if sum(by_dtype.values()) != qm.fixture_params["params"]:
        raise RuntimeError("QOperator weights and biases do not add up to the float model")
    return m


# --------------------------------------------------------------------------
# export, strip, inspect
# --------------------------------------------------------------------------

def numel(t):
    n = 1
    for d in t.dims:
        n *= d
    return n


def _externalize(t, location, offset):
    """Point tensor t at `location` (absent) from offset; return bytes used."""
    length = numel(t) * FLOAT_TYPES[t.data_type]
    for field in ("raw_data", "float_data", "double_data", "int32_data"):
        t.ClearField(field)
    del t.external_data[:]
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)),
                 ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return length


def _large_float(t):
    return t.data_type in FLOAT_TYPES and numel(t) > SMALL_FLOAT_ELEMS


def subgraphs(graph):
    """Graph-valued attributes (If branches, Loop/Scan bodies), recursively."""
    for n in graph.node:
        for a in n.attribute:
            gs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
            for g in gs:
                yield n, a.name, g
                for sub in subgraphs(g):
                    yield sub


def strip_weights(model, stem):
    """Move large float tensors to an absent external file, in place.

    Initializers with more than 16 float elements go external, also those
    of subgraphs (If/Loop/Scan bodies; none of the fixtures has any).
    Constant nodes are left alone.  Tensor-valued attributes of *function
    call* nodes (export_modules_as_functions copies module attributes such
    as Linear.weight onto the call node) go external too: they are copies of
    initializers and would otherwise carry all the weights.
    Returns (initializers stripped, attributes stripped, bytes)."""
    location = stem + ".weights.bin"
    offset = 0
    n_init = n_attr = 0
    bodies = [g for _, _, g in subgraphs(model.graph)]
    for t in [t for g in [model.graph] + bodies for t in g.initializer]:
        if _large_float(t):
            length = _externalize(t, location, offset)
            offset = (offset + length + ALIGN - 1) // ALIGN * ALIGN
            n_init += 1
    graphs = [model.graph.node] + [f.node for f in model.functions] + [g.node for g in bodies]
    for nodes in graphs:
        for node in nodes:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                continue
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR and _large_float(a.t):
                    length = _externalize(a.t, location, offset)
                    offset = (offset + length + ALIGN - 1) // ALIGN * ALIGN
                    n_attr += 1
    return n_init, n_attr, offset


def rename_values(f):
    """Positional value and node names inside function f."""
    names = {}
    for i, x in enumerate(f.input):
        names[x] = "in%d" % i
    for i, x in enumerate(f.output):
        names[x] = "out%d" % i
    count = 0
    for n in f.node:
        for x in n.output:
            if x and x not in names:
                names[x] = "v%d" % count
                count += 1
    for n in f.node:
        for field in (n.input, n.output):
            for j, x in enumerate(field):
                if x:
                    field[j] = names.get(x, x)
    for field in (f.input, f.output):
        for j, x in enumerate(field):
            field[j] = names[x]


def _sort_attributes(f):
    names = sorted(f.attribute)
    del f.attribute[:]
    f.attribute.extend(names)
    for n in f.node:
        attrs = sorted(n.attribute, key=lambda a: a.name)
        del n.attribute[:]
        n.attribute.extend(attrs)


def _rename_in_attributes(f, pattern, new_name):
    """Rewrite function names embedded in attribute names
    ("inferred::BasicBlock.1_inferred::Conv2d_weight")."""
    def sub(text):
        return pattern.sub(lambda m: "inferred::%s_" % new_name(m.group(1)), text)
    for i, a in enumerate(f.attribute):
        f.attribute[i] = sub(a)
    for n in f.node:
        for a in n.attribute:
            a.name = sub(a.name)
            if a.ref_attr_name:
                a.ref_attr_name = sub(a.ref_attr_name)


def canonicalize_functions(model):
    """Make export_modules_as_functions output reproducible, in place.

    torch 1.13 builds the local functions from containers ordered by pointer
    and string hash: the order of functions and attribute lists, which module
    instance supplies a function's body (so its value names and its globally
    numbered node names), and which variant of a class gets the ".1" suffix
    (also embedded in attribute names such as
    "inferred::BasicBlock.1_inferred::Conv2d_weight") change from run to run.
    So: rename each function's values by position (in0.., out0.., v0..),
    order the variants of each class by a content hash (callees hashed
    recursively) and name them X, X.1, ... in that order, rewrite the names
    embedded in attributes, name nodes <op_type>_<index in body>, sort the
    attribute lists and sort the functions by (domain, name)."""
    if not len(model.functions):
        return
    funcs = {(f.domain, f.name): f for f in model.functions}
    by_name = {f.name: (f.domain, f.name) for f in model.functions}
    if len(by_name) != len(funcs):
        raise RuntimeError("function names repeated across domains")
    pattern = re.compile(r"inferred::(%s)_" % "|".join(
        re.escape(n) for n in sorted(by_name, key=len, reverse=True)))
    for f in model.functions:
        rename_values(f)

    keys = {}

    def key(fid):
        if fid not in keys:
            f = onnx.FunctionProto()
            f.CopyFrom(funcs[fid])
            f.name = ""
            for n in f.node:
                n.name = ""
                if (n.domain, n.op_type) in funcs:
                    n.op_type = key((n.domain, n.op_type))
            _rename_in_attributes(f, pattern, lambda name: key(by_name[name]))
            _sort_attributes(f)
            keys[fid] = hashlib.sha256(f.SerializeToString()).hexdigest()
        return keys[fid]

    groups = collections.defaultdict(list)
    for fid in funcs:
        groups[(fid[0], re.sub(r"\.\d+$", "", fid[1]))].append(fid)
    rename = {}
    for (domain, base), fids in groups.items():
        for i, fid in enumerate(sorted(fids, key=key)):
            rename[fid[1]] = base if i == 0 else "%s.%d" % (base, i)

    for nodes in [model.graph.node] + [f.node for f in model.functions]:
        for n in nodes:
            if (n.domain, n.op_type) in funcs:
                n.op_type = rename[n.op_type]
    graph_as_function = onnx.FunctionProto()
    graph_as_function.node.extend(model.graph.node)
    _rename_in_attributes(graph_as_function, pattern, rename.get)
    _sort_attributes(graph_as_function)
    del model.graph.node[:]
    model.graph.node.extend(graph_as_function.node)
    for f in model.functions:
        f.name = rename[f.name]
        _rename_in_attributes(f, pattern, rename.get)
        _sort_attributes(f)
        for i, n in enumerate(f.node):
            n.name = "%s_%d" % (n.op_type, i)

    ordered = sorted(model.functions, key=lambda f: (f.domain, f.name))
    copies = [onnx.FunctionProto() for _ in ordered]
    for c, f in zip(copies, ordered):
        c.CopyFrom(f)
    del model.functions[:]
    model.functions.extend(copies)


def dims_of(value_info):
    out = []
    for d in value_info.type.tensor_type.shape.dim:
        if d.HasField("dim_param"):
            out.append(d.dim_param)
        elif d.HasField("dim_value"):
            out.append(d.dim_value)
        else:
            out.append("?")
    return out


def all_nodes(model):
    for n in model.graph.node:
        yield n
    for f in model.functions:
        for n in f.node:
            yield n


def inlined_op_counts(model):
    """ONNX op counts with every local function call expanded (as executed)."""
    funcs = {(f.domain, f.name): f for f in model.functions}
    memo = {}

    def count(nodes):
        c = collections.Counter()
        for n in nodes:
            fid = (n.domain, n.op_type)
            if fid in funcs:
                if fid not in memo:
                    memo[fid] = count(funcs[fid].node)
                c.update(memo[fid])
            else:
                c[n.op_type] += 1
        return c
    return count(model.graph.node)


def fix_graph_outputs(m, fx):
    """export_modules_as_functions loses output_names and the dynamic_axes
    names of outputs ("267", "ResNet267_dim_0"): put them back."""
    for i, out in enumerate(m.graph.output):
        want = fx.output_names[i]
        if out.name != want:
            for n in m.graph.node:
                for j, x in enumerate(n.output):
                    if x == out.name:
                        n.output[j] = want
                for j, x in enumerate(n.input):
                    if x == out.name:
                        n.input[j] = want
            out.name = want
        dims = out.type.tensor_type.shape.dim
        for axis, dim_name in fx.dynamic_axes.get(want, {}).items():
            if dims[axis].dim_param != dim_name:
                dims[axis].dim_param = dim_name


def subgraph_op_counts(model):
    """Op counts inside If/Loop/Scan bodies (all branches, nested ones too)."""
    c = collections.Counter()
    for _, _, g in subgraphs(model.graph):
        c.update(n.op_type for n in g.node)
    return c


def inspect(model):
    inits = {t.name for t in model.graph.initializer}
    ops = inlined_op_counts(model)
    aliases = [(n.input[0], n.output[0]) for n in model.graph.node
               if n.op_type == "Identity" and n.input and n.input[0] in inits]
    dropout = [n.name for n in all_nodes(model) if n.op_type == "Dropout"]
    bn = [n for n in all_nodes(model) if n.op_type == "BatchNormalization"]  # bodies once
    bn_training = sorted({a.i for n in bn for a in n.attribute
                          if a.name == "training_mode"})
    return dict(ops=ops, aliases=aliases, dropout=dropout,
                bn=len(bn), bn_training=bn_training)


def torch_export(fx, model, example, out_dir):
    """torch.onnx.export (TorchScript exporter) through a temporary file."""
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out_dir)
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model, example, tmp,
                opset_version=fx.opset,
                training=torch.onnx.TrainingMode.PRESERVE,
                do_constant_folding=False,
                input_names=fx.input_names,
                output_names=fx.output_names,
                dynamic_axes=fx.dynamic_axes,
                export_modules_as_functions=fx.functions)
        return onnx.load(tmp)
    finally:
        os.unlink(tmp)


def export_one(fx, out_dir, keep_weights):
    torch.manual_seed(0)
    model = fx.build()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers())
    example = fx.example()
    stem = fx.name + ("_weights" if keep_weights else "")
    path = os.path.join(out_dir, stem + ".onnx")

    t0 = time.time()
    if fx.make_onnx is not None:
        m = fx.make_onnx(model)
    else:
        m = torch_export(fx, model, example, out_dir)
    export_s = time.time() - t0

    canonicalize_functions(m)
    fix_graph_outputs(m, fx)
    # check before stripping: the checker wants external files to exist
    try:
        onnx.checker.check_model(m)
        checker = "ok"
    except Exception as e:
        checker = "FAILED: %s" % str(e).splitlines()[0][:160]
    stripped, stripped_attrs, ext_bytes = (0, 0, 0) if keep_weights else strip_weights(m, stem)
    data = m.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)

    info = inspect(m)
    sub_ops = subgraph_op_counts(m)
    entry = collections.OrderedDict()
    entry["file"] = stem + ".onnx"
    entry["params"] = params
    fixture_params = getattr(model, "fixture_params", None)
    if fixture_params:           # quantized: the float model's count, and details
        entry.update(fixture_params)
        params = entry["params"]
    entry["buffers"] = buffers
    entry["inputs"] = collections.OrderedDict(
        (i.name, dims_of(i)) for i in m.graph.input
        if i.name not in {t.name for t in m.graph.initializer})
    entry["outputs"] = collections.OrderedDict((o.name, dims_of(o)) for o in m.graph.output)
    if fx.data_dependent:
        entry["data_dependent_outputs"] = fx.data_dependent
    if fx.dims is not None:
        entry["dims"] = fx.dims
    entry["config"] = fx.config
    if fx.note:
        entry["note"] = fx.note
    entry["exporter"] = "onnx.helper" if fx.make_onnx else "torchscript"
    entry["opset"] = fx.opset
    entry["torch"] = torch.__version__
    entry["functions"] = [f.domain + "::" + f.name for f in m.functions]
    entry["weights"] = "inline" if keep_weights else "external (absent file %s.weights.bin)" % stem
    entry["external_initializers"] = stripped
    entry["external_attributes"] = stripped_attrs
    entry["external_bytes"] = ext_bytes
    entry["nodes"] = len(m.graph.node)
    entry["nodes_inlined"] = sum(info["ops"].values())
    entry["op_types"] = collections.OrderedDict(sorted(info["ops"].items()))  # inlined
    entry["identity_aliases"] = len(info["aliases"])
    if sub_ops:
        entry["subgraphs"] = collections.OrderedDict(
            ("%s.%s" % (n.name, attr), len(g.node)) for n, attr, g in subgraphs(m.graph))
        entry["subgraph_op_types"] = collections.OrderedDict(sorted(sub_ops.items()))
    entry["file_bytes"] = len(data)

    print("%-22s %10d params  %9d bytes  %4d nodes  %3d aliases  %5.1fs  checker %s"
          % (fx.name, params, len(data), len(m.graph.node), len(info["aliases"]),
             export_s, checker))
    if info["dropout"]:
        print("    Dropout nodes: %d" % len(info["dropout"]))
    if info["bn"]:
        print("    BatchNormalization nodes: %d, training_mode %s" % (info["bn"], info["bn_training"]))
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--only", action="append", default=[], metavar="NAME")
    ap.add_argument("--keep-weights", action="store_true",
                    help="keep weights inline; file is <name>_weights.onnx")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    fixtures = build_fixtures()
    if args.list:
        for name in fixtures:
            print(name)
        return 0
    for name in args.only:
        if name not in fixtures:
            ap.error("unknown fixture %r (see --list)" % name)
    names = args.only or list(fixtures)

    os.makedirs(args.out, exist_ok=True)
    exp_path = os.path.join(args.out, "expected.json")
    expected = collections.OrderedDict()
    if os.path.exists(exp_path):
        with open(exp_path) as f:
            expected = json.load(f, object_pairs_hook=collections.OrderedDict)

    failures = {}
    for name in names:
        try:
            expected[name] = export_one(fixtures[name], args.out, args.keep_weights)
        except Exception as e:
            failures[name] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            print("%-22s FAILED %s" % (name, failures[name]), file=sys.stderr)

    # keep fixture-table order, then anything else that was already there
    order = [n for n in fixtures if n in expected] + [n for n in expected if n not in fixtures]
    expected = collections.OrderedDict((n, expected[n]) for n in order)
    with open(exp_path, "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
