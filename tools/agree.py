#!/usr/bin/python3
"""Real-model agreement: modelprof's measured run against PyTorch.

For each model (ResNet-18 (also with BatchNormalization kept as nodes),
ResNet-50, MobileNet-V2, ViT-B/16 from torchvision; BERT-base, a GPT-2-style and a Llama-style small decoder,
the LSTM and GRU token taggers and the LSTM+GRU benchmark model (2-layer bidirectional LSTM, then a GRU)
from tools/fixture_models.py), randomly initialised with a fixed seed:

1. export it WITH its weights (TorchScript exporter, eval mode, constant
   folding off so BatchNorm stays a node for the planner to fold) into
   build/agree/<name>.onnx (cached: exported once);
2. write the example inputs as .npy and PyTorch's own outputs (eager, the
   same weights) as .npy;
3. run `modelprof --run --input-data NAME=FILE.npy ... --save-outputs DIR`;
4. compare every output: relative L2 error ||ours - torch|| / ||torch||
   must be <= 1e-3 (the issue's bound).

    /usr/bin/python3 tools/agree.py --modelprof build/modelprof            # all
    /usr/bin/python3 tools/agree.py --modelprof build/modelprof --only gpt2

Prints one line per model (error per output, run time) and exits 1 when a
model disagrees or fails to run. Nothing large is committed: every file is
under build/.
"""

import argparse
import os
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np             # noqa: E402
import torch                   # noqa: E402
import torchvision             # noqa: E402

import fixture_models as fm    # noqa: E402

TOL = 1e-3
OPSET = 14


def vision(arch):
    def build():
        m = getattr(torchvision.models, arch)(weights=None)
        # torchvision's ViT starts with a zero classifier (logits = 0): a
        # comparison of zeros proves nothing, so give it random weights
        head = getattr(getattr(m, "heads", None), "head", None)
        if head is not None:
            torch.nn.init.normal_(head.weight, std=0.02)
            torch.nn.init.normal_(head.bias, std=0.02)
        return m

    def example():
        g = torch.Generator().manual_seed(3)
        return (torch.randn(1, 3, 224, 224, generator=g),)
    return build, example, ["input"], ["logits"]


def tokens(vocab, seq, mask):
    def example():
        g = torch.Generator().manual_seed(3)
        ids = torch.randint(0, vocab, (1, seq), generator=g, dtype=torch.long)
        if not mask:
            return (ids,)
        m = torch.ones(1, seq, dtype=torch.long)
        m[0, seq - 3:] = 0  # some padding: the mask matters
        return (ids, m)
    return example


def rnn_input(c):
    def example():
        g = torch.Generator().manual_seed(3)
        return (torch.randn(c["seq"], c["batch"], c["input_size"], generator=g),)
    return example


