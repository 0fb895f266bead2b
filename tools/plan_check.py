#!/usr/bin/python3
"""Activations the backward keeps: `modelprof plan` against PyTorch's own.

    /usr/bin/python3 tools/plan_check.py [--modelprof build/modelprof] [--only NAME] [--tol 0.10]

For each model (ResNet-50, ViT-B/16, BERT-base, a GPT-2-style decoder: the
committed fixtures in models/, exported from the same PyTorch code by
tools/export_fixtures.py) at batch 2 (sequence 128), in fp32 and under
torch.autocast("cpu", dtype=torch.bfloat16), with and without activation
checkpointing (torch.utils.checkpoint around each block the planner names):

  * PyTorch: one training forward (train mode, dropout probability 0 as in
    the exported graphs) and the cross-entropy loss on output 0 run under
    torch.autograd.graph.saved_tensors_hooks; the pack hook sees every
    tensor autograd keeps for the backward. Their storages are counted
    once each (views share one); parameters and buffers are not
    activations and are left out (autocast's low-precision copies of the
    weights are kept tensors of their own, and count).
  * modelprof: `modelprof plan MODEL --format json` with the same shapes,
    precision (fp32 or bf16-mixed) and --checkpointing;
    plan.memory.activations_bytes (its cross-entropy's kept tensors
    included).

The two must agree within --tol (default 10%); the exit status is 1 when
one does not. First, plans of every shape are checked against
docs/schema/plan.schema.json (tools/schema_check.py). Debian's PyTorch 1.13 on the CPU; a few seconds per row.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import torch                         # noqa: E402
import torch.nn as nn                # noqa: E402
import torch.utils.checkpoint as cp  # noqa: E402

import fixture_models as fm          # noqa: E402

BATCH, SEQ = 2, 128


def build(name):
    """(model, inputs, modelprof dims) for a fixture name."""
    g = torch.Generator().manual_seed(1)
    if name in ("resnet50", "vit_b_16"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(BATCH, 3, 224, 224, generator=g)
        return model, (x,), ["--dim", "batch=%d" % BATCH]
    if name == "bert_base":
        model = fm.Bert(fm.BERT_BASE)
        ids = torch.randint(0, fm.BERT_BASE["vocab_size"], (BATCH, SEQ), generator=g)
        return model, (ids, torch.ones(BATCH, SEQ, dtype=torch.long)), \
            ["--dim", "batch=%d" % BATCH, "--dim", "seq=%d" % SEQ]
    if name == "gpt2":
        model = fm.GPT2LMHeadModel(fm.GPT2_SMALL)
        ids = torch.randint(0, fm.GPT2_SMALL["vocab_size"], (BATCH, SEQ), generator=g)
        return model, (ids,), ["--dim", "batch=%d" % BATCH, "--dim", "seq=%d" % SEQ]
    raise SystemExit("unknown model " + name)


def first_output(out):
    if isinstance(out, (tuple, list)):
        return out[0]
    if isinstance(out, dict):
        return next(iter(out.values()))
    return out


def checkpoint_blocks(model, paths):
    mods = dict(model.named_modules())
    for p in paths:
        m = mods.get(p)
        if m is None:
            raise SystemExit("block %s is not a module of the PyTorch model" % p)
        orig = m.forward

        def fwd(*args, _orig=orig, **kw):
            return cp.checkpoint(lambda *a: _orig(*a, **kw), *args)
        m.forward = fwd


def torch_saved(name, bf16, blocks):
    model, inputs, _ = build(name)
    model.train()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    if blocks:
        checkpoint_blocks(model, blocks)
    skip = {p.storage().data_ptr() for p in model.parameters()}
    skip |= {b.storage().data_ptr() for b in model.buffers()}
    seen = {}

    def pack(t):
        s = t.storage()
        ptr = s.data_ptr()
        if ptr not in skip and ptr not in seen:
            seen[ptr] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = first_output(model(*inputs))
                loss = ce(y)
        else:
            y = first_output(model(*inputs))
            loss = ce(y)
    total = sum(seen.values())
    loss.backward()  # the graph is a real one: its backward runs
    return total


def ce(y):
    """Cross-entropy on output 0 over its last dim (the planner's loss)."""
    c = y.shape[-1]
    flat = y.reshape(-1, c)
    target = torch.randint(0, c, (flat.shape[0],), generator=torch.Generator().manual_seed(2))
    return nn.functional.cross_entropy(flat, target)


def plan(modelprof, name, dims, bf16, ckpt):
    args = [modelprof, "plan", os.path.join(ROOT, "models", name + ".onnx"), "--format", "json", "-q",
            "--precision", "bf16-mixed" if bf16 else "fp32", "--autocast-device", "cpu",
            "--attention", "eager"] + dims
    if ckpt:
        args.append("--checkpointing")
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("modelprof plan failed (%d): %s" % (r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)["plan"]


def schema_checks(modelprof):
    """Plans of every shape (training with stages and --fit, inference with a
    KV cache, Adafactor under ZeRO-3, a GPU of one's own) against
    docs/schema/plan.schema.json, with tools/schema_check.py."""
    import tempfile
    import schema_check
    gpt2 = [os.path.join(ROOT, "models", "gpt2.onnx"), "--dim", "batch=2", "--dim", "seq=64"]
    cases = [
        gpt2 + ["--gpu", "h100-sxm", "--pp", "2", "--tp", "2", "--checkpointing", "--precision", "bf16-mixed",
                "--tokens", "1e9", "--fit", "--gpus", "8"],
        gpt2 + ["--inference", "--kv-cache", "--precision", "fp16", "--gpu", "l4"],
        gpt2 + ["--optimizer", "adafactor", "--zero", "3", "--dp", "4"],
        [os.path.join(ROOT, "models", "resnet50.onnx"), "--dim", "batch=2", "--samples", "1M",
         "--peak-tflops", "100", "--bandwidth-gbs", "1000", "--mem-gb", "16"],
    ]
    with tempfile.TemporaryDirectory() as d:
        for i, args in enumerate(cases):
            r = subprocess.run([modelprof, "plan"] + args + ["--format", "json", "-q"], capture_output=True,
                               text=True)
            if r.returncode:
                print("plan %s: exit %d: %s" % (" ".join(args[1:]), r.returncode, r.stderr.strip()))
                return 1
            with open(os.path.join(d, "plan-%d.json" % i), "w") as f:
                f.write(r.stdout)
        return schema_check.main([d])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--only", action="append")
    ap.add_argument("--tol", type=float, default=0.10)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    names = a.only or ["resnet50", "vit_b_16", "bert_base", "gpt2"]
    bad = bad_schema = schema_checks(a.modelprof)
    print("saved activations, batch %d (sequence %d): modelprof plan vs PyTorch's saved_tensors_hooks"
          % (BATCH, SEQ))
    print("%-10s %-6s %-6s %14s %14s %8s" % ("model", "mode", "ckpt", "modelprof", "pytorch", "ratio"))
    t0 = time.time()
    for name in names:
        _, _, dims = build(name)
        for bf16 in (False, True):
            for ckpt in (False, True):
                pl = plan(a.modelprof, name, dims, bf16, ckpt)
                ours = pl["memory"]["activations_bytes"]
                theirs = torch_saved(name, bf16, pl["blocks"] if ckpt else None)
                ratio = ours / theirs if theirs else float("inf")
                ok = abs(ratio - 1) <= a.tol
                bad += not ok
                print("%-10s %-6s %-6s %14d %14d %8.3f%s" % (
                    name, "bf16" if bf16 else "fp32", "yes" if ckpt else "no", ours, theirs, ratio,
                    "" if ok else "  <- outside +-%d%%" % round(a.tol * 100)))
                sys.stdout.flush()
    print("%d of %d rows within +-%d%% (%.1f s)" % (len(names) * 4 - (bad - bad_schema), len(names) * 4,
                                                     round(a.tol * 100), time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
