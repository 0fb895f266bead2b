#!/usr/bin/python3
"""The ONNX Runtime profiles under tests/ort/, written by ONNX Runtime itself
(npm onnxruntime-node, installed under build/ort with --ignore-scripts; the
same package as bench/run_peers.py and tools/contrib_check.py), for the
tests of `modelprof MODEL --ort-profile FILE` (docs/JSON.md, "--ort-profile").

For each model (the weightless fixtures models/resnet50.onnx at batch 1 and
models/bert_base.onnx at batch 1, seq 128), a copy is written into a
temporary folder beside seeded weights (bench/run_peers.py with_weights),
and one session per graph optimisation level (disabled, all) runs it RUNS
times (default 3: the first is the warm-up modelprof leaves out) on 2
intra-op threads with profiling on. Each profile is gzipped (no name, no
time: the same bytes give the same file) into OUT/MODEL_LEVEL.json.gz.

    /usr/bin/python3 tools/ort_profiles.py [--out tests/ort] [--runs 3] [--only resnet50]

--others writes the profiles of other models and dims (OTHERS: ResNet-18,
BERT at batch 4, seq 64) that the tests use to see a profile refused on the
wrong model or dims (issue 31). --cross profiles 22 fixtures at the four
levels and counts how many modelprof accepts on their own model and refuses
on a related model and at a wrong batch (docs/DESIGN.md, "--ort-profile").

--data-sized writes nonzero_rows.onnx, a graph whose sizes only the data
decides, and its profile (test ort.data_sized).

--control writes control_flow.onnx (Loop and If) and empty_slice.onnx (a
Slice writing [5, 0]) and their profiles (tests ort.control_flow_once,
ort.empty_dims).

--check also runs modelprof on each profile and prints what the acceptance
asks (issue 24): node time per run, modelprof's per-run latency and root
module latency, unmatched time, and how the events were placed.
"""
import argparse
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import run_peers  # noqa: E402  (with_weights, ensure_ort)

MODELS = {"resnet50": ["batch=1"], "bert_base": ["batch=1", "seq=128"]}
LEVELS = ["disabled", "all"]
# Profiles of other models and other dims, for the tests that a profile
# must match the model and dims it is given with (issue 31): name ->
# (model, level, dims). Written with --others.
OTHERS = {"resnet18_all": ("resnet18", "all", ["batch=1"]),
          "bert_base_b4s64_all": ("bert_base", "all", ["batch=4", "seq=64"])}


def profile(model, level, runs, threads, dims, tmp, node_path):
    prefix = os.path.join(tmp, f"{os.path.basename(model)[:-5]}_{level}")
    env = dict(os.environ, NODE_PATH=node_path)
    subprocess.run(["node", os.path.join(ROOT, "tools", "ort_profile.js"), model, level, str(runs),
                    str(threads), prefix, *dims], check=True, env=env)
    found = sorted(glob.glob(prefix + "_*.json"))
    if not found:
        raise RuntimeError(f"ONNX Runtime wrote no profile for {model} at {level}")
    return found[-1]


def check(modelprof, model, dims, path):
    """The acceptance figures of one profile, from its own events and from
    modelprof's report of it."""
    with gzip.open(path, "rt") as f:
        ev = json.load(f)
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "Session" and e["name"] == "model_run")
    kept = runs[1:] if len(runs) > 1 else runs
    node = sum(e["dur"] for e in ev if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
               and any(a <= e["ts"] <= b for a, b in kept)) * 1e-6 / len(kept)
    args = [modelprof, model, "-q", "--ort-profile", path, "--peak-gflops", "100", "--format", "json"]
    for d in dims:
        args += ["--dim", d]
    rep = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    run = rep["run"]
    root = rep["modules"][0]["latency_s"]
    lat = run["latency"]["median_s"]
    imp = run["onnxruntime"]
    print(f"{os.path.basename(path)}: {len(runs)} runs ({len(kept)} kept); node time per run {node * 1e3:.3f} ms; "
          f"modelprof latency {lat * 1e3:.3f} ms ({lat / node:.4f}x), root module {root * 1e3:.3f} ms "
          f"({root / node:.4f}x), unmatched {run['unmatched_s'] * 1e3:.3f} ms ({run['unmatched_s'] / node * 100:.3f}%: "
          f"{', '.join(u['name'] for u in run['unmatched'][:4]) or 'none'}); events {imp['events']}: "
          f"{imp['exact']} by name, {imp['renamed']} by a fused name, {imp['by_order']} by their place, "
          f"{imp['unmatched']} unmatched; {imp['nodes_by_graph']} nodes placed by the graph, "
          f"{imp['nodes_not_run']} not run")


