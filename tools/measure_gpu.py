#!/usr/bin/python3
"""Measure training and inference steps on a CUDA GPU, beside PyTorch's
MemTracker, as references for `modelprof plan` (run where a GPU and
PyTorch >= 2.5 are; nothing in `make test` depends on it).

    python3 tools/measure_gpu.py OUT_DIR [--budget-s 420] [--only SECTION,...]
    /usr/bin/python3 tools/measure_gpu.py OUT_DIR --smoke     (CPU, tiny sizes: checks the script)

Writes OUT_DIR/rows.jsonl, one JSON object a row, as each row ends (a row
that fails is a row with "error"), and stops starting rows once the budget
is spent. The method is the shared reference's (shared/reference/README.md):
PyTorch's TF32 defaults; training is model.train(), one untimed step (the
optimizer's state exists from then), reset_peak_memory_stats(), then the
timed steps (loss, zero_grad(set_to_none=True), backward, step), each
between two synchronisations; peak_allocated_bytes is
torch.cuda.max_memory_allocated() over the timed steps, step_ms_median their
median. Inference is model.eval() and one forward under no_grad after a
warm-up; activation_peak_bytes is the peak less what was allocated before.

Sections:
  host    the host's cost of one dispatched operator: a chain of small
          operators (a 64-wide Linear, GELU and LayerNorm, 24 times, on 4
          tokens) whose kernels take far less than their issue; its step
          time over the ATen operators a TorchDispatchMode counts in it, fwd
          alone and fwd + bwd, fp32 and under bf16 autocast
  short   short steps of many small kernels (Hugging Face BERT-base 32 x
          128 under bf16 autocast, with and without checkpointing;
          torchvision Swin-T at 32 under autocast, ConvNeXt-T at 64 in
          fp32): the step's wall time, the device's kernel time in it
          (torch.profiler), its kernels (the 15 longest by name) and its
          dispatched operators; the forward and loss alone, timed and
          counted (the host's cost of a forward operator, what a
          checkpointed recompute adds)
  mem     the project's fixture decoders (tools/fixture_models.py, eager
          attention, transformers' causal-LM loss: logits upcast, labels
          shifted) in pure bf16 and under autocast, AdamW: the measured peak
          beside MemTracker's (torch.distributed._tools.mem_tracker) on the
          same model and step, by its categories
  infer   inference peaks: the BERT fixture at 8 x 512, torchvision ViT-B/16,
          ConvNeXt-T and Swin-T at 64, fp32
  py      this package on this PyTorch: get_model_profile with keyword
          inputs on Hugging Face BERT, modelprof.plan on a meta-device Llama
  export  Hugging Face's BERT, BERT classifier, Gemma-2 (2 layers) and
          Llama-3.2-1B sizes exported and stripped of their weights into
          OUT_DIR/exports.tar.gz, to plan here (tools/plan_measured.py
          --exports); --only names it (not in the default sections)
"""

import argparse
import json
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import torch                      # noqa: E402
from torch import nn              # noqa: E402

SMOKE = False
DEV = "cuda"
T0 = time.time()
BUDGET = 420.0
OUT = None


def emit(row):
    row["t_s"] = round(time.time() - T0, 1)
    line = json.dumps(row, sort_keys=True)
    print(line, flush=True)
    with open(os.path.join(OUT, "rows.jsonl"), "a") as f:
        f.write(line + "\n")


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def mem_reset():
    if DEV == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def mem_peak():
    return torch.cuda.max_memory_allocated() if DEV == "cuda" else 0


def mem_now():
    return torch.cuda.memory_allocated() if DEV == "cuda" else 0


ONLY_ROW = None     # the row this process runs (--row); None: list them
NAMES = []


def row(name, fn, **meta):
    """Run one row (each in a process of its own: nothing of the rows
    before it stays allocated); its figures or its error."""
    if ONLY_ROW is None:
        NAMES.append(name)
        return
    if name != ONLY_ROW:
        return
    r = dict(meta, row=name)
    try:
        mem_reset()
        r.update(fn())
    except Exception as e:  # a row's failure is its result
        r["error"] = "%s: %s" % (type(e).__name__, e)
        r["trace"] = traceback.format_exc()[-6000:]
    emit(r)
    if DEV == "cuda":
        torch.cuda.empty_cache()