MODELS = {
    "resnet18": vision("resnet18"),
    # BatchNormalization kept as nodes (training=PRESERVE on an eval model):
    # the planner's folding and the Conv+BatchNormalization fusion path
    "resnet18_bn": vision("resnet18"),
    "resnet50": vision("resnet50"),
    "mobilenet_v2": vision("mobilenet_v2"),
    "vit_b_16": vision("vit_b_16"),
    "bert_base": (lambda: fm.Bert(fm.BERT_BASE), tokens(fm.BERT_BASE["vocab_size"], 32, True),
                  ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"]),
    "gpt2": (lambda: fm.GPT2LMHeadModel(fm.GPT2_SMALL), tokens(fm.GPT2_SMALL["vocab_size"], 32, False),
             ["input_ids"], ["logits"]),
    "llama_small": (lambda: fm.LlamaForCausalLM(fm.LLAMA_SMALL),
                    tokens(fm.LLAMA_SMALL["vocab_size"], 32, False), ["input_ids"], ["logits"]),
    # recurrent layers (LSTM, GRU with linear_before_reset=1, both directions)
    "lstm_tagger": (lambda: fm.RNNTagger(fm.RNN_TAGGER, "lstm"), tokens(fm.RNN_TAGGER["vocab_size"], 32, False),
                    ["input_ids"], ["logits"]),
    "gru_tagger": (lambda: fm.RNNTagger(fm.RNN_TAGGER, "gru"), tokens(fm.RNN_TAGGER["vocab_size"], 32, False),
                   ["input_ids"], ["logits"]),
    "lstm_gru": (lambda: fm.LSTMGRU(), rnn_input(fm.LSTM_GRU), ["x"], ["y", "h"]),
}


def outputs_of(res):
    if isinstance(res, torch.Tensor):
        return [res]
    if isinstance(res, dict):
        return list(res.values())
    return list(res)


def prepare(name, out_dir):
    """Export (once) and write inputs and PyTorch's outputs; returns the
    paths and the output names."""
    build, example, in_names, out_names = MODELS[name]
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    onnx_path = os.path.join(d, name + ".onnx")
    stamp = os.path.join(d, "ready")
    if not os.path.exists(stamp):
        torch.manual_seed(0)
        model = build().eval()
        inputs = example()
        with torch.no_grad():
            ref = [t.detach().numpy() for t in outputs_of(model(*inputs))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            extra = {}
            if name.endswith("_bn"):
                extra["training"] = torch.onnx.TrainingMode.PRESERVE
            torch.onnx.export(model, inputs, onnx_path, opset_version=OPSET,
                              input_names=in_names, output_names=out_names,
                              do_constant_folding=False, **extra)
        for n, t in zip(in_names, inputs):
            np.save(os.path.join(d, "in_%s.npy" % n), t.numpy())
        for n, a in zip(out_names, ref):
            np.save(os.path.join(d, "ref_%s.npy" % n), np.ascontiguousarray(a))
        open(stamp, "w").close()
    return d, onnx_path, in_names, out_names


def check(name, modelprof, out_dir, threads):
    d, onnx_path, in_names, out_names = prepare(name, out_dir)
    got = os.path.join(d, "got")
    cmd = [modelprof, "-q", "--run", "--warmup", "0", "--iters", "1", "--format", "json",
           "-o", os.path.join(d, "profile.json"), "--save-outputs", got]
    if threads:
        cmd += ["--threads", str(threads)]
    for n in in_names:
        cmd += ["--input-data", "%s=%s" % (n, os.path.join(d, "in_%s.npy" % n))]
    cmd.append(onnx_path)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.time() - t0
    if r.returncode != 0:
        return False, "modelprof failed (exit %d): %s" % (r.returncode, r.stderr.strip()[:400])
    errs = []
    ok = True
    for n in out_names:
        ref = np.load(os.path.join(d, "ref_%s.npy" % n)).astype(np.float64)
        path = os.path.join(got, n + ".npy")
        if not os.path.exists(path):
            return False, "output %s not saved" % n
        ours = np.load(path).astype(np.float64)
        if ours.shape != ref.shape:
            return False, "output %s: shape %s, PyTorch %s" % (n, ours.shape, ref.shape)
        den = np.linalg.norm(ref)
        if not (den > 0) or np.std(ref) == 0:
            return False, "output %s: PyTorch's output is constant: nothing to compare" % n
        err = np.linalg.norm(ours - ref) / den
        if not (err <= TOL):
            ok = False
        errs.append("%s %.2e" % (n, err))
    return ok, "rel L2 error: %s (run %.1f s)" % (", ".join(errs), dt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "agree"))
    ap.add_argument("--only", action="append")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    names = a.only or list(MODELS)
    failed = []
    for name in names:
        if name not in MODELS:
            print("unknown model %s (have: %s)" % (name, ", ".join(MODELS)))
            return 1
        try:
            ok, msg = check(name, a.modelprof, a.out, a.threads)
        except Exception as e:  # export failures name the model
            ok, msg = False, "error: %s" % e
        print("%-14s %s  %s" % (name, "ok  " if ok else "FAIL", msg), flush=True)
        if not ok:
            failed.append(name)
    print("agreement with PyTorch (rel L2 <= %g): %d/%d models" %
          (TOL, len(names) - len(failed), len(names)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