def gz(prof, dst):
    with open(prof, "rb") as f, open(dst + ".tmp", "wb") as g:
        with gzip.GzipFile(filename="", mode="wb", fileobj=g, mtime=0, compresslevel=9) as z:
            shutil.copyfileobj(f, z)
    os.replace(dst + ".tmp", dst)
    print(f"{dst}: {os.path.getsize(dst)} bytes ({os.path.getsize(prof)} written by ONNX Runtime)", flush=True)


def write_others(a):
    node_path = run_peers.ensure_ort(a.ort)
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="mp-ort-")
    try:
        for name, (m, level, dims) in OTHERS.items():
            copy = run_peers.with_weights(os.path.join(ROOT, "models", m + ".onnx"), tmp)
            prof = profile(copy, level, a.runs, a.threads, dims, tmp, node_path)
            gz(prof, os.path.join(a.out, name + ".json.gz"))
            os.remove(prof)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def fp16_twin(src, dst):
    """The model `src` in fp16, as a user converts an fp32 export: its float
    initializers, inputs, outputs, value infos, tensor attributes and Casts
    to float, bodies of Loop and If too (test ort.precision_twin: the fp32
    model's profile is refused on it)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper as nh, TensorProto as T

    def half(t):
        t.CopyFrom(nh.from_array(nh.to_array(t).astype(np.float16), t.name))

    def convert(g):
        for t in g.initializer:
            if t.data_type == T.FLOAT:
                half(t)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.tensor_type.elem_type == T.FLOAT:
                vi.type.tensor_type.elem_type = T.FLOAT16
        for n in g.node:
            for at in n.attribute:
                if at.type == onnx.AttributeProto.TENSOR and at.t.data_type == T.FLOAT:
                    half(at.t)
                elif n.op_type == "Cast" and at.name == "to" and at.i == T.FLOAT:
                    at.i = T.FLOAT16
                elif at.type == onnx.AttributeProto.GRAPH:
                    convert(at.g)

    m = onnx.load(src)
    convert(m.graph)
    onnx.checker.check_model(m)
    onnx.save(m, dst)


def write_control(a):
    """OUT/control_flow.onnx (a Linear, then a scripted loop over its rows
    and an if on their sum: Loop and If nodes, the body's nodes events of
    their own inside the Loop's and If's) and OUT/empty_slice.onnx
    (cat(x[:, 8:] * 2, x) + 1: a Slice that writes [5, 0]), exported by
    torch 1.13's TorchScript exporter, and their profiles at levels disabled
    and all, 3 runs, 1 thread (tests ort.control_flow_once, ort.empty_dims),
    and control_flow_fp16.onnx, its fp16 twin (test ort.precision_twin)."""
    import torch
    import torch.nn as nn

    @torch.jit.script
    def scan(y: torch.Tensor):
        acc = torch.zeros_like(y[0])
        for i in range(y.shape[0]):
            acc = torch.tanh(acc * 0.5 + y[i])
        if acc.sum() > 0:
            out = acc * 2.0
        else:
            out = acc - 1.0
        return out

    class Control(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)

        def forward(self, x):
            return scan(self.lin(x))

    class Empty(nn.Module):
        def forward(self, x):
            return torch.cat([x[:, 8:] * 2.0, x], 1) + 1.0

    node_path = run_peers.ensure_ort(a.ort)
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    cases = [("control_flow", Control(), torch.randn(4, 6), {"x": {0: "n"}}, ["n=4"], "disabled"),
             ("empty_slice", Empty(), torch.randn(5, 8), None, [], "all")]
    tmp = tempfile.mkdtemp(prefix="mp-ort-")
    try:
        for name, model, x, dyn, dims, level in cases:
            path = os.path.join(a.out, name + ".onnx")
            torch.onnx.export(model.eval(), (x,), path, input_names=["x"], output_names=["y"], dynamic_axes=dyn,
                              opset_version=15)
            prof = profile(path, level, 3, 1, dims, tmp, node_path)
            gz(prof, os.path.join(a.out, "%s_%s.json.gz" % (name, level)))
        fp16_twin(os.path.join(a.out, "control_flow.onnx"), os.path.join(a.out, "control_flow_fp16.onnx"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def write_data_sized(a):
    """OUT/nonzero_rows.onnx, a graph whose sizes only the data decides (the
    rows of x [4, 8] above -1e30, NonZero, gathered, times an 8 x 16
    weight: every row is, 32 rows, whatever the seeded data), and its
    profile at level disabled, 2 runs, 1 thread (test ort.data_sized)."""
    import numpy as np
    import onnx
    from onnx import helper as h, numpy_helper as nh, TensorProto as T
    node_path = run_peers.ensure_ort(a.ort)
    os.makedirs(a.out, exist_ok=True)
    inits = [nh.from_array(np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16), "W"),
             nh.from_array(np.array(-1e30, dtype=np.float32), "lo"),
             nh.from_array(np.array(0, dtype=np.int64), "zero")]
    nodes = [h.make_node("Greater", ["x", "lo"], ["mask"], name="keep"),
             h.make_node("NonZero", ["mask"], ["nz"], name="find"),
             h.make_node("Gather", ["nz", "zero"], ["tok"], name="rows", axis=0),
             h.make_node("Gather", ["x", "tok"], ["xe"], name="pick", axis=0),
             h.make_node("MatMul", ["xe", "W"], ["y"], name="expert")]
    g = h.make_graph(nodes, "nonzero_rows", [h.make_tensor_value_info("x", T.FLOAT, [4, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["rows", 16])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="modelprof tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    model = os.path.join(a.out, "nonzero_rows.onnx")
    onnx.save(m, model)
    tmp = tempfile.mkdtemp(prefix="mp-ort-")
    try:
        prof = profile(model, "disabled", 2, 1, [], tmp, node_path)
        gz(prof, os.path.join(a.out, "nonzero_rows_disabled.json.gz"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


# --cross: each model's profiles (4 levels, batch 2; seq 16) on the model
# (accepted), on related models (refused) and with --dim batch=3 (refused).
CROSS = {
    # (ResNet-18's functions export on ResNet-18 is the same network: accepted, not listed)
    "resnet18": ["resnet50", "resnet18_functions"], "resnet18_functions": ["resnet50"],
    "vgg11": ["alexnet"], "alexnet": ["vgg11"], "mobilenet_v2": ["mobilenet_v3_small", "efficientnet_b0"],
    "mobilenet_v3_small": ["mobilenet_v2"], "efficientnet_b0": ["mobilenet_v2", "regnet_y_400mf"],
    "regnet_y_400mf": ["efficientnet_b0"], "squeezenet1_0": ["googlenet"], "googlenet": ["squeezenet1_0"],
    "densenet121": ["resnet50"], "convnext_tiny": ["resnet50"], "shufflenet_v2_x1_0": ["mobilenet_v2"],
    "gpt2": ["llama_small", "bert_base"], "llama_small": ["gpt2"], "vit_b_16": ["bert_base"],
    "bert_base_opset17": ["bert_base", "bert_tiny_functions"], "bert_tiny_functions": ["bert_base"],
    "quant_cnn_qdq": ["quant_cnn_qoperator"], "quant_cnn_qoperator": ["quant_cnn_qdq"],
    "lstm_tagger": ["gru_tagger"], "gru_tagger": ["lstm_tagger"],
}
CROSS_DIMS = {"gpt2": ["batch=2", "seq=16"], "llama_small": ["batch=2", "seq=16"]}


def cross(a):
    node_path = run_peers.ensure_ort(a.ort)
    tmp = tempfile.mkdtemp(prefix="mp-ort-cross-")
    counts = {"own": [0, 0], "related": [0, 0], "batch": [0, 0]}  # [as expected, all]

    def run(model, prof, extra, want, kind):
        r = subprocess.run([a.modelprof, os.path.join(ROOT, "models", model + ".onnx"), "-q", "--ort-profile", prof,
                            "--peak-gflops", "100", *extra], capture_output=True, text=True)
        ok = r.returncode == want
        counts[kind][0] += ok
        counts[kind][1] += 1
        print(f"{'ok ' if ok else 'NOT'} {kind:7} {os.path.basename(prof)} on {model} {' '.join(extra)}: "
              f"exit {r.returncode} {r.stderr.strip()[:200]}", flush=True)

    try:
        models = a.only.split(",") if a.only else list(CROSS)
        for m in models:
            copy = run_peers.with_weights(os.path.join(ROOT, "models", m + ".onnx"), tmp)
            for level in ["disabled", "basic", "extended", "all"]:
                prof = profile(copy, level, 2, a.threads, CROSS_DIMS.get(m, ["batch=2"]), tmp, node_path)
                run(m, prof, [], 0, "own")
                for o in CROSS[m]:
                    run(o, prof, [], 2, "related")
                run(m, prof, ["--dim", "batch=3"], 2, "batch")
                os.remove(prof)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for k, (good, n) in counts.items():
        print(f"{k}: {good} of {n} as expected")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated models")
    ap.add_argument("--others", action="store_true",
                    help="write the profiles of other models and dims (OTHERS) instead")
    ap.add_argument("--data-sized", action="store_true",
                    help="write nonzero_rows.onnx and its profile (sizes only the data decides)")
    ap.add_argument("--control", action="store_true",
                    help="write control_flow.onnx and empty_slice.onnx and their profiles (Loop/If, an empty Slice)")
    ap.add_argument("--cross", action="store_true",
                    help="profile the CROSS models at every level (into a temporary folder) and check that "
                         "modelprof accepts each on its model and refuses it on related models and at a wrong batch")
    ap.add_argument("--ort", default=os.path.join(ROOT, "build", "ort"))
    ap.add_argument("--check", action="store_true", help="run modelprof on the profiles and print the figures")
    ap.add_argument("--modelprof", default=os.path.join(ROOT, "build", "modelprof"))
    ap.add_argument("--keep-optimized", default=None,
                    help="a folder: also save each optimised model there (to see what ORT fused)")
    a = ap.parse_args()
    if a.others:
        return write_others(a)
    if a.data_sized:
        return write_data_sized(a)
    if a.control:
        return write_control(a)
    if a.cross:
        return cross(a)
    models = a.only.split(",") if a.only else list(MODELS)
    if not a.check or not all(os.path.exists(os.path.join(a.out, f"{m}_{l}.json.gz")) for m in models for l in LEVELS):
        node_path = run_peers.ensure_ort(a.ort)
        os.makedirs(a.out, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="mp-ort-")
        try:
            for m in models:
                copy = run_peers.with_weights(os.path.join(ROOT, "models", m + ".onnx"), tmp)
                for level in LEVELS:
                    prof = profile(copy, level, a.runs, a.threads, MODELS[m], tmp, node_path)
                    dst = os.path.join(a.out, f"{m}_{level}.json.gz")
                    with open(prof, "rb") as f, open(dst + ".tmp", "wb") as g:
                        with gzip.GzipFile(filename="", mode="wb", fileobj=g, mtime=0, compresslevel=9) as z:
                            shutil.copyfileobj(f, z)
                    os.replace(dst + ".tmp", dst)
                    print(f"{dst}: {os.path.getsize(dst)} bytes ({os.path.getsize(prof)} written by ONNX Runtime)",
                          flush=True)
                    if a.keep_optimized:
                        os.makedirs(a.keep_optimized, exist_ok=True)
                        env = dict(os.environ, NODE_PATH=node_path)
                        subprocess.run(["node", os.path.join(ROOT, "tools", "ort_profile.js"), copy, level, "1",
                                        str(a.threads), os.path.join(tmp, "opt"),
                                        os.path.join(a.keep_optimized, f"{m}_{level}.onnx"), *MODELS[m]],
                                       check=True, env=env)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if a.check:
        for m in models:
            for level in LEVELS:
                check(a.modelprof, os.path.join(ROOT, "models", m + ".onnx"), MODELS[m],
                      os.path.join(a.out, f"{m}_{level}.json.gz"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