class OpCount(object):
    """The ATen operators dispatched inside the block (TorchDispatchMode),
    less detach and is_same_size (autograd's bookkeeping)."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        outer = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func.overloadpacket.__name__)
                if name not in ("detach", "is_same_size"):
                    outer.n += 1
                return func(*args, **(kwargs or {}))

        self.n = 0
        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *a):
        self.mode.__exit__(*a)


def causal_lm_loss(logits, ids):
    """transformers' ForCausalLMLoss: logits upcast to fp32, the labels
    shifted left by padding with -100, F.cross_entropy ignoring -100."""
    v = logits.shape[-1]
    logits = logits.float()
    labels = nn.functional.pad(ids, (0, 1), value=-100)[..., 1:].contiguous()
    return nn.functional.cross_entropy(logits.view(-1, v), labels.view(-1), ignore_index=-100)


def autocast(on):
    if not on:
        return torch.autocast(DEV, enabled=False)
    return torch.autocast(DEV, dtype=torch.bfloat16)


def train_steps(model, make_loss, amp, opt, steps):
    """One untimed step, then `steps` timed: (median ms, peak bytes)."""
    def one():
        with autocast(amp):
            loss = make_loss()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    model.train()
    one()
    mem_reset()
    times = []
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        one()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), mem_peak(), one


def device_time(one, steps=2):
    """The device's kernel time per step, its kernels, and the wall time
    per step under the profiler (torch.profiler, CUDA activity)."""
    if DEV != "cuda":
        return {}
    from torch.profiler import profile, ProfilerActivity
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            one()
        sync()
    busy, n, first, last = 0.0, 0, None, None
    by_name = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            us = e.time_range.elapsed_us()
            busy += us
            n += 1
            k = by_name.setdefault(e.name[:120], [0.0, 0])
            k[0] += us / steps
            k[1] += 1
            first = e.time_range.start if first is None else min(first, e.time_range.start)
            last = e.time_range.end if last is None else max(last, e.time_range.end)
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:15]
    return dict(device_kernel_ms=busy / 1e3 / steps, kernels_per_step=n / steps,
                device_span_ms=((last - first) / 1e3 / steps) if n else None,
                top_kernels=[dict(name=k, us_per_step=round(v[0], 1), launches=v[1] // steps) for k, v in top])


def count_ops(one):
    with OpCount() as c:
        one()
    sync()
    return c.n


# ---------------------------------------------------------------- host


def host_rows():
    width, depth, tokens = 64, 24, 4

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
                                        for _ in range(depth))

        def forward(self, x):
            for m in self.layers:
                x = m(x)
            return x

    torch.manual_seed(0)
    model = Chain().to(DEV)
    x = torch.randn(tokens, width, device=DEV)
    for amp in (False, True):
        def fwd():
            with autocast(amp):
                return model(x)

        def fwd_bwd():
            with autocast(amp):
                y = model(x).float().sum()
            y.backward()

        def measure(fn, reps=200 if not SMOKE else 5):
            for _ in range(10 if not SMOKE else 1):
                fn()
            sync()
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            sync()
            return (time.perf_counter() - t) / reps * 1e6

        def case(fn, kind):
            def go():
                us = measure(fn)
                ops = count_ops(fn)
                d = device_time(fn, steps=3)
                return dict(step_us=us, ops=ops, host_us_per_op=us / ops, **d)
            row("host " + kind + (" autocast" if amp else " fp32"), go, section="host")

        def fwd_nograd():
            with torch.no_grad():
                return fwd()

        case(fwd_nograd, "forward no_grad")
        case(fwd, "forward")
        case(fwd_bwd, "forward+backward")


# ---------------------------------------------------------------- short


def short_rows():
    steps = 5 if not SMOKE else 1

    def run(build, batch_fn, amp, lr=1e-5, ckpt=False, sgd=False):
        torch.manual_seed(0)
        model = build().to(DEV)
        if ckpt:
            model.gradient_checkpointing_enable()
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        make_loss = batch_fn(model)
        ms, peak, one = train_steps(model, make_loss, amp, opt, steps)
        r = dict(step_ms_median=ms, peak_allocated_bytes=peak,
                 params=sum(p.numel() for p in model.parameters()))
        r.update(device_time(one))
        r["ops_per_step"] = count_ops(one)

        def fwd():   # the forward and loss alone (what checkpointing runs again), graph dropped
            with autocast(amp):
                make_loss()

        times = []
        for _ in range(steps + 1):
            sync()
            t = time.perf_counter()
            fwd()
            sync()
            times.append((time.perf_counter() - t) * 1e3)
        r["fwd_ms_median"] = statistics.median(times[1:])
        r["fwd_ops"] = count_ops(fwd)
        if r.get("device_kernel_ms"):
            r["host_us_per_op_if_host_bound"] = (ms * 1e3) / r["ops_per_step"]
        del model, opt
        return r

    def hf_bert():
        from transformers import BertConfig, BertForSequenceClassification
        c = BertConfig() if not SMOKE else BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                       intermediate_size=64)
        return BertForSequenceClassification(c)

    def bert_batch(b, s):
        def f(model):
            ids = torch.randint(0, 30522, (b, s), device=DEV)
            labels = torch.randint(0, 2, (b,), device=DEV)
            mask = torch.ones(b, s, dtype=torch.long, device=DEV)
            return lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss
        return f

    def vision_batch(b, hw=224):
        def f(model):
            x = torch.randn(b, 3, hw, hw, device=DEV)
            y = torch.randint(0, 1000, (b,), device=DEV)
            return lambda: nn.functional.cross_entropy(model(x), y)
        return f

    import torchvision
    b32, b64, s128 = (32, 64, 128) if not SMOKE else (2, 2, 16)
    row("bert_base hf 32x128 bf16-autocast adamw", lambda: run(hf_bert, bert_batch(b32, s128), True),
        section="short", model="hf_bert_base_cls", batch=b32, seq=s128, precision="bf16-autocast",
        optimizer="adamw", checkpointing=False)
    row("bert_base hf 32x128 bf16-autocast adamw ckpt", lambda: run(hf_bert, bert_batch(b32, s128), True, ckpt=True),
        section="short", model="hf_bert_base_cls", batch=b32, seq=s128, precision="bf16-autocast",
        optimizer="adamw", checkpointing=True)
    hw = 224 if not SMOKE else 64
    row("swin_t tv 32 bf16-autocast adamw", lambda: run(torchvision.models.swin_t, vision_batch(b32, hw), True),
        section="short", model="tv_swin_t", batch=b32, precision="bf16-autocast", optimizer="adamw")
    row("convnext_tiny tv 64 fp32 adamw",
        lambda: run(torchvision.models.convnext_tiny, vision_batch(b64, hw), False),
        section="short", model="tv_convnext_tiny", batch=b64, precision="fp32", optimizer="adamw")
    row("resnet50 tv 64 bf16-autocast adamw", lambda: run(torchvision.models.resnet50, vision_batch(b64, hw), True),
        section="short", model="tv_resnet50", batch=b64, precision="bf16-autocast", optimizer="adamw")


# ---------------------------------------------------------------- mem


def memtracker_peak(model, opt, one):
    """MemTracker's peak over one step (after the measured ones: the
    optimizer's state exists), by category, in bytes: {category: bytes}."""
    from torch.distributed._tools.mem_tracker import MemTracker
    mt = MemTracker()
    mt.track_external(model, opt)
    with mt:
        one()
    snap = mt.get_tracker_snapshot("peak")
    out = {}
    for dev, cats in snap.items():
        if str(dev).startswith("cuda") or SMOKE:
            for k, v in cats.items():
                out[str(k).split(".")[-1]] = int(v)
    return out


