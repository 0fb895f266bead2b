#!/usr/bin/python3
"""Writes the small CUDA memory snapshots of tests/snapshots/ (issue 32): the cases the four
shared real snapshots do not show, as the dicts PyTorch writes (docs/MEMORY_LAYOUT.md), pickled
with Python's pickle, and their reference outputs NAME.ref.json from tools/snapshot_ref.py.

  tools/make_snapshots.py [--out tests/snapshots] [--shared ../shared/fixtures/snapshots]

A small model of the caching allocator (c10/cuda/CUDACachingAllocator.cpp) places the blocks,
so the final segments agree with the trace as PyTorch's would: sizes round up to 512 bytes;
requests up to 1 MiB come from 2 MiB "small" segments, larger ones from 20 MiB segments (up to
10 MiB) or their own segment rounded to 2 MiB; a block splits when what is left is at least
512 bytes (small) or more than 1 MiB (large); freed blocks merge with free neighbours; empty
segments go back (segment_free) only on empty_cache. With expandable segments a pool is one
growing segment per stream and pool, mapped and unmapped in pages of 2 MiB (small pool) or 20 MiB (large
pool), ExpandableSegment's segment_size_ (segment_map/segment_unmap).

Frames are innermost first, one list object per call site shared by every event and block that
has it, so the pickler stores each stack once and refers to it through the memo, as PyTorch's
snapshots do. Everything is deterministic (no randomness, fixed times).
"""
import argparse
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import snapshot_ref  # noqa: E402

KB, MB = 1024, 1024 * 1024
SITE = "/opt/conda/lib/python3.10/site-packages/torch/"


class OOM(Exception):
    pass


