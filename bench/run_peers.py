#!/usr/bin/python3
"""modelprof's measured run against ONNX Runtime and PyTorch eager.

    /usr/bin/python3 bench/run_peers.py --bench-run build/bench_run [--threads 2]

Models (exported with Debian's PyTorch into build/bench/peers/ when missing,
weights included, never committed; seeded random weights, since the machine
has no network to fetch trained ones, which does not change the work):

  resnet50     torchvision ResNet-50, batch 1, 3x224x224
  mobilenet_v2 torchvision MobileNet-V2, batch 1, 3x224x224
  vit_b_16     torchvision ViT-B/16, batch 1, 3x224x224
  bert_base    BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072,
               vocabulary 30522, pooler), batch 1, sequence 128, written out
               here in plain torch (the transformers package is not in Debian)
  lstm_gru     a 2-layer bidirectional LSTM (input 64, hidden 128) then a
               GRU (hidden 128), batch 4, sequence 20 (tools/fixture_models.py
               LSTMGRU): the recurrent layers of issue 18

All exported at opset 17 (LayerNormalization is one node); --opset 14
gives the older TorchScript graphs (LayerNorm and GELU decomposed).

--dynamo times the dynamo exporter's graphs instead (PyTorch 2.x's
torch.onnx.export(dynamo=True), opset 20: decomposed attention with its
IsNaN guard, scalars as initializers), the weightless fixtures of
models/dynamo/ given seeded weights written here into
build/bench/dynamo/NAME.onnx.data (floats normal with sigma 0.02,
BatchNorm variances uniform in [0.5, 1.5], integer buffers 0): DistilBERT, OPT-125m, Pythia-70m, Qwen3 (2 layers) at batch 1,
sequence 128; DeiT-small, ResNet-18 (BatchNorm folded), MobileNet-V3 at
their batch 2. ONNX Runtime and modelprof only (Debian's PyTorch 1.13 has
no dynamo exporter, and these modules are not in Debian).

Engines, each a warm process answering timing requests (process start is
never counted), all with the same intra-op thread count:
  modelprof    build/bench_run: the library API, plan made once, whole-plan
               runs without per-node timers
  ORT          onnxruntime-node (npm, --ignore-scripts, under build/ort): CPU
               provider, all graph optimizations, sequential execution
  PyTorch      eager, torch.set_num_threads(N), torch.inference_mode()

The engines are alternated: each round runs a short burst (--burst runs) on
each engine in turn, with a pause between engines so one engine's spinning
worker threads are asleep before the next starts. Per engine: median and
minimum of all runs; ratios modelprof/ORT and modelprof/PyTorch of the
medians. Targets: modelprof <= 1.25x ORT and <= 0.7x PyTorch (lstm_gru:
<= 1.0x both). The exit
status is 0 whatever the verdict, non-zero only when an engine failed.
"""

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

# OpenMP (libgomp: oneDNN in modelprof, and PyTorch) spins only briefly
# between parallel regions. libgomp's default (300,000 spins) is best on an
# idle machine but on these 2 shared cores a spinning worker steals the
# core the other thread needs (ResNet-50: 300-440 ms instead of 57 ms when
# another job held a core); OMP_WAIT_POLICY=passive fixes that but pays a
# futex wake per region on an idle machine (MobileNet-V2 7.4 ms instead of
# 2.9). 20,000 spins (tens of microseconds, longer than the gap between two
# kernels) kept 3.1 ms and 29.8 ms idle. Read once when libgomp loads, so
# set before torch is imported. modelprof sets the same default itself
# when the user set none (src/run/dnnl.c, mp_dnnl_spin_choice); set here
# for PyTorch, and so that both OpenMP engines run the same policy.
os.environ.setdefault("GOMP_SPINCOUNT", "20000")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODELS = ["resnet50", "mobilenet_v2", "vit_b_16", "bert_base", "lstm_gru"]
DYNAMO = ["distilbert_base", "opt_125m", "pythia_70m", "qwen3_2layers",
          "timm_deit_small_distilled_patch16_224", "timm_resnet18_folded", "timm_mobilenetv3_large_100"]
DYNAMO_DIMS = {"batch": 1, "seq": 128}  # the language models' symbolic dims (the first four)
DYNAMO_LM = DYNAMO[:4]
TARGET_ORT, TARGET_TORCH = 1.1, 0.5  # issue 16
TARGETS = {"lstm_gru": (1.0, 1.0)}  # (ORT, PyTorch) where not the above (issue 18)


# ---------------------------------------------------------------- models

