#!/usr/bin/python3
"""Tied and folded weights from Debian's PyTorch (TorchScript exporter) against
PyTorch's own parameter count (issue 18 point 3; docs/COUNTING.md, "Folded and
tied parameters").

1. A small language model whose output head is tied to its token embedding
   (vocab 1000, d 256, 128 positions, 2 pre-norm blocks with 4 heads and a
   1024 MLP): PyTorch counts 1,868,800. Exported in eval mode with the default
   do_constant_folding=True, the head is an anonymous transposed copy
   (`onnx::MatMul_N` [256, 1000] of `tok.weight` [1000, 256]). With its weights
   modelprof must count 1,868,800 and name the copy; with the weights left out
   (external data removed) it counts 2,124,800 and flags the copy (256,000).
2. torchvision's ResNet-18 exported in eval mode (BatchNorm folded into the
   convolutions): the report says so; exported with
   training=TrainingMode.PRESERVE, do_constant_folding=False it counts PyTorch's
   11,689,512 and says nothing.

    /usr/bin/python3 tools/params_check.py --modelprof build/modelprof [--out DIR]

Exits 1 on a mismatch. Files go under build/ (DIR, default build/params_check).
"""

import argparse
import json
import os
import subprocess
import sys
import warnings

import onnx
import torch
import torch.nn as nn
import torchvision


class Block(nn.Module):
    def __init__(self, d=256, heads=4, ff=1024):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        h = self.heads
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, -1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


class TiedLM(nn.Module):
    def __init__(self, vocab=1000, d=256, positions=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(positions, d)
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def torch_params(model):
    return sum(p.numel() for p in model.parameters())


def profile(modelprof, path, *dims):
    args = [modelprof, "--format", "json", "-q", path]
    for d in dims:
        args += ["--dim", d]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def params_of(prof):
    return prof["total"]["params"]


def without_weights(src, dst):
    """The same model with every large tensor as external data that is not
    there (GUIDE §5): modelprof then profiles it weightless."""
    m = onnx.load(src)
    data = os.path.basename(dst) + ".data"
    onnx.save_model(m, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data, size_threshold=1024)
    os.remove(os.path.join(os.path.dirname(dst), data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelprof", required=True)
    ap.add_argument("--out", default="build/params_check")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    bad = []

    def check(what, got, want):
        ok = got == want
        print(f"  {'ok ' if ok else 'BAD'} {what}: {got}" + ("" if ok else f" (want {want})"))
        if not ok:
            bad.append(what)

    # 1. the tied language model
    lm = TiedLM().eval()
    ref = torch_params(lm)
    print(f"tied LM: PyTorch counts {ref:,}")
    check("PyTorch's count", ref, 1868800)
    path = os.path.join(a.out, "tied_lm.onnx")
    torch.onnx.export(lm, (torch.zeros(1, 16, dtype=torch.long),), path, input_names=["ids"],
                      output_names=["logits"], opset_version=14, do_constant_folding=True,
                      dynamic_axes={"ids": {0: "batch", 1: "seq"}})
    prof = profile(a.modelprof, path, "batch=1", "seq=16")
    check("params with weights", params_of(prof), ref)
    notes = prof["param_counting"]["notes"]
    same = [n for n in notes if n["kind"] == "same_parameter"]
    check("copies named with weights",
          [(n["tensor"].startswith("onnx::MatMul_"), n["shape"], n["parameters"], n["how"]) for n in same],
          [(True, [256, 1000], ["tok.weight"], "transpose")])
    dry = os.path.join(a.out, "tied_lm_weightless.onnx")
    without_weights(path, dry)
    prof = profile(a.modelprof, dry, "batch=1", "seq=16")
    check("params without weights", params_of(prof), ref + 256000)
    check("possible copies without weights", prof["param_counting"]["possible_copy_elements"], 256000)
    maybe = [n for n in prof["param_counting"]["notes"] if n["kind"] == "possible_copy"]
    check("possible copy named", [(n["shape"], n["parameters"]) for n in maybe],
          [([256, 1000], ["tok.weight"])])

    # 2. ResNet-18: BatchNorm folded (eval export) or kept (PRESERVE, no folding)
    r18 = torchvision.models.resnet18(weights=None).eval()
    ref = torch_params(r18)
    print(f"ResNet-18: PyTorch counts {ref:,}")
    x = torch.zeros(1, 3, 64, 64)
    folded = os.path.join(a.out, "resnet18_eval.onnx")
    torch.onnx.export(r18, (x,), folded, opset_version=14)
    prof = profile(a.modelprof, folded)
    check("BatchNorm folded said (eval export)", prof["param_counting"]["batchnorm_folded"], True)
    kept = os.path.join(a.out, "resnet18_preserve.onnx")
    torch.onnx.export(r18, (x,), kept, opset_version=14,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    prof = profile(a.modelprof, kept)
    check("params with BatchNorm kept", params_of(prof), ref)
    check("nothing said with BatchNorm kept", prof["param_counting"]["batchnorm_folded"], False)

    print("params_check:", "FAILED " + ", ".join(bad) if bad else "all agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