def mem_rows():
    import fixture_models as fm
    steps = 3 if not SMOKE else 1

    def run(cfg, b, s, pure_bf16, amp, ckpt=False):
        def go():
            torch.manual_seed(0)
            c = dict(getattr(fm, cfg))
            if SMOKE:
                c.update(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         intermediate_size=128, vocab_size=1000, num_hidden_layers=2)
            with torch.device(DEV) if DEV == "cuda" else _null():
                model = fm.LlamaForCausalLM(c)
            model = model.to(DEV)
            if pure_bf16:
                model = model.to(torch.bfloat16)
            if ckpt:
                import torch.utils.checkpoint as cp
                for layer in model.model.layers:
                    f = layer.forward
                    layer.forward = (lambda *a, _f=f: cp.checkpoint(_f, *a, use_reentrant=False))
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
            ids = torch.randint(0, c["vocab_size"], (b, s), device=DEV)
            w = mem_now()
            def lm_loss():
                logits = model(ids)   # held while the loss runs, as transformers' forward holds its logits
                return causal_lm_loss(logits, ids)
            ms, peak, one = train_steps(model, lm_loss, amp, opt, steps)
            r = dict(step_ms_median=ms, peak_allocated_bytes=peak, before_bytes=w,
                     params=sum(p.numel() for p in model.parameters()))
            try:
                mem_reset()
                r["memtracker_peak"] = memtracker_peak(model, opt, one)
                r["peak_under_memtracker_bytes"] = mem_peak()
            except Exception as e:
                r["memtracker_error"] = "%s: %s" % (type(e).__name__, e)
            return r
        return go

    s2k = 2048 if not SMOKE else 32
    row("gemma2_2b_2layers b2 s2048 pure-bf16 adamw", run("GEMMA2_2B_2LAYERS", 2, s2k, True, False),
        section="mem", model="gemma2_2b_2layers", batch=2, seq=s2k, precision="bf16", optimizer="adamw")
    row("llama_1b b2 s2048 pure-bf16 adamw", run("LLAMA_1B", 2, s2k, True, False),
        section="mem", model="llama_1b", batch=2, seq=s2k, precision="bf16", optimizer="adamw")
    row("llama_1b b2 s2048 pure-bf16 adamw ckpt", run("LLAMA_1B", 2, s2k, True, False, ckpt=True),
        section="mem", model="llama_1b", batch=2, seq=s2k, precision="bf16", optimizer="adamw", checkpointing=True)
    s1k = 1024 if not SMOKE else 32
    row("qwen25_05b b4 s1024 bf16-autocast adamw", run("QWEN25_05B", 4, s1k, False, True),
        section="mem", model="qwen25_05b", batch=4, seq=s1k, precision="bf16-autocast", optimizer="adamw")
    row("mistral_7b_2layers b2 s2048 pure-bf16 adamw", run("MISTRAL_7B_2LAYERS", 2, s2k, True, False),
        section="mem", model="mistral_7b_2layers", batch=2, seq=s2k, precision="bf16", optimizer="adamw")

    def hf_decoder(build, memtracker):
        """A Hugging Face causal LM in pure bf16 with its own loss (labels=ids)."""
        def go():
            c, cls = build()
            torch.manual_seed(0)
            with torch.device(DEV) if DEV == "cuda" else _null():
                model = cls(c)
            model = model.to(DEV).to(torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
            ids = torch.randint(0, c.vocab_size, (2, s2k), device=DEV)
            ms, peak, one = train_steps(model, lambda: model(input_ids=ids, labels=ids).loss, False, opt, steps)
            r = dict(step_ms_median=ms, peak_allocated_bytes=peak,
                     params=sum(p.numel() for p in model.parameters()),
                     attn_implementation=str(getattr(model.config, "_attn_implementation", None)))
            if memtracker:
                try:
                    mem_reset()
                    r["memtracker_peak"] = memtracker_peak(model, opt, one)
                except Exception as e:
                    r["memtracker_error"] = "%s: %s" % (type(e).__name__, e)
            return r
        return go

    def gemma2():
        from transformers import Gemma2Config, Gemma2ForCausalLM
        c = Gemma2Config(num_hidden_layers=2) if not SMOKE else Gemma2Config(
            num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=1000)
        return c, Gemma2ForCausalLM

    def llama1b():
        from transformers import LlamaConfig, LlamaForCausalLM
        c = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
                        rope_theta=500000.0)
        if SMOKE:
            c = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2)
        return c, LlamaForCausalLM

    row("hf llama-3.2-1b sizes b2 s2048 pure-bf16 adamw", hf_decoder(llama1b, False), section="mem", model="hf_llama_1b",
        batch=2, seq=s2k, precision="bf16", optimizer="adamw")
    row("hf gemma2-2b 2 layers b2 s2048 pure-bf16 adamw", hf_decoder(gemma2, True), section="mem", model="hf_gemma2_2b_2layers",
        batch=2, seq=s2k, precision="bf16", optimizer="adamw")