def bert_base():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, h=768, heads=12, ff=3072):
            super().__init__()
            self.heads, self.dh = heads, h // heads
            self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
            self.attn_out, self.attn_norm = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
            self.intermediate, self.output = nn.Linear(h, ff), nn.Linear(ff, h)
            self.out_norm = nn.LayerNorm(h, eps=1e-12)
            self.act = nn.GELU()

        def split(self, x):
            b, s, _ = x.shape
            return x.view(b, s, self.heads, self.dh).transpose(1, 2)

        def forward(self, x, mask):
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + mask
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            b, _, s, _ = ctx.shape
            ctx = ctx.transpose(1, 2).reshape(b, s, self.heads * self.dh)
            x = self.attn_norm(x + self.attn_out(ctx))
            return self.out_norm(x + self.output(self.act(self.intermediate(x))))

    class Bert(nn.Module):
        def __init__(self, vocab=30522, h=768, layers=12, max_pos=512):
            super().__init__()
            self.word = nn.Embedding(vocab, h)
            self.position = nn.Embedding(max_pos, h)
            self.token_type = nn.Embedding(2, h)
            self.emb_norm = nn.LayerNorm(h, eps=1e-12)
            self.layers = nn.ModuleList(Layer(h) for _ in range(layers))
            self.pooler = nn.Linear(h, h)

        def forward(self, input_ids, attention_mask):
            s = input_ids.shape[1]
            pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
            x = self.word(input_ids) + self.position(pos) + self.token_type(torch.zeros_like(input_ids))
            x = self.emb_norm(x)
            mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
            for layer in self.layers:
                x = layer(x, mask)
            return x, torch.tanh(self.pooler(x[:, 0]))

    return Bert()


def make_model(name):
    """(module, example inputs, input names, output names) with seeded weights."""
    import torch
    import torchvision

    torch.manual_seed(0)
    if name == "lstm_gru":
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import fixture_models as fm

        c = fm.LSTM_GRU
        x = torch.randn(c["seq"], c["batch"], c["input_size"])
        return fm.LSTMGRU().eval(), (x,), ["x"], ["y", "h"]
    if name == "bert_base":
        ids = torch.randint(0, 100, (1, 128), dtype=torch.long)
        return bert_base().eval(), (ids, torch.ones(1, 128, dtype=torch.long)), \
            ["input_ids", "attention_mask"], ["last_hidden_state", "pooled"]
    ctor = getattr(torchvision.models, name)
    return ctor(weights=None).eval(), (torch.randn(1, 3, 224, 224),), ["input"], ["output"]


def export(name, path, opset=17):
    import torch

    model, args, ins, outs = make_model(name)
    tmp = path + ".tmp"
    # with gradients on: under no_grad nn.MultiheadAttention (ViT) takes its
    # fused fast path, which the exporter cannot write
    torch.onnx.export(model, args, tmp, opset_version=opset, input_names=ins,
                      output_names=outs, do_constant_folding=True)
    os.replace(tmp, path)


def dynamo_with_weights(name, out_dir):
    """models/dynamo/NAME.onnx copied into out_dir beside a seeded external
    data file at the offsets the model names; the copy's path."""
    return with_weights(os.path.join(ROOT, "models", "dynamo", name + ".onnx"), out_dir)


def with_weights(src, out_dir):
    """A weightless fixture (GUIDE section 5: external data that is not
    there) copied into out_dir beside seeded external data files at the
    offsets it names; the copy's path. Floats normal with sigma 0.02,
    BatchNorm variances uniform in [0.5, 1.5], integer tensors 0."""
    import numpy as np
    import onnx

    dst = os.path.join(out_dir, os.path.basename(src))
    m = onnx.load(src, load_external_data=False)
    rng = np.random.default_rng(0)
    files = {}
    for t in m.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        ext = {e.key: e.value for e in t.external_data}
        dt = np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type])  # Debian's onnx 1.12
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        if np.issubdtype(dt, np.floating) and "running_var" in t.name:
            a = rng.uniform(0.5, 1.5, n).astype(dt)  # a variance: positive
        elif np.issubdtype(dt, np.floating):
            a = (rng.standard_normal(n) * 0.02).astype(dt)
        else:
            a = np.zeros(n, dtype=dt)
        off = int(ext.get("offset", 0))
        files.setdefault(ext["location"], []).append((off, a.tobytes()))
    for loc, parts in files.items():
        with open(os.path.join(out_dir, loc), "wb") as f:
            for off, b in sorted(parts, key=lambda x: x[0]):
                f.seek(off)
                f.write(b)
    with open(src, "rb") as f, open(dst + ".tmp", "wb") as g:
        g.write(f.read())
    os.replace(dst + ".tmp", dst)
    return dst


# ------------------------------------------------------------------ engines

