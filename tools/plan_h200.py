#!/usr/bin/python3
"""`modelprof plan` against measured training runs on an H200.

    /usr/bin/python3 tools/plan_h200.py [--modelprof build/modelprof] [--ref FILE] [--out build/plan]

The reference (tests/reference/training_h200.json, a copy of the lead's
shared/reference file) holds peak device memory (torch.cuda.max_memory_
allocated) and median step times of real runs on one H200 (PyTorch 2.11,
transformers 5.17, the library's default attention:
scaled_dot_product_attention, so --attention fused): Qwen2.5-0.5B at batch
4 x 1,024 and OPT-125m at batch 16 x 512, fp32 and bf16 autocast AdamW,
with and without checkpointing, and a no_grad fp32 forward of each.

The models: OPT-125m is the committed dynamo export models/dynamo/
opt_125m.onnx. Qwen2.5-0.5B has no export here: the same architecture
(tools/fixture_models.py QWEN25_05B: Llama with biases on q, k and v, GQA
14/2 heads, tied embeddings; 494,032,768 parameters as the reference says)
is exported weightless by the TorchScript exporter (tools/make_llama7b.py's
meta-device export) into --out, once. The planner's figures do not depend
on the exporter (docs/PLANNING.md section 9). Each row is planned with
`--gpu h200 --reserve-gb 0` and the stated defaults. Targets: peak memory
within +-15%, step time within 0.67-1.5x (issue 33). Exit status 1 when a row misses.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from plan_h100 import export_decoder, plan_rows  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--ref", default=os.path.join(ROOT, "tests", "reference", "training_h200.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "plan"))
    a = ap.parse_args()
    ref = json.load(open(a.ref))
    models = {
        "opt_125m": lambda r: [os.path.join(ROOT, "models", "dynamo", "opt_125m.onnx")],
        "qwen25_05b": lambda r: [export_decoder(a.out, "qwen25_05b", "QWEN25_05B")],
    }
    title = "H200 (%s): modelprof plan vs measured; --reserve-gb 0, default efficiencies, fused attention" % ref["gpu"]
    return plan_rows(a.modelprof, ref, models, "h200", title)


if __name__ == "__main__":
    sys.exit(main())