class _null(object):
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ---------------------------------------------------------------- infer


def hf_bert_base():
    """Hugging Face's BertModel (its default attention: SDPA)."""
    from transformers import BertConfig, BertModel
    c = BertConfig() if not SMOKE else BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                   intermediate_size=64)
    return BertModel(c)


def infer_rows():
    import fixture_models as fm
    import torchvision

    def run(build, inputs):
        def go():
            torch.manual_seed(0)
            model = build().to(DEV).eval()
            args = inputs()
            with torch.no_grad():
                model(*args)
                mem_reset()
                before = mem_now()
                model(*args)
                sync()
            peak = mem_peak()
            r = dict(peak_allocated_bytes=peak, activation_peak_bytes=peak - before, before_bytes=before,
                     params=sum(p.numel() for p in model.parameters()))
            return r
        return go

    b, s = (8, 512) if not SMOKE else (1, 16)
    bert_c = fm.BERT_BASE if not SMOKE else fm.BERT_TINY
    row("bert_base fixture 8x512 fp32 inference",
        run(lambda: fm.Bert(bert_c), lambda: (torch.randint(0, 30522, (b, s), device=DEV),
                                              torch.ones(b, s, dtype=torch.long, device=DEV))),
        section="infer", model="bert_base_fixture", batch=b, seq=s, mode="inference fp32 no_grad")
    row("bert_base hf 8x512 fp32 inference", run(hf_bert_base, lambda: (torch.randint(0, 30522, (b, s), device=DEV),
                                                                      torch.ones(b, s, dtype=torch.long, device=DEV))),
        section="infer", model="hf_bert_base", batch=b, seq=s, mode="inference fp32 no_grad")
    n, hw = (64, 224) if not SMOKE else (1, 64)
    for name in ("vit_b_16", "convnext_tiny", "swin_t", "resnet50"):
        if SMOKE and name == "vit_b_16":
            continue
        row("%s tv %d fp32 inference" % (name, n),
            run(getattr(torchvision.models, name), lambda: (torch.randn(n, 3, hw, hw, device=DEV),)),
            section="infer", model="tv_" + name, batch=n, mode="inference fp32 no_grad")


