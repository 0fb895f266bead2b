#!/usr/bin/python3
"""The planner's count of the operators eager PyTorch dispatches in a
training step (src/plan/host.c, docs/PLANNING.md "host-bound steps")
against PyTorch's own count, on models written here in plain torch.

    /usr/bin/python3 tools/host_ops.py [--modelprof build/modelprof] [--out DIR] [--tol 0.15]

Each model is exported (TorchScript exporter, eval mode: no dropout) and
planned with `--loss none --optimizer none`; PyTorch's count is every ATen
operator a TorchDispatchMode sees in the forward and in
`backward(ones_like(output))` of the same model on the CPU, less `detach`
and `is_same_size` (the autograd engine's bookkeeping, which launches
nothing and costs a fraction of an operator), with AccumulateGrad's nodes
added (one per parameter tensor: the mode sees no ATen call when it steals
the gradient). Exit status 1 when a model's step (forward and backward) is
off by more than --tol; the forward's own ratio is printed beside it.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils._python_dispatch import TorchDispatchMode

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plain_decoders  # noqa: E402

SKIP = {"detach", "is_same_size"}


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func.overloadpacket).split(".")[-1] not in SKIP:
            self.n += 1
        return func(*args, **(kwargs or {}))


class Attn(nn.Module):
    """BERT's eager self-attention as Hugging Face writes it."""

    def __init__(self, h, heads):
        super().__init__()
        self.h, self.heads = h, heads
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.h // self.heads).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.h // self.heads) + mask
        c = torch.matmul(F.softmax(s, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return self.o(c.view(c.shape[0], c.shape[1], self.h))


class Encoder(nn.Module):
    def __init__(self, h=64, heads=4, layers=4, vocab=500):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, h), nn.Embedding(128, h)
        self.att = nn.ModuleList(Attn(h, heads) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(h) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(h, 4 * h) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(4 * h, h) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(h) for _ in range(layers))
        self.head = nn.Linear(h, 2)

    def forward(self, ids, am):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]).unsqueeze(0))
        mask = (1.0 - am[:, None, None, :].to(x.dtype)) * -10000.0
        for a, l1, u, d, l2 in zip(self.att, self.ln1, self.up, self.down, self.ln2):
            x = l1(a(x, mask) + x)
            x = l2(d(F.gelu(u(x))) + x)
        return self.head(torch.tanh(x[:, 0]))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x):
        return self.body(x)


def models():
    ids = torch.randint(0, 500, (2, 16))
    yield "encoder (BERT-style, eager attention)", Encoder(), (ids, torch.ones(2, 16, dtype=torch.long)), \
        ["ids", "am"], ["--attention", "eager"]
    for v in ("a", "b"):
        dec = plain_decoders.PlainDecoder(v, vocab=500, h=64, layers=3, nh=4, nkv=2, inter=160, max_seq=64)
        yield f"decoder {v} (Llama-style)", dec, (torch.randint(0, 500, (2, 16)),), ["ids"], ["--attention", "eager"]
    yield "conv net (train-mode export: BatchNorm kept)", ConvNet(), (torch.randn(2, 3, 16, 16),), ["x"], []
    # torchvision's Swin-T as it ships: windowed attention, eager, whose
    # relative position biases and shifted windows' masks the exporter
    # folds, and whose fresh LayerNorm weights it merges behind Identity
    # copies. PyTorch's count includes the masks' construction in Python
    # (about 48 operators per shifted block), which the graph does not show.
    yield "torchvision Swin-T (windowed attention)", torchvision.models.swin_t(), \
        (torch.randn(1, 3, 224, 224),), ["x"], ["--attention", "eager"]
    # torchvision's MaxViT-T: attention written with torch.einsum (one
    # batched product each way), MBConv blocks; the eval-mode export folds
    # its BatchNorms into the convolutions, which PyTorch's count keeps.
    yield "torchvision MaxViT-T (einsum attention)", torchvision.models.maxvit_t(), \
        (torch.randn(1, 3, 224, 224),), ["x"], ["--attention", "eager"]


def torch_count(model, args, train):
    model.train(train)
    params = [p for p in model.parameters() if p.requires_grad]
    c = Count()
    with c:
        y = model(*args)
    fwd = c.n
    c = Count()
    with c:
        y.backward(torch.ones_like(y))
    return fwd, c.n + len(params)


def plan_count(mp, path, extra, inference):
    cmd = [mp, "plan", path, "--loss", "none", "--optimizer", "none", "--format", "json", "-q"] + extra
    if inference:
        cmd.append("--inference")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"host_ops.py: {' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)["plan"]["host"]["ops_per_step"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelprof", default=os.path.join(HERE, "..", "build", "modelprof"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "build", "host_ops"))
    ap.add_argument("--tol", type=float, default=0.15)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    warnings.filterwarnings("ignore", message=".*indexing argument.*")  # torchvision's meshgrid call
    print(f"operators dispatched per step: modelprof plan against TorchDispatchMode (PyTorch {torch.__version__})")
    print(f"{'model':46s} {'fwd':>6s} {'torch':>6s} {'ratio':>6s}  {'fwd+bwd':>7s} {'torch':>6s} {'ratio':>6s}")
    bad = 0
    for i, (name, model, args, names, extra) in enumerate(models()):
        path = os.path.join(a.out, f"m{i}.onnx")
        train = "train-mode" in name
        mode = torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL
        model.train(train)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, path, opset_version=14, input_names=names, output_names=["y"],
                              training=mode, do_constant_folding=not train)
        tf, tb = torch_count(model, args, train)
        pf = plan_count(a.modelprof, path, extra, True)
        pt = plan_count(a.modelprof, path, extra, False)
        rf, rt = pf / tf, pt / (tf + tb)
        ok = abs(rt - 1) <= a.tol
        bad += not ok
        print(f"{name:46s} {pf:6d} {tf:6d} {rf:6.2f}  {pt:7d} {tf + tb:6d} {rt:6.2f}{'' if ok else '  MISS'}")
    print(f"{i + 1 - bad} of {i + 1} models within {a.tol:.0%}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
