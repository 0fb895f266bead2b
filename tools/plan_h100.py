#!/usr/bin/python3
"""`modelprof plan` against measured training runs on an H100.

    /usr/bin/python3 tools/plan_h100.py [--modelprof build/modelprof] [--ref FILE] [--out build/plan]

The reference (tests/reference/training_h100.json, a copy of the lead's
shared/reference file) holds peak device memory (torch.cuda.max_memory_
allocated) and median step times of real runs on one H100 80GB SXM: ViT-B/16
at batch 32 and a 4-layer Llama (Llama 3.2 1B sizes) at batch 4 x 1,024
tokens, in fp32 and bf16 autocast, AdamW or SGD with momentum, with and
without checkpointing, plus a no_grad fp32 forward of each.

The same models: ViT-B/16 is the committed fixture models/vit_b_16.onnx;
the Llama is exported weightless here (tools/make_llama7b.py's meta-device
export with tools/fixture_models.py's LLAMA_1B_4LAYERS) into --out, once.
Each row is planned with `--gpu h100-sxm --reserve-gb 0` (the reference
counts the allocator's bytes, not the CUDA context) and the planner's
stated defaults (compute 60% of the dtype peak, 80% of the bandwidth,
10 us per node and pass). Targets: peak memory within +-15%, step time
within 0.67-1.5x (issue 33). Prints one line per row; exit status 1 when a row misses.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def export_decoder(out, stem, config_name):
    """A decoder of tools/fixture_models.py's sizes `config_name`, exported
    weightless (make_llama7b.py's meta-device export) into out/stem.onnx,
    once."""
    path = os.path.join(out, stem + ".onnx")
    if os.path.exists(path):
        return path
    import make_llama7b as ml
    import fixture_models as fm
    import onnx
    os.makedirs(out, exist_ok=True)
    model, inv_freq = ml.build(getattr(fm, config_name))
    m = ml.export(model)
    ml.weights_to_external(m, inv_freq, stem + ".weights.bin")
    onnx.save(m, path)
    return path


def plan(modelprof, args, gpu="h100-sxm"):
    r = subprocess.run([modelprof, "plan"] + args + ["--format", "json", "-q", "--gpu", gpu, "--reserve-gb", "0"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("modelprof plan %s failed: %s" % (" ".join(args), r.stderr.strip()))
    return json.loads(r.stdout)["plan"]


def plan_rows(modelprof, ref, models, gpu, title, extra=()):
    """Plan every reference row whose model `models` knows (a function of
    the row giving the model's arguments) and print it beside the
    measurement. Rows carry batch, seq (or None), mode (inference or
    training), precision, optimizer and checkpointing. extra: flags for
    every row (the runs' settings)."""
    print(title)
    print("%-17s %-26s %10s %10s %7s   %9s %9s %6s" % ("model", "mode", "peak GB", "measured", "ratio",
                                                     "step ms", "measured", "ratio"))
    bad = rows = 0
    for r in ref["rows"]:
        if r["model"] not in models:
            print("%-17s (no model here: skipped)" % r["model"])
            continue
        args = models[r["model"]](r) + list(extra) + ["--dim", "batch=%d" % r["batch"]]
        if r.get("seq"):
            args += ["--dim", "seq=%d" % r["seq"]]
        if r["mode"].startswith("inference"):
            args += ["--inference", "--precision", "fp32"]
            mode = "inference fp32"
        else:
            prec = "bf16-mixed" if r["precision"].startswith("bf16") else "fp32"
            args += ["--precision", prec, "--optimizer", r["optimizer"]]
            if r.get("checkpointing"):
                args.append("--checkpointing")
            mode = "%s %s%s" % (prec, r["optimizer"], " ckpt" if r.get("checkpointing") else "")
        p = plan(modelprof, args, gpu)
        peak = p["memory"]["peak_bytes"]
        mratio = peak / r["peak_allocated_bytes"]
        ok = abs(mratio - 1) <= 0.15
        line = "%-17s %-26s %10.3f %10.3f %7.3f" % (r["model"], mode, peak / 1e9, r["peak_allocated_bytes"] / 1e9,
                                                    mratio)
        if "step_ms_median" in r:
            step = p["step_time_s"] * 1e3
            sratio = step / r["step_ms_median"]
            ok = ok and 0.67 <= sratio <= 1.5
            line += "   %9.2f %9.2f %6.2f" % (step, r["step_ms_median"], sratio)
        rows += 1
        bad += not ok
        print(line + ("" if ok else "   <- outside the target"))
        sys.stdout.flush()
    print("%d of %d rows within the targets (peak +-15%%, step within 0.67-1.5x (issue 33))" % (rows - bad, rows))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--ref", default=os.path.join(ROOT, "tests", "reference", "training_h100.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "plan"))
    a = ap.parse_args()
    ref = json.load(open(a.ref))
    models = {
        "vit_b_16": lambda r: [os.path.join(ROOT, "models", "vit_b_16.onnx")],
        # The reference's README says the Llama ran eager attention, but its bf16
        # autocast peak holds no score matrix: eager keeps the fp32 softmax and its
        # bf16 copy, 805 MB a layer at 4 x 32 x 1,024^2 (3.2 GB, +20% over the
        # measured peak), while transformers' default scaled_dot_product_attention
        # keeps none; in fp32 SDPA's math backend (grouped KV heads) keeps what eager
        # keeps, so the fp32 rows cannot tell. Planned as SDPA, the library default
        # (docs/PLANNING.md section 9). torchvision's ViT runs nn.MultiheadAttention,
        # which calls scaled_dot_product_attention in PyTorch 2.
        "llama_1b_4layers": lambda r: [export_decoder(a.out, "llama_1b_4layers", "LLAMA_1B_4LAYERS")],
    }
    title = ("H100 80GB SXM (%s): modelprof plan vs measured; --reserve-gb 0, default efficiencies, --tf32 none "
             "(the runs turned TF32 off everywhere)" % ref["gpu"])
    return plan_rows(a.modelprof, ref, models, "h100-sxm", title, ["--tf32", "none"])


if __name__ == "__main__":
    sys.exit(main())