# ---------------------------------------------------------------- export


def strip_weights(src, dst, small=4096):
    """src (an ONNX file, its weights inline or external) -> dst with every
    initializer over `small` bytes made EXTERNAL in a file that is never
    written (the fixtures' form: shapes and types kept, values dropped);
    the small ones (shape tensors the counts read) stay inline."""
    import onnx
    m = onnx.load(src, load_external_data=False)
    stem = os.path.splitext(os.path.basename(dst))[0] + ".weights.bin"
    offset = 0
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            for e in t.external_data:
                if e.key == "location":
                    e.value = stem
            continue
        n = len(t.raw_data)
        if n <= small:
            continue
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", stem), ("offset", str(offset)), ("length", str(n))):
            e = t.external_data.add()
            e.key, e.value = k, v
        offset += (n + 4095) // 4096 * 4096
    onnx.save(m, dst)


def export_rows():
    """Hugging Face's models as measured, exported here (the TorchScript
    exporter, else dynamo's) and stripped of their weights, for planning
    where the GPU is not: OUT/exports.tar.gz (tools/plan_measured.py
    --exports)."""
    import tarfile
    import tempfile
    d = os.path.join(OUT, "exports")
    os.makedirs(d, exist_ok=True)

    def export(name, build, args, dynamic):
        def go():
            torch.manual_seed(0)
            model = build().to(DEV).eval()
            xs = tuple(a.to(DEV) for a in args)
            tmp = tempfile.mkdtemp()
            path = os.path.join(tmp, name + ".onnx")
            how = "torchscript"
            try:
                torch.onnx.export(model, xs, path, opset_version=17, input_names=list(dynamic),
                                  dynamic_axes=dynamic, dynamo=False)
            except Exception as e:  # transformers' forward may not trace: dynamo's exporter
                how = "dynamo (torchscript: %s: %s)" % (type(e).__name__, str(e)[:200])
                from torch.export import Dim
                dims = {}
                shapes = {k: {ax: dims.setdefault(nm, Dim(nm)) for ax, nm in v.items()} for k, v in dynamic.items()}
                torch.onnx.export(model, xs, path, opset_version=18, input_names=list(dynamic), dynamo=True,
                                  dynamic_shapes=shapes, external_data=True)
            strip_weights(path, os.path.join(d, name + ".onnx"))
            with tarfile.open(os.path.join(OUT, "exports.tar.gz"), "w:gz") as tf:
                tf.add(d, arcname="exports")
            return dict(exported=name + ".onnx", exporter=how, bytes=os.path.getsize(os.path.join(d, name + ".onnx")))
        return go

    ids = torch.zeros(2, 16, dtype=torch.long)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}

    def causal(cls_name, cfg):
        def build():
            import transformers
            c = getattr(transformers, cfg[0])(**cfg[1])
            m = getattr(transformers, cls_name)(c)
            return m.to(torch.bfloat16)
        return build

    row("export hf_bert_base", export("hf_bert_base", hf_bert_base, (ids, torch.ones_like(ids)), axes),
        section="export")
    row("export hf_bert_base_cls", export(
        "hf_bert_base_cls", lambda: __import__("transformers").BertForSequenceClassification(
            __import__("transformers").BertConfig()), (ids, torch.ones_like(ids)), axes), section="export")
    gemma = ("Gemma2Config", dict(num_hidden_layers=2))
    llama = ("LlamaConfig", dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                 num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                                 tie_word_embeddings=True, rope_theta=500000.0))
    row("export hf_gemma2_2b_2layers", export("hf_gemma2_2b_2layers", causal("Gemma2ForCausalLM", gemma), (ids,),
                                              {"input_ids": {0: "batch", 1: "seq"}}), section="export")
    row("export hf_llama_1b", export("hf_llama_1b", causal("LlamaForCausalLM", llama), (ids,),
                                     {"input_ids": {0: "batch", 1: "seq"}}), section="export")