def fr(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


class Frames:
    """Call sites -> one shared frame list each (the memo sharing PyTorch's files show)."""

    def __init__(self, style="python", cpp=False, key_order="nfl"):
        self.cache = {}
        self.style = style
        self.cpp = cpp
        self.key_order = key_order

    def _frame(self, f):
        if self.key_order == "fnl":  # 2.0: filename, name, line
            return {"filename": f["filename"], "name": f["name"], "line": f["line"]}
        return {"name": f["name"], "filename": f["filename"], "line": f["line"]}

    def backward(self, op):
        """Frames of what the backward does: it runs on autograd's device thread, which has no
        Python frames (the shared JasperSolt snapshot's backward events show only C++ frames
        down to torch::autograd::Engine::thread_main): [] with Python stacks, C++ frames with
        stacks="all"."""
        if self.style == "none" or not self.cpp:
            return []
        key = ("backward", op)
        if key not in self.cache:
            fl = [fr("??", 0, "torch::unwind::unwind()"),
                  fr("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
                  fr("??", 0, op),
                  fr("", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
                  fr("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
                  fr("??", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
                  fr("??", 0, "torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
                  fr("??", 0, "torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
                  fr("thread.cc", 0, "execute_native_thread_routine"), fr("??", 0, "start_thread"),
                  fr("", 0, "__clone3")]
            self.cache[key] = [self._frame(f) for f in fl]
        return self.cache[key]

    def get(self, *sites):
        """sites: innermost first, each (filename, line, name)."""
        if self.style == "none":
            return []
        key = tuple(sites)
        if key not in self.cache:
            fl = []
            if self.cpp:
                fl += [fr("??", 0, "torch::unwind::unwind()"),
                       fr("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
                       fr("??", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
                       fr("??", 0, "at::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, c10::optional<c10::Device>)")]
            fl += [fr(*s) for s in sites]
            if self.cpp:
                fl += [fr("??", 0, "PyEval_EvalFrameDefault"), fr("??", 0, "_start")]
            self.cache[key] = [self._frame(f) for f in fl]
        return self.cache[key]


class Segment:
    def __init__(self, dev, addr, size, stream, large, frames, expandable=False):
        self.dev, self.addr, self.size, self.stream = dev, addr, size, stream
        self.large, self.frames, self.expandable = large, frames, expandable
        # blocks: [addr, size, requested, state, frames]
        self.blocks = [[addr, size, 0, "inactive", []]] if size else []


class Allocator:
    """One device's caching allocator, recording its trace like record_trace does."""

    def __init__(self, dev, capacity, base, trace, clock, expandable=False, frames=None):
        self.dev, self.capacity, self.next_addr = dev, capacity, base
        self.trace, self.clock = trace, clock
        self.expandable = expandable
        self.segments = []
        self.live = {}  # addr -> (segment, block)
        self.frames = frames
        self.recording = True
        self.role = {}  # live address -> what the generator allocated it as (truth files)
        self.meta = None  # user_metadata stamped on events (_set_memory_metadata)
        self.compile_context = None

    def reserved(self):
        return sum(s.size for s in self.segments)

    def ev(self, action, addr, size, frames, stream=0, role=None, **extra):
        if not self.recording:
            return
        e = {"action": action, "addr": addr, "size": size, "stream": stream}
        if action == "oom":
            e = {"action": "oom", "device_free": addr, "size": size, "stream": stream}
        e.update(extra)
        if self.clock is not None:
            e["time_us"] = self.clock.tick()
        if frames is not None:
            e["frames"] = frames
        if self.meta is not None:
            e["user_metadata"] = self.meta
        if self.compile_context is not None:
            e["compile_context"] = self.compile_context
        if role is not None:
            ROLE[id(e)] = (e, role)
        self.trace.append(e)

    @staticmethod
    def round_size(n):
        return 512 if n < 512 else (n + 511) // 512 * 512

    def _new_segment(self, rounded, large, frames, stream, requested):
        if self.expandable:
            return self._grow(rounded, large, frames, stream, requested)
        if not large:
            size = 2 * MB
        elif rounded < 10 * MB:
            size = 20 * MB
        else:
            size = (rounded + 2 * MB - 1) // (2 * MB) * 2 * MB
        if self.reserved() + size > self.capacity:
            self.empty_cache(frames, silent=True)
            if self.reserved() + size > self.capacity:
                self.ev("oom", self.capacity - self.reserved(), requested, frames, stream)
                raise OOM(requested)
        seg = Segment(self.dev, self.next_addr, size, stream, large, frames)
        self.next_addr += size + 2 * MB  # a gap, as the driver leaves between mappings
        self.segments.append(seg)
        self.ev("segment_alloc", seg.addr, size, frames, stream)
        return seg

    def _grow(self, rounded, large, frames, stream, requested):
        seg = None
        for s in self.segments:
            if s.expandable and s.large == large and s.stream == stream:
                seg = s
        need = rounded
        if seg is not None and seg.blocks and seg.blocks[-1][3] == "inactive":
            need -= seg.blocks[-1][1]
        page = 20 * MB if large else 2 * MB  # ExpandableSegment's segment_size_: kLargeBuffer / kSmallBuffer
        grow = (need + page - 1) // page * page
        if self.reserved() + grow > self.capacity:
            self.ev("oom", self.capacity - self.reserved(), requested, frames, stream)
            raise OOM(requested)
        if seg is None:
            seg = Segment(self.dev, self.next_addr, 0, stream, large, frames, expandable=True)
            self.next_addr += 1 << 36  # room to grow: a reserved virtual range
            self.segments.append(seg)
        at = seg.addr + seg.size
        self.ev("segment_map", at, grow, frames, stream)
        seg.size += grow
        if seg.blocks and seg.blocks[-1][3] == "inactive":
            seg.blocks[-1][1] += grow
        else:
            seg.blocks.append([at, grow, 0, "inactive", []])
        return seg

    def malloc(self, n, frames, stream=0, role=None):
        rounded = self.round_size(n)
        large = rounded > MB
        best = None
        for s in self.segments:
            if s.large != large or s.stream != stream:
                continue
            for i, b in enumerate(s.blocks):
                if b[3] == "inactive" and b[1] >= rounded and (best is None or b[1] < best[2][1]):
                    best = (s, i, b)
        if best is None:
            s = self._new_segment(rounded, large, frames, stream, n)
            i = max(j for j, b in enumerate(s.blocks) if b[3] == "inactive" and b[1] >= rounded)
            best = (s, i, s.blocks[i])
        s, i, b = best
        rest = b[1] - rounded
        if (not large and rest >= 512) or (large and rest > MB):
            s.blocks.insert(i + 1, [b[0] + rounded, rest, 0, "inactive", []])
            b[1] = rounded
        b[2], b[3], b[4] = n, "active_allocated", frames
        self.live[b[0]] = (s, b)
        self.role[b[0]] = role
        self.ev("alloc", b[0], n, frames, stream, role=role)
        return b[0]

    def free(self, addr, frames=None, pending=False):
        s, b = self.live.pop(addr)
        self.ev("free_requested", addr, b[2], frames if frames is not None else b[4], s.stream,
                role=self.role.get(addr))
        if pending:  # used on another stream: stays active_pending_free until its event
            b[3] = "active_pending_free"
            self.live[addr] = (s, b)
            return
        self._complete(s, b, frames)

    def complete_pending(self, addr, frames=None):
        s, b = self.live.pop(addr)
        self._complete(s, b, frames)

    def _complete(self, s, b, frames):
        self.ev("free_completed", b[0], b[2], frames if frames is not None else b[4], s.stream,
                role=self.role.pop(b[0], None))
        b[2], b[3], b[4] = 0, "inactive", []
        i = s.blocks.index(b)
        if i + 1 < len(s.blocks) and s.blocks[i + 1][3] == "inactive":
            b[1] += s.blocks.pop(i + 1)[1]
        if i > 0 and s.blocks[i - 1][3] == "inactive":
            s.blocks[i - 1][1] += s.blocks.pop(i)[1]

    def empty_cache(self, frames, silent=False):
        for s in list(self.segments):
            if s.expandable:
                # unmap the free pages at the end
                if s.blocks and s.blocks[-1][3] == "inactive":
                    b = s.blocks[-1]
                    page = 20 * MB if s.large else 2 * MB
                    first = (b[0] - s.addr + page - 1) // page * page + s.addr
                    n = s.addr + s.size - first
                    if n > 0:
                        self.ev("segment_unmap", first, n, frames, s.stream)
                        s.size -= n
                        b[1] -= n
                        if b[1] == 0:
                            s.blocks.pop()
                if s.size == 0:
                    self.segments.remove(s)
            elif all(b[3] == "inactive" for b in s.blocks):
                self.ev("segment_free", s.addr, s.size, frames, s.stream)
                self.segments.remove(s)

    def segment_dicts(self, layout, pool_id=(0, 0)):
        out = []
        for s in self.segments:
            blocks = []
            for a, size, req, state, frames in s.blocks:
                if layout == "1.13":
                    b = {"size": size, "state": state}
                    if state != "inactive":
                        b["history"] = [{"addr": a, "real_size": req, "frames": frames}]
                elif layout == "2.0":
                    b = {"size": size, "requested_size": req, "state": state}
                    if state != "inactive":
                        b["history"] = [{"addr": a, "real_size": req, "frames": frames}]
                else:
                    b = {"address": a, "size": size, "requested_size": req, "state": state,
                         "frames": frames}
                if state != "inactive" and self.role.get(a) is not None:
                    ROLE[id(b)] = (b, self.role[a])
                blocks.append(b)
            alloc = sum(b[1] for b in s.blocks if b[3] == "active_allocated")
            active = sum(b[1] for b in s.blocks if b[3] != "inactive")
            req = sum(b[2] for b in s.blocks if b[3] != "inactive")
            d = {"device": s.dev, "address": s.addr, "total_size": s.size,
                 "allocated_size": alloc, "active_size": active}
            if layout != "1.13":
                d["requested_size"] = req
            d["stream"] = s.stream
            d["segment_type"] = "large" if s.large else "small"
            if layout == "2.5":
                d["segment_pool_id"] = pool_id
                d["is_expandable"] = s.expandable
                d["frames"] = s.frames
            d["blocks"] = blocks
            out.append(d)
        return out


class Clock:
    def __init__(self, t0):
        self.t = t0

    def tick(self, dt=37):
        self.t += dt
        return self.t


# ---- call sites (innermost first), as a training script's stacks read ----
def T(path, line, name):
    return (SITE + path, line, name)


USER = "/home/user/proj/"


def U(path, line, name):
    return (USER + path, line, name)


MAIN = U("train.py", 88, "<module>")
SITES = {
    "param": [T("nn/modules/module.py", 1160, "convert"), T("nn/modules/module.py", 810, "_apply"),
              T("nn/modules/module.py", 833, "_apply"), T("nn/modules/module.py", 1174, "to"),
              U("train.py", 41, "main"), MAIN],
    "input": [U("train.py", 57, "main"), MAIN],
    "target": [U("train.py", 58, "main"), MAIN],
    "act": lambda i: [T("nn/modules/linear.py", 114, "forward"), T("nn/modules/module.py", 1527, "_call_impl"),
                      U("model.py", 30 + 2 * (i % 4), "forward"), T("nn/modules/module.py", 1527, "_call_impl"),
                      U("train.py", 60, "main"), MAIN],
    "gelu": lambda i: [T("nn/functional.py", 1688, "gelu"), U("model.py", 31 + 2 * (i % 4), "forward"),
                       T("nn/modules/module.py", 1527, "_call_impl"), U("train.py", 60, "main"), MAIN],
    "tmp": lambda i: [T("nn/functional.py", 2515, "layer_norm"), U("model.py", 45, "forward"),
                      T("nn/modules/module.py", 1527, "_call_impl"), U("train.py", 60, "main"), MAIN],
    "loss": [T("nn/functional.py", 3053, "cross_entropy"), U("train.py", 61, "main"), MAIN],
    "opt_state": [T("optim/adam.py", 94, "_init_group"), T("optim/adam.py", 157, "step"),
                  T("optim/optimizer.py", 373, "wrapper"), U("train.py", 63, "main"), MAIN],
    "opt_tmp": [T("optim/adam.py", 533, "_multi_tensor_adam"), T("optim/adam.py", 166, "step"),
                T("optim/optimizer.py", 373, "wrapper"), U("train.py", 63, "main"), MAIN],
    "leak": [U("train.py", 66, "main"), MAIN],
    "zero_grad": [T("optim/optimizer.py", 452, "zero_grad"), U("train.py", 59, "main"), MAIN],
    "empty_cache": [T("cuda/memory.py", 162, "empty_cache"), U("train.py", 70, "main"), MAIN],
}


ROLE = {}  # id(event or block dict) -> (the dict, what the generator made it as): truth files

# what each call site allocates, in the categories of `modelprof memory` (docs/MEMORY.md)
CATEGORY = {"param": "parameter", "grad": "gradient",
            "opt_state": "optimizer_state", "act": "activation", "gelu": "activation",
            "loss": "activation", "tmp": "temporary", "bwd_tmp": "temporary",
            "opt_tmp": "temporary", "input": "input", "target": "input", "leak": "other"}


def site(frames, name, i=0):
    s = SITES[name]
    if callable(s):
        s = s(i)
    return frames.get(*s)


def m(alloc, size, frames, name, i=0):
    """alloc.malloc with the forward (main thread) stack of call site `name`."""
    return alloc.malloc(size, site(frames, name, i), role=name)


BACKWARD_OP = {"grad": "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
               "bwd_tmp": "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
               "bwd_free": "torch::autograd::generated::AddmmBackward0::release_variables()"}


def mb(alloc, size, frames, name):
    """alloc.malloc made by the backward (autograd's thread: no Python frames)."""
    return alloc.malloc(size, frames.backward(BACKWARD_OP[name]), role=name)


def train(alloc, frames, layers=4, width=512, batch=64, steps=4, leak=0, grads_kept=False,
          vary=False, churn=False, annotate=None):
    """A training loop: parameters at init; per step inputs, activations kept for the
    backward (freed there), temporaries, gradients created in the backward and alive across
    steps (set to None by zero_grad), Adam states created in the first optimizer.step and
    alive after, the optimizer's temporaries, an optional leak that grows each step.
    grads_kept: zero_grad comes after the forward (gradients alive through the next forward).
    vary: the batch changes each step (new block sizes: the cache churns).
    churn: empty_cache at the end of each step (segment_free then segment_alloc again)."""
    ann = annotate or (lambda *_: None)  # ann(module path, in the backward?)
    params = []
    ann("model")
    for i in range(layers):
        ann("model.layers.%d" % i)
        params.append(m(alloc, width * width * 4, frames, "param"))
        params.append(m(alloc, width * 4, frames, "param"))
    grads = []
    states = []
    leaks = []
    for step in range(steps):
        b = batch + (16 * step if vary else 0)
        ann("")
        if grads and not grads_kept:
            for g in grads:
                alloc.free(g, site(frames, "zero_grad"))
            grads = []
        x = m(alloc, b * width * 4, frames, "input")
        y = m(alloc, b * 8, frames, "target")
        kept = []
        for i in range(layers):
            ann("model.layers.%d" % i)
            t = m(alloc, b * width * 4, frames, "tmp", i)
            h = m(alloc, b * width * 4, frames, "act", i)
            alloc.free(t)
            g = m(alloc, b * width * 4, frames, "gelu", i)
            kept += [h, g]
        ann("")
        loss = m(alloc, 4, frames, "loss")
        if grads_kept and grads:
            for g in grads:
                alloc.free(g, site(frames, "zero_grad"))
            grads = []
        # backward: activations freed layer by layer, gradients created
        for i in reversed(range(layers)):
            ann("model.layers.%d" % i, True)
            bt = mb(alloc, b * width * 4, frames, "bwd_tmp")
            grads.append(mb(alloc, width * width * 4, frames, "grad"))
            grads.append(mb(alloc, width * 4, frames, "grad"))
            # saved tensors released, and the temporary, on autograd's thread
            alloc.free(kept.pop(), frames.backward(BACKWARD_OP["bwd_free"]))
            alloc.free(kept.pop(), frames.backward(BACKWARD_OP["bwd_free"]))
            alloc.free(bt, frames.backward(BACKWARD_OP["bwd_tmp"]))
        ann("")
        alloc.free(loss)
        alloc.free(x)
        alloc.free(y)
        # optimizer.step
        if not states:  # Adam's exp_avg and exp_avg_sq, made lazily in the first step
            for i in range(len(params)):
                sz = width * width * 4 if i % 2 == 0 else width * 4
                states.append(m(alloc, sz, frames, "opt_state"))
                states.append(m(alloc, sz, frames, "opt_state"))
        tmps = [m(alloc, width * width * 4, frames, "opt_tmp") for _ in range(2)]
        for t in tmps:
            alloc.free(t)
        if leak:
            leaks.append(m(alloc, leak, frames, "leak"))
        if churn:
            alloc.empty_cache(site(frames, "empty_cache"))
    return params, grads, states, leaks


def dump(obj, path, protocol):
    data = pickle.dumps(obj, protocol=protocol)
    if path.endswith(".gz"):
        data = gzip.compress(data, 9, mtime=0)
    with open(path, "wb") as f:
        f.write(data)


def snap_dict(allocs, layout, traces, extra=None, pool_id=(0, 0)):
    segs = []
    for a in allocs:
        segs += a.segment_dicts(layout, pool_id)
    d = {"segments": segs, "device_traces": traces}
    if layout == "2.5":
        d["allocator_settings"] = {
            "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
        d["external_annotations"] = []
    if extra:
        d.update(extra)
    return d


def build(out):
    made = {}
    GB = 1 << 30

    # 1. PyTorch 1.13: the bare segment list, per-block history (no address, no requested_size)
    fx = Frames(key_order="fnl")
    a = Allocator(0, 16 * GB, 0x7f0000000000, [], None, frames=fx)
    train(a, fx, steps=2)
    made["v113_bare_list.pickle"] = (a.segment_dicts("1.13"), 2)

    # 2. PyTorch 2.0: {segments, device_traces}; blocks with history, no address; events
    #    without time_us; a training run of 3 steps; protocol 3
    fx = Frames(key_order="fnl")
    tr = []
    a = Allocator(0, 16 * GB, 0x7f2000000000, tr, None, frames=fx)
    train(a, fx, steps=3)
    made["v20_history_train.pickle"] = (snap_dict([a], "2.0", [tr]), 3)

    # 3. PyTorch 2.0 with the old _record_memory_history(True): a one-entry trace
    fx = Frames(key_order="fnl")
    tr = []
    a = Allocator(0, 16 * GB, 0x7f3000000000, tr, None, frames=fx)
    train(a, fx, steps=2)
    made["v20_one_entry.pickle"] = (snap_dict([a], "2.0", [tr[-1:]]), 4)

    # 4. PyTorch 2.1-2.3: training with Adam, Python stacks, 4 steps, protocol 4
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7f4000000000, tr, Clock(1700000000000000), frames=fx)
    train(a, fx, steps=4, batch=1024)
    made["v22_train_adam.pickle"] = (snap_dict([a], "2.1", [tr]), 4)

    # 5. PyTorch 2.5+: leak growing each step, gradients alive through the next forward,
    #    varying shapes with empty_cache each step (churn); user_metadata (module paths) and
    #    compile_context on events; protocol 5, gzip
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7f5000000000, tr, Clock(1730000000000000), frames=fx)
    a.meta, a.compile_context = "", "N/A"

    def ann(m, backward=False):  # what modelprof.memory.record's hooks set (_set_memory_metadata;
        a.meta = m                  # in the backward too: record(backward_paths=True))
    train(a, fx, steps=5, batch=1024, leak=3 * MB, grads_kept=True, vary=True, churn=True, annotate=ann)
    made["v25_leak_churn.pickle.gz"] = (snap_dict([a], "2.5", [tr]), 5)

    # 6. PyTorch 2.5+: three devices (device 1 unused, an empty trace), C++ and Python frames,
    #    an OOM on device 2 (device_free, no addr)
    fx = Frames(cpp=True)
    tr0, tr2 = [], []
    clk = Clock(1735000000000000)
    a0 = Allocator(0, 80 * GB, 0x7e0000000000, tr0, clk, frames=fx)
    a2 = Allocator(2, 200 * MB, 0x7c0000000000, tr2, clk, frames=fx)
    train(a0, fx, steps=2)
    try:
        train(a2, fx, layers=6, width=1024, batch=4096, steps=3)
    except OOM:
        pass
    d = snap_dict([a0, a2], "2.5", [tr0, [], tr2])
    made["v25_multidev_oom.pickle"] = (d, 4)

    # 7. expandable segments: segment_map / segment_unmap, 2.5 layout, protocol 2
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7d0000000000, tr, Clock(1736000000000000), expandable=True, frames=fx)
    train(a, fx, steps=3, batch=1024, vary=True, churn=True)
    d = snap_dict([a], "2.5", [tr])
    d["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    d["allocator_settings"]["expandable_segments"] = True
    made["v25_expandable.pickle"] = (d, 2)

    # 8. frees before recording: the ring kept only the last events (max_entries); the trace
    #    starts mid-run, so frees of earlier allocations come first
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7f6000000000, tr, Clock(1737000000000000), frames=fx)
    train(a, fx, steps=3)
    cut = len(tr) * 2 // 3
    made["v22_ring_truncated.pickle"] = (snap_dict([a], "2.1", [tr[cut:]]), 4)

    # 9. the bare list that torch.cuda.memory_snapshot() returns in 2.x (blocks with address)
    fx = Frames()
    a = Allocator(0, 16 * GB, 0x7f7000000000, [], None, frames=fx)
    train(a, fx, steps=2)
    made["v22_bare_list.pickle"] = (a.segment_dicts("2.5"), 4)

    # 10. no frames (context=None): every frames list empty; 2.1 layout
    fx = Frames(style="none")
    tr = []
    a = Allocator(0, 16 * GB, 0x7f8000000000, tr, Clock(1738000000000000), frames=fx)
    train(a, fx, steps=2)
    made["v22_no_frames.pickle"] = (snap_dict([a], "2.1", [tr]), 4)

    # 11. a trace of zero events with segments (history enabled with context only)
    fx = Frames()
    a = Allocator(0, 16 * GB, 0x7f9000000000, [], None, frames=fx)
    train(a, fx, steps=1)
    made["v22_zero_events.pickle"] = (snap_dict([a], "2.1", [[]]), 4)

    # 12. recorded nothing: no segments, no events (an error: history was not enabled)
    made["recorded_nothing.pickle"] = ({"segments": [], "device_traces": [[]]}, 4)

    # 13. pending free on a side stream: a block in active_pending_free at the end
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7fa000000000, tr, Clock(1739000000000000), frames=fx)
    train(a, fx, steps=1)
    p = m(a, 3 * MB, fx, "input")
    a.free(p, pending=True)
    made["v22_pending_free.pickle"] = (snap_dict([a], "2.1", [tr]), 4)

    # 14. the newest layout's extras, all to be skipped or counted only: device 5 of 8 (the
    #     others empty), a private pool (segment_pool_id (1, 3), events' pool_id), `annotate`
    #     events (_annotate_memory: user_metadata on a live allocation), frames with FX fields
    #     (augment_with_fx_traces), external_annotations START/END, host_segments/host_traces
    #     (record_pinned_host_memory); protocol 5
    fx = Frames()
    tr = []
    a = Allocator(5, 16 * GB, 0x7fb000000000, tr, Clock(1740000000000000), frames=fx)
    a.meta = ""
    train(a, fx, steps=2)
    for e in tr:
        e["pool_id"] = (1, 3)
    for i in (5, 40):
        e = tr[i]
        tr.insert(i + 1, {"action": "annotate", "addr": e["addr"], "size": e["size"], "stream": 0,
                          "time_us": e["time_us"], "frames": e.get("frames", []),
                          "user_metadata": "saved for backward"})
    fl = site(fx, "act", 0)
    fl[0]["fx_node_op"] = "call_function"
    fl[0]["fx_node_name"] = "linear"
    fl[0]["fx_original_trace"] = "File model.py, line 30, in forward\n    return self.fc(x)"
    d = snap_dict([a], "2.5", [[], [], [], [], [], tr, [], []], pool_id=(1, 3))
    t0 = tr[0]["time_us"]
    d["external_annotations"] = [
        {"stage": "START", "name": "## step 1 ##", "device": 5, "time_us": t0},
        {"stage": "END", "name": "## step 1 ##", "device": 5, "time_us": t0 + 5000}]
    d["host_segments"] = []
    d["host_traces"] = [[]]
    made["v29_newest_extras.pickle"] = (d, 5)

    # 16. module paths as record_function ranges: modelprof.memory.record(model=...) on a
    #     PyTorch with external_annotations but no _set_memory_metadata opens "nn.Module: PATH"
    #     ranges in forward hooks; they land in `external_annotations` as START/END with time_us
    fx = Frames()
    tr = []
    clk = Clock(1742000000000000)
    a = Allocator(0, 16 * GB, 0x7fd000000000, tr, clk, frames=fx)
    anns = []
    stack = []

    def ann_ranges(path, backward=False):
        if backward:  # record()'s hooks open ranges in the forward only
            return
        while stack and not (path == stack[-1] or path.startswith(stack[-1] + ".")):
            anns.append({"stage": "END", "name": "nn.Module: " + stack.pop(), "device": 0,
                         "time_us": clk.tick(1)})
        if path and (not stack or stack[-1] != path):
            stack.append(path)
            anns.append({"stage": "START", "name": "nn.Module: " + path, "device": 0,
                         "time_us": clk.tick(1)})
    train(a, fx, steps=2, batch=256, annotate=ann_ranges)
    ann_ranges("")
    d = snap_dict([a], "2.5", [tr])
    d["external_annotations"] = anns
    made["v25_module_annotations.pickle"] = (d, 4)

    # 15. memo sharing as a weapon: unknown keys (top level, in an event, in a block) holding a
    #     64-level DAG of lists (each level the previous one twice, through the memo): 2^64
    #     leaves to a reader that walks or copies what it skips; a few KB to one that does not
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7fc000000000, tr, Clock(1741000000000000), frames=fx)
    train(a, fx, steps=1)
    dag = [0]
    for _ in range(64):
        dag = [dag, dag]
    d = snap_dict([a], "2.5", [tr])
    d["zz_future_key"] = dag
    tr[3]["zz_future_key"] = dag
    d["segments"][0]["blocks"][0]["zz_future_key"] = dag
    made["v25_memo_dag.pickle"] = (d, 4)

    # 17. more than 4,096 allocations live at the peak (a model of many small parameter tensors)
    #     and a leak of 1 MiB a step: the leak finding names its site (it gave up past 4,096)
    fx = Frames()
    tr = []
    a = Allocator(0, 16 * GB, 0x7f6000000000, tr, Clock(1742000000000000), frames=fx)
    for i in range(4200):
        m(a, 1024, fx, "param")
    train(a, fx, steps=4, width=64, batch=8, leak=MB)
    made["v25_many_live_leak.pickle.gz"] = (snap_dict([a], "2.5", [tr]), 4)

    # 18. an OOM after the peak: a 10 GiB temporary (model.py:31) freed, a 6 GiB tensor made
    #     (model.py:32), then a 30 GiB request fails: the holders when it failed are the
    #     ones to name, not the freed temporary
    GiB = 1 << 30
    A = 0x7e4000000000

    def frm(line, fn):
        return [{"filename": "/home/u/proj/model.py", "line": line, "name": fn},
                {"filename": "/home/u/proj/train.py", "line": 41, "name": "main"}]
    segs = [{"device": 0, "address": A, "total_size": 52 * GiB, "allocated_size": 48 * GiB, "active_size": 48 * GiB,
             "requested_size": 48 * GiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
             "is_expandable": False, "frames": [],
             "blocks": [{"address": A, "size": 30 * GiB, "requested_size": 30 * GiB, "state": "active_allocated",
                         "frames": frm(20, "__init__")},
                        {"address": A + 30 * GiB, "size": 12 * GiB, "requested_size": 12 * GiB,
                         "state": "active_allocated", "frames": frm(30, "forward")},
                        {"address": A + 42 * GiB, "size": 6 * GiB, "requested_size": 6 * GiB,
                         "state": "active_allocated", "frames": frm(32, "forward")},
                        {"address": A + 48 * GiB, "size": 4 * GiB, "requested_size": 0, "state": "inactive",
                         "frames": []}]}]
    ev = [{"action": "segment_alloc", "addr": A, "size": 52 * GiB, "stream": 0, "time_us": 10, "frames": []},
          {"action": "alloc", "addr": A, "size": 30 * GiB, "stream": 0, "time_us": 11, "frames": frm(20, "__init__")},
          {"action": "alloc", "addr": A + 30 * GiB, "size": 12 * GiB, "stream": 0, "time_us": 12,
           "frames": frm(30, "forward")},
          {"action": "alloc", "addr": A + 42 * GiB, "size": 10 * GiB, "stream": 0, "time_us": 13,
           "frames": frm(31, "forward")},
          {"action": "free_requested", "addr": A + 42 * GiB, "size": 10 * GiB, "stream": 0, "time_us": 14,
           "frames": frm(31, "forward")},
          {"action": "free_completed", "addr": A + 42 * GiB, "size": 10 * GiB, "stream": 0, "time_us": 14,
           "frames": frm(31, "forward")},
          {"action": "alloc", "addr": A + 42 * GiB, "size": 6 * GiB, "stream": 0, "time_us": 15,
           "frames": frm(32, "forward")},
          {"action": "oom", "addr": 0, "size": 30 * GiB, "stream": 0, "time_us": 16, "device_free": GiB,
           "frames": frm(33, "forward")}]
    made["v25_oom_after_peak.pickle"] = ({"segments": segs, "device_traces": [ev]}, 4)

    # 19. inference: a forward with frames, then a frameless allocation (a C++ kernel's, stacks="python")
    #     and the user's post-processing: no backward, no optimizer step anywhere, so neither is
    #     a gradient or kept for a backward
    B = 0x7e8000000000

    def ufr(line, fn, f="/home/u/proj/model.py"):
        return [{"filename": f, "line": line, "name": fn},
                {"filename": "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", "line": 1501,
                 "name": "_call_impl"},
                {"filename": "/home/u/proj/infer.py", "line": 12, "name": "main"}]
    ev = [{"action": "segment_alloc", "addr": B, "size": 20 * MB, "stream": 0, "time_us": 1, "frames": []},
          {"action": "alloc", "addr": B, "size": 8 * MB, "stream": 0, "time_us": 2, "frames": ufr(30, "forward")},
          {"action": "alloc", "addr": B + 8 * MB, "size": 5 * MB, "stream": 0, "time_us": 3, "frames": []},
          {"action": "alloc", "addr": B + 13 * MB, "size": 1000, "stream": 0, "time_us": 4,
           "frames": [{"filename": "/home/u/proj/infer.py", "line": 14, "name": "main"}]}]
    segs = [{"device": 0, "address": B, "total_size": 20 * MB, "allocated_size": 13 * MB + 1024,
             "active_size": 13 * MB + 1024, "requested_size": 13 * MB + 1000, "stream": 0, "segment_type": "large",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
             "blocks": [{"address": B, "size": 8 * MB, "requested_size": 8 * MB, "state": "active_allocated",
                         "frames": ufr(30, "forward")},
                        {"address": B + 8 * MB, "size": 5 * MB, "requested_size": 5 * MB,
                         "state": "active_allocated", "frames": []},
                        {"address": B + 13 * MB, "size": 1024, "requested_size": 1000, "state": "active_allocated",
                         "frames": [{"filename": "/home/u/proj/infer.py", "line": 14, "name": "main"}]},
                        {"address": B + 13 * MB + 1024, "size": 7 * MB - 1024, "requested_size": 0,
                         "state": "inactive", "frames": []}]}]
    made["v25_inference_frameless.pickle"] = ({"segments": segs, "device_traces": [ev]}, 4)

    # 20. recorded on Windows: backslashed paths, torch under ...\site-packages\torch\, CPython's
    #     standard library under ...\Lib\: the same categories and first user frames as on Linux
    W = 0x7ec000000000
    tw = "C:\\Users\\u\\venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py"
    fr_p = [{"filename": tw, "line": 1160, "name": "convert"}, {"filename": tw, "line": 1174, "name": "to"},
            {"filename": "C:\\Users\\u\\proj\\train.py", "line": 41, "name": "main"}]
    fr_a = [{"filename": "C:\\Users\\u\\proj\\model.py", "line": 30, "name": "forward"},
            {"filename": tw, "line": 1501, "name": "_call_impl"},
            {"filename": "C:\\Python311\\Lib\\threading.py", "line": 975, "name": "run"}]
    ev = [{"action": "segment_alloc", "addr": W, "size": 4 * MB, "stream": 0, "time_us": 1, "frames": []},
          {"action": "alloc", "addr": W, "size": MB, "stream": 0, "time_us": 2, "frames": fr_p},
          {"action": "alloc", "addr": W + MB, "size": 2 * MB, "stream": 0, "time_us": 3, "frames": fr_a}]
    segs = [{"device": 0, "address": W, "total_size": 4 * MB, "allocated_size": 3 * MB, "active_size": 3 * MB,
             "requested_size": 3 * MB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
             "is_expandable": False, "frames": [],
             "blocks": [{"address": W, "size": MB, "requested_size": MB, "state": "active_allocated", "frames": fr_p},
                        {"address": W + MB, "size": 2 * MB, "requested_size": 2 * MB, "state": "active_allocated",
                         "frames": fr_a},
                        {"address": W + 3 * MB, "size": MB, "requested_size": 0, "state": "inactive", "frames": []}]}]
    made["v25_windows_paths.pickle"] = ({"segments": segs, "device_traces": [ev]}, 4)

    # 16. names holding markup (a frame's function and file named "</script>...<!--", commas,
    #     quotes, a newline): the HTML page's data blocks must still hold their JSON whole
    evil = '</script><script>alert("x")</script><!--'
    fr_e = [{"filename": "/tmp/a,\"b\"\n" + evil + ".py", "line": 7, "name": evil}]
    fr_q = [{"filename": "/home/u/ok,file.py", "line": 3, "name": "fn\twith,comma\"q"}]
    A = 0x7f4400000000
    segs = [{"device": 0, "address": A, "total_size": 2 * MB, "allocated_size": MB, "active_size": MB,
             "requested_size": MB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
             "is_expandable": False, "frames": fr_e,
             "blocks": [{"address": A, "size": MB, "requested_size": MB, "state": "active_allocated", "frames": fr_e},
                        {"address": A + MB, "size": MB, "requested_size": 0, "state": "inactive", "frames": []}]}]
    ev = [{"action": "segment_alloc", "addr": A, "size": 2 * MB, "stream": 0, "time_us": 1000, "frames": fr_e},
          {"action": "alloc", "addr": A, "size": MB, "stream": 0, "time_us": 1001, "frames": fr_e},
          {"action": "alloc", "addr": A + MB, "size": MB // 2, "stream": 0, "time_us": 1002, "frames": fr_q},
          {"action": "free_requested", "addr": A + MB, "size": MB // 2, "stream": 0, "time_us": 1003, "frames": fr_q},
          {"action": "free_completed", "addr": A + MB, "size": MB // 2, "stream": 0, "time_us": 1004, "frames": fr_q}]
    made["markup_names.pickle"] = ({"segments": segs, "device_traces": [ev]}, 2)

    os.makedirs(out, exist_ok=True)
    for name, (obj, proto) in made.items():
        dump(obj, os.path.join(out, name), proto)
        # no truth where the generator labels nothing (a snapshot written as a dict by hand)
        if name not in ("recorded_nothing.pickle", "v25_oom_after_peak.pickle", "v25_inference_frameless.pickle",
                        "v25_windows_paths.pickle"):
            base = name.split(".pickle")[0]
            with open(os.path.join(out, base + ".truth.json"), "w", encoding="utf-8") as f:
                json.dump(truth(obj), f, indent=1)
                f.write("\n")
    return sorted(made)


def truth(obj):
    """What the generator knows and a reader must infer: the bytes live at the reference peak by
    what the generator allocated them as (`sites_at_peak`) and by category (CATEGORY; all
    `unknown` when the file has no frames at all)."""
    devs, _ = snapshot_ref.replay(obj, lambda m: None)
    segs, traces = snapshot_ref.normalise(obj)
    has_frames = any(e.get("frames") for t in (traces or []) for e in t) or any(
        b.get("frames") or any(h.get("frames") for h in b.get("history", []))
        for sg in segs for b in sg["blocks"])
    out = []
    for d in devs:
        dev, pe = d["device"], d["peak_event"]
        trace = traces[dev] if traces is not None and dev < len(traces) else []
        blocks = []
        for sg in segs:
            if sg["device"] != dev:
                continue
            a = sg["address"]
            for b in sg["blocks"]:
                ba = b.get("address", a)
                if b["state"] in snapshot_ref.ACTIVE_STATES:
                    blocks.append((ba, snapshot_ref.block_requested(b, "block"), b))
                a = ba + b["size"]
        live, seen, unmatched = {}, set(), {}
        for i, e in enumerate(trace):
            if e["action"] == "alloc":
                live[e["addr"]] = (e["size"], e)
                seen.add(e["addr"])
            elif e["action"] == "free_completed":
                if e["addr"] in live:
                    del live[e["addr"]]
                elif e["addr"] not in seen:
                    seen.add(e["addr"])
                    unmatched[i] = (e["size"], e)
        if not trace:
            held = [(r, o) for a, r, o in blocks]
        else:
            held = [(r, o) for a, r, o in blocks if a not in live]
            held += [v for i, v in unmatched.items() if i > pe]
            at = {}
            for e in trace[:pe + 1]:
                if e["action"] == "alloc":
                    at[e["addr"]] = (e["size"], e)
                elif e["action"] == "free_completed":
                    at.pop(e["addr"], None)
            held += list(at.values())
        by_site, by_cat = {}, {}
        for size, o in held:
            name = ROLE[id(o)][1] if id(o) in ROLE else "unlabelled"
            cat = CATEGORY.get(name, "other") if has_frames else "unknown"
            by_site[name] = by_site.get(name, 0) + size
            by_cat[cat] = by_cat.get(cat, 0) + size
        assert sum(by_cat.values()) == d["peak_requested_bytes"], (dev, by_cat, d)
        out.append({"device": dev, "peak_requested_bytes": d["peak_requested_bytes"],
                    "peak_event": pe, "categories_at_peak": dict(sorted(by_cat.items())),
                    "sites_at_peak": dict(sorted(by_site.items()))})
    return {"note": "the generator's own labels of what is live at the reference peak (the "
                    "loss, 4 bytes, is counted as activation; the leak as other). Backward "
                    "allocations and frees carry no Python frames (autograd's thread), C++ "
                    "frames only with stacks='all', as in real snapshots", "devices": out}


def write_ref(path, ref_path):
    warns = []
    try:
        ref = snapshot_ref.reference(path, warn=warns.append)
    except snapshot_ref.BadSnapshot as e:
        ref = {"exit": 2, "error": str(e).replace(os.path.dirname(path) + "/", "")}
    with open(ref_path, "w", encoding="utf-8") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    return ref, warns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "snapshots"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared", "fixtures", "snapshots"))
    args = ap.parse_args()
    names = build(args.out)
    # copies of the two smallest shared snapshots if they are small together
    if os.path.isdir(args.shared):
        shared = sorted((os.path.getsize(os.path.join(args.shared, f)), f)
                        for f in os.listdir(args.shared) if f.endswith(".pickle"))
        small = shared[:2]
        if sum(s for s, f in small) < 700 * KB:
            for s, f in small:
                shutil.copyfile(os.path.join(args.shared, f), os.path.join(args.out, f))
                names.append(f)
        for s, f in shared:
            if f not in names:  # refs only
                write_ref(os.path.join(args.shared, f),
                          os.path.join(args.out, f[:-len(".pickle")] + ".ref.json"))
    for n in names:
        base = n[:-len(".gz")] if n.endswith(".gz") else n
        base = base[:-len(".pickle")]
        ref, warns = write_ref(os.path.join(args.out, n), os.path.join(args.out, base + ".ref.json"))
        if "error" in ref:
            print("%-48s exit 2: %s" % (n, ref["error"][:70]))
        else:
            for d in ref["devices"]:
                print("%-48s dev %d peak %d @%d reserved %d end %d/%d/%d %s" % (
                    n, d["device"], d["peak_requested_bytes"], d["peak_event"],
                    d["peak_reserved_bytes"], d["end_requested_bytes"], d["end_allocated_bytes"],
                    d["end_reserved_bytes"], dict(d["events"])))
        for w in warns:
            print("   warning: %s" % w)


if __name__ == "__main__":
    main()