class Server:
    """A warm engine process speaking the 'N' -> N times protocol."""

    def __init__(self, label, cmd, env=None):
        self.label = label
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env)
        line = self.p.stdout.readline()
        f = line.split()
        if not f or f[0] != "ready":
            raise RuntimeError(f"{label}: did not start ({' '.join(cmd)})")
        # modelprof's engine says the model's FLOPs and the measured GEMM peak
        self.flops = float(f[1]) if len(f) > 2 else None
        self.peak = float(f[2]) if len(f) > 2 else None

    def run(self, n):
        self.p.stdin.write(f"{n}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}: engine stopped")
        return [float(x) for x in line.split()]

    def close(self):
        try:
            self.p.stdin.write("q\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        self.p.wait(timeout=30)


class TorchEngine:
    label = "PyTorch"

    def __init__(self, name, threads):
        import torch

        torch.set_num_threads(threads)
        self.torch = torch
        self.model, self.args, _, _ = make_model(name)
        self.run(2)

    def run(self, n):
        t = []
        with self.torch.inference_mode():
            for _ in range(n):
                t0 = time.perf_counter()
                self.model(*self.args)
                t.append((time.perf_counter() - t0) * 1e3)
        return t

    def close(self):
        pass


def ensure_ort(prefix):
    mod = os.path.join(prefix, "node_modules", "onnxruntime-node")
    if not os.path.isdir(mod):
        os.makedirs(prefix, exist_ok=True)
        print("installing onnxruntime-node (npm, --ignore-scripts) into", prefix, flush=True)
        subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                        "--prefix", prefix, "onnxruntime-node"], check=True,
                       stdout=subprocess.DEVNULL)
    return os.path.join(prefix, "node_modules")


def cpu_isa():
    """The CPU's widest vector ISA from /proc/cpuinfo, and its model name."""
    flags, model = set(), "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "flags" and not flags:
                    flags = set(v.split())
                elif k == "model name" and model == "?":
                    model = v.strip()
    except OSError:
        pass
    if "amx_tile" in flags:
        isa = "AMX, fp32 on AVX-512"
    elif "avx512f" in flags:
        isa = "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        isa = "AVX2"
    else:
        isa = "SSE4.1 or older"
    extra = [n for f, n in (("avx512_vnni", "VNNI"), ("avx512_bf16", "BF16"), ("amx_bf16", "AMX-BF16"))
             if f in flags]
    return isa + (f" ({', '.join(extra)})" if extra else ""), model