# ---------------------------------------------------------------- py


def py_rows():
    sys.path.insert(0, os.path.join(ROOT, "python"))

    def profile_kwargs():
        import modelprof
        from transformers import BertConfig, BertModel
        m = BertModel(BertConfig(num_hidden_layers=2)).to(DEV)
        ids = torch.randint(0, 30522, (2, 64), device=DEV)
        flops, macs, params = modelprof.get_model_profile(
            m, kwargs=dict(input_ids=ids, attention_mask=torch.ones_like(ids)), as_string=False,
            print_profile=False)
        return dict(flops=flops, macs=macs, params=params,
                    torch_params=sum(p.numel() for p in m.parameters()))

    def plan_meta():
        import modelprof
        from transformers import LlamaConfig, LlamaForCausalLM
        c = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=2,
                        num_attention_heads=8, num_key_value_heads=4)
        with torch.device("meta"):
            m = LlamaForCausalLM(c)
        ids = torch.zeros(2, 256, dtype=torch.long, device="meta")
        t = time.time()
        p = modelprof.plan(m, args=[ids], gpu="h200", precision="bf16-mixed", optimizer="adamw")
        return dict(peak_bytes=p["memory"]["peak_bytes"], step_time_s=p.get("step_time_s"),
                    plan_s=time.time() - t, torch_params=sum(x.numel() for x in m.parameters()))

    def plan_weights():
        import modelprof
        from transformers import LlamaConfig, LlamaForCausalLM
        c = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=2,
                        num_attention_heads=8, num_key_value_heads=4)
        m = LlamaForCausalLM(c)
        ids = torch.zeros(2, 256, dtype=torch.long)
        p = modelprof.plan(m, args=[ids], gpu="h200", precision="bf16-mixed", optimizer="adamw")
        return dict(peak_bytes=p["memory"]["peak_bytes"], step_time_s=p.get("step_time_s"))

    def plan_meta_resnet():
        import modelprof
        import torchvision
        with torch.device("meta"):
            m = torchvision.models.resnet18()
        x = torch.zeros(2, 3, 64, 64, device="meta")
        p = modelprof.plan(m, args=[x], gpu="h200", precision="bf16-mixed", optimizer="adamw")
        return dict(peak_bytes=p["memory"]["peak_bytes"])

    def small_llama_config():
        from transformers import LlamaConfig
        return LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=2,
                           num_attention_heads=8, num_key_value_heads=4)

    def profile_meta_vs_weights():
        import modelprof
        from transformers import LlamaForCausalLM
        out = {}
        for where in ("meta", "cpu"):
            torch.manual_seed(0)
            with torch.device(where):
                m = LlamaForCausalLM(small_llama_config())
            ids = torch.zeros(2, 256, dtype=torch.long, device=where)
            f, mac, par = modelprof.get_model_profile(m, args=[ids], as_string=False, print_profile=False)
            p = modelprof.plan(m, args=[ids], gpu="h200", precision="bf16-mixed", optimizer="adamw")
            out[where] = dict(flops=f, macs=mac, params=par, peak_bytes=p["memory"]["peak_bytes"],
                              torch_params=sum(x.numel() for x in m.parameters()))
        return out

    def profile_meta_70b():
        import resource
        import modelprof
        from transformers import LlamaConfig, LlamaForCausalLM
        c = LlamaConfig(vocab_size=32000, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                        num_attention_heads=64, num_key_value_heads=8, max_position_embeddings=4096)
        t = time.time()
        with torch.device("meta"):
            m = LlamaForCausalLM(c)
        ids = torch.zeros(1, 4096, dtype=torch.long, device="meta")
        f, mac, par = modelprof.get_model_profile(m, args=[ids], as_string=False, print_profile=False)
        return dict(flops=f, macs=mac, params=par, torch_params=sum(x.numel() for x in m.parameters()),
                    seconds=time.time() - t, max_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)

    row("py meta vs weights hf llama", profile_meta_vs_weights, section="py")
    row("py get_model_profile hf bert kwargs", profile_kwargs, section="py")
    row("py plan meta hf llama", plan_meta, section="py")
    row("py plan weights hf llama", plan_weights, section="py")
    row("py plan meta tv resnet18", plan_meta_resnet, section="py")
    row("py meta hf llama 70b sizes", profile_meta_70b, section="py")


def main():
    global SMOKE, DEV, BUDGET, OUT, ONLY_ROW
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--only", default="host,short,mem,infer,py")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--row", help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    SMOKE, BUDGET, OUT, ONLY_ROW = a.smoke, a.budget_s, a.out, a.row
    DEV = "cpu" if a.smoke or a.list else "cuda"
    os.makedirs(OUT, exist_ok=True)
    env = dict(section="env", row="env", torch=torch.__version__)
    if DEV == "cuda":
        env.update(gpu=torch.cuda.get_device_name(0), tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                   tf32_cudnn=torch.backends.cudnn.allow_tf32)
    try:
        import transformers
        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    sections = dict(host=host_rows, short=short_rows, mem=mem_rows, infer=infer_rows, py=py_rows,
                    export=export_rows)
    if a.row is not None or a.list:
        for s in a.only.split(","):
            try:
                sections[s]()
            except Exception as e:
                if a.row is not None:
                    emit(dict(section=s, row=a.row, error="%s: %s" % (type(e).__name__, e),
                              trace=traceback.format_exc()[-3000:]))
        if a.list:
            print(json.dumps(NAMES))
        return 0
    emit(env)
    import subprocess
    base = [sys.executable, os.path.abspath(__file__), OUT, "--only", a.only] + (["--smoke"] if SMOKE else [])
    names = json.loads(subprocess.run(base + ["--list"], capture_output=True, text=True,
                                      env=dict(os.environ, CUDA_VISIBLE_DEVICES="")).stdout.splitlines()[-1])
    for name in names:
        left = BUDGET - (time.time() - T0)
        if left < 5:
            emit(dict(row=name, skipped="budget"))
            continue
        try:
            subprocess.run(base + ["--row", name], timeout=min(left, 150))
        except subprocess.TimeoutExpired:
            emit(dict(row=name, error="timed out"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