def cpu_caches():
    """The caches of CPU 0 as Linux lists them: "L1d 48K, L1i 32K, L2 2048K, L3 ..."."""
    out = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith("index"):
                continue
            rd = lambda k: open(os.path.join(base, d, k)).read().strip()
            kind = rd("type")
            tag = "d" if kind == "Data" else "i" if kind == "Instruction" else ""
            shared = rd("shared_cpu_list") if os.path.exists(os.path.join(base, d, "shared_cpu_list")) else "?"
            out.append(f"L{rd('level')}{tag} {rd('size')} (cpus {shared})")
    except OSError:
        pass
    return ", ".join(out) or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-run", default=os.path.join(ROOT, "build", "bench_run"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--burst", type=int, default=5)
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--models", default=None, help="comma-separated (default: all of the mode's)")
    ap.add_argument("--dynamo", action="store_true",
                    help="the dynamo exporter's fixtures (models/dynamo/) with seeded weights")
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "bench", "peers"))
    ap.add_argument("--engines", default="modelprof,ORT,PyTorch")
    ap.add_argument("--opset", type=int, default=17,
                    help="export opset: 14 gives the older TorchScript graphs (LayerNorm, GELU decomposed)")
    ap.add_argument("--max-isa", default=None,
                    help="ONEDNN_MAX_CPU_ISA for modelprof's oneDNN (e.g. AVX2 on an AVX-512 machine)")
    args = ap.parse_args()

    isa, model = cpu_isa()
    print(f"CPU: {model}; ISA: {isa}; {os.cpu_count()} cores; caches: {cpu_caches()}", flush=True)
    mp_env = dict(os.environ)
    if args.max_isa:
        mp_env["ONEDNN_MAX_CPU_ISA"] = args.max_isa
    if mp_env.get("ONEDNN_MAX_CPU_ISA"):
        print(f"modelprof's oneDNN limited to ONEDNN_MAX_CPU_ISA={mp_env['ONEDNN_MAX_CPU_ISA']}; "
              "ONNX Runtime's own kernels (MLAS) are not limited by it and use the CPU's widest ISA, "
              "so mp/ORT here is against a faster peer than on a machine with that ISA only", flush=True)

    if args.dynamo:
        args.dir = os.path.join(os.path.dirname(args.dir), "dynamo")
        if "PyTorch" in args.engines.split(","):
            args.engines = ",".join(e for e in args.engines.split(",") if e != "PyTorch")
    models = args.models.split(",") if args.models else (DYNAMO if args.dynamo else MODELS)
    w = max([13] + [len(n) for n in models])
    os.makedirs(args.dir, exist_ok=True)
    node_path = ensure_ort(os.path.join(ROOT, "build", "ort"))
    env = dict(os.environ, NODE_PATH=node_path)
    want = args.engines.split(",")
    rows, failed = [], False
    peaks = {}
    for name in models:
        dims = []
        if args.dynamo:
            path = os.path.join(args.dir, name + ".onnx")
            if not os.path.exists(path):
                print(f"writing seeded weights for {name} -> {path}.data", flush=True)
                dynamo_with_weights(name, args.dir)
            if name in DYNAMO_LM:
                dims = [f"{k}={v}" for k, v in DYNAMO_DIMS.items()]
        else:
            path = os.path.join(args.dir, name + ("" if args.opset == 17 else f"_op{args.opset}") + ".onnx")
            if not os.path.exists(path):
                print(f"exporting {name} (opset {args.opset}) -> {path}", flush=True)
                export(name, path, args.opset)
        engines = []
        try:
            if "modelprof" in want:
                engines.append(Server("modelprof", [args.bench_run, path, "--threads", str(args.threads)] +
                                      [x for d in dims for x in ("--dim", d)], env=mp_env))
            if "ORT" in want:
                engines.append(Server("ORT", ["node", os.path.join(HERE, "ort_run.js"), path,
                                              str(args.threads)] + dims, env=env))
            if "PyTorch" in want:
                engines.append(TorchEngine(name, args.threads))
            times = {e.label: [] for e in engines}
            for e in engines:
                e.run(2)  # warm-up
            for r in range(args.rounds):
                order = engines if r % 2 == 0 else engines[::-1]
                for e in order:
                    time.sleep(args.pause)
                    times[e.label] += e.run(args.burst)
        except (RuntimeError, OSError, subprocess.SubprocessError) as ex:
            print(f"{name}: {ex}", file=sys.stderr)
            failed = True
            continue
        finally:
            for e in engines:
                e.close()
        med = {k: statistics.median(v) for k, v in times.items()}
        mn = {k: min(v) for k, v in times.items()}
        # the fraction of the measured fp32 GEMM peak each engine's median reaches
        mpe = next((e for e in engines if e.label == "modelprof" and getattr(e, "peak", None)), None)
        frac = {k: mpe.flops / (med[k] / 1e3) / mpe.peak for k in med} if mpe and mpe.peak else {}
        peaks[name] = (frac, mpe.peak if mpe else None)
        rows.append((name, med, mn))
        cells = "  ".join(f"{k} {med[k]:8.2f} ms (min {mn[k]:.2f})" for k in med)
        print(f"{name:{w}s} {cells}", flush=True)

    print()
    graphs = "dynamo exports (opset 20)" if args.dynamo else f"opset {args.opset}"
    cap = mp_env.get("ONEDNN_MAX_CPU_ISA")
    print(f"threads {args.threads}, {args.rounds} rounds x {args.burst} runs per engine, medians; "
          f"{graphs}, ISA {isa}" + (f", modelprof at most {cap}" if cap else ""))
    print(f"{'model':{w}s} {'modelprof':>10s} {'ORT':>10s} {'PyTorch':>10s} {'mp/ORT':>8s} {'mp/PyTorch':>10s}  verdict")
    for name, med, _ in rows:
        mp, ort, pt = med.get("modelprof"), med.get("ORT"), med.get("PyTorch")
        r1 = mp / ort if mp and ort else None
        r2 = mp / pt if mp and pt else None
        # engines left out (--engines) are not judged; none left: no verdict
        t_ort, t_torch = TARGETS.get(name, (TARGET_ORT, TARGET_TORCH))
        ok = (r1 is not None or r2 is not None) and (r1 is None or r1 <= t_ort) and \
            (r2 is None or r2 <= t_torch)
        fmt = lambda x: f"{x:10.2f}" if x else f"{'-':>10s}"
        rf = lambda x, w: f"{x:{w}.2f}x" if x else f"{'-':>{w + 1}s}"
        frac, peak = peaks.get(name, ({}, None))
        pk = "  ".join(f"{k} {v * 100:.0f}%" for k, v in frac.items())
        print(f"{name:{w}s} {fmt(mp)} {fmt(ort)} {fmt(pt)} {rf(r1, 7)} {rf(r2, 9)}  "
              f"{'meets' if ok else 'misses'} (<= {t_ort}x ORT, <= {t_torch}x PyTorch)"
              + (f"; of the measured GEMM peak ({peak / 1e9:.0f} GFLOP/s): {pk}" if pk else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
